"""Triangle meshes of the primitive shapes a scene is made of.

Every function returns ``(vertices_m, triangles)``: ``vertices_m`` (v, 3) float64 in the
shape's own frame, ``triangles`` (t, 3) int64 indices. Closed shapes are wound so that the
right-hand normal ``(b - a) x (c - a)`` points out of the shape (the tracer relies on it to
tell a ray that leaves a foliage proxy from one that enters it).
"""

from __future__ import annotations

import functools

import numpy as np


def orient_outward(vertices_m: np.ndarray, triangles: np.ndarray, inside_m: np.ndarray) -> np.ndarray:
    """Triangles of a star-shaped closed mesh, flipped where their normal points at ``inside_m``.

    Parameters
    ----------
    vertices_m : (v, 3) float64
    triangles : (t, 3) int64
    inside_m : (3,) float64
        A point from which every face is visible (the centre of a convex shape).

    Returns
    -------
    (t, 3) int64, a new array.
    """
    a, b, c = (vertices_m[triangles[:, k]] for k in range(3))
    normal = np.cross(b - a, c - a)
    centroid = (a + b + c) / 3.0
    inward = np.einsum("ij,ij->i", normal, centroid - inside_m) < 0.0
    out = triangles.copy()
    out[inward] = out[inward][:, ::-1]
    return out


def box(size_m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Box of ``size_m`` (3,) = (lx, ly, lz) with its base centre at the origin (z from 0 to lz)."""
    lx, ly, lz = (float(s) for s in size_m)
    corners = np.array([[sx * lx / 2, sy * ly / 2, sz * lz] for sz in (0, 1) for sy in (-1, 1) for sx in (-1, 1)])
    # Corner index = 4 * z + 2 * y + x.
    quads = [(0, 1, 3, 2), (4, 5, 7, 6), (0, 1, 5, 4), (2, 3, 7, 6), (0, 2, 6, 4), (1, 3, 7, 5)]
    tris = np.array([t for q in quads for t in ((q[0], q[1], q[2]), (q[0], q[2], q[3]))], np.int64)
    return corners, orient_outward(corners, tris, np.array([0.0, 0.0, lz / 2]))


def gable_roof(size_m: np.ndarray, roof_height_m: float) -> tuple[np.ndarray, np.ndarray]:
    """Gable roof prism on a ``(lx, ly)`` footprint, ridge along x, base at z = 0."""
    lx, ly = float(size_m[0]), float(size_m[1])
    h = float(roof_height_m)
    v = np.array(
        [
            [-lx / 2, -ly / 2, 0],
            [lx / 2, -ly / 2, 0],
            [lx / 2, ly / 2, 0],
            [-lx / 2, ly / 2, 0],
            [-lx / 2, 0, h],
            [lx / 2, 0, h],
        ],
        float,
    )
    tris = np.array([[0, 1, 2], [0, 2, 3], [0, 1, 5], [0, 5, 4], [3, 2, 5], [3, 5, 4], [0, 4, 3], [1, 2, 5]], np.int64)
    return v, orient_outward(v, tris, np.array([0.0, 0.0, h / 3]))


def cylinder(
    radius_m: float, height_m: float, segments: int, cone_height_m: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """Closed cylinder on the z axis from z = 0 to ``height_m``, with an optional cone on top."""
    angle = 2.0 * np.pi * np.arange(segments) / segments
    ring = np.stack([radius_m * np.cos(angle), radius_m * np.sin(angle)], axis=1)
    bottom = np.column_stack([ring, np.zeros(segments)])
    top = np.column_stack([ring, np.full(segments, float(height_m))])
    apex_z = height_m + cone_height_m
    v = np.vstack([bottom, top, [[0.0, 0.0, 0.0]], [[0.0, 0.0, apex_z]]])
    i = np.arange(segments)
    j = (i + 1) % segments
    cb, ct = 2 * segments, 2 * segments + 1
    tris = np.concatenate(
        [
            np.stack([i, j, segments + j], 1),
            np.stack([i, segments + j, segments + i], 1),
            np.stack([np.full(segments, cb), j, i], 1),
            np.stack([np.full(segments, ct), segments + i, segments + j], 1),
        ]
    ).astype(np.int64)
    return v, orient_outward(v, tris, np.array([0.0, 0.0, min(height_m, apex_z) / 2]))


@functools.lru_cache(maxsize=4)
def _unit_icosphere(subdivisions: int) -> tuple[np.ndarray, np.ndarray]:
    # Icosahedron with a vertex at each pole, so a ray down the z axis meets a vertex.
    z = 1.0 / np.sqrt(5.0)
    r = 2.0 / np.sqrt(5.0)
    upper = [[r * np.cos(2 * np.pi * k / 5), r * np.sin(2 * np.pi * k / 5), z] for k in range(5)]
    lower = [[r * np.cos(2 * np.pi * (k + 0.5) / 5), r * np.sin(2 * np.pi * (k + 0.5) / 5), -z] for k in range(5)]
    v = np.array([[0, 0, 1.0], *upper, *lower, [0, 0, -1.0]])
    tris = []
    for k in range(5):
        u0, u1 = 1 + k, 1 + (k + 1) % 5
        l0, l1 = 6 + k, 6 + (k + 1) % 5
        tris += [(0, u0, u1), (u0, l0, u1), (u1, l0, l1), (11, l1, l0)]
    t = np.array(tris, np.int64)
    for _ in range(subdivisions):
        verts = list(v)
        mid_cache: dict[tuple[int, int], int] = {}

        def mid(a: int, b: int, verts: list = verts, mid_cache: dict = mid_cache) -> int:
            key = (min(a, b), max(a, b))
            if key not in mid_cache:
                m = verts[a] + verts[b]
                verts.append(m / np.linalg.norm(m))
                mid_cache[key] = len(verts) - 1
            return mid_cache[key]

        new = []
        for a, b, c in t:
            ab, bc, ca = mid(a, b), mid(b, c), mid(c, a)
            new += [(a, ab, ca), (b, bc, ab), (c, ca, bc), (ab, bc, ca)]
        v = np.array(verts)
        t = np.array(new, np.int64)
    t = orient_outward(v, t, np.zeros(3))
    v.setflags(write=False)
    t.setflags(write=False)
    return v, t


def ellipsoid(radii_m: np.ndarray, subdivisions: int) -> tuple[np.ndarray, np.ndarray]:
    """Icosphere scaled to the semi-axes ``radii_m`` (3,), centred at the origin.

    ``subdivisions`` 1 gives 80 triangles, 2 gives 320. The vertices lie on the ellipsoid (the
    mesh is inscribed) and there is a vertex at each pole.
    """
    v, t = _unit_icosphere(int(subdivisions))
    return v * np.asarray(radii_m, float), t.copy()


def sphere(radius_m: float, subdivisions: int) -> tuple[np.ndarray, np.ndarray]:
    """Icosphere of ``radius_m`` centred at the origin (see ``ellipsoid``)."""
    return ellipsoid(np.full(3, float(radius_m)), subdivisions)


def rotation_z(yaw_rad: float) -> np.ndarray:
    """(3, 3) float64 rotation about +z by ``yaw_rad`` (counter-clockwise from above)."""
    c, s = np.cos(yaw_rad), np.sin(yaw_rad)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def lathe(profile_rz_m: np.ndarray, segments: int) -> tuple[np.ndarray, np.ndarray]:
    """Closed surface of revolution about the z axis.

    Parameters
    ----------
    profile_rz_m : (p, 2) float64
        (radius, z) from one pole to the other, the first and last radius 0 (the poles), the
        radii between them > 0.
    segments : int
        Points on each ring.

    Returns
    -------
    ``(vertices_m, triangles)``: the poles once each, ``segments`` vertices on every other
    profile point, wound outwards (about the profile's centre on the axis).
    """
    profile = np.asarray(profile_rz_m, float)
    rings = profile[1:-1]
    angle = 2.0 * np.pi * np.arange(segments) / segments
    ring_v = np.stack(
        [
            (rings[:, 0:1] * np.cos(angle)).ravel(),
            (rings[:, 0:1] * np.sin(angle)).ravel(),
            np.repeat(rings[:, 1], segments),
        ],
        axis=1,
    )
    v = np.vstack([[[0.0, 0.0, profile[0, 1]]], ring_v, [[0.0, 0.0, profile[-1, 1]]]])
    first, last = 0, len(v) - 1
    i = np.arange(segments)
    j = (i + 1) % segments
    tris = [np.stack([np.full(segments, first), 1 + j, 1 + i], 1)]
    for k in range(len(rings) - 1):
        a, b = 1 + k * segments, 1 + (k + 1) * segments
        tris += [np.stack([a + i, a + j, b + j], 1), np.stack([a + i, b + j, b + i], 1)]
    end = 1 + (len(rings) - 1) * segments
    tris.append(np.stack([np.full(segments, last), end + i, end + j], 1))
    t = np.concatenate(tris).astype(np.int64)
    return v, orient_outward(v, t, np.array([0.0, 0.0, float(profile[:, 1].mean())]))
