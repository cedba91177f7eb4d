"""A recorded cloud laid out in the sensor's cells: cell = column x rings + ring (docs/calibration.md, "Recordings").

The layouts read (``cloud_layout``):

* ``columns_by_rings``: rslidar_sdk's organised cloud (height = columns, width = rings, one row per
  firing column; also our XYZI, XYZIRT and XYZIRT_labels);
* ``rings_by_columns``: rslidar_sdk with ``ros_send_by_rows`` (height = rings, row ``r`` = ring
  ``r``, width = columns);
* ``ouster``: ouster_ros's grid (height = rings, row 0 = the highest beam);
* ``dense``: height 1, the returns only (rslidar_sdk's ``dense_points``, velodyne, nebula,
  hesai). A point's ring comes from its ``ring`` (or ``channel``) field, read as the elevation
  rank (rslidar_sdk, velodyne, nebula) or as the ring index (hesai, ``ring_field="index"``); its
  column from its direction. Without a ring field both come from the direction and the beam
  table (``recover_beams``); the points that fit no beam are counted, not guessed.

A cell that several points of a dense cloud fall into keeps the strongest (the Polaris's return
mode); the others are counted as ``merged``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from acres_lidar_ros.errors import RecordingError
from acres_lidar_ros.sensor.pattern import elevation_rank

LAYOUTS = ("columns_by_rings", "rings_by_columns", "ouster", "dense")
RING_FIELDS = ("rank", "index")
RING_TOLERANCE_FRACTION = 0.3
"""A point belongs to a ring when its elevation is within this share of the smallest gap between
two rings' elevations (0.38 deg for the Helios)."""
LENS_ITERATIONS = 4
"""Fixed-point steps that move a point's azimuth from the sensor centre to its lens centre."""
# field name -> (scale to seconds, relative to the header stamp?)
_TIME_FIELDS = {"timestamp": (1.0, False), "time": (1.0, True), "t": (1e-9, True), "time_stamp": (1e-9, True)}


@dataclass(frozen=True)
class BeamTable:
    """What the cells of a sensor are: ring elevations and azimuth offsets, the column azimuths and
    the lens offset (``SensorConfig``'s ``elevations_rad``, ``azimuth_offsets_rad``,
    ``azimuth_order``, ``lens_center_m``)."""

    elevations_rad: np.ndarray  # (rings,)
    azimuth_offsets_rad: np.ndarray  # (rings,)
    columns: int
    azimuth_order: str  # "cw" or "ccw"
    lens_center_m: float

    @property
    def rings(self) -> int:
        return len(self.elevations_rad)

    @property
    def column_step_rad(self) -> float:
        return 2.0 * np.pi / self.columns

    def column_azimuth_rad(self, column: np.ndarray) -> np.ndarray:
        sign = 1.0 if self.azimuth_order == "ccw" else -1.0
        return sign * self.column_step_rad * np.asarray(column, dtype=np.float64)

    def column_of_azimuth(self, alpha_c_rad: np.ndarray) -> np.ndarray:
        sign = 1.0 if self.azimuth_order == "ccw" else -1.0
        return np.mod(np.rint(sign * alpha_c_rad / self.column_step_rad).astype(np.int64), self.columns)


@dataclass(frozen=True)
class CellCloud:
    """One recorded cloud in cell order (``columns * rings`` cells).

    Attributes
    ----------
    points_sensor : (cells, 3) float64
        Sensor frame, m; NaN where the beam gave no return.
    intensity : (cells,) float32
        The cloud's intensity (reflectivity byte for ouster); 0 without a return.
    cell_time_s : (cells,) float64
        Absolute firing time of each cell, s, where the cloud carries one; NaN otherwise.
    layout : one of ``LAYOUTS``
    points_in : int
        Points with finite x, y, z in the message.
    unassigned : int
        Dense points no beam took (no ring within the tolerance, or a ring number out of range).
    merged : int
        Dense points that fell into a cell another (stronger) point already holds.
    """

    columns: int
    rings: int
    points_sensor: np.ndarray
    intensity: np.ndarray
    cell_time_s: np.ndarray
    layout: str
    points_in: int
    unassigned: int = 0
    merged: int = 0
    class_id: np.ndarray | None = (
        None  # (cells,) int16: the cloud's ``class`` field (XYZIRT_labels), -1 without a return
    )

    @property
    def valid(self) -> np.ndarray:
        return np.isfinite(self.points_sensor[:, 0])

    def column_time_s(self) -> np.ndarray:
        """(columns,) the median firing time of each column's cells (NaN where none has one)."""
        t = self.cell_time_s.reshape(self.columns, self.rings)
        out = np.full(self.columns, np.nan)
        has = np.isfinite(t).any(axis=1)
        out[has] = np.nanmedian(t[has], axis=1)
        return out


def cloud_layout(cloud: np.ndarray, columns: int, rings: int) -> str:
    """The layout of a decoded cloud (``LAYOUTS``), from its shape and fields."""
    names = set(cloud.dtype.names or ())
    missing = {"x", "y", "z"} - names
    if missing:
        raise RecordingError(f"cloud has no {', '.join(sorted(missing))} field; fields found: {sorted(names)}")
    height, width = cloud.shape
    if height == 1 or (height * width != columns * rings):
        return "dense"
    if (height, width) == (columns, rings):
        return "columns_by_rings"
    if (height, width) == (rings, columns):
        return "ouster" if {"t", "reflectivity"} <= names else "rings_by_columns"
    raise RecordingError(
        f"cloud of height {height} and width {width}: expected {columns} x {rings} (columns x rings), "
        f"{rings} x {columns} (by rows) or a dense cloud of height 1"
    )


def _times_s(flat: np.ndarray, stamp_ns: int) -> np.ndarray:
    for name, (scale, relative) in _TIME_FIELDS.items():
        if name in (flat.dtype.names or ()):
            t = flat[name].astype(np.float64) * scale
            return t + stamp_ns * 1e-9 if relative else t
    return np.full(flat.shape[0], np.nan)


def _intensity(flat: np.ndarray, layout: str) -> np.ndarray:
    name = "reflectivity" if layout == "ouster" else "intensity"
    if name not in (flat.dtype.names or ()):
        return np.zeros(flat.shape[0], np.float32)
    return np.nan_to_num(flat[name].astype(np.float32))


def cell_cloud(
    cloud: np.ndarray, table: BeamTable, stamp_ns: int, ring_field: str = "rank", source: str = "cloud"
) -> CellCloud:
    """The cells of a decoded cloud (``bag_source.RawCloud.cloud``) for the sensor ``table``."""
    if ring_field not in RING_FIELDS:
        raise RecordingError(f"ring_field {ring_field!r}: allowed {', '.join(RING_FIELDS)}")
    columns, rings = table.columns, table.rings
    layout = cloud_layout(cloud, columns, rings)
    if layout == "rings_by_columns":
        grid = cloud.T
    elif layout == "ouster":
        rank = elevation_rank(table.elevations_rad).astype(np.int64)
        ring_of_row = np.argsort(rings - 1 - rank)
        grid = np.empty((columns, rings), cloud.dtype)
        grid[:, ring_of_row] = cloud.T
    else:
        grid = cloud
    flat = np.ascontiguousarray(grid).reshape(-1)
    xyz = np.stack([flat[a].astype(np.float64) for a in "xyz"], axis=1)
    finite = np.isfinite(xyz).all(axis=1)
    times = _times_s(flat, stamp_ns)
    intensity = _intensity(flat, layout)
    if layout != "dense":
        xyz[~finite] = np.nan
        classes = None
        if "class" in (flat.dtype.names or ()):
            classes = np.where(finite, flat["class"].astype(np.int16), np.int16(-1)).astype(np.int16)
        return CellCloud(
            columns,
            rings,
            xyz,
            np.where(finite, intensity, 0).astype(np.float32),
            times,
            layout,
            int(finite.sum()),
            class_id=classes,
        )
    xyz, intensity, times = xyz[finite], intensity[finite], times[finite]
    ring_values = None
    for name in ("ring", "channel"):
        if name in (flat.dtype.names or ()):
            ring_values = flat[name][finite].astype(np.int64)
            break
    if ring_values is None:
        ring, column = recover_beams(xyz, table)
    else:
        ring = ring_values.copy()
        if ring_field == "rank":
            ring_of_rank = np.argsort(elevation_rank(table.elevations_rad)).astype(np.int64)
            inside = (ring >= 0) & (ring < rings)
            ring[inside] = ring_of_rank[ring[inside]]
        ring[(ring < 0) | (ring >= rings)] = -1
        column = np.where(ring >= 0, _column_of(xyz, table, np.maximum(ring, 0)), -1)
    return _place(xyz, intensity, times, ring, column, table, int(finite.sum()))


def _lens_azimuth(xyz: np.ndarray, delta_rad: np.ndarray, lens_m: float) -> tuple[np.ndarray, np.ndarray]:
    """Block azimuth ``alpha_c`` and elevation seen from the lens centre of a point for a ring's
    azimuth offset ``delta_rad`` (broadcast): ``p - l (cos alpha_c, sin alpha_c, 0) = R d``."""
    x, y, z = (xyz[..., k] for k in range(3))
    alpha_c = np.arctan2(y, x) - delta_rad
    for _ in range(LENS_ITERATIONS):
        qx, qy = x - lens_m * np.cos(alpha_c), y - lens_m * np.sin(alpha_c)
        alpha_c = np.arctan2(qy, qx) - delta_rad
    qx, qy = x - lens_m * np.cos(alpha_c), y - lens_m * np.sin(alpha_c)
    return alpha_c, np.arctan2(z, np.hypot(qx, qy))


def _column_of(xyz: np.ndarray, table: BeamTable, ring: np.ndarray) -> np.ndarray:
    alpha_c, _ = _lens_azimuth(xyz, table.azimuth_offsets_rad[ring], table.lens_center_m)
    return table.column_of_azimuth(alpha_c)


def ring_tolerance_rad(elevations_rad: np.ndarray) -> float:
    """``RING_TOLERANCE_FRACTION`` of the smallest gap between two rings' elevations."""
    e = np.sort(np.asarray(elevations_rad, dtype=np.float64))
    gaps = np.diff(e)
    return float(RING_TOLERANCE_FRACTION * gaps.min()) if gaps.size else float(np.deg2rad(1.0))


def recover_beams(xyz: np.ndarray, table: BeamTable) -> tuple[np.ndarray, np.ndarray]:
    """Each point's beam from its direction: (ring, column), ring -1 where no ring fits.

    For every ring the point's block azimuth and elevation are taken from the lens centre
    (``_lens_azimuth``); the ring is the one whose elevation is nearest, if within
    ``ring_tolerance_rad``; the column is the nearest block azimuth.

    Parameters
    ----------
    xyz : (n, 3) float64, sensor frame, m
    """
    xyz = np.asarray(xyz, dtype=np.float64)
    if xyz.shape[0] == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    alpha_c, elevation = _lens_azimuth(xyz[:, None, :], table.azimuth_offsets_rad[None, :], table.lens_center_m)
    miss = np.abs(elevation - table.elevations_rad[None, :])
    ring = np.argmin(miss, axis=1)
    rows = np.arange(xyz.shape[0])
    ok = miss[rows, ring] <= ring_tolerance_rad(table.elevations_rad)
    column = table.column_of_azimuth(alpha_c[rows, ring])
    return np.where(ok, ring, -1), np.where(ok, column, -1)


def _place(
    xyz: np.ndarray,
    intensity: np.ndarray,
    times: np.ndarray,
    ring: np.ndarray,
    column: np.ndarray,
    table: BeamTable,
    points_in: int,
) -> CellCloud:
    columns, rings = table.columns, table.rings
    cells = columns * rings
    ok = ring >= 0
    cell = column[ok] * rings + ring[ok]
    # strongest first, so the first point of each cell wins
    order = np.lexsort((-intensity[ok], cell))
    cell_sorted = cell[order]
    first = (
        np.concatenate([[True], cell_sorted[1:] != cell_sorted[:-1]]) if cell_sorted.size else cell_sorted.astype(bool)
    )
    take = np.flatnonzero(ok)[order[first]]
    points = np.full((cells, 3), np.nan)
    out_intensity = np.zeros(cells, np.float32)
    out_times = np.full(cells, np.nan)
    points[cell_sorted[first]] = xyz[take]
    out_intensity[cell_sorted[first]] = intensity[take]
    out_times[cell_sorted[first]] = times[take]
    return CellCloud(
        columns,
        rings,
        points,
        out_intensity,
        out_times,
        "dense",
        points_in,
        unassigned=int((~ok).sum()),
        merged=int(ok.sum() - first.sum()),
    )
