"""What a set of scans says about its sensor (the spec's ``lidar_stats.py``; docs/calibration.md, "Measures").

* ``fit_beam_table``: each ring's elevation and azimuth offset from its points, seen from the lens
  centre of their column, with standard errors;
* ``body_stats``: the body in the scans (a return nearer than ``BODY_RANGE_M`` is always the body,
  spec "Self-Return Mask") as the four planes of a self-return table, and the body mask;
* ``return_rate_per_ring`` and ``points_per_scan``.

All of them take the scans in the sensor's cells (``recorded_scans.RecordedScan``) and its
``cloud_cells.BeamTable``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from acres_lidar_ros.errors import RecordingError
from acres_lidar_ros.recordings.cloud_cells import BeamTable
from acres_lidar_ros.recordings.recorded_scans import RecordedScan

BODY_RANGE_M = 1.6
"""The spec: "A return nearer than 1.6 m is always the body"."""
BODY_MASK_P_SELF = 0.05
"""A cell is in the body mask when the body returns in at least this share of the scans (one in 20): the
cells the body reaches at all, as the spec counts them ("20 711 cells give a return from the roof rack"),
less the rare stray near return of a long recording."""
LOWER_RINGS_MAX_ELEVATION_DEG = -8.0
"""The spec's ring groups: rings at or below -8 deg ("lower") and above ("upper")."""


def _require(scans: Sequence[RecordedScan]) -> None:
    if not scans:
        raise RecordingError("no scans to measure: the recording has none that the poses cover")


def lens_origins_m(table: BeamTable) -> np.ndarray:
    """(columns, 3) the lens centre of each column, ``l (cos alpha_c, sin alpha_c, 0)``."""
    alpha = table.column_azimuth_rad(np.arange(table.columns))
    return table.lens_center_m * np.stack([np.cos(alpha), np.sin(alpha), np.zeros_like(alpha)], axis=1)


def cell_ranges_m(points_sensor: np.ndarray, table: BeamTable) -> np.ndarray:
    """(cells,) range of each return from its lens centre, ``|p - o|``; NaN without a return."""
    p = np.asarray(points_sensor, dtype=np.float64).reshape(table.columns, table.rings, 3)
    return np.linalg.norm(p - lens_origins_m(table)[:, None, :], axis=2).reshape(-1)


def stack_ranges(scans: Sequence[RecordedScan], table: BeamTable) -> np.ndarray:
    """(scans, cells) ranges of every scan."""
    return np.stack([cell_ranges_m(s.cells.points_sensor, table) for s in scans])


@dataclass(frozen=True)
class BeamFit:
    """Each ring's fitted elevation and azimuth offset (rad), their standard errors and point counts.

    Rings without a point have NaN values and count 0.
    """

    elevation_rad: np.ndarray
    elevation_se_rad: np.ndarray
    azimuth_offset_rad: np.ndarray
    azimuth_offset_se_rad: np.ndarray
    points: np.ndarray

    def as_dict(self) -> dict:
        """Degrees, None for a ring without the points to give a value (strict JSON has no NaN)."""
        return {
            "elevations_deg": finite_or_none(np.rad2deg(self.elevation_rad)),
            "elevation_se_deg": finite_or_none(np.rad2deg(self.elevation_se_rad)),
            "azimuth_offsets_deg": finite_or_none(np.rad2deg(self.azimuth_offset_rad)),
            "azimuth_offset_se_deg": finite_or_none(np.rad2deg(self.azimuth_offset_se_rad)),
            "points": self.points.tolist(),
        }


def finite_or_none(values: np.ndarray) -> list[float | None]:
    """A list of floats with None for each value that is not finite."""
    return [float(v) if np.isfinite(v) else None for v in np.asarray(values, dtype=np.float64)]


def _mean_and_se(values: np.ndarray, ring: np.ndarray, rings: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = np.bincount(ring, minlength=rings).astype(np.float64)
    total = np.bincount(ring, weights=values, minlength=rings)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = total / n
        squares = np.bincount(ring, weights=(values - mean[ring]) ** 2, minlength=rings)
        se = np.sqrt(squares / (n - 1)) / np.sqrt(n)
    se[n < 2] = np.nan
    return mean, se, n.astype(np.int64)


def fit_beam_table(scans: Sequence[RecordedScan], table: BeamTable, min_range_m: float = 0.0) -> BeamFit:
    """Each ring's elevation and azimuth offset from the returns at ``min_range_m`` or farther (the body's
    returns too: they lie on their beams like any other).

    A return ``p`` of column ``c`` lies on its beam ``p = R d + o`` with ``o`` the column's lens
    centre: its elevation is ``atan2(q_z, |q_xy|)`` and its azimuth offset ``atan2(q_y, q_x) -
    alpha_c`` (wrapped to [-pi, pi)) for ``q = p - o``, independent of the range and its noise.
    The ring's value is the mean over its points, the standard error the sample standard deviation
    over the square root of the count.
    """
    _require(scans)
    columns, rings = table.columns, table.rings
    o = lens_origins_m(table)
    alpha_c = table.column_azimuth_rad(np.arange(columns))
    elevations, offsets, ring_ids = [], [], []
    for scan in scans:
        p = scan.cells.points_sensor.reshape(columns, rings, 3)
        q = p - o[:, None, :]
        r = np.linalg.norm(q, axis=2)
        keep = np.isfinite(r) & (r >= min_range_m)
        qk = q[keep]
        col, ring = np.nonzero(keep)
        elevations.append(np.arctan2(qk[:, 2], np.hypot(qk[:, 0], qk[:, 1])))
        offsets.append(np.mod(np.arctan2(qk[:, 1], qk[:, 0]) - alpha_c[col] + np.pi, 2 * np.pi) - np.pi)
        ring_ids.append(ring)
    ring_all = np.concatenate(ring_ids)
    e, e_se, n = _mean_and_se(np.concatenate(elevations), ring_all, rings)
    a, a_se, _ = _mean_and_se(np.concatenate(offsets), ring_all, rings)
    return BeamFit(e, e_se, a, a_se, n)


@dataclass(frozen=True)
class BodyStats:
    """The body in the scans, per cell, as the planes of a self-return table (``body.self_returns``).

    ``p_self``: share of scans with a return nearer than ``BODY_RANGE_M``; ``range_m`` and
    ``intensity``: the median range (from the lens centre) and intensity of those returns (0 where
    none); ``p_block``: in a cell the body returns from, the share of scans without any return
    (the body stopped the beam), so ``p_self + p_block <= 1``.
    """

    p_self: np.ndarray
    range_m: np.ndarray
    intensity: np.ndarray
    p_block: np.ndarray
    scans: int

    @property
    def mask(self) -> np.ndarray:
        """(cells,) bool: the body returns in at least ``BODY_MASK_P_SELF`` of the scans."""
        return self.p_self >= BODY_MASK_P_SELF

    def planes(self) -> np.ndarray:
        """(4, cells) float32, the table file's planes in order."""
        return np.stack([self.p_self, self.range_m, self.intensity, self.p_block]).astype(np.float32)


def body_stats(scans: Sequence[RecordedScan], table: BeamTable) -> BodyStats:
    _require(scans)
    ranges = stack_ranges(scans, table)
    intensity = np.stack([s.cells.intensity for s in scans]).astype(np.float64)
    body = ranges < BODY_RANGE_M  # NaN compares False
    count = body.sum(axis=0)
    p_self = count / len(scans)
    r_med, i_med = np.zeros(ranges.shape[1]), np.zeros(ranges.shape[1])
    cells = count > 0
    if cells.any():
        r_med[cells] = np.nanmedian(np.where(body, ranges, np.nan)[:, cells], axis=0)
        i_med[cells] = np.nanmedian(np.where(body, intensity, np.nan)[:, cells], axis=0)
    none = ~np.isfinite(ranges)
    p_block = np.where(count > 0, none.sum(axis=0) / len(scans), 0.0)
    return BodyStats(p_self, r_med, i_med, p_block, len(scans))


def mask_iou(a: np.ndarray, b: np.ndarray) -> float:
    """Intersection over union of two cell masks; 1 when both are empty (they agree)."""
    union = int(np.count_nonzero(a | b))
    return 1.0 if union == 0 else int(np.count_nonzero(a & b)) / union


def return_rate_per_ring(scans: Sequence[RecordedScan], table: BeamTable) -> np.ndarray:
    """(rings,) percent of a ring's beams with a return, over all scans."""
    _require(scans)
    valid = np.stack([s.cells.valid.reshape(table.columns, table.rings) for s in scans])
    return 100.0 * valid.mean(axis=(0, 1))


def points_per_scan(scans: Sequence[RecordedScan]) -> np.ndarray:
    """(scans,) returns in each scan."""
    return np.array([int(s.cells.valid.sum()) for s in scans], dtype=np.int64)


def lower_rings(elevations_rad: np.ndarray) -> np.ndarray:
    """(rings,) bool: rings at or below ``LOWER_RINGS_MAX_ELEVATION_DEG``."""
    return np.rad2deg(np.asarray(elevations_rad, dtype=np.float64)) <= LOWER_RINGS_MAX_ELEVATION_DEG + 1e-9
