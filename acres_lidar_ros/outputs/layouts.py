"""Point layouts of the outputs: one packed little-endian numpy dtype per layout.

The dtypes here are the only place where field names, types and byte offsets are written down;
PointCloud2 ``PointField`` lists, PCD headers and PLY headers are derived from them.

* ``XYZI``: rslidar_sdk's ``PointXYZI`` (x, y, z, intensity as float32; 16 bytes).
* ``XYZIRT``: rslidar_sdk's ``PointXYZIRT`` (``XYZI`` + ring uint16 + timestamp float64; 26 bytes).
* ``PLY_POINT``: the spec's point file record (31 bytes, see "Output Formats").
"""

from __future__ import annotations

import numba
import numpy as np

from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.scan import Scan

XYZI = np.dtype([("x", "<f4"), ("y", "<f4"), ("z", "<f4"), ("intensity", "<f4")])

XYZIRT = np.dtype(
    [
        ("x", "<f4"),
        ("y", "<f4"),
        ("z", "<f4"),
        ("intensity", "<f4"),
        ("ring", "<u2"),
        ("timestamp", "<f8"),
    ]
)

PLY_POINT = np.dtype(
    [
        ("x", "<f4"),
        ("y", "<f4"),
        ("z", "<f4"),
        ("reflectivity", "<f4"),
        ("signal", "<u2"),
        ("intensity", "u1"),
        ("ring", "u1"),
        ("column", "<u2"),
        ("class", "u1"),
        ("material", "u1"),
        ("return_index", "u1"),
        ("num_returns", "u1"),
        ("return_flags", "u1"),
        ("time_offset_s", "<f4"),
    ]
)

POINT_TYPES: dict[str, np.dtype] = {"XYZI": XYZI, "XYZIRT": XYZIRT}


def point_dtype(point_type: str) -> np.dtype:
    """The dtype of an organised-cloud point type name (``"XYZI"`` or ``"XYZIRT"``)."""
    try:
        return POINT_TYPES[point_type]
    except (KeyError, TypeError):
        raise ConfigError(f"point_type {point_type!r} is not a point type; allowed: {', '.join(POINT_TYPES)}") from None


def organised_cloud(scan: Scan, point_type: str = "XYZI") -> np.ndarray:
    """The organised cloud of a scan, one cell per beam, as the driver publishes it.

    Cell ``(c, r)`` holds the primary return of the beam of column ``c`` and ring ``r``: the
    strongest, or the first when no return has the strongest flag (``Returns.primary_index``).
    A beam without a return keeps its cell with NaN x, y, z and intensity 0.

    Parameters
    ----------
    scan : Scan
    point_type : {"XYZI", "XYZIRT"}

    Returns
    -------
    (columns, rings) structured array of ``XYZI`` or ``XYZIRT``
        x, y, z: the point in the sensor frame, m. intensity: the intensity byte as float.
        ring (XYZIRT): ``scan.ring_rank[r]``, rank of the ring's elevation (0 = lowest).
        timestamp (XYZIRT): absolute firing time of the column, ``stamp_s + time_offset_s[c]``,
        s, also in cells without a return.
    """
    dtype = point_dtype(point_type)
    n_beams = scan.columns * scan.rings
    returns = scan.returns
    slots = returns.valid.shape[1]
    primary = np.zeros(n_beams, np.int64) if slots == 1 else returns.primary_index()
    # x, y, z, intensity as one contiguous float32 block: XYZI is exactly its view.
    xyzi = _primary_xyzi(np.asarray(scan.points_sensor, dtype=np.float64), returns.valid, returns.intensity, primary)
    if dtype == XYZI:
        return xyzi.view(XYZI).reshape(scan.columns, scan.rings)
    cloud = np.empty(n_beams, dtype=dtype)
    for axis, name in enumerate(("x", "y", "z", "intensity")):
        cloud[name] = xyzi[:, axis]
    cloud = cloud.reshape(scan.columns, scan.rings)
    names = dtype.names or ()
    if "ring" in names:
        cloud["ring"] = np.asarray(scan.ring_rank, dtype=np.uint16)[None, :]
    if "timestamp" in names:
        column_time_s = scan.stamp_ns * 1e-9 + np.asarray(scan.time_offset_s, dtype=np.float64)
        cloud["timestamp"] = column_time_s[:, None]
    return cloud


def all_returns(scan: Scan) -> np.ndarray:
    """Every return of a scan as point-file records.

    Returns
    -------
    (n_points,) structured array of ``PLY_POINT``
        Beams in cell order (column x rings + ring), the returns of a beam in range order.
        ``return_index`` counts from 1 within the beam, ``num_returns`` is the beam's count,
        ``time_offset_s`` is the column's ``dt_c``.
    """
    returns = scan.returns
    valid = np.asarray(returns.valid, dtype=bool)
    beam, slot = np.nonzero(valid)
    return_index = np.cumsum(valid, axis=1)[beam, slot]
    num_returns = valid.sum(axis=1)[beam]
    column = scan.cell_column[beam]
    points = np.empty(beam.size, dtype=PLY_POINT)
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
    points["time_offset_s"] = np.asarray(scan.time_offset_s)[column]
    return points


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
