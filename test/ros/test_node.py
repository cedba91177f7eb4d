"""lidar_node and demo_drive.

Three parts:

* ``TourDrive`` (demo_drive's ROS-free part): poses and body-frame twists of a known trajectory.
* ``LidarNode`` wired to a small stand-in of rclpy (a fake ``Node`` with a settable clock, fake
  publishers, TF that has no transforms) whose message classes are rosbags' real ROS 2 Jazzy
  definitions, so every message the node builds is checked against the real field names. The
  scanner is a stand-in; the scheduling, pose ingestion, parameters and publishing are the node's.
* The same checks against real rclpy, skipped with a reason where ROS 2 is not installed.
"""

from __future__ import annotations

import enum
import json
import math
import sys
import types
from types import SimpleNamespace

import numpy as np
import pytest
from rosbags.typesys import Stores, get_typestore
from scipy.spatial.transform import Rotation

from acres_lidar_ros.config.share_paths import config_dir
from acres_lidar_ros.errors import ConfigError, PoseError
from acres_lidar_ros.outputs.point_types import XYZI, XYZIRT
from acres_lidar_ros.outputs.pointcloud2 import decode_pointcloud2, point_fields
from acres_lidar_ros.radiometry.returns import empty_returns
from acres_lidar_ros.ros.demo_drive import TourDrive
from acres_lidar_ros.runtime.loop import InlineExecutor
from acres_lidar_ros.scan.scan_types import Scan
from acres_lidar_ros.sensor.pattern import BeamPattern

TYPES = get_typestore(Stores.ROS2_JAZZY).types
MS = 1_000_000


# -- demo_drive -------------------------------------------------------------------------------


def circle_drive(speed_mps=5.0, radius_m=20.0, duration_s=20.0) -> TourDrive:
    t = np.linspace(0.0, duration_s, 2001)
    heading = speed_mps / radius_m * t
    positions = np.column_stack([radius_m * np.sin(heading), radius_m * (1 - np.cos(heading)), np.zeros_like(t)])
    quats = Rotation.from_euler("z", heading[:, None]).as_quat()
    return TourDrive(t, positions, quats)


def test_tour_drive_gives_pose_and_body_frame_twist():
    drive = circle_drive()
    s = drive.sample(4.0)
    heading = 5.0 / 20.0 * 4.0
    assert s["position_m"] == pytest.approx([20 * math.sin(heading), 20 * (1 - math.cos(heading)), 0.0], abs=1e-3)
    assert Rotation.from_quat(s["quaternion_xyzw"]).as_euler("xyz")[2] == pytest.approx(heading, abs=1e-6)
    assert s["linear_mps"] == pytest.approx([5.0, 0.0, 0.0], abs=2e-3)  # forward in base_footprint
    assert s["angular_radps"] == pytest.approx([0.0, 0.0, 0.25], abs=1e-6)


def test_tour_drive_loops_and_rejects_a_too_short_tour():
    drive = circle_drive()
    assert drive.sample(24.0)["position_m"] == pytest.approx(drive.sample(4.0)["position_m"])
    assert drive.tour_time_s(45.5) == pytest.approx(5.5)
    with pytest.raises(PoseError, match="demo tour lasts"):
        TourDrive(np.array([0.0, 0.01]), np.zeros((2, 3)), np.tile([0, 0, 0, 1.0], (2, 1)))


# -- a stand-in of rclpy whose messages are rosbags' ---------------------------------------------


class FakeTime:
    def __init__(self, nanoseconds: int = 0, **_):
        self.nanoseconds = int(nanoseconds)

    def to_msg(self):
        sec, nanosec = divmod(self.nanoseconds, 1_000_000_000)
        return TYPES["builtin_interfaces/msg/Time"](sec=sec, nanosec=nanosec)


class FakeClock:
    def __init__(self):
        self.ns = 0

    def now(self):
        return FakeTime(self.ns)


class FakeLogger:
    """Records lines. Like rclpy's ``RcutilsLogger``, which keys its state by the calling line,
    it refuses a line that logs at two severities."""

    def __init__(self, lines, sites):
        self.lines, self.sites = lines, sites

    def __getattr__(self, level):
        def log(message, **_):
            caller = sys._getframe(1)
            site = (caller.f_code.co_filename, caller.f_lineno)
            if self.sites.setdefault(site, level) != level:
                raise ValueError("Logger severity cannot be changed between calls.")
            self.lines.append((level, message))

        return log


class FakePublisher:
    def __init__(self, msg_type, topic, qos):
        self.msg_type, self.topic, self.qos, self.messages = msg_type, topic, qos, []

    def publish(self, message):
        self.messages.append(message)


class ParameterUninitializedException(Exception):
    pass


class ParamType(enum.Enum):
    BOOL = 1
    INTEGER = 2
    DOUBLE = 3
    STRING = 4
    DOUBLE_ARRAY = 8
    STRING_ARRAY = 9


class FakeContext:
    """rclpy's Context: ``ok()`` until Ctrl-C shuts it down."""

    def __init__(self):
        self.alive = True

    def ok(self):
        return self.alive


class FakePublisherAfterShutdown(Exception):
    pass


class FakeNode:
    overrides: dict = {}  # the YAML / --ros-args values of the next node

    def __init__(self, name, **_):
        self.name = name
        self.context = FakeContext()
        self.params, self.descriptors = {}, {}
        self.publishers, self.subscriptions, self.timers, self.set_callbacks = {}, {}, [], []
        self.clock = FakeClock()
        self.log_lines, self.log_sites = [], {}

    def declare_parameter(self, name, value, descriptor):
        assert name not in self.params, f"{name} declared twice"
        self.params[name] = self.overrides.get(name, None if isinstance(value, ParamType) else value)
        self.descriptors[name] = descriptor

    @property
    def _parameter_overrides(self):  # rclpy's start-up values of this node, declared or not
        return dict(self.overrides)

    def has_parameter(self, name):
        return name in self.params

    def get_parameter(self, name):
        if self.params[name] is None:
            raise ParameterUninitializedException(name)
        return SimpleNamespace(value=self.params[name])

    def create_publisher(self, msg_type, topic, qos):
        self.publishers[topic] = FakePublisher(msg_type, topic, qos)
        return self.publishers[topic]

    def create_subscription(self, msg_type, topic, callback, qos):
        self.subscriptions[topic] = (msg_type, callback)

    def create_timer(self, period_s, callback):
        self.timers.append((period_s, callback))

    def get_clock(self):
        return self.clock

    def get_logger(self):
        return FakeLogger(self.log_lines, self.log_sites)

    def add_on_set_parameters_callback(self, callback):
        self.set_callbacks.append(callback)


class TransformException(Exception):
    pass


class FakeBuffer:
    def lookup_transform(self, target, source, at):
        raise TransformException(f"no {target} -> {source}")


def _module(name, **attrs):
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    return module


def _fake_ros_modules():
    class QoSProfile:
        def __init__(self, **kw):
            self.__dict__.update(kw)

    policy = lambda *names: enum.Enum("Policy", names)  # noqa: E731
    t = TYPES
    return {
        "rclpy": _module("rclpy", init=None, spin=None, try_shutdown=None, logging=None),
        "rclpy.node": _module("rclpy.node", Node=FakeNode),
        "rclpy.parameter": _module("rclpy.parameter", Parameter=SimpleNamespace(Type=ParamType)),
        "rclpy.qos": _module(
            "rclpy.qos",
            QoSProfile=QoSProfile,
            ReliabilityPolicy=policy("RELIABLE", "BEST_EFFORT"),
            DurabilityPolicy=policy("VOLATILE", "TRANSIENT_LOCAL"),
            HistoryPolicy=policy("KEEP_LAST", "KEEP_ALL"),
        ),
        "rclpy.time": _module("rclpy.time", Time=FakeTime),
        "rclpy.exceptions": _module(
            "rclpy.exceptions",
            ParameterException=type("ParameterException", (Exception,), {}),
            ParameterUninitializedException=ParameterUninitializedException,
        ),
        "rclpy.executors": _module("rclpy.executors", ExternalShutdownException=type("E", (Exception,), {})),
        "tf2_ros": _module(
            "tf2_ros",
            Buffer=FakeBuffer,
            TransformException=TransformException,
            TransformListener=lambda buffer, node: None,
        ),
        "diagnostic_msgs": _module("diagnostic_msgs"),
        "diagnostic_msgs.msg": _module(
            "diagnostic_msgs.msg",
            **{n: t[f"diagnostic_msgs/msg/{n}"] for n in ("DiagnosticArray", "DiagnosticStatus", "KeyValue")},
        ),
        "nav_msgs": _module("nav_msgs"),
        "nav_msgs.msg": _module("nav_msgs.msg", Odometry=t["nav_msgs/msg/Odometry"]),
        "rcl_interfaces": _module("rcl_interfaces"),
        "rcl_interfaces.msg": _module(
            "rcl_interfaces.msg",
            **{
                n: t[f"rcl_interfaces/msg/{n}"]
                for n in ("FloatingPointRange", "IntegerRange", "ParameterDescriptor", "SetParametersResult")
            },
        ),
        "sensor_msgs": _module("sensor_msgs"),
        "sensor_msgs.msg": _module(
            "sensor_msgs.msg", PointCloud2=t["sensor_msgs/msg/PointCloud2"], PointField=t["sensor_msgs/msg/PointField"]
        ),
        "std_msgs": _module("std_msgs"),
        "std_msgs.msg": _module("std_msgs.msg", Header=t["std_msgs/msg/Header"]),
        "visualization_msgs": _module("visualization_msgs"),
        "visualization_msgs.msg": _module(
            "visualization_msgs.msg", MarkerArray=t["visualization_msgs/msg/MarkerArray"]
        ),
    }


@pytest.fixture
def node_module(monkeypatch):
    """acres_lidar_ros.ros.node imported against the stand-in (and forgotten afterwards)."""
    for name, module in _fake_ros_modules().items():
        monkeypatch.setitem(sys.modules, name, module)
    for name in ("acres_lidar_ros.ros.node", "acres_lidar_ros.ros.packet_sink"):  # the modules that import rclpy
        monkeypatch.delitem(sys.modules, name, raising=False)
    import acres_lidar_ros.ros.node as node

    yield node
    sys.modules.pop("acres_lidar_ros.ros.node", None)
    sys.modules.pop("acres_lidar_ros.ros.packet_sink", None)


def small_cloud(dtype=XYZI, columns=6, rings=4) -> np.ndarray:
    rng = np.random.default_rng(3)
    cloud = np.zeros((columns, rings), dtype=dtype)
    for name in dtype.names:
        cloud[name] = rng.uniform(0, 100, cloud.shape).astype(cloud[name].dtype)
    cloud["x"][1, 2] = np.nan  # a beam without a return keeps its cell
    return cloud


@pytest.mark.parametrize("dtype", [XYZI, XYZIRT], ids=["XYZI", "XYZIRT"])
def test_node_cloud_message_is_the_organised_rslidar_layout(node_module, dtype):
    cloud = small_cloud(dtype)
    message = node_module.cloud_message(cloud, "lidar", 1_700_000_000_012_000_000)
    assert message.__msgtype__ == "sensor_msgs/msg/PointCloud2"
    assert (message.header.stamp.sec, message.header.stamp.nanosec) == (1_700_000_000, 12_000_000)
    assert message.header.frame_id == "lidar"
    assert (message.height, message.width) == (6, 4)
    assert message.point_step == dtype.itemsize and message.row_step == 4 * dtype.itemsize
    assert not message.is_dense and not message.is_bigendian
    assert [(f.name, f.offset, f.datatype, f.count) for f in message.fields] == point_fields(dtype)
    decoded = decode_pointcloud2(message)
    for name in dtype.names:
        np.testing.assert_array_equal(decoded[name], cloud[name])


def test_node_qos_and_descriptors(node_module):
    qos = node_module.cloud_qos(100)
    assert (qos.reliability.name, qos.durability.name, qos.history.name, qos.depth) == (
        "RELIABLE",
        "VOLATILE",
        "KEEP_LAST",
        100,
    )
    from acres_lidar_ros.config.sensors import load_sensor_config
    from acres_lidar_ros.ros.params import declarations

    for decl in declarations(load_sensor_config("polaris")):
        d = node_module.descriptor(decl)
        assert d.__msgtype__ == "rcl_interfaces/msg/ParameterDescriptor" and d.read_only == decl.read_only


class StandInScanner:
    """Records the calls the node makes; ``scan`` returns the pose it traced from."""

    instances: list = []

    def __init__(self, config, scene=None, options=None, tracer=None, self_table=None):
        self.config, self.options, self.tracer = config, options, tracer or "tracer"
        self.self_table = self_table
        self.pattern = BeamPattern.from_config(config)  # the mount, which the loop's output shaping reads
        self.calls, self.option_changes, self.pretraced = [], [], []
        StandInScanner.instances.append(self)

    @property
    def motion_on(self):
        return self.options.motion_on(self.config)

    def scan(self, poses, stamp_ns, boxes=(), index=None):
        """A scan without returns (the node's ``point_cloud`` is replaced by a small cloud)."""
        self.calls.append((poses.end_s, stamp_ns, index))
        columns, rings = self.config.columns, self.config.rings
        return Scan(
            index=index or 0,
            stamp_ns=stamp_ns,
            columns=columns,
            rings=rings,
            returns=empty_returns(columns * rings, 1),
            points_sensor=np.full((columns * rings, 1, 3), np.nan),
            time_offset_s=-self.config.period_s + self.config.period_s * np.arange(columns) / columns,  # a sweep
            ring_rank=np.arange(rings, dtype=np.uint16),
            T_world_sensor=np.broadcast_to(np.eye(4), (columns, 4, 4)),
            frame_id=self.config.frame_id,
        )

    def start_sweep(self, stamp_ns, boxes=(), index=None):
        scanner = self

        class Sweep:
            def __init__(self):
                self.index, self.boxes = index, tuple(boxes)
                self.partial = False  # whole scans (one slice each)

            def trace_covered(self, poses, min_columns=1):
                scanner.pretraced.append((poses.end_s, stamp_ns, index))
                return 0

            def finish(self, poses, extrapolate=False):
                return scanner.scan(poses, stamp_ns, boxes, index)

        return Sweep()

    def set_options(self, **changes):
        self.option_changes.append(changes)

    def warm_up(self):
        self.warmed = True
        return 0.0

    def set_runtime_config(self, overrides):
        self.config = self.config.with_overrides(overrides)
        self.option_changes.append(overrides)


@pytest.fixture
def lidar_node(node_module, monkeypatch):
    StandInScanner.instances = []
    monkeypatch.setattr(node_module, "Scanner", StandInScanner)
    monkeypatch.setattr(node_module.LidarNode, "_load_scene", lambda self, seed: None)
    import acres_lidar_ros.runtime.messages as messages

    monkeypatch.setattr(
        messages,
        "point_cloud",
        lambda scan, profile, stamp_ns: small_cloud(XYZI if profile.name == "XYZI" else XYZIRT, 1800, 32),
    )
    FakeNode.overrides = {}
    made = []

    def make(**overrides):
        FakeNode.overrides = overrides
        node = node_module.LidarNode(executors=InlineExecutor)  # deterministic: work runs in the call
        made.append(node)
        return node

    yield make
    for node in made:
        node.close()
    FakeNode.overrides = {}


def odometry(stamp_ns, x, frame="odom", child="base_footprint", q=(0.0, 0.0, 0.0, 1.0)):
    t = TYPES
    sec, nanosec = divmod(stamp_ns, 1_000_000_000)
    return SimpleNamespace(
        header=t["std_msgs/msg/Header"](
            stamp=t["builtin_interfaces/msg/Time"](sec=sec, nanosec=nanosec), frame_id=frame
        ),
        child_frame_id=child,
        pose=SimpleNamespace(
            pose=t["geometry_msgs/msg/Pose"](
                position=t["geometry_msgs/msg/Point"](x=x, y=0.0, z=0.0),
                orientation=t["geometry_msgs/msg/Quaternion"](x=q[0], y=q[1], z=q[2], w=q[3]),
            )
        ),
    )


def _poll(node):
    """One tick of the node's 2 ms timer. The node's loop runs its work inline (the fixture's
    executor), so whatever the tick starts has finished when it returns."""
    next(cb for period, cb in node.timers if period == 0.002)()


def test_node_declares_subscribes_and_publishes_where_documented(lidar_node):
    node = lidar_node()
    assert set(node.publishers) == {"/lidar/points", "/diagnostics"}
    qos = node.publishers["/lidar/points"].qos
    assert (qos.reliability.name, qos.durability.name, qos.depth) == ("RELIABLE", "VOLATILE", 100)
    assert set(node.subscriptions) == {"/odom", "/vehicle_markers"}
    assert sorted(p for p, _ in node.timers) == [0.002, 1.0]
    # topic empty: the sensors file's lidar.topic (the Polaris's /lidar/points)
    assert node.params["lidar.delay_s"] == 0.012 and node.params["topic"] == ""
    assert node.params["lidar.topic"] == "/lidar/points" and node.settings["point_type"] == "XYZI"
    assert node.descriptors["lidar.hz"].read_only and not node.descriptors["rain_mm_per_h"].read_only
    assert not node.descriptors["lidar.columns"].read_only  # rebuilt between scans
    assert StandInScanner.instances[-1].warmed  # kernels compiled before the first due scan
    table = StandInScanner.instances[-1].self_table  # the node loads the sensor's table for it
    assert table.path == node.config.self_returns and (table.columns, table.rings) == (1800, 32)


def test_the_truth_parameter_turns_on_the_scans_truth_and_its_topic(lidar_node):
    node = lidar_node(truth=True, truth_topic="/sim/truth")
    assert set(node.publishers) == {"/lidar/points", "/sim/truth", "/diagnostics"}
    assert node.publishers["/sim/truth"].msg_type is node.publishers["/lidar/points"].msg_type
    assert StandInScanner.instances[-1].options.truth
    assert node.descriptors["truth"].read_only and node.descriptors["truth_topic"].read_only  # start-up only


def test_node_traces_with_the_covering_pose_and_publishes_at_stamp_plus_delay(lidar_node):
    node = lidar_node()
    on_odom = node.subscriptions["/odom"][1]
    node.clock.ns = 1_000 * MS
    for k in range(6):
        on_odom(odometry((900 + 20 * k) * MS, float(k)))
    on_odom(odometry(1_000 * MS, 6.0))  # at the stamp: covers the sweep 900..1000 ms
    _poll(node)
    assert node.loop.scheduler.in_work and node.loop.scheduler.jobs()[0].state == "ready"
    scanner = StandInScanner.instances[-1]
    assert scanner.calls == [(1.0, 1_000 * MS, 0)]
    points = node.publishers["/lidar/points"].messages
    assert points == []  # ready, but its release is 12 ms after the stamp
    node.clock.ns = 1_012 * MS
    _poll(node)
    assert points
    (cloud,) = points
    assert (cloud.header.stamp.sec, cloud.header.stamp.nanosec, cloud.header.frame_id) == (1, 0, "lidar")
    assert (cloud.height, cloud.width) == (1800, 32)
    assert node.loop.scheduler.counts["published"] == 1 and node.loop.scheduler.counts["late"] == 0
    # No TF mount: the sensors file's mount, with one warning.
    mount_warnings = [m for level, m in node.log_lines if level == "warning" and "no TF base_footprint" in m]
    assert len(mount_warnings) == 1


def test_the_poll_takes_a_tf_mount_before_the_first_sweep(lidar_node, node_module):
    # robot_state_publisher's static mount, 1.2 m ahead of and 1.9 m above base_footprint: the
    # poll takes it before any odometry, so no sweep is traced with the sensors file's mount.
    node = lidar_node()
    found = []

    def lookup_transform(target, source, at):
        found.append((target, source))
        if len(found) < 2:  # not there yet at the first poll: no warning, tried again later
            raise TransformException("not yet")
        translation = SimpleNamespace(x=1.2, y=0.0, z=1.9)
        return SimpleNamespace(
            transform=SimpleNamespace(translation=translation, rotation=SimpleNamespace(x=0.0, y=0.0, z=0.0, w=1.0))
        )

    node._tf.lookup_transform = lookup_transform
    for _ in range(2 * node_module.MOUNT_RETRY_POLLS):
        _poll(node)
    assert found == [("base_footprint", "lidar")] * 2
    assert node.config.position_flu_m.tolist() == [1.2, 0.0, 1.9]
    assert node.config.rpy_rad.tolist() == [0.0, 0.0, 0.0]
    assert not [m for level, m in node.log_lines if level == "warning" and "no TF" in m]
    assert not node.loop.scheduler.jobs()  # before any scan


def test_node_publishes_the_slices_of_a_scan_in_order_in_the_output_frame(lidar_node):
    """partial_output with 4 slices in the world frame: four messages on /lidar/points, stamped at
    the ends of their 25 ms of the sweep (XYZI), in the odometry frame."""
    node = lidar_node(**{"lidar.partial_output": True, "lidar.partial_slices": 4, "lidar.output_frame": "world"})
    on_odom = node.subscriptions["/odom"][1]
    node.clock.ns = 1_000 * MS
    for k in range(6):
        on_odom(odometry((900 + 20 * k) * MS, float(k)))
    on_odom(odometry(1_000 * MS, 6.0))
    node.clock.ns = 1_012 * MS
    _poll(node)
    points = node.publishers["/lidar/points"].messages
    stamps = [cloud.header.stamp.sec * 10**9 + cloud.header.stamp.nanosec for cloud in points]
    assert stamps == [925 * MS, 950 * MS, 975 * MS, 1_000 * MS]
    assert {cloud.header.frame_id for cloud in points} == {"odom"}


def test_a_scan_finished_after_ctrl_c_is_not_published_and_raises_nothing(lidar_node, caplog):
    # close() waits for the worker finishing a scan; by then Ctrl-C has shut the context down
    # and rclpy's publish would raise RCLError in the done-callback.
    node = lidar_node()
    on_odom = node.subscriptions["/odom"][1]
    node.clock.ns = 1_000 * MS
    for k in range(6):
        on_odom(odometry((900 + 20 * k) * MS, float(k)))
    publisher = node.publishers["/lidar/points"]

    def refuse(message):
        raise FakePublisherAfterShutdown("publisher's context is invalid")

    publisher.publish = refuse
    node.context.alive = False
    node.clock.ns = 1_012 * MS  # released at once when ready
    on_odom(odometry(1_000 * MS, 6.0))
    _poll(node)
    assert node.loop.scheduler.counts["published"] == 1
    node.close()
    # A done-callback that raised is only logged by concurrent.futures: look for it there.
    assert not [r for r in caplog.records if "exception calling callback" in r.getMessage()]
    # With the context still up, a failing publish is an error, not swallowed.
    node.context.alive = True
    from acres_lidar_ros.runtime.messages import ScanMessages

    job = SimpleNamespace(result=[ScanMessages("cloud")])  # a whole scan: one slice
    with pytest.raises(FakePublisherAfterShutdown):
        node._publish([job])


def test_node_rejects_bad_odometry_with_a_warning_and_never_traces_without_a_pose(lidar_node):
    node = lidar_node()
    on_odom = node.subscriptions["/odom"][1]
    node.clock.ns = 1_000 * MS
    _poll(node)
    assert node.loop.scheduler.in_work  # the scan due at 1000 ms waits
    on_odom(odometry(1_000 * MS, math.nan))
    on_odom(odometry(1_000 * MS, 0.0, frame="map"))
    on_odom(odometry(1_000 * MS, 0.0, q=(0.0, 0.0, 0.0, 2.0)))
    warnings = [m for level, m in node.log_lines if level == "warning"]
    assert any("finite" in m for m in warnings) and any("'map'" in m for m in warnings)
    node.clock.ns = 1_060 * MS
    _poll(node)
    assert node.loop.scheduler.counts["skipped_no_pose"]
    assert node.loop.scheduler.counts["skipped_no_pose"] == 1
    assert StandInScanner.instances[-1].calls == []


def test_node_parameters_at_start_up_and_at_runtime(lidar_node):
    node = lidar_node(**{"lidar.frame_id": "rslidar", "point_type": "XYZIRT", "rain_mm_per_h": 2.0})
    assert node.config.frame_id == "rslidar" and node.settings["point_type"] == "XYZIRT"
    assert StandInScanner.instances[-1].options.rain_mm_per_h == 2.0
    on_set = node.set_callbacks[0]
    P = lambda name, value: SimpleNamespace(name=name, value=value)  # noqa: E731
    refused = on_set([P("visibility_m", 5.0)])
    assert not refused.successful and refused.reason.startswith("visibility_m = 5.0 is out of range")
    refused = on_set([P("lidar.hz", 5.0)])
    assert not refused.successful and "read-only" in refused.reason
    accepted = on_set([P("rain_mm_per_h", 10.0), P("use_sim_time", True)])
    assert accepted.successful and StandInScanner.instances[-1].option_changes == [{"rain_mm_per_h": 10.0}]
    before = len(StandInScanner.instances)
    assert on_set([P("lidar.return_mode", "last")]).successful
    # A runtime key changes the running scanner (its noise streams go on), no rebuild.
    assert len(StandInScanner.instances) == before and node.config.return_mode == "last"
    assert StandInScanner.instances[-1].option_changes[-1] == {"return_mode": "last"}


def test_node_output_parameters_change_live_and_spherical_needs_a_layout_with_it(lidar_node):
    node = lidar_node(point_type="ouster")
    on_set = node.set_callbacks[0]
    P = lambda name, value: SimpleNamespace(name=name, value=value)  # noqa: E731
    refused = on_set([P("lidar.coordinates", "spherical")])
    assert not refused.successful and "with point_type 'ouster'" in refused.reason
    assert node.config.outputs.coordinates == "cartesian"  # nothing changed
    assert on_set([P("lidar.output_frame", "world"), P("lidar.include_invalid_points", False)]).successful
    assert node.config.outputs.output_frame == "world" and not node.config.outputs.include_invalid_points
    refused = on_set([P("lidar.custom_frame_xyz_rpy", [0.0, 0.0, 0.0])])
    assert not refused.successful and "lidar.custom_frame_xyz_rpy has 3 values" in refused.reason


def test_node_clears_the_poses_when_ros_time_jumps_back(lidar_node):
    node = lidar_node()
    on_odom = node.subscriptions["/odom"][1]
    node.clock.ns = 50_000 * MS
    for k in range(6):  # the sweep 49.9 .. 50 s
        on_odom(odometry((49_900 + 20 * k) * MS, 1.0))
    _poll(node)
    assert StandInScanner.instances[-1].calls
    node.clock.ns = 100 * MS  # the simulator was reset
    _poll(node)
    assert node.loop.tracker.newest_ns is None
    # docs/ros.md: a time jump back "abandons the scans in work": the one due at 50 s, traced already
    assert node.loop.tracker.newest_ns is None and node.loop.scheduler.counts["abandoned"] == 1
    assert any("jumped back" in m for level, m in node.log_lines if level == "warning")
    node.clock.ns = 200 * MS
    _poll(node)
    assert node.loop.scheduler.in_work
    assert len(StandInScanner.instances[-1].calls) == 1  # the new timeline waits for its own poses
    # Its first pose arrives after the reset, at 150 ms: the scans due at 100 and 200 ms have
    # sweeps (0 .. 100, 100 .. 200 ms) that start before it; neither is published as a normal
    # scan, both are skipped and counted.
    on_odom(odometry(150 * MS, 2.0))
    on_odom(odometry(200 * MS, 2.0))
    assert len(StandInScanner.instances[-1].calls) == 1
    assert node.loop.scheduler.counts["skipped_pose_start"] == 2
    assert any("starts before the first pose" in m for level, m in node.log_lines if level == "warning")


def test_node_publishes_diagnostics(lidar_node):
    node = lidar_node()
    diagnostics = next(cb for period, cb in node.timers if period == 1.0)
    node.clock.ns = 5_000 * MS
    diagnostics()
    (array,) = node.publishers["/diagnostics"].messages
    (status,) = array.status
    values = {kv.key: kv.value for kv in status.values}
    assert {"scans_published", "scans_late", "scans_dropped_busy", "trace_ms", "real_time_factor"} <= set(values)
    assert status.level == TYPES["diagnostic_msgs/msg/DiagnosticStatus"].OK


def test_node_logs_events_of_every_severity_without_tripping_rclpy(lidar_node, node_module):
    node = lidar_node()
    Event = node_module.Event
    node._log(
        [
            Event("info", "a", "one"),
            Event("warn", "b", "two"),
            Event("error", "c", "three"),
            Event("debug", "d", "four"),
            Event("warn", "e", "five"),
        ]
    )
    assert node.log_lines[-5:] == [
        ("info", "one"),
        ("warning", "two"),
        ("error", "three"),
        ("debug", "four"),
        ("warning", "five"),
    ]


@pytest.mark.parametrize("context_ok", [False, True], ids=["after-sigint", "context-alive"])
def test_node_main_treats_rclpy_context_error_after_sigint_as_shutdown(
    lidar_node, node_module, monkeypatch, context_ok
):
    """SIGINT can shut rclpy's context down while the executor builds its wait set; rclpy then raises
    RCLError (a RuntimeError) "the given context is not valid" from spin instead of
    ExternalShutdownException. That is a clean shutdown; the same error with a live context is not."""
    lidar_node()  # the fixture's stand-ins (scanner, scene) for the node main() makes

    def spin(node):
        raise RuntimeError("failed to initialize wait set: the given context is not valid")

    calls: list[str] = []
    fake = node_module.rclpy
    for name, value in (
        ("init", lambda args=None: None),
        ("spin", spin),
        ("ok", lambda: context_ok),
        ("try_shutdown", lambda: calls.append("try_shutdown")),
    ):
        monkeypatch.setattr(fake, name, value, raising=False)
    monkeypatch.setattr(node_module, "_ignore_further_sigint", lambda: calls.append("ignore_sigint"))
    monkeypatch.setattr(node_module.LidarNode, "destroy_node", lambda self: calls.append("destroy"), raising=False)
    if context_ok:
        with pytest.raises(RuntimeError, match="context is not valid"):
            node_module.main([])
    else:
        assert node_module.main([]) is None  # no SystemExit: exit status 0
    # Either way the node is shut down in order: further SIGINTs ignored, the node destroyed, rclpy shut down.
    assert calls == ["ignore_sigint", "destroy", "try_shutdown"]


def test_node_start_up_error_names_the_key(lidar_node):
    with pytest.raises(ConfigError, match="lidar.columns = 2 is out of range"):
        lidar_node(**{"lidar.columns": 2})


def test_an_unknown_start_up_parameter_is_refused_with_the_closest_names(lidar_node):
    # rclpy would drop it silently: the scan would run with the body table on.
    with pytest.raises(ConfigError) as refused:
        lidar_node(**{"self_returns": False, "lidar.rnage_m": 50.0, "seed": 3})
    message = str(refused.value)
    assert "self_returns = False: lidar_node has no such parameter; did you mean 'lidar.self_returns'" in message
    assert "lidar.rnage_m = 50.0: lidar_node has no such parameter; did you mean 'lidar.range_m'" in message
    assert "seed =" not in message  # a known one is not named
    assert "docs/ros.md" in message


# -- with real rclpy ----------------------------------------------------------------------------------


def test_real_rclpy_node_refuses_an_out_of_range_parameter():
    rclpy = pytest.importorskip("rclpy", reason="ROS 2 (rclpy) is not installed: real node test skipped")
    from rclpy.parameter import Parameter

    from acres_lidar_ros.ros.node import LidarNode

    rclpy.init()
    try:
        node = LidarNode()
        try:
            # rclpy checks the descriptor's floating_point_range before the node's on-set callback,
            # so the reason is rclpy's: "Parameter visibility_m out of range Min: 10.0, Max: inf, value: 5.0".
            result = node.set_parameters([Parameter("visibility_m", Parameter.Type.DOUBLE, 5.0)])[0]
            assert not result.successful
            assert "visibility_m" in result.reason and "out of range" in result.reason and "10.0" in result.reason
            result = node.set_parameters([Parameter("rain_mm_per_h", Parameter.Type.DOUBLE, 3.0)])[0]
            assert result.successful
            result = node.set_parameters([Parameter("lidar.hz", Parameter.Type.DOUBLE, 5.0)])[0]
            assert not result.successful
            # A pattern key is rebuilt between scans, but the Polaris's self-return table is for 1800
            # columns: the scanner refuses and the previous parameters stay.
            result = node.set_parameters([Parameter("lidar.columns", Parameter.Type.INTEGER, 900)])[0]
            assert not result.successful and "self_table" in result.reason and node.config.columns == 1800
            assert node.get_parameter("lidar.columns").value == 1800
            descriptor = node.describe_parameter("lidar.hz")
            assert descriptor.read_only and descriptor.floating_point_range[0].to_value == 120.0
        finally:
            node.close()
            node.destroy_node()
    finally:
        rclpy.try_shutdown()


def test_real_rclpy_node_refuses_an_unknown_parameter_before_building_anything():
    rclpy = pytest.importorskip("rclpy", reason="ROS 2 (rclpy) is not installed: real node test skipped")
    from rclpy.parameter import Parameter

    from acres_lidar_ros.ros.node import LidarNode

    rclpy.init()
    try:
        overrides = [Parameter("self_returns", value=False), Parameter("use_sim_time", value=True)]
        with pytest.raises(ConfigError, match="self_returns = False: lidar_node has no such parameter"):
            LidarNode(parameter_overrides=overrides)
    finally:
        rclpy.try_shutdown()


def test_node_traces_the_running_sweep_as_odometry_arrives(lidar_node):
    node = lidar_node()
    on_odom = node.subscriptions["/odom"][1]
    node.clock.ns = 1_001 * MS
    _poll(node)
    assert node.loop.scheduler.upcoming() is not None
    assert node.loop.scheduler.upcoming() == (1_100 * MS, 0)  # the sweep 1000..1100 ms is running
    on_odom(odometry(1_000 * MS, 0.0))
    on_odom(odometry(1_020 * MS, 1.0))
    scanner = StandInScanner.instances[-1]
    _poll(node)
    assert len(scanner.pretraced) >= 2
    assert (1.02, 1_100 * MS, 0) in scanner.pretraced
    assert scanner.calls == []  # nothing finished before the sweep's end


def test_a_failing_pretrace_is_logged_once_and_scans_go_on(lidar_node):
    node = lidar_node()

    def broken(*args, **kwargs):
        raise ValueError("a broken block")

    node.loop.sweeps.pretrace_upcoming = broken
    on_odom = node.subscriptions["/odom"][1]
    node.clock.ns = 1_000 * MS
    for k in range(6):
        on_odom(odometry((900 + 20 * k) * MS, float(k)))
    _poll(node)
    assert any("tracing a sweep ahead failed" in m for _, m in node.log_lines)
    failures = [m for level, m in node.log_lines if "tracing a sweep ahead failed" in m]
    assert len(failures) == 1 and "ValueError: a broken block" in failures[0]  # throttled
    on_odom(odometry(1_000 * MS, 6.0))
    node.clock.ns = 1_012 * MS
    _poll(node)
    assert node.publishers["/lidar/points"].messages
    assert node.loop.scheduler.counts["published"] == 1


# -- without tf2_ros (the ROS 2 wheels from PyPI) ---------------------------------------------------


@pytest.fixture
def no_tf2(lidar_node, monkeypatch):
    """``lidar_node`` whose ``import tf2_ros`` raises ImportError (after the stand-in modules)."""
    monkeypatch.setitem(sys.modules, "tf2_ros", None)
    return lidar_node


def test_pose_source_tf_without_tf2_ros_is_a_start_up_error_naming_it(no_tf2):
    from acres_lidar_ros.errors import ConfigError

    with pytest.raises(ConfigError, match=r"pose_source = 'tf' needs tf2_ros, which is not installed"):
        no_tf2(pose_source="tf")


def test_without_tf2_ros_the_mount_comes_from_the_sensors_file_and_odom_markers_still_work(no_tf2):
    from acres_lidar_ros.runtime.scheduler import ScanJob

    node = no_tf2()
    warnings = [m for level, m in node.log_lines if level == "warning"]
    assert len([m for m in warnings if "tf2_ros is not installed" in m]) == 1
    assert "position_flu_m" in warnings[0] and "'odom' frame" in warnings[0]
    cube = SimpleNamespace(
        type=1,
        action=0,
        id=4,
        ns="vehicles",
        header=SimpleNamespace(frame_id="odom"),
        pose=TYPES["geometry_msgs/msg/Pose"](
            position=TYPES["geometry_msgs/msg/Point"](x=5.0, y=1.0, z=0.5),
            orientation=TYPES["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0),
        ),
        scale=SimpleNamespace(x=4.0, y=2.0, z=1.0),
    )
    elsewhere = SimpleNamespace(**{**vars(cube), "id": 5, "header": SimpleNamespace(frame_id="map")})
    node._on_markers(SimpleNamespace(markers=[cube, elsewhere]))
    job = ScanJob(index=0, sweep_end_ns=1_000 * MS, stamp_ns=1_000 * MS, release_ns=1_012 * MS, opened_ns=0)
    boxes, events = node._job_inputs(job)
    assert [b.object_id for b in boxes] == [4] and list(boxes[0].centre_m) == [5.0, 1.0, 0.5]
    assert [e.kind for e in events] == ["box_no_tf"]
    # The scan goes on with the sensors file's mount: no TF lookup, no second warning.
    on_odom = node.subscriptions["/odom"][1]
    node.clock.ns = 1_000 * MS
    for k in range(7):
        on_odom(odometry((900 + 20 * k) * MS, float(k)))
    node.clock.ns = 1_012 * MS
    _poll(node)
    assert len(node.publishers["/lidar/points"].messages) == 1
    assert len([m for level, m in node.log_lines if level == "warning" and "TF" in m]) == 0


def test_node_publishes_on_the_sensors_files_topic_and_layout(lidar_node, tmp_path):
    """An empty topic and point type are the sensors file's lidar.topic and lidar.point_type (its
    driver's defaults); a node parameter that names them wins."""
    polaris = config_dir() / "sensors_polaris.json"
    sensors = tmp_path / "s.json"
    overlay = {"extends": str(polaris), "lidar": {"topic": "/velodyne_points", "point_type": "XYZIRT"}}
    sensors.write_text(json.dumps(overlay))
    node = lidar_node(sensors=str(sensors))
    assert "/velodyne_points" in node.publishers and node.settings["point_type"] == "XYZIRT"
    named = lidar_node(sensors=str(sensors), topic="/points", point_type="XYZI")
    assert "/points" in named.publishers and named.settings["point_type"] == "XYZI"


def test_node_refuses_a_sensors_file_point_type_that_is_no_profile(lidar_node, tmp_path):
    sensors = tmp_path / "s.json"
    sensors.write_text(
        json.dumps({"extends": str(config_dir() / "sensors_polaris.json"), "lidar": {"point_type": "PCL"}})
    )
    # Refused where the sensors file loads (the config layer knows the point type names).
    with pytest.raises(
        ConfigError, match=r"s\.json'?: lidar\.point_type = 'PCL': expected a point layout: one of XYZI, XYZIRT"
    ):
        lidar_node(sensors=str(sensors))


def test_the_labels_parameter_publishes_the_labelled_profile(lidar_node):
    assert lidar_node(labels=True).settings["point_type"] == "XYZIRT_labels"
    assert lidar_node(labels=True, point_type="XYZIRT").settings["point_type"] == "XYZIRT_labels"
    assert lidar_node().settings["point_type"] == "XYZI"
    with pytest.raises(ConfigError, match="point_type 'ouster' with labels: .*allowed with labels: XYZI, XYZIRT"):
        lidar_node(labels=True, point_type="ouster")


def test_the_packets_parameter_sends_udp_or_refuses_ros_without_its_package(lidar_node):
    """packets: udp opens a live sender to packets_udp_host at start-up; ros needs the driver's
    message package (not in the PyPI wheels) and says so; a broadcast host is refused."""
    node = lidar_node(packets="udp")
    assert node._packet_feed.sink.sender.host == "127.0.0.1"
    assert node.descriptors["packets"].read_only
    import importlib.util

    if importlib.util.find_spec("rslidar_msg") is None:
        with pytest.raises(ConfigError, match="packets = 'ros' needs the rslidar_msg ROS 2 message package"):
            lidar_node(packets="ros")
    else:  # a workspace with rslidar_msg built: the packets are published as rslidar_sdk reads them
        assert "/rslidar_packets" in lidar_node(packets="ros").publishers
    if importlib.util.find_spec("ouster_sensor_msgs") is None:
        with pytest.raises(ConfigError, match="packets = 'ros' needs the ouster_sensor_msgs ROS 2 message package"):
            lidar_node(sensors="os1_64", packets="ros")
    else:  # ouster-ros's packet topic, as its os_sensor node publishes it
        assert "/ouster/lidar_packets" in lidar_node(sensors="os1_64", packets="ros").publishers
    with pytest.raises(ConfigError, match="broadcast or multicast address"):
        lidar_node(packets="udp", packets_udp_host="255.255.255.255")
    with pytest.raises(ConfigError, match="packets = 'tcp': expected one of udp, ros"):
        lidar_node(packets="tcp")


def test_the_odom_in_scene_parameter_places_the_scene_in_odom(lidar_node, node_module, monkeypatch):
    from acres_lidar_ros.scene.builder import SceneBuilder
    from acres_lidar_ros.scene.grids import TerrainGrid

    def yard(self, seed):  # flat ground at 1.5 m and a 2 x 2 x 4 m building centred at scene (30, 10)
        builder = SceneBuilder(TerrainGrid([-60.0, -60.0], 4.0, np.full((31, 31), 1.5)))
        builder.add_box([30.0, 10.0], [2.0, 2.0, 4.0], "building")
        return builder.build()

    monkeypatch.setattr(node_module.LidarNode, "_load_scene", yard)
    lidar_node(odom_in_scene="25 10 0.5 0 0 90")
    tracer = StandInScanner.instances[-1].tracer
    # Along odom -y from odom (0, 0, 2): the scene from (25, 10, 2.5) along +x, the building's face at x = 29.
    ranges = tracer.cast_bare(np.array([[0.0, 0.0, 2.0], [0.0, 0.0, 3.5]]), np.array([[0.0, -1, 0], [0, 0, -1.0]]))
    np.testing.assert_allclose(ranges, [4.0, 2.5], atol=1e-5)
    lidar_node()  # no offset: the scanner makes its own tracer of the scene at the odom origin
    assert StandInScanner.instances[-1].tracer == "tracer"
    with pytest.raises(ConfigError, match=r"odom_in_scene = '25 10': expected six finite numbers"):
        lidar_node(odom_in_scene="25 10")


def test_the_lidar_model_parameter_core_traces_acres_cores_lidar_from_the_stamp_pose(
    lidar_node, node_module, monkeypatch
):
    from loop_support import flat_plane_tracer

    from acres_lidar_ros.scan.core_scanner import CoreScanner

    monkeypatch.setattr(node_module.LidarNode, "_load_scene", lambda self, seed: flat_plane_tracer().scene)
    node = lidar_node(**{"lidar.model": "core"})
    assert type(node.scanner) is CoreScanner and StandInScanner.instances == []  # not the full model's
    on_odom = node.subscriptions["/odom"][1]
    node.clock.ns = 1_000 * MS
    on_odom(odometry(1_000 * MS, 0.0))  # the pose at the stamp alone covers a core scan
    _poll(node)
    node.clock.ns = 1_012 * MS
    _poll(node)
    assert len(node.publishers["/lidar/points"].messages) == 1 and node.loop.scheduler.counts["published"] == 1
    with pytest.raises(ConfigError, match="model core with truth"):
        lidar_node(**{"lidar.model": "core", "truth": True})
