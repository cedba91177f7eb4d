"""Generated scenes of ``N`` obstacles for the cost-against-scene-size benchmark (the simulator README).

A corridor ``CORRIDOR_LENGTH_M`` long and ``CORRIDOR_WIDTH_M`` wide along world x, centred on
the origin, with a flat ground (object 0, 2 triangles), a wall on each side (objects 1 and 2,
plain boxes of 12 triangles) and ``N``
obstacles (objects 3 ...): finely tessellated pillars (closed cylinders of
``PILLAR_SEGMENTS`` segments, 1000 triangles) and boxes (each face a
``BOX_FACE_CELLS`` x ``BOX_FACE_CELLS`` grid, 972 triangles), half of each, at uniformly random
places outside a clear disc around the origin where the sensor stands. About 1000 triangles per
obstacle, so 1 to 10,000 obstacles span 10^3 to 10^7 triangles.

Every vertex is a float32 number (stored as float64), so Embree (float32) and a float64 tracer
see exactly the same geometry. The same ``(n_obstacles, seed)`` gives the same scene.

Memory: a scene of ``t`` triangles and about ``t / 2`` vertices takes 16 bytes per triangle
here (int32 indices and object ids, float64 vertices); with Embree's copy and its BVH and the
brute-force tracer's float32 corners the whole benchmark peaks near ``SCALING_BYTES_PER_TRIANGLE``
per triangle (2.1 GiB at 10,000 obstacles). ``MAX_OBSTACLES`` is the memory limit of a run.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from acres_lidar_ros.errors import SceneError

CORRIDOR_LENGTH_M = 200.0
CORRIDOR_WIDTH_M = 24.0
WALL_THICKNESS_M = 0.3
WALL_HEIGHT_M = 3.0
CLEAR_RADIUS_M = 3.0  # no obstacle centre closer than this to the origin (the sensor's place)
PILLAR_SEGMENTS = 250  # 4 x 250 = 1000 triangles per pillar
PILLAR_RADIUS_M = (0.15, 0.4)
PILLAR_HEIGHT_M = (1.0, 3.0)
BOX_FACE_CELLS = 9  # 6 x 2 x 9 x 9 = 972 triangles per box
BOX_SIDE_M = (0.4, 1.5)
BOX_HEIGHT_M = (0.5, 2.0)
GROUND_MARGIN_M = 100.0  # the ground reaches this far beyond the corridor
MAX_OBSTACLES = 10_000
SCALING_BYTES_PER_TRIANGLE = 230  # measured peak of `bench --scaling` per triangle (README, "Speed")
GROUND, LEFT_WALL, RIGHT_WALL = 0, 1, 2
FIRST_OBSTACLE = 3


@dataclass(frozen=True)
class ScalingScene:
    """A triangle soup with one object id per triangle.

    Attributes
    ----------
    vertices_m : (v, 3) float64, float32-exact world vertices
    triangles : (t, 3) int32 vertex indices
    triangle_object : (t,) int32 object id of each triangle (0 ground, 1 and 2 walls, 3 ... obstacles)
    n_obstacles : int
    seed : int
    """

    vertices_m: np.ndarray
    triangles: np.ndarray
    triangle_object: np.ndarray
    n_obstacles: int
    seed: int

    @property
    def triangle_count(self) -> int:
        return int(len(self.triangles))

    def corners(self) -> np.ndarray:
        """The three corners of every triangle: (t, 9) float32 ``(a, b, c)``, exact."""
        return self.vertices_m.astype(np.float32)[self.triangles].reshape(-1, 9)


@functools.lru_cache(maxsize=1)
def _pillar_template() -> tuple[np.ndarray, np.ndarray]:
    """Unit closed cylinder (radius 1, height 1): ``(vertices (2 s + 2, 3), triangles (4 s, 3))``."""
    s = PILLAR_SEGMENTS
    angle = 2.0 * np.pi * np.arange(s) / s
    ring = np.column_stack([np.cos(angle), np.sin(angle)])
    v = np.vstack([np.column_stack([ring, np.zeros(s)]), np.column_stack([ring, np.ones(s)]), [[0, 0, 0], [0, 0, 1]]])
    i = np.arange(s)
    j = (i + 1) % s
    tris = np.concatenate(
        [
            np.stack([i, j, s + j], 1),
            np.stack([i, s + j, s + i], 1),
            np.stack([np.full(s, 2 * s), j, i], 1),
            np.stack([np.full(s, 2 * s + 1), s + i, s + j], 1),
        ]
    )
    return v, tris.astype(np.int32)


@functools.lru_cache(maxsize=2)
def _box_template(k: int = BOX_FACE_CELLS) -> tuple[np.ndarray, np.ndarray]:
    """Unit box (x, y from -0.5 to 0.5, z from 0 to 1), each face a k x k grid of quads."""
    g = np.linspace(-0.5, 0.5, k + 1)
    grid_a, grid_b = np.meshgrid(g, g, indexing="ij")
    a, b = grid_a.ravel(), grid_b.ravel()
    half = np.full_like(a, 0.5)
    faces = []  # each face's grid points as (x, y, z) in the unit box, z shifted later
    for sign in (-1.0, 1.0):
        faces.append(np.column_stack([sign * half, a, b]))
        faces.append(np.column_stack([a, sign * half, b]))
        faces.append(np.column_stack([a, b, sign * half]))
    p = np.arange(k)
    q0 = (p[:, None] * (k + 1) + p[None, :]).ravel()  # lower-left grid point of each quad
    quad = np.stack([q0, q0 + k + 1, q0 + k + 2, q0 + 1], axis=1)
    face_tris = np.concatenate([quad[:, [0, 1, 2]], quad[:, [0, 2, 3]]])
    n = (k + 1) ** 2
    v = np.vstack(faces) + [0.0, 0.0, 0.5]
    tris = np.vstack([face_tris + f * n for f in range(6)])
    return v, tris.astype(np.int32)


def scaling_triangle_count(n_obstacles: int) -> int:
    """Triangles of ``scaling_scene(n_obstacles)`` (without building it)."""
    pillars = (int(n_obstacles) + 1) // 2
    boxes = int(n_obstacles) // 2
    n_box = len(_box_template()[1])
    return 2 + 2 * len(_box_template(1)[1]) + pillars * len(_pillar_template()[1]) + boxes * n_box


def check_obstacle_count(n_obstacles: object, what: str = "n_obstacles") -> int:
    """``n_obstacles`` as an int in 1 .. ``MAX_OBSTACLES``; ``SceneError`` naming ``what`` otherwise."""
    if isinstance(n_obstacles, bool) or not isinstance(n_obstacles, (int, np.integer)):
        raise SceneError(f"{what} = {n_obstacles!r}: must be an integer from 1 to {MAX_OBSTACLES}")
    n = int(n_obstacles)
    if not 1 <= n <= MAX_OBSTACLES:
        gib = scaling_triangle_count(MAX_OBSTACLES) * SCALING_BYTES_PER_TRIANGLE / 2**30
        raise SceneError(
            f"{what} = {n}: allowed: 1 to {MAX_OBSTACLES} obstacles (the memory limit: "
            f"{scaling_triangle_count(MAX_OBSTACLES):,} triangles, about {gib:.1f} GiB for the benchmark)"
        )
    return n


def _placed(template: tuple[np.ndarray, np.ndarray], scale: np.ndarray, yaw: np.ndarray, xy: np.ndarray):
    """Copies of a template scaled by ``scale`` (m, 3), turned by ``yaw`` (m,), moved to ``xy`` (m, 2)."""
    tv, tt = template
    c, s = np.cos(yaw)[:, None], np.sin(yaw)[:, None]
    sv = tv[None, :, :] * scale[:, None, :]
    x = c * sv[..., 0] - s * sv[..., 1] + xy[:, None, 0]
    y = s * sv[..., 0] + c * sv[..., 1] + xy[:, None, 1]
    v = np.stack([x, y, sv[..., 2]], axis=-1).reshape(-1, 3)
    t = (tt[None, :, :] + (np.arange(len(scale)) * len(tv))[:, None, None]).reshape(-1, 3)
    return v, t


def scaling_scene(n_obstacles: int, seed: int = 0) -> ScalingScene:
    """The corridor with ``n_obstacles`` obstacles (see the module docstring)."""
    n = check_obstacle_count(n_obstacles)
    rng = np.random.default_rng([0x5CA1E, int(seed), n])
    half_l, half_w = CORRIDOR_LENGTH_M / 2, CORRIDOR_WIDTH_M / 2
    inner = half_w - WALL_THICKNESS_M - max(PILLAR_RADIUS_M[1], BOX_SIDE_M[1])
    xy = np.empty((0, 2))
    while len(xy) < n:  # rejection of centres inside the clear disc: a few draws at most
        draw = rng.uniform([-half_l, -inner], [half_l, inner], size=(2 * n, 2))
        xy = np.vstack([xy, draw[np.hypot(draw[:, 0], draw[:, 1]) >= CLEAR_RADIUS_M]])
    xy = xy[:n]
    pillars, boxes = (n + 1) // 2, n // 2
    radius = rng.uniform(*PILLAR_RADIUS_M, pillars)
    pillar_scale = np.column_stack([radius, radius, rng.uniform(*PILLAR_HEIGHT_M, pillars)])
    box_scale = np.column_stack(
        [rng.uniform(*BOX_SIDE_M, boxes), rng.uniform(*BOX_SIDE_M, boxes), rng.uniform(*BOX_HEIGHT_M, boxes)]
    )
    box_yaw = rng.uniform(0.0, np.pi, boxes)
    # Objects 3, 5, 7, ... are pillars and 4, 6, ... boxes (obstacle k at xy[k]).
    pv, pt = _placed(_pillar_template(), pillar_scale, np.zeros(pillars), xy[0::2])
    bv, bt = _placed(_box_template(), box_scale, box_yaw, xy[1::2])
    wall_scale = np.array([[CORRIDOR_LENGTH_M, WALL_THICKNESS_M, WALL_HEIGHT_M]] * 2)
    wall_xy = np.array([[0.0, half_w - WALL_THICKNESS_M / 2], [0.0, -(half_w - WALL_THICKNESS_M / 2)]])
    wv, wt = _placed(_box_template(1), wall_scale, np.zeros(2), wall_xy)
    gx, gy = half_l + GROUND_MARGIN_M, half_w + GROUND_MARGIN_M
    gv = np.array([[-gx, -gy, 0.0], [gx, -gy, 0.0], [gx, gy, 0.0], [-gx, gy, 0.0]])
    gt = np.array([[0, 1, 2], [0, 2, 3]], np.int32)
    n_pt, n_bt, n_wt = len(_pillar_template()[1]), len(_box_template()[1]), len(_box_template(1)[1])
    object_of = np.concatenate(
        [
            np.zeros(2, np.int32),
            np.repeat(np.array([LEFT_WALL, RIGHT_WALL], np.int32), n_wt),
            np.repeat(FIRST_OBSTACLE + 2 * np.arange(pillars, dtype=np.int32), n_pt),
            np.repeat(FIRST_OBSTACLE + 1 + 2 * np.arange(boxes, dtype=np.int32), n_bt),
        ]
    )
    parts = [(gv, gt), (wv, wt), (pv, pt), (bv, bt)]
    offsets = np.cumsum([0] + [len(v) for v, _ in parts])
    vertices = np.vstack([v for v, _ in parts]).astype(np.float32).astype(np.float64)
    triangles = np.vstack([t + o for (_, t), o in zip(parts, offsets)]).astype(np.int32)
    for a in (vertices, triangles, object_of):
        a.setflags(write=False)
    return ScalingScene(vertices, triangles, object_of, n, int(seed))


__all__ = [
    "MAX_OBSTACLES",
    "SCALING_BYTES_PER_TRIANGLE",
    "ScalingScene",
    "check_obstacle_count",
    "scaling_scene",
    "scaling_triangle_count",
]
