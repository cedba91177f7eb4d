"""launch/lidar.launch.py for any sensor: its plan (``ros.launch_plan``) as plain Python, checked
against the sensors files, a URDF of another vehicle and the node's parameter declarations; the
launch file itself by syntax. Launching it needs ROS 2's launch, launch_ros, tf2_ros and
robot_state_publisher, which the PyPI wheels lack; it has not been launched here."""

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


def test_a_urdf_of_another_vehicle_publishes_the_frame_and_a_missing_link_is_refused(tmp_path):
    urdf = tmp_path / "tractor.urdf"
    urdf.write_text(TRACTOR)
    plan = lidar_launch_plan({"sensors": "vlp16", "urdf": str(urdf), "base_frame": "base_link"})
    assert plan.static_transform is None and plan.robot_description == TRACTOR
    assert plan.lidar_parameters["base_frame"] == "base_link"
    with pytest.raises(ConfigError) as error:
        lidar_launch_plan({"sensors": "hdl32e", "urdf": str(urdf), "base_frame": "base_link", "frame_id": "top"})
    assert "has no link 'top' (launch argument frame_id" in str(error.value)
    with pytest.raises(ConfigError, match=r"no link 'base_footprint' \(launch argument base_frame"):
        lidar_launch_plan({"sensors": "vlp16", "urdf": str(urdf)})


def test_launch_arguments_override_the_sensors_file_and_bad_ones_are_refused():
    plan = lidar_launch_plan({"sensors": "vlp16", "topic": "/points", "frame_id": "top", "point_type": "XYZIRT"})
    assert plan.lidar_parameters["topic"] == "/points" and plan.lidar_parameters["point_type"] == "XYZIRT"
    assert plan.lidar_parameters["lidar.frame_id"] == "top"
    assert static_args_to_dict(plan.static_transform)["--child-frame-id"] == "top"
    with pytest.raises(ConfigError, match="point_type = 'PointXYZ': allowed: XYZI"):
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
