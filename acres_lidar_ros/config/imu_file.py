"""The IMU file: rate, topic, frame, mount and noise of the simulated IMU (``sensor.imu``).

A JSON object; every key is optional and defaults to the shipped ``config/imu.json`` values
(``IMU_DEFAULTS``); ``"_"`` keys are comments. Unknown keys, wrong types and values out of range
are refused with the file, the key, the value and what is allowed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from acres_lidar_ros.config.input_files import load_json_file
from acres_lidar_ros.config.share_paths import config_dir
from acres_lidar_ros.errors import ConfigError

MAX_IMU_FILE_BYTES = 64 << 10
IMU_RATE_RANGE_HZ = (100.0, 400.0)

#: key -> (default, low, high); None bounds: not a number.
IMU_KEYS: dict[str, tuple[Any, float | None, float | None]] = {
    "rate_hz": (200.0, *IMU_RATE_RANGE_HZ),
    "topic": ("/imu/data", None, None),
    "frame_id": ("imu_link", None, None),
    "position_flu_m": ([2.5, 0.0, 0.5], -20.0, 20.0),
    "rpy_deg": ([0.0, 0.0, 0.0], -360.0, 360.0),
    "gravity_mps2": (9.80665, 0.0, 30.0),
    "gyroscope_noise_density": (1.5636343949698187e-03, 0.0, 10.0),
    "gyroscope_random_walk": (3.5640318696367613e-05, 0.0, 10.0),
    "accelerometer_noise_density": (3.9939570888238808e-03, 0.0, 10.0),
    "accelerometer_random_walk": (6.4356659353532566e-05, 0.0, 10.0),
    "noise": (True, None, None),
}


@dataclass(frozen=True)
class ImuConfig:
    """A loaded IMU file (units in the names; densities as Kalibr's ``imu.yaml``)."""

    rate_hz: float
    topic: str
    frame_id: str
    position_flu_m: np.ndarray  # (3,) in base_footprint
    rpy_rad: np.ndarray  # (3,) roll, pitch, yaw about fixed axes, as the LiDAR's mount
    gravity_mps2: float
    gyroscope_noise_density: float  # rad/s/sqrt(Hz)
    gyroscope_random_walk: float  # rad/s^2/sqrt(Hz)
    accelerometer_noise_density: float  # m/s^2/sqrt(Hz)
    accelerometer_random_walk: float  # m/s^3/sqrt(Hz)
    noise: bool
    source: str = ""


def _check(key: str, value: Any, where: str) -> Any:
    default, low, high = IMU_KEYS[key]
    bad = f"{where}: {key} = {value!r}: expected "
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigError(bad + "true or false")
        return value
    if isinstance(default, str):
        if not (isinstance(value, str) and value and value.strip() == value and "\n" not in value):
            raise ConfigError(bad + "a non-empty name")
        if key == "topic" and not value.startswith("/"):
            raise ConfigError(bad + "a topic name starting with /")
        return value
    numbers = value if isinstance(default, list) else [value]
    if (
        (isinstance(default, list) and not (isinstance(value, list) and len(value) == 3))
        or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in numbers)
        or not all(math.isfinite(v) and low <= v <= high for v in numbers)
    ):
        shape = "3 numbers, each" if isinstance(default, list) else "a number"
        raise ConfigError(bad + f"{shape} >= {low:g} and <= {high:g}")
    return [float(v) for v in numbers] if isinstance(default, list) else float(value)


def imu_config(values: dict[str, Any] | None = None, where: str = "IMU settings", source: str = "") -> ImuConfig:
    """An ``ImuConfig`` from ``values`` (the IMU file's keys; missing keys: the defaults)."""
    values = {k: v for k, v in (values or {}).items() if not k.startswith("_")}
    unknown = sorted(set(values) - set(IMU_KEYS))
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}; allowed: {', '.join(IMU_KEYS)}")
    v = {
        key: _check(key, values[key], where) if key in values else default for key, (default, _, _) in IMU_KEYS.items()
    }
    return ImuConfig(
        rate_hz=v["rate_hz"],
        topic=v["topic"],
        frame_id=v["frame_id"],
        position_flu_m=np.array(v["position_flu_m"], dtype=np.float64),
        rpy_rad=np.deg2rad(np.array(v["rpy_deg"], dtype=np.float64)),
        gravity_mps2=v["gravity_mps2"],
        gyroscope_noise_density=v["gyroscope_noise_density"],
        gyroscope_random_walk=v["gyroscope_random_walk"],
        accelerometer_noise_density=v["accelerometer_noise_density"],
        accelerometer_random_walk=v["accelerometer_random_walk"],
        noise=v["noise"],
        source=source,
    )


def load_imu_config(source: str | Path | None = None) -> ImuConfig:
    """Load an IMU file (None or ``"default"``: the shipped ``config/imu.json``)."""
    path = config_dir() / "imu.json" if source in (None, "default") else Path(source)
    data = load_json_file(path, "IMU file", MAX_IMU_FILE_BYTES)
    if not isinstance(data, dict):
        raise ConfigError(f"IMU file {str(path)!r}: expected a JSON object")
    return imu_config(data, f"IMU file {str(path)!r}", str(path))
