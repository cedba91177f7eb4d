"""The clouds of a scan in the layouts of ``outputs.point_types``, as each consumer's driver
publishes them, and the spec's all-returns point records.

``point_cloud(scan, point_type, stamp_ns)`` fills one ``PointProfile``'s dtype: the organised
rslidar_sdk layouts and the labelled one (``organised_cloud``), ouster_ros's rings-by-columns
grid, or the dense velodyne and nebula lists. ``all_returns`` gives the PLY records (with
``labels``, their instance too).
"""

from __future__ import annotations

from collections.abc import Callable

import numba
import numpy as np

from acres_lidar_ros.errors import ConfigError, OutputError
from acres_lidar_ros.outputs.point_types import (
    NEBULA,
    OUSTER,
    PLY_POINT,
    PLY_POINT_LABELS,
    POINT_TYPES,
    PROFILES,
    VELODYNE,
    XYZI,
    XYZIRT,
    XYZIRT_LABELS,
    PointProfile,
    header_stamp_ns,
    point_dtype,
    point_profile,
    stamps_sweep_start,
)
from acres_lidar_ros.radiometry.returns import FLAG_FIRST, FLAG_LAST, FLAG_SECOND_STRONGEST, FLAG_STRONGEST
from acres_lidar_ros.scan import Scan
from acres_lidar_ros.scene.instances import NO_INSTANCE

__all__ = [
    "NEBULA",
    "OUSTER",
    "PLY_POINT",
    "PLY_POINT_LABELS",
    "POINT_TYPES",
    "PROFILES",
    "VELODYNE",
    "XYZI",
    "XYZIRT",
    "XYZIRT_LABELS",
    "PointProfile",
    "all_returns",
    "default_stamp_ns",
    "header_stamp_ns",
    "organised_cloud",
    "point_cloud",
    "point_dtype",
    "point_profile",
    "stamps_sweep_start",
]

# nebula's ReturnType (nebula_common.hpp) of a point from its return_flags byte, by priority:
# an echo in several roles gets nebula's combined type, one that is first and last IDENTICAL.
NEBULA_RETURN_TYPE = {
    "UNKNOWN": 0,
    "LAST": 1,
    "FIRST": 2,
    "STRONGEST": 3,
    "IDENTICAL": 6,
    "SECONDSTRONGEST": 8,
    "FIRST_STRONGEST": 9,
    "LAST_STRONGEST": 10,
}
_RETURN_TYPE_RULES = (  # (flags that must all be set, nebula type), first match wins
    (FLAG_FIRST | FLAG_LAST, "IDENTICAL"),
    (FLAG_FIRST | FLAG_STRONGEST, "FIRST_STRONGEST"),
    (FLAG_LAST | FLAG_STRONGEST, "LAST_STRONGEST"),
    (FLAG_STRONGEST, "STRONGEST"),
    (FLAG_SECOND_STRONGEST, "SECONDSTRONGEST"),
    (FLAG_FIRST, "FIRST"),
    (FLAG_LAST, "LAST"),
)


def _return_type_table() -> np.ndarray:
    table = np.zeros(256, np.uint8)
    for flags in range(256):
        for need, name in _RETURN_TYPE_RULES:
            if flags & need == need:
                table[flags] = NEBULA_RETURN_TYPE[name]
                break
    return table


_RETURN_TYPE_OF_FLAGS = _return_type_table()

_UINT32_MAX = 2**32 - 1


def default_stamp_ns(scan: Scan, point_type: str) -> int:
    """The header stamp of a scan's cloud when none is given: the first column's firing time for
    a profile stamped at the sweep start, else ``scan.stamp_ns`` (the end of the sweep)."""
    if point_profile(point_type).stamp == "sweep_start":
        return int(scan.stamp_ns) + int(np.rint(np.min(scan.cell_time_offset_s) * 1e9))
    return int(scan.stamp_ns)


def point_cloud(scan: Scan, point_type: str = "XYZI", stamp_ns: int | None = None) -> np.ndarray:
    """The scan's cloud in a point type's layout, as that consumer's driver publishes it.

    Parameters
    ----------
    scan : Scan
    point_type : str
        A key of ``PROFILES``.
    stamp_ns : int, optional
        The header stamp the relative point times count from (``velodyne`` time, ``ouster`` t,
        ``nebula`` time_stamp), e.g. ``header_stamp_ns(...)``; default ``default_stamp_ns``.

    Returns
    -------
    (height, width) structured array of ``point_dtype(point_type)``
        See ``PointProfile.grid``.

    Raises
    ------
    ConfigError
        ``point_type`` is not a profile.
    OutputError
        A point fires before ``stamp_ns`` (or 2**32 ns after it) in a layout whose time is an
        unsigned count from the stamp.
    """
    profile = point_profile(point_type)
    stamp_ns = default_stamp_ns(scan, point_type) if stamp_ns is None else stamp_ns
    return _BUILDERS[profile.name](scan, int(stamp_ns))


def organised_cloud(scan: Scan, point_type: str = "XYZI") -> np.ndarray:
    """The organised cloud of a scan in rslidar_sdk's layout, one cell per beam, as the driver
    publishes it.

    Cell ``(c, r)`` holds the primary return of the beam of column ``c`` and ring ``r``: the
    strongest, or the first when no return has the strongest flag (``Returns.primary_index``).
    A beam without a return keeps its cell with NaN x, y, z and intensity 0.

    Parameters
    ----------
    scan : Scan
    point_type : {"XYZI", "XYZIRT", "XYZIRT_labels"}

    Returns
    -------
    (columns, rings) structured array of ``XYZI``, ``XYZIRT`` or ``XYZIRT_LABELS``
        x, y, z: the point in the sensor frame, m. intensity: the intensity byte as float.
        ring (XYZIRT): ``scan.ring_rank[r]``, rank of the ring's elevation (0 = lowest).
        timestamp (XYZIRT): absolute firing time of the cell, ``stamp_s + cell_time_offset_s``,
        s (its column's time where all rings of a column fire together), also in cells without
        a return.
        class, instance (XYZIRT_labels): of the primary return (``Returns.class_id``,
        ``Returns.instance``); 0 and ``NO_INSTANCE`` in cells without a return.
    """
    if point_type not in ("XYZI", "XYZIRT", "XYZIRT_labels"):
        raise ConfigError(
            f"point_type {point_type!r} is not an rslidar_sdk point type; allowed: XYZI, XYZIRT, XYZIRT_labels"
        )
    dtype = POINT_TYPES[point_type]
    if dtype == XYZIRT_LABELS:
        returns = scan.returns
        labelled = np.empty(scan.columns * scan.rings, dtype=XYZIRT_LABELS)
        _fill_labelled(
            labelled,
            np.asarray(scan.points_sensor, dtype=np.float64),
            returns.valid,
            returns.intensity,
            returns.class_id,
            returns.instance,
            _primary(scan),
            np.asarray(scan.ring_rank, dtype=np.uint16),
            np.ascontiguousarray(_cell_time_s(scan).reshape(-1)),
            scan.rings,
            np.uint32(NO_INSTANCE),
        )
        return labelled.reshape(scan.columns, scan.rings)
    # x, y, z, intensity as one contiguous float32 block: XYZI is exactly its view.
    xyzi = _primary_xyzi(
        np.asarray(scan.points_sensor, dtype=np.float64), scan.returns.valid, scan.returns.intensity, _primary(scan)
    )
    if dtype == XYZI:
        return xyzi.view(XYZI).reshape(scan.columns, scan.rings)
    cloud = np.empty(scan.columns * scan.rings, dtype=dtype)
    for axis, name in enumerate(("x", "y", "z", "intensity")):
        cloud[name] = xyzi[:, axis]
    cloud = cloud.reshape(scan.columns, scan.rings)
    cloud["ring"] = np.asarray(scan.ring_rank, dtype=np.uint16)[None, :]
    cloud["timestamp"] = _cell_time_s(scan)
    return cloud


def _cell_time_s(scan: Scan) -> np.ndarray:
    """(columns, rings) float64: each cell's absolute firing time, s: its column's, or its own
    with emitter firing times."""
    if scan.fire_time_s is None:
        column_time_s = scan.stamp_ns * 1e-9 + np.asarray(scan.time_offset_s, dtype=np.float64)
        return np.repeat(column_time_s[:, None], scan.rings, axis=1)
    cell_time_s = scan.stamp_ns * 1e-9 + scan.cell_time_offset_s
    return cell_time_s.reshape(scan.columns, scan.rings)


def _rslidar(point_type: str) -> Callable[[Scan, int], np.ndarray]:
    return lambda scan, _stamp_ns: organised_cloud(scan, point_type)


def _primary(scan: Scan) -> np.ndarray:
    """(n_beams,) int64 slot of each beam's primary return."""
    slots = scan.returns.valid.shape[1]
    return np.zeros(scan.columns * scan.rings, np.int64) if slots == 1 else scan.returns.primary_index()


def _cell_time_ns(scan: Scan, stamp_ns: int, point_type: str, unsigned: bool) -> np.ndarray:
    """(columns * rings,) int64: each cell's own firing time minus the header stamp, ns."""
    offset_ns = np.rint(scan.cell_time_offset_s * 1e9).astype(np.int64)
    relative_ns = (int(scan.stamp_ns) - stamp_ns) + offset_ns
    if unsigned:
        early, late = int(np.argmin(relative_ns)), int(np.argmax(relative_ns))
        if relative_ns[early] < 0 or relative_ns[late] > _UINT32_MAX:
            c = early if relative_ns[early] < 0 else late
            when = f"{-relative_ns[c]} ns before" if c == early else f"{relative_ns[c]} ns after"
            column, ring = divmod(c, scan.rings)
            raise OutputError(
                f"point_type {point_type}: column {column} fires {when} the header stamp {stamp_ns} (ring {ring}); "
                f"its time field counts uint32 ns from the stamp (0 to {_UINT32_MAX}): stamp the cloud at the "
                "sweep start"
            )
    return relative_ns


def _returns_in_cell_order(scan: Scan) -> tuple[np.ndarray, np.ndarray]:
    """(beam, slot) of every return: beams in cell order, the returns of a beam in range order."""
    beam, slot = np.nonzero(np.asarray(scan.returns.valid, dtype=bool))
    return beam, slot


def _velodyne(scan: Scan, stamp_ns: int) -> np.ndarray:
    beam, slot = _returns_in_cell_order(scan)
    ring = beam % scan.rings
    time_ns = _cell_time_ns(scan, stamp_ns, "velodyne", unsigned=False)
    cloud = np.empty(beam.size, dtype=VELODYNE)
    for axis, name in enumerate("xyz"):
        cloud[name] = scan.points_sensor[beam, slot, axis]
    cloud["intensity"] = scan.returns.intensity[beam, slot]
    cloud["ring"] = np.asarray(scan.ring_rank, dtype=np.uint16)[ring]
    cloud["time"] = time_ns[beam] * 1e-9
    return cloud.reshape(1, -1)


def _ouster(scan: Scan, stamp_ns: int) -> np.ndarray:
    returns = scan.returns
    beams = np.arange(scan.columns * scan.rings)
    slot = _primary(scan)
    valid = returns.valid[beams, slot]
    time_ns = _cell_time_ns(scan, stamp_ns, "ouster", unsigned=True)
    rank = np.asarray(scan.ring_rank, dtype=np.int64)
    ring_of_row = np.argsort(scan.rings - 1 - rank)  # row 0 = the highest beam

    def grid(values: np.ndarray) -> np.ndarray:
        """(columns * rings,) in cell order -> (rings, columns) in ouster_ros's rows."""
        return values.reshape(scan.columns, scan.rings)[:, ring_of_row].T

    cloud = np.zeros((scan.rings, scan.columns), dtype=OUSTER)  # padding bytes stay 0
    for axis, name in enumerate("xyz"):
        cloud[name] = grid(np.where(valid, scan.points_sensor[beams, slot, axis], np.nan))
    cloud["intensity"] = grid(np.where(valid, returns.signal[beams, slot], 0))
    cloud["t"] = grid(time_ns)
    cloud["reflectivity"] = grid(np.where(valid, returns.intensity[beams, slot], 0))
    cloud["ring"] = np.arange(scan.rings)[:, None]
    cloud["range"] = grid(np.where(valid, np.rint(np.nan_to_num(returns.range_m[beams, slot]) * 1e3), 0))
    return cloud


def _nebula(scan: Scan, stamp_ns: int) -> np.ndarray:
    beam, slot = _returns_in_cell_order(scan)
    ring = beam % scan.rings
    time_ns = _cell_time_ns(scan, stamp_ns, "nebula", unsigned=True)
    p = np.asarray(scan.points_sensor, dtype=np.float64)[beam, slot]
    cloud = np.empty(beam.size, dtype=NEBULA)
    for axis, name in enumerate("xyz"):
        cloud[name] = p[:, axis]
    cloud["intensity"] = scan.returns.intensity[beam, slot]
    cloud["return_type"] = _RETURN_TYPE_OF_FLAGS[scan.returns.return_flags[beam, slot]]
    cloud["channel"] = np.asarray(scan.ring_rank, dtype=np.uint16)[ring]
    # nebula's RoboSense decoder: x = d cos(el) cos(az), y = -d cos(el) sin(az), z = d sin(el),
    # the azimuth clockwise from +x (the Helios spins clockwise), in [0, 2 pi).
    cloud["azimuth"] = np.mod(np.arctan2(-p[:, 1], p[:, 0]), 2.0 * np.pi)
    cloud["elevation"] = np.arctan2(p[:, 2], np.hypot(p[:, 0], p[:, 1]))
    cloud["distance"] = np.linalg.norm(p, axis=1)
    cloud["time_stamp"] = time_ns[beam]
    return cloud.reshape(1, -1)


_BUILDERS: dict[str, Callable[[Scan, int], np.ndarray]] = {
    "XYZI": _rslidar("XYZI"),
    "XYZIRT": _rslidar("XYZIRT"),
    "XYZIRT_labels": _rslidar("XYZIRT_labels"),
    "velodyne": _velodyne,
    "ouster": _ouster,
    "nebula": _nebula,
}


def all_returns(scan: Scan, labels: bool = False) -> np.ndarray:
    """Every return of a scan as point-file records.

    Returns
    -------
    (n_points,) structured array of ``PLY_POINT``, with ``labels`` of ``PLY_POINT_LABELS``
        Beams in cell order (column x rings + ring), the returns of a beam in range order.
        ``return_index`` counts from 1 within the beam, ``num_returns`` is the beam's count,
        ``time_offset_s`` is the beam's own firing time minus the stamp (its column's ``dt_c``
        where all rings of a column fire together); ``instance`` is the return's instance label.
    """
    returns = scan.returns
    valid = np.asarray(returns.valid, dtype=bool)
    beam, slot = _returns_in_cell_order(scan)
    return_index = np.cumsum(valid, axis=1)[beam, slot]
    num_returns = valid.sum(axis=1)[beam]
    column = scan.cell_column[beam]
    points = np.empty(beam.size, dtype=PLY_POINT_LABELS if labels else PLY_POINT)
    for axis, name in enumerate("xyz"):
        points[name] = scan.points_sensor[beam, slot, axis]
    points["reflectivity"] = returns.reflectivity[beam, slot]
    points["signal"] = returns.signal[beam, slot]
    points["intensity"] = returns.intensity[beam, slot]
    points["ring"] = scan.cell_ring[beam]
    points["column"] = column
    points["class"] = returns.class_id[beam, slot]
    points["material"] = returns.material_id[beam, slot]
    points["return_index"] = return_index
    points["num_returns"] = num_returns
    points["return_flags"] = returns.return_flags[beam, slot]
    points["time_offset_s"] = scan.cell_time_offset_s[beam]
    if labels:
        points["instance"] = returns.instance[beam, slot]
    return points


@numba.njit(cache=True, nogil=True)
def _fill_labelled(
    out, points_sensor, valid, intensity, class_id, instance, primary, ring_rank, cell_time_s, rings, none
):
    """``XYZIRT_LABELS`` records of each beam's primary return in one pass (field by field numpy
    assignment into the packed records cost seven times as much): the ``XYZIRT`` values of
    ``organised_cloud`` plus class and instance; NaN x, y, z, intensity 0, class 0 and ``none``
    for a beam without a return."""
    for i in range(primary.size):
        j = primary[i]
        rec = out[i]
        if valid[i, j]:
            rec.x = points_sensor[i, j, 0]
            rec.y = points_sensor[i, j, 1]
            rec.z = points_sensor[i, j, 2]
            rec.intensity = intensity[i, j]
            rec["class"] = class_id[i, j]
            rec.instance = instance[i, j]
        else:
            rec.x = np.nan
            rec.y = np.nan
            rec.z = np.nan
            rec.intensity = 0.0
            rec["class"] = 0
            rec.instance = none
        rec.ring = ring_rank[i % rings]
        rec.timestamp = cell_time_s[i]


@numba.njit(cache=True, nogil=True)
def _primary_xyzi(points_sensor, valid, intensity, primary):
    """(n, 4) float32 x, y, z, intensity of each beam's primary return; NaN x, y, z and 0
    intensity for a beam without a return."""
    n = primary.size
    out = np.empty((n, 4), np.float32)
    for i in range(n):
        j = primary[i]
        if valid[i, j]:
            out[i, 0] = points_sensor[i, j, 0]
            out[i, 1] = points_sensor[i, j, 1]
            out[i, 2] = points_sensor[i, j, 2]
            out[i, 3] = intensity[i, j]
        else:
            out[i, 0] = np.nan
            out[i, 1] = np.nan
            out[i, 2] = np.nan
            out[i, 3] = 0.0
    return out
