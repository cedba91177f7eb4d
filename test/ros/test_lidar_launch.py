"""launch/lidar.launch.py for any sensor: its plan (``ros.launch_plan``) as plain Python, checked
against the sensors files, a URDF of another vehicle, several sensors in one node and the node's
parameter declarations; the launch file itself by syntax, and, where ROS 2's launch and launch_ros
import, by the nodes its description makes. Launching it needs tf2_ros and robot_state_publisher as
well, which the PyPI wheels lack: test_launch.py's smoke tests do that in a full ROS 2."""

from __future__ import annotations

import ast
import py_compile
from pathlib import Path

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.ros.launch_plan import LAUNCH_ARGUMENTS, lidar_launch_plan
from acres_lidar_ros.ros.params import by_name, check_value, declarations

ROOT = Path(__file__).resolve().parents[2]
LAUNCH = ROOT / "launch" / "lidar.launch.py"
TRACTOR = """<?xml version="1.0"?>
<robot name="tractor">
  <link name="base_link"><collision><origin xyz="0 0 1"/><geometry><box size="3 1.5 1.2"/></geometry></collision></link>
  <link name="velodyne"/>
  <joint name="velodyne_joint" type="fixed"><parent link="base_link"/><child link="velodyne"/>
    <origin xyz="1.2 0 2.4" rpy="0 0.05 0"/></joint>
</robot>
"""


def static_args_to_dict(args):
    return dict(zip(args[::2], args[1::2], strict=True))


def test_a_shipped_sensor_brings_its_drivers_topic_frame_and_layout_and_a_static_tf_of_its_mount():
    plan = lidar_launch_plan({"sensors": "vlp16"})
    config = load_sensor_config("vlp16")
    assert (plan.topic, plan.frame_id, plan.point_type) == ("/velodyne_points", "velodyne", "velodyne")
    assert plan.robot_description is None
    tf = static_args_to_dict(plan.static_transform)
    assert tf["--frame-id"] == "base_footprint" and tf["--child-frame-id"] == "velodyne"
    position = [float(tf[k]) for k in ("--x", "--y", "--z")]
    quaternion = [float(tf[k]) for k in ("--qx", "--qy", "--qz", "--qw")]
    np.testing.assert_allclose(position, config.position_flu_m, atol=1e-8)
    expected = Rotation.from_euler("xyz", config.rpy_rad).as_matrix()  # the mount: R = Rz Ry Rx
    np.testing.assert_allclose(Rotation.from_quat(quaternion).as_matrix(), expected, atol=1e-8)
    polaris = lidar_launch_plan({})
    assert (polaris.topic, polaris.frame_id, polaris.point_type) == ("/lidar/points", "lidar", "XYZI")


@pytest.mark.parametrize("sensor", ["polaris", "helios5515", "vlp16", "hdl32e", "os1_64", "pandar_xt32", "ft120"])
def test_every_shipped_sensor_gives_parameters_the_node_accepts(sensor):
    plan = lidar_launch_plan({"sensors": sensor, "use_sim_time": "true"})
    config = load_sensor_config(sensor)
    decls = by_name(declarations(config))
    for name, value in plan.lidar_parameters.items():
        if name == "use_sim_time":
            assert value is True
            continue
        check_value(decls[name], value)  # raises on a name or value the node would refuse
    assert plan.topic == config.topic and plan.frame_id == config.frame_id


def test_a_urdf_of_another_vehicle_publishes_the_frame_and_a_frame_it_lacks_gets_the_mount(tmp_path):
    urdf = tmp_path / "tractor.urdf"
    urdf.write_text(TRACTOR)
    plan = lidar_launch_plan({"sensors": "vlp16", "urdf": str(urdf), "base_frame": "base_link"})
    assert plan.static_transform is None and plan.robot_description == TRACTOR
    assert plan.lidar_parameters["base_frame"] == "base_link"
    # A frame that is no link of the URDF: a static transform of the sensors file's mount from base_frame.
    plan = lidar_launch_plan({"sensors": "hdl32e", "urdf": str(urdf), "base_frame": "base_link", "frame_id": "top"})
    tf = static_args_to_dict(plan.static_transform)
    assert (tf["--frame-id"], tf["--child-frame-id"]) == ("base_link", "top") and plan.robot_description == TRACTOR
    position = [float(tf[k]) for k in ("--x", "--y", "--z")]
    np.testing.assert_allclose(position, load_sensor_config("hdl32e").position_flu_m, atol=1e-8)
    with pytest.raises(ConfigError, match=r"no link 'base_footprint' \(launch argument base_frame"):
        lidar_launch_plan({"sensors": "vlp16", "urdf": str(urdf)})


def test_several_sensors_run_in_one_node_each_frame_from_the_urdf_or_its_mount(tmp_path, repo_root):
    """sensors:=polaris,vlp16 with the Polaris URDF: one lidar_node with both in its lidar_set
    (parameters the node accepts), the Polaris's frame from robot_state_publisher (a link of the
    URDF), vlp16's ``velodyne`` frame, which the URDF lacks, from a static transform of its mount."""
    urdf = repo_root / "urdf" / "polaris.urdf"
    plan = lidar_launch_plan({"sensors": "polaris, vlp16", "urdf": str(urdf), "use_sim_time": "true"})
    assert plan.lidar_parameters["lidar_set"] == ["polaris", "vlp16"]
    assert "sensors" not in plan.lidar_parameters and "topic" not in plan.lidar_parameters
    decls = by_name(declarations(None))  # a set declares no lidar.<key>
    for name, value in plan.lidar_parameters.items():
        if name != "use_sim_time":
            check_value(decls[name], value)
    assert [(s.topic, s.frame_id, s.point_type) for s in plan.sensors] == [
        ("/lidar/points", "lidar", "XYZI"),
        ("/velodyne_points", "velodyne", "velodyne"),
    ]
    assert plan.sensors[0].static_transform is None  # urdf/polaris.urdf has the link lidar
    (velodyne,) = [static_args_to_dict(args) for args in plan.static_transforms]
    assert (velodyne["--frame-id"], velodyne["--child-frame-id"]) == ("base_footprint", "velodyne")
    np.testing.assert_allclose(
        [float(velodyne[k]) for k in ("--x", "--y", "--z")], load_sensor_config("vlp16").position_flu_m, atol=1e-8
    )
    without_urdf = lidar_launch_plan({"sensors": "polaris,vlp16"})
    assert [args[-1] for args in without_urdf.static_transforms] == ["lidar", "velodyne"]
    with pytest.raises(ConfigError, match="launch argument topic = '/points' with 2 sensors"):
        lidar_launch_plan({"sensors": "polaris,vlp16", "topic": "/points"})
    with pytest.raises(ConfigError, match="'vlp16' and 'vlp16' both have lidar.topic '/velodyne_points'"):
        lidar_launch_plan({"sensors": "vlp16,vlp16"})
    with pytest.raises(ConfigError, match="launch argument sensors = 'polaris,': expected a sensors file"):
        lidar_launch_plan({"sensors": "polaris,"})


def test_launch_arguments_override_the_sensors_file_and_bad_ones_are_refused():
    plan = lidar_launch_plan({"sensors": "vlp16", "topic": "/points", "frame_id": "top", "point_type": "XYZIRT"})
    assert plan.lidar_parameters["topic"] == "/points" and plan.lidar_parameters["point_type"] == "XYZIRT"
    assert plan.lidar_parameters["lidar.frame_id"] == "top"
    assert static_args_to_dict(plan.static_transform)["--child-frame-id"] == "top"
    with pytest.raises(
        ConfigError, match="launch argument point_type = 'PointXYZ': expected a point layout: one of XYZI"
    ):
        lidar_launch_plan({"point_type": "PointXYZ"})
    with pytest.raises(ConfigError, match="use_sim_time = 'yes': expected true or false"):
        lidar_launch_plan({"use_sim_time": "yes"})
    with pytest.raises(ConfigError, match="launch argument 'sensor': unknown"):
        lidar_launch_plan({"sensor": "vlp16"})


def test_the_launch_file_compiles_and_declares_the_plans_arguments(tmp_path):
    py_compile.compile(str(LAUNCH), cfile=str(tmp_path / "lidar.pyc"), doraise=True)
    tree = ast.parse(LAUNCH.read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for alias in node.names}
    assert {"LAUNCH_ARGUMENTS", "lidar_launch_plan", "OpaqueFunction"} <= imported
    assert [name for name, _, _ in LAUNCH_ARGUMENTS][:2] == ["sensors", "urdf"]
    assert (ROOT / "launch" / "polaris.launch.py").is_file()  # the Polaris's shortcut stays


def test_launch_itself_makes_one_node_for_two_sensors_and_the_static_tf_the_urdf_lacks(repo_root):
    """With ROS 2's launch and launch_ros importable (not among the PyPI wheels): the launch
    description's OpaqueFunction, visited in a LaunchContext with sensors:=polaris,vlp16 and the
    Polaris URDF, gives one lidar_node, robot_state_publisher and one static_transform_publisher,
    of vlp16's mount of ``velodyne``. Nothing is started."""
    launch = pytest.importorskip("launch", reason="no launch (not among the PyPI wheels): runs in a ROS 2 install")
    pytest.importorskip("launch_ros", reason="no launch_ros (not among the PyPI wheels): runs in a ROS 2 install")
    import importlib.util

    from launch.actions import DeclareLaunchArgument, OpaqueFunction

    spec = importlib.util.spec_from_file_location("lidar_launch_under_test", LAUNCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    description = module.generate_launch_description()
    context = launch.LaunchContext()
    context.launch_configurations.update({"sensors": "polaris,vlp16", "urdf": str(repo_root / "urdf" / "polaris.urdf")})
    for entity in description.entities:
        if isinstance(entity, DeclareLaunchArgument):
            entity.visit(context)  # the defaults of the arguments not given
    (opaque,) = [e for e in description.entities if isinstance(e, OpaqueFunction)]
    nodes = opaque.visit(context)
    assert [(n.node_package, n.node_executable) for n in nodes] == [
        ("acres_lidar_ros", "lidar_node"),
        ("robot_state_publisher", "robot_state_publisher"),
        ("tf2_ros", "static_transform_publisher"),
    ]
    tf = static_args_to_dict(nodes[2]._Node__arguments)  # launch_ros keeps the arguments it was given
    assert (tf["--frame-id"], tf["--child-frame-id"]) == ("base_footprint", "velodyne")
    np.testing.assert_allclose(
        [float(tf[k]) for k in ("--x", "--y", "--z")], load_sensor_config("vlp16").position_flu_m, atol=1e-8
    )
