"""An IMU on the vehicle, from the same base trajectory the LiDAR sees.

Motion
------
The base_footprint trajectory (the odometry the LiDAR is traced from: times, positions,
rotations) is made twice differentiable by a cubic spline through its positions and scipy's
``RotationSpline`` through its rotations; both pass through every sample, so they differ from the
LiDAR's linear interpolation between samples by far less than a millimetre at 100 Hz. An IMU
mounted at ``T_base_imu`` (``position_flu_m``, ``rpy_deg`` as the LiDAR's mount) then measures, in
its own frame,

    omega_imu = R_bi^T omega_b,
    f_imu = R_bi^T ( R_wb^T (p_b'' - g_w) + alpha_b x r + omega_b x (omega_b x r) ),

with ``omega_b``, ``alpha_b`` the body rate and its derivative in base_footprint, ``r`` the IMU's
position in base_footprint, ``g_w = (0, 0, -gravity_mps2)`` (a level IMU at rest reads
``+gravity`` on z, as sensor_msgs/Imu and every LIO front end expect) and ``R_wi = R_wb R_bi`` its
orientation (reported in the message, world = the odometry frame).

Noise (the continuous-time model of Kalibr's "IMU Noise Model" and OpenVINS' "IMU Propagation"
pages): per axis, white noise of density ``sigma`` and a bias driven by white noise of density
``sigma_b`` (a random walk). At the sample interval ``dt``:

    measured_k = true_k + b_k + sigma / sqrt(dt) n_k,    b_k = b_{k-1} + sigma_b sqrt(dt) w_k,

``n_k, w_k ~ N(0, 1)`` independent, ``b_0 = 0``. Units: gyroscope ``rad/s/sqrt(Hz)`` and
``rad/s^2/sqrt(Hz)``, accelerometer ``m/s^2/sqrt(Hz)`` and ``m/s^3/sqrt(Hz)``: the values Kalibr's
``imu.yaml`` (``gyroscope_noise_density``, ``gyroscope_random_walk``,
``accelerometer_noise_density``, ``accelerometer_random_walk``) and OpenVINS take. The draws come
from numpy's PCG64 seeded with ``(seed, IMU_STREAM)``: the same seed gives the same samples, and
the LiDAR's noise streams are untouched.

Stamps are ``k / rate_hz`` on the LiDAR's clock (ROS time of the drive): sample ``k`` is the
motion at that instant.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from scipy.interpolate import CubicSpline
from scipy.spatial.transform import Rotation, RotationSpline

from acres_lidar_ros.config.imu_file import ImuConfig
from acres_lidar_ros.errors import ConfigError, PoseError
from acres_lidar_ros.sensor.pattern import mount_rotation

GRAVITY_MPS2 = 9.80665
"""Standard gravity (the default ``gravity_mps2``)."""
IMU_STREAM = 0x1A0B
"""Second word of the IMU's seed sequence, so its draws are a stream of their own."""
MAX_IMU_SAMPLES = 50_000_000
"""Most samples one call makes (at 400 Hz, about 35 hours): a bound on the allocation."""


@dataclass(frozen=True)
class ImuNoise:
    """White-noise densities and bias random walks (Kalibr's and OpenVINS' names and units)."""

    gyroscope_noise_density: float  # rad/s/sqrt(Hz)
    gyroscope_random_walk: float  # rad/s^2/sqrt(Hz)
    accelerometer_noise_density: float  # m/s^2/sqrt(Hz)
    accelerometer_random_walk: float  # m/s^3/sqrt(Hz)

    def __post_init__(self) -> None:
        for name in (
            "gyroscope_noise_density",
            "gyroscope_random_walk",
            "accelerometer_noise_density",
            "accelerometer_random_walk",
        ):
            _check_density(name, getattr(self, name))


def _check_density(name: str, value: float) -> None:
    if not (isinstance(value, int | float) and math.isfinite(value) and 0.0 <= value <= 10.0):
        raise ConfigError(f"imu.{name} = {value!r}: expected a number >= 0 and <= 10")


NOISE_FREE = ImuNoise(0.0, 0.0, 0.0, 0.0)


class ImuSamples(NamedTuple):
    """IMU samples in the IMU's frame.

    times_s : (n,) float64, ``k / rate_hz``
    angular_velocity_rad_s : (n, 3) float64
    linear_acceleration_m_s2 : (n, 3) float64, specific force (gravity included)
    orientation_xyzw : (n, 4) float64, the IMU frame's rotation into the world (odometry) frame
    gyroscope_bias_rad_s, accelerometer_bias_m_s2 : (n, 3) float64, the biases in the samples
    """

    times_s: np.ndarray
    angular_velocity_rad_s: np.ndarray
    linear_acceleration_m_s2: np.ndarray
    orientation_xyzw: np.ndarray
    gyroscope_bias_rad_s: np.ndarray
    accelerometer_bias_m_s2: np.ndarray


def sample_times(start_s: float, end_s: float, rate_hz: float) -> np.ndarray:
    """``k / rate_hz`` for every integer ``k`` with ``start_s <= k / rate_hz <= end_s``."""
    if not (math.isfinite(rate_hz) and rate_hz > 0):
        raise ConfigError(f"imu.rate_hz = {rate_hz!r}: expected a number > 0")
    first = math.ceil(start_s * rate_hz - 1e-9)
    last = math.floor(end_s * rate_hz + 1e-9)
    count = last - first + 1
    if count > MAX_IMU_SAMPLES:
        raise ConfigError(
            f"IMU from {start_s} s to {end_s} s at {rate_hz} Hz is {count} samples: the limit is {MAX_IMU_SAMPLES}"
        )
    return np.arange(first, last + 1, dtype=np.float64) / rate_hz if count > 0 else np.zeros(0)


def ideal_imu(
    times_s: np.ndarray,
    positions_m: np.ndarray,
    quaternions_xyzw: np.ndarray,
    rate_hz: float,
    position_flu_m: np.ndarray | tuple[float, float, float] = (0.0, 0.0, 0.0),
    rpy_rad: np.ndarray | tuple[float, float, float] = (0.0, 0.0, 0.0),
    gravity_mps2: float = GRAVITY_MPS2,
) -> ImuSamples:
    """The noise-free IMU along a base_footprint trajectory (module docstring, "Motion").

    Parameters
    ----------
    times_s : (m,) float64, increasing; at least 4 samples
    positions_m : (m, 3) float64, base_footprint in the world
    quaternions_xyzw : (m, 4) float64, base_footprint's rotation into the world
    rate_hz : IMU rate; samples at ``k / rate_hz`` within the trajectory
    position_flu_m, rpy_rad : the IMU's mount on base_footprint
    gravity_mps2 : magnitude of gravity, along -z of the world
    """
    t = np.asarray(times_s, dtype=np.float64)
    p = np.asarray(positions_m, dtype=np.float64)
    q = np.asarray(quaternions_xyzw, dtype=np.float64)
    if t.ndim != 1 or len(t) < 4 or p.shape != (len(t), 3) or q.shape != (len(t), 4):
        raise PoseError(
            f"IMU trajectory: times {t.shape}, positions {p.shape}, quaternions {q.shape}: expected m >= 4 "
            "samples of (m,), (m, 3), (m, 4)"
        )
    if not (np.isfinite(t).all() and (np.diff(t) > 0).all()):
        raise PoseError("IMU trajectory: times must be finite and increasing")
    if not (math.isfinite(gravity_mps2) and 0.0 <= gravity_mps2 <= 30.0):
        raise ConfigError(f"imu.gravity_mps2 = {gravity_mps2!r}: expected a number >= 0 and <= 30")
    stamps = sample_times(float(t[0]), float(t[-1]), rate_hz)
    position_spline = CubicSpline(t, p, axis=0)
    rotation_spline = RotationSpline(t, Rotation.from_quat(q))
    R_wb = rotation_spline(stamps).as_matrix()  # (n, 3, 3)
    omega_b = rotation_spline(stamps, 1)  # body rate in base_footprint (R^T dR/dt)
    alpha_b = rotation_spline(stamps, 2)
    accel_w = position_spline(stamps, 2)
    gravity_w = np.array([0.0, 0.0, -float(gravity_mps2)])
    r = np.asarray(position_flu_m, dtype=np.float64).reshape(3)
    R_bi = mount_rotation(np.asarray(rpy_rad, dtype=np.float64).reshape(3))
    specific_b = np.einsum("nji,nj->ni", R_wb, accel_w - gravity_w)
    specific_b += np.cross(alpha_b, r) + np.cross(omega_b, np.cross(omega_b, r))
    R_wi = R_wb @ R_bi
    zeros = np.zeros((len(stamps), 3))
    return ImuSamples(
        stamps,
        omega_b @ R_bi,  # R_bi^T omega_b, row-wise
        specific_b @ R_bi,
        Rotation.from_matrix(R_wi).as_quat(),
        zeros,
        zeros.copy(),
    )


def noisy_imu(ideal: ImuSamples, noise: ImuNoise, rate_hz: float, seed: int) -> ImuSamples:
    """``ideal`` with white noise and random-walk biases (module docstring, "Noise"), drawn from
    PCG64 seeded with ``(seed, IMU_STREAM)``; the same seed gives the same samples."""
    if not (isinstance(seed, int) and seed >= 0):
        raise ConfigError(f"seed = {seed!r}: expected an integer >= 0")
    n = len(ideal.times_s)
    dt = 1.0 / rate_hz
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, IMU_STREAM])))
    draws = rng.standard_normal((4, n, 3))  # gyro white, gyro walk, accel white, accel walk
    gyro_bias = np.cumsum(noise.gyroscope_random_walk * math.sqrt(dt) * draws[1], axis=0)
    accel_bias = np.cumsum(noise.accelerometer_random_walk * math.sqrt(dt) * draws[3], axis=0)
    gyro_bias -= gyro_bias[:1] if n else 0.0  # b_0 = 0
    accel_bias -= accel_bias[:1] if n else 0.0
    return ImuSamples(
        ideal.times_s,
        ideal.angular_velocity_rad_s + gyro_bias + noise.gyroscope_noise_density / math.sqrt(dt) * draws[0],
        ideal.linear_acceleration_m_s2 + accel_bias + noise.accelerometer_noise_density / math.sqrt(dt) * draws[2],
        ideal.orientation_xyzw,
        gyro_bias,
        accel_bias,
    )


def imu_of_drive(
    config: ImuConfig, times_s: np.ndarray, positions_m: np.ndarray, quaternions_xyzw: np.ndarray, seed: int
) -> ImuSamples:
    """The samples an IMU file's sensor gives along a drive's base poses: ``ideal_imu`` at its
    mount and rate, with its noise (``noisy_imu``) where the file turns it on."""
    ideal = ideal_imu(
        times_s,
        positions_m,
        quaternions_xyzw,
        config.rate_hz,
        config.position_flu_m,
        config.rpy_rad,
        config.gravity_mps2,
    )
    noise = NOISE_FREE
    if config.noise:
        noise = ImuNoise(
            config.gyroscope_noise_density,
            config.gyroscope_random_walk,
            config.accelerometer_noise_density,
            config.accelerometer_random_walk,
        )
    return noisy_imu(ideal, noise, config.rate_hz, seed)


def lidar_imu_extrinsics(
    lidar_position_m: np.ndarray, lidar_rpy_rad: np.ndarray, imu_position_m: np.ndarray, imu_rpy_rad: np.ndarray
) -> dict[str, np.ndarray]:
    """The LiDAR-IMU extrinsics LIO front ends ask for, from the two mounts on base_footprint.

    Returns ``R_lidar_imu``, ``t_lidar_imu_m`` (the IMU's axes and origin in LiDAR coordinates:
    LIO-SAM's ``extrinsicRot`` and ``extrinsicTrans``) and ``R_imu_lidar``, ``t_imu_lidar_m`` (the
    LiDAR's in IMU coordinates: LIO-SAM's ``extrinsicRPY``, FAST-LIO's ``extrinsic_R`` and
    ``extrinsic_T``, "Lidar_R_wrt_IMU"); docs/imu.md, "LIO-SAM and FAST-LIO on the Polaris"."""
    R_bl = mount_rotation(np.asarray(lidar_rpy_rad, dtype=np.float64))
    R_bi = mount_rotation(np.asarray(imu_rpy_rad, dtype=np.float64))
    t_bl = np.asarray(lidar_position_m, dtype=np.float64)
    t_bi = np.asarray(imu_position_m, dtype=np.float64)
    return {
        "R_lidar_imu": R_bl.T @ R_bi,
        "t_lidar_imu_m": R_bl.T @ (t_bi - t_bl),
        "R_imu_lidar": R_bi.T @ R_bl,
        "t_imu_lidar_m": R_bi.T @ (t_bl - t_bi),
    }
