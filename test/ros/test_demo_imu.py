"""demo_drive's IMU: the samples of the tour (ROS-free), and /imu/data from the real executable's
wiring on rclpy (skipped where rclpy is absent)."""

from __future__ import annotations

import json
import math
import time

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from acres_lidar_ros.ros.demo_drive import TourDrive, tour_imu

SPEED, RADIUS = 5.0, 20.0


def circle_drive(duration_s=20.0) -> TourDrive:
    t = np.linspace(0.0, duration_s, 2001)
    heading = SPEED / RADIUS * t
    positions = np.column_stack([RADIUS * np.sin(heading), RADIUS * (1 - np.cos(heading)), np.zeros_like(t)])
    return TourDrive(t, positions, Rotation.from_euler("z", heading[:, None]).as_quat())


def test_the_tour_imu_reads_the_turn_at_its_mount(tmp_path):
    imu_file = tmp_path / "imu.json"
    imu_file.write_text(json.dumps({"noise": False, "rate_hz": 100.0, "position_flu_m": [2.5, 0.0, 0.5]}))
    config, samples = tour_imu(circle_drive(), str(imu_file), seed=0)
    assert samples.times_s[0] == 0.0 and samples.times_s[1] == 0.01 and len(samples.times_s) == 2001
    w = SPEED / RADIUS
    inner = slice(100, -100)
    np.testing.assert_allclose(samples.angular_velocity_rad_s[inner], [[0, 0, w]] * 1801, atol=1e-6)
    # base_footprint accelerates v^2 / r towards the centre (+y, left); the IMU 2.5 m ahead adds -w^2 2.5 along x.
    expected = [-(w**2) * 2.5, SPEED**2 / RADIUS, 9.80665]
    np.testing.assert_allclose(samples.linear_acceleration_m_s2[inner], [expected] * 1801, atol=1e-4)


def test_demo_drive_publishes_imu_on_the_odometry_clock():
    rclpy = pytest.importorskip("rclpy", reason="rclpy is not installed (requirements-ros.txt)")
    from sensor_msgs.msg import Imu

    from acres_lidar_ros.ros.demo_drive import _wire

    rclpy.init()
    try:
        node = rclpy.create_node("demo_drive_imu_test")
        node.declare_parameter("seed", 0)
        _wire(node, circle_drive())
        listener = rclpy.create_node("imu_listener")
        got: list = []
        listener.create_subscription(Imu, "/imu/data", got.append, 400)
        executor = rclpy.executors.SingleThreadedExecutor()
        executor.add_node(node)
        executor.add_node(listener)
        deadline = time.monotonic() + 10.0
        while len(got) < 60 and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.05)
        executor.shutdown()
        node.destroy_node()
        listener.destroy_node()
    finally:
        rclpy.try_shutdown()
    assert len(got) >= 60, f"{len(got)} IMU messages in 10 s"
    stamps = np.array([m.header.stamp.sec * 10**9 + m.header.stamp.nanosec for m in got])
    steps = np.diff(stamps)
    assert (steps == 5_000_000).mean() > 0.9  # 200 Hz: each sample stamped k / 200 Hz after the start
    assert {m.header.frame_id for m in got} == {"imu_link"}
    az = np.array([m.angular_velocity.z for m in got])
    assert math.isclose(float(np.median(az)), SPEED / RADIUS, abs_tol=0.02)  # the turn, with the shipped noise
