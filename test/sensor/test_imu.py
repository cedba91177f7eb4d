"""The IMU from a trajectory: exact readings of simple motions, strapdown integration back to the
trajectory, and the noise model recovered by the Allan deviation of a static recording.

The strapdown integrator and the Allan deviation below are written here from their textbook
definitions (midpoint rotation update, trapezoidal velocity and position; overlapping Allan
variance from the integrated signal), not taken from the package.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from acres_lidar_ros.config.imu_file import imu_config, load_imu_config
from acres_lidar_ros.errors import ConfigError, PoseError
from acres_lidar_ros.sensor.imu import GRAVITY_MPS2, NOISE_FREE, ImuNoise, ideal_imu, lidar_imu_extrinsics, noisy_imu


def analytic_drive(duration_s=20.0, rate_hz=100.0):
    """A vehicle on a 25 m circle at 5 m/s, heading along it, rolling, pitching and bobbing gently."""
    t = np.arange(0.0, duration_s + 1e-9, 1.0 / rate_hz)
    w = 5.0 / 25.0
    p = np.stack([25.0 * np.sin(w * t), 25.0 * (1.0 - np.cos(w * t)), 0.1 * np.sin(3.0 * t)], axis=1)
    rpy = np.stack([0.05 * np.sin(2.0 * t), 0.03 * np.sin(1.3 * t), w * t], axis=1)
    q = Rotation.from_euler("xyz", rpy).as_quat()  # extrinsic x, y, z: R = Rz Ry Rx
    return t, p, q


def strapdown(times_s, omega, f, R0, v0, p0, gravity=GRAVITY_MPS2):
    """Integrate body rates and specific forces: orientation, velocity, position in the world."""
    g = np.array([0.0, 0.0, -gravity])
    n = len(times_s)
    R = np.empty((n, 3, 3))
    v = np.empty((n, 3))
    p = np.empty((n, 3))
    R[0], v[0], p[0] = R0, v0, p0
    for k in range(n - 1):
        dt = times_s[k + 1] - times_s[k]
        R[k + 1] = R[k] @ Rotation.from_rotvec(0.5 * (omega[k] + omega[k + 1]) * dt).as_matrix()
        a0, a1 = R[k] @ f[k] + g, R[k + 1] @ f[k + 1] + g
        v[k + 1] = v[k] + 0.5 * (a0 + a1) * dt
        p[k + 1] = p[k] + v[k] * dt + (2.0 * a0 + a1) / 6.0 * dt * dt
    return R, v, p


def test_at_rest_a_level_imu_reads_gravity_up_and_a_tilted_one_reads_it_along_its_axes():
    t = np.arange(0.0, 1.0, 0.01)
    p = np.zeros((len(t), 3))
    q = np.tile([0.0, 0.0, 0.0, 1.0], (len(t), 1))
    level = ideal_imu(t, p, q, 200.0)
    assert len(level.times_s) == 199 and level.times_s[1] == 1.0 / 200.0
    np.testing.assert_allclose(level.angular_velocity_rad_s, 0.0, atol=1e-12)
    np.testing.assert_allclose(level.linear_acceleration_m_s2, [[0.0, 0.0, GRAVITY_MPS2]] * 199, atol=1e-9)
    # Rolled +90 deg about x: the IMU's y axis is the base's z (up), so f_imu = R_bi^T (0, 0, g) = (0, g, 0).
    rolled = ideal_imu(t, p, q, 200.0, rpy_rad=(math.pi / 2, 0.0, 0.0))
    np.testing.assert_allclose(rolled.linear_acceleration_m_s2[0], [0.0, GRAVITY_MPS2, 0.0], atol=1e-9)
    np.testing.assert_allclose(
        Rotation.from_quat(rolled.orientation_xyzw[0]).as_matrix(),
        Rotation.from_euler("x", 90, degrees=True).as_matrix(),
        atol=1e-12,
    )


def test_a_turn_on_the_spot_gives_the_yaw_rate_and_the_centripetal_acceleration_of_the_lever_arm():
    rate = 0.5  # rad/s about z
    t = np.arange(0.0, 4.0, 0.01)
    q = Rotation.from_euler("z", rate * t[:, None]).as_quat()
    imu = ideal_imu(t, np.zeros((len(t), 3)), q, 100.0, position_flu_m=(2.0, 0.0, 0.0))
    inner = slice(50, -50)  # away from the spline's ends
    np.testing.assert_allclose(imu.angular_velocity_rad_s[inner], [[0.0, 0.0, rate]] * len(t[inner]), atol=1e-6)
    centripetal = -(rate**2) * 2.0  # towards the axis, along -x of the base (and the IMU)
    np.testing.assert_allclose(
        imu.linear_acceleration_m_s2[inner], [[centripetal, 0.0, GRAVITY_MPS2]] * len(t[inner]), atol=1e-5
    )


def test_strapdown_integration_of_the_noise_free_imu_reproduces_the_trajectory():
    """Error budget over 20 s at 200 Hz (100 m driven, a lever arm and a tilted mount): position 1 cm,
    orientation 0.001 deg (measured: 2.5 mm, 0.0001 deg; most of it is the 100 Hz samples' spline
    against the analytic drive)."""
    t, p, q = analytic_drive()
    mount_position = np.array([1.2, -0.3, 0.8])
    mount_rpy = np.array([0.0, 0.1, 0.05])
    imu = ideal_imu(t, p, q, 200.0, position_flu_m=mount_position, rpy_rad=mount_rpy)
    R_bi = Rotation.from_euler("xyz", mount_rpy).as_matrix()
    # Truth at the IMU's stamps, from the analytic drive (not from the samples the IMU was made from).
    ts = imu.times_s
    w = 5.0 / 25.0
    p_b = np.stack([25.0 * np.sin(w * ts), 25.0 * (1.0 - np.cos(w * ts)), 0.1 * np.sin(3.0 * ts)], axis=1)
    v_b = np.stack([5.0 * np.cos(w * ts), 5.0 * np.sin(w * ts), 0.3 * np.cos(3.0 * ts)], axis=1)
    R_wb = Rotation.from_euler("xyz", np.stack([0.05 * np.sin(2 * ts), 0.03 * np.sin(1.3 * ts), w * ts], 1)).as_matrix()
    R_wi = R_wb @ R_bi
    p_i = p_b + R_wb @ mount_position
    h = 1e-6  # the lever arm's velocity by a central difference of the analytic pose
    Rp = Rotation.from_euler("xyz", [0.05 * np.sin(2 * (ts[0] + h)), 0.03 * np.sin(1.3 * (ts[0] + h)), w * (ts[0] + h)])
    Rm = Rotation.from_euler("xyz", [0.05 * np.sin(2 * (ts[0] - h)), 0.03 * np.sin(1.3 * (ts[0] - h)), w * (ts[0] - h)])
    v0 = v_b[0] + (Rp.as_matrix() - Rm.as_matrix()) @ mount_position / (2 * h)
    R, v, pos = strapdown(ts, imu.angular_velocity_rad_s, imu.linear_acceleration_m_s2, R_wi[0], v0, p_i[0])
    position_error_m = np.linalg.norm(pos - p_i, axis=1).max()
    angle_error_deg = np.degrees(
        np.linalg.norm(Rotation.from_matrix(np.transpose(R, (0, 2, 1)) @ R_wi).as_rotvec(), axis=1).max()
    )
    assert position_error_m < 0.01, position_error_m
    assert angle_error_deg < 0.001, angle_error_deg
    np.testing.assert_allclose(Rotation.from_quat(imu.orientation_xyzw).as_matrix(), R_wi, atol=1e-5)


def allan_variance(y, rate_hz, m_values):
    """Overlapping Allan variance of the rate samples ``y`` (n, axes) at cluster sizes ``m``."""
    dt = 1.0 / rate_hz
    theta = np.concatenate([np.zeros((1, y.shape[1])), np.cumsum(y, axis=0) * dt])
    out = []
    for m in m_values:
        tau = m * dt
        d = theta[2 * m :] - 2.0 * theta[m:-m] + theta[: -2 * m]
        out.append((d * d).mean(axis=0) / (2.0 * tau * tau))
    return np.array(m_values) * dt, np.array(out)


def fit_white_and_walk(tau, avar):
    """Least squares of AVAR(tau) = N^2 / tau + K^2 tau / 3, relative weights; returns (N, K)."""
    A = np.stack([1.0 / tau, tau / 3.0], axis=1) / avar[:, None]
    coef = np.linalg.lstsq(A, np.ones_like(avar), rcond=None)[0]
    return math.sqrt(coef[0]), math.sqrt(coef[1])


def test_the_allan_deviation_of_a_static_recording_recovers_the_configured_noise():
    """One hour at rest, 100 Hz: the densities and walks fitted to the Allan variance over
    tau = 0.1 s .. 36 s (1/100 of the recording) are within 10 % of the configured ones.

    The walks are set high enough that the white noise and the walk cross at about 2 s: the walk
    is then seen over a hundred clusters at the longest tau. (The shipped IMU's cross at about
    100 s and need days of recording for the same precision.)"""
    rate = 100.0
    noise = ImuNoise(1.0e-3, 1.0e-3, 2.0e-3, 2.0e-3)
    duration_s = 3600.0
    t = np.linspace(0.0, duration_s, 4)
    rest = ideal_imu(t, np.zeros((4, 3)), np.tile([0.0, 0.0, 0.0, 1.0], (4, 1)), rate)
    imu = noisy_imu(rest, noise, rate, seed=7)
    m_values = np.unique(np.logspace(1, math.log10(duration_s * rate / 100), 30).astype(int))
    for y, expected in (
        (imu.angular_velocity_rad_s, (noise.gyroscope_noise_density, noise.gyroscope_random_walk)),
        (
            imu.linear_acceleration_m_s2 - [0.0, 0.0, GRAVITY_MPS2],
            (noise.accelerometer_noise_density, noise.accelerometer_random_walk),
        ),
    ):
        tau, avar = allan_variance(y, rate, m_values)
        for axis in range(3):
            density, walk = fit_white_and_walk(tau, avar[:, axis])
            assert density == pytest.approx(expected[0], rel=0.10), (axis, density, expected)
            assert walk == pytest.approx(expected[1], rel=0.10), (axis, walk, expected)
    # Without the walk, the fitted walk is nothing and the white noise alone remains.
    white = noisy_imu(rest, ImuNoise(1.0e-3, 0.0, 2.0e-3, 0.0), rate, seed=7)
    tau, avar = allan_variance(white.angular_velocity_rad_s, rate, m_values)
    density, walk = fit_white_and_walk(tau, avar[:, 0])
    assert density == pytest.approx(1.0e-3, rel=0.05) and walk < 1e-4


def test_the_noise_is_deterministic_per_seed_and_off_without_densities():
    t, p, q = analytic_drive(2.0)
    ideal = ideal_imu(t, p, q, 200.0)
    noise = ImuNoise(1e-3, 1e-4, 2e-3, 1e-4)
    a, b, c = (noisy_imu(ideal, noise, 200.0, seed) for seed in (1, 1, 2))
    assert a.angular_velocity_rad_s.tobytes() == b.angular_velocity_rad_s.tobytes()
    assert a.linear_acceleration_m_s2.tobytes() == b.linear_acceleration_m_s2.tobytes()
    assert not np.array_equal(a.angular_velocity_rad_s, c.angular_velocity_rad_s)
    clean = noisy_imu(ideal, NOISE_FREE, 200.0, 1)
    np.testing.assert_array_equal(clean.angular_velocity_rad_s, ideal.angular_velocity_rad_s)
    assert a.gyroscope_bias_rad_s[0].tolist() == [0.0, 0.0, 0.0]  # b_0 = 0


def test_bad_imu_settings_and_trajectories_are_refused_with_the_key():
    with pytest.raises(ConfigError, match=r"rate_hz = 50.0: expected a number >= 100 and <= 400"):
        imu_config({"rate_hz": 50.0})
    with pytest.raises(ConfigError, match=r"unknown key 'rate'; allowed: rate_hz"):
        imu_config({"rate": 200})
    with pytest.raises(ConfigError, match=r"position_flu_m = \[0, 0\]: expected 3 numbers"):
        imu_config({"position_flu_m": [0, 0]})
    with pytest.raises(ConfigError, match=r"topic = 'imu': expected a topic name starting with /"):
        imu_config({"topic": "imu"})
    with pytest.raises(ConfigError, match=r"gyroscope_noise_density = -1: expected a number >= 0"):
        ImuNoise(-1, 0.0, 0.0, 0.0)
    with pytest.raises(PoseError, match="increasing"):
        ideal_imu(np.array([0.0, 1.0, 1.0, 2.0]), np.zeros((4, 3)), np.tile([0, 0, 0, 1.0], (4, 1)), 200.0)
    assert imu_config({}).rate_hz == load_imu_config().rate_hz == 200.0


def test_the_lidar_imu_extrinsics_compose_to_the_mounts():
    def T(position, rpy):
        out = np.eye(4)
        out[:3, :3] = Rotation.from_euler("xyz", rpy).as_matrix()
        out[:3, 3] = position
        return out

    lidar = ([2.5, 0.0, 2.039], np.deg2rad([-1.518, 5.317, 0.0]))
    imu = ([1.0, 0.2, 0.5], np.deg2rad([0.0, 0.0, 90.0]))
    e = lidar_imu_extrinsics(*lidar, *imu)
    T_li = np.eye(4)
    T_li[:3, :3], T_li[:3, 3] = e["R_lidar_imu"], e["t_lidar_imu_m"]
    np.testing.assert_allclose(T(*lidar) @ T_li, T(*imu), atol=1e-12)  # base <- lidar <- imu = base <- imu
    T_il = np.eye(4)
    T_il[:3, :3], T_il[:3, 3] = e["R_imu_lidar"], e["t_imu_lidar_m"]
    np.testing.assert_allclose(T_il @ T_li, np.eye(4), atol=1e-12)
