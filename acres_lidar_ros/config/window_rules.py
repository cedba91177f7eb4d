"""The windows, limits and mechanical noise of a sensors file (the attribute list), validated together.

The keys are declared in ``schema.LIDAR_PARAMS`` (each checked there on its own); the rules that
join several keys are checked here, and each refusal names the keys, the values and the rule:

* ``ranges_min_m`` and ``ranges_max_m`` are given together or not at all (``[]`` and ``null``
  both mean "not given"); given, each holds ``range_count`` entries, a ``range_count`` of 0
  counted as 1, and every region has ``ranges_min_m[i] < ranges_max_m[i]``.
* ``range_offset_m`` is below ``range_m`` (the trace must have some length).
* The valid azimuth window is a rotary sensor's: a solid-state sensor keeps 0 .. 360.

docs/sensors.md ("Windows and limits", "Mechanical noise") says what each key does and how the attribute
list's attributes map onto them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from acres_lidar_ros.errors import ConfigError

if TYPE_CHECKING:
    from acres_lidar_ros.config.sensors import SensorConfig

FULL_TURN_DEG = 360.0


@dataclass(frozen=True)
class WindowConfig:
    """Validity windows of the returns and where the trace starts.

    Attributes
    ----------
    range_count : int
        ``range_count`` as given (0 counts as 1 region).
    ranges_min_m, ranges_max_m : (k,) float64 or None
        The range regions, None when not given (then the band ``min_range_m .. range_m`` is every
        emitter's window).
    valid_start_azimuth_rad, valid_end_azimuth_rad : float
        The valid azimuth window on the firing angle, clockwise from forward, rad.
    range_offset_m : float
        Where the trace starts along each ray, m (ranges stay measured from the emitter).
    separation_near_limit : bool
        ``min_return_separation_m`` is a second near limit.
    """

    range_count: int = 0
    ranges_min_m: np.ndarray | None = None
    ranges_max_m: np.ndarray | None = None
    valid_start_azimuth_rad: float = 0.0
    valid_end_azimuth_rad: float = 2.0 * math.pi
    range_offset_m: float = 0.0
    separation_near_limit: bool = False

    @property
    def regions(self) -> int:
        """How many range ids are valid: ``max(range_count, 1)``."""
        return max(self.range_count, 1)

    @property
    def has_regions(self) -> bool:
        return self.ranges_min_m is not None

    @property
    def azimuth_window_rad(self) -> float:
        """Width of the valid azimuth window, rad, in [0, 2 pi]: ``end - start``, plus a turn when
        the start is above the end (it wraps through 360 deg)."""
        width = self.valid_end_azimuth_rad - self.valid_start_azimuth_rad
        return width + 2.0 * math.pi if width < 0.0 else width

    @property
    def full_azimuth(self) -> bool:
        return self.azimuth_window_rad >= 2.0 * math.pi


@dataclass(frozen=True)
class MechanicalNoiseConfig:
    """Errors of each firing's direction and origin: mean and standard deviation (the attribute list).

    Attributes
    ----------
    azimuth_mean_rad, azimuth_std_rad : float
        Azimuth error, counter-clockwise about the sensor's z axis.
    elevation_mean_rad, elevation_std_rad : float
        Elevation error, up.
    origin_mean_m, origin_std_m : (3,) float64
        Origin error, x y z in the sensor frame.
    """

    azimuth_mean_rad: float = 0.0
    azimuth_std_rad: float = 0.0
    elevation_mean_rad: float = 0.0
    elevation_std_rad: float = 0.0
    origin_mean_m: np.ndarray = field(default_factory=lambda: np.zeros(3))
    origin_std_m: np.ndarray = field(default_factory=lambda: np.zeros(3))

    @property
    def active(self) -> bool:
        """Whether any mean or standard deviation is not 0 (otherwise the rays are not touched)."""
        return bool(
            self.azimuth_mean_rad
            or self.azimuth_std_rad
            or self.elevation_mean_rad
            or self.elevation_std_rad
            or np.any(self.origin_mean_m)
            or np.any(self.origin_std_m)
        )

    @property
    def key(self) -> tuple[float, ...]:
        """The numbers that decide the errors (empty without noise), for comparing configs."""
        if not self.active:
            return ()
        numbers = (self.azimuth_mean_rad, self.azimuth_std_rad, self.elevation_mean_rad, self.elevation_std_rad)
        return numbers + tuple(self.origin_mean_m.tolist()) + tuple(self.origin_std_m.tolist())


def window_config(v: dict[str, Any]) -> WindowConfig:
    """The ``WindowConfig`` of the schema-checked values ``v`` of a lidar block (dotted keys)."""
    count = v["range_count"]
    lows, highs = (v[key] or None for key in ("ranges_min_m", "ranges_max_m"))  # [] is "not given"
    if (lows is None) != (highs is None):
        given, missing = ("ranges_min_m", "ranges_max_m") if lows is not None else ("ranges_max_m", "ranges_min_m")
        raise ConfigError(
            f"lidar.{given} is given but lidar.{missing} is not: the range regions need both, "
            f"with range_count entries each"
        )
    if lows is not None and highs is not None:
        regions = max(count, 1)
        for key, values in (("ranges_min_m", lows), ("ranges_max_m", highs)):
            if len(values) != regions:
                raise ConfigError(
                    f"lidar.{key} has {len(values)} values but lidar.range_count = {count}"
                    f"{' (0 counts as 1)' if count == 0 else ''}: expected {regions} value(s), one per range region"
                )
        for i, (lo, hi) in enumerate(zip(lows, highs)):
            if not lo < hi:
                raise ConfigError(
                    f"lidar.ranges_min_m[{i}] = {lo!r} is not below lidar.ranges_max_m[{i}] = {hi!r}: "
                    "expected min < max in each range region"
                )
    if v["range_offset_m"] >= v["range_m"]:
        raise ConfigError(
            f"lidar.range_offset_m = {v['range_offset_m']!r} is not below lidar.range_m = {v['range_m']!r}: "
            "the trace starts at the offset and ends at range_m"
        )
    start, end = v["valid_start_azimuth_deg"], v["valid_end_azimuth_deg"]
    if v.get("scan_type", "rotary") != "rotary" and (start, end) != (0.0, FULL_TURN_DEG):
        raise ConfigError(
            f"lidar.valid_start_azimuth_deg = {start!r} and lidar.valid_end_azimuth_deg = {end!r}: the valid "
            "azimuth window is a rotary sensor's; a solid-state sensor takes its field of view from its emitters "
            "(keep 0 and 360)"
        )
    return WindowConfig(
        range_count=count,
        ranges_min_m=None if lows is None else np.asarray(lows, dtype=np.float64),
        ranges_max_m=None if highs is None else np.asarray(highs, dtype=np.float64),
        valid_start_azimuth_rad=math.radians(start),
        valid_end_azimuth_rad=math.radians(end),
        range_offset_m=v["range_offset_m"],
        separation_near_limit=v["separation_near_limit"],
    )


def mechanical_noise_config(v: dict[str, Any]) -> MechanicalNoiseConfig:
    """The ``MechanicalNoiseConfig`` of the schema-checked values ``v`` (``mechanical_noise.*``)."""
    key = "mechanical_noise."
    return MechanicalNoiseConfig(
        azimuth_mean_rad=math.radians(v[key + "azimuth_error_mean_deg"]),
        azimuth_std_rad=math.radians(v[key + "azimuth_error_std_deg"]),
        elevation_mean_rad=math.radians(v[key + "elevation_error_mean_deg"]),
        elevation_std_rad=math.radians(v[key + "elevation_error_std_deg"]),
        origin_mean_m=np.asarray(v[key + "origin_error_mean_m"], dtype=np.float64),
        origin_std_m=np.asarray(v[key + "origin_error_std_m"], dtype=np.float64),
    )


def trace_key(config: SensorConfig, foliage: bool, seed: int) -> tuple:
    """What a scan's traced rays and hits depend on besides the poses (the trace's limits, the
    range offset, the mechanical noise and its seed, the foliage switch) for a ``SensorConfig``:
    a sweep traces a block traced under another key again (a runtime change between the block
    and the finish)."""
    noise = config.mechanical_noise
    return (
        config.range_m,
        config.max_hits_per_sub_ray,
        config.continue_step_m,
        config.pond_threshold_m,
        config.windows.range_offset_m,
        bool(foliage),
        noise.key,
        int(seed) if noise.active else None,
    )
