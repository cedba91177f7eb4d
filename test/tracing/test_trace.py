"""Tracer: exact geometry, foliage continuation, crop cells, ground rules at hits, boxes,
determinism and a brute-force reference."""

from __future__ import annotations

import numpy as np
import pytest

from acres_lidar_ros.config.material_table import CLASS_ID, IS_FOLIAGE_CLASS, MATERIAL_ID
from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.scene.boxes import VehicleBox
from acres_lidar_ros.scene.builder import SceneBuilder
from acres_lidar_ros.scene.grids import CellGrid, TerrainGrid
from acres_lidar_ros.scene.instances import VEHICLE_INSTANCE_BASE
from acres_lidar_ros.scene.scene_model import (
    CROP_CELL_HEIGHT_FRACTION,
    CROP_PATCH_SIZE_M,
    CROWN_CENTRE_PER_HEIGHT,
    CROWN_RADIUS_PER_HEIGHT,
    crop_box_height_m,
)
from acres_lidar_ros.tracing.trace import CROP_STEP_M, START_M, Tracer

GROUND_Z_M = 1.5


def flat_builder(z_m: float = GROUND_Z_M, half_m: float = 60.0) -> SceneBuilder:
    n = int(2 * half_m / 4.0) + 1
    return SceneBuilder(TerrainGrid([-half_m, -half_m], 4.0, np.full((n, n), z_m)))


def unit(v) -> np.ndarray:
    v = np.asarray(v, float)
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def trace(tracer, o, d, k=4, max_range_m=100.0, step_m=0.25, **kw):
    o = np.atleast_2d(np.asarray(o, float))
    d = unit(np.atleast_2d(d))
    return tracer.trace(np.broadcast_to(o, d.shape).copy(), d, max_range_m, k, step_m, 0.003, **kw)


def test_plane_range_is_height_over_cos():
    tracer = Tracer(flat_builder().build())
    rng = np.random.default_rng(1)
    elevation = rng.uniform(np.deg2rad(-80), np.deg2rad(-5), 200)
    azimuth = rng.uniform(0, 2 * np.pi, 200)
    d = np.stack([np.cos(elevation) * np.cos(azimuth), np.cos(elevation) * np.sin(azimuth), np.sin(elevation)], 1)
    o = np.array([3.0, -2.0, GROUND_Z_M + 2.0])
    hits = trace(tracer, o, d, max_range_m=1000.0)
    expected = 2.0 / np.sin(-elevation)  # distance to the plane along the ray = h / cos(angle to the normal)
    inside = np.abs(o[:2] + expected[:, None] * d[:, :2]).max(axis=1) < 59.0
    np.testing.assert_allclose(hits.range_m[inside, 0], expected[inside], rtol=0, atol=2e-5)
    np.testing.assert_allclose(hits.cos_incidence[inside, 0], np.sin(-elevation[inside]), atol=1e-6)
    assert np.all(hits.class_id[inside, 0] == CLASS_ID["ground"])
    assert np.all(hits.instance[inside, 0] == 0)
    assert not hits.valid[inside, 1:].any()


def test_max_range_drops_farther_hits():
    tracer = Tracer(flat_builder().build())
    d = unit([[1.0, 0.0, -0.2]])
    r = 2.0 / 0.2 * np.linalg.norm([1.0, 0.0, -0.2])  # range to the plane 2 m below
    assert trace(tracer, [0, 0, GROUND_Z_M + 2.0], d, max_range_m=r + 0.01).valid[0, 0]
    assert not trace(tracer, [0, 0, GROUND_Z_M + 2.0], d, max_range_m=r - 0.01).valid.any()


def test_start_offset_skips_a_surface_closer_than_half_a_centimetre():
    tracer = Tracer(flat_builder().build())
    down = [0.0, 0.0, -1.0]
    near = trace(tracer, [0, 0, GROUND_Z_M + 0.004], down)
    assert not near.valid.any()  # the plane is 4 mm away: behind the ray's start
    far = trace(tracer, [0, 0, GROUND_Z_M + 0.006], down)
    np.testing.assert_allclose(far.range_m[0, 0], 0.006, atol=2e-6)


def test_crown_entry_matches_the_analytic_sphere():
    b = flat_builder()
    height_m = 10.0
    b.add_tree([5.0, 4.0], height_m)
    tracer = Tracer(b.build())
    centre = np.array([5.0, 4.0, GROUND_Z_M + CROWN_CENTRE_PER_HEIGHT * height_m])
    radius = CROWN_RADIUS_PER_HEIGHT * height_m
    # Straight down onto the crown's top: the mesh has a vertex at the pole, so it is exact.
    o = centre + [0, 0, radius + 7.0]
    hits = trace(tracer, o, [0, 0, -1.0])
    np.testing.assert_allclose(hits.range_m[0, 0], 7.0, atol=2e-5)
    assert hits.class_id[0, 0] == CLASS_ID["tree"] and hits.material_id[0, 0] == MATERIAL_ID["tree_foliage"]
    # Random rays at the crown: the inscribed mesh lies within its sag of the sphere.
    rng = np.random.default_rng(2)
    target = centre + unit(rng.normal(size=(100, 3))) * radius * rng.uniform(0, 0.8, (100, 1))
    origin = centre + unit(rng.normal(size=(100, 3)) * [1, 1, 0.2]) * 20.0
    d = unit(target - origin)
    oc = origin - centre
    bq = np.einsum("ij,ij->i", oc, d)
    entry = -bq - np.sqrt(bq**2 - (np.einsum("ij,ij->i", oc, oc) - radius**2))
    got = tracer.trace(origin, d, 100.0, 4, 0.25, 0.003)
    first = got.range_m[:, 0]
    crown = got.class_id[:, 0] == CLASS_ID["tree"]
    assert crown.mean() > 0.9
    # The mesh is inscribed: it is entered at or after the sphere, at a point between the
    # sphere and the nearest face plane of the mesh (its inradius).
    assert np.all(first[crown] >= entry[crown] - 1e-6)
    scene = tracer.scene
    tri = scene.vertices_m[scene.triangles[scene.triangle_class == CLASS_ID["tree"]]] - centre
    normal = unit(np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]))
    inradius = np.abs(np.einsum("ij,ij->i", normal, tri[:, 0])).min()
    assert 0.98 * radius < inradius < radius
    dist = np.linalg.norm(origin[crown] + first[crown, None] * d[crown] - centre, axis=1)
    assert np.all((dist >= inradius - 1e-4) & (dist <= radius + 1e-4))


def test_foliage_continuation_reaches_the_trunk_behind_the_crown():
    b = flat_builder()
    height_m = 10.0
    oid = b.add_tree([0.0, 0.0], height_m, trunk_radius_m=0.3)
    tracer = Tracer(b.build())
    z = GROUND_Z_M + 0.5 * height_m  # inside the crown, on the trunk
    hits = trace(tracer, [-10.0, 0.0, z], [1.0, 0.0, 0.0])
    assert hits.class_id[0, :2].tolist() == [CLASS_ID["tree"], CLASS_ID["tree_trunk"]]
    np.testing.assert_allclose(hits.range_m[0, 1], 10.0 - 0.3, atol=2e-5)  # a vertex of the octagon
    assert hits.instance[0, :2].tolist() == [oid, oid]
    assert not hits.valid[0, 2:].any()  # the trunk is solid
    # The same with foliage solid: the crown ends the ray.
    solid = trace(tracer, [-10.0, 0.0, z], [1.0, 0.0, 0.0], foliage_solid=True)
    assert solid.valid[0].tolist() == [True, False, False, False]


def test_leaving_a_crown_is_not_a_hit_and_k_limits_hits():
    b = flat_builder()
    for x in (0.0, 12.0, 24.0):
        b.add_shrub([x, 0.0], 4.0)  # spheres r 2 m, centre 2 m above the ground
    tracer = Tracer(b.build())
    o = [-10.0, 0.0, GROUND_Z_M + 2.0]
    hits = trace(tracer, o, [1.0, 0.0, 0.0], k=4)
    # One hit per shrub at its entry (spheres from x = -2, 10, 22; the 80-face mesh is entered
    # within 5 % of the radius behind the sphere), no hits where the ray leaves one.
    assert hits.valid[0].tolist() == [True, True, True, False]
    assert 8.0 <= hits.range_m[0, 0] <= 8.0 + 0.05 * 2.0
    np.testing.assert_allclose(np.diff(hits.range_m[0, :3]), [12.0, 12.0], atol=2e-5)
    assert np.all(hits.class_id[0, :3] == CLASS_ID["shrub"])
    two = trace(tracer, o, [1.0, 0.0, 0.0], k=2)
    assert two.valid[0].tolist() == [True, True]
    np.testing.assert_array_equal(two.range_m[0], hits.range_m[0, :2])


def test_continue_step_skips_surfaces_just_behind_foliage():
    b = flat_builder()
    b.add_ground_cover([0.0, 0.0], [4.0, 4.0, 0.2])
    tracer = Tracer(b.build())
    o = [0.0, 0.0, GROUND_Z_M + 3.0]
    # The ground is 0.2 m behind the cover's top: within a 0.25 m step it is skipped,
    # with a 0.1 m step it is the second hit.
    skip = trace(tracer, o, [0, 0, -1.0], step_m=0.25)
    assert skip.valid[0].tolist() == [True, False, False, False]
    keep = trace(tracer, o, [0, 0, -1.0], step_m=0.1)
    assert keep.class_id[0, :2].tolist() == [CLASS_ID["ground_cover"], CLASS_ID["ground"]]
    np.testing.assert_allclose(keep.range_m[0, :2], [2.8, 3.0], atol=2e-5)


# --- crops ------------------------------------------------------------------------------------
def crop_scene(yaw_rad: float):
    b = flat_builder(half_m=40.0)
    rng = np.random.default_rng(3)
    nx, ny = 3, 4
    state = rng.integers(0, 3, (4 * ny, 4 * nx))
    b.add_crop_field([-2.0, -1.5], (nx, ny), "corn", 2.0, 0.6, yaw_rad=yaw_rad, cell_state=state)
    return b.build()


def literal_crop_walk(scene, o, d, end_m):
    """The spec's walk: steps of 0.05 m from the ray start; the first step point below the top
    of its crop cell is the hit. Returns the hit parameter or inf."""
    crops = scene.crops
    t = START_M + CROP_STEP_M * np.arange(int((end_m - START_M) / CROP_STEP_M) + 1)
    t = t[t < end_m]
    p = o + t[:, None] * d
    for k in range(len(t)):
        rel = p[k, :2] - crops.centre_xy_m
        c, s = np.cos(crops.yaw_rad), np.sin(crops.yaw_rad)
        lx = c * rel[:, 0] + s * rel[:, 1] + CROP_PATCH_SIZE_M[0] / 2
        ly = -s * rel[:, 0] + c * rel[:, 1] + CROP_PATCH_SIZE_M[1] / 2
        inside = (lx >= 0) & (lx < CROP_PATCH_SIZE_M[0]) & (ly >= 0) & (ly < CROP_PATCH_SIZE_M[1])
        for patch in np.flatnonzero(inside):
            ix = min(int(lx[patch] / (CROP_PATCH_SIZE_M[0] / 4)), 3)
            iy = min(int(ly[patch] / (CROP_PATCH_SIZE_M[1] / 4)), 3)
            if crops.cell_base_z_m[patch, iy, ix] <= p[k, 2] <= crops.cell_top_z_m[patch, iy, ix]:
                return t[k]
    return np.inf


@pytest.mark.parametrize("yaw_rad", [0.0, 0.4])
def test_crop_hits_equal_a_literal_step_walk(yaw_rad):
    scene = crop_scene(yaw_rad)
    tracer = Tracer(scene)
    rng = np.random.default_rng(4)
    n = 300
    target = np.column_stack([rng.uniform(-3, 4, n), rng.uniform(-3, 4, n), GROUND_Z_M + rng.uniform(-0.2, 2.0, n)])
    offset = unit(rng.normal(size=(n, 3)) * [1, 1, 0.5] + [0, 0, 0.4]) * rng.uniform(3, 8, (n, 1))
    offset[:, 2] = np.abs(offset[:, 2]) + 0.3  # origins above the ground
    origin = target + offset
    d = unit(target - origin)
    hits = tracer.trace(origin, d, 100.0, 1, 0.25, 0.003)
    ground_t = (GROUND_Z_M - origin[:, 2]) / d[:, 2]
    ground_t = np.where(ground_t > 0, ground_t, 30.0)  # rays up: walk 30 m, far past the crops
    n_crop = 0
    for i in range(n):
        want = literal_crop_walk(scene, origin[i], d[i], ground_t[i])
        if np.isfinite(want):
            n_crop += 1
            assert hits.class_id[i, 0] == CLASS_ID["corn"], i
            assert hits.range_m[i, 0] == pytest.approx(want, abs=1e-9), i
            assert hits.cos_incidence[i, 0] == 0.5
        elif d[i, 2] < 0:
            assert hits.class_id[i, 0] == CLASS_ID["ground"], i
            assert hits.range_m[i, 0] == pytest.approx(ground_t[i], abs=2e-5), i
        else:
            assert not hits.valid[i].any(), i
    assert 0.3 * n < n_crop < n  # both kinds of rays were tested


def test_crop_cell_heights_follow_growth_and_state():
    b = flat_builder()
    state = np.zeros((4, 8), int)
    state[:, 4:] = 2  # the second patch is harvested
    state[1, 1] = 1  # one crushed cell in the first
    b.add_crop_field([0.0, 0.0], (2, 1), "potato", 0.6, 0.5, cell_state=state)
    crops = b.build().crops
    h_max = 0.6 * (0.03 + 0.97 * 0.5)
    assert crop_box_height_m(0.6, 0.5) == pytest.approx(h_max)
    heights = crops.cell_top_z_m - GROUND_Z_M
    np.testing.assert_allclose(heights[0][state[:, :4] == 0], h_max)
    np.testing.assert_allclose(heights[0, 1, 1], 0.12 * h_max)
    np.testing.assert_allclose(heights[1], 0.03 * h_max)
    assert CROP_CELL_HEIGHT_FRACTION.tolist() == [1.0, 0.12, 0.03]


def test_crop_continuation_gives_several_hits_then_the_ground():
    b = flat_builder()
    b.add_crop_field([-3.04, -2.0], (4, 4), "soybean", 1.0, 1.0)  # full height 1 m everywhere
    tracer = Tracer(b.build())
    o = np.array([0.1, 0.1, GROUND_Z_M + 3.0])
    hits = trace(tracer, o, [0, 0, -1.0], k=8, step_m=0.25)
    # Down a 1 m crop: the first step point below the top (z 1 m) is at t = 2.005 (grid from
    # 0.005); then every 0.25 m inside the crop; the ground at t = 3 is 0.245 m behind t = 2.755.
    np.testing.assert_allclose(hits.range_m[0, :4], [2.005, 2.255, 2.505, 2.755], atol=1e-9)
    assert np.all(hits.class_id[0, :4] == CLASS_ID["soybean"])
    assert not hits.valid[0, 4:].any()
    # A step off the 0.05 m grid: each search starts 0.24 m behind and takes the next grid
    # point; from 2.995 the next one (3.005) is under the ground, so the ground is the 5th hit.
    off_grid = trace(tracer, o, [0, 0, -1.0], k=8, step_m=0.24)
    assert off_grid.class_id[0, :5].tolist() == [CLASS_ID["soybean"]] * 4 + [CLASS_ID["ground"]]
    np.testing.assert_allclose(off_grid.range_m[0, :5], [2.005, 2.255, 2.505, 2.755, 3.0], atol=2e-5)


# --- ground rules at hits ---------------------------------------------------------------------
def test_ground_hits_take_material_wetness_and_pond_depth():
    n = 31
    terrain = TerrainGrid([-60.0, -60.0], 4.0, np.full((n, n), 0.0))
    cover = CellGrid([-60.0, -60.0], 4.0, np.full((30, 30), MATERIAL_ID["soil"], np.uint8))
    cover.values[:, :15] = MATERIAL_ID["grass"]  # x < 0 grass
    pond = np.zeros((60, 60))
    pond[30:, 30:] = 0.001  # thin film at x, y >= 0 ...
    pond[40:, 40:] = 0.5  # ... a pond at x, y >= 20
    wet = np.full((60, 60), 0.4)
    b = SceneBuilder(
        terrain,
        cover,
        [(np.array([[-30.0, -30.0], [-20, -30], [-20, -20], [-30, -20]]), "asphalt")],
        CellGrid([-60.0, -60.0], 2.0, pond),
        CellGrid([-60.0, -60.0], 2.0, wet),
    )
    b.add_mud_clod([-40.0, 40.0], [0.6, 0.6, 0.2])
    tracer = Tracer(b.build())
    xy = np.array([[-10.0, 10.0], [10.0, -10.0], [-25.0, -25.0], [10.0, 10.0], [30.0, 30.0], [-40.0, 40.0]])
    o = np.column_stack([xy, np.full(len(xy), 5.0)])
    hits = tracer.trace(o, np.tile([0.0, 0.0, -1.0], (len(xy), 1)), 50.0, 2, 0.25, 0.003)
    names = ["grass", "soil", "asphalt", "soil", "water", "mud"]
    assert hits.material_id[:, 0].tolist() == [MATERIAL_ID[m] for m in names]
    np.testing.assert_allclose(hits.wetness[:, 0], [0.0, 0.4, 0.0, 0.4, 1.0, 1.0])
    np.testing.assert_allclose(hits.pond_depth_m[:, 0], [0.0, 0.0, 0.0, 0.001, 0.5, 0.0])
    assert hits.class_id[5, 0] == CLASS_ID["mud_clod"]


# --- dynamic boxes ----------------------------------------------------------------------------
def test_box_hit_at_its_pose_truncates_the_scene_behind_it():
    b = flat_builder()
    b.add_shrub([0.0, 0.0], 2.0)  # foliage in front of the box: kept
    tracer = Tracer(b.build())
    yaw = 0.7
    q = [0.0, 0.0, np.sin(yaw / 2), np.cos(yaw / 2)]
    centre = np.array([6.0, 0.0, GROUND_Z_M + 1.0])
    box = VehicleBox(centre, q, [2.0, 1.0, 0.8], object_id=77)
    # Along the box's own -y axis onto its +y face (1 m from the centre), through the shrub.
    axis_y = np.array([-np.sin(yaw), np.cos(yaw), 0.0])
    o = centre + 9.0 * axis_y
    hits = trace(tracer, o, -axis_y, boxes=[box])
    np.testing.assert_allclose(hits.range_m[0, 0], 8.0, atol=1e-12)
    assert (hits.class_id[0, 0], hits.material_id[0, 0], hits.instance[0, 0]) == (12, 14, VEHICLE_INSTANCE_BASE + 77)
    np.testing.assert_allclose(hits.cos_incidence[0, 0], 1.0)
    assert not hits.valid[0, 1:].any()  # the ground and anything behind the box are gone
    # A ray from the shrub's far side: shrub first, then the box.
    o2 = np.array([-3.0, 0.0, GROUND_Z_M + 1.0])
    both = trace(tracer, o2, [1.0, 0.0, 0.0], boxes=[box])
    assert both.class_id[0, :2].tolist() == [CLASS_ID["shrub"], CLASS_ID["vehicle"]]
    assert not both.valid[0, 2:].any()
    # Without the box the same ray goes on.
    assert trace(tracer, o2, [1.0, 0.0, 0.0]).class_id[0, 1] != CLASS_ID["vehicle"]


def test_a_solid_in_front_of_a_box_hides_it():
    b = flat_builder()
    b.add_box([3.0, 0.0], [0.5, 4.0, 4.0], "building")
    tracer = Tracer(b.build())
    box = VehicleBox([8.0, 0.0, GROUND_Z_M + 1.0], [0, 0, 0, 1.0], [1.0, 1.0, 1.0], 5)
    hits = trace(tracer, [0.0, 0.0, GROUND_Z_M + 1.0], [1.0, 0.0, 0.0], boxes=[box])
    assert hits.valid[0].tolist() == [True, False, False, False]
    assert hits.class_id[0, 0] == CLASS_ID["building"]
    np.testing.assert_allclose(hits.range_m[0, 0], 2.75, atol=2e-5)


# --- reference, determinism, arguments --------------------------------------------------------
def moller_trumbore(o, d, v0, v1, v2):
    """(n, t) ray parameters of every ray with every triangle, inf where none (float64)."""
    e1, e2 = v1 - v0, v2 - v0
    p = np.cross(d[:, None, :], e2[None])
    det = np.einsum("ntk,tk->nt", p, e1)
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = 1.0 / det
        s = o[:, None, :] - v0[None]
        u = np.einsum("ntk,ntk->nt", s, p) * inv
        q = np.cross(s, e1[None])
        v = np.einsum("nk,ntk->nt", d, q) * inv
        t = np.einsum("ntk,tk->nt", q, e2) * inv
    ok = (np.abs(det) > 1e-12) & (u >= 0) & (v >= 0) & (u + v <= 1) & (t > 0)
    return np.where(ok, t, np.inf)


def test_hits_equal_a_brute_force_linear_scan():
    b = flat_builder(half_m=20.0)
    b.add_box([3.0, 2.0], [2.0, 3.0, 2.5], "building", yaw_rad=0.3, roof_height_m=1.0)
    b.add_cylinder([-4.0, 3.0], 1.5, 4.0, "silo", cone_height_m=1.0)
    b.add_tree([2.0, -5.0], 8.0)
    b.add_shrub([-3.0, -3.0], 2.0)
    scene = b.build()
    tracer = Tracer(scene)
    rng = np.random.default_rng(5)
    n = 400
    origin = np.column_stack([rng.uniform(-12, 12, n), rng.uniform(-12, 12, n), GROUND_Z_M + rng.uniform(0.5, 9, n)])
    target = np.column_stack([rng.uniform(-6, 6, n), rng.uniform(-6, 6, n), GROUND_Z_M + rng.uniform(-1, 5, n)])
    d = unit(target - origin)
    k = 3
    hits = tracer.trace(origin, d, 60.0, k, 0.25, 0.003)
    v = scene.vertices_m[scene.triangles]
    t_all = moller_trumbore(origin, d, v[:, 0], v[:, 1], v[:, 2])
    normal = unit(np.cross(v[:, 1] - v[:, 0], v[:, 2] - v[:, 0]))
    leaving = scene.triangle_closed[None, :] & (d @ normal.T > 0)
    foliage = IS_FOLIAGE_CLASS[scene.triangle_class]
    for i in range(n):
        # Reference walk over all triangles: nearest crossing from the current start, proxy
        # exits passed, foliage continued 0.25 m behind.
        start, got = START_M, []
        while len(got) < k:
            cand = np.where(t_all[i] >= start, t_all[i], np.inf)
            j = int(np.argmin(cand))
            if not np.isfinite(cand[j]) or cand[j] > 60.0:
                break
            if leaving[i, j]:
                start = cand[j] + 1e-3
                continue
            got.append((cand[j], scene.triangle_class[j], scene.triangle_instance[j]))
            if not foliage[j]:
                break
            start = cand[j] + 0.25
        assert hits.valid[i].sum() == len(got), i
        for slot, (t, cls, oid) in enumerate(got):
            assert hits.range_m[i, slot] == pytest.approx(t, abs=1e-4), (i, slot)
            assert (hits.class_id[i, slot], hits.instance[i, slot]) == (cls, oid), (i, slot)


def test_trace_is_deterministic():
    scene = crop_scene(0.3)
    rng = np.random.default_rng(6)
    origin = np.tile([0.0, -6.0, GROUND_Z_M + 2.0], (2000, 1))
    d = unit(rng.normal(size=(2000, 3)))
    a = Tracer(scene).trace(origin, d, 50.0, 4, 0.25, 0.003)
    b = Tracer(scene).trace(origin, d, 50.0, 4, 0.25, 0.003)
    for field in a.__dataclass_fields__:
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)
    assert a.valid.any() and (a.class_id == CLASS_ID["corn"]).any()


def test_casting_in_pieces_changes_no_hit(monkeypatch):
    # The tracer casts at most CAST_PIECE_RAYS rays per call (the GIL is free between calls);
    # pieces of 97 rays must give the very hits of one call per cast.
    import acres_lidar_ros.tracing.trace as trace_module

    scene = crop_scene(0.3)
    rng = np.random.default_rng(8)
    origin = np.tile([0.0, -6.0, GROUND_Z_M + 2.0], (3000, 1))
    d = unit(rng.normal(size=(3000, 3)))
    whole = Tracer(scene).trace(origin, d, 50.0, 4, 0.25, 0.003)
    monkeypatch.setattr(trace_module, "CAST_PIECE_RAYS", 97)
    pieces = Tracer(scene).trace(origin, d, 50.0, 4, 0.25, 0.003)
    for field in whole.__dataclass_fields__:
        np.testing.assert_array_equal(getattr(pieces, field), getattr(whole, field), err_msg=field)
    assert whole.valid.sum() > 1000 and (whole.class_id == CLASS_ID["corn"]).any()


def test_cast_bare_is_one_first_hit_cast():
    tracer = Tracer(flat_builder().build())
    d = unit([[0.0, 0.0, -1.0], [0.0, 0.0, 1.0]])
    t = tracer.cast_bare(np.array([[0.0, 0.0, GROUND_Z_M + 2.0]] * 2), d)
    assert t.dtype == np.float32 and t[0] == pytest.approx(2.0, abs=1e-5) and np.isinf(t[1])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(max_hits=0), "max_hits = 0"),
        (dict(max_range_m=-1.0), "max_range_m = -1.0"),
        (dict(continue_step_m=float("nan")), "continue_step_m = nan"),
    ],
)
def test_bad_arguments_are_config_errors(kwargs, match):
    tracer = Tracer(flat_builder().build())
    args = dict(max_range_m=10.0, max_hits=2, continue_step_m=0.25, pond_threshold_m=0.003)
    args.update(kwargs)
    with pytest.raises(ConfigError, match=match):
        tracer.trace(np.zeros((1, 3)), unit([[0, 0, -1.0]]), **args)
    with pytest.raises(ConfigError, match=r"must both have shape \(n, 3\)"):
        tracer.trace(np.zeros((2, 3)), np.zeros((3, 3)), 10.0, 2, 0.25, 0.003)
