"""Which echoes may become points: the validity windows of each beam (the attribute list, "Field of view,
range and orientation"), on top of the spec's detection.

The spec detects an echo when ``S' >= S_T`` and ``R_min <= R_e <= R_max``. The range condition is
the window of this module, and the attribute list widens it to:

* **the range band or the beam's range region**: ``min_range_m .. range_m`` (the attribute list's
  ``nearRangeM`` / ``farRangeM``); with ``ranges_min_m`` / ``ranges_max_m`` given, the region the
  beam's emitter picks with its ``range_id`` replaces the band (``range_m`` still ends the
  trace, so the far limit is at most ``range_m``);
* **the valid azimuth window**: a beam whose firing angle (tick position plus the emitter's
  azimuth, clockwise from the sweep's start ``scan_start_azimuth_deg``, which is the attribute list's start
  azimuth offset, so the angle is measured before the offset; ``sensor.emitters.firing_angle_rad``) lies outside
  ``valid_start_azimuth_deg .. valid_end_azimuth_deg`` gives no point. The window is half-open,
  ``[start, start + width)``, with ``width = end - start``, plus 360 deg when the start is above
  the end (it wraps through 360); ``0 .. 360`` is the whole turn and ``start == end`` is empty.
  Angles are compared in degrees rounded to 1e-9 deg, so a firing exactly on the start is in
  and one exactly on the end is out;
* **the separation near limit** (``separation_near_limit``): a firing's first return is
  measured against the sensor itself, so a beam whose nearest echo that the detector sees is
  nearer than ``min_return_separation_m`` reports nothing at all.

A window drops echoes after they are formed and after their noise numbers are drawn: it never
changes the numbers, the echoes or the points of any other beam, and the echoes it drops keep
their reason (``ScanEchoes.outside_window``, the bits below) for the outputs that report them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba
import numpy as np

from acres_lidar_ros.config.sensors import SensorConfig
from acres_lidar_ros.errors import ConfigError

# Bits of ``outside_window``: why a window dropped an echo (0: inside every window).
WINDOW_NEAR = 1
"""Nearer than the near limit of the beam's band or range region."""
WINDOW_FAR = 2
"""Farther than the far limit of the beam's band or range region."""
WINDOW_AZIMUTH = 4
"""The beam fired outside the valid azimuth window."""
WINDOW_SEPARATION = 8
"""The beam's first echo lies inside the separation near limit (the whole beam is dropped)."""

_ANGLE_DECIMALS = 9


@dataclass(frozen=True)
class CellWindows:
    """The windows of every beam (cell) of a scan.

    Attributes
    ----------
    near_m, far_m : (cells,) float64
        Range window of each beam, m: the band, or the region of its range id.
    azimuth_inside : (cells,) bool
        Whether the beam fires inside the valid azimuth window.
    separation_m : float
        The separation near limit, m (0 when ``separation_near_limit`` is off).
    """

    near_m: np.ndarray
    far_m: np.ndarray
    azimuth_inside: np.ndarray
    separation_m: float

    @classmethod
    def build(cls, config: SensorConfig, firing_angle_rad: np.ndarray, range_id: np.ndarray | None) -> CellWindows:
        """The windows of the beams whose firing angles (``firing_angle_rad``, rad) and range ids
        are given: two (cells,) arrays; ``range_id`` None is region 0 for every beam.

        Raises
        ------
        ConfigError
            For a range id that is not below ``max(range_count, 1)``.
        """
        w = config.windows
        angle = np.asarray(firing_angle_rad, dtype=np.float64)
        ids = np.zeros(angle.shape, np.int64) if range_id is None else np.asarray(range_id, dtype=np.int64)
        if ids.shape != angle.shape:
            raise ValueError(f"range_id {ids.shape} and firing_angle_rad {angle.shape} must have one entry per beam")
        bad = np.flatnonzero((ids < 0) | (ids >= w.regions))
        if bad.size:
            raise ConfigError(
                f"range_id = {int(ids[bad[0]])} (beam {int(bad[0])}) is not below lidar.range_count = "
                f"{w.range_count}{' (0 counts as 1)' if w.range_count == 0 else ''}"
            )
        if w.ranges_min_m is None or w.ranges_max_m is None:
            near = np.full(angle.shape, config.min_range_m)
            far = np.full(angle.shape, config.range_m)
        else:
            near = w.ranges_min_m[ids]
            far = np.minimum(w.ranges_max_m[ids], config.range_m)
        return cls(
            near_m=near,
            far_m=far,
            azimuth_inside=azimuth_inside(angle, w.valid_start_azimuth_rad, w.valid_end_azimuth_rad),
            separation_m=config.min_return_separation_m if w.separation_near_limit else 0.0,
        )

    @classmethod
    def band(cls, config: SensorConfig, cells: int) -> CellWindows:
        """The spec's windows alone: the band ``min_range_m .. range_m`` for every beam."""
        return cls(
            near_m=np.full(cells, config.min_range_m),
            far_m=np.full(cells, config.range_m),
            azimuth_inside=np.ones(cells, bool),
            separation_m=0.0,
        )

    @property
    def cells(self) -> int:
        return int(self.near_m.size)

    def outside(self, cell: np.ndarray, range_m: np.ndarray, seen: np.ndarray) -> np.ndarray:
        """Why each echo is outside a window: (e,) uint8 of the ``WINDOW_*`` bits (0: inside).

        Parameters
        ----------
        cell : (e,) int64
            Beam of each echo; beams in cell order, echoes in range order within a beam.
        range_m : (e,) float64
            ``R_e`` of each echo, m.
        seen : (e,) bool
            Whether the detector sees the echo (its signal passes the detection test): the
            separation near limit looks at the nearest such echo of each beam.
        """
        return self.separation_bits(cell, range_m, seen, self.range_bits(cell, range_m))

    def range_bits(self, cell: np.ndarray, range_m: np.ndarray) -> np.ndarray:
        """The bits of ``outside`` that need no detection (near, far, azimuth): (e,) uint8 of
        the echoes' ``cell`` and ``range_m`` (as ``outside``); formed per block before the stamp."""
        return _range_bits(
            np.asarray(cell, dtype=np.int64),
            np.asarray(range_m, dtype=np.float64),
            self.near_m,
            self.far_m,
            self.azimuth_inside,
        )

    def separation_bits(self, cell: np.ndarray, range_m: np.ndarray, seen: np.ndarray, bits: np.ndarray) -> np.ndarray:
        """``bits`` (``range_bits``) with the separation near limit's bit added (as ``outside``,
        which is ``separation_bits`` of ``range_bits``); ``bits`` itself without that limit."""
        if self.separation_m <= 0.0:
            return bits
        blocked = separation_blocked(cell, range_m, seen, self.separation_m)
        return bits | np.where(blocked, WINDOW_SEPARATION, 0).astype(np.uint8)


def azimuth_inside(firing_angle_rad: np.ndarray, start_rad: float, end_rad: float) -> np.ndarray:
    """Whether each firing angle lies in the valid azimuth window ``[start, start + width)``
    (see the module notes): (n,) bool of (n,) angles, rad, clockwise from forward."""
    start_deg = round(math.degrees(start_rad), _ANGLE_DECIMALS)
    end_deg = round(math.degrees(end_rad), _ANGLE_DECIMALS)
    width_deg = end_deg - start_deg + (360.0 if start_deg > end_deg else 0.0)
    angle = np.asarray(firing_angle_rad, dtype=np.float64)
    if width_deg >= 360.0:
        return np.ones(angle.shape, bool)
    angle_deg = np.mod(np.round(np.mod(np.degrees(angle), 360.0), _ANGLE_DECIMALS), 360.0)
    return np.mod(angle_deg - start_deg, 360.0) < width_deg


@numba.njit(cache=True, nogil=True)
def _range_bits(cell, range_m, near_m, far_m, azimuth_inside):
    """``CellWindows.range_bits`` in one pass (a NaN range is in both range windows)."""
    out = np.empty(cell.shape[0], np.uint8)
    for i in range(cell.shape[0]):
        c = cell[i]
        r = range_m[i]
        bits = 0
        if r < near_m[c]:
            bits |= WINDOW_NEAR
        if r > far_m[c]:
            bits |= WINDOW_FAR
        if not azimuth_inside[c]:
            bits |= WINDOW_AZIMUTH
        out[i] = bits
    return out


def separation_blocked(cell: np.ndarray, range_m: np.ndarray, seen: np.ndarray, separation_m: float) -> np.ndarray:
    """The echoes of the beams whose nearest seen echo is nearer than ``separation_m``: (e,) bool.

    ``cell`` is in beam order with each beam's echoes in range order (so a beam's first seen
    echo is its nearest)."""
    cell = np.asarray(cell, dtype=np.int64)
    blocked = np.zeros(cell.size, bool)
    at = np.flatnonzero(seen)
    if at.size == 0:
        return blocked
    seen_cell = cell[at]
    first = at[np.r_[True, seen_cell[1:] != seen_cell[:-1]]]  # each beam's nearest seen echo
    near_cells = cell[first[range_m[first] < separation_m]]
    if near_cells.size:
        blocked = np.isin(cell, near_cells)
    return blocked
