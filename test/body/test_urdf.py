"""The URDF reader: transforms of the link tree, collision shapes, refusals; the shipped Polaris URDF."""

from __future__ import annotations

import math

import numpy as np
import pytest

from acres_lidar_ros.body.self_table_gen import BodyGeometry, check_mount
from acres_lidar_ros.body.urdf import load_urdf
from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.errors import ConfigError, SceneError

TREE = """<?xml version="1.0"?>
<robot name="t">
  <link name="base_footprint"/>
  <link name="arm">
    <collision><origin xyz="0.5 0 0" rpy="0 0 0"/><geometry><box size="1 0.2 0.2"/></geometry></collision>
  </link>
  <link name="tip">
    <collision><geometry><sphere radius="0.1"/></geometry></collision>
    <collision><origin xyz="0 0 1" rpy="1.5707963267948966 0 0"/><geometry><cylinder radius="0.05" length="0.4"/></geometry></collision>
  </link>
  <link name="lidar"/>
  <joint name="a" type="revolute">
    <parent link="base_footprint"/><child link="arm"/>
    <origin xyz="1 2 3" rpy="0 0 1.5707963267948966"/>
    <axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="1" velocity="1"/>
  </joint>
  <joint name="b" type="fixed">
    <parent link="arm"/><child link="tip"/>
    <origin xyz="1 0 0" rpy="0 0.5 0"/>
  </joint>
  <joint name="c" type="fixed">
    <parent link="base_footprint"/><child link="lidar"/>
    <origin xyz="0 0 2"/>
  </joint>
</robot>
"""


def write(tmp_path, text, name="robot.urdf"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_link_transforms_follow_the_joint_chain(tmp_path):
    robot = load_urdf(write(tmp_path, TREE))
    assert robot.links == ("base_footprint", "arm", "tip", "lidar")
    assert robot.root == "base_footprint"
    # arm: yaw 90 deg at (1, 2, 3): its x axis is the base's y axis.
    T_arm = robot.T_root_link("arm")
    np.testing.assert_allclose(T_arm[:3, 0], [0, 1, 0], atol=1e-12)
    np.testing.assert_allclose(T_arm[:3, 3], [1, 2, 3])
    # tip: 1 m along the arm's x (= base y), then pitched 0.5 rad about the arm's y (= base -x).
    T_tip = robot.T_root_link("tip")
    np.testing.assert_allclose(T_tip[:3, 3], [1, 3, 3], atol=1e-12)
    c, s = math.cos(0.5), math.sin(0.5)
    # The tip's x axis: arm x turned about arm y by 0.5 rad -> (c, 0, -s) in arm -> (0, c, -s) in base.
    np.testing.assert_allclose(T_tip[:3, 0], [0, c, -s], atol=1e-12)
    np.testing.assert_allclose(robot.T_link_link("lidar", "tip")[:3, 3], [1, 3, 1], atol=1e-12)
    assert robot.descendants("arm") == {"arm", "tip"}


def test_collision_shapes_and_their_origins(tmp_path):
    robot = load_urdf(write(tmp_path, TREE))
    kinds = [(c.link, c.kind) for c in robot.collisions]
    assert kinds == [("arm", "box"), ("tip", "sphere"), ("tip", "cylinder")]
    box, sphere, cylinder = robot.collisions
    np.testing.assert_allclose(box.size_m, [1, 0.2, 0.2])
    np.testing.assert_allclose(box.T_link_shape[:3, 3], [0.5, 0, 0])
    np.testing.assert_allclose(sphere.size_m, [0.1, 0.1, 0.1])
    np.testing.assert_allclose(cylinder.size_m, [0.05, 0.05, 0.4])
    # roll 90 deg: the cylinder's axis (shape z) lies along the link's -y.
    np.testing.assert_allclose(cylinder.T_link_shape[:3, 2], [0, -1, 0], atol=1e-12)


def test_analytic_shapes_give_the_ranges_and_normals_of_geometry(tmp_path):
    robot = load_urdf(write(tmp_path, TREE))
    body = BodyGeometry(robot, "base_footprint")
    # The sphere (r 0.1) is at (1, 3, 3); the box spans x 0.9-1.1, y 2-3, z 2.9-3.1 in base.
    origins = np.array([[1.0, 3.0, 0.0], [1.0, 2.5, 0.0], [5.0, 5.0, 5.0]])
    directions = np.array([[0.0, 0.0, 1.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
    range_m, normal, index = body.trace(origins, directions, start_m=0.0)
    assert range_m[0] == pytest.approx(2.9)  # the sphere's bottom and the box's bottom face both at z 2.9
    np.testing.assert_allclose(normal[0], [0, 0, -1], atol=1e-9)
    assert range_m[1] == pytest.approx(2.9)
    assert body.links[index[1]] == "arm"
    assert np.isinf(range_m[2]) and index[2] == -1
    # The cylinder: tip origin + R_tip (0, 0, 1); axis along the tip's -y. Hit its side from below.
    T_tip = robot.T_root_link("tip")
    centre = T_tip[:3, :3] @ np.array([0.0, 0.0, 1.0]) + T_tip[:3, 3]
    axis = T_tip[:3, :3] @ np.array([0.0, -1.0, 0.0])
    side = np.cross(axis, [1.0, 0.0, 0.0])
    side /= np.linalg.norm(side)
    start = centre - 2.0 * side
    r, n, i = body.trace(start[None], side[None], start_m=0.0)
    assert r[0] == pytest.approx(2.0 - 0.05)
    np.testing.assert_allclose(n[0], -side, atol=1e-9)
    # And one of its caps, along the axis.
    r, n, _ = body.trace((centre - 1.0 * axis)[None], axis[None], start_m=0.0)
    assert r[0] == pytest.approx(1.0 - 0.2)
    np.testing.assert_allclose(n[0], -axis, atol=1e-9)


def test_a_mesh_is_read_relative_to_the_urdf_and_traced(tmp_path):
    o3d = pytest.importorskip("open3d")
    (tmp_path / "meshes").mkdir()
    mesh = o3d.geometry.TriangleMesh.create_box(1.0, 1.0, 1.0)  # corner at the origin
    assert o3d.io.write_triangle_mesh(str(tmp_path / "meshes" / "cube.stl"), mesh.compute_triangle_normals())
    text = TREE.replace(
        '<link name="lidar"/>',
        '<link name="lidar"><collision><origin xyz="3 0 0"/><geometry>'
        '<mesh filename="meshes/cube.stl" scale="2 1 1"/></geometry></collision></link>',
    )
    robot = load_urdf(write(tmp_path, text))
    body = BodyGeometry(robot, "base_footprint", exclude_links={"arm", "tip"})
    # The cube, scaled to 2 x 1 x 1, has its corner at lidar (0, 0, 2) + (3, 0, 0): x 3-5, z 2-3.
    r, n, _ = body.trace(np.array([[0.0, 0.5, 2.5]]), np.array([[1.0, 0.0, 0.0]]), start_m=0.0)
    assert r[0] == pytest.approx(3.0, abs=1e-5)
    np.testing.assert_allclose(np.abs(n[0]), [1, 0, 0], atol=1e-6)


def test_package_uris_resolve_through_the_package_directory(tmp_path):
    package = tmp_path / "my_robot"
    (package / "urdf").mkdir(parents=True)
    (package / "meshes").mkdir()
    (package / "package.xml").write_text("<package><name>my_robot</name></package>")
    (package / "meshes" / "m.stl").write_text("solid x\nendsolid x\n")
    text = TREE.replace(
        '<link name="lidar"/>',
        '<link name="lidar"><collision><geometry>'
        '<mesh filename="package://my_robot/meshes/m.stl"/></geometry></collision></link>',
    )
    robot = load_urdf(write(package / "urdf", text))
    assert robot.collisions[-1].mesh_path == package / "meshes" / "m.stl"


def test_a_missing_mesh_is_a_scene_error_naming_the_mesh_and_the_file(tmp_path):
    text = TREE.replace(
        '<link name="lidar"/>',
        '<link name="lidar"><collision><geometry><mesh filename="meshes/gone.stl"/></geometry></collision></link>',
    )
    path = write(tmp_path, text)
    with pytest.raises(SceneError) as info:
        load_urdf(path)
    assert "meshes/gone.stl" in str(info.value) and str(path) in str(info.value)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("<robot><link name='a'>", "does not parse as XML"),
        ("<model name='x'/>", "root element is <model>; expected <robot>"),
        (TREE.replace('<child link="tip"/>', '<child link="nose"/>'), "child link 'nose' is not a link"),
        (TREE.replace('size="1 0.2 0.2"', 'size="1 -0.2 0.2"'), "expected positive sizes"),
        (TREE.replace('size="1 0.2 0.2"', 'size="1 0.2"'), "expected 3 finite numbers"),
        (TREE.replace('<link name="lidar"/>', '<link name="arm"/>'), "link 'arm' is defined twice"),
    ],
)
def test_bad_urdfs_are_config_errors_naming_the_file(tmp_path, text, match):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError, match=match) as info:
        load_urdf(path)
    assert str(path) in str(info.value)


def test_a_missing_required_link_and_a_missing_file(tmp_path):
    path = write(
        tmp_path,
        TREE.replace('<link name="lidar"/>', "").replace(
            '<joint name="c" type="fixed">\n    <parent link="base_footprint"/><child link="lidar"/>\n    <origin xyz="0 0 2"/>\n  </joint>',
            "",
        ),
    )
    with pytest.raises(ConfigError, match="has no link 'lidar'"):
        load_urdf(path, required_links=("base_footprint", "lidar"))
    with pytest.raises(ConfigError, match="cannot be read"):
        load_urdf(tmp_path / "absent.urdf")


SHIPPED_LINKS = ("base_footprint", "base_link", "body", "hood", "cab_roof", "roof_rack", "mast", "lidar")


def test_the_shipped_polaris_urdf_has_the_mount_of_the_sensors_file(repo_root):
    robot = load_urdf(repo_root / "urdf" / "polaris.urdf", required_links=SHIPPED_LINKS)
    T = check_mount(robot, load_sensor_config("polaris"))
    np.testing.assert_allclose(T[:3, 3], [2.5, 0.0, 2.039], atol=1e-9)
    # Pitch 5.317 deg down: the sensor's x axis points down by that angle; roll -1.518 deg.
    assert math.degrees(math.asin(-T[2, 0])) == pytest.approx(5.317, abs=1e-6)
    assert math.degrees(math.atan2(T[2, 1], T[2, 2])) == pytest.approx(-1.518, abs=1e-6)
    assert {c.link for c in robot.collisions} >= {"hood", "roof_rack", "mast"}
    # Every link has visual geometry as well as collision geometry (for rviz / robot_state_publisher).
    text = (repo_root / "urdf" / "polaris.urdf").read_text()
    assert text.count("<visual") == text.count("<collision")


def test_a_urdf_whose_lidar_is_elsewhere_is_refused(tmp_path, repo_root):
    text = (repo_root / "urdf" / "polaris.urdf").read_text().replace('xyz="2.5 0 2.039"', 'xyz="2.5 0 2.139"')
    robot = load_urdf(write(tmp_path, text))
    with pytest.raises(ConfigError, match="the table belongs to one mount"):
        check_mount(robot, load_sensor_config("polaris"))
