"""The node against a full ROS 2 install, across processes: poses (``pose_source: tf``) and the
mount from TF, and ``ros2 bag record`` of its clouds.

Needs what the ROS 2 wheels from PyPI do not ship: tf2_ros (skipped without it, with the reason),
and for the bag test the ``ros2 bag`` command with rosbag2's MCAP storage. README, "Against a full
ROS 2 Jazzy", says how to run it there. ``lidar_node`` (its console script) runs in its own
process; this test process publishes ``/clock``, TF ``odom -> base_footprint`` at 50 Hz and a
static mount ``base_footprint -> lidar`` that differs from the sensors file's, and, where it can,
runs ``ros2 bag record`` beside it. The ROS environment is this run's own (``conftest.py``).
Sim time is the test's own clock, paced by the node's clouds (``ros_sim_feed``); the wait is a
bounded number of steps, and nothing reads the wall clock.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
import yaml

rclpy = pytest.importorskip(
    "rclpy", reason="rclpy is not installed (pip install -r requirements-ros.txt, or source ROS 2): skipped"
)
tf2_ros = pytest.importorskip(
    "tf2_ros",
    reason="no tf2_ros (not among the PyPI wheels): runs in a ROS 2 Jazzy install (README, 'Run it, test it')",
)

from geometry_msgs.msg import TransformStamped  # noqa: E402
from ros_sim_feed import NS, START_NS, SimFeed, process_output, set_stamp, stamp_ns  # noqa: E402
from rosbags.rosbag2 import Reader  # noqa: E402
from rosbags.typesys import Stores, get_typestore  # noqa: E402
from sensor_msgs.msg import PointCloud2  # noqa: E402

from acres_lidar_ros.config.sensors import load_sensor_config  # noqa: E402
from acres_lidar_ros.outputs.bag import METADATA_VERSION  # noqa: E402
from acres_lidar_ros.outputs.point_types import XYZI  # noqa: E402
from acres_lidar_ros.outputs.pointcloud2 import decode_pointcloud2, point_fields  # noqa: E402

CLOUDS = 20
MAX_STEPS = 150_000  # bounds the wait: about 5 min of spins at most
#: The static mount this test broadcasts: 1.5 m above base_footprint and rolled 180 degrees (upside
#: down), where the sensors file has (2.5, 0, 2.039) m and a near-level sensor.
MOUNT_POSITION_M = (0.5, 0.0, 1.5)
MOUNT_QUATERNION_XYZW = (1.0, 0.0, 0.0, 0.0)
#: The world: flat ground at z = 0, 400 m square (a scene file, docs/scene_format.md), so the
#: ground is the plane z = +1.5 m in the upside-down sensor's frame.
FLAT_SCENE = {"terrain": {"origin_xy_m": [-200.0, -200.0], "cell_m": 400.0, "height_m": [[0.0, 0.0], [0.0, 0.0]]}}


class TfFeed(SimFeed):
    """This process's ROS side: /clock and TF poses out (``SimFeed``), the static mount once,
    clouds in."""

    def __init__(self) -> None:
        node = rclpy.create_node("acres_lidar_test_tf_feed")
        self.tf = tf2_ros.TransformBroadcaster(node)
        self.static_tf = tf2_ros.StaticTransformBroadcaster(node)
        mount = TransformStamped()
        set_stamp(mount.header.stamp, START_NS)
        mount.header.frame_id, mount.child_frame_id = "base_footprint", "lidar"
        t, q = mount.transform.translation, mount.transform.rotation
        t.x, t.y, t.z = MOUNT_POSITION_M
        q.x, q.y, q.z, q.w = MOUNT_QUATERNION_XYZW
        self.static_tf.sendTransform(mount)
        self.first_upside_down: int | None = None
        super().__init__(node, self._pose, on_cloud=self._check_mount)

    def _pose(self, ns: int) -> None:
        pose = TransformStamped()
        set_stamp(pose.header.stamp, ns)
        pose.header.frame_id, pose.child_frame_id = "odom", "base_footprint"
        pose.transform.translation.x = 2.0 * (ns - START_NS) / NS  # 2 m/s along x
        pose.transform.rotation.w = 1.0
        self.tf.sendTransform(pose)

    def _check_mount(self, msg: PointCloud2) -> None:
        if self.first_upside_down is None:
            z = decode_pointcloud2(msg)["z"]
            if np.nanmedian(z) > 0.5 * MOUNT_POSITION_M[2]:  # the ground above the sensor's xy-plane
                self.first_upside_down = len(self.clouds) - 1

    def upside_down(self) -> list[PointCloud2]:
        """The clouds since the first one traced with the TF mount. The scans before it (the
        mount arrives after the node's first scans, on a loaded machine) use the sensors file's,
        and taking the mount rebuilds the pattern, which drops the sweeps then in work."""
        return [] if self.first_upside_down is None else self.clouds[self.first_upside_down :]


def _ros2_bag() -> str | None:
    """Why ``ros2 bag record`` cannot run here, or None where it can."""
    if shutil.which("ros2") is None:
        return "the ros2 command is not on PATH (not among the ROS 2 PyPI wheels)"
    for module in ("ros2bag", "rosbag2_py"):
        try:
            __import__(module)
        except ImportError:
            return f"{module} is not installed: ros2 bag record needs rosbag2"
    return None


def _stop(process: subprocess.Popen, timeout_s: float = 30.0) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGINT)
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=timeout_s)


@pytest.fixture(scope="module")
def session():
    script = Path(sys.executable).with_name("lidar_node")
    if not script.exists():
        pytest.skip(f"no lidar_node console script beside {sys.executable} (pip install -e .)")
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryFile() as log, tempfile.TemporaryFile() as bag_log:
        bag_dir = Path(tmp) / "bag"
        scene = Path(tmp) / "flat.json"
        scene.write_text(json.dumps(FLAT_SCENE))
        recorder = None
        if _ros2_bag() is None:  # started first, so it subscribes as soon as the node publishes
            recorder = subprocess.Popen(
                ["ros2", "bag", "record", "-s", "mcap", "-o", str(bag_dir), "/lidar/points"],
                stdout=bag_log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        # No self-return table: it is the body seen from the sensors file's mount, not from this one.
        node_args = ["-p", "use_sim_time:=true", "-p", "lidar.self_returns:=''", "-p", "pose_source:=tf"]
        node_args += ["-p", f"scene:={scene}"]
        process = subprocess.Popen(
            [str(script), "--ros-args", *node_args],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        process.log = log
        rclpy.init()
        feed = TfFeed()
        try:
            feed.run_until(lambda: len(feed.upside_down()) >= CLOUDS or process.poll() is not None, MAX_STEPS)
            if recorder is not None:
                _stop(recorder)  # rosbag2 writes the MCAP summary and metadata.yaml on SIGINT
                bag_log.seek(0)
                recorder.output = bag_log.read().decode(errors="replace")[-4000:]
            yield feed, process, recorder, bag_dir
        finally:
            if recorder is not None:
                _stop(recorder)
            _stop(process)
            feed.close()
            rclpy.try_shutdown()


def test_poses_from_tf_give_organised_clouds_one_period_apart(session):
    feed, process, _, _ = session
    clouds = feed.upside_down()
    assert len(clouds) >= CLOUDS, f"{len(feed.clouds)} clouds; node output:\n{process_output(process)}"
    config = load_sensor_config("polaris")
    for cloud in feed.clouds:
        assert (cloud.height, cloud.width) == (config.columns, config.rings)
        assert [(f.name, f.offset, f.datatype, f.count) for f in cloud.fields] == point_fields(XYZI)
        assert cloud.header.frame_id == "lidar"
    stamps = np.array([stamp_ns(c.header.stamp) for c in clouds], dtype=np.int64)
    assert (np.diff(stamps) == NS // 10).all(), (np.diff(stamps), process_output(process))
    assert "poses from tf" in process_output(process)


def test_the_mount_comes_from_tf(session):
    """The static TF mount (upside down, 1.5 m up) replaces the sensors file's near-level one at
    2.039 m: the beams above the sensor's horizon now go down to the flat ground, which lies on the
    plane z = +1.5 m of the sensor's frame; the beams below it go up into the empty sky."""
    feed, process, _, _ = session
    output = process_output(process)
    assert "mount from TF differs from the sensors file; using TF" in output, output
    assert "'position_flu_m': [0.5, 0.0, 1.5]" in output and "no TF base_footprint -> lidar" not in output
    assert len(feed.upside_down()) >= CLOUDS, output
    points = decode_pointcloud2(feed.clouds[-1])
    z = points["z"][np.isfinite(points["z"])]
    assert z.size > 1_000, z.size
    assert np.median(z) == pytest.approx(MOUNT_POSITION_M[2], abs=0.02)
    assert (np.abs(z - MOUNT_POSITION_M[2]) < 0.2).mean() > 0.99


def test_ros2_bag_record_holds_the_clouds_byte_for_byte(session):
    why = _ros2_bag()
    if why is not None:
        pytest.skip(why)
    feed, _, recorder, bag_dir = session
    assert recorder.returncode == 0, recorder.output
    info = yaml.safe_load((bag_dir / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert info["storage_identifier"] == "mcap"
    assert info["version"] == METADATA_VERSION  # what acres-lidar record writes is what rosbag2 writes
    received = {stamp_ns(c.header.stamp): c for c in feed.clouds}
    typestore = get_typestore(Stores.ROS2_JAZZY)
    with Reader(bag_dir) as reader:
        (connection,) = reader.connections
        assert (connection.topic, connection.msgtype) == ("/lidar/points", "sensor_msgs/msg/PointCloud2")
        (qos,) = connection.ext.offered_qos_profiles
        assert (qos.reliability.name, qos.durability.name) == ("RELIABLE", "VOLATILE")  # rslidar_sdk's
        recorded = [typestore.deserialize_cdr(raw, connection.msgtype) for _, _, raw in reader.messages()]
    assert len(recorded) >= CLOUDS // 2, recorder.output  # it may join a few clouds late
    stamps = np.array([stamp_ns(m.header.stamp) for m in recorded], dtype=np.int64)
    since_mount = stamps[stamps >= stamp_ns(feed.upside_down()[0].header.stamp)]
    assert since_mount.size >= CLOUDS // 2 and (np.diff(since_mount) == NS // 10).all(), np.diff(stamps)  # none lost
    for msg in recorded:
        if stamp_ns(msg.header.stamp) not in received:  # recorded after this process had stopped counting
            continue
        live = received[stamp_ns(msg.header.stamp)]
        assert (msg.height, msg.width, msg.point_step, msg.row_step) == (
            live.height,
            live.width,
            live.point_step,
            live.row_step,
        )
        assert [(f.name, f.offset, f.datatype) for f in msg.fields] == [
            (f.name, f.offset, f.datatype) for f in live.fields
        ]
        assert msg.data.tobytes() == bytes(live.data)
