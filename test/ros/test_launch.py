"""launch/polaris.launch.py and config/polaris.yaml agree with the schema, the docs and setup.py.

Without ROS the launch file is checked by syntax (``py_compile``, ``ast``) and by running
``generate_launch_description`` against recording stand-ins of the few ``launch``/``launch_ros``
classes it uses. The smoke test at the end launches it for real and waits for ``/lidar/points``;
it needs rclpy and a colcon install of this package, and is skipped otherwise.
"""

from __future__ import annotations

import ast
import importlib.util
import math
import os
import py_compile
import re
import shutil
import signal
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy.spatial.transform import Rotation

from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.ros.params import by_name, check_value, declarations

ROOT = Path(__file__).resolve().parents[2]
LAUNCH = ROOT / "launch" / "polaris.launch.py"
YAML = ROOT / "config" / "polaris.yaml"
RVIZ = ROOT / "config" / "polaris.rviz"
DOCS = ROOT / "docs" / "ros.md"
DOCUMENTED_ARGUMENTS = {"scene", "sensors", "use_sim_time", "demo", "rviz", "point_type", "labels"}


def test_launch_file_compiles(tmp_path):
    py_compile.compile(str(LAUNCH), cfile=str(tmp_path / "launch.pyc"), doraise=True)


def _launch_arguments_by_ast() -> dict[str, str]:
    tree = ast.parse(LAUNCH.read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "ARGUMENTS" for t in node.targets):
            return {elt.elts[0].value: elt.elts[1].value for elt in node.value.elts}
    raise AssertionError("launch file has no ARGUMENTS table")


def test_launch_arguments_are_the_documented_ones():
    arguments = _launch_arguments_by_ast()
    assert set(arguments) == DOCUMENTED_ARGUMENTS
    assert arguments["point_type"] == "XYZI" and arguments["sensors"] == "polaris"
    assert arguments["demo"] == arguments["rviz"] == arguments["use_sim_time"] == arguments["labels"] == "false"
    docs = DOCS.read_text()
    for name in DOCUMENTED_ARGUMENTS:
        assert f"`{name}" in docs, f"launch argument {name} is not in docs/ros.md"


class _Recorded:
    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


def _stub_modules() -> dict[str, types.ModuleType]:
    names = {
        "launch": ["LaunchDescription"],
        "launch.actions": ["DeclareLaunchArgument"],
        "launch.conditions": ["IfCondition"],
        "launch.substitutions": ["LaunchConfiguration"],
        "launch_ros": [],
        "launch_ros.actions": ["Node"],
        "launch_ros.parameter_descriptions": ["ParameterValue"],
    }
    modules = {}
    for module_name, classes in names.items():
        module = types.ModuleType(module_name)
        for cls in classes:
            setattr(module, cls, type(cls, (_Recorded,), {}))
        modules[module_name] = module
    return modules


@pytest.fixture
def description(monkeypatch):
    """The launch description, built with recording stand-ins of launch and launch_ros."""
    for name, module in _stub_modules().items():
        monkeypatch.setitem(sys.modules, name, module)
    spec = importlib.util.spec_from_file_location("polaris_launch_under_test", LAUNCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.generate_launch_description()


def _nodes(description) -> dict[str, _Recorded]:
    return {a.kwargs["executable"]: a for a in description.args[0] if type(a).__name__ == "Node"}


def test_launch_description_declares_its_arguments_and_starts_the_nodes(description):
    declared = [a for a in description.args[0] if type(a).__name__ == "DeclareLaunchArgument"]
    assert {a.args[0] for a in declared} == DOCUMENTED_ARGUMENTS
    nodes = _nodes(description)
    assert set(nodes) == {"robot_state_publisher", "lidar_node", "demo_drive", "rviz2"}
    assert "condition" not in nodes["lidar_node"].kwargs and "condition" not in nodes["robot_state_publisher"].kwargs
    for executable, argument in (("demo_drive", "demo"), ("rviz2", "rviz")):
        condition = nodes[executable].kwargs["condition"]
        assert condition.args[0].args[0] == argument
    lidar_params = nodes["lidar_node"].kwargs["parameters"]
    assert Path(lidar_params[0]) == YAML
    overrides = lidar_params[1]
    assert {k: v.args[0].args[0] for k, v in overrides.items()} == {
        "scene": "scene",
        "sensors": "sensors",
        "point_type": "point_type",
        "labels": "labels",
        "use_sim_time": "use_sim_time",
    }
    robot_description = nodes["robot_state_publisher"].kwargs["parameters"][0]["robot_description"]
    assert "<robot" in robot_description and 'name="base_footprint"' in robot_description
    assert nodes["rviz2"].kwargs["arguments"] == ["-d", str(RVIZ)]
    assert nodes["demo_drive"].kwargs["parameters"][0]["use_sim_time"] is False


def test_launch_executables_are_console_scripts_and_files_are_installed():
    setup = (ROOT / "setup.py").read_text()
    for script in ("lidar_node = acres_lidar_ros.ros.node:main", "demo_drive = acres_lidar_ros.ros.demo_drive:main"):
        assert script in setup
    for pattern in ('glob("config/*")', 'glob("launch/*.py")', 'glob("urdf/*")'):
        assert pattern in setup
    assert yaml.safe_load(RVIZ.read_text())["Visualization Manager"]["Global Options"]["Fixed Frame"] == "odom"


@pytest.fixture(scope="module")
def decls():
    return by_name(declarations(load_sensor_config("polaris")))


def _yaml_parameters() -> dict:
    data = yaml.safe_load(YAML.read_text())
    assert list(data) == ["lidar_node"], "polaris.yaml configures lidar_node only"
    return data["lidar_node"]["ros__parameters"]


def _flatten(params: dict, prefix: str = "") -> dict:
    flat = {}
    for key, value in params.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


_ROS_TYPE = {"bool": (bool,), "integer": (int,), "double": (float,), "string": (str,), "double_array": (list,)}


def test_yaml_names_only_declared_parameters_with_valid_values_of_their_ros_type(decls):
    params = _flatten(_yaml_parameters())
    assert params, "polaris.yaml sets no parameters"
    for name, value in params.items():
        assert name in decls, f"polaris.yaml: {name} is not a parameter of lidar_node"
        decl = decls[name]
        ok_type = isinstance(value, _ROS_TYPE[decl.type]) and not (decl.type != "bool" and isinstance(value, bool))
        assert ok_type, f"polaris.yaml: {name} = {value!r} is not a ROS {decl.type} (rclpy would refuse it)"
        check_value(decl, value)


def test_yaml_matches_the_vehicle(decls):
    params = _flatten(_yaml_parameters())
    assert params["topic"] == "/lidar/points" and params["point_type"] == "XYZI" and params["qos_depth"] == 100
    assert params["ts_first_point"] is False and params["sensors"] == "polaris"
    assert params["visibility_m"] == math.inf


def test_a_bad_yaml_value_would_be_caught(decls):
    with pytest.raises(ConfigError, match="point_type"):
        check_value(decls["point_type"], "XYZRGB")


# -- smoke test with ROS 2 ---------------------------------------------------------------------------


def test_launch_smoke_publishes_lidar_points():
    """``ros2 launch acres_lidar_ros polaris.launch.py demo:=true`` publishes an organised cloud."""
    rclpy = pytest.importorskip("rclpy", reason="no rclpy: runs in a ROS 2 Jazzy install (README, 'Run it, test it')")
    tf2_ros = pytest.importorskip(
        "tf2_ros",
        reason="no tf2_ros (not among the PyPI wheels): runs in a ROS 2 Jazzy install (README, 'Run it, test it')",
    )
    ament = pytest.importorskip(
        "ament_index_python.packages",
        reason="no ament_index_python: runs in a ROS 2 Jazzy install (README, 'Run it, test it')",
    )
    try:
        ament.get_package_share_directory("acres_lidar_ros")
    except Exception:
        pytest.skip(
            "acres_lidar_ros is not in a sourced colcon workspace: runs in a ROS 2 Jazzy install (README, 'Run it, test it')"
        )
    if shutil.which("ros2") is None:
        pytest.skip("no ros2 command on PATH: runs in a ROS 2 Jazzy install (README, 'Run it, test it')")
    from rclpy.time import Time
    from sensor_msgs.msg import PointCloud2

    from acres_lidar_ros.ros.node import cloud_qos

    process = subprocess.Popen(
        ["ros2", "launch", "acres_lidar_ros", "polaris.launch.py", "demo:=true"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    from rclpy.task import Future

    rclpy.init()
    received = []
    mount = None
    try:
        node = rclpy.create_node("polaris_launch_smoke")
        ended = Future()  # a cloud came, or the launch exited (then its output says why)

        def on_cloud(message: PointCloud2) -> None:
            received.append(message)
            if not ended.done():
                ended.set_result("cloud")

        def check_launch() -> None:
            if process.poll() is not None and not ended.done():
                ended.set_result("launch exited")

        node.create_subscription(PointCloud2, "/lidar/points", on_cloud, cloud_qos(10))
        node.create_timer(0.5, check_launch)
        tf_buffer = tf2_ros.Buffer()
        tf_listener = tf2_ros.TransformListener(tf_buffer, node)  # robot_state_publisher's /tf_static
        # rclpy's own bounded wait: the node compiles its kernels first (about 10 s on a fresh cache),
        # and /tf at 50 Hz would end a count of spin_once calls long before.
        rclpy.spin_until_future_complete(node, ended, timeout_sec=120.0)
        for _ in range(100):  # the static mount came before the cloud; bounded in case it did not
            if tf_buffer.can_transform("base_footprint", "lidar", Time()):
                mount = tf_buffer.lookup_transform("base_footprint", "lidar", Time()).transform
                break
            rclpy.spin_once(node, timeout_sec=0.1)
        del tf_listener
        node.destroy_node()
    finally:
        rclpy.try_shutdown()
        if process.poll() is None:  # launch may have exited already (then its output says why)
            os.killpg(process.pid, signal.SIGINT)
        try:
            output = process.communicate(timeout=30)[0].decode(errors="replace")
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            output = process.communicate()[0].decode(errors="replace")
    assert received, f"no /lidar/points within 120 s; launch output:\n{output[-4000:]}"
    cloud = received[0]
    config = load_sensor_config("polaris")
    # robot_state_publisher, from urdf/polaris.urdf, publishes the sensors file's mount.
    assert mount is not None, f"no TF base_footprint -> lidar within 120 s; launch output:\n{output[-4000:]}"
    t, q = mount.translation, mount.rotation
    np.testing.assert_allclose([t.x, t.y, t.z], config.position_flu_m, atol=1e-9)
    angle = (Rotation.from_quat([q.x, q.y, q.z, q.w]) * Rotation.from_euler("xyz", config.rpy_rad).inv()).magnitude()
    assert angle < 1e-9, angle
    assert (cloud.height, cloud.width) == (config.columns, config.rings)
    assert cloud.header.frame_id == "lidar"
    assert [f.name for f in cloud.fields] == ["x", "y", "z", "intensity"]
    assert cloud.row_step == cloud.width * cloud.point_step == config.rings * 16
    assert not re.search(r"Traceback", output)


def test_lidar_launch_smoke_two_sensors_in_one_node_with_their_frames_in_tf():
    """``ros2 launch acres_lidar_ros lidar.launch.py sensors:=polaris,vlp16 urdf:=urdf/polaris.urdf
    demo:=true``: one lidar_node publishes both clouds (the Polaris's XYZI on /lidar/points in
    ``lidar``, vlp16's velodyne layout on /velodyne_points in ``velodyne``), robot_state_publisher
    the URDF's mount of ``lidar`` and ``imu_link``, a static transform vlp16's mount of
    ``velodyne`` (no link of that URDF). Needs what the smoke test above needs."""
    rclpy = pytest.importorskip("rclpy", reason="no rclpy: runs in a ROS 2 Jazzy install (README, 'Run it, test it')")
    tf2_ros = pytest.importorskip(
        "tf2_ros",
        reason="no tf2_ros (not among the PyPI wheels): runs in a ROS 2 Jazzy install (README, 'Run it, test it')",
    )
    ament = pytest.importorskip(
        "ament_index_python.packages",
        reason="no ament_index_python: runs in a ROS 2 Jazzy install (README, 'Run it, test it')",
    )
    try:
        ament.get_package_share_directory("acres_lidar_ros")
    except Exception:
        pytest.skip(
            "acres_lidar_ros is not in a sourced colcon workspace: runs in a ROS 2 Jazzy install (README, 'Run it, test it')"
        )
    if shutil.which("ros2") is None:
        pytest.skip("no ros2 command on PATH: runs in a ROS 2 Jazzy install (README, 'Run it, test it')")
    from rclpy.task import Future
    from rclpy.time import Time
    from sensor_msgs.msg import PointCloud2

    from acres_lidar_ros.ros.node import cloud_qos

    urdf = ROOT / "urdf" / "polaris.urdf"
    command = ["ros2", "launch", "acres_lidar_ros", "lidar.launch.py", "sensors:=polaris,vlp16", f"urdf:={urdf}"]
    process = subprocess.Popen(
        [*command, "demo:=true"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    rclpy.init()
    received: dict[str, list] = {"/lidar/points": [], "/velodyne_points": []}
    mounts = {}
    try:
        node = rclpy.create_node("lidar_launch_two_sensors_smoke")
        ended = Future()  # both clouds came, or the launch exited (then its output says why)

        def on_cloud(topic: str, message: PointCloud2) -> None:
            received[topic].append(message)
            if all(received.values()) and not ended.done():
                ended.set_result("clouds")

        def check_launch() -> None:
            if process.poll() is not None and not ended.done():
                ended.set_result("launch exited")

        for topic in received:
            node.create_subscription(PointCloud2, topic, lambda m, t=topic: on_cloud(t, m), cloud_qos(10))
        node.create_timer(0.5, check_launch)
        tf_buffer = tf2_ros.Buffer()
        tf_listener = tf2_ros.TransformListener(tf_buffer, node)
        rclpy.spin_until_future_complete(node, ended, timeout_sec=240.0)
        for _ in range(100):  # the static mounts came before the clouds; bounded in case they did not
            for frame in ("lidar", "velodyne", "imu_link"):
                if frame not in mounts and tf_buffer.can_transform("base_footprint", frame, Time()):
                    mounts[frame] = tf_buffer.lookup_transform("base_footprint", frame, Time()).transform
            if len(mounts) == 3:
                break
            rclpy.spin_once(node, timeout_sec=0.1)
        del tf_listener
        node.destroy_node()
    finally:
        rclpy.try_shutdown()
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)
        try:
            output = process.communicate(timeout=30)[0].decode(errors="replace")
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            output = process.communicate()[0].decode(errors="replace")
    assert all(received.values()), (
        f"clouds {[(t, len(m)) for t, m in received.items()]}; launch output:\n{output[-4000:]}"
    )
    assert received["/lidar/points"][0].header.frame_id == "lidar"
    assert received["/velodyne_points"][0].header.frame_id == "velodyne"
    assert "time" in [f.name for f in received["/velodyne_points"][0].fields]  # velodyne_pointcloud's layout
    imu = yaml.safe_load((ROOT / "config" / "imu.json").read_text())  # JSON is YAML
    expected = {
        "lidar": load_sensor_config("polaris"),
        "velodyne": load_sensor_config("vlp16"),
    }
    assert set(mounts) == {"lidar", "velodyne", "imu_link"}, f"TF has {sorted(mounts)}; output:\n{output[-4000:]}"
    for frame, config in expected.items():
        t, q = mounts[frame].translation, mounts[frame].rotation
        np.testing.assert_allclose([t.x, t.y, t.z], config.position_flu_m, atol=1e-6)
        angle = (
            Rotation.from_quat([q.x, q.y, q.z, q.w]) * Rotation.from_euler("xyz", config.rpy_rad).inv()
        ).magnitude()
        assert angle < 1e-6, (frame, angle)
    t = mounts["imu_link"].translation
    np.testing.assert_allclose([t.x, t.y, t.z], imu["position_flu_m"], atol=1e-9)
    assert not re.search(r"Traceback", output)
