"""The config layer's point type names are the output layouts' profiles, and a sensors file's
``point_type`` is refused at load when it names none."""

from __future__ import annotations

import pytest

from acres_lidar_ros.config.schema import POINT_TYPE_NAMES
from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.outputs.point_types import PROFILES


def test_the_config_names_the_profiles_of_the_outputs_in_their_order():
    assert tuple(PROFILES) == POINT_TYPE_NAMES


def test_a_sensors_file_point_type_is_checked_against_the_profiles_when_it_loads():
    config = load_sensor_config("polaris")
    assert config.with_overrides({"point_type": "velodyne"}).point_type == "velodyne"
    with pytest.raises(ConfigError, match=r"point_type.*XYZ_lidar.*XYZI, XYZIRT, XYZIRT_labels, velodyne"):
        config.with_overrides({"point_type": "XYZ_lidar"})  # a frame name, but no layout
