"""``lidar_node``: the simulated Helios as a ROS 2 node (rclpy wiring only).

The logic lives in ROS-free modules: ``scheduler`` (due times, stamps, delay, busy drops, late
counts, the pose wait, odometry ingestion, marker boxes, the TF mount), ``ros_params`` (parameter
declarations and on-set validation from the schema), ``scan`` (the core) and ``outputs`` (the
organised cloud's dtype and fields). This module only connects them to topics, TF, timers and
parameters. It is the only module of the package that imports rclpy at import time.

Topics: subscribes ``/odom`` (nav_msgs/Odometry) or reads TF ``odom -> base_footprint``
(``pose_source``), ``/vehicle_markers`` (visualization_msgs/MarkerArray); publishes
``/lidar/points`` (sensor_msgs/PointCloud2, rslidar_sdk's QoS) and ``/diagnostics``.
"""

from __future__ import annotations

import array
import signal
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
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
from tf2_ros import Buffer, TransformException, TransformListener
from visualization_msgs.msg import MarkerArray

from acres_lidar_ros.config.schema import LIDAR_PARAM
from acres_lidar_ros.config.sensors import SensorConfig, load_sensor_config
from acres_lidar_ros.errors import AcresLidarError, PoseError
from acres_lidar_ros.outputs.layouts import point_cloud, stamps_sweep_start
from acres_lidar_ros.outputs.pointcloud2 import cloud_is_dense, point_fields, qos_profile_dict
from acres_lidar_ros.ros.params import (
    ParamDecl,
    by_name,
    check_changes,
    declarations,
    node_declarations,
    node_values,
    option_values,
    split_changes,
    startup_overrides,
)
from acres_lidar_ros.runtime.scheduler import (
    GIL_SWITCH_INTERVAL_S,
    Event,
    LogThrottle,
    PollResult,
    PoseTracker,
    ScanJob,
    ScanScheduler,
    SweepTracer,
    boxes_from_markers,
    diagnostic_status,
    mount_overrides,
)
from acres_lidar_ros.scan import Scanner, ScanOptions, freeze_startup_objects

POLL_PERIOD_S = 0.002
TF_POSE_PERIOD_S = 0.02
DIAGNOSTICS_PERIOD_S = 1.0
_PARAMETER_TYPE = {
    "bool": Parameter.Type.BOOL,
    "integer": Parameter.Type.INTEGER,
    "double": Parameter.Type.DOUBLE,
    "string": Parameter.Type.STRING,
    "double_array": Parameter.Type.DOUBLE_ARRAY,
}
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


class LidarNode(Node):
    """The simulated Helios: poses in, scheduled organised clouds out."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("lidar_node", **kwargs)
        self._throttle = LogThrottle(5.0)
        own = node_declarations()
        self._declare(own)
        self.settings = node_values({d.name: self._value(d.name) for d in own})
        config = load_sensor_config(self.settings["sensors"])
        self._decls = by_name(declarations(config))
        self._declare(d for d in self._decls.values() if d.group != "node")
        values = {name: self._value(name) for name in self._decls}
        self.config: SensorConfig = config.with_overrides(startup_overrides(values, config))
        self.scanner = Scanner(
            self.config, self._load_scene(option_values(values).get("seed", 0)), ScanOptions(**option_values(values))
        )
        self.get_logger().info("preparing the compiled kernels (a first run compiles them, about 10 s)")
        self.get_logger().info(f"kernels ready in {self.scanner.warm_up():.1f} s")
        freeze_startup_objects()  # no full garbage collection walks the start-up objects mid-scan
        self.sweeps = SweepTracer(self.scanner)  # one scan traced at a time, columns as poses arrive
        self._mount_from_tf = False
        self._mount_warned = False
        self._markers: list[Any] = []
        self._markers_lock = threading.Lock()
        self._last_diagnostics: dict[str, Any] | None = None

        s = self.settings
        self.tracker = PoseTracker(self.config.period_s, odom_frame=s["odom_frame"], base_frame=s["base_frame"])
        self.scheduler = ScanScheduler(
            self.config.period_s,
            self.config.delay_s,
            lambda: self.get_clock().now().nanoseconds,
            ts_first_point=stamps_sweep_start(s["point_type"], s["ts_first_point"]),
            pose_timeout_s=s["pose_timeout_s"],
            max_extrapolation_s=s["max_extrapolation_s"],
        )
        self._workers = ThreadPoolExecutor(max_workers=2, thread_name_prefix="lidar-trace")
        self._tf = Buffer()
        self._tf_listener = TransformListener(self._tf, self)
        self._cloud_pub = self.create_publisher(PointCloud2, s["topic"], cloud_qos(s["qos_depth"]))
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
        if not self.config.enabled:
            self.get_logger().warning("lidar.enabled is false in the sensors file: no clouds will be published")
        self.get_logger().info(
            f"{self.config.columns} x {self.config.rings} at {self.config.hz:g} Hz from {self.config.source}, "
            f"publishing {s['point_type']} on {s['topic']} in frame {self.config.frame_id!r}, "
            f"delay {self.config.delay_s * 1e3:.0f} ms, poses from {s['pose_source']}"
        )

    # -- set-up -------------------------------------------------------------------------------

    def _value(self, name: str) -> Any:
        try:
            return self.get_parameter(name).value
        except ParameterUninitializedException:  # a list key the sensors file leaves unset
            return None

    def _declare(self, decls) -> None:
        for d in decls:
            value = _PARAMETER_TYPE[d.type] if d.default is None else d.default
            self.declare_parameter(d.name, value, descriptor(d))

    def _load_scene(self, seed: int):
        if self.settings["scene"] not in ("", "default"):  # "default": the CLI's name of the built-in farm
            from acres_lidar_ros.scene import load_scene

            return load_scene(self.settings["scene"])
        from acres_lidar_ros.scene import build_default_farm

        return build_default_farm(seed)

    def close(self) -> None:
        self.scheduler.stop()
        self._workers.shutdown(wait=True, cancel_futures=True)

    # -- logging ------------------------------------------------------------------------------

    def _log(self, events: list[Event]) -> None:
        # One call site per severity: rclpy's logger keys its state by the caller's line and
        # raises "Logger severity cannot be changed between calls" if one line logs two severities.
        logger = self.get_logger()
        for e in events:
            if e.level == "debug":
                logger.debug(e.message)
            elif not self._throttle.allow(e.kind):
                continue
            elif e.level == "info":
                logger.info(e.message)
            elif e.level == "warn":
                logger.warning(e.message)
            else:
                logger.error(e.message)

    # -- inputs -------------------------------------------------------------------------------

    def _on_odom(self, msg: Odometry) -> None:
        p, q = msg.pose.pose.position, msg.pose.pose.orientation
        result = self.tracker.add(
            stamp_ns(msg.header.stamp), (p.x, p.y, p.z), (q.x, q.y, q.z, q.w), msg.header.frame_id, msg.child_frame_id
        )
        if result.kind != "accepted":
            self._log([Event(result.level, result.kind, result.message)])
            return
        self._on_poll()  # a scan this pose completes starts now, ahead of the pretraces
        self._pretrace()

    def _pretrace(self) -> None:
        """Trace, in a worker, the columns of the running and waiting sweeps the new pose covers."""
        newest_ns = self.tracker.newest_ns
        # A job whose sweep the poses now cover is about to start: its finish does the rest.
        targets = [
            (job.sweep_end_ns, job.index)
            for job in self.scheduler.jobs()
            if job.state == "waiting_pose" and newest_ns is not None and newest_ns < job.sweep_end_ns
        ]
        upcoming = self.scheduler.upcoming()
        if upcoming is not None:
            targets.append(upcoming)
        for sweep_end_ns, index in targets:
            try:
                poses = self.tracker.snapshot(sweep_end_ns)
            except PoseError:
                return
            if self.sweeps.request_pretrace(sweep_end_ns, index, poses):  # merged with older requests
                self._workers.submit(self.sweeps.drain_pretraces).add_done_callback(self._pretraces_done)

    def _pretraces_done(self, future: Future) -> None:
        """A failed pretrace loses nothing (the scan's finish traces those columns again and
        reports its own failure), but it is logged, throttled."""
        if future.cancelled() or future.exception() is None:
            return
        exc = future.exception()
        self._log(
            [
                Event(
                    "warn",
                    "pretrace_failed",
                    f"tracing a sweep ahead failed ({type(exc).__name__}: {exc}); "
                    "its scan traces those columns when it finishes",
                )
            ]
        )

    def _on_tf_pose(self) -> None:
        try:
            tf = self._tf.lookup_transform(self.settings["odom_frame"], self.settings["base_frame"], Time())
        except TransformException as exc:
            self._log(
                [
                    Event(
                        "warn",
                        "tf_pose",
                        f"no TF pose {self.settings['odom_frame']} -> {self.settings['base_frame']}: {exc}",
                    )
                ]
            )
            return
        t, q = tf.transform.translation, tf.transform.rotation
        result = self.tracker.add(stamp_ns(tf.header.stamp), (t.x, t.y, t.z), (q.x, q.y, q.z, q.w))
        if result.kind not in ("accepted", "duplicate"):
            self._log([Event(result.level, result.kind, result.message)])
        if result.kind == "accepted":
            self._pretrace()

    def _on_markers(self, msg: MarkerArray) -> None:
        with self._markers_lock:
            self._markers = list(msg.markers)

    def _lookup(self, target: str, source: str, at_ns: int | None):
        try:
            tf = self._tf.lookup_transform(target, source, Time() if at_ns is None else Time(nanoseconds=at_ns))
        except TransformException:
            return None
        t, q = tf.transform.translation, tf.transform.rotation
        return (t.x, t.y, t.z), (q.x, q.y, q.z, q.w)

    def _resolve_mount(self) -> None:
        """The mount base_frame -> lidar frame from TF (robot_state_publisher), once; else the
        sensors file's position_flu_m / rpy_deg with one warning."""
        if self._mount_from_tf:
            return
        found = self._lookup(self.settings["base_frame"], self.config.frame_id, None)
        if found is None:
            if not self._mount_warned:
                self._mount_warned = True
                self.get_logger().warning(
                    f"no TF {self.settings['base_frame']} -> {self.config.frame_id}: using the sensors file's "
                    f"position_flu_m {self.config.position_flu_m.tolist()} and rpy_deg "
                    f"{np.degrees(self.config.rpy_rad).round(3).tolist()}"
                )
            return
        self._mount_from_tf = True
        overrides = mount_overrides(*found, self.config.position_flu_m, self.config.rpy_rad)
        if overrides is not None:
            self.get_logger().info(f"mount from TF differs from the sensors file; using TF: {overrides}")
            self._rebuild(overrides)

    def _rebuild(self, overrides: dict[str, Any]) -> None:
        with self.sweeps.lock:
            if all(LIDAR_PARAM[key].runtime for key in overrides):  # keeps the noise streams going
                self.scanner.set_runtime_config(overrides)
                self.config = self.scanner.config
                return
            self.config = self.config.with_overrides(overrides)
            self.scanner = Scanner(self.config, options=self.scanner.options, tracer=self.scanner.tracer)
        self.sweeps.replace_scanner(self.scanner)

    # -- the cycle ----------------------------------------------------------------------------

    def _on_poll(self) -> None:
        if self.get_clock().now().nanoseconds == 0 or not self.config.enabled:
            return  # sim time before the first /clock
        result = self.scheduler.poll(self.tracker.newest_ns)
        if any(e.kind == "clock_jump_back" for e in result.events):
            self.tracker.clear()  # poses of the old timeline must not cover the new one's sweeps
        self._log(result.events)
        open_ends = [job.sweep_end_ns for job in self.scheduler.jobs()]
        upcoming = self.scheduler.upcoming()
        if open_ends or upcoming is not None:  # forget sweeps of dropped or failed scans
            self.sweeps.discard(min(open_ends) if open_ends else upcoming[0])
        for job in result.start:
            self._start(job)
        self._publish(result)

    def _start(self, job: ScanJob) -> None:
        self._resolve_mount()
        try:
            poses = self.tracker.snapshot(job.sweep_end_ns, extrapolate=job.extrapolated)
        except PoseError as exc:  # the history was cleared between the poll and now
            self._log(self.scheduler.trace_failed(job, str(exc)).events)
            return
        with self._markers_lock:
            markers = list(self._markers)
        boxes, events = boxes_from_markers(
            markers, lambda frame: self._lookup(self.settings["odom_frame"], frame, job.sweep_end_ns)
        )
        self._log(events)
        future = self._workers.submit(self._trace, job, poses, boxes)
        future.add_done_callback(lambda f: self._finished(job, f))

    def _trace(self, job: ScanJob, poses, boxes) -> tuple[PointCloud2, float]:
        started = time.perf_counter()
        scan = self.sweeps.finish(job, poses, boxes)
        frame_id = scan.frame_id
        wall_s = time.perf_counter() - started
        cloud = point_cloud(scan, self.settings["point_type"], job.stamp_ns)
        return cloud_message(cloud, frame_id, job.stamp_ns), wall_s

    def _finished(self, job: ScanJob, future: Future) -> None:
        if future.cancelled():  # shutting down
            return
        exc = future.exception()
        if exc is not None:
            result = self.scheduler.trace_failed(job, f"{type(exc).__name__}: {exc}")
        else:
            message, wall_s = future.result()
            result = self.scheduler.trace_done(job, message, wall_s)
        self._log(result.events)
        self._publish(result)

    def _publish(self, result: PollResult) -> None:
        for job in result.publish:
            # A worker can finish after Ctrl-C has shut the context down (close() waits for it):
            # nothing more goes out then, and that is not an error.
            if not self.context.ok():
                return
            try:
                self._cloud_pub.publish(job.result)
            except Exception:
                if self.context.ok():
                    raise
                return
            job.result = None

    def _on_diagnostics(self) -> None:
        current = self.scheduler.diagnostics(DIAGNOSTICS_PERIOD_S)
        level, message, values = diagnostic_status(current, self._last_diagnostics)
        self._last_diagnostics = current
        status = DiagnosticStatus(
            level=_DIAGNOSTIC_LEVEL[level],
            name="lidar_node: simulated lidar",
            message=message,
            hardware_id=f"acres_lidar_sim:{self.config.frame_id}",
            values=[KeyValue(key=k, value=v) for k, v in values],
        )
        header = Header(stamp=self.get_clock().now().to_msg(), frame_id="")
        self._diag_pub.publish(DiagnosticArray(header=header, status=[status]))

    # -- runtime parameters --------------------------------------------------------------------

    def _on_set_parameters(self, params: list[Parameter]) -> SetParametersResult:
        changes = {p.name: p.value for p in params if p.name in self._decls}  # use_sim_time etc.: rclpy's
        ok, reason = check_changes(changes, self._decls, self.config)
        if not ok:
            self.get_logger().warning(f"parameter change refused: {reason}")
            return SetParametersResult(successful=False, reason=reason)
        lidar, options = split_changes(changes, self._decls)
        if lidar:
            self._rebuild(lidar)
        if options:
            with self.sweeps.lock:
                self.scanner.set_options(**options)
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
