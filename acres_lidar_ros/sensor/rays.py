"""The two compiled geometry passes of a scan: the world rays of the firing ticks (or cells), and
the points of the returns in the sensor frame (``BeamPattern.rays_world`` and ``BeamPattern.points_sensor``)."""

from __future__ import annotations

import numba
import numpy as np


def world_rays(
    T_world_sensor: np.ndarray, sub_directions_sensor: np.ndarray, origins_sensor: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """World origins and unit directions of every sub-ray: two (C * E * S, 3) float64 arrays.

    Parameters
    ----------
    T_world_sensor : (C, 4, 4) float64
        One pose per group: a column (all its emitters at one time) or a single cell.
    sub_directions_sensor : (C, E, S, 3) float64
        The sub-ray directions of the group's E beams.
    origins_sensor : (C, E, 3) float64
        Each beam's origin.

    Row ``(c E + e) S + j`` is sub-ray ``j`` of beam ``e`` of group ``c``.
    """
    c, e, s, _ = sub_directions_sensor.shape
    return _world_rays(
        np.ascontiguousarray(T_world_sensor),
        np.ascontiguousarray(sub_directions_sensor).reshape(c, e * s, 3),
        np.ascontiguousarray(origins_sensor),
    )


@numba.njit(cache=True, nogil=True)
def sensor_points(range_m: np.ndarray, directions: np.ndarray, origins: np.ndarray) -> np.ndarray:
    """``p = R d + o`` for every return slot: (n, R, 3) float64 from the (n, R) ranges and the
    (n, 3) directions and origins; NaN where the range is NaN."""
    n, slots = range_m.shape
    out = np.empty((n, slots, 3))
    for i in range(n):
        for j in range(slots):
            r = range_m[i, j]
            for k in range(3):
                out[i, j, k] = r * directions[i, k] + origins[i, k]
    return out


@numba.njit(cache=True, nogil=True)
def _world_rays(T_world_sensor, sub_directions_sensor, origins_sensor):
    """World origins and directions of every sub-ray: ``R d_j`` and ``R o + t``, in one compiled
    pass (a batched matmul and ``np.repeat`` cost three times as much).

    T_world_sensor (C, 4, 4), sub_directions_sensor (C, P, 3), origins_sensor (C, E, 3) with
    P = E S -> origins (C * P, 3), directions (C * P, 3).
    """
    groups, per_group, _ = sub_directions_sensor.shape
    beams = origins_sensor.shape[1]
    per_beam = per_group // beams
    origins = np.empty((groups * per_group, 3))
    directions = np.empty((groups * per_group, 3))
    for c in range(groups):
        T = T_world_sensor[c]
        for b in range(beams):
            o = origins_sensor[c, b]
            ox = T[0, 0] * o[0] + T[0, 1] * o[1] + T[0, 2] * o[2] + T[0, 3]
            oy = T[1, 0] * o[0] + T[1, 1] * o[1] + T[1, 2] * o[2] + T[1, 3]
            oz = T[2, 0] * o[0] + T[2, 1] * o[1] + T[2, 2] * o[2] + T[2, 3]
            for k in range(b * per_beam, (b + 1) * per_beam):
                row = c * per_group + k
                d = sub_directions_sensor[c, k]
                directions[row, 0] = T[0, 0] * d[0] + T[0, 1] * d[1] + T[0, 2] * d[2]
                directions[row, 1] = T[1, 0] * d[0] + T[1, 1] * d[1] + T[1, 2] * d[2]
                directions[row, 2] = T[2, 0] * d[0] + T[2, 1] * d[1] + T[2, 2] * d[2]
                origins[row, 0] = ox
                origins[row, 1] = oy
                origins[row, 2] = oz
    return origins, directions


@numba.njit(cache=True, nogil=True)
def mounted_poses(positions_m: np.ndarray, R_world_base: np.ndarray, T_base_sensor: np.ndarray) -> np.ndarray:
    """``T_world_sensor = T_world_base T_base_sensor`` of many firings in one compiled pass:
    (n, 4, 4) float64 from the base's (n, 3) positions and (n, 3, 3) rotations (a batched
    ``matmul`` of 4 x 4 matrices costs ten times as much for a scan's cells)."""
    n = positions_m.shape[0]
    out = np.zeros((n, 4, 4))
    for i in range(n):
        R = R_world_base[i]
        for r in range(3):
            for c in range(3):
                out[i, r, c] = (
                    R[r, 0] * T_base_sensor[0, c] + R[r, 1] * T_base_sensor[1, c] + R[r, 2] * T_base_sensor[2, c]
                )
            out[i, r, 3] = (
                R[r, 0] * T_base_sensor[0, 3] + R[r, 1] * T_base_sensor[1, 3] + R[r, 2] * T_base_sensor[2, 3]
            ) + positions_m[i, r]
        out[i, 3, 3] = 1.0
    return out
