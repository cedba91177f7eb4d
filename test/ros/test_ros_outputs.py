"""The node's output options end to end: real ``LidarNode``s under real rclpy in a child process
(``test/ros_output_nodes.py``), their clouds received here over DDS and checked against the docs
(docs/outputs.md "Point types", docs/ros.md) and against the same scans computed by the core.

One child runs seven nodes, one per combination (the options are read-only start-up parameters):
every ``point_type``, ``labels``, ``truth`` and ``ts_first_point``. All share the default sensor
(180 x 8 beams of 7 sub-rays, dual returns: cheap to trace seven times over), a small scene of boxes
written here, ``noise: false`` (a scan is then a function of the poses alone, so the
core computes the same scan without knowing the node's scan numbers) and the poses this process
publishes (2 m/s along x under ``use_sim_time``, ``ros_sim_feed``'s stepped clock: no wall clock).

Per cloud: the fields, height, width and ``is_dense`` of its point type; the header stamp at the
end of the sweep (``XYZI``, ``XYZIRT``, ``XYZIRT_labels``) or at its start (``ts_first_point``, and
always for ``velodyne``, ``ouster``, ``nebula``, ``hesai``), read off the point times; every point
of the cloud equal to the core's scan of that sweep in that layout; a few cells' ranges from the
decoded x, y, z; the truth cloud beside its points cloud with the same stamp.
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

from nav_msgs.msg import Odometry  # noqa: E402
from ros_sim_feed import NS, PERIOD_NS, RSLIDAR_QOS, SPIN_S, STEP_NS, process_output, set_stamp, stamp_ns  # noqa: E402
from rosgraph_msgs.msg import Clock  # noqa: E402
from sensor_msgs.msg import PointCloud2  # noqa: E402

from acres_lidar_ros.body.self_returns import sensor_self_table  # noqa: E402
from acres_lidar_ros.config.sensors import load_sensor_config  # noqa: E402
from acres_lidar_ros.outputs.layouts import point_cloud  # noqa: E402
from acres_lidar_ros.outputs.point_types import PROFILES  # noqa: E402
from acres_lidar_ros.outputs.pointcloud2 import point_fields  # noqa: E402
from acres_lidar_ros.outputs.shaping import shaped_outputs  # noqa: E402
from acres_lidar_ros.outputs.truth_cloud import TRUTH_POINT, truth_cloud  # noqa: E402
from acres_lidar_ros.radiometry.returns import FLAG_STRONGEST  # noqa: E402
from acres_lidar_ros.scan.scan_types import ScanOptions  # noqa: E402
from acres_lidar_ros.scan.scanner import Scanner  # noqa: E402
from acres_lidar_ros.scene.scene_file import load_scene  # noqa: E402
from acres_lidar_ros.sensor.poses import PoseHistory  # noqa: E402

HELPER = Path(__file__).resolve().parents[1] / "ros_output_nodes.py"
START_NS = 100 * NS
POSE_PERIOD_NS = 20_000_000
LEAD_NS = 150_000_000 + PERIOD_NS  # the newest stamp + a period is at most a sweep's end
CLOUDS = 3  # per node
MAX_STEPS = 60_000  # bounds every wait (each step one spin_once of at most 2 ms): minutes, far more than needed
SPEED_M_S = 2.0
IDENTITY = (0.0, 0.0, 0.0, 1.0)
SENSOR = "default"
HOLD_STEPS = 2_500  # steps held without a new cloud before the hold moves on by one period

#: name -> (point_type, labels, truth, ts_first_point, published point type)
NODES = {
    "xyzi_truth": ("XYZI", False, True, False, "XYZI"),
    "xyzirt_first": ("XYZIRT", False, False, True, "XYZIRT"),
    "labels": ("XYZIRT", True, False, False, "XYZIRT_labels"),
    "velodyne": ("velodyne", False, False, False, "velodyne"),
    "ouster": ("ouster", False, False, True, "ouster"),
    "nebula": ("nebula", False, False, False, "nebula"),
    "hesai": ("hesai", False, False, False, "hesai"),
}
#: One more node runs two sensors over its one scene (``lidar_set``): the default sensor (at 90 columns
#: and one sub-ray) at the front and turned round at the back of the vehicle, each on its own topic
#: and frame (sensor -> position_flu_m, yaw).
SET = {"set_front": ([0.0, 0.0, 1.9], 0.0), "set_rear": ([-1.5, 0.2, 1.7], 180.0)}
#: docs/outputs.md "Point types": (organised, stamp always at the sweep's start)
TABLE = {
    "XYZI": (True, False),
    "XYZIRT": (True, False),
    "XYZIRT_labels": (True, False),
    "velodyne": (False, True),
    "ouster": (True, True),
    "nebula": (False, True),
    "hesai": (False, True),
}
SCENE = {
    "terrain": {"origin_xy_m": [-80.0, -80.0], "cell_m": 40.0, "height_m": [[0.0] * 5] * 5},
    "objects": [
        {"type": "box", "class": "building", "base_xy_m": [14.0, 9.0], "size_m": [8.0, 5.0, 4.0]},
        {"type": "box", "class": "other", "base_xy_m": [-9.0, -7.0], "size_m": [3.0, 3.0, 2.0], "yaw_deg": 30.0},
        {"type": "cylinder", "class": "silo", "base_xy_m": [6.0, -15.0], "radius_m": 3.0, "height_m": 9.0},
    ],
}
#: PointField datatypes (sensor_msgs/msg/PointField): decoded here without the package's decoder
ROS_TYPES = {1: "i1", 2: "u1", 3: "<i2", 4: "<u2", 5: "<i4", 6: "<u4", 7: "<f4", 8: "<f8"}


def decode(msg: PointCloud2) -> np.ndarray:
    """(height, width) structured array of a little-endian cloud, from its own field list."""
    assert not msg.is_bigendian
    dtype = np.dtype(
        {
            "names": [f.name for f in msg.fields],
            "formats": [
                np.dtype(ROS_TYPES[f.datatype]) if f.count == 1 else (ROS_TYPES[f.datatype], f.count)
                for f in msg.fields
            ],
            "offsets": [f.offset for f in msg.fields],
            "itemsize": msg.point_step,
        }
    )
    data = np.frombuffer(bytes(msg.data), np.uint8).reshape(msg.height, msg.row_step)[:, : msg.width * msg.point_step]
    return np.ascontiguousarray(data).view(dtype).reshape(msg.height, msg.width)


def x_at(ns: int) -> float:
    return SPEED_M_S * (ns - START_NS) / NS


class Feed:
    """/clock and /odom out, each node's clouds in. Sim time advances ``STEP_NS`` a step and is
    held at most ``LEAD_NS`` past the oldest of the nodes' newest stamps, so no node falls far
    behind; a node that has published nothing yet does not hold it. A scan a node leaves out
    (dropped while busy on a loaded machine) releases the hold by one period after ``HOLD_STEPS``
    steps without a new cloud, as ``ros_sim_feed`` does."""

    def __init__(self, names, nodes: int) -> None:
        self.node = rclpy.create_node("acres_lidar_test_outputs_feed")
        self.nodes = nodes  # the lidar nodes that subscribe to /odom
        self.clock_pub = self.node.create_publisher(Clock, "/clock", 10)
        self.odom_pub = self.node.create_publisher(Odometry, "/odom", 50)
        self.clouds: dict[str, list[PointCloud2]] = {name: [] for name in names}
        self.truth: list[PointCloud2] = []
        for name in names:
            self.node.create_subscription(
                PointCloud2, f"/{name}/points", lambda msg, name=name: self.clouds[name].append(msg), RSLIDAR_QOS
            )
        self.node.create_subscription(PointCloud2, "/xyzi_truth/truth", self.truth.append, RSLIDAR_QOS)
        self.sim_ns = START_NS
        self.started = False  # sim time stands at START_NS until every node subscribes to /odom
        self._released_ns = 0
        self._held_steps = 0
        self._seen = 0
        self.pose_ns: list[int] = []
        self._next_pose_ns = START_NS - 5 * POSE_PERIOD_NS

    def _hold_ns(self) -> int | None:
        newest = [stamp_ns(c[-1].header.stamp) for c in self.clouds.values() if c]
        return min(newest) + LEAD_NS + self._released_ns if newest else None

    def step(self) -> None:
        self.started = self.started or self.node.count_subscribers("/odom") >= self.nodes
        hold = self._hold_ns()
        seen = sum(len(c) for c in self.clouds.values())
        if seen != self._seen:
            self._seen, self._held_steps, self._released_ns = seen, 0, 0
        if self.started and (hold is None or self.sim_ns + STEP_NS <= hold):
            self.sim_ns += STEP_NS
        elif self.started:
            self._held_steps += 1
            if self._held_steps >= HOLD_STEPS:  # a scan left out: go on to the next
                self._released_ns += PERIOD_NS
                self._held_steps = 0
        while self._next_pose_ns <= self.sim_ns:
            msg = Odometry()
            set_stamp(msg.header.stamp, self._next_pose_ns)
            msg.header.frame_id, msg.child_frame_id = "odom", "base_footprint"
            msg.pose.pose.position.x = x_at(self._next_pose_ns)
            msg.pose.pose.orientation.w = 1.0
            self.odom_pub.publish(msg)
            self.pose_ns.append(self._next_pose_ns)
            self._next_pose_ns += POSE_PERIOD_NS
        clock = Clock()
        set_stamp(clock.clock, self.sim_ns)
        self.clock_pub.publish(clock)
        rclpy.spin_once(self.node, timeout_sec=SPIN_S)

    def run_until(self, done, max_steps: int) -> bool:
        for _ in range(max_steps):
            if done():
                return True
            self.step()
        return bool(done())


def node_parameters(name: str, scene_path: str) -> dict:
    point_type, labels, truth, first, _ = NODES[name]
    return {
        "use_sim_time": True,
        "sensors": SENSOR,
        "noise": False,
        "scene": scene_path,
        "topic": f"/{name}/points",
        "truth_topic": f"/{name}/truth",
        "point_type": point_type,
        "labels": labels,
        "truth": truth,
        "ts_first_point": first,
    }


def set_sensor_file(folder: Path, name: str) -> Path:
    position, yaw_deg = SET[name]
    lidar = {"topic": f"/{name}/points", "frame_id": name, "position_flu_m": position, "rpy_deg": [0.0, 0.0, yaw_deg]}
    lidar |= {"columns": 90, "sub_rays": 1}  # a fourteenth of the others' rays: the set costs the test little
    path = folder / f"{name}.json"
    path.write_text(json.dumps({"extends": str(load_sensor_config(SENSOR).source), "lidar": lidar}))
    return path


@pytest.fixture(scope="module")
def session():
    with tempfile.TemporaryDirectory() as folder, tempfile.TemporaryFile() as log:
        scene_path = Path(folder) / "boxes.json"
        scene_path.write_text(json.dumps(SCENE))
        specs = [{"namespace": f"/{name}", "parameters": node_parameters(name, str(scene_path))} for name in NODES]
        lidar_set = [str(set_sensor_file(Path(folder), name)) for name in SET]
        set_parameters = {"use_sim_time": True, "noise": False, "scene": str(scene_path), "lidar_set": lidar_set}
        specs.append({"namespace": "/set", "parameters": set_parameters})
        process = subprocess.Popen(
            [sys.executable, str(HELPER), json.dumps(specs)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(os.environ),
            start_new_session=True,
        )
        process.log = log
        rclpy.init()
        feed = Feed([*NODES, *SET], nodes=len(specs))
        try:
            feed.run_until(
                lambda: all(len(c) >= CLOUDS for c in feed.clouds.values()) or process.poll() is not None, MAX_STEPS
            )
            yield feed, process, scene_path, Path(folder)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGINT)
                feed.run_until(lambda: process.poll() is not None, 20_000)
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
            feed.node.destroy_node()
            rclpy.try_shutdown()


def fed_history(feed: Feed) -> PoseHistory:
    """The poses the feed published."""
    ns = np.asarray(feed.pose_ns, dtype=np.int64)
    positions = np.stack([SPEED_M_S * (ns - START_NS) / NS, 0.0 * ns, 0.0 * ns], axis=-1)
    return PoseHistory.from_arrays(ns / 1e9, positions, [IDENTITY] * ns.size)


@pytest.fixture(scope="module")
def core(session):
    """The core's scan of a sweep ending at ``end_ns``, from the poses the feed published."""
    feed, _, scene_path, _ = session
    config = load_sensor_config(SENSOR)
    scanner = Scanner(
        config,
        load_scene(scene_path),
        ScanOptions(noise=False, seed=0, truth=True),
        self_table=sensor_self_table(config),
    )
    history = fed_history(feed)
    cache: dict[tuple[int, int], tuple] = {}

    def scan_of(end_ns: int, index: int):
        if (end_ns, index) not in cache:
            scan = scanner.scan(history, end_ns, index=index)
            (shaped,) = shaped_outputs(
                scan,
                config.outputs,
                history,
                scanner.pattern.T_base_sensor,
                world_frame_id="odom",
                period_s=config.period_s,
            )
            cache[end_ns, index] = (scan, shaped)
        return cache[end_ns, index]

    return config, scan_of


def sweep_end_ns(name: str, msg: PointCloud2) -> int:
    """The end of the sweep a cloud covers, by docs/outputs.md's stamp rule."""
    _, _, _, first, published = NODES[name]
    starts = TABLE[published][1] or first
    return stamp_ns(msg.header.stamp) + (PERIOD_NS if starts else 0)


def test_every_node_publishes(session):
    feed, process, _, _ = session
    counts = {name: len(c) for name, c in feed.clouds.items()}
    stamps = {name: [stamp_ns(m.header.stamp) / NS for m in c] for name, c in feed.clouds.items()}
    assert all(n >= CLOUDS for n in counts.values()), (
        f"sim time {feed.sim_ns / NS:.3f} s, started {feed.started}, stamps {stamps}; node output:\n"
        + process_output(process)
    )


@pytest.mark.parametrize("name", list(NODES))
def test_each_cloud_has_its_point_types_layout_and_stamp(session, name):
    feed, process, _, _ = session
    config = load_sensor_config(SENSOR)
    published = NODES[name][4]
    organised, _ = TABLE[published]
    clouds = feed.clouds[name]
    assert len(clouds) >= CLOUDS, process_output(process)
    dtype = PROFILES[published].dtype
    for msg in clouds:
        assert [(f.name, f.offset, f.datatype, f.count) for f in msg.fields] == point_fields(dtype)
        assert msg.point_step == dtype.itemsize and msg.row_step == msg.point_step * msg.width
        assert msg.header.frame_id == "lidar"
        if organised:
            shape = (config.rings, config.columns) if published == "ouster" else (config.columns, config.rings)
            assert (msg.height, msg.width) == shape and msg.is_dense is False
        else:
            assert msg.height == 1 and msg.width > 500 and msg.is_dense is True
        points = decode(msg)
        header_s = stamp_ns(msg.header.stamp) / NS
        period_s = PERIOD_NS / NS
        end_s = sweep_end_ns(name, msg) / NS
        # The point times put the sweep where the stamp rule says: [end - T, end).
        if "timestamp" in points.dtype.names:  # absolute, s
            t = points["timestamp"].reshape(-1)
        elif published == "velodyne":
            t = header_s + points["time"].reshape(-1).astype(np.float64)
        elif published == "ouster":
            t = header_s + points["t"].reshape(-1) * 1e-9
        elif published == "nebula":
            t = header_s + points["time_stamp"].reshape(-1) * 1e-9
        else:  # XYZI has no point times: its stamp is checked by its content (the next test)
            continue
        assert t.min() >= end_s - period_s - 1e-6 and t.max() < end_s, (name, t.min() - header_s, t.max() - header_s)
        assert t.min() < end_s - 0.95 * period_s and t.max() > end_s - 0.05 * period_s  # the whole sweep
    stamps = np.array([stamp_ns(m.header.stamp) for m in clouds])
    assert (np.diff(stamps) % PERIOD_NS == 0).all() and (stamps % PERIOD_NS == 0).all()


def same_cloud(got: np.ndarray, expected: np.ndarray) -> bool:
    return got.shape == expected.shape and all(
        np.array_equal(got[f], expected[f], equal_nan=got[f].dtype.kind == "f") for f in expected.dtype.names
    )


def scan_number(name: str, msg: PointCloud2, scan_of) -> int:
    """The node's number of the scan of ``msg``: the first whose core scan gives this cloud bit for
    bit, among the numbers near the count of periods since sim time started (the node numbers its
    scans from its first poll; surface roughness and the firing errors, where a sensor has them,
    are keyed by the number, so with the default sensor's materials any number may do). None
    matching fails."""
    end_ns = sweep_end_ns(name, msg)
    guess = (end_ns - START_NS) // PERIOD_NS
    got = decode(msg)
    published = NODES[name][4]
    found = [
        k
        for k in range(max(0, guess - 3), guess + 3)
        if same_cloud(got, point_cloud(scan_of(end_ns, k)[1], published, stamp_ns(msg.header.stamp)))
    ]
    assert found, f"{name}: no scan number near {guess} gives the cloud ending at {end_ns}"
    return found[0]


@pytest.mark.parametrize("name", list(NODES))
def test_each_cloud_is_the_scan_the_core_computes(session, core, name):
    """The second cloud is the core's scan of the sweep the stamp rule names (found by its
    number), every field of every point; the third is the scan numbered one period later."""
    feed, _, _, _ = session
    config, scan_of = core
    published = NODES[name][4]
    second, third = feed.clouds[name][1:CLOUDS]  # the first may have been traced while poses still came
    k = scan_number(name, second, scan_of)
    later = k + (stamp_ns(third.header.stamp) - stamp_ns(second.header.stamp)) // PERIOD_NS
    for msg, index in ((second, k), (third, later)):
        scan, shaped = scan_of(sweep_end_ns(name, msg), index)
        got = decode(msg)
        expected = point_cloud(shaped, published, stamp_ns(msg.header.stamp))
        assert got.shape == expected.shape
        for field in expected.dtype.names:
            np.testing.assert_array_equal(got[field], expected[field], err_msg=f"{name}: {field}")
        if TABLE[published][0] and published != "ouster":  # organised: cell (column, ring) is row c, column r
            returns = scan.returns
            with_return = np.flatnonzero(returns.valid.any(axis=1))
            cells = with_return[:: max(1, with_return.size // 50)]
            c, r = np.divmod(cells, config.rings)
            xyz = np.stack([got["x"][c, r], got["y"][c, r], got["z"][c, r]], axis=-1).astype(np.float64)
            # the sensor-frame point of the cell's primary return (docs/outputs.md: the strongest,
            # the first valid one when none has the flag), to float32's precision; its intensity
            valid, flags = returns.valid[cells], returns.return_flags[cells]
            strongest = valid & ((flags & FLAG_STRONGEST) != 0)
            slot = np.where(strongest.any(axis=1), strongest.argmax(axis=1), valid.argmax(axis=1))
            np.testing.assert_allclose(xyz, scan.points_sensor[cells, slot], rtol=1e-6, atol=1e-5)
            np.testing.assert_array_equal(got["intensity"][c, r], returns.intensity[cells, slot])
            if published == "XYZIRT_labels":
                np.testing.assert_array_equal(got["class"][c, r], returns.class_id[cells, slot])
                np.testing.assert_array_equal(got["instance"][c, r], returns.instance[cells, slot])


def test_the_truth_goes_beside_its_cloud_with_the_same_stamp(session, core):
    feed, _, _, _ = session
    config, scan_of = core
    clouds = {stamp_ns(m.header.stamp): m for m in feed.clouds["xyzi_truth"]}
    assert len(feed.truth) >= CLOUDS - 1 and all(m.header.frame_id == "lidar" for m in feed.truth)
    for msg in feed.truth[1:CLOUDS]:
        stamp = stamp_ns(msg.header.stamp)
        assert stamp in clouds  # the same header stamp as its points cloud
        assert [(f.name, f.offset, f.datatype, f.count) for f in msg.fields] == point_fields(TRUTH_POINT)
        assert (msg.height, msg.width) == (config.columns, config.rings)
        scan, _ = scan_of(stamp, scan_number("xyzi_truth", clouds[stamp], scan_of))
        got, expected = decode(msg), truth_cloud(scan)
        for field in expected.dtype.names:
            np.testing.assert_array_equal(got[field], expected[field], err_msg=field)


@pytest.mark.parametrize("name", list(SET))
def test_each_sensor_of_a_set_publishes_the_scan_its_own_core_computes(session, name):
    """One node, two sensors over its one scene (``lidar_set``): each sensor's clouds are on its
    own topic, in its own frame, and are the core's scans of that sensor's file (its mount) with
    seed 0 + its place in the set, every field of every point, at its own scan numbers."""
    feed, process, scene_path, folder = session
    config = load_sensor_config(folder / f"{name}.json")
    assert (config.topic, config.frame_id, config.point_type) == (f"/{name}/points", name, "XYZI")
    scanner = Scanner(
        config,
        load_scene(scene_path),
        ScanOptions(noise=False, seed=list(SET).index(name)),
        self_table=sensor_self_table(config),
    )
    history = fed_history(feed)
    clouds = feed.clouds[name]
    assert len(clouds) >= CLOUDS, process_output(process)
    assert {m.header.frame_id for m in clouds} == {name}

    def cloud_of(end_ns: int, index: int) -> np.ndarray:
        scan = scanner.scan(history, end_ns, index=index)
        T_base_sensor = scanner.pattern.T_base_sensor
        (shaped,) = shaped_outputs(scan, config.outputs, history, T_base_sensor, world_frame_id="odom", period_s=0.1)
        return point_cloud(shaped, "XYZI", end_ns)

    for msg in clouds[1:CLOUDS]:
        end_ns = stamp_ns(msg.header.stamp)  # XYZI: stamped at the end of its sweep
        got = decode(msg)
        guess = (end_ns - START_NS) // PERIOD_NS
        found = [k for k in range(max(0, guess - 3), guess + 3) if same_cloud(got, cloud_of(end_ns, k))]
        assert found, f"{name}: no scan number near {guess} gives the cloud ending at {end_ns}"
        assert np.isfinite(got["x"]).sum() > 100  # the boxes and the ground are in view
