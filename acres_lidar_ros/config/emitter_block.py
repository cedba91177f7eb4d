"""The ``emitters`` block of a sensors file: a firing pattern of ticks x emitters (the attribute list).

Declared once here (every key's type, unit, default, range and description) and validated into
an ``EmittersConfig`` in SI units and radians. ``sensor/emitters.py`` builds the pattern from it.

A rotary sensor applies the pattern at ticks ``rot_pattern_firing_res_deg`` apart; a solid-state
sensor applies it once per scan. Each state holds ``N_e`` emitters; the states are cycled in order,
one every ``state_resolution_step`` ticks (rotary) or scans (solid state). Every rule of the attribute list's
"Parameter validation" list is checked here, and each refusal names the key, the state and emitter
index, the value and the rule.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from acres_lidar_ros.config.param import Param, short_repr
from acres_lidar_ros.errors import ConfigError

ROTARY, SOLID_STATE = "rotary", "solid_state"
SCAN_TYPES: tuple[str, ...] = (ROTARY, SOLID_STATE)
NO_ROI_DEG = 400.0
"""``min_azimuth_roi_deg`` / ``max_azimuth_roi_deg`` of 400: no region of interest (the attribute list)."""
MIN_SCAN_RATE_HZ = 0.466
"""The attribute list's minimum positive scan rate: a solid-state scan's fire times must fit in 2**31 ns."""
MIN_PEAK_POWER_OVERRIDE_W = 1e-5
"""An emitter's ``peak_power_w`` above this overrides the sensor's; any other entry falls back."""
CHANNEL_ID_MAX = 2**32 - 1
MAX_EMITTERS = 1 << 16
"""Most emitters of one state: a flash unit's pixels are all in one solid-state tick (the shipped
FT120 has 19,200); ``MAX_CELLS`` bounds what a scan allocates."""
MAX_STATES = 64
MAX_CELLS = 1 << 20
"""Most cells (ticks x emitters) of one scan: the bound on what a sensors file may allocate."""


def _p(name: str, kind: str, default: Any, unit: str = "", **kw: Any) -> Param:
    return Param(name=name, kind=kind, default=default, unit=unit, **kw)


# Scalar keys of lidar.emitters.
BLOCK_PARAMS: tuple[Param, ...] = (
    _p(
        "rot_pattern_firing_res_deg",
        "float",
        0.1,
        "deg",
        low=0,
        high=360,
        low_open=True,
        description="Rotary: the tick step; a rotation holds the ticks at k x step below 360 deg.",
    ),
    _p(
        "number_of_emitters",
        "int",
        None,
        low=1,
        high=MAX_EMITTERS,
        nullable=True,
        description="N_e, emitters per state (null: the length of states[0].azimuth_deg).",
    ),
    _p(
        "number_of_channels",
        "int",
        None,
        low=1,
        high=CHANNEL_ID_MAX,
        nullable=True,
        description="Detectors; the states together use at most this many distinct channel ids (null: N_e).",
    ),
    _p(
        "state_resolution_step",
        "int",
        1,
        low=1,
        high=1_000_000,
        description="Consecutive rotary ticks, or solid-state scans, that reuse one state.",
    ),
    _p("num_lines", "int", 0, low=0, high=MAX_EMITTERS, description="Lines of a solid-state pattern."),
    _p(
        "min_azimuth_roi_deg",
        "float",
        NO_ROI_DEG,
        "deg",
        low=0,
        high=NO_ROI_DEG,
        description="Start of the ROI interval on the tick azimuth (400: none).",
    ),
    _p(
        "max_azimuth_roi_deg",
        "float",
        NO_ROI_DEG,
        "deg",
        low=0,
        high=NO_ROI_DEG,
        description="End of the ROI interval (400: none; start > end wraps through 360).",
    ),
)
BLOCK_PARAM: dict[str, Param] = {p.name: p for p in BLOCK_PARAMS}
LIST_KEYS: tuple[str, ...] = ("num_rays_per_line", "states")

# Per-emitter arrays of one state: name -> element Param (required arrays have N_e entries, the
# optional ones N_e or none).
STATE_ARRAYS: tuple[tuple[Param, bool], ...] = (
    (_p("azimuth_deg", "float", None, "deg", low=-180, high=180, description="Azimuth from the tick (ccw)."), True),
    (_p("elevation_deg", "float", None, "deg", low=-90, high=90, description="Absolute elevation."), True),
    (
        _p("fire_time_ns", "int", None, "ns", low=0, high=CHANNEL_ID_MAX, description="Delay from the tick's start."),
        True,
    ),
    (_p("channel_id", "int", None, low=0, high=CHANNEL_ID_MAX, description="Vendor channel id, reported as is."), True),
    (_p("bank", "int", None, low=0, high=MAX_EMITTERS, description="Line of the emitter (below num_lines)."), False),
    (_p("range_id", "int", None, low=0, high=1 << 16, description="Range region (below range_count)."), False),
    (_p("vert_offset_m", "float", None, "m", low=-1, high=1, description="Origin offset along sensor z."), False),
    (
        _p("hor_offset_m", "float", None, "m", low=-1, high=1, description="Origin offset along the tick azimuth."),
        False,
    ),
    (
        _p("distance_correction_m", "float", None, "m", low=-10, high=10, description="Subtracted from ranges."),
        False,
    ),
    (_p("peak_power_w", "float", None, "W", low=0, high=1e6, description="Peak power (> 1e-5 W overrides)."), False),
    (_p("roi", "bool", None, description="Fired by an ROI state inside the ROI interval."), False),
)
STATE_ARRAY: dict[str, Param] = {p.name: p for p, _ in STATE_ARRAYS}
REQUIRED_ARRAYS: tuple[str, ...] = tuple(p.name for p, required in STATE_ARRAYS if required)
STATE_SCALARS: dict[str, Param] = {
    "is_roi_state": _p("is_roi_state", "bool", False, description="Fires its roi emitters only inside the ROI.")
}


@dataclass(frozen=True)
class EmitterState:
    """One state's per-emitter arrays, (N_e,) each, in SI units and radians.

    ``bank``, ``range_id`` are int64 (0 where not given); ``peak_power_w`` is the resolved power
    of each emitter (the sensor's where the file gives none, or one at or below 1e-5 W); ``fires``
    is the ``roi`` flag of an ROI state (all True for the others).
    """

    azimuth_rad: np.ndarray
    elevation_rad: np.ndarray
    fire_time_s: np.ndarray
    fire_time_ns: np.ndarray
    channel_id: np.ndarray
    bank: np.ndarray
    range_id: np.ndarray
    vert_offset_m: np.ndarray
    hor_offset_m: np.ndarray
    distance_correction_m: np.ndarray
    peak_power_w: np.ndarray
    roi: np.ndarray
    is_roi_state: bool


@dataclass(frozen=True)
class EmittersConfig:
    """The validated emitters block.

    Attributes
    ----------
    scan_type : "rotary" or "solid_state"
    firing_res_rad : rotary tick step (rad); solid state: 2 pi (one tick)
    ticks : ticks of one scan: ``ceil(360 / rot_pattern_firing_res_deg)`` (rotary), 1 (solid state)
    tick_period_s : the time between two ticks (rotary), one scan period (solid state)
    emitters : N_e
    states : the states, in the order they are cycled
    """

    scan_type: str
    firing_res_deg: float
    ticks: int
    tick_period_s: float
    emitters: int
    number_of_channels: int
    state_resolution_step: int
    num_lines: int
    num_rays_per_line: tuple[int, ...]
    min_azimuth_roi_deg: float
    max_azimuth_roi_deg: float
    states: tuple[EmitterState, ...]

    @property
    def firing_res_rad(self) -> float:
        return math.radians(self.firing_res_deg)

    @property
    def has_roi(self) -> bool:
        return self.min_azimuth_roi_deg != NO_ROI_DEG and self.max_azimuth_roi_deg != NO_ROI_DEG


def rotary_tick_count(firing_res_deg: float) -> int:
    """Ticks of one rotation: the ``k >= 0`` with ``k res < 360`` deg, i.e. ``ceil(360 / res)``.

    ``res`` is read as the decimal the file writes (``Fraction(repr(res))``), so 0.3 gives 1200
    ticks and 0.7 gives 515 (the last one 0.5 deg short of the next rotation's tick 0).
    """
    q = Fraction(360) / Fraction(repr(float(firing_res_deg)))
    return -((-q.numerator) // q.denominator)


def parse_emitters(
    block: Any,
    scan_type: str,
    hz: float,
    peak_power_w: float,
    range_count: int = 0,
    where: str = "lidar.emitters",
) -> EmittersConfig:
    """Validate the emitters block (the attribute list's "Parameter validation") into an ``EmittersConfig``.

    ``range_count`` is the sensor's number of range regions (0 counts as 1): every ``range_id``
    must be below it.
    """
    if not isinstance(block, dict):
        raise ConfigError(f"{where} = {short_repr(block)}: expected an object with a states list")
    allowed = [p.name for p in BLOCK_PARAMS] + list(LIST_KEYS)
    for key in block:
        if key not in allowed:
            raise ConfigError(f"{where}.{key}: unknown key; allowed: {', '.join(sorted(allowed))}")
    v = {p.name: p.validate(block[p.name], f"{where}.{p.name}") if p.name in block else p.default for p in BLOCK_PARAMS}
    states_raw = block.get("states")
    if not isinstance(states_raw, list) or not 1 <= len(states_raw) <= MAX_STATES:
        raise ConfigError(
            f"{where}.states = {short_repr(states_raw)}: expected a list of 1 to {MAX_STATES} state objects"
        )
    first = states_raw[0].get("azimuth_deg") if isinstance(states_raw[0], dict) else None
    n_e = v["number_of_emitters"]
    if n_e is None:
        if not isinstance(first, list) or not 1 <= len(first) <= MAX_EMITTERS:
            raise ConfigError(
                f"{where}.states[0].azimuth_deg = {short_repr(first)}: expected a list of 1 to {MAX_EMITTERS} "
                "numbers (its length is number_of_emitters)"
            )
        n_e = len(first)
        n_e_from = " (the length of states[0].azimuth_deg)"
    else:
        n_e_from = ""
    if scan_type == ROTARY:
        ticks = rotary_tick_count(v["rot_pattern_firing_res_deg"])
        tick_period_s = v["rot_pattern_firing_res_deg"] / 360.0 / hz
        limit = "one tick (rot_pattern_firing_res_deg / 360 / hz)"
    else:
        ticks, tick_period_s, limit = 1, 1.0 / hz, "one scan (1 / hz) on a solid-state sensor"
    if ticks * n_e > MAX_CELLS:
        raise ConfigError(
            f"{where}: {ticks} ticks x {n_e} emitters = {ticks * n_e} cells per scan: expected at most {MAX_CELLS} "
            "(raise rot_pattern_firing_res_deg or use fewer emitters)"
        )
    limit_ns = tick_period_s * 1e9
    states = tuple(
        _state(raw, f"{where}.states[{s}]", n_e, n_e_from, limit_ns, limit, peak_power_w)
        for s, raw in enumerate(states_raw)
    )
    channels = _checked_channels(v["number_of_channels"], states, n_e, scan_type, range_count, where)
    lines = _check_lines(block, states_raw, states, v["num_lines"], n_e, scan_type, where)
    _check_roi(v, where)
    return EmittersConfig(
        scan_type=scan_type,
        firing_res_deg=v["rot_pattern_firing_res_deg"] if scan_type == ROTARY else 360.0,
        ticks=ticks,
        tick_period_s=tick_period_s,
        emitters=n_e,
        number_of_channels=channels,
        state_resolution_step=v["state_resolution_step"],
        num_lines=v["num_lines"],
        num_rays_per_line=lines,
        min_azimuth_roi_deg=v["min_azimuth_roi_deg"],
        max_azimuth_roi_deg=v["max_azimuth_roi_deg"],
        states=states,
    )


def _checked_channels(
    number_of_channels: int | None,
    states: tuple[EmitterState, ...],
    n_e: int,
    scan_type: str,
    range_count: int,
    where: str,
) -> int:
    """The sensor's detectors (``number_of_channels``, or one per emitter), checked against the states'
    channel ids and range ids."""
    channels = number_of_channels if number_of_channels is not None else n_e
    distinct = np.unique(np.concatenate([s.channel_id for s in states]))
    if distinct.size > channels:
        raise ConfigError(
            f"{where}.states use {distinct.size} distinct channel_id values: expected at most number_of_channels = "
            f"{channels} (the attribute list: the states together use no more distinct channel ids than detectors)"
        )
    if scan_type == SOLID_STATE and channels < n_e:
        raise ConfigError(
            f"{where}.number_of_channels = {channels} is below number_of_emitters = {n_e}: a solid-state sensor "
            "needs at least one detector per emitter"
        )
    regions = max(range_count, 1)
    for s, state in enumerate(states):
        bad = np.flatnonzero(state.range_id >= regions)
        if bad.size:
            e = int(bad[0])
            raise ConfigError(
                f"{where}.states[{s}].range_id[{e}] = {int(state.range_id[e])} is out of range: expected below "
                f"range_count = {range_count} ({regions} region{'s' if regions > 1 else ''}; a range_count of 0 "
                "counts as 1)"
            )
    return channels


def _array(raw: dict, name: str, where: str, n_e: int, n_e_from: str, required: bool) -> list | None:
    value = raw.get(name)
    key = f"{where}.{name}"
    if value is None or (value == [] and not required):
        if required:
            raise ConfigError(f"{key} is missing: expected a list of number_of_emitters = {n_e} entries")
        return None
    if not isinstance(value, list):
        raise ConfigError(f"{key} = {short_repr(value)}: expected a list of {n_e} entries")
    if len(value) != n_e:
        optional = "" if required else " or none"
        raise ConfigError(
            f"{key} has {len(value)} entries: expected number_of_emitters = {n_e}{optional}{n_e_from} "
            "(the attribute list: every non-empty per-emitter array holds number_of_emitters elements)"
        )
    param = STATE_ARRAY[name]
    return [param.validate(x, f"{key}[{i}]") for i, x in enumerate(value)]


def _state(
    raw: Any, where: str, n_e: int, n_e_from: str, limit_ns: float, limit: str, peak_power_w: float
) -> EmitterState:
    if not isinstance(raw, dict):
        raise ConfigError(f"{where} = {short_repr(raw)}: expected an object of per-emitter arrays")
    allowed = list(STATE_ARRAY) + list(STATE_SCALARS)
    for key in raw:
        if key not in allowed:
            raise ConfigError(f"{where}.{key}: unknown key; allowed: {', '.join(sorted(allowed))}")
    arrays = {p.name: _array(raw, p.name, where, n_e, n_e_from, required) for p, required in STATE_ARRAYS}
    is_roi = STATE_SCALARS["is_roi_state"].validate(raw.get("is_roi_state", False), f"{where}.is_roi_state")
    fire_ns = np.asarray(arrays["fire_time_ns"], dtype=np.int64)
    drop = np.flatnonzero(np.diff(fire_ns) < 0)
    if drop.size:
        e = int(drop[0]) + 1
        raise ConfigError(
            f"{where}.fire_time_ns[{e}] = {int(fire_ns[e])} is below fire_time_ns[{e - 1}] = {int(fire_ns[e - 1])}: "
            "expected fire times that never decrease within a state (the attribute list: fire-time order)"
        )
    if fire_ns[-1] > limit_ns:
        raise ConfigError(
            f"{where}.fire_time_ns[{n_e - 1}] = {int(fire_ns[-1])} is longer than {limit} = {limit_ns:.6g} ns: "
            "expected the last fire time to fit inside one firing period (the attribute list: fire-time limit)"
        )

    def floats(name: str, default: float = 0.0) -> np.ndarray:
        value = arrays[name]
        return np.full(n_e, default) if value is None else np.asarray(value, dtype=np.float64)

    def ints(name: str) -> np.ndarray:
        value = arrays[name]
        return np.zeros(n_e, np.int64) if value is None else np.asarray(value, dtype=np.int64)

    power = floats("peak_power_w", peak_power_w)
    power = np.where(power > MIN_PEAK_POWER_OVERRIDE_W, power, peak_power_w)
    roi = np.ones(n_e, bool) if arrays["roi"] is None else np.asarray(arrays["roi"], dtype=bool)
    return EmitterState(
        azimuth_rad=np.deg2rad(floats("azimuth_deg")),
        elevation_rad=np.deg2rad(floats("elevation_deg")),
        fire_time_s=fire_ns * 1e-9,
        fire_time_ns=fire_ns,
        channel_id=np.asarray(arrays["channel_id"], dtype=np.uint32),
        bank=ints("bank"),
        range_id=ints("range_id"),
        vert_offset_m=floats("vert_offset_m"),
        hor_offset_m=floats("hor_offset_m"),
        distance_correction_m=floats("distance_correction_m"),
        peak_power_w=power,
        roi=roi,
        is_roi_state=is_roi,
    )


def _check_lines(
    block: dict,
    states_raw: list,
    states: tuple[EmitterState, ...],
    num_lines: int,
    n_e: int,
    scan_type: str,
    where: str,
) -> tuple[int, ...]:
    """Banks below ``num_lines``; on a solid-state sensor ``num_rays_per_line`` has ``num_lines``
    entries that add up to N_e."""
    raw_lines = block.get("num_rays_per_line", [])
    if not isinstance(raw_lines, list):
        raise ConfigError(f"{where}.num_rays_per_line = {short_repr(raw_lines)}: expected a list of integers")
    element = Param("num_rays_per_line", "int", None, low=0, high=MAX_EMITTERS)
    lines = tuple(element.validate(x, f"{where}.num_rays_per_line[{i}]") for i, x in enumerate(raw_lines))
    for s, (raw, state) in enumerate(zip(states_raw, states, strict=True)):
        if raw.get("bank") in (None, []):
            continue
        bad = np.flatnonzero(state.bank >= num_lines)
        if bad.size:
            e = int(bad[0])
            raise ConfigError(
                f"{where}.states[{s}].bank[{e}] = {int(state.bank[e])} is out of range: expected below num_lines = "
                f"{num_lines} (the attribute list: every bank is below num_lines, so a bank needs num_lines)"
            )
    if scan_type == SOLID_STATE and (num_lines or lines):
        if len(lines) != num_lines:
            raise ConfigError(
                f"{where}.num_rays_per_line has {len(lines)} entries: expected num_lines = {num_lines} "
                "(the attribute list: one entry per line on a solid-state sensor)"
            )
        if sum(lines) != n_e:
            raise ConfigError(
                f"{where}.num_rays_per_line = {list(lines)} adds up to {sum(lines)}: expected number_of_emitters = "
                f"{n_e} (the attribute list: the lines hold every emitter)"
            )
    return lines


def _check_roi(v: dict, where: str) -> None:
    lo, hi = v["min_azimuth_roi_deg"], v["max_azimuth_roi_deg"]
    for key, value in (("min_azimuth_roi_deg", lo), ("max_azimuth_roi_deg", hi)):
        if NO_ROI_DEG > value > 360.0:
            raise ConfigError(
                f"{where}.{key} = {value!r} is out of range: expected 0 to 360 deg, or 400 (no region of interest)"
            )
    if (lo == NO_ROI_DEG) != (hi == NO_ROI_DEG):
        raise ConfigError(
            f"{where}.min_azimuth_roi_deg = {lo!r} and max_azimuth_roi_deg = {hi!r}: expected both 400 (no region "
            "of interest) or both 0 to 360 deg (the attribute list: author both limits to configure one)"
        )


UNREAD_WITH_EMITTERS = ("columns", "rings", "elevation_min_deg", "elevation_max_deg", "azimuth_order")
"""Rings x columns keys an emitters block leaves unread (a file extending sensors.json inherits them)."""
PATTERN_TABLE_KEYS = ("elevations_deg", "azimuth_offsets_deg")
"""Ring tables that say the pattern is rings x columns: refused together with an emitters block."""


def emitters_of_lidar(block: Any, v: dict[str, Any]) -> EmittersConfig | None:
    """The emitters block (``config.emitters``), or None: the rings x columns keys are the pattern.

    With the block, ``columns``, ``rings``, ``elevation_min_deg``, ``elevation_max_deg`` and
    ``azimuth_order`` are not read (a sensors file that extends ``sensors.json`` inherits them);
    a ring table or a lens centre would describe a second pattern and is refused.
    """
    if block is None:
        if v["scan_type"] == SOLID_STATE:
            raise ConfigError(
                "lidar.scan_type = 'solid_state' needs a lidar.emitters block: the rings x columns keys describe "
                "a spinning sensor"
            )
        return None
    for key in PATTERN_TABLE_KEYS:
        if v[key] is not None:
            raise ConfigError(
                f"lidar.{key} and lidar.emitters both give the firing pattern: expected one of them "
                f'(an overlay unsets an inherited table with "{key}": null)'
            )
    if v["lens_center_m"] != 0.0:
        raise ConfigError(
            f"lidar.lens_center_m = {v['lens_center_m']!r} with lidar.emitters: expected 0 (an emitter's origin "
            "is its hor_offset_m and vert_offset_m)"
        )
    range_count = v.get("range_count", 0)  # the range regions' key, where the schema declares it
    return parse_emitters(block, v["scan_type"], v["hz"], v["peak_power_w"], int(range_count or 0))


def effective_block(block: dict) -> dict:
    """The block as the effective config writes it (the file's keys, defaults filled in)."""
    out: dict[str, Any] = {p.name: block.get(p.name, p.default) for p in BLOCK_PARAMS}
    out["num_rays_per_line"] = list(block.get("num_rays_per_line", []))
    out["states"] = [dict(state) for state in block["states"]]
    return out
