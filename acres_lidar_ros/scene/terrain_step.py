"""A scene file's terrain within the triangle limit: ``terrain.node_step`` (docs/scene_format.md,
"Big terrain").

A grid or DEM of ``ny x nx`` nodes is ``2 (ny - 1) (nx - 1)`` ground triangles. A 4096 x 4096 DEM
(the grid limit) would be 33.5 million, over the scene's 10 million, so ``node_step: k`` keeps
every k-th node in each direction (nodes 0, k, 2k, ... from the south-west node) at k times the
spacing: the traced ground and ``height_at`` are that coarser grid. The check runs before the
triangles are made, and its refusal names the key the file used and the step that fits.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from acres_lidar_ros.errors import SceneError
from acres_lidar_ros.scene import scene_limits
from acres_lidar_ros.scene.grids import TerrainGrid

if TYPE_CHECKING:
    from acres_lidar_ros.scene.scene_file import _Reader

#: Largest ``terrain.node_step``.
MAX_NODE_STEP = 64


def ground_triangles(ny: int, nx: int) -> int:
    """Triangles of a terrain of ``ny x nx`` nodes (two per cell)."""
    return 2 * (ny - 1) * (nx - 1)


def stepped_shape(ny: int, nx: int, step: int) -> tuple[int, int]:
    """Nodes kept by ``node_step`` ``step`` of ``ny x nx`` nodes: 0, step, 2 step, ..."""
    return (ny - 1) // step + 1, (nx - 1) // step + 1


def fitting_step(ny: int, nx: int, budget: int) -> int | None:
    """The smallest step whose ground fits in ``budget`` triangles with 2 x 2 nodes or more."""
    for step in range(1, MAX_NODE_STEP + 1):
        sy, sx = stepped_shape(ny, nx, step)
        if sy < 2 or sx < 2:
            return None
        if ground_triangles(sy, sx) <= budget:
            return step
    return None


def coarsen_terrain(r: _Reader, t: dict, terrain: TerrainGrid) -> TerrainGrid:
    """``terrain`` with the file's ``node_step``, refused when its ground is over the triangle limit."""
    key = next((f"terrain.{k} = {t[k]!r}" for k in ("sdf_heightmap", "dem") if k in t), "terrain.height_m")
    step = 1
    if "node_step" in t:
        step = t["node_step"]
        if isinstance(step, bool) or not isinstance(step, int) or not 1 <= step <= MAX_NODE_STEP:
            raise r.fail("terrain.node_step", step, f"must be an integer from 1 to {MAX_NODE_STEP}")
    ny, nx = terrain.height_m.shape
    sy, sx = stepped_shape(ny, nx, step)
    if sy < 2 or sx < 2:
        raise SceneError(
            f"{r.path}: terrain.node_step = {step}: the {ny} x {nx} nodes of {key} keep {sy} x {sx}: need 2 x 2 or more"
        )
    limit = scene_limits.MAX_SCENE_TRIANGLES
    count = ground_triangles(sy, sx)
    if count > limit:
        fits = fitting_step(ny, nx, limit)
        how = (
            f"give terrain.node_step: {fits} ({' x '.join(map(str, stepped_shape(ny, nx, fits)))} nodes at "
            f"{terrain.cell_m * fits:g} m)"
            if fits is not None
            else "coarsen it"
        )
        side = math.isqrt(limit // 2) + 1
        raise SceneError(
            f"{r.path}: {key}: {sy} x {sx} nodes (node_step {step}) make {count} ground triangles: the scene limit is "
            f"{limit}; {how}, or crop it to at most about {side} x {side} nodes around your drive "
            f"(e.g. gdal_translate -srcwin XOFF YOFF {side} {side} in.tif out.tif)"
        )
    if step == 1:
        return terrain
    heights = np.ascontiguousarray(terrain.height_m[::step, ::step])
    return TerrainGrid(terrain.origin_xy_m, terrain.cell_m * step, heights)
