"""The carrying vehicle in its own scans: the self-return table and its use (spec "Self Returns").

The trace ignores the vehicle that carries the sensor; a table puts its body back.

Table file
----------
Four planes of ``N_c x N_r`` little-endian float32 values, plane after plane, each plane in cell
order ``c N_r + r`` (the organised cloud's order): ``4 * N_c * N_r * 4`` bytes, no header.

=====  ==========  ===========================================================
plane  name        contents
=====  ==========  ===========================================================
0      p_self      probability of a return from the body, [0, 1]
1      range_m     range of that return from the lens centre, m (>= 0)
2      intensity   intensity byte of that return, [0, 255]
3      p_block     probability that the body stops the beam without a return
=====  ==========  ===========================================================

with ``p_self + p_block <= 1`` in every cell. The Polaris table is 921 600 bytes.

Use per scan
------------
For scan number ``k``, run seed ``s`` and cell ``i`` the hash (SplitMix64 finaliser ``mix``,
spec "Numbers from a Hash") gives

    h = mix(mix(mix(s xor 0x5e1f5e1f5e1f5e1f) xor k) xor i),    u = U(h)

and the spec's three-way rule:

* ``u < p_self``: one return from the body at ``max(0.2 m, range + sigma_0 z)`` with the table
  intensity, class vehicle (12), material vehicle (14), flags first | strongest | last;
* ``p_self <= u < p_self + p_block``: no return;
* else: the beam keeps what the scene gave it.

``z`` is a normal number of the same hash family, ``z = hash_normal(mix(h))`` (the PlaceNormal
construction ``sqrt(-2 ln U(g)) cos(2 pi U(mix(g)))`` with ``g = mix(h)``), so it is independent
of ``u`` and neither draws from nor shifts the PCG32 noise stream: a scan's scene noise is the
same with and without the table. ``sigma_0`` is ``lidar.std_m``; with the noise off ``z = 0``.

The mount it was made for
-------------------------
A table belongs to one body and one mount. ``acres-lidar self-table`` writes ``<table>.json``
beside it with a ``mount`` (``position_flu_m``, ``rpy_deg``, the URDF links) and the URDF's
``urdf_sha256``; ``sensor_self_table`` refuses a sensors file whose mount differs from it (an
overlay that moves the sensor but keeps the table would put a body in the scans that is not
where the beams meet it).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from dataclasses import fields as dataclass_fields
from functools import cached_property
from pathlib import Path
from typing import NamedTuple

import numba
import numpy as np

from acres_lidar_ros.config.input_files import read_regular_file
from acres_lidar_ros.config.material_table import CLASS_ID, MATERIAL_ID
from acres_lidar_ros.config.sensors import SensorConfig
from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.radiometry.cell_truth import BLOCKED_BY_BODY, RETURNED, CellTruth
from acres_lidar_ros.radiometry.noise import hash_normal, mix64, uniform_from_hash
from acres_lidar_ros.radiometry.returns import FLAG_FIRST, FLAG_LAST, FLAG_STRONGEST, Returns
from acres_lidar_ros.scene.instances import BODY_INSTANCE, NO_INSTANCE
from acres_lidar_ros.sensor.pattern import mount_rotation

PLANES = ("p_self", "range_m", "intensity", "p_block")
TABLE_DTYPE = np.dtype("<f4")
SELF_MIN_RANGE_M = 0.2
"""The spec: "The minimum range is 0.2 m" of a body return."""
SELF_HASH_DOMAIN = 0x5E1F5E1F5E1F5E1F
"""Xored into the seed so the self-return hashes differ from every other hash of the same seed."""
PROBABILITY_TOLERANCE = 1e-6
"""float32 rounding allowed in ``0 <= p <= 1`` and ``p_self + p_block <= 1``."""
MOUNT_POSITION_TOLERANCE_M = 1e-3
MOUNT_ANGLE_TOLERANCE_RAD = 1e-4
"""How far a sensors file's mount may be from its table's (and the URDF's from the sensors file's)."""
MAX_TABLE_JSON_BYTES = 1 << 20
SELF_CLASS_ID = CLASS_ID["vehicle"]
SELF_MATERIAL_ID = MATERIAL_ID["vehicle"]


@dataclass(frozen=True)
class SelfReturnTable:
    """A self-return table in memory.

    Attributes
    ----------
    columns, rings : int
        ``N_c`` and ``N_r`` of the sensor it belongs to.
    p_self, range_m, intensity, p_block : (N_c * N_r,) float64
        The four planes in cell order ``c N_r + r`` (widened from the file's float32).
    path : Path or None
        The file it came from.
    """

    columns: int
    rings: int
    p_self: np.ndarray
    range_m: np.ndarray
    intensity: np.ndarray
    p_block: np.ndarray
    path: Path | None = None

    @classmethod
    def empty(cls, columns: int, rings: int) -> SelfReturnTable:
        """The table of a sensor whose body adds nothing: no cell returns from it or is blocked."""
        zeros = np.zeros(columns * rings)
        return cls(columns, rings, zeros, zeros, zeros, zeros)

    @property
    def cells(self) -> int:
        return self.columns * self.rings

    @cached_property
    def intensity_byte(self) -> np.ndarray:
        """(N_c * N_r,) uint8: the intensity plane rounded to bytes."""
        return np.clip(np.rint(self.intensity), 0, 255).astype(np.uint8)

    @cached_property
    def body_reflectivity(self) -> np.ndarray:
        """(N_c * N_r,) float64: the reflectivity of the intensity byte (``reflectivity_of_intensity``)."""
        return reflectivity_of_intensity(self.intensity_byte)

    @cached_property
    def candidate_cells(self) -> np.ndarray:
        """(n,) int64: the cells the body can reach (``p_self + p_block > 0``); the others keep
        the scene's returns in every scan, so a scan hashes only these."""
        return np.flatnonzero(self.p_self + self.p_block > 0.0)

    @cached_property
    def candidate_thresholds(self) -> tuple[np.ndarray, np.ndarray]:
        """``p_self`` and ``p_self + p_block`` of the candidate cells: two (n,) float64."""
        cand = self.candidate_cells
        return self.p_self[cand], self.p_self[cand] + self.p_block[cand]

    def planes(self) -> np.ndarray:
        """(4, N_c * N_r) float32: the file's content."""
        return np.stack([self.p_self, self.range_m, self.intensity, self.p_block]).astype(TABLE_DTYPE)

    def to_bytes(self) -> bytes:
        return self.planes().tobytes()

    @classmethod
    def from_planes(
        cls, planes: np.ndarray, columns: int, rings: int, where: str = "self-return table", path: Path | None = None
    ) -> SelfReturnTable:
        """Validate (4, N_c * N_r) values (see ``check_planes``) and wrap them."""
        planes32 = np.asarray(planes).astype(TABLE_DTYPE)
        if planes32.shape != (4, columns * rings):
            raise ConfigError(f"{where}: planes of shape {planes32.shape}; expected (4, {columns * rings})")
        check_planes(planes32, columns, rings, where)
        p = planes32.astype(np.float64)
        return cls(columns, rings, p[0], p[1], p[2], p[3], path)


def expected_size_bytes(columns: int, rings: int) -> int:
    """``4 planes x N_c x N_r x 4 bytes``."""
    return len(PLANES) * columns * rings * TABLE_DTYPE.itemsize


def _cell_name(cell: int, rings: int) -> str:
    return f"cell {cell} (column {cell // rings}, ring {cell % rings})"


def check_planes(planes: np.ndarray, columns: int, rings: int, where: str) -> None:
    """Raise ``ConfigError`` naming ``where`` and the first bad cell.

    Refused: a NaN or infinite value in any plane; a probability outside [0, 1]; a negative
    range; an intensity outside [0, 255]; ``p_self + p_block > 1`` (each with the float32
    tolerance ``PROBABILITY_TOLERANCE``).
    """
    p_self, range_m, intensity, p_block = (planes[i].astype(np.float64) for i in range(4))
    tol = PROBABILITY_TOLERANCE

    def v(x: float) -> str:
        return f"{float(x):.9g}"

    checks = [
        (
            ~np.isfinite(planes).all(axis=0),
            lambda i: (
                ", ".join(
                    f"{name} = {v(planes[k, i])}" for k, name in enumerate(PLANES) if not np.isfinite(planes[k, i])
                )
                + ": expected finite numbers (no NaN)"
            ),
        ),
        ((p_self < -tol) | (p_self > 1 + tol), lambda i: f"p_self = {v(p_self[i])}: expected a probability in [0, 1]"),
        (
            (p_block < -tol) | (p_block > 1 + tol),
            lambda i: f"p_block = {v(p_block[i])}: expected a probability in [0, 1]",
        ),
        (
            p_self + p_block > 1 + tol,
            lambda i: (
                f"p_self + p_block = {v(p_self[i])} + {v(p_block[i])} = {v(p_self[i] + p_block[i])}: expected at most 1"
            ),
        ),
        (range_m < 0, lambda i: f"range = {v(range_m[i])} m: expected a range >= 0"),
        ((intensity < 0) | (intensity > 255), lambda i: f"intensity = {v(intensity[i])}: expected a byte in [0, 255]"),
    ]
    for bad, message in checks:
        if bad.any():
            i = int(np.argmax(bad))
            raise ConfigError(f"{where}: {_cell_name(i, rings)}: {message(i)} ({int(bad.sum())} bad cells)")


def load_self_table(path: str | Path, columns: int, rings: int) -> SelfReturnTable:
    """Read and validate a self-return table for a sensor of ``columns`` x ``rings``.

    Raises
    ------
    ConfigError
        The file cannot be read; its size is not ``4 * columns * rings * 4`` bytes (the message
        gives the expected and the found size); a value is NaN; a probability is outside
        [0, 1]; ``p_self + p_block > 1``; a range is negative or an intensity is not a byte
        (the message names the file and the first bad cell).
    """
    path = Path(path)
    expected = expected_size_bytes(columns, rings)
    try:  # only a regular file of exactly the expected size is read: no FIFO, no /dev/zero
        data = read_regular_file(path, "self-return table", expected, ConfigError, expected_bytes=expected)
    except ConfigError as exc:
        raise ConfigError(f"{exc} (4 planes x {columns} columns x {rings} rings x 4-byte float32)") from exc
    planes = np.frombuffer(data, dtype=TABLE_DTYPE).reshape(4, columns * rings)
    return SelfReturnTable.from_planes(planes, columns, rings, f"self-return table {str(path)!r}", path)


def sensor_self_table(config: SensorConfig) -> SelfReturnTable | None:
    """The self-return table the sensors file names (``lidar.self_returns``), loaded and checked
    for the sensor's columns and rings and against the mount its ``.json`` records
    (``check_table_mount``); None when it names none. Raises as ``load_self_table``."""
    if config.self_returns is None:
        return None
    table = load_self_table(config.self_returns, config.columns, config.rings)
    check_table_mount(config, Path(config.self_returns))
    return table


def mount_difference(
    position_a_m: np.ndarray, rpy_a_rad: np.ndarray, position_b_m: np.ndarray, rpy_b_rad: np.ndarray
) -> tuple[float, float]:
    """(distance m, rotation angle rad) between two mounts."""
    distance_m = float(np.linalg.norm(np.asarray(position_a_m, np.float64) - np.asarray(position_b_m, np.float64)))
    cos_angle = (np.trace(mount_rotation(rpy_a_rad).T @ mount_rotation(rpy_b_rad)) - 1.0) / 2.0
    return distance_m, math.acos(min(1.0, max(-1.0, float(cos_angle))))


def table_mount(table_path: Path) -> dict | None:
    """The ``mount`` that ``<table>.json`` records (None when there is no such file or key).

    Raises ``ConfigError`` when the file is not JSON or its mount is malformed."""
    json_path = table_path.with_suffix(".json")
    if not json_path.is_file():
        return None
    try:
        data = json.loads(read_regular_file(json_path, "self-return table statistics", MAX_TABLE_JSON_BYTES))
    except ValueError as exc:
        raise ConfigError(f"self-return table statistics {str(json_path)!r}: not JSON: {exc}") from exc
    mount = data.get("mount") if isinstance(data, dict) else None
    if mount is None:
        return None
    try:
        position = np.array(mount["position_flu_m"], dtype=np.float64).reshape(3)
        rpy = np.array(mount["rpy_deg"], dtype=np.float64).reshape(3)
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(
            f"self-return table statistics {str(json_path)!r}: mount = {mount!r}: expected position_flu_m and "
            "rpy_deg, 3 numbers each"
        ) from exc
    urdf = data.get("urdf") if isinstance(data.get("urdf"), str) else "URDF"
    return {**mount, "position_flu_m": position, "rpy_rad": np.deg2rad(rpy), "json": json_path, "urdf": urdf}


def check_table_mount(config: SensorConfig, table_path: Path) -> None:
    """``ConfigError`` when ``config``'s mount differs from the one the table at ``table_path`` was
    made for (its ``.json``'s ``mount``); the message says how to make a table for this mount or
    scan without one. A table without a recorded mount is not checked."""
    mount = table_mount(table_path)
    if mount is None:
        return
    distance_m, angle_rad = mount_difference(
        config.position_flu_m, config.rpy_rad, mount["position_flu_m"], mount["rpy_rad"]
    )
    if distance_m <= MOUNT_POSITION_TOLERANCE_M and angle_rad <= MOUNT_ANGLE_TOLERANCE_RAD:
        return
    source = config.source or "the sensors file"
    raise ConfigError(
        f"{source}: lidar.self_returns {str(table_path)!r} was made for the mount position_flu_m "
        f"{mount['position_flu_m'].tolist()}, rpy_deg {np.rad2deg(mount['rpy_rad']).round(4).tolist()} "
        f"({str(mount['json'])!r}), but the sensors file's mount is position_flu_m {config.position_flu_m.tolist()}, "
        f"rpy_deg {np.rad2deg(config.rpy_rad).round(4).tolist()} ({distance_m:.4f} m, {math.degrees(angle_rad):.4f} deg "
        f"away; allowed {MOUNT_POSITION_TOLERANCE_M} m, {math.degrees(MOUNT_ANGLE_TOLERANCE_RAD):.4f} deg): the body "
        "would be where it is not. Make a table for this mount (acres-lidar self-table --urdf "
        f"{mount['urdf']} --sensor {source} --out NEW.f32, or --mount-from-urdf) and name it in lidar.self_returns, "
        'or set "self_returns": null in the overlay to scan without the body'
    )


def self_return_hash(scan_index: int, seed: int, cells: int | np.ndarray) -> np.ndarray:
    """``h = mix(mix(mix(seed xor SELF_HASH_DOMAIN) xor scan) xor cell)``: (cells,) uint64 for
    every cell ``0 .. cells - 1``, or for the given (n,) array of cell numbers."""
    seed_key = mix64((int(seed) ^ SELF_HASH_DOMAIN) & ((1 << 64) - 1))
    scan_key = mix64(seed_key ^ (int(scan_index) & ((1 << 64) - 1)))
    if np.ndim(cells) == 0:
        cell = np.arange(int(cells), dtype=np.uint64)
    else:
        cell = np.asarray(cells).astype(np.uint64)
    return np.asarray(mix64(np.uint64(scan_key) ^ cell))


class SelfDecision(NamedTuple):
    """The body's part of one scan, decided before its returns exist (``decide_self_returns``).

    Attributes
    ----------
    body_cells, replaced_cells : (k,) int64
        Cells with a body return; cells with a body return or blocked.
    body_range_m : (n_cells,) float64
        Body range of the body cells (0 elsewhere).
    body, blocked : (n_cells,) bool
    """

    body_cells: np.ndarray
    replaced_cells: np.ndarray
    body_range_m: np.ndarray
    body: np.ndarray
    blocked: np.ndarray


def decide_self_returns(
    table: SelfReturnTable, scan_index: int, seed: int, std_m: float, noise_on: bool = True
) -> SelfDecision:
    """The spec's three-way rule for every cell of scan ``scan_index``: it depends only on the
    table, the scan number and the seed, so the node decides it while the sweep still runs."""
    n = table.cells
    # Only the cells the body can reach are hashed (the others keep the scene's returns).
    cand = table.candidate_cells
    h = self_return_hash(scan_index, seed, cand)
    body_k, replaced_k, body, blocked = _classify(uniform_from_hash(h), *table.candidate_thresholds, cand, n)
    body_cells = cand[body_k].astype(np.int64)
    replaced_cells = cand[replaced_k].astype(np.int64)
    # Only body cells need their normal; the others' would go unused.
    z = hash_normal(mix64(h[body_k])) if noise_on else np.zeros(body_cells.size)
    body_range_m = np.zeros(n)
    body_range_m[body_cells] = np.maximum(SELF_MIN_RANGE_M, table.range_m[body_cells] + float(std_m) * z)
    return SelfDecision(body_cells, replaced_cells, body_range_m, body, blocked)


def merge_self_returns(table: SelfReturnTable, returns: Returns, decision: SelfDecision, copy: bool = True) -> Returns:
    """The scan's returns with the decided body returns and blocked beams put in: new arrays,
    or (``copy=False``, for returns nothing else holds) ``returns``' own arrays changed."""
    if returns.range_m.shape[0] != table.cells:
        raise ConfigError(
            f"self-return table {str(table.path) if table.path else ''!r} has {table.cells} cells "
            f"({table.columns} x {table.rings}); the scan has {returns.range_m.shape[0]}"
        )
    out = Returns(*(getattr(returns, f.name).copy() for f in dataclass_fields(Returns))) if copy else returns
    _merge_body(out.arrays(), decision, table.body_reflectivity, table.intensity_byte)
    return out


def merge_self_truth(table: SelfReturnTable, truth: CellTruth, decision: SelfDecision, copy: bool = True) -> CellTruth:
    """The scan's cell truth (``radiometry.truth``) with the body's part put in: new arrays, or
    (``copy=False``, for a truth nothing else holds) ``truth``'s own arrays changed.

    A blocked cell gets the reason ``blocked_by_body`` and keeps what the scene gave it (the
    range, signal and labels of the surface the body hid). A body cell is ``returned`` from the
    body: its noise-free range ``max(0.2 m, table range)``, class and material vehicle, instance
    ``BODY_INSTANCE``, and NaN signal and incidence (the table has neither).
    """
    n = truth.reason.shape[0]
    if n != table.cells:
        raise ConfigError(
            f"self-return table {str(table.path) if table.path else ''!r} has {table.cells} cells; the truth has {n}"
        )
    arrays = {f.name: getattr(truth, f.name) for f in dataclass_fields(CellTruth)}
    out = replace(truth, **{k: a.copy() for k, a in arrays.items() if a is not None}) if copy else truth
    _merge_truth(
        out.arrays(),
        decision._replace(
            body_cells=np.asarray(decision.body_cells, dtype=np.int64),
            blocked=np.asarray(decision.blocked, dtype=np.bool_),
        ),
        table.range_m,
    )
    return out


@numba.njit(cache=True, nogil=True)
def _merge_truth(truth, decision, table_range_m):
    """``merge_self_truth``'s changes to ``truth`` (a ``CellTruthArrays``), in place: the blocked
    cells' reason, then the body cells' (of ``decision``, a ``SelfDecision``)."""
    for c in range(decision.blocked.shape[0]):
        if decision.blocked[c]:
            truth.reason[c] = BLOCKED_BY_BODY
    for c in decision.body_cells:
        truth.range_m[c] = max(SELF_MIN_RANGE_M, table_range_m[c])
        truth.incidence_rad[c] = np.nan
        truth.signal_counts[c] = np.nan
        truth.class_id[c] = SELF_CLASS_ID
        truth.material_id[c] = SELF_MATERIAL_ID
        truth.instance[c] = BODY_INSTANCE
        truth.reason[c] = RETURNED


class SelfReturnResult(NamedTuple):
    """What ``apply_self_returns`` gives back.

    Attributes
    ----------
    returns : Returns (n_cells, R)
        Body cells hold one return in slot 0; blocked cells hold none; other cells unchanged.
    points_sensor : (n_cells, R, 3) float64 or None
        The points with body points ``R d + o`` and NaN in emptied slots (None when no points
        were given).
    body : (n_cells,) bool
        Cells with a body return this scan.
    blocked : (n_cells,) bool
        Cells the body blocked this scan.
    """

    returns: Returns
    points_sensor: np.ndarray | None
    body: np.ndarray
    blocked: np.ndarray


def reflectivity_of_intensity(intensity: np.ndarray) -> np.ndarray:
    """Invert the intensity byte: ``I / 100`` up to 100, ``64^((I - 100) / 155)`` above (spec)."""
    i = np.asarray(intensity, dtype=np.float64)
    return np.where(i <= 100.0, i / 100.0, np.exp((i - 100.0) / 155.0 * np.log(64.0)))


def apply_self_returns(
    table: SelfReturnTable,
    returns: Returns,
    scan_index: int,
    seed: int,
    std_m: float,
    noise_on: bool = True,
    points_sensor: np.ndarray | None = None,
    directions_sensor: np.ndarray | None = None,
    lens_origins_sensor: np.ndarray | None = None,
) -> SelfReturnResult:
    """The spec's three-way rule for every cell of one scan (see the module docstring).

    Call it after the scene's returns are formed, on the organised per-cell returns.

    Parameters
    ----------
    table : SelfReturnTable of the sensor (``table.cells`` must equal ``n_cells``)
    returns : Returns of shape (n_cells, R), cell = column x rings + ring
    scan_index : int
        Scan number ``k`` in the run (from 0).
    seed : int
        The run's seed.
    std_m : float
        ``sigma_0`` (``lidar.std_m``), m.
    noise_on : bool
        False: body returns at the table range exactly (``z = 0``).
    points_sensor : (n_cells, R, 3) float64, optional
        The scene points; given with ``directions_sensor`` and ``lens_origins_sensor``, the
        result carries the points with the body applied.
    directions_sensor : (n_cells, 3) or (N_c, N_r, 3) float64, optional
        Unit beam directions ``d`` (``BeamPattern.directions_sensor``).
    lens_origins_sensor : (n_cells, 3) or (N_c, 3) float64, optional
        Lens centres ``o`` per cell or per column (``BeamPattern.lens_origins_sensor``).

    Returns
    -------
    SelfReturnResult(returns, points_sensor, body, blocked); the inputs are not changed. Body
    returns have reflectivity ``I / 100`` (the inverse of the intensity byte), signal 0 (the
    table has no signal plane), instance ``BODY_INSTANCE``.
    """
    n = returns.range_m.shape[0]
    decision = decide_self_returns(table, scan_index, seed, std_m, noise_on)
    new = merge_self_returns(table, returns, decision)  # refuses a table of another size
    body_cells, replaced_cells, body_range_m = decision.body_cells, decision.replaced_cells, decision.body_range_m
    body, blocked = decision.body, decision.blocked

    points_out = None
    if points_sensor is not None:
        if directions_sensor is None or lens_origins_sensor is None:
            raise ConfigError("apply_self_returns: points_sensor needs directions_sensor and lens_origins_sensor")
        d = np.asarray(directions_sensor, dtype=np.float64).reshape(-1, 3)
        o = np.asarray(lens_origins_sensor, dtype=np.float64).reshape(-1, 3)
        if len(o) * table.rings == n and len(o) != n:
            o = np.repeat(o, table.rings, axis=0)
        points_out = np.array(points_sensor, dtype=np.float64)
        points_out[replaced_cells] = np.nan
        points_out[body_cells, 0] = body_range_m[body_cells, None] * d[body_cells] + o[body_cells]
    return SelfReturnResult(new, points_out, body, blocked)


@numba.njit(cache=True, nogil=True)
def _merge_body(out, decision, body_reflectivity, body_intensity):
    """Empty the replaced cells of ``out`` (a ``ReturnArrays``, the nine ``Returns`` fields) and
    put one body return in slot 0 of the body cells (of ``decision``, a ``SelfDecision``), in
    place, in one compiled pass (nine numpy scatters cost ~1 ms)."""
    slots = out.range_m.shape[1]
    for i in decision.replaced_cells:
        for s in range(slots):
            out.range_m[i, s] = np.nan
            out.valid[i, s] = False
            out.reflectivity[i, s] = 0.0
            out.signal[i, s] = 0
            out.intensity[i, s] = 0
            out.class_id[i, s] = 0
            out.material_id[i, s] = 0
            out.instance[i, s] = NO_INSTANCE
            out.return_flags[i, s] = 0
    for i in decision.body_cells:
        out.range_m[i, 0] = decision.body_range_m[i]
        out.valid[i, 0] = True
        out.reflectivity[i, 0] = body_reflectivity[i]
        out.intensity[i, 0] = body_intensity[i]
        out.class_id[i, 0] = SELF_CLASS_ID
        out.material_id[i, 0] = SELF_MATERIAL_ID
        out.instance[i, 0] = BODY_INSTANCE
        out.return_flags[i, 0] = FLAG_FIRST | FLAG_STRONGEST | FLAG_LAST


@numba.njit(cache=True, nogil=True)
def _classify(u, p_self, p_self_or_block, cells, n):
    """The spec's three-way rule for the candidate cells, in one pass: indices (into ``cells``)
    of body cells and of replaced (body or blocked) cells, and (n,) body and blocked masks."""
    body_k = np.empty(u.size, np.int64)
    replaced_k = np.empty(u.size, np.int64)
    body = np.zeros(n, np.bool_)
    blocked = np.zeros(n, np.bool_)
    nb = 0
    nr = 0
    for k in range(u.size):
        if u[k] < p_self[k]:
            body_k[nb] = k
            nb += 1
            body[cells[k]] = True
        elif u[k] < p_self_or_block[k]:
            blocked[cells[k]] = True
        else:
            continue
        replaced_k[nr] = k
        nr += 1
    return body_k[:nb], replaced_k[:nr], body, blocked
