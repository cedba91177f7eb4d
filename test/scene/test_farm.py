"""The built-in farms and their tours: determinism, contents, relief, a drivable tour.

Layout "v2" is the default farm; "v1" is the first farm, kept for the golden scans.
"""

from __future__ import annotations

import numpy as np
import pytest

from acres_lidar_ros.config.material_table import (
    CLASS_ID,
    CLASS_NAMES,
    COVER_MATERIAL_NAMES,
    MATERIAL_ID,
    SPEC_CLASS_NAMES,
)
from acres_lidar_ros.errors import SceneError
from acres_lidar_ros.scene import farm_v2_ground as ground
from acres_lidar_ros.scene.farm_v1 import build_default_farm
from acres_lidar_ros.scene.tour import default_tour
from acres_lidar_ros.tracing.trace import Tracer

LAYOUTS = ("v1", "v2")


@pytest.fixture(scope="module", params=LAYOUTS)
def layout(request):
    return request.param


@pytest.fixture(scope="module")
def farm(layout):
    return build_default_farm(seed=0, layout=layout)


@pytest.fixture(scope="module")
def tour(farm, layout):
    return default_tour(farm, layout=layout)


@pytest.fixture(scope="module")
def v2():
    return build_default_farm(seed=0)


def test_the_default_farm_and_tour_are_layout_v2(v2):
    assert v2.terrain.cell_m == 0.5
    default = default_tour(v2)
    np.testing.assert_array_equal(default[1], default_tour(v2, layout="v2")[1])


def test_an_unknown_layout_is_refused_with_the_allowed_ones(v2):
    with pytest.raises(SceneError, match=r"layout = 'v3'.*allowed: v1, v2"):
        build_default_farm(seed=0, layout="v3")
    with pytest.raises(SceneError, match=r"layout = 'v3'.*allowed: v1, v2"):
        default_tour(v2, layout="v3")


def test_same_seed_same_bytes_other_seed_other_farm(farm, layout):
    again = build_default_farm(seed=0, layout=layout)
    assert again.digest() == farm.digest()
    np.testing.assert_array_equal(again.vertices_m, farm.vertices_m)
    np.testing.assert_array_equal(again.crops.cell_top_z_m, farm.crops.cell_top_z_m)
    assert build_default_farm(seed=1, layout=layout).digest() != farm.digest()


def test_v1_covers_a_square_kilometre_with_gentle_relief():
    farm = build_default_farm(seed=0, layout="v1")
    (x0, y0), (x1, y1) = farm.extent_xy_m
    assert (x1 - x0) * (y1 - y0) >= 1e6
    relief = np.ptp(farm.terrain.height_m)
    assert 1.0 < relief < 10.0
    slope = np.abs(np.diff(farm.terrain.height_m, axis=1)).max() / farm.terrain.cell_m
    assert slope < 0.05


def _detrended(h: np.ndarray, window: int) -> np.ndarray:
    """``h`` less its moving average over ``window`` nodes (both axes)."""
    from scipy import ndimage

    return h - ndimage.uniform_filter(h, window, mode="nearest")


def test_v2_terrain_is_a_half_metre_grid_with_relief_at_every_scale(v2):
    t = v2.terrain
    (x0, y0), (x1, y1) = t.extent_xy_m
    assert t.cell_m == 0.5 and (x1 - x0) >= 380 and (y1 - y0) >= 380
    # Elevation change across the farm: metres between the corners' neighbourhoods.
    assert np.ptp(t.height_m) > 5.0
    x, y = np.meshgrid(np.arange(-180.0, 181.0, 4.0), np.arange(-180.0, 181.0, 4.0))
    z = v2.height_at(x, y)
    assert np.ptp(z) > 5.0
    # Field undulation: in the pasture south-west, decimetres about the 60 m mean, over tens of metres.
    xs, ys = np.meshgrid(np.arange(-180.0, -80.0, 0.5), np.arange(-180.0, -100.0, 0.5))
    h = v2.height_at(xs, ys)
    plane = np.linalg.lstsq(np.column_stack([xs.ravel(), ys.ravel(), np.ones(xs.size)]), h.ravel(), rcond=None)[0]
    residual = h - (plane[0] * xs + plane[1] * ys + plane[2])
    assert residual.std() > 0.05 and np.ptp(residual) < 3.0
    # Roughness at the metre scale: centimetres.
    fine = _detrended(h, 5)
    assert 0.005 < fine.std() < 0.05


def test_v2_open_field_has_north_south_furrows_two_metres_apart(v2):
    x = np.arange(60.0, 140.0, 0.5)
    profile = v2.height_at(x, -60.0)
    fine = profile - np.convolve(profile, np.ones(8) / 8, mode="same")
    spectrum = np.abs(np.fft.rfft(fine[8:-8] * np.hanning(len(fine) - 16)))
    freq = np.fft.rfftfreq(len(fine) - 16, 0.5)
    assert abs(1.0 / freq[np.argmax(spectrum[1:]) + 1] - 2.0) < 0.1  # cycles per metre


def test_v2_farm_track_has_two_ruts_and_the_road_a_crown_and_ditches(v2):
    # Across the farm track at x = 70 (it runs along y = 0): ruts 1 m either side, 7 cm deep.
    y = np.linspace(-2.5, 2.5, 201)
    across = v2.height_at(70.0, y)
    base = np.interp(0.0, [-2.5, 2.5], across[[0, -1]])
    for side in (-1, 1):
        rut = across[np.abs(y - side * 1.0) < 0.01].mean()
        assert rut < across[np.abs(y) < 0.05].mean() - 0.05  # 7 cm rut, 2 cm hump, 1 cm roughness
        assert rut < base - 0.03
    # Across the road at y = 30 (it runs along x = -55): crowned carriageway, ditches both sides.
    x = ground.ROAD_X_M + np.linspace(-10.0, 10.0, 401)
    road = v2.height_at(x, 30.0)
    d = np.abs(x - ground.ROAD_X_M)
    centre, edge = road[d < 0.05].mean(), road[np.abs(d - 3.2) < 0.05].mean()
    assert 0.05 < centre - edge < 0.12  # a 2.5 % crown over 3.25 m
    for side in (-1, 1):
        ditch = road[(np.sign(x - ground.ROAD_X_M) == side) & (d > 5.0) & (d < 8.0)].min()
        assert ditch < edge - 0.6
    # Where the track meets the road, the ditch is filled (a culvert): no dip under the tour.
    x = np.linspace(ground.ROAD_X_M, ground.ROAD_X_M + 10.0, 41)
    assert v2.height_at(x, 0.0).min() > v2.height_at(ground.ROAD_X_M, 0.0) - 0.3


def test_v2_crop_fields_stand_at_three_growth_stages_with_tramlines(v2):
    crops = v2.crops
    assert {CLASS_NAMES[c] for c in np.unique(crops.class_id)} == {"corn", "soybean", "potato"}
    h = crops.cell_top_z_m - crops.cell_base_z_m
    standing = {CLASS_NAMES[c]: h[crops.class_id == c].max() for c in np.unique(crops.class_id)}
    # h_max = h_crop (0.03 + 0.97 G) of the spec, for each field's crop height and growth.
    for field in ground.FIELDS:
        if field.crop is not None:
            expected = field.crop_height_m * (0.03 + 0.97 * field.growth)
            assert standing[field.crop] == pytest.approx(expected, rel=1e-12)
    # Tramlines: crushed cells (12 %) in lines along y every 24 m.
    corn = crops.class_id == CLASS_ID["corn"]
    crushed = np.isclose(h[corn], 0.12 * standing["corn"])
    assert 0.02 < crushed.mean() < 0.2


def test_v2_has_the_structure_of_a_farm(v2):
    names = v2.object_names
    count = {
        kind: sum(n.startswith(kind) for n in names)
        for kind in (
            "fence_post",
            "utility_pole",
            "shelterbelt_tree",
            "tree_line",
            "field_bale",
            "round_bale_stack",
            "square_bale",
            "grain_bin",
            "hopper_bin",
            "paddock_post",
            "delineator",
        )
    }
    assert count["fence_post"] >= 100 and count["utility_pole"] >= 8 and count["shelterbelt_tree"] >= 30
    assert count["tree_line"] >= 10 and count["field_bale"] >= 20 and count["grain_bin"] >= 2
    assert min(count.values()) > 0, count
    for name in ("tractor", "combine", "grain_cart", "machine_shed", "barn", "bale_shed", "house", "workshop"):
        assert name in names
    # Every object has a class and a type (the instance table's), and triangles or crop patches.
    assert len(v2.object_class) == len(v2.object_type) == len(names)
    assert v2.object_class[names.index("tractor")] == CLASS_ID["other"]
    assert v2.object_class[names.index("grain_bin_0")] == CLASS_ID["silo"]
    # Every named object has triangles, and the machinery stands on the ground.
    present = np.zeros(len(names), bool)
    present[v2.triangle_instance] = True
    crop_ids = set(np.unique(v2.crops.instance).tolist())
    assert all(present[i] or i in crop_ids for i in range(len(names)))
    tractor = v2.vertices_m[np.unique(v2.triangles[v2.triangle_instance == names.index("tractor")])]
    ground_z = v2.height_at(*tractor[:, :2].mean(axis=0))
    assert abs(tractor[:, 2].min() - ground_z) < 0.2 and 2.5 < tractor[:, 2].max() - ground_z < 3.5


def test_every_static_class_is_present_and_every_triangle_is_labelled(farm, layout):
    static = set(SPEC_CLASS_NAMES) - {"vehicle", "precipitation"}
    assert farm.classes_present() == static
    assert farm.triangle_class.max() < len(CLASS_NAMES)
    ground_triangles = farm.triangle_class == CLASS_ID["ground"]
    assert np.all(farm.triangle_material[ground_triangles] == -1)
    other = ~ground_triangles
    assert np.all((farm.triangle_material[other] >= 0) & (farm.triangle_material[other] < len(MATERIAL_ID)))
    assert farm.triangle_instance.max() < len(farm.object_names)
    low, high = {"v1": (50_000, 400_000), "v2": (1_000_000, 1_600_000)}[layout]
    assert low < farm.triangle_count < high
    crops = farm.crops
    assert {CLASS_NAMES[c] for c in np.unique(crops.class_id)} == {"corn", "soybean", "potato"}
    h = crops.cell_top_z_m - crops.cell_base_z_m
    h_max = {c: h[crops.class_id == c].max() for c in np.unique(crops.class_id)}
    fractions = np.unique(np.round(h / np.vectorize(h_max.get)(crops.class_id)[:, None, None], 6))
    expected = {"v1": {0.03, 0.12, 1.0}, "v2": {0.12, 1.0}}[layout]  # harvested (v1), crushed, standing
    assert set(fractions.tolist()) == expected


def test_ground_maps_give_every_cover_material_and_water(farm):
    (x0, y0), (x1, y1) = farm.extent_xy_m
    x, y = np.meshgrid(np.arange(x0 + 2, x1 - 2, 0.5), np.arange(y0 + 2, y1 - 2, 0.5))
    material = farm.ground_material_at(x.ravel(), y.ravel(), 0.003)
    present = {MATERIAL_ID[m] for m in COVER_MATERIAL_NAMES} | {MATERIAL_ID["water"]}
    assert present <= set(np.unique(material).tolist())
    depth = farm.pond_depth_at(x.ravel(), y.ravel())
    assert depth.max() > 0.5 and np.all(material[depth > 0.003] == MATERIAL_ID["water"])


def test_tour_is_100_hz_long_enough_and_at_farm_speeds(tour, farm):
    times, positions, quats = tour
    assert np.allclose(np.diff(times), 0.01) and times[-1] >= 60.0
    speed = np.linalg.norm(np.diff(positions, axis=0), axis=1) / 0.01
    assert speed.max() <= 8.0 and speed.max() >= 6.0
    np.testing.assert_allclose(np.linalg.norm(quats, axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(positions[:, 2], farm.height_at(positions[:, 0], positions[:, 1]), atol=1e-9)
    assert np.hypot(*positions[0, :2]) < 60.0  # starts at the farmyard
    # Yaw follows the direction of travel.
    yaw = 2 * np.arctan2(quats[:, 2], quats[:, 3])
    heading = np.arctan2(*np.diff(positions[:, :2], axis=0).T[::-1])
    moving = speed > 1.0
    err = np.angle(np.exp(1j * (yaw[1:][moving] - heading[moving])))
    assert np.abs(err).max() < 0.1


def test_v1_tour_cruises_without_stops():
    times, positions, _ = default_tour(build_default_farm(seed=0, layout="v1"), layout="v1")
    speed = np.linalg.norm(np.diff(positions, axis=0), axis=1) / 0.01
    cruising = speed[(times[1:] > 10.0) & (times[1:] < times[-1] - 10.0)]
    assert np.percentile(cruising, 5) >= 2.9


def test_v2_tour_stops_turns_runs_along_the_open_field_and_through_the_yard(v2):
    times, positions, quats = default_tour(v2)
    speed = np.linalg.norm(np.diff(positions, axis=0), axis=1) / 0.01
    # Stops on the way: runs of >= 1.5 s at rest between the start and the end (the dwells are 2 s and
    # more; a 2 s dwell is 199 samples at rest between the speeds of the 10 ms steps).
    at_rest = np.concatenate([[0], (speed < 1e-6).astype(int), [0]])
    edges = np.flatnonzero(np.diff(at_rest))
    runs = [(a, b) for a, b in zip(edges[::2], edges[1::2]) if a > 0 and b < len(speed) and (b - a) >= 150]
    assert len(runs) == 3  # README: the tour "stops three times"
    # Turns: the heading sweeps at least four right angles in all.
    yaw = np.unwrap(2 * np.arctan2(quats[:, 2], quats[:, 3]))
    assert np.abs(np.diff(yaw)).sum() > 4 * np.pi / 2 * 0.95
    # Along the open field's north edge (within 6 m of it) for at least 40 m, with nothing between.
    x0, y0, x1, y1 = ground.FIELDS[0].rect
    beside = (positions[:, 0] > x0) & (positions[:, 0] < x1) & (np.abs(positions[:, 1] - y1) < 6.0)
    assert np.ptp(positions[beside, 0]) > 40.0
    # Through the farmyard.
    yx0, yy0, yx1, yy1 = ground.YARD_RECT_M
    in_yard = (positions[:, 0] > yx0) & (positions[:, 0] < yx1) & (positions[:, 1] > yy0) & (positions[:, 1] < yy1)
    assert np.ptp(positions[in_yard, 0]) > 50.0


def test_tour_is_clear_of_obstacles(tour, farm):
    _, positions, _ = tour
    tracer = Tracer(farm)
    p = positions[::50]
    forward = np.gradient(p[:, :2], axis=0)
    forward /= np.maximum(np.linalg.norm(forward, axis=1, keepdims=True), 1e-12)
    left = np.column_stack([-forward[:, 1], forward[:, 0]])
    # A 2.4 m wide, 2.5 m tall vehicle: nothing but the ground inside its footprint column.
    origins, dirs = [], []
    for offset in (-1.2, 0.0, 1.2):
        base = p.copy()
        base[:, :2] += offset * left
        base[:, 2] = farm.height_at(base[:, 0], base[:, 1]) + 0.2
        origins.append(base)
        dirs.append(np.tile([0.0, 0.0, 1.0], (len(p), 1)))
        origins.append(base + [0, 0, 2.3])
        dirs.append(np.tile([0.0, 0.0, -1.0], (len(p), 1)))
    hits = tracer.trace(np.vstack(origins), np.vstack(dirs), 2.3, 1, 0.25, 0.003)
    hit_class = hits.class_id[hits.valid[:, 0], 0]
    assert set(hit_class.tolist()) <= {CLASS_ID["ground"]}, [CLASS_NAMES[c] for c in set(hit_class.tolist())]


def test_a_scan_from_the_tour_start_sees_the_farm(farm, tour):
    _, positions, _ = tour
    el, az = np.meshgrid(np.deg2rad(np.linspace(-25, 15, 32)), np.linspace(0, 2 * np.pi, 720, endpoint=False))
    d = np.stack([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)], -1).reshape(-1, 3)
    o = np.tile(positions[0] + [0, 0, 2.0], (len(d), 1))
    hits = Tracer(farm).trace(o, d, 200.0, 4, 0.25, 0.003)
    seen = {CLASS_NAMES[c] for c in np.unique(hits.class_id[hits.valid])}
    assert {"ground", "building", "silo", "tree", "tree_trunk"} <= seen
