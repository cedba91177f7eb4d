"""The built-in farms; layout "v1": a deterministic 1,024 m x 1,024 m scene with every static class.

``build_default_farm(seed, layout)`` builds layout "v2" (``farm_v2``, the default) or "v1". ``build_farm_v1(seed)`` gives the same bytes for the same seed. The world origin is the
centre of the farmyard; x east, y north.

Layout (m): farmyard of concrete and gravel around the origin with buildings and grain bins;
a gravel driveway south to the asphalt road along y = -200 (grass verges, a row of trees on
its north side); a gravel lane along y = 5 east to the fields; grass lanes between fields; a
corn field north-east, a soybean field south-east, a potato field south-west; a windbreak of
trees along y = 80; a pond at (-220, 150); shrubs, ground cover, mud clods and fence posts.
"""

from __future__ import annotations

import numpy as np

from acres_lidar_ros.config.material_table import MATERIAL_ID
from acres_lidar_ros.errors import SceneError
from acres_lidar_ros.scene.builder import SceneBuilder
from acres_lidar_ros.scene.farm_parts import sunk_box
from acres_lidar_ros.scene.grids import CellGrid, TerrainGrid, points_in_polygon
from acres_lidar_ros.scene.scene_model import CROP_CELLS, CROP_CRUSHED, CROP_HARVESTED, Scene

FARM_HALF_SIZE_M = 512.0
TERRAIN_CELL_M = 4.0
COVER_CELL_M = 4.0
WATER_CELL_M = 2.0
FARMYARD_FLAT_RADIUS_M = 90.0
POND_CENTRE_XY_M = np.array([-220.0, 150.0])
POND_RADIUS_M = 25.0
POND_MAX_DEPTH_M = 1.2
ROAD_Y_M = -200.0
FARM_LAYOUTS = ("v1", "v2")

# Crop fields: corner (x, y), patches (nx, ny), class, h_crop (m), growth.
CROP_FIELDS = (
    ((80.0, 20.0), (39, 40), "corn", 2.5, 0.8),
    ((80.0, -80.0), (20, 30), "soybean", 0.9, 0.7),
    ((-150.0, -120.0), (20, 25), "potato", 0.6, 0.9),
)


def _rect(x0: float, y0: float, x1: float, y1: float) -> np.ndarray:
    return np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], float)


def _terrain(rng: np.random.Generator) -> TerrainGrid:
    n = int(2 * FARM_HALF_SIZE_M / TERRAIN_CELL_M) + 1
    xs = -FARM_HALF_SIZE_M + TERRAIN_CELL_M * np.arange(n)
    gx, gy = np.meshgrid(xs, xs)
    phase = rng.uniform(0.0, 2.0 * np.pi, 3)
    h = (
        1.2 * np.sin(2 * np.pi * gx / 700.0 + phase[0])
        + 0.8 * np.sin(2 * np.pi * gy / 500.0 + phase[1])
        + 0.5 * np.sin(2 * np.pi * (gx + gy) / 300.0 + phase[2])
    )
    # Flat farmyard, blended smoothly into the relief.
    r = np.hypot(gx, gy)
    blend = np.clip((r - FARMYARD_FLAT_RADIUS_M) / 60.0, 0.0, 1.0)
    blend = blend * blend * (3 - 2 * blend)
    h0 = h[n // 2, n // 2]
    h = h0 + blend * (h - h0)
    # The pond's water surface is level (the lowest ground near it), blended into the relief.
    r_pond = np.hypot(gx - POND_CENTRE_XY_M[0], gy - POND_CENTRE_XY_M[1])
    level = h[r_pond <= POND_RADIUS_M + 40.0].min()
    blend = np.clip((r_pond - POND_RADIUS_M - TERRAIN_CELL_M) / 40.0, 0.0, 1.0)
    h = level + blend * blend * (3 - 2 * blend) * (h - level)
    return TerrainGrid(np.array([-FARM_HALF_SIZE_M, -FARM_HALF_SIZE_M]), TERRAIN_CELL_M, h)


def _polygons() -> list[tuple[np.ndarray, str]]:
    half = FARM_HALF_SIZE_M
    return [
        (_rect(-half, ROAD_Y_M - 6.5, half, ROAD_Y_M + 6.5), "grass"),  # verges
        (_rect(-half, ROAD_Y_M - 3.5, half, ROAD_Y_M + 3.5), "asphalt"),  # main road
        (_rect(-60.0, -45.0, 60.0, 45.0), "gravel"),  # farmyard apron
        (_rect(-45.0, -30.0, 45.0, 30.0), "concrete"),  # farmyard slab
        (_rect(-2.5, ROAD_Y_M + 3.5, 2.5, -45.0), "gravel"),  # driveway
        (_rect(60.0, 2.0, 215.0, 8.0), "gravel"),  # lane to the fields
        (_rect(66.0, ROAD_Y_M + 6.5, 74.0, 2.0), "grass"),  # grass lane west of the soybeans
        (_rect(195.0, 8.0, 205.0, 75.0), "grass"),  # grass lane east of the corn
        (_rect(-165.0, 62.0, 205.0, 70.0), "grass"),  # grass lane south of the windbreak
        (np.array([[-165.0, 62.0], [-155.0, 62.0], [-155.0, -40.0], [-165.0, -40.0]]), "grass"),  # west lane
        (_rect(-165.0, -40.0, -60.0, -30.0), "gravel"),  # yard exit west
    ]


def _cover(polygons: list[tuple[np.ndarray, str]]) -> CellGrid:
    n = int(2 * FARM_HALF_SIZE_M / COVER_CELL_M)
    centres = -FARM_HALF_SIZE_M + COVER_CELL_M * (np.arange(n) + 0.5)
    gx, gy = np.meshgrid(centres, centres)
    cover = np.full(gx.shape, MATERIAL_ID["grass"], np.uint8)
    for (x0, y0), (nx, ny), *_ in CROP_FIELDS:
        inside = (gx >= x0 - 4) & (gx <= x0 + 1.52 * nx + 4) & (gy >= y0 - 4) & (gy <= y0 + 1.0 * ny + 4)
        cover[inside] = MATERIAL_ID["soil"]
    cover[(gx > 250) & (gy < -100)] = MATERIAL_ID["soil"]  # a fallow field
    for vertices, material in polygons:
        inside = points_in_polygon(gx.ravel(), gy.ravel(), vertices).reshape(gx.shape)
        cover[inside] = MATERIAL_ID[material]
    return CellGrid(np.array([-FARM_HALF_SIZE_M, -FARM_HALF_SIZE_M]), COVER_CELL_M, cover)


def _water(rng: np.random.Generator) -> tuple[CellGrid, CellGrid]:
    n = int(2 * FARM_HALF_SIZE_M / WATER_CELL_M)
    centres = -FARM_HALF_SIZE_M + WATER_CELL_M * (np.arange(n) + 0.5)
    gx, gy = np.meshgrid(centres, centres)
    r = np.hypot(gx - POND_CENTRE_XY_M[0], gy - POND_CENTRE_XY_M[1]) / POND_RADIUS_M
    depth = np.clip(POND_MAX_DEPTH_M * (1.0 - r * r), 0.0, None)
    # A wet rim: a film of water thinner than the pond threshold just outside the pond.
    rim = (r > 1.0) & (r < 1.15)
    depth[rim] = 0.002 * (1.15 - r[rim]) / 0.15
    phase = rng.uniform(0.0, 2.0 * np.pi, 2)
    wet = 0.3 + 0.15 * np.sin(2 * np.pi * gx / 180.0 + phase[0]) * np.cos(2 * np.pi * gy / 140.0 + phase[1])
    wet = np.clip(wet + 0.5 * np.exp(-((r - 1.0) ** 2) / 0.5), 0.0, 1.0)
    origin = np.array([-FARM_HALF_SIZE_M, -FARM_HALF_SIZE_M])
    return CellGrid(origin, WATER_CELL_M, depth), CellGrid(origin, WATER_CELL_M, wet)


def build_default_farm(seed: int = 0, layout: str = "v2") -> Scene:
    """The built-in farm; deterministic in ``seed``.

    ``layout`` "v2" (the default): the farm of ``scene.farm_v2``, a 0.5 m terrain with relief at
    every scale and the structure of a real farm. "v1": the first farm (this module's docstring),
    kept for the golden scans and for comparison.
    """
    if layout == "v2":
        from acres_lidar_ros.scene.farm_v2 import build_farm_v2

        return build_farm_v2(seed)
    if layout != "v1":
        raise SceneError(f"layout = {layout!r}: unknown farm layout; allowed: {', '.join(FARM_LAYOUTS)}")
    return build_farm_v1(seed)


def build_farm_v1(seed: int = 0) -> Scene:
    """The built-in farm, layout "v1" (see the module docstring); deterministic in ``seed``."""
    rng = np.random.default_rng(seed)
    terrain = _terrain(rng)
    polygons = _polygons()
    pond, wetness = _water(rng)
    b = SceneBuilder(terrain, _cover(polygons), polygons, pond, wetness)

    # Farmyard buildings (inside the concrete slab, clear of the driveway at x = 0, y < -30).
    sunk_box(b, (-25.0, 15.0), (30.0, 15.0, 7.0), 0.0, "building", roof=4.0, name="barn")
    sunk_box(b, (18.0, 16.0), (36.0, 18.0, 6.5), 0.0, "building", roof=3.0, name="machine_shed")
    sunk_box(b, (-30.0, -15.0), (12.0, 10.0, 5.5), np.pi / 2, "building", roof=3.0, name="house")
    sunk_box(b, (25.0, -15.0), (10.0, 8.0, 4.0), 0.0, "building", name="workshop")
    for k, (x, y) in enumerate([(48.0, 30.0), (48.0, 42.0), (36.0, 40.0), (-52.0, 40.0)]):
        z = float(terrain.height_at(x, y)) - 0.3
        b.add_cylinder((x, y), 4.5, 10.3, "silo", segments=24, cone_height_m=3.0, base_z_m=z, name=f"grain_bin_{k}")
    b.add_cylinder((-8.0, -22.0), 1.2, 2.0, "other", segments=16, name="fuel_tank")

    # Trees: windbreak along y = 80, a row north of the road, single trees.
    for k, x in enumerate(np.arange(-150.0, 151.0, 9.0)):
        b.add_tree((x + rng.uniform(-1, 1), 80.0 + rng.uniform(-1, 1)), rng.uniform(10.0, 15.0), name=f"windbreak_{k}")
    for k, x in enumerate(np.arange(-487.5, 500.0, 25.0)):
        b.add_tree((x, ROAD_Y_M + 12.0), rng.uniform(8.0, 13.0), name=f"road_tree_{k}")
    singles = [
        (-100.0, 20.0),
        (-120.0, -60.0),
        (240.0, 40.0),
        (120.0, -20.0),
        (-300.0, 40.0),
        (300.0, 200.0),
        (-60.0, 140.0),
        (40.0, 150.0),
        (-250.0, -300.0),
        (150.0, -300.0),
        (-190.0, 120.0),
        (-250.0, 185.0),
    ]
    for k, xy in enumerate(singles):
        b.add_tree(xy, rng.uniform(9.0, 18.0), name=f"tree_{k}")

    # Shrubs: around the pond and along the verges.
    for k in range(14):
        a = 2 * np.pi * k / 14 + rng.uniform(-0.1, 0.1)
        r = POND_RADIUS_M + rng.uniform(4.0, 8.0)
        b.add_shrub(
            POND_CENTRE_XY_M + r * np.array([np.cos(a), np.sin(a)]), rng.uniform(1.2, 3.0), name=f"pond_shrub_{k}"
        )
    for k, x in enumerate(np.arange(-400.0, 401.0, 50.0)):
        b.add_shrub((x + 12.0, ROAD_Y_M - 9.0), rng.uniform(1.0, 2.2), name=f"verge_shrub_{k}")

    # Crop fields with crushed wheel tracks and a harvested strip.
    for corner, (nx, ny), cls, h_crop, growth in CROP_FIELDS:
        state = np.zeros((CROP_CELLS * ny, CROP_CELLS * nx), np.int64)
        rows = np.arange(CROP_CELLS * ny)
        track = (rows % 24 == 5) | (rows % 24 == 6)  # wheel tracks every 6 m along x
        state[track] = CROP_CRUSHED
        state[:, -8:] = CROP_HARVESTED  # the last two patch columns are harvested
        state[rng.random(state.shape) < 0.02] = CROP_CRUSHED  # scattered damage
        b.add_crop_field(corner, (nx, ny), cls, h_crop, growth, cell_state=state, name=f"{cls}_field")

    # Ground cover patches in the grass, mud clods beside the field lane, fence posts.
    for k in range(40):
        cover_xy = np.array([rng.uniform(-450, 450), rng.uniform(100, 450)])
        if np.hypot(*(cover_xy - POND_CENTRE_XY_M)) < POND_RADIUS_M + 15:
            cover_xy = cover_xy + [0.0, 60.0]
        b.add_ground_cover(
            cover_xy,
            [rng.uniform(2, 5), rng.uniform(1.5, 4), rng.uniform(0.15, 0.4)],
            rng.uniform(0, np.pi),
            name=f"ground_cover_{k}",
        )
    for k in range(12):
        xy = (rng.uniform(80.0, 190.0), 5.0 + (4.0 if k % 2 else -4.0) + rng.uniform(-0.3, 0.3))
        b.add_mud_clod(
            xy,
            [rng.uniform(0.3, 0.7), rng.uniform(0.25, 0.5), rng.uniform(0.08, 0.18)],
            rng.uniform(0, np.pi),
            name=f"mud_clod_{k}",
        )
    for k, x in enumerate(np.arange(-147.0, 60.0, 6.0)):
        b.add_box((x, -49.0), (0.12, 0.12, 1.2), "other", name=f"fence_post_{k}")
    return b.build()
