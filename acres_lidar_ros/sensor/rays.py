"""The two compiled geometry passes of a scan: the world rays of the firing columns, and the
points of the returns in the sensor frame (``Scanner.rays_world`` and ``Scanner.points_sensor``)."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def sensor_points(range_m: np.ndarray, directions: np.ndarray, lens_origins: np.ndarray) -> np.ndarray:
    """``p = R d + o`` for every return slot: (n, R, 3); NaN where the range is NaN."""
    n, slots = range_m.shape
    out = np.empty((n, slots, 3))
    for i in range(n):
        for j in range(slots):
            r = range_m[i, j]
            for k in range(3):
                out[i, j, k] = r * directions[i, k] + lens_origins[i, k]
    return out


@numba.njit(cache=True, nogil=True)
def world_rays(
    T_world_sensor: np.ndarray, sub_directions_sensor: np.ndarray, lens_origins_sensor: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """World origins and directions of every sub-ray: ``R d_j`` and ``R o + t`` per column, in
    one compiled pass (a batched matmul and ``np.repeat`` cost three times as much).

    T_world_sensor (C, 4, 4), sub_directions_sensor (C, P, 3), lens_origins_sensor (C, 3)
    -> origins (C * P, 3), directions (C * P, 3).
    """
    columns, per_column, _ = sub_directions_sensor.shape
    origins = np.empty((columns * per_column, 3))
    directions = np.empty((columns * per_column, 3))
    for c in range(columns):
        T = T_world_sensor[c]
        o = lens_origins_sensor[c]
        ox = T[0, 0] * o[0] + T[0, 1] * o[1] + T[0, 2] * o[2] + T[0, 3]
        oy = T[1, 0] * o[0] + T[1, 1] * o[1] + T[1, 2] * o[2] + T[1, 3]
        oz = T[2, 0] * o[0] + T[2, 1] * o[1] + T[2, 2] * o[2] + T[2, 3]
        for k in range(per_column):
            row = c * per_column + k
            d = sub_directions_sensor[c, k]
            directions[row, 0] = T[0, 0] * d[0] + T[0, 1] * d[1] + T[0, 2] * d[2]
            directions[row, 1] = T[1, 0] * d[0] + T[1, 1] * d[1] + T[1, 2] * d[2]
            directions[row, 2] = T[2, 0] * d[0] + T[2, 1] * d[1] + T[2, 2] * d[2]
            origins[row, 0] = ox
            origins[row, 1] = oy
            origins[row, 2] = oz
    return origins, directions
