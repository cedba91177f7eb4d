"""The built-in farm, layout "v2" (the default): a 384 m x 384 m farm as a survey would see it.

``build_farm_v2(seed)`` gives the same bytes for the same seed. The world origin is the centre
of the farmyard; x east, y north. The ground (``farm_v2_ground``) is a 0.5 m terrain grid with
relief at every scale; on it:

* the farmyard (x -35..35, y -25..25): machine shed, barn, bale shed, house with a garden fence,
  workshop, grain bins and a hopper bin, a fuel tank, a parked tractor, combine and grain cart,
  round and square bale stacks, yard lights, and a paddock with a post-and-rail fence south of it;
* east of the yard the farm track (ruts) along y = 0, a fence line with posts between it and the
  open, furrowed field to the south (round bales on it), the corn field to the north;
* the headland north along x = 90 with a three-row shelterbelt (shrubs and two rows of trees) to
  the east; the headland west along y = 70 with a fence and a tree line to the north, the corn
  and soybean fields to the south;
* the crowned road along x = -55 with ditches and a line of utility poles, the potato field
  west of it, a dug pond south-west, single trees, ground cover and mud clods.

Crops stand at three growth stages: corn 0.85, soybean 0.45, potato 0.25, with tramlines.
"""

from __future__ import annotations

import numpy as np

from acres_lidar_ros.scene.builder import SceneBuilder
from acres_lidar_ros.scene.farm_parts import (
    box_part,
    combine,
    grain_cart,
    parts_mesh,
    place,
    round_bale,
    sunk_box,
    tractor,
)
from acres_lidar_ros.scene.farm_v2_ground import (
    FIELDS,
    POND_CENTRE_XY_M,
    POND_RADIUS_M,
    ROAD_X_M,
    TRAMLINE_HALF_GAUGE_M,
    TRAMLINE_SPACING_M,
    build_ground,
    track_centreline_xy_m,
)
from acres_lidar_ros.scene.scene_model import CROP_CELLS, CROP_CRUSHED, CROP_PATCH_SIZE_M, Scene


def _crop_state(field, rng: np.random.Generator) -> tuple[tuple[int, int], np.ndarray]:
    """Patches and cell states of a crop field: crushed wheel tracks of the tramlines, a little damage."""
    x0, y0, x1, y1 = field.rect
    nx, ny = int((x1 - x0) // CROP_PATCH_SIZE_M[0]), int((y1 - y0) // CROP_PATCH_SIZE_M[1])
    cell_x = x0 + (np.arange(CROP_CELLS * nx) + 0.5) * CROP_PATCH_SIZE_M[0] / CROP_CELLS
    u = np.mod(cell_x - x0 - 12.0 + TRAMLINE_SPACING_M / 2, TRAMLINE_SPACING_M) - TRAMLINE_SPACING_M / 2
    wheel = np.abs(np.abs(u) - TRAMLINE_HALF_GAUGE_M) < 0.25
    state = np.zeros((CROP_CELLS * ny, CROP_CELLS * nx), np.int64)
    state[:, wheel] = CROP_CRUSHED
    state[rng.random(state.shape) < 0.01] = CROP_CRUSHED
    return (nx, ny), state


def _clear_of_track(xy: np.ndarray, track_xy: np.ndarray, clearance_m: float) -> np.ndarray:
    from scipy.spatial import cKDTree

    d, _ = cKDTree(track_xy).query(xy)
    return d > clearance_m


def _row(rng: np.random.Generator, start, end, spacing_m: tuple[float, float], jitter_m: float) -> np.ndarray:
    """Points from ``start`` to ``end`` at random spacings in ``spacing_m``, jittered sideways."""
    start, end = np.asarray(start, float), np.asarray(end, float)
    length = np.linalg.norm(end - start)
    steps = rng.uniform(*spacing_m, int(length / spacing_m[0]) + 2)
    s = np.cumsum(steps) - steps[0]
    s = s[s <= length]
    u = (end - start) / length
    side = np.array([-u[1], u[0]])
    return start + np.outer(s, u) + np.outer(rng.uniform(-jitter_m, jitter_m, len(s)), side)


def build_farm_v2(seed: int = 0) -> Scene:
    """The built-in farm, layout "v2" (see the module docstring); deterministic in ``seed``."""
    rng = np.random.default_rng(seed)
    ground = build_ground(rng)
    terrain = ground.terrain
    b = SceneBuilder(terrain, ground.cover, ground.polygons, ground.pond_depth, ground.soil_wetness)
    track_xy = track_centreline_xy_m()

    # --- the farmyard (the tour drives along y = 0) --------------------------------------
    sunk_box(b, (0.0, 16.0), (24.0, 12.0, 6.0), 0.0, "building", roof=2.5, name="machine_shed")
    sunk_box(b, (-22.0, 15.0), (16.0, 12.0, 7.0), 0.0, "building", roof=3.5, name="barn")
    sunk_box(b, (24.0, 15.0), (14.0, 10.0, 5.0), 0.0, "building", roof=1.5, name="bale_shed")
    sunk_box(b, (-24.0, -15.0), (11.0, 9.0, 5.5), np.pi / 2, "building", roof=3.0, name="house")
    sunk_box(b, (-4.0, -14.0), (10.0, 8.0, 4.5), 0.0, "building", name="workshop")
    for k, (x, y, r, h, cone) in enumerate([(14.0, -14.0, 4.0, 9.0, 2.5), (23.5, -14.0, 4.0, 9.0, 2.5)]):
        z = float(terrain.height_at(x, y)) - 0.3
        b.add_cylinder((x, y), r, h + 0.3, "silo", segments=32, cone_height_m=cone, base_z_m=z, name=f"grain_bin_{k}")
    b.add_cylinder((31.0, -8.0), 1.8, 6.0, "silo", segments=24, cone_height_m=1.5, name="hopper_bin")
    b.add_cylinder((7.0, -8.0), 1.0, 2.5, "other", segments=16, name="fuel_tank")
    for k, (x, y) in enumerate([(-6.0, -5.5), (30.0, 5.0)]):
        b.add_cylinder((x, y), 0.1, 7.0, "other", segments=8, material="metal_bin", name=f"yard_light_{k}")
    for name, mesh, (x, y, yaw) in (
        ("tractor", tractor(), (10.0, 6.5, 0.0)),
        ("combine", combine(), (-8.0, 6.8, 0.0)),
        ("grain_cart", grain_cart(), (20.0, -5.8, np.pi)),
    ):
        v, t = place(mesh, (x, y), yaw, float(terrain.height_at(x, y)) - 0.05)
        b.add_mesh(v, t, "other", material="vehicle", name=name)
    bale_y = round_bale()
    stack = [(29.0 + 1.3 * i, -21.0 + 1.55 * j, 0.0) for i in range(4) for j in range(3)]
    stack += [(29.0 + 1.3 * i, -20.2 + 1.55 * j, 1.3) for i in range(4) for j in range(2)]
    for k, (x, y, dz) in enumerate(stack):
        v, t = place(bale_y, (x, y), np.pi / 2, float(terrain.height_at(x, y)) + dz)
        b.add_mesh(v, t, "other", material="grass", name=f"round_bale_stack_{k}")
    for k, (x, y, level) in enumerate([(-14.0 + 1.25 * i, -6.5, lv) for i in range(4) for lv in range(3)]):
        z = float(terrain.height_at(x, y)) + 0.9 * level
        b.add_box((x, y), (1.2, 2.4, 0.9), "other", material="grass", base_z_m=z, name=f"square_bale_{k}")
    # Yard clutter: drums by the workshop, a pickup, a pallet stack, the house's garden fences.
    for k, x in enumerate(np.arange(2.5, 6.0, 0.7)):
        b.add_cylinder((x, -10.0 - 0.4 * (k % 2)), 0.3, 0.9, "other", "metal_bin", segments=12, name=f"drum_{k}")
    pickup = parts_mesh([box_part([0.0, 0.0, 0.95], [5.3, 1.9, 0.9]), box_part([0.6, 0.0, 1.75], [1.9, 1.8, 0.7])])
    v, t = place(pickup, (-17.0, -4.6), 0.1, float(terrain.height_at(-17.0, -4.6)))
    b.add_mesh(v, t, "other", material="vehicle", name="pickup")
    b.add_box((3.0, 6.0), (1.2, 1.0, 1.6), "other", material="bark", name="pallet_stack")
    # The garden's front: a close-boarded fence of stepped panels 1.4-2.0 m high between posts
    # (not a hedge: 7 m from the tour's start, foliage there cost two more casts per ray it took).
    posts = _row(rng, (-35.0, -7.5), (-19.0, -7.5), (1.6, 2.2), 0.2)
    panel_h = rng.uniform(1.4, 2.0, len(posts))
    for k, (a, c) in enumerate(zip(posts[:-1], posts[1:])):
        mid, length = (a + c) / 2, float(np.linalg.norm(c - a))
        yaw = float(np.arctan2(*(c - a)[::-1]))
        b.add_box(mid, (length, 0.04, panel_h[k]), "other", yaw, "bark", name=f"garden_panel_{k}")
    for k, p in enumerate(posts):
        b.add_box(
            p,
            (0.1, 0.1, max(panel_h[max(k - 1, 0)], panel_h[min(k, len(posts) - 2)]) + 0.1),
            "other",
            material="bark",
            name=f"garden_front_post_{k}",
        )
    for k, p in enumerate(_row(rng, (-18.0, -7.5), (-18.0, -22.0), (2.2, 2.2), 0.0)):
        b.add_box(p, (0.1, 0.1, 1.1), "other", material="bark", name=f"garden_post_{k}")

    # Paddock south of the yard: posts every 2.5 m and two rails.
    corners = np.array([[-20.0, -30.0], [20.0, -30.0], [20.0, -50.0], [-20.0, -50.0], [-20.0, -30.0]])
    k = 0
    for a, c in zip(corners[:-1], corners[1:]):
        for p in _row(rng, a, c, (2.5, 2.5), 0.0):
            b.add_box(p, (0.15, 0.15, 1.4), "other", material="bark", name=f"paddock_post_{k}")
            k += 1
        mid, length = (a + c) / 2, float(np.linalg.norm(c - a))
        yaw = float(np.arctan2(*(c - a)[::-1]))
        for rail_z in (0.6, 1.2):
            z = float(terrain.height_at(*mid)) + rail_z
            b.add_box(mid, (length, 0.05, 0.12), "other", yaw, "bark", base_z_m=z, name=f"paddock_rail_{k}_{rail_z}")

    # --- fences with posts, utility poles ------------------------------------------------
    fences = [((37.0, -3.6), (150.0, -3.6)), ((-48.0, 75.0), (96.0, 75.0)), ((96.0, -3.6), (96.0, 75.0))]
    k = 0
    for a, c in fences:
        for p in _row(rng, a, c, (2.8, 3.4), 0.05):
            b.add_box(p, (0.12, 0.12, 1.3), "other", float(rng.uniform(0, np.pi)), "bark", name=f"fence_post_{k}")
            k += 1
    poles = [(ROAD_X_M - 10.0, y) for y in np.arange(-175.0, 180.0, 45.0)] + [(45.0, 4.2), (85.0, 4.2)]
    for k, (x, y) in enumerate(poles):
        b.add_cylinder((x, y), 0.14, 10.0, "other", material="bark", segments=10, name=f"utility_pole_{k}")
        z = float(terrain.height_at(x, y)) + 9.2
        crossarm_yaw = 0.0 if x > 0 else np.pi / 2  # across the line
        b.add_box((x, y), (0.12, 2.2, 0.12), "other", crossarm_yaw, "bark", base_z_m=z, name=f"utility_pole_{k}_arm")
    for k, y in enumerate(np.arange(-175.0, 180.0, 25.0)):  # delineator posts on both verges
        for side in (-1.0, 1.0):
            b.add_box(
                (ROAD_X_M + side * 4.4, y + 6.0 * side),
                (0.1, 0.1, 1.0),
                "other",
                material="metal_bin",
                name=f"delineator_{k}_{side:+.0f}",
            )
    b.add_box((ROAD_X_M + 5.0, 4.0), (0.08, 0.08, 2.2), "other", material="metal_bin", name="road_sign_post")
    b.add_box(
        (ROAD_X_M + 5.0, 4.0),
        (0.05, 0.8, 0.6),
        "other",
        material="metal_bin",
        base_z_m=float(terrain.height_at(ROAD_X_M + 5.0, 4.0)) + 1.6,
        name="road_sign",
    )

    # --- trees: shelterbelt, tree line, single trees ---------------------------------------
    for k, p in enumerate(_row(rng, (100.0, -30.0), (100.0, 115.0), (2.5, 4.0), 0.4)):
        b.add_shrub(p, rng.uniform(1.8, 3.5), name=f"shelterbelt_shrub_{k}")
    for row_x, heights in ((104.0, (10.0, 16.0)), (109.0, (8.0, 13.0))):
        for k, p in enumerate(_row(rng, (row_x, -30.0), (row_x, 115.0), (5.0, 8.0), 0.8)):
            b.add_tree(p, rng.uniform(*heights), name=f"shelterbelt_tree_{row_x:.0f}_{k}")
    for k, p in enumerate(_row(rng, (-80.0, 83.0), (95.0, 83.0), (6.0, 13.0), 1.5)):
        b.add_tree(p, rng.uniform(9.0, 18.0), name=f"tree_line_{k}")
    for k, p in enumerate(_row(rng, (-75.0, 86.0), (92.0, 86.0), (4.0, 9.0), 1.0)):
        b.add_shrub(p, rng.uniform(1.2, 3.0), name=f"tree_line_shrub_{k}")
    singles = [
        (92.0, -9.0),
        (-70.0, -20.0),
        (-75.0, 30.0),
        (-100.0, -120.0),
        (140.0, 120.0),
        (-160.0, 140.0),
        (60.0, 140.0),
        (-30.0, -80.0),
        (20.0, -110.0),
        (170.0, -40.0),
        (-44.0, -32.0),
        (-44.0, 22.0),
    ]
    for k, xy in enumerate(singles):
        b.add_tree(xy, rng.uniform(9.0, 17.0), name=f"tree_{k}")
    for k in range(12):
        a = 2 * np.pi * k / 12 + rng.uniform(-0.15, 0.15)
        p = POND_CENTRE_XY_M + (POND_RADIUS_M + rng.uniform(3.0, 7.0)) * np.array([np.cos(a), np.sin(a)])
        b.add_shrub(p, rng.uniform(1.2, 3.0), name=f"pond_shrub_{k}")

    # --- bales on the open field, crops --------------------------------------------------
    bale_xy = np.column_stack([rng.uniform(45.0, 145.0, 40), rng.uniform(-140.0, -9.0, 40)])
    for k, (x, y) in enumerate(bale_xy):
        v, t = place(bale_y, (x, y), float(rng.uniform(0, np.pi)), float(terrain.height_at(x, y)))
        b.add_mesh(v, t, "other", material="grass", name=f"field_bale_{k}")
    for field in FIELDS:
        if field.crop is None:
            continue
        patches, state = _crop_state(field, rng)
        b.add_crop_field(
            field.rect[:2], patches, field.crop, field.crop_height_m, field.growth, cell_state=state, name=field.name
        )

    # --- ground cover in the pastures, mud clods on the track ------------------------------
    cover_xy = np.column_stack([rng.uniform(-180.0, 180.0, 300), rng.uniform(-180.0, 180.0, 300)])
    pasture = _clear_of_track(cover_xy, track_xy, 6.0) & (np.abs(cover_xy[:, 0] - ROAD_X_M) > 12.0)
    pasture &= np.hypot(*(cover_xy - POND_CENTRE_XY_M).T) > POND_RADIUS_M + 10.0
    for x0, y0, x1, y1 in [f.rect for f in FIELDS] + [(-45.0, -55.0, 45.0, 35.0), (97.0, -35.0, 115.0, 120.0)]:
        pasture &= ~(
            (cover_xy[:, 0] > x0 - 3)
            & (cover_xy[:, 0] < x1 + 3)
            & (cover_xy[:, 1] > y0 - 3)
            & (cover_xy[:, 1] < y1 + 3)
        )
    for k, xy in enumerate(cover_xy[pasture][:60]):
        size = [rng.uniform(1.5, 4.0), rng.uniform(1.0, 3.0), rng.uniform(0.15, 0.45)]
        b.add_ground_cover(xy, size, rng.uniform(0, np.pi), name=f"ground_cover_{k}")
    index = rng.integers(1, len(track_xy) - 1, 30)
    tangent = track_xy[index + 1] - track_xy[index - 1]
    normal = np.column_stack([-tangent[:, 1], tangent[:, 0]]) / np.linalg.norm(tangent, axis=1, keepdims=True)
    offset = rng.choice([-1.0, 1.0], 30) * rng.uniform(1.7, 2.4, 30)
    for k, p in enumerate(track_xy[index] + offset[:, None] * normal):
        size = [rng.uniform(0.3, 0.7), rng.uniform(0.25, 0.5), rng.uniform(0.08, 0.16)]
        b.add_mud_clod(p, size, rng.uniform(0, np.pi), name=f"mud_clod_{k}")
    return b.build()
