"""``lidar_node``: the simulated Helios as a ROS 2 node (rclpy wiring only).

The logic lives in ROS-free modules: ``runtime.loop.NodeLoop`` (pose ingestion, due times,
pretraces, finishes, publish decisions, diagnostics; the schedule benchmark drives the same
class), ``runtime.tf_inputs`` (marker boxes, the TF mount), ``ros.params`` (parameter
declarations and on-set validation from the schema), ``scan`` (the core) and ``outputs`` (the
organised cloud's dtype and fields). This module only connects them to topics, TF, timers and
parameters: its callbacks call into the loop, and publish and log what the loop returns.

With ``lidar_set`` the node runs several sensors over its one scene (``runtime.lidar_set``: a
``LidarSet`` of scanners over one ``Tracer`` and a ``LidarSetLoop`` of one ``NodeLoop`` each); each
sensor is a ``Channel`` here: its topic, layout, publishers and TF mount. Without it, one channel.

Topics: subscribes ``/odom`` (nav_msgs/Odometry) or reads TF ``odom -> base_footprint``
(``pose_source``), ``/vehicle_markers`` (visualization_msgs/MarkerArray); publishes
``/lidar/points`` (sensor_msgs/PointCloud2, rslidar_sdk's QoS; each sensor's ``lidar.topic`` in a
set), with ``truth`` the scans' cell truth on ``/lidar/truth`` (``runtime.messages``), and
``/diagnostics`` (one status per sensor).
"""

from __future__ import annotations

import array
import signal
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import numpy as np
import rclpy
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from nav_msgs.msg import Odometry
from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor, SetParametersResult
from rclpy.exceptions import ParameterException, ParameterUninitializedException
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.time import Time
from sensor_msgs.msg import PointCloud2, PointField
from std_msgs.msg import Header
from visualization_msgs.msg import MarkerArray

from acres_lidar_ros.body.self_returns import sensor_self_table
from acres_lidar_ros.config.sensors import SensorConfig, load_sensor_config
from acres_lidar_ros.errors import AcresLidarError, ConfigError
from acres_lidar_ros.outputs.point_types import PointProfile, labelled_point_type
from acres_lidar_ros.outputs.pointcloud2 import cloud_is_dense, point_fields, qos_profile_dict
from acres_lidar_ros.outputs.shaping import ShapedScan
from acres_lidar_ros.ros.packet_sink import packet_feed
from acres_lidar_ros.ros.params import (
    PARAMETER_TYPE,
    ParamDecl,
    by_name,
    check_changes,
    check_known,
    declarations,
    node_declarations,
    node_values,
    option_values,
    split_changes,
    startup_overrides,
)
from acres_lidar_ros.runtime.events import Event
from acres_lidar_ros.runtime.lidar_set import LidarSet, LidarSetLoop, check_set_start_up
from acres_lidar_ros.runtime.loop import LoopOutput, NodeLoop, SliceOut
from acres_lidar_ros.runtime.messages import ScanMessages, pack_scan
from acres_lidar_ros.runtime.pose_tracker import GroundWatch
from acres_lidar_ros.runtime.scheduler import ScanJob
from acres_lidar_ros.runtime.startup import GIL_SWITCH_INTERVAL_S, freeze_startup_objects
from acres_lidar_ros.runtime.tf_inputs import boxes_from_markers, mount_overrides
from acres_lidar_ros.scan.core_scanner import CoreScanner
from acres_lidar_ros.scan.scan_types import ScanOptions
from acres_lidar_ros.scan.scanner import Scanner
from acres_lidar_ros.tracing.scene_frame import odom_in_scene_transform
from acres_lidar_ros.tracing.trace import Tracer

POLL_PERIOD_S = 0.002
MOUNT_RETRY_POLLS = 50
"""Until the TF mount is found, the poll looks it up every this many polls (0.1 s)."""
TF_POSE_PERIOD_S = 0.02
DIAGNOSTICS_PERIOD_S = 1.0
_DIAGNOSTIC_LEVEL = {"OK": DiagnosticStatus.OK, "WARN": DiagnosticStatus.WARN, "ERROR": DiagnosticStatus.ERROR}


def cloud_qos(depth: int) -> QoSProfile:
    """rslidar_sdk's publisher QoS (``outputs.pointcloud2.qos_profile_dict``) with ``depth``."""
    spec = qos_profile_dict()
    return QoSProfile(
        reliability={"reliable": ReliabilityPolicy.RELIABLE, "best_effort": ReliabilityPolicy.BEST_EFFORT}[
            spec["reliability"]
        ],
        durability={"volatile": DurabilityPolicy.VOLATILE, "transient_local": DurabilityPolicy.TRANSIENT_LOCAL}[
            spec["durability"]
        ],
        history={"keep_last": HistoryPolicy.KEEP_LAST, "keep_all": HistoryPolicy.KEEP_ALL}[spec["history"]],
        depth=depth,
    )


def descriptor(decl: ParamDecl) -> ParameterDescriptor:
    fields = decl.descriptor_fields()
    fields["floating_point_range"] = [FloatingPointRange(**r) for r in fields["floating_point_range"]]
    fields["integer_range"] = [IntegerRange(**r) for r in fields["integer_range"]]
    return ParameterDescriptor(**fields)


def stamp_ns(stamp: Any) -> int:
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def cloud_message(cloud: np.ndarray, frame_id: str, stamp: int) -> PointCloud2:
    """A PointCloud2 of a 2-D structured array (``layouts.point_cloud``), rows as they are;
    fields from its dtype (``outputs.pointcloud2.point_fields``), data as ``array('B')`` (rclpy's
    fast path for ``uint8[]``)."""
    height, width = cloud.shape
    return PointCloud2(
        header=Header(stamp=Time(nanoseconds=stamp).to_msg(), frame_id=frame_id),
        height=height,
        width=width,
        fields=[PointField(name=n, offset=o, datatype=d, count=c) for n, o, d, c in point_fields(cloud.dtype)],
        is_bigendian=False,
        point_step=cloud.dtype.itemsize,
        row_step=width * cloud.dtype.itemsize,
        data=array.array("B", np.ascontiguousarray(cloud).tobytes()),
        is_dense=cloud_is_dense(cloud),
    )


def import_tf2_ros() -> Any | None:
    """tf2_ros, imported when the node starts; None where it is not installed (the ROS 2 wheels
    on PyPI do not ship it). Every ROS 2 install has it."""
    try:
        import tf2_ros
    except ImportError:
        return None
    return tf2_ros


@dataclass
class Channel:
    """One sensor of the node: its loop's index, name (the log lines' prefix in a set), cloud topic
    and profile (the published layout, resolved once at start), publishers, and whether its mount
    came from TF."""

    index: int
    name: str
    topic: str
    profile: PointProfile
    cloud_pub: Any = None
    truth_pub: Any = None
    mount_from_tf: bool = False
    mount_warned: bool = False


class LidarNode(Node):
    """The simulated Helios: poses in, scheduled organised clouds out (``NodeLoop`` over rclpy);
    with ``lidar_set``, N sensors over one scene (``runtime.lidar_set``), one loop each.

    ``executors`` gives each sensor's loop the executor it traces in (called once per loop; None:
    the loop's own pool of two threads); the other keywords are rclpy's ``Node``'s.
    """

    def __init__(self, executors: Callable[[], Executor | None] = lambda: None, **kwargs: Any) -> None:
        super().__init__("lidar_node", **kwargs)
        own = node_declarations()
        self._declare(own)
        self.settings = node_values({d.name: self._value(d.name) for d in own})
        s = self.settings
        self._tf2: Any = import_tf2_ros()
        if self._tf2 is None and s["pose_source"] == "tf":
            raise ConfigError(
                "pose_source = 'tf' needs tf2_ros, which is not installed (the ROS 2 wheels from PyPI do not "
                "ship it): use pose_source odom, or run in a ROS 2 install that has tf2_ros"
            )
        overrides = getattr(self, "_parameter_overrides", {})
        if s["lidar_set"] is not None:
            check_set_start_up(s, overrides)
        config = load_sensor_config(s["sensors"]) if s["lidar_set"] is None else None
        self._decls = by_name(declarations(config))
        self._declare(d for d in self._decls.values() if d.group != "node")
        # rclpy keeps the start-up values of undeclared names and drops them: refuse them here.
        check_known(overrides, [*self._decls, *(n for n in overrides if self.has_parameter(n))])  # and rclpy's own
        values = {name: self._value(name) for name in self._decls}
        options = ScanOptions(**option_values(values), truth=s["truth"])
        T_scene_odom = odom_in_scene_transform(s["odom_in_scene"], "odom_in_scene")  # before the scene
        scene = self._load_scene(options.seed)
        tracer = None if T_scene_odom is None else Tracer(scene, T_scene_odom=T_scene_odom)
        if config is not None:
            config = config.with_overrides(startup_overrides(values, config))
            # lidar.model: the full model, or ACRES Core's (its noise, bNoise, off as in ACRES Core)
            scanners = [
                (CoreScanner if config.model == "core" else Scanner)(
                    config, scene, options, tracer=tracer, self_table=sensor_self_table(config)
                )
            ]
            names = [""]
        else:  # the scene held once: one Tracer under every sensor's scanner
            lidars = LidarSet(s["lidar_set"], tracer or Tracer(scene), options)
            scanners = [slot.scanner for slot in lidars.slots]
            names = [slot.name for slot in lidars.slots]
        self.channels: list[Channel] = []
        for i, (scanner, name) in enumerate(zip(scanners, names)):
            # An empty topic or point type is the sensors file's: its driver's defaults; labels: the
            # labelled profile is the published point type (ConfigError for ouster & co.)
            profile = labelled_point_type(s["point_type"] or scanner.config.point_type, s["labels"])
            profile.dtype_in(scanner.config.outputs.coordinates)  # spherical: a layout that has it
            self.channels.append(Channel(i, name, s["topic"] or scanner.config.topic, profile))
        self.settings["topic"], self.settings["point_type"] = self.channels[0].topic, self.channels[0].profile.name
        self.get_logger().info("preparing the compiled kernels (a first run compiles them, about 10 s)")
        self.get_logger().info(f"kernels ready in {sum(scanner.warm_up() for scanner in scanners):.1f} s")
        freeze_startup_objects()  # no full garbage collection walks the start-up objects mid-scan
        self._polls_to_mount_try = 0  # the first poll looks for the TF mount at once
        self._markers: list[Any] = []
        self._markers_lock = threading.Lock()
        self.lidars = LidarSetLoop(
            scanners,
            lambda: self.get_clock().now().nanoseconds,
            self._pack,
            self._emit,
            job_inputs=lambda i, job: self._job_inputs(job, i),
            executor=executors,
            ground=None if scene is None else GroundWatch(scene, T_scene_odom),
            ts_first_point=[c.profile.stamps_sweep_start(s["ts_first_point"]) for c in self.channels],
            pose_timeout_s=s["pose_timeout_s"],
            max_extrapolation_s=s["max_extrapolation_s"],
            max_pose_speed_mps=s["max_pose_speed_mps"],
            max_pose_acceleration_mps2=s["max_pose_acceleration_mps2"],
            odom_frame=s["odom_frame"],
            base_frame=s["base_frame"],
        )
        self._tf: Any = None
        if self._tf2 is not None:
            self._tf = self._tf2.Buffer()
            self._tf_listener = self._tf2.TransformListener(self._tf, self)
        for c in self.channels if self._tf2 is None else ():
            c.mount_warned = True  # said once, here
            cfg = self.lidars.loops[c.index].config
            self.get_logger().warning(
                f"{self._prefix(c)}tf2_ros is not installed: the mount {s['base_frame']} -> {cfg.frame_id} "
                f"comes from the sensors file (position_flu_m {cfg.position_flu_m.tolist()}, rpy_deg "
                f"{np.degrees(cfg.rpy_rad).round(3).tolist()}), and only vehicle markers in the "
                f"{s['odom_frame']!r} frame become boxes"
            )
        self._packet_feed = (
            None
            if config is None
            else packet_feed(self, s["packets"], s["packets_udp_host"], s["sensors"], config, cloud_qos)
        )
        for c in self.channels:
            c.cloud_pub = self.create_publisher(PointCloud2, c.topic, cloud_qos(s["qos_depth"]))
        if s["truth"]:
            self.channels[0].truth_pub = self.create_publisher(PointCloud2, s["truth_topic"], cloud_qos(s["qos_depth"]))
        self._diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        if s["pose_source"] == "odom":
            self.create_subscription(Odometry, s["odom_topic"], self._on_odom, 50)
        else:
            self.create_timer(TF_POSE_PERIOD_S, self._on_tf_pose)
        if s["vehicle_markers_topic"]:
            self.create_subscription(MarkerArray, s["vehicle_markers_topic"], self._on_markers, 10)
        self.create_timer(POLL_PERIOD_S, self._on_poll)
        self.create_timer(DIAGNOSTICS_PERIOD_S, self._on_diagnostics)
        self.add_on_set_parameters_callback(self._on_set_parameters)
        for c, loop in zip(self.channels, self.lidars.loops):
            cfg = loop.config
            if not cfg.enabled:
                self.get_logger().warning(
                    f"{self._prefix(c)}lidar.enabled is false in the sensors file: no clouds will be published"
                )
            self.get_logger().info(
                f"{self._prefix(c)}{cfg.columns} x {cfg.rings} at {cfg.hz:g} Hz from {cfg.source}, "
                f"publishing {c.profile.name} on {c.topic} in frame {cfg.frame_id!r}, "
                f"delay {cfg.delay_s * 1e3:.0f} ms, poses from {s['pose_source']}"
            )

    @property
    def loop(self) -> NodeLoop:
        """The first sensor's loop (the only one without ``lidar_set``)."""
        return self.lidars.loops[0]

    @property
    def config(self) -> SensorConfig:
        return self.loop.config

    @property
    def scanner(self) -> Scanner:
        return self.loop.scanner

    @property
    def _mount_from_tf(self) -> bool:
        """Every sensor's mount came from TF."""
        return all(c.mount_from_tf for c in self.channels)

    def _prefix(self, channel: Channel) -> str:
        return f"[{channel.name}] " if len(self.channels) > 1 else ""

    # -- set-up -------------------------------------------------------------------------------

    def _value(self, name: str) -> Any:
        try:
            return self.get_parameter(name).value
        except ParameterUninitializedException:  # a list key the sensors file leaves unset
            return None

    def _declare(self, decls) -> None:
        for d in decls:
            # rcl_interfaces' type numbers (params.PARAMETER_TYPE, the one map) are Parameter.Type's
            value = Parameter.Type(PARAMETER_TYPE[d.type]) if d.default is None else d.default
            self.declare_parameter(d.name, value, descriptor(d))

    def _load_scene(self, seed: int):
        if self.settings["scene"] not in ("", "default"):  # "default": the CLI's name of the built-in farm
            from acres_lidar_ros.scene.scene_file import load_scene

            return load_scene(self.settings["scene"])
        from acres_lidar_ros.scene.farm_v1 import build_default_farm

        return build_default_farm(seed)

    def close(self) -> None:
        self.lidars.close()
        if self._packet_feed is not None:
            self._packet_feed.close()
        for c in self.channels:
            self._log([], final=True, channel=c.index)  # the lines the throttle still holds back, with their counts

    # -- output -------------------------------------------------------------------------------

    def _log(self, events: list[Event], final: bool = False, channel: int = 0) -> None:
        # One call site per severity: rclpy's logger keys its state by the caller's line and
        # raises "Logger severity cannot be changed between calls" if one line logs two severities.
        logger = self.get_logger()
        prefix = self._prefix(self.channels[channel])
        for e in self.lidars.loops[channel].to_log(events, final):
            if e.level == "debug":
                logger.debug(prefix + e.message)
            elif e.level == "info":
                logger.info(prefix + e.message)
            elif e.level == "warn":
                logger.warning(prefix + e.message)
            else:
                logger.error(prefix + e.message)

    def _emit(self, channel: int, out: LoopOutput) -> None:
        """What sensor ``channel``'s loop returns or a worker completes: log it, publish it."""
        self._log(out.events, channel=channel)
        self._publish(out.publish, channel)

    def _publish(self, jobs: list[ScanJob | SliceOut], channel: int = 0) -> None:
        c = self.channels[channel]
        for job in jobs:
            # A worker can finish after Ctrl-C has shut the context down (close() waits for it):
            # nothing more goes out then, and that is not an error.
            if not self.context.ok():
                return
            try:
                for messages in job.result:  # its slices in order (a whole scan is one)
                    c.cloud_pub.publish(messages.points)
                    if messages.truth is not None and c.truth_pub is not None:
                        c.truth_pub.publish(messages.truth)
            except Exception:
                if self.context.ok():
                    raise
                return
            job.result = None

    def _pack(self, channel: int, shaped: ShapedScan, job: ScanJob) -> ScanMessages:
        """In a worker: the scan's (or a slice's) cloud in its sensor's point type as a
        PointCloud2, in its output frame, stamped at the start or the end of what it covers, and
        with the truth on the scan's truth cloud beside its last slice (``runtime.messages``)."""
        profile = self.channels[channel].profile
        if self._packet_feed is not None and shaped.last_slice:
            self._packet_feed.put(shaped.scan)  # its packets, in the feed's own thread
        stamp = shaped.header_stamp_ns(profile.stamps_sweep_start(self.settings["ts_first_point"]))
        return pack_scan(shaped, profile, stamp, cloud_message)

    # -- inputs -------------------------------------------------------------------------------

    def _on_odom(self, msg: Odometry) -> None:
        p, q = msg.pose.pose.position, msg.pose.pose.orientation
        sample = (stamp_ns(msg.header.stamp), (p.x, p.y, p.z), (q.x, q.y, q.z, q.w))
        for i, out in enumerate(self.lidars.on_pose(*sample, msg.header.frame_id, msg.child_frame_id)):
            self._emit(i, out)

    def _on_tf_pose(self) -> None:
        try:
            tf = self._tf.lookup_transform(self.settings["odom_frame"], self.settings["base_frame"], Time())
        except self._tf2.TransformException as exc:
            message = f"no TF pose {self.settings['odom_frame']} -> {self.settings['base_frame']}: {exc}"
            self._log([Event("warn", "tf_pose", message)])
            return
        t, q = tf.transform.translation, tf.transform.rotation
        for i, out in enumerate(self.lidars.on_pose(stamp_ns(tf.header.stamp), (t.x, t.y, t.z), (q.x, q.y, q.z, q.w))):
            self._emit(i, out)

    def _on_markers(self, msg: MarkerArray) -> None:
        with self._markers_lock:
            self._markers = list(msg.markers)

    def _lookup(
        self, target: str, source: str, at_ns: int | None
    ) -> tuple[tuple[float, float, float], tuple[float, float, float, float]] | None:
        if self._tf is None:  # no tf2_ros: only a frame into itself is known
            return ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0)) if target == source else None
        try:
            tf = self._tf.lookup_transform(target, source, Time() if at_ns is None else Time(nanoseconds=at_ns))
        except self._tf2.TransformException:
            return None
        t, q = tf.transform.translation, tf.transform.rotation
        return (t.x, t.y, t.z), (q.x, q.y, q.z, q.w)

    def _job_inputs(self, job: ScanJob, channel: int = 0) -> tuple[list[Any], list[Event]]:
        """When a scan starts: its sensor's mount (from TF once it is there) and the other vehicles."""
        self._resolve_mount(warn=True, channel=channel)
        with self._markers_lock:
            markers = list(self._markers)
        return boxes_from_markers(
            markers, lambda frame: self._lookup(self.settings["odom_frame"], frame, job.sweep_end_ns)
        )

    def _resolve_mount(self, warn: bool, channel: int = 0) -> None:
        """The mount base_frame -> the sensor's frame from TF (robot_state_publisher, a static
        transform), once; else the sensors file's position_flu_m / rpy_deg, with one warning when a
        scan starts without it (``warn``). The poll looks too, so that a mount published at
        start-up is taken before the first sweep is traced: taking it rebuilds the beam pattern
        and drops the sweeps in work."""
        c = self.channels[channel]
        loop = self.lidars.loops[channel]
        if c.mount_from_tf or self._tf is None:
            return
        config = loop.config
        found = self._lookup(self.settings["base_frame"], config.frame_id, None)
        if found is None:
            if warn and not c.mount_warned:
                c.mount_warned = True
                self.get_logger().warning(
                    f"{self._prefix(c)}no TF {self.settings['base_frame']} -> {config.frame_id}: using the sensors "
                    f"file's position_flu_m {config.position_flu_m.tolist()} and rpy_deg "
                    f"{np.degrees(config.rpy_rad).round(3).tolist()}"
                )
            return
        c.mount_from_tf = True
        overrides = mount_overrides(found[0], found[1], config.position_flu_m, config.rpy_rad)
        if overrides is not None:
            self.get_logger().info(
                f"{self._prefix(c)}mount from TF differs from the sensors file; using TF: {overrides}"
            )
            loop.rebuild(overrides)

    # -- the cycle ----------------------------------------------------------------------------

    def _on_poll(self) -> None:
        if not self._mount_from_tf and self._tf is not None:
            self._polls_to_mount_try -= 1
            if self._polls_to_mount_try < 0:
                self._polls_to_mount_try = MOUNT_RETRY_POLLS - 1
                for c in self.channels:
                    self._resolve_mount(warn=False, channel=c.index)
        for i, out in enumerate(self.lidars.tick()):
            self._emit(i, out)

    def _on_diagnostics(self) -> None:
        statuses = []
        for c, loop, (level, message, values) in zip(
            self.channels, self.lidars.loops, self.lidars.diagnostics(DIAGNOSTICS_PERIOD_S)
        ):
            statuses.append(
                DiagnosticStatus(
                    level=_DIAGNOSTIC_LEVEL[level],
                    name="lidar_node: simulated lidar" + (f" {c.name}" if len(self.channels) > 1 else ""),
                    message=message,
                    hardware_id=f"acres_lidar_sim:{loop.config.frame_id}",
                    values=[KeyValue(key=k, value=v) for k, v in values],
                )
            )
        header = Header(stamp=self.get_clock().now().to_msg(), frame_id="")
        self._diag_pub.publish(DiagnosticArray(header=header, status=statuses))

    # -- runtime parameters --------------------------------------------------------------------

    def _on_set_parameters(self, params: list[Parameter]) -> SetParametersResult:
        """``lidar.<key>`` changes go to the one sensor (a set has none: its keys are its files');
        scan options to every sensor."""
        changes = {p.name: p.value for p in params if p.name in self._decls}  # use_sim_time etc.: rclpy's
        ok, reason = check_changes(changes, self._decls, self.config)
        if ok and changes.get("lidar.coordinates") == "spherical":
            try:
                self.channels[0].profile.dtype_in("spherical")
            except ConfigError as exc:
                ok, reason = False, str(exc)
        lidar, options = split_changes(changes, self._decls) if ok else ({}, {})
        try:
            if lidar:
                self.loop.rebuild(lidar)  # the scanner's own checks (its self-return table): all or nothing
        except ConfigError as exc:
            ok, reason = False, str(exc)
        if not ok:
            self.get_logger().warning(f"parameter change refused: {reason}")
            return SetParametersResult(successful=False, reason=reason)
        if options:
            self.lidars.set_options(**options)
        if changes:
            self.get_logger().info(f"parameters changed: {changes}")
        return SetParametersResult(successful=True, reason="")


def _ignore_further_sigint() -> None:
    """Clean-up runs once: Ctrl-C under ``ros2 launch`` sends SIGINT twice (the terminal's to the
    process group, then launch's own), and a second KeyboardInterrupt inside ``destroy_node``
    would end the process with a traceback and exit code -2."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def main(args: list[str] | None = None) -> None:
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)  # release timers get the GIL within 1 ms
    rclpy.init(args=args)
    node = None
    code = 0
    try:
        node = LidarNode()
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except (AcresLidarError, ParameterException) as exc:
        rclpy.logging.get_logger("lidar_node").fatal(f"cannot start: {exc}")
        code = 1
    except RuntimeError:  # rclpy's RCLError "the given context is not valid": SIGINT shut the
        if rclpy.ok():  # context down while the executor was building its wait set
            raise
    finally:
        _ignore_further_sigint()
        if node is not None:
            node.close()
            node.destroy_node()
        rclpy.try_shutdown()
    if code:
        raise SystemExit(code)


if __name__ == "__main__":
    main()
