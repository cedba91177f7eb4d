"""The scene placed in the odom frame (``Tracer(T_scene_odom=...)``, ``tracing.scene_frame``): a
ray given in odom meets the scene where the odom frame's pose in the scene puts it."""

from __future__ import annotations

import numpy as np
import pytest

from acres_lidar_ros.config.material_table import CLASS_ID
from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.scene.boxes import VehicleBox
from acres_lidar_ros.scene.builder import SceneBuilder
from acres_lidar_ros.scene.grids import TerrainGrid
from acres_lidar_ros.tracing.scene_frame import odom_in_scene_transform
from acres_lidar_ros.tracing.trace import Tracer

GROUND_Z_M = 1.5
# The odom origin at scene (25, 10, 0.5), its x axis along the scene's +y (yaw 90 deg).
ODOM_IN_SCENE = [25.0, 10.0, 0.5, 0.0, 0.0, 90.0]


def yard_tracer(T_scene_odom=None) -> Tracer:
    """Flat ground at z = 1.5 m and a 2 x 2 x 4 m building on it centred at scene (30, 10)."""
    builder = SceneBuilder(TerrainGrid([-60.0, -60.0], 4.0, np.full((31, 31), GROUND_Z_M)))
    builder.add_box([30.0, 10.0], [2.0, 2.0, 4.0], "building")
    return Tracer(builder.build(), T_scene_odom=T_scene_odom)


def trace(tracer, origins, directions):
    o, d = np.atleast_2d(np.asarray(origins, float)), np.atleast_2d(np.asarray(directions, float))
    return tracer.trace(o, d, 100.0, 2, 0.25, 0.003)


def test_a_pose_in_odom_meets_the_scene_at_pose_plus_offset():
    tracer = yard_tracer(odom_in_scene_transform(ODOM_IN_SCENE, "odom_in_scene"))
    # Down from odom (0, 0, 3.5): scene z 4.0 over ground at 1.5 -> 2.5 m.
    down = trace(tracer, [0.0, 0.0, 3.5], [0.0, 0.0, -1.0])
    assert down.range_m[0, 0] == pytest.approx(2.5, abs=1e-5) and down.class_id[0, 0] == CLASS_ID["ground"]
    # Along odom -y from odom (0, 0, 2): in the scene from (25, 10, 2.5) along +x (odom -y turned by
    # yaw 90 deg), onto the building's west face at x = 29 m: 4 m.
    west = trace(tracer, [0.0, 0.0, 2.0], [0.0, -1.0, 0.0])
    assert west.range_m[0, 0] == pytest.approx(4.0, abs=1e-5) and west.class_id[0, 0] == CLASS_ID["building"]
    assert west.cos_incidence[0, 0] == pytest.approx(1.0, abs=1e-6)
    np.testing.assert_allclose(
        tracer.cast_bare(np.array([[0.0, 0.0, 2.0], [0.0, 0.0, 3.5]]), np.array([[0.0, -1.0, 0], [0, 0, -1.0]])),
        [4.0, 2.5],
        atol=1e-5,
    )
    # The same rays without the offset: no building ahead, the ground 3.5 - 1.5 = 2 m below.
    plain = yard_tracer()
    assert not trace(plain, [0.0, 0.0, 2.0], [0.0, -1.0, 0.0]).valid[0].any()
    assert trace(plain, [0.0, 0.0, 3.5], [0.0, 0.0, -1.0]).range_m[0, 0] == pytest.approx(2.0, abs=1e-5)


def test_vehicle_boxes_stay_in_odom():
    tracer = yard_tracer(odom_in_scene_transform(ODOM_IN_SCENE, "odom_in_scene"))
    box = VehicleBox(np.array([0.0, -2.0, 2.0]), [0.0, 0.0, 0.0, 1.0], [2.0, 1.0, 1.0], object_id=3)
    hits = trace(tracer, [0.0, 0.0, 2.0], [0.0, -1.0, 0.0])
    with_box = tracer.trace(np.array([[0.0, 0.0, 2.0]]), np.array([[0.0, -1.0, 0.0]]), 100.0, 2, 0.25, 0.003, [box])
    assert hits.range_m[0, 0] == pytest.approx(4.0, abs=1e-5)
    assert with_box.range_m[0, 0] == pytest.approx(1.0, abs=1e-9)  # its +y face: centre 2 m away, half-width 1 m
    assert with_box.class_id[0, 0] == CLASS_ID["vehicle"]


@pytest.mark.parametrize("values", [[1.0, 2.0], [1, 2, 3, 4, 5, float("nan")], "1 2 three 4 5 6"])
def test_bad_offsets_are_refused_naming_the_key(values):
    with pytest.raises(ConfigError, match=r"odom_in_scene = .*six finite numbers X Y Z \(m\) ROLL PITCH YAW"):
        odom_in_scene_transform(values, "odom_in_scene")


def test_no_offset_is_no_transform_and_a_string_reads_as_the_list():
    assert odom_in_scene_transform(None, "k") is None and odom_in_scene_transform("", "k") is None
    assert odom_in_scene_transform([0] * 6, "k") is None
    np.testing.assert_array_equal(
        odom_in_scene_transform("25, 10, 0.5, 0, 0, 90", "k"), odom_in_scene_transform(ODOM_IN_SCENE, "k")
    )
    T = odom_in_scene_transform(ODOM_IN_SCENE, "k")
    np.testing.assert_allclose(T[:3, :3] @ [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], atol=1e-12)  # odom x -> scene +y
    np.testing.assert_allclose(T[:3, 3], [25.0, 10.0, 0.5])
