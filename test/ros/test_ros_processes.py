"""The node against real ROS 2, across processes: ``lidar_node`` (its console script) in its own
process, fed by this test process with ``/clock`` and ``/odom`` under ``use_sim_time``.

Runs wherever rclpy is installed: the pinned ROS 2 Jazzy wheels (``requirements-ros.txt``, which
``scripts/bootstrap.sh`` and so CI install) or a sourced ROS 2 install; skipped otherwise. The ROS
environment is this run's own (``conftest.py``: ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` and a
``ROS_DOMAIN_ID`` from the pid). Sim time is the test's own clock, paced by the node's clouds
(``ros_sim_feed``); every wait is a bounded number of steps, and nothing reads the wall clock.

One node process serves the whole module (start-up builds the farm, about 10 s); the tests run in
file order and the last one ends it with SIGINT.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

rclpy = pytest.importorskip(
    "rclpy", reason="rclpy is not installed (pip install -r requirements-ros.txt, or source ROS 2): skipped"
)

from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.parameter_client import AsyncParameterClient  # noqa: E402
from ros_sim_feed import NS, START_NS, SimFeed, process_output, set_stamp, stamp_ns  # noqa: E402

from acres_lidar_ros.config.sensors import load_sensor_config  # noqa: E402
from acres_lidar_ros.outputs.point_types import XYZI  # noqa: E402
from acres_lidar_ros.outputs.pointcloud2 import decode_pointcloud2, point_fields  # noqa: E402

CLOUDS = 40
MAX_STEPS = 150_000  # bounds every wait: about 5 min of spins at most, far more than a scan needs


class Feed(SimFeed):
    """This process's ROS side: /clock and /odom out (``SimFeed``), clouds and diagnostics in."""

    def __init__(self) -> None:
        node = rclpy.create_node("acres_lidar_test_feed")
        self.odom_pub = node.create_publisher(Odometry, "/odom", 50)
        super().__init__(node, self._odom)
        self.diagnostics: list[DiagnosticArray] = []
        node.create_subscription(DiagnosticArray, "/diagnostics", self.diagnostics.append, 10)

    def _odom(self, ns: int) -> None:
        msg = Odometry()
        set_stamp(msg.header.stamp, ns)
        msg.header.frame_id, msg.child_frame_id = "odom", "base_footprint"
        msg.pose.pose.position.x = 2.0 * (ns - START_NS) / NS  # 2 m/s along x
        msg.pose.pose.orientation.w = 1.0
        self.odom_pub.publish(msg)


@pytest.fixture(scope="module")
def session():
    script = Path(sys.executable).with_name("lidar_node")
    if not script.exists():
        pytest.skip(f"no lidar_node console script beside {sys.executable} (pip install -e .)")
    # A file, not a pipe: a pipe nobody reads would block the node once it fills.
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            [str(script), "--ros-args", "-p", "use_sim_time:=true", "-p", "lidar.self_returns:=''"],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(os.environ),
            start_new_session=True,
        )
        process.log = log
        rclpy.init()
        feed = Feed()
        try:
            feed.run_until(lambda: len(feed.clouds) >= CLOUDS or process.poll() is not None, MAX_STEPS)
            yield feed, process
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
            feed.close()
            rclpy.try_shutdown()


def test_clouds_arrive_organised_with_the_xyzi_layout_and_stamps_one_period_apart(session):
    feed, process = session
    assert len(feed.clouds) >= CLOUDS, f"{len(feed.clouds)} clouds; node output:\n{process_output(process)}"
    config = load_sensor_config("polaris")
    for cloud in feed.clouds:
        assert (cloud.height, cloud.width) == (config.columns, config.rings)  # rows = firing columns
        assert [(f.name, f.offset, f.datatype, f.count) for f in cloud.fields] == point_fields(XYZI)
        assert (cloud.point_step, cloud.row_step) == (16, 16 * config.rings)
        assert cloud.is_dense is False and cloud.is_bigendian is False
        assert cloud.header.frame_id == "lidar"
    stamps = np.array([stamp_ns(c.header.stamp) for c in feed.clouds], dtype=np.int64)
    assert (np.diff(stamps) == NS // 10).all(), np.diff(stamps)
    assert (stamps % (NS // 10) == 0).all()  # due times are multiples of T in ROS time
    points = decode_pointcloud2(feed.clouds[-1])
    assert np.isfinite(points["x"]).sum() > 10_000  # the farm is in view


def test_diagnostics_arrive_with_the_counts(session):
    feed, _ = session
    assert feed.run_until(lambda: feed.diagnostics, MAX_STEPS)
    (status,) = feed.diagnostics[-1].status
    values = {kv.key: kv.value for kv in status.values}
    assert 0 < int(values["scans_published"]) <= len(feed.clouds)  # sent once a second of ROS time
    assert {"scans_dropped_busy", "scans_skipped_no_pose", "pose_rejected_invalid"} <= set(values)


def _call(feed, future):
    assert feed.run_until(future.done, MAX_STEPS), "no answer from the parameter service"
    return future.result()


def test_parameters_are_set_and_refused_over_the_parameter_services(session):
    feed, _ = session
    client = AsyncParameterClient(feed.node, "lidar_node")
    assert feed.run_until(lambda: client.services_are_ready(), MAX_STEPS)
    (visibility,) = _call(feed, client.get_parameters(["visibility_m"])).values
    (ok,) = _call(feed, client.set_parameters([Parameter("rain_mm_per_h", Parameter.Type.DOUBLE, 2.0)])).results
    assert ok.successful
    (low,) = _call(feed, client.set_parameters([Parameter("visibility_m", Parameter.Type.DOUBLE, 5.0)])).results
    assert not low.successful and "visibility_m" in low.reason
    (fixed,) = _call(feed, client.set_parameters([Parameter("lidar.hz", Parameter.Type.DOUBLE, 5.0)])).results
    assert not fixed.successful and "read-only" in fixed.reason.lower().replace("read only", "read-only")
    values = _call(feed, client.get_parameters(["rain_mm_per_h", "visibility_m"])).values
    assert [v.double_value for v in values] == [2.0, visibility.double_value]  # the refused value is not set
    (described,) = _call(feed, client.describe_parameters(["lidar.hz"])).descriptors
    assert described.read_only and described.floating_point_range[0].to_value == 120.0
    # A live window change is taken; a broken cross-key rule is refused with its reason
    # and the parameter keeps its value.
    window = Parameter("lidar.valid_end_azimuth_deg", Parameter.Type.DOUBLE, 180.0)
    (live,) = _call(feed, client.set_parameters([window])).results
    assert live.successful, live.reason
    offset = Parameter("lidar.range_offset_m", Parameter.Type.DOUBLE, 170.0)
    (broken,) = _call(feed, client.set_parameters([offset])).results
    assert not broken.successful and "lidar.range_offset_m = 170.0 is not below lidar.range_m" in broken.reason
    values = _call(feed, client.get_parameters(["lidar.valid_end_azimuth_deg", "lidar.range_offset_m"])).values
    assert [v.double_value for v in values] == [180.0, 0.0]
    before = len(feed.clouds)
    assert feed.run_until(lambda: len(feed.clouds) >= before + 3, MAX_STEPS)  # scans go on


def test_sigint_ends_the_node_with_exit_code_0(session):
    feed, process = session
    assert process.poll() is None, process_output(process)
    os.killpg(process.pid, signal.SIGINT)
    feed.run_until(lambda: process.poll() is not None, MAX_STEPS)  # the clock goes on while it shuts down
    process.wait(timeout=30)
    output = process_output(process)
    assert process.returncode == 0, output
    assert "Traceback" not in output, output


def test_with_tf2_ros_the_node_takes_its_mount_from_tf():
    """Runs in a ROS 2 install (tf2_ros is not among the PyPI wheels): a static TF
    base_footprint -> lidar that differs from the sensors file replaces its mount. In a context of
    its own: the module's session may still hold the default one."""
    tf2_ros = pytest.importorskip(
        "tf2_ros",
        reason="no tf2_ros (not among the PyPI wheels): runs in a ROS 2 Jazzy install (README, 'Run it, test it')",
    )
    from geometry_msgs.msg import TransformStamped
    from rclpy.executors import SingleThreadedExecutor

    from acres_lidar_ros.ros.node import LidarNode

    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        node = LidarNode(
            context=context, parameter_overrides=[Parameter("lidar.self_returns", Parameter.Type.STRING, "")]
        )
        helper = rclpy.create_node("acres_lidar_test_static_tf", context=context)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        executor.add_node(helper)
        broadcaster = tf2_ros.StaticTransformBroadcaster(helper)
        mount = TransformStamped()
        mount.header.frame_id, mount.child_frame_id = "base_footprint", "lidar"
        mount.transform.translation.x, mount.transform.translation.z = 1.5, 1.8
        mount.transform.rotation.w = 1.0
        broadcaster.sendTransform(mount)
        try:
            for _ in range(MAX_STEPS):  # bounded: each spin_once waits at most 10 ms
                if node._mount_from_tf:
                    break
                executor.spin_once(timeout_sec=0.01)  # the node's poll looks the mount up
            assert node._mount_from_tf
            assert list(node.config.position_flu_m) == pytest.approx([1.5, 0.0, 1.8])
        finally:
            executor.shutdown()
            node.close()
            node.destroy_node()
            helper.destroy_node()
    finally:
        rclpy.try_shutdown(context=context)


def test_with_tf2_ros_each_sensor_of_a_set_takes_its_own_mount_from_tf(tmp_path, repo_root):
    """Runs in a ROS 2 install: a node with two sensors (``lidar_set``, frames ``front`` and
    ``rear``) takes each mount from its own static TF base_footprint -> frame, and only that
    sensor's; a flat scene file of its own (docs/scene_format.md) keeps it cheap."""
    tf2_ros = pytest.importorskip(
        "tf2_ros",
        reason="no tf2_ros (not among the PyPI wheels): runs in a ROS 2 Jazzy install (README, 'Run it, test it')",
    )
    from geometry_msgs.msg import TransformStamped
    from rclpy.executors import SingleThreadedExecutor

    from acres_lidar_ros.ros.node import LidarNode

    scene = tmp_path / "flat.json"
    scene.write_text(
        json.dumps({"terrain": {"origin_xy_m": [-50.0, -50.0], "cell_m": 100.0, "height_m": [[0, 0], [0, 0]]}})
    )
    files, mounts = [], {"front": (1.5, 0.0, 1.8), "rear": (-2.0, 0.5, 1.2)}
    for frame in mounts:
        files.append(str(tmp_path / f"{frame}.json"))
        lidar = {"topic": f"/{frame}/points", "frame_id": frame}
        Path(files[-1]).write_text(json.dumps({"extends": str(repo_root / "config" / "sensors.json"), "lidar": lidar}))
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        overrides = [Parameter("lidar_set", value=files), Parameter("scene", value=str(scene))]
        node = LidarNode(context=context, parameter_overrides=overrides)
        helper = rclpy.create_node("acres_lidar_test_static_tf_set", context=context)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        executor.add_node(helper)
        broadcaster = tf2_ros.StaticTransformBroadcaster(helper)
        sent = []
        for frame, (x, y, z) in mounts.items():
            mount = TransformStamped()
            mount.header.frame_id, mount.child_frame_id = "base_footprint", frame
            t = mount.transform.translation
            t.x, t.y, t.z = x, y, z
            mount.transform.rotation.w = 1.0
            sent.append(mount)
        broadcaster.sendTransform(sent)
        try:
            for _ in range(MAX_STEPS):  # bounded: each spin_once waits at most 10 ms
                if node._mount_from_tf:
                    break
                executor.spin_once(timeout_sec=0.01)  # the node's poll looks each mount up
            assert node._mount_from_tf
            got = {loop.config.frame_id: list(loop.config.position_flu_m) for loop in node.lidars.loops}
            assert got == {frame: pytest.approx(list(m)) for frame, m in mounts.items()}
        finally:
            executor.shutdown()
            node.close()
            node.destroy_node()
            helper.destroy_node()
    finally:
        rclpy.try_shutdown(context=context)
