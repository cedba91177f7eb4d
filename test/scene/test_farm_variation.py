"""Worlds that vary: crop growth, harvest and soil wetness on the built-in farm; drawn vehicles."""

from __future__ import annotations

import math

import numpy as np
import pytest

from acres_lidar_ros.errors import SceneError
from acres_lidar_ros.scene.box_tracks import BoxTracks
from acres_lidar_ros.scene.farm_v1 import build_default_farm
from acres_lidar_ros.scene.farm_variation import vary_farm, vehicle_tracks

# The spec's crop fields of the v2 farm (farm_v2 docstring): corn 2.6 m at G 0.85, soybean 0.9 m at 0.45.
CORN_H_M, CORN_G = 2.6, 0.85
SOY_H_M, SOY_G = 0.9, 0.45
SOY_RECT = (-44.0, 32.0, 34.0, 63.0)


@pytest.fixture(scope="module")
def farm():
    return build_default_farm(seed=0)


def _patches(scene, name):
    return np.asarray(scene.object_names, dtype=object)[scene.crops.instance] == name


def test_crop_growth_sets_each_fields_h_max_by_the_spec(farm):
    varied = vary_farm(farm, crop_growth={"corn_field": 0.2})
    corn = _patches(farm, "corn_field")
    height = farm.crops.cell_top_z_m - farm.crops.cell_base_z_m
    new_height = varied.crops.cell_top_z_m - varied.crops.cell_base_z_m
    standing = np.isclose(height, CORN_H_M * (0.03 + 0.97 * CORN_G)) & corn[:, None, None]
    assert standing.sum() > 1000  # most corn cells stand
    np.testing.assert_allclose(new_height[standing], CORN_H_M * (0.03 + 0.97 * 0.2), rtol=1e-12)
    np.testing.assert_array_equal(new_height[~corn], height[~corn])  # other fields as they were


def test_harvest_cuts_a_field_from_its_west_edge(farm):
    varied = vary_farm(farm, harvested={"soybean_field": 0.5})
    soy = _patches(farm, "soybean_field")
    west = soy & (farm.crops.centre_xy_m[:, 0] < SOY_RECT[0] + 0.5 * (SOY_RECT[2] - SOY_RECT[0]))
    new_height = varied.crops.cell_top_z_m - varied.crops.cell_base_z_m
    np.testing.assert_allclose(new_height[west], 0.03 * SOY_H_M * (0.03 + 0.97 * SOY_G), rtol=1e-12)
    east = soy & ~west
    assert east.sum() > 100
    np.testing.assert_array_equal(varied.crops.cell_top_z_m[east], farm.crops.cell_top_z_m[east])


def test_soil_wetness_is_shifted_and_stays_a_wetness(farm):
    wetter = vary_farm(farm, soil_wetness=0.3).soil_wetness.values
    before = farm.soil_wetness.values
    np.testing.assert_allclose(wetter, np.minimum(before + 0.3, 1.0))
    assert vary_farm(farm, soil_wetness=-1.0).soil_wetness.values.max() == 0.0


def test_an_unknown_field_is_refused(farm):
    with pytest.raises(SceneError, match="'wheat_field': not a crop field of the built-in farm; allowed: corn_field"):
        vary_farm(farm, crop_growth={"wheat_field": 0.5})


def test_a_drawn_vehicle_drives_its_line_on_the_ground(farm):
    vehicle = {
        "object_id": 3,
        "bearing_deg": 90.0,
        "distance_m": 20.0,
        "heading_deg": 180.0,
        "speed_m_s": 4.0,
        "half_extents_m": [2.3, 1.0, 0.8],
    }
    tracks = BoxTracks.from_dict(vehicle_tracks(farm, np.array([10.0, 0.0]), 0.0, 2.0, [vehicle]))
    box = tracks.boxes_at(1.25)[0]
    x, y = 10.0 - 4.0 * 1.25, 20.0  # 20 m north of the start, then west at 4 m/s
    np.testing.assert_allclose(box.centre_m[:2], [x, y], atol=1e-9)
    # z is linear between samples 0.1 s apart: within the ground's change over 0.4 m
    assert abs(box.centre_m[2] - (float(farm.height_at(x, y)) + 0.8)) < 0.05
    np.testing.assert_allclose(box.quaternion_xyzw, [0, 0, math.sin(math.pi / 2), math.cos(math.pi / 2)], atol=1e-12)
    assert box.object_id == 3 and tracks.span_s == (0.0, 2.0)
