"""The built-in farm and its tour: determinism, contents, a drivable tour."""

from __future__ import annotations

import numpy as np
import pytest

from acres_lidar_ros.config.materials import CLASS_ID, CLASS_NAMES, COVER_MATERIAL_NAMES, MATERIAL_ID
from acres_lidar_ros.scene import build_default_farm, default_tour
from acres_lidar_ros.tracing.trace import Tracer


@pytest.fixture(scope="module")
def farm():
    return build_default_farm(seed=0)


@pytest.fixture(scope="module")
def tour(farm):
    return default_tour(farm)


def test_same_seed_same_bytes_other_seed_other_farm(farm):
    again = build_default_farm(seed=0)
    assert again.digest() == farm.digest()
    np.testing.assert_array_equal(again.vertices_m, farm.vertices_m)
    assert build_default_farm(seed=1).digest() != farm.digest()


def test_farm_covers_a_square_kilometre_with_gentle_relief(farm):
    (x0, y0), (x1, y1) = farm.extent_xy_m
    assert (x1 - x0) * (y1 - y0) >= 1e6
    relief = np.ptp(farm.terrain.height_m)
    assert 1.0 < relief < 10.0
    slope = np.abs(np.diff(farm.terrain.height_m, axis=1)).max() / farm.terrain.cell_m
    assert slope < 0.05


def test_every_static_class_is_present_and_every_triangle_is_labelled(farm):
    static = set(CLASS_NAMES) - {"vehicle", "precipitation"}
    assert farm.classes_present() == static
    assert farm.triangle_class.max() < len(CLASS_NAMES)
    ground = farm.triangle_class == CLASS_ID["ground"]
    assert np.all(farm.triangle_material[ground] == -1)
    assert np.all((farm.triangle_material[~ground] >= 0) & (farm.triangle_material[~ground] < len(MATERIAL_ID)))
    assert farm.triangle_instance.max() < len(farm.object_names)
    assert 50_000 < farm.triangle_count < 400_000
    crops = farm.crops
    assert {CLASS_NAMES[c] for c in np.unique(crops.class_id)} == {"corn", "soybean", "potato"}
    h = crops.cell_top_z_m - crops.cell_base_z_m
    h_max = {c: h[crops.class_id == c].max() for c in np.unique(crops.class_id)}
    fractions = np.unique(np.round(h / np.vectorize(h_max.get)(crops.class_id)[:, None, None], 6))
    assert set(fractions.tolist()) == {0.03, 0.12, 1.0}  # harvested, crushed, standing cells


def test_ground_maps_give_every_cover_material_and_water(farm):
    x, y = np.meshgrid(np.arange(-510.0, 510.0, 1.0), np.arange(-510.0, 510.0, 1.0))
    material = farm.ground_material_at(x.ravel(), y.ravel(), 0.003)
    present = {MATERIAL_ID[m] for m in COVER_MATERIAL_NAMES} | {MATERIAL_ID["water"]}
    assert present <= set(np.unique(material).tolist())
    depth = farm.pond_depth_at(x.ravel(), y.ravel())
    assert depth.max() > 0.5 and np.all(material[depth > 0.003] == MATERIAL_ID["water"])


def test_tour_is_100_hz_long_enough_and_at_farm_speeds(tour, farm):
    times, positions, quats = tour
    assert np.allclose(np.diff(times), 0.01) and times[-1] >= 60.0
    speed = np.linalg.norm(np.diff(positions, axis=0), axis=1) / 0.01
    assert speed.max() <= 8.0
    cruising = speed[(times[1:] > 10.0) & (times[1:] < times[-1] - 10.0)]
    assert np.percentile(cruising, 5) >= 2.9 and cruising.max() >= 6.0
    np.testing.assert_allclose(np.linalg.norm(quats, axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(positions[:, 2], farm.height_at(positions[:, 0], positions[:, 1]), atol=1e-9)
    assert np.hypot(*positions[0, :2]) < 60.0  # starts at the farmyard
    # Yaw follows the direction of travel.
    yaw = 2 * np.arctan2(quats[:, 2], quats[:, 3])
    heading = np.arctan2(*np.diff(positions[:, :2], axis=0).T[::-1])
    moving = speed > 1.0
    err = np.angle(np.exp(1j * (yaw[1:][moving] - heading[moving])))
    assert np.abs(err).max() < 0.1


def test_tour_is_clear_of_obstacles(tour, farm):
    _, positions, _ = tour
    tracer = Tracer(farm)
    p = positions[::50]
    forward = np.gradient(p[:, :2], axis=0)
    forward /= np.linalg.norm(forward, axis=1, keepdims=True)
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
