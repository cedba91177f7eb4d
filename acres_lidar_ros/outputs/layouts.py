"""The clouds of a scan in the layouts of ``outputs.point_types``, as each consumer's driver
publishes them, and the spec's all-returns point records.

``point_cloud(scan, point_type, stamp_ns)`` fills one ``PointProfile``'s dtype (given a name, it
resolves it once and passes the profile on): the organised rslidar_sdk layouts and the labelled
one (``organised_cloud``), ouster_ros's rings-by-columns grid, or the dense velodyne, nebula and
Hesai lists. ``all_returns`` gives the PLY records (with ``labels``, their instance too).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numba
import numpy as np

from acres_lidar_ros.errors import ConfigError, OutputError
from acres_lidar_ros.outputs.point_types import (
    CARTESIAN_FIELDS,
    PLY_POINT,
    PLY_POINT_LABELS,
    SPHERICAL_FIELDS,
    XYZIRT_LABELS,
    PointProfile,
    point_profile,
    spherical_dtype,
)
from acres_lidar_ros.outputs.shaping import ShapedScan, as_shaped, spherical
from acres_lidar_ros.radiometry.returns import FLAG_FIRST, FLAG_LAST, FLAG_SECOND_STRONGEST, FLAG_STRONGEST
from acres_lidar_ros.scan.scan_types import Scan
from acres_lidar_ros.scene.instances import NO_INSTANCE

__all__ = [
    "all_returns",
    "default_stamp_ns",
    "organised_cloud",
    "point_cloud",
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


def default_stamp_ns(scan: Scan | ShapedScan, profile: PointProfile) -> int:
    """The header stamp of a scan's cloud in ``profile`` when none is given: the start of what it
    covers for a profile stamped at the sweep start (a ``Scan``: its first firing time), else its
    end (``scan.stamp_ns`` for a whole scan: the end of the sweep)."""
    return as_shaped(scan).header_stamp_ns(profile.stamps_sweep_start(False))


def point_cloud(
    scan: Scan | ShapedScan, point_type: PointProfile | str = "XYZI", stamp_ns: int | None = None
) -> np.ndarray:
    """The scan's cloud in a point type's layout, as that consumer's driver publishes it.

    Parameters
    ----------
    scan : Scan or ShapedScan
        A ``Scan`` is laid out as it is (sensor frame, Cartesian, organised where the profile
        is); a ``ShapedScan`` (``shaping.shape_scan``, a slice of ``shaping.slice_scan``) in its
        frame and coordinates (``spherical_dtype`` of the profile's dtype), dense when it leaves
        out invalid points (height 1, the cells with a return, in the organised grid's order).
    point_type : PointProfile or str
        One of ``PROFILES``, or its name (a key of ``PROFILES``).
    stamp_ns : int, optional
        The header stamp the relative point times count from (``velodyne`` time, ``ouster`` t,
        ``nebula`` time_stamp), e.g. ``PointProfile.header_stamp_ns(...)``; default
        ``default_stamp_ns``.

    Returns
    -------
    (height, width) structured array of the profile's ``dtype_in(coordinates)``
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
    shaped = as_shaped(scan)
    dtype = profile.dtype_in(shaped.coordinates)  # ConfigError for a profile without spherical coordinates
    stamp_ns = default_stamp_ns(shaped, profile) if stamp_ns is None else stamp_ns
    cloud = _BUILDERS[profile.name](shaped, profile, dtype, int(stamp_ns))
    if profile.organised and not shaped.include_invalid_points:
        flat = cloud.reshape(-1)
        first = (SPHERICAL_FIELDS if shaped.coordinates == "spherical" else CARTESIAN_FIELDS)[0]
        cloud = flat[~np.isnan(flat[first])].reshape(1, -1)
    return cloud


def _coordinates(shaped: ShapedScan) -> np.ndarray:
    """(cells, R, 3) float64 of what fills the coordinate fields: x, y, z, or azimuth, elevation
    and range (``shaping.spherical``)."""
    points = np.asarray(shaped.points, dtype=np.float64)
    return spherical(points) if shaped.coordinates == "spherical" else points


def _coordinate_fields(shaped: ShapedScan) -> tuple[str, str, str]:
    return SPHERICAL_FIELDS if shaped.coordinates == "spherical" else CARTESIAN_FIELDS


def organised_cloud(scan: Scan | ShapedScan, point_type: PointProfile | str = "XYZI") -> np.ndarray:
    """The organised cloud of a scan in rslidar_sdk's layout, one cell per beam, as the driver
    publishes it.

    Cell ``(c, r)`` holds the primary return of the beam of column ``c`` and ring ``r``: the
    strongest, or the first when no return has the strongest flag (``Returns.primary_index``).
    A beam without a return keeps its cell with NaN x, y, z and intensity 0.

    Parameters
    ----------
    scan : Scan or ShapedScan
    point_type : PointProfile or {"XYZI", "XYZIRT", "XYZIRT_labels"}
        One of rslidar_sdk's profiles, or its name.

    Returns
    -------
    (columns, rings) structured array of ``XYZI``, ``XYZIRT`` or ``XYZIRT_LABELS`` (or their
    ``spherical_dtype``)
        x, y, z: the point in the sensor frame (a ``ShapedScan``: in its frame), m; azimuth,
        elevation (rad) and range (m) instead in spherical coordinates. intensity: the
        intensity byte as float. ring (XYZIRT): ``scan.ring_rank[r]``, rank of the ring's
        elevation (0 = lowest). timestamp (XYZIRT): absolute firing time of the cell,
        ``stamp_s + time_offset_s``, s, also in cells without a return. class, instance
        (XYZIRT_labels): of the primary return (``Returns.class_id``, ``Returns.instance``); 0 and
        ``NO_INSTANCE`` in cells without a return. Always organised: the dense form is
        ``point_cloud``'s.
    """
    profile = point_profile(point_type)
    if profile.name not in _RSLIDAR:
        raise ConfigError(
            f"point_type {profile.name!r} is not an rslidar_sdk point type; allowed: {', '.join(_RSLIDAR)}"
        )
    shaped = as_shaped(scan)
    return _organised(shaped, profile, profile.dtype_in(shaped.coordinates))


_RSLIDAR = ("XYZI", "XYZIRT", "XYZIRT_labels")
"""The profiles of rslidar_sdk's organised layout (``organised_cloud``)."""


class _CellRingTime(NamedTuple):
    """What a cell's ring and timestamp come from: the ring ranks, each cell's time offset (s), the stamp (s)."""

    ring_rank: np.ndarray  # (rings,) uint16
    time_offset_s: np.ndarray  # (cells,) float64
    stamp_s: float
    rings: int


def _organised(shaped: ShapedScan, profile: PointProfile, dtype: np.dtype) -> np.ndarray:
    """``organised_cloud`` of a shaped scan in one of the ``_RSLIDAR`` profiles, ``dtype`` its
    layout in the scan's coordinates."""
    if profile.name == "XYZIRT_labels":
        # One compiled pass into XYZIRT_LABELS records; the spherical twin has the same bytes.
        returns = shaped.returns
        labelled = np.empty(shaped.columns * shaped.rings, dtype=XYZIRT_LABELS)
        cells = _CellRingTime(
            ring_rank=np.asarray(shaped.ring_rank, dtype=np.uint16),
            time_offset_s=np.ascontiguousarray(np.asarray(shaped.time_offset_s, dtype=np.float64).reshape(-1)),
            stamp_s=shaped.stamp_ns * 1e-9,
            rings=shaped.rings,
        )
        _fill_labelled(
            labelled,
            _coordinates(shaped),
            returns.arrays(),
            _primary(shaped),
            cells,
            np.uint32(NO_INSTANCE),
        )
        return labelled.view(dtype).reshape(shaped.columns, shaped.rings)
    cell_time_s = shaped.stamp_ns * 1e-9 + np.asarray(shaped.time_offset_s, dtype=np.float64)
    # The three coordinates and intensity as one contiguous float32 block: XYZI is exactly its view.
    xyzi = _primary_xyzi(_coordinates(shaped), shaped.returns.valid, shaped.returns.intensity, _primary(shaped))
    if profile.name == "XYZI":
        return xyzi.view(dtype).reshape(shaped.columns, shaped.rings)
    cloud = np.empty(shaped.columns * shaped.rings, dtype=dtype)
    for axis, name in enumerate((*_coordinate_fields(shaped), "intensity")):
        cloud[name] = xyzi[:, axis]
    cloud = cloud.reshape(shaped.columns, shaped.rings)
    cloud["ring"] = np.asarray(shaped.ring_rank, dtype=np.uint16)[None, :]
    cloud["timestamp"] = cell_time_s.reshape(shaped.columns, shaped.rings)
    return cloud


def _primary(shaped: ShapedScan) -> np.ndarray:
    """(n_beams,) int64 slot of each beam's primary return."""
    slots = shaped.returns.valid.shape[1]
    return np.zeros(shaped.columns * shaped.rings, np.int64) if slots == 1 else shaped.returns.primary_index()


def _cell_time_ns(shaped: ShapedScan, stamp_ns: int, profile: PointProfile, unsigned: bool) -> np.ndarray:
    """(cells,) int64: each cell's own firing time minus the header stamp, ns."""
    offset_ns = np.rint(np.asarray(shaped.time_offset_s, dtype=np.float64) * 1e9).astype(np.int64)
    relative_ns = (shaped.stamp_ns - stamp_ns) + offset_ns
    if unsigned and relative_ns.size:
        early, late = int(np.argmin(relative_ns)), int(np.argmax(relative_ns))
        if relative_ns[early] < 0 or relative_ns[late] > _UINT32_MAX:
            i = early if relative_ns[early] < 0 else late
            column, ring = int(shaped.column_ids[i // shaped.rings]), i % shaped.rings
            when = f"{-relative_ns[i]} ns before" if i == early else f"{relative_ns[i]} ns after"
            raise OutputError(
                f"point_type {profile.name}: column {column} fires {when} the header stamp {stamp_ns} (ring {ring}); "
                f"its time field counts uint32 ns from the stamp (0 to {_UINT32_MAX}): stamp the cloud at the "
                "sweep start"
            )
    return relative_ns


def _returns_in_cell_order(shaped: ShapedScan) -> tuple[np.ndarray, np.ndarray]:
    """(beam, slot) of every return: beams in cell order, the returns of a beam in range order."""
    beam, slot = np.nonzero(np.asarray(shaped.returns.valid, dtype=bool))
    return beam, slot


def _velodyne(shaped: ShapedScan, profile: PointProfile, dtype: np.dtype, stamp_ns: int) -> np.ndarray:
    beam, slot = _returns_in_cell_order(shaped)
    ring = beam % shaped.rings
    time_ns = _cell_time_ns(shaped, stamp_ns, profile, unsigned=False)
    cloud = np.empty(beam.size, dtype=dtype)
    coordinates = _coordinates(shaped)
    for axis, name in enumerate(_coordinate_fields(shaped)):
        cloud[name] = coordinates[beam, slot, axis]
    cloud["intensity"] = shaped.returns.intensity[beam, slot]
    cloud["ring"] = np.asarray(shaped.ring_rank, dtype=np.uint16)[ring]
    cloud["time"] = time_ns[beam] * 1e-9
    return cloud.reshape(1, -1)


def _ouster(shaped: ShapedScan, profile: PointProfile, dtype: np.dtype, stamp_ns: int) -> np.ndarray:
    returns = shaped.returns
    columns, rings = shaped.columns, shaped.rings
    beams = np.arange(columns * rings)
    slot = _primary(shaped)
    valid = returns.valid[beams, slot]
    time_ns = _cell_time_ns(shaped, stamp_ns, profile, unsigned=True)
    rank = np.asarray(shaped.ring_rank, dtype=np.int64)
    ring_of_row = np.argsort(rings - 1 - rank)  # row 0 = the highest beam

    def grid(values: np.ndarray) -> np.ndarray:
        """(columns * rings,) in cell order -> (rings, columns) in ouster_ros's rows."""
        return values.reshape(columns, rings)[:, ring_of_row].T

    cloud = np.zeros((rings, columns), dtype=dtype)  # padding bytes stay 0
    for axis, name in enumerate("xyz"):
        cloud[name] = grid(np.where(valid, shaped.points[beams, slot, axis], np.nan))
    cloud["intensity"] = grid(np.where(valid, returns.signal[beams, slot], 0))
    cloud["t"] = grid(time_ns)
    cloud["reflectivity"] = grid(np.where(valid, returns.intensity[beams, slot], 0))
    cloud["ring"] = np.arange(rings)[:, None]
    # ouster_ros's range is the packet's: mm from the lidar origin, |o| more than ours from the beam origin o
    range_m = np.nan_to_num(returns.range_m[beams, slot]) + _beam_origin_distance_m(shaped)
    cloud["range"] = grid(np.where(valid, np.rint(range_m * 1e3), 0))
    return cloud


def _beam_origin_distance_m(shaped: ShapedScan) -> np.ndarray:
    """(cells,) float64: how far each of ``shaped``'s beams starts from the sensor origin, ``|o|``
    of the sensors file's ``hor_offset_m`` and ``vert_offset_m`` (0 for a scan built by hand).

    Ouster measures range from the lidar origin and places a point at ``(r - |o|) d + o``
    (ouster-sdk ``make_xyz_lut``: ``n`` the beam origin's Euclidean distance); our traced range
    counts from ``o``, so Ouster's is ours plus ``|o|``."""
    scan = shaped.scan
    if scan.cells is None:
        return np.zeros(shaped.columns * shaped.rings)
    origin = np.asarray(scan.cells.origin_sensor_m, dtype=np.float64)[np.asarray(shaped.column_ids, dtype=np.int64)]
    return np.linalg.norm(origin, axis=-1).reshape(-1)


def _nebula(shaped: ShapedScan, profile: PointProfile, dtype: np.dtype, stamp_ns: int) -> np.ndarray:
    beam, slot = _returns_in_cell_order(shaped)
    ring = beam % shaped.rings
    time_ns = _cell_time_ns(shaped, stamp_ns, profile, unsigned=True)
    p = np.asarray(shaped.points, dtype=np.float64)[beam, slot]
    cloud = np.empty(beam.size, dtype=dtype)
    for axis, name in enumerate("xyz"):
        cloud[name] = p[:, axis]
    cloud["intensity"] = shaped.returns.intensity[beam, slot]
    cloud["return_type"] = _RETURN_TYPE_OF_FLAGS[shaped.returns.return_flags[beam, slot]]
    cloud["channel"] = np.asarray(shaped.ring_rank, dtype=np.uint16)[ring]
    # nebula's RoboSense decoder: x = d cos(el) cos(az), y = -d cos(el) sin(az), z = d sin(el),
    # the azimuth clockwise from +x (the Helios spins clockwise), in [0, 2 pi).
    cloud["azimuth"] = np.mod(np.arctan2(-p[:, 1], p[:, 0]), 2.0 * np.pi)
    cloud["elevation"] = np.arctan2(p[:, 2], np.hypot(p[:, 0], p[:, 1]))
    cloud["distance"] = np.linalg.norm(p, axis=1)
    cloud["time_stamp"] = time_ns[beam]
    return cloud.reshape(1, -1)


def cell_channel_ids(shaped: ShapedScan) -> np.ndarray:
    """(cells,) uint32: the vendor channel id of each of ``shaped``'s cells (the firing pattern's;
    for a rings x columns sensor, the ring index, as its pattern numbers them)."""
    scan = shaped.scan
    if scan.cells is not None:
        ids = np.asarray(scan.cells.channel_id, dtype=np.uint32).reshape(scan.columns, scan.rings)
        return ids[np.asarray(shaped.column_ids, dtype=np.int64)].reshape(-1)
    return np.tile(np.arange(shaped.rings, dtype=np.uint32), len(shaped.column_ids))


def _hesai(shaped: ShapedScan, profile: PointProfile, dtype: np.dtype, stamp_ns: int) -> np.ndarray:
    """HesaiLidar_ROS_2.0's dense cloud: every return, ``ring`` the channel index (the vendor's
    channel id), ``timestamp`` the point's absolute firing time in s."""
    beam, slot = _returns_in_cell_order(shaped)
    channel = cell_channel_ids(shaped)
    if channel.size and int(channel.max()) > np.iinfo(np.uint16).max:
        e = int(np.argmax(channel))
        raise OutputError(
            f"point_type {profile.name}: cell {e} has channel id {int(channel[e])}, beyond its ring field "
            "(uint16, 0 to 65535)"
        )
    cloud = np.empty(beam.size, dtype=dtype)
    coordinates = _coordinates(shaped)
    for axis, name in enumerate(_coordinate_fields(shaped)):
        cloud[name] = coordinates[beam, slot, axis]
    cloud["intensity"] = shaped.returns.intensity[beam, slot]
    cloud["ring"] = channel[beam]
    cloud["timestamp"] = shaped.stamp_ns * 1e-9 + np.asarray(shaped.time_offset_s, dtype=np.float64)[beam]
    return cloud.reshape(1, -1)


_BUILDERS: dict[str, Callable[[ShapedScan, PointProfile, np.dtype, int], np.ndarray]] = {
    # rslidar_sdk's timestamps are absolute: they need no header stamp
    **dict.fromkeys(_RSLIDAR, lambda shaped, profile, dtype, _stamp_ns: _organised(shaped, profile, dtype)),
    "velodyne": _velodyne,
    "ouster": _ouster,
    "nebula": _nebula,
    "hesai": _hesai,
}


def all_returns(scan: Scan | ShapedScan, labels: bool = False) -> np.ndarray:
    """Every return of a scan as point-file records.

    Returns
    -------
    (n_points,) structured array of ``PLY_POINT``, with ``labels`` of ``PLY_POINT_LABELS`` (their
    ``spherical_dtype`` for a ``ShapedScan`` in spherical coordinates)
        Beams in cell order (column x rings + ring), the returns of a beam in range order; a
        ``ShapedScan``'s points in its frame. ``return_index`` counts from 1 within the beam,
        ``num_returns`` is the beam's count, ``time_offset_s`` is the cell's firing time minus
        the stamp; ``instance`` is the return's instance label.
    """
    shaped = as_shaped(scan)
    returns = shaped.returns
    valid = np.asarray(returns.valid, dtype=bool)
    beam, slot = _returns_in_cell_order(shaped)
    return_index = np.cumsum(valid, axis=1)[beam, slot]
    num_returns = valid.sum(axis=1)[beam]
    column = shaped.column_ids[beam // shaped.rings].astype(np.uint16)
    layout = PLY_POINT_LABELS if labels else PLY_POINT
    points = np.empty(beam.size, dtype=spherical_dtype(layout) if shaped.coordinates == "spherical" else layout)
    coordinates = _coordinates(shaped)
    for axis, name in enumerate(_coordinate_fields(shaped)):
        points[name] = coordinates[beam, slot, axis]
    points["reflectivity"] = returns.reflectivity[beam, slot]
    points["signal"] = returns.signal[beam, slot]
    points["intensity"] = returns.intensity[beam, slot]
    points["ring"] = beam % shaped.rings
    points["column"] = column
    points["class"] = returns.class_id[beam, slot]
    points["material"] = returns.material_id[beam, slot]
    points["return_index"] = return_index
    points["num_returns"] = num_returns
    points["return_flags"] = returns.return_flags[beam, slot]
    points["time_offset_s"] = np.asarray(shaped.time_offset_s)[beam]
    if labels:
        points["instance"] = returns.instance[beam, slot]
    return points


@numba.njit(cache=True, nogil=True)
def _fill_labelled(out, points, returns, primary, cells, none):
    """``XYZIRT_LABELS`` records of each beam's primary return in one pass (field by field numpy
    assignment into the packed records cost seven times as much): the ``XYZIRT``
    values of ``organised_cloud`` (timestamp ``stamp_s + time_offset_s`` of ``cells``, a
    ``_CellRingTime``) plus class and instance of ``returns`` (a ``ReturnArrays``); NaN
    coordinates, intensity 0, class 0 and ``none`` for a beam without a return. ``points`` (n,
    R, 3) fill the three coordinate fields (x, y, z, or the spherical twin's azimuth, elevation,
    range)."""
    for i in range(primary.size):
        j = primary[i]
        rec = out[i]
        if returns.valid[i, j]:
            rec.x = points[i, j, 0]
            rec.y = points[i, j, 1]
            rec.z = points[i, j, 2]
            rec.intensity = returns.intensity[i, j]
            rec["class"] = returns.class_id[i, j]
            rec.instance = returns.instance[i, j]
        else:
            rec.x = np.nan
            rec.y = np.nan
            rec.z = np.nan
            rec.intensity = 0.0
            rec["class"] = 0
            rec.instance = none
        rec.ring = cells.ring_rank[i % cells.rings]
        rec.timestamp = cells.stamp_s + cells.time_offset_s[i]


@numba.njit(cache=True, nogil=True)
def _primary_xyzi(points_sensor, valid, intensity, primary):
    """(n, 4) float32 three coordinates and intensity of each beam's primary return; NaN
    coordinates and 0 intensity for a beam without a return."""
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
