"""The README's no-ROS walkthrough tools against real rclpy, across processes: ``demo_drive``
publishing ``/clock`` and ``/odom`` at their rates on its simulated timeline, and
``acres_lidar_ros.ros.listen`` printing the clouds it receives and its latency figures.

The rates are read off the messages' own stamps (the child's timers run on the wall clock; this
process reads none); every wait is a bounded number of spins.
"""

from __future__ import annotations

import os
import re
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

from nav_msgs.msg import Odometry  # noqa: E402
from ros_sim_feed import RSLIDAR_QOS, process_output, stamp_ns  # noqa: E402
from rosgraph_msgs.msg import Clock  # noqa: E402
from sensor_msgs.msg import PointCloud2, PointField  # noqa: E402

from acres_lidar_ros.scene.farm_v1 import build_default_farm  # noqa: E402
from acres_lidar_ros.scene.tour import default_tour  # noqa: E402

MAX_SPINS = 20_000  # each spin_once waits at most 10 ms
TIME_SCALE = 2.0


def _start(args: list[str], log) -> subprocess.Popen:
    return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ), start_new_session=True)


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)


@pytest.fixture
def ros_node():
    rclpy.init()
    node = rclpy.create_node("acres_lidar_test_tools")
    try:
        yield node
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


def test_demo_drive_publishes_clock_and_odom_at_their_rates_on_sim_time(ros_node):
    script = Path(sys.executable).with_name("demo_drive")
    if not script.exists():
        pytest.skip(f"no demo_drive console script beside {sys.executable} (pip install -e .)")
    clocks: list[int] = []
    odoms: list[Odometry] = []
    ros_node.create_subscription(Clock, "/clock", lambda m: clocks.append(stamp_ns(m.clock)), 100)
    ros_node.create_subscription(Odometry, "/odom", odoms.append, 100)
    with tempfile.TemporaryFile() as log:
        args = ["--ros-args", "-p", "publish_clock:=true", "-p", f"time_scale:={TIME_SCALE}", "-p", "imu:=''"]
        process = _start([str(script), *args], log)
        process.log = log
        try:
            for _ in range(MAX_SPINS):
                if (len(odoms) >= 60 and len(clocks) >= 600) or process.poll() is not None:
                    break
                rclpy.spin_once(ros_node, timeout_sec=0.01)
            output = process_output(process)
        finally:
            _stop(process)
    assert len(odoms) >= 60 and len(clocks) >= 600, f"{len(odoms)} odom, {len(clocks)} clock; {output}"
    clock_s = np.asarray(clocks) * 1e-9
    odom_ns = np.array([stamp_ns(m.header.stamp) for m in odoms])
    odom_s = odom_ns * 1e-9
    # Simulated time starts at 0 and runs time_scale times the timers' wall clock: 500 Hz of /clock
    # are a tick every 2 ms * 2 = 4 ms of sim time, 50 Hz of /odom one every 40 ms (medians: timers jitter
    # and slip under load).
    assert clock_s[0] < 30.0 and (np.diff(clock_s) > 0).all()
    assert np.median(np.diff(clock_s)) == pytest.approx(TIME_SCALE / 500.0, rel=0.2)
    assert np.median(np.diff(odom_s)) == pytest.approx(TIME_SCALE / 50.0, rel=0.2)
    assert (np.diff(odom_ns) > 0).all()
    # (No count ratio: on a loaded machine a 500 Hz wall-clock timer slips ticks; the medians hold.)
    assert {(m.header.frame_id, m.child_frame_id) for m in odoms} == {("odom", "base_footprint")}
    # Each pose is the farm tour's at its stamp (seconds since the drive started at sim time 0).
    times, positions, _ = default_tour(build_default_farm(0))
    got = np.array([[m.pose.pose.position.x, m.pose.pose.position.y, m.pose.pose.position.z] for m in odoms])
    expected = np.stack([np.interp(times[0] + odom_s, times, positions[:, k]) for k in range(3)], axis=-1)
    np.testing.assert_allclose(got, expected, atol=1e-6)
    assert np.ptp(got[:, 0]) + np.ptp(got[:, 1]) > 0.0 or times[0] + odom_s[-1] < 1.0  # it drives


def _cloud(stamp_ns_: int, returns: int) -> PointCloud2:
    """An organised 2 x 3 XYZ float32 cloud with ``returns`` finite points, the rest NaN."""
    xyz = np.full((6, 3), np.nan, np.float32)
    xyz[:returns] = np.arange(returns * 3, dtype=np.float32).reshape(returns, 3) + 1.0
    msg = PointCloud2()
    msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(stamp_ns_, 1_000_000_000)
    msg.header.frame_id = "lidar"
    msg.height, msg.width = 2, 3
    msg.fields = [PointField(name=n, offset=4 * i, datatype=PointField.FLOAT32, count=1) for i, n in enumerate("xyz")]
    msg.is_bigendian, msg.point_step, msg.row_step, msg.is_dense = False, 12, 36, False
    msg.data = xyz.tobytes()
    return msg


def test_listen_prints_each_cloud_and_the_latency_figures(ros_node):
    topic = "/acres_listen_test/points"
    publisher = ros_node.create_publisher(PointCloud2, topic, RSLIDAR_QOS)
    with tempfile.TemporaryFile() as log:
        command = [sys.executable, "-m", "acres_lidar_ros.ros.listen", "--topic", topic, "--count", "3"]
        process = _start(command, log)
        process.log = log
        try:
            for _ in range(MAX_SPINS):  # until it subscribes
                if ros_node.count_subscribers(topic) or process.poll() is not None:
                    break
                rclpy.spin_once(ros_node, timeout_sec=0.01)
            for sent in range(MAX_SPINS):  # a cloud every spin until it has its three and exits
                if process.poll() is not None:
                    break
                publisher.publish(_cloud(5_000_000_000 + sent * 100_000_000, returns=sent % 6))
                rclpy.spin_once(ros_node, timeout_sec=0.01)
            process.wait(timeout=30)
            output = process_output(process)
        finally:
            _stop(process)
    assert process.returncode == 0, output
    lines = re.findall(
        rf"^{re.escape(topic)} stamp ([0-9.]+) s, 2 x 3 \(x@0 y@4 z@8\), ([0-9]+) returns, "
        r"publish -> receive ([0-9.]+) ms$",
        output,
        re.MULTILINE,
    )
    assert len(lines) == 3, output
    for stamp_s, returns, _ in lines:  # each line's count is that cloud's finite points
        k = round((float(stamp_s) - 5.0) / 0.1)
        assert float(stamp_s) == pytest.approx(5.0 + 0.1 * k, abs=1e-6) and int(returns) == k % 6
    latencies = np.array([float(latency) for _, _, latency in lines])
    summary = re.search(
        r"^3 clouds: publish -> receive median ([0-9.]+) ms, p95 ([0-9.]+) ms, max ([0-9.]+) ms$", output, re.MULTILINE
    )
    assert summary is not None, output
    median, p95, top = (float(v) for v in summary.groups())
    assert median == pytest.approx(np.median(latencies), abs=0.01)
    assert top == pytest.approx(latencies.max(), abs=0.01) and median <= p95 <= top + 0.01
