"""``record`` with an IMU: sensor_msgs/Imu in the bag, read back with rosbags' reader, stamped on
the scans' clock, at the IMU file's rate, with the mount on /tf_static and the motion of the drive."""

from __future__ import annotations

import json

import numpy as np
import pytest
from rosbags.highlevel import AnyReader
from scipy.spatial.transform import Rotation

from acres_lidar_ros.apps.cmd_record import record_drive
from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.scan.scan_types import ScanOptions
from acres_lidar_ros.scan.scanner import Scanner
from acres_lidar_ros.scene.builder import SceneBuilder
from acres_lidar_ros.scene.grids import TerrainGrid
from acres_lidar_ros.sensor.poses import PoseHistory
from acres_lidar_ros.tracing.trace import Tracer

YAW_RATE = 0.2  # rad/s: a turn on the spot


def scanner():
    config = load_sensor_config("polaris").with_overrides({"columns": 180})
    tracer = Tracer(SceneBuilder(TerrainGrid(np.array([-300.0, -300.0]), 600.0, np.zeros((2, 2)))).build())
    return Scanner(config, tracer=tracer, options=ScanOptions(self_returns=False, seed=4))


def turning_drive(duration_s=1.0):
    t = np.arange(0.0, duration_s + 1e-9, 0.01)
    q = Rotation.from_euler("z", YAW_RATE * t[:, None]).as_quat()
    return PoseHistory.from_arrays(t, np.zeros((len(t), 3)), q)


def read_bag(path):
    imu, static, clouds = [], [], []
    with AnyReader([path]) as reader:
        for connection, timestamp, raw in reader.messages():
            msg = reader.deserialize(raw, connection.msgtype)
            if connection.topic == "/imu/data":
                assert connection.msgtype == "sensor_msgs/msg/Imu"
                imu.append((timestamp, msg))
            elif connection.topic == "/tf_static":
                static.append(msg)
            elif connection.topic == "/lidar/points":
                clouds.append(msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec)
    return imu, static, clouds


def test_record_writes_the_imu_of_the_drive_on_the_scans_clock(tmp_path):
    imu_file = tmp_path / "imu.json"
    imu_file.write_text(json.dumps({"rate_hz": 250.0, "noise": False, "position_flu_m": [1.0, 0.0, 0.5]}))
    record_drive(scanner(), turning_drive(), tmp_path / "run", files="none", imu=str(imu_file))
    imu, static, clouds = read_bag(tmp_path / "run" / "bag")
    stamps = [m.header.stamp.sec * 10**9 + m.header.stamp.nanosec for _, m in imu]
    assert stamps == [k * 4_000_000 for k in range(251)]  # k / 250 Hz over 0 .. 1 s
    assert [t for t, _ in imu] == stamps  # received at their stamps
    assert clouds and all(c % 4_000_000 == 0 for c in clouds)  # scans at 0.1 s steps: on the same clock
    assert {m.header.frame_id for _, m in imu} == {"imu_link"}
    inner = imu[25:-25]
    gyro = np.array([[m.angular_velocity.x, m.angular_velocity.y, m.angular_velocity.z] for _, m in inner])
    accel = np.array([[m.linear_acceleration.x, m.linear_acceleration.y, m.linear_acceleration.z] for _, m in inner])
    np.testing.assert_allclose(gyro, [[0.0, 0.0, YAW_RATE]] * len(inner), atol=1e-6)
    # The IMU 1 m ahead of the turn's axis feels the centripetal -w^2 r along x, and gravity's reaction up.
    np.testing.assert_allclose(accel, [[-(YAW_RATE**2) * 1.0, 0.0, 9.80665]] * len(inner), atol=1e-5)
    t_s = np.array([t for t, _ in inner]) * 1e-9
    yaw = np.array(
        [
            Rotation.from_quat([m.orientation.x, m.orientation.y, m.orientation.z, m.orientation.w]).as_euler("xyz")[2]
            for _, m in inner
        ]
    )
    np.testing.assert_allclose(yaw, YAW_RATE * t_s, atol=1e-9)
    (tf,) = static  # one message with both mounts (transient local, depth 1)
    frames = {t.child_frame_id: t for t in tf.transforms}
    assert set(frames) == {"lidar", "imu_link"}
    imu_tf = frames["imu_link"].transform.translation
    assert (imu_tf.x, imu_tf.y, imu_tf.z) == (1.0, 0.0, 0.5)


def test_the_imu_noise_follows_the_seed_and_a_bad_imu_file_writes_nothing(tmp_path):
    runs = []
    for name in ("a", "b"):
        record_drive(scanner(), turning_drive(0.3), tmp_path / name, files="none", imu="default")
        imu, _, _ = read_bag(tmp_path / name / "bag")
        runs.append(np.array([[m.angular_velocity.z, m.linear_acceleration.x] for _, m in imu]))
    assert len(runs[0]) == 61  # the shipped file: 200 Hz
    np.testing.assert_array_equal(runs[0], runs[1])  # same seed, same samples
    assert np.abs(runs[0][:, 0] - YAW_RATE).max() > 1e-4  # with the shipped noise
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"rate_hz": 1000}))
    with pytest.raises(ConfigError, match=r"rate_hz = 1000: expected a number >= 100 and <= 400"):
        record_drive(scanner(), turning_drive(0.3), tmp_path / "c", files="none", imu=str(bad))
    assert not (tmp_path / "c").exists()
