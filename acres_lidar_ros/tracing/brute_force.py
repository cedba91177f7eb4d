"""The brute-force reference tracer: Möller–Trumbore against every triangle, compiled (numba).

A linear scan with no acceleration structure: each ray is tested against all ``t`` triangles and
keeps the nearest hit, so its cost per ray grows as ``O(t)``. It is the correctness reference of
the cost-against-scene-size benchmark (``acres-lidar bench --scaling``) and the slow mode of the
deadline benchmark.

The corners are float32 numbers (Embree's input, exact); the arithmetic is float64. Rays are
processed in blocks of ``RAY_BLOCK`` per pass over the triangles, so each triangle is read from
memory once per block; blocks run in parallel (numba ``prange``). A ray hits a triangle where
``t > 0`` and the barycentric ``u >= 0, v >= 0, u + v <= 1`` (both faces count, as in Embree).
Of equal nearest distances the lowest triangle index wins.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from acres_lidar_ros.errors import ConfigError

RAY_BLOCK = 8  # rays per pass over the triangles
NO_TRIANGLE = -1


# 15 scalars (five 3-vectors), not records: inlined in _nearest's innermost loop, once per ray and triangle.
@njit(cache=True, inline="always")
def _mt(ox, oy, oz, dx, dy, dz, ax, ay, az, e1x, e1y, e1z, e2x, e2y, e2z):
    """Möller–Trumbore: the ray parameter of the hit, or inf where the ray misses the triangle."""
    px = dy * e2z - dz * e2y
    py = dz * e2x - dx * e2z
    pz = dx * e2y - dy * e2x
    det = e1x * px + e1y * py + e1z * pz
    if det == 0.0:
        return np.inf
    inv = 1.0 / det
    sx, sy, sz = ox - ax, oy - ay, oz - az
    u = (sx * px + sy * py + sz * pz) * inv
    if u < 0.0 or u > 1.0:
        return np.inf
    qx = sy * e1z - sz * e1y
    qy = sz * e1x - sx * e1z
    qz = sx * e1y - sy * e1x
    v = (dx * qx + dy * qy + dz * qz) * inv
    if v < 0.0 or u + v > 1.0:
        return np.inf
    t = (e2x * qx + e2y * qy + e2z * qz) * inv
    return t if t > 0.0 else np.inf


@njit(cache=True, parallel=True)
def _nearest(origins, directions, corners, out_t, out_tri):
    n = origins.shape[0]
    m = corners.shape[0]
    n_blocks = (n + RAY_BLOCK - 1) // RAY_BLOCK
    for b in prange(n_blocks):
        first = b * RAY_BLOCK
        last = min(first + RAY_BLOCK, n)
        best_t = np.full(RAY_BLOCK, np.inf)
        best_k = np.full(RAY_BLOCK, NO_TRIANGLE, np.int64)
        for k in range(m):
            ax = np.float64(corners[k, 0])
            ay = np.float64(corners[k, 1])
            az = np.float64(corners[k, 2])
            e1x = np.float64(corners[k, 3]) - ax
            e1y = np.float64(corners[k, 4]) - ay
            e1z = np.float64(corners[k, 5]) - az
            e2x = np.float64(corners[k, 6]) - ax
            e2y = np.float64(corners[k, 7]) - ay
            e2z = np.float64(corners[k, 8]) - az
            for i in range(first, last):
                t = _mt(
                    origins[i, 0],
                    origins[i, 1],
                    origins[i, 2],
                    directions[i, 0],
                    directions[i, 1],
                    directions[i, 2],
                    ax,
                    ay,
                    az,
                    e1x,
                    e1y,
                    e1z,
                    e2x,
                    e2y,
                    e2z,
                )
                if t < best_t[i - first]:
                    best_t[i - first] = t
                    best_k[i - first] = k
        for i in range(first, last):
            out_t[i] = best_t[i - first]
            out_tri[i] = best_k[i - first]


@njit(cache=True, parallel=True)
def _plane_t(origins, directions, corners, tri, out_t):
    for i in prange(origins.shape[0]):
        k = tri[i]
        if k < 0:
            out_t[i] = np.inf
            continue
        ax, ay, az = np.float64(corners[k, 0]), np.float64(corners[k, 1]), np.float64(corners[k, 2])
        e1x, e1y, e1z = np.float64(corners[k, 3]) - ax, np.float64(corners[k, 4]) - ay, np.float64(corners[k, 5]) - az
        e2x, e2y, e2z = np.float64(corners[k, 6]) - ax, np.float64(corners[k, 7]) - ay, np.float64(corners[k, 8]) - az
        nx = e1y * e2z - e1z * e2y
        ny = e1z * e2x - e1x * e2z
        nz = e1x * e2y - e1y * e2x
        den = nx * directions[i, 0] + ny * directions[i, 1] + nz * directions[i, 2]
        num = nx * (ax - origins[i, 0]) + ny * (ay - origins[i, 1]) + nz * (az - origins[i, 2])
        out_t[i] = num / den if den != 0.0 else np.inf


def _rays(origins: np.ndarray, directions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    o = np.ascontiguousarray(origins, np.float64)
    d = np.ascontiguousarray(directions, np.float64)
    if o.ndim != 2 or o.shape[1] != 3 or d.shape != o.shape:
        raise ConfigError(f"origins {o.shape} and directions {d.shape}: must both have shape (n, 3)")
    return o, d


def _corners(corners: np.ndarray) -> np.ndarray:
    c = np.ascontiguousarray(corners, np.float32)
    if c.ndim != 2 or c.shape[1] != 9:
        raise ConfigError(f"corners {c.shape}: must have shape (t, 9), the corners a, b, c of each triangle")
    return c


def brute_force_nearest(
    origins: np.ndarray, directions: np.ndarray, corners: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Nearest hit of each ray over all triangles.

    Parameters
    ----------
    origins, directions : (n, 3) float64
        Ray origins and directions (the ray parameter is in units of ``|direction|``).
    corners : (t, 9) float32
        Corners ``a, b, c`` of each triangle (``ScalingScene.corners``).

    Returns
    -------
    t : (n,) float64, the ray parameter of the nearest hit, inf where none
    triangle : (n,) int64, its triangle index, ``NO_TRIANGLE`` where none
    """
    o, d = _rays(origins, directions)
    c = _corners(corners)
    t = np.empty(len(o))
    tri = np.empty(len(o), np.int64)
    _nearest(o, d, c, t, tri)
    return t, tri


def plane_distance(
    origins: np.ndarray, directions: np.ndarray, corners: np.ndarray, triangle: np.ndarray
) -> np.ndarray:
    """Ray parameter (float64) where each ray meets the plane of its ``triangle`` (n,) int; inf for
    ``NO_TRIANGLE`` or a ray parallel to the plane. This gives another tracer's hit (Embree's
    float32 ``t_hit``) its float64 distance on the very triangle it found."""
    o, d = _rays(origins, directions)
    c = _corners(corners)
    tri = np.ascontiguousarray(triangle, np.int64)
    if tri.shape != (len(o),) or (len(tri) and (tri.max() >= len(c) or tri.min() < NO_TRIANGLE)):
        raise ConfigError(f"triangle: must be {len(o)} indices below {len(c)} or {NO_TRIANGLE}")
    out = np.empty(len(o))
    _plane_t(o, d, c, tri, out)
    return out


__all__ = ["NO_TRIANGLE", "RAY_BLOCK", "brute_force_nearest", "plane_distance"]
