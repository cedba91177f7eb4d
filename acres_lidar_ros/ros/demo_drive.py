"""``demo_drive``: the built-in farm's tour as an odometry source, so ``ros2 launch ... demo:=true``
shows scans in RViz with nothing else running.

Publishes ``/odom`` (nav_msgs/Odometry, odom -> base_footprint, twist in base_footprint), ``/tf``
(odom -> base_footprint) at ``rate_hz``, and with ``publish_clock`` also ``/clock`` at ``clock_hz``
(then the stamps are that simulated time, which runs ``time_scale`` times the wall clock; start
the other nodes with ``use_sim_time:=true``). The tour loops; at the loop the vehicle jumps back
to the start (the stamps keep increasing).

With ``imu`` (an IMU file, ``default``: the shipped ``config/imu.json``; empty: none) it also
publishes sensor_msgs/Imu on the file's topic at its rate (``sensor.imu``, from the same tour
samples as ``/odom``, noise from ``seed``, the farm's): sample ``k`` is stamped ``k / rate_hz`` after the
drive's start on the same clock as ``/odom`` and the scans, and the mount base_footprint ->
imu frame goes on ``/tf_static`` where tf2_ros is installed.

``TourDrive`` is the ROS-free part; rclpy is imported only by ``main`` (``node.py`` is the one
module that imports it at import time).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.spatial.transform import Rotation

from acres_lidar_ros.errors import PoseError
from acres_lidar_ros.sensor.poses import PoseHistory

DIFFERENCE_STEP_S = 0.01


class TourDrive:
    """Pose and twist of base_footprint along a trajectory that loops.

    Parameters
    ----------
    times_s : (n,) float64, increasing
    positions_m : (n, 3) float64, odom frame
    quaternions_xyzw : (n, 4) float64
    """

    def __init__(self, times_s: np.ndarray, positions_m: np.ndarray, quaternions_xyzw: np.ndarray) -> None:
        self.history = PoseHistory.from_arrays(times_s, positions_m, quaternions_xyzw, where="demo tour")
        self.duration_s = self.history.end_s - self.history.start_s
        if not self.duration_s > 2 * DIFFERENCE_STEP_S:
            raise PoseError(f"demo tour lasts {self.duration_s!r} s: expected more than {2 * DIFFERENCE_STEP_S} s")

    def tour_time_s(self, elapsed_s: float) -> float:
        """Time on the tour after ``elapsed_s`` of driving (looping)."""
        return self.history.start_s + float(np.mod(elapsed_s, self.duration_s))

    def sample(self, elapsed_s: float) -> dict[str, np.ndarray]:
        """``position_m`` (3,), ``quaternion_xyzw`` (4,), ``linear_mps`` (3,) and ``angular_radps``
        (3,) after ``elapsed_s``; the velocities are central differences in base_footprint (the
        frame of nav_msgs/Odometry's twist)."""
        t = self.tour_time_s(elapsed_s)
        h = DIFFERENCE_STEP_S
        tc = float(np.clip(t, self.history.start_s + h, self.history.end_s - h))
        positions, rotations = self.history.interpolate(np.array([t, tc - h, tc + h]))
        R = rotations[0]
        linear_world = (positions[2] - positions[1]) / (2 * h)
        turn = Rotation.from_matrix(rotations[1].T @ rotations[2]).as_rotvec() / (2 * h)
        return {
            "position_m": positions[0],
            "quaternion_xyzw": Rotation.from_matrix(R).as_quat(),
            "linear_mps": R.T @ linear_world,
            "angular_radps": turn,
        }


def tour_imu(drive: TourDrive, imu: str, seed: int) -> tuple[Any, Any]:
    """The IMU file's config and the samples of one loop of the tour (``sensor.imu``)."""
    from acres_lidar_ros.config.imu_file import load_imu_config
    from acres_lidar_ros.sensor.imu import imu_of_drive

    config = load_imu_config(imu)
    h = drive.history
    positions, rotations = h.interpolate(h.times_s)
    quaternions_xyzw = Rotation.from_matrix(rotations).as_quat()
    return config, imu_of_drive(config, h.times_s - h.start_s, positions, quaternions_xyzw, seed)


def tour_of_builtin_farm(seed: int = 0) -> TourDrive:
    from acres_lidar_ros.scene.farm_v1 import build_default_farm
    from acres_lidar_ros.scene.tour import default_tour

    return TourDrive(*default_tour(build_default_farm(seed)))


def _wire(node: Any, drive: TourDrive) -> None:
    """Publishers and timers of the demo on an rclpy node."""
    from geometry_msgs.msg import TransformStamped
    from nav_msgs.msg import Odometry
    from rclpy.time import Time
    from rosgraph_msgs.msg import Clock

    try:
        from tf2_ros import TransformBroadcaster
    except ImportError:  # the ROS 2 wheels from PyPI do not ship tf2_ros: odometry (and /clock) only
        TransformBroadcaster = None

    p = {
        name: node.declare_parameter(name, default).value
        for name, default in (
            ("rate_hz", 50.0),
            ("publish_clock", False),
            ("clock_hz", 500.0),
            ("time_scale", 1.0),
            ("odom_frame", "odom"),
            ("base_frame", "base_footprint"),
            ("odom_topic", "/odom"),
            ("imu", "default"),
        )
    }
    odom_pub = node.create_publisher(Odometry, p["odom_topic"], 50)
    tf_broadcaster = None if TransformBroadcaster is None else TransformBroadcaster(node)
    if tf_broadcaster is None:
        node.get_logger().warning("tf2_ros is not installed: publishing odometry without TF")
    wall_start_ns = node.get_clock().now().nanoseconds
    sim = {"start_ns": wall_start_ns}

    def now_ns() -> int:
        wall = node.get_clock().now().nanoseconds
        if not p["publish_clock"]:
            return wall
        return int((wall - wall_start_ns) * p["time_scale"])  # simulated time starts at 0

    if p["publish_clock"]:
        clock_pub = node.create_publisher(Clock, "/clock", 10)
        sim["start_ns"] = 0
        node.create_timer(
            1.0 / p["clock_hz"], lambda: clock_pub.publish(Clock(clock=Time(nanoseconds=now_ns()).to_msg()))
        )

    def publish_pose() -> None:
        stamp_ns = now_ns()
        s = drive.sample((stamp_ns - sim["start_ns"]) * 1e-9)
        stamp = Time(nanoseconds=stamp_ns).to_msg()
        odom = Odometry()
        odom.header.stamp, odom.header.frame_id, odom.child_frame_id = stamp, p["odom_frame"], p["base_frame"]
        pos, q = s["position_m"], s["quaternion_xyzw"]
        odom.pose.pose.position.x, odom.pose.pose.position.y, odom.pose.pose.position.z = (float(v) for v in pos)
        o = odom.pose.pose.orientation
        o.x, o.y, o.z, o.w = (float(v) for v in q)
        lin, ang = odom.twist.twist.linear, odom.twist.twist.angular
        lin.x, lin.y, lin.z = (float(v) for v in s["linear_mps"])
        ang.x, ang.y, ang.z = (float(v) for v in s["angular_radps"])
        odom_pub.publish(odom)
        if tf_broadcaster is None:
            return
        tf = TransformStamped()
        tf.header.stamp, tf.header.frame_id, tf.child_frame_id = stamp, p["odom_frame"], p["base_frame"]
        t, r = tf.transform.translation, tf.transform.rotation
        t.x, t.y, t.z = (float(v) for v in pos)
        r.x, r.y, r.z, r.w = (float(v) for v in q)
        tf_broadcaster.sendTransform(tf)

    node.create_timer(1.0 / p["rate_hz"], publish_pose)
    imu_note = _wire_imu(node, drive, p, now_ns, sim) if p["imu"] else ""
    node.get_logger().info(
        f"driving the built-in tour ({drive.duration_s:.0f} s, looping): {p['odom_topic']}"
        + ("" if tf_broadcaster is None else f" and TF {p['odom_frame']} -> {p['base_frame']}")
        + f" at {p['rate_hz']:g} Hz"
        + (f", /clock at {p['clock_hz']:g} Hz x{p['time_scale']:g}" if p["publish_clock"] else "")
        + imu_note
    )


def _wire_imu(node: Any, drive: TourDrive, p: dict, now_ns: Any, sim: dict) -> str:
    """The IMU's publisher, its static mount and its timer; returns the start-up log's note."""
    from geometry_msgs.msg import TransformStamped
    from rclpy.time import Time
    from sensor_msgs.msg import Imu

    from acres_lidar_ros.sensor.pattern import mount_rotation

    config, samples = tour_imu(drive, p["imu"], int(node.get_parameter("seed").value))  # the farm's seed
    publisher = node.create_publisher(Imu, config.topic, 400)
    try:
        from tf2_ros import StaticTransformBroadcaster
    except ImportError:
        StaticTransformBroadcaster = None
    if StaticTransformBroadcaster is not None:
        mount = TransformStamped()
        mount.header.stamp = Time(nanoseconds=now_ns()).to_msg()
        mount.header.frame_id, mount.child_frame_id = p["base_frame"], config.frame_id
        t, r = mount.transform.translation, mount.transform.rotation
        t.x, t.y, t.z = (float(v) for v in config.position_flu_m)
        r.x, r.y, r.z, r.w = (float(v) for v in Rotation.from_matrix(mount_rotation(config.rpy_rad)).as_quat())
        node._imu_static = StaticTransformBroadcaster(node)  # kept alive with the node
        node._imu_static.sendTransform(mount)
    n = len(samples.times_s)
    period_ns = 1e9 / config.rate_hz
    state: dict[str, int | None] = {"k": None}

    def publish_imu() -> None:
        elapsed_ns = now_ns() - sim["start_ns"]
        if elapsed_ns < 0:
            return
        last = int(elapsed_ns // period_ns)
        first = last if state["k"] is None else max(state["k"], last - int(config.rate_hz))  # at most 1 s behind
        for k in range(first, last + 1):  # every sample due since the last call, each at its own stamp
            i = k % n
            msg = Imu()
            msg.header.stamp = Time(nanoseconds=sim["start_ns"] + int(round(k * period_ns))).to_msg()
            msg.header.frame_id = config.frame_id
            o = msg.orientation
            o.x, o.y, o.z, o.w = (float(v) for v in samples.orientation_xyzw[i])
            w, a = msg.angular_velocity, msg.linear_acceleration
            w.x, w.y, w.z = (float(v) for v in samples.angular_velocity_rad_s[i])
            a.x, a.y, a.z = (float(v) for v in samples.linear_acceleration_m_s2[i])
            publisher.publish(msg)
        state["k"] = last + 1

    node.create_timer(1.0 / config.rate_hz, publish_imu)
    return f", {config.topic} ({config.frame_id}) at {config.rate_hz:g} Hz"


def main(args: list[str] | None = None) -> None:
    import signal

    import rclpy
    from rclpy.executors import ExternalShutdownException

    rclpy.init(args=args)
    node = None
    try:
        node = rclpy.create_node("demo_drive")
        seed = node.declare_parameter("seed", 0).value
        _wire(node, tour_of_builtin_farm(seed))
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except RuntimeError:  # rclpy's RCLError "context is not valid": SIGINT raced the executor
        if rclpy.ok():
            raise
    finally:
        # Ctrl-C under ros2 launch sends SIGINT twice; the second must not interrupt the clean-up.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    main()
