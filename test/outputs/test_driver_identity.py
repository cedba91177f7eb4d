"""A sensors file names its driver's default topic and point layout (``lidar.topic``,
``lidar.point_type``): the CLI's scan uses that layout unless ``--point-type`` names one, and a
bad value is refused with the key, the value and what is allowed."""

from __future__ import annotations

import json

import pytest

from acres_lidar_ros.apps import cli
from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.config.share_paths import config_dir
from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.outputs.pcd import read_pcd
from acres_lidar_ros.outputs.point_types import XYZI, XYZIRT


def _sensors(tmp_path, **lidar):
    path = tmp_path / "s.json"
    small = {"columns": 36, "rings": 4, "sub_rays": 1, "output": "pcd"}
    path.write_text(json.dumps({"extends": str(config_dir() / "sensors.json"), "lidar": {**small, **lidar}}))
    return path


def _scan(capsys, sensors, out, *extra):
    code = cli.main(["scan", "--sensor", str(sensors), "--out", str(out), *extra])
    return code, capsys.readouterr().err


def test_defaults_are_the_generic_sensors():
    config = load_sensor_config("default")
    assert (config.topic, config.point_type, config.frame_id) == ("/lidar/points", "XYZI", "lidar")


def test_scan_writes_the_sensors_file_layout_unless_the_option_names_one(tmp_path, capsys):
    sensors = _sensors(tmp_path, point_type="XYZIRT")
    code, err = _scan(capsys, sensors, tmp_path / "a")
    assert code == 0, err
    cloud = read_pcd(next((tmp_path / "a" / "lidar").glob("*.pcd")))
    assert cloud.dtype.names == XYZIRT.names and cloud.shape == (36, 4)
    code, err = _scan(capsys, sensors, tmp_path / "b", "--point-type", "XYZI")
    assert code == 0, err
    assert read_pcd(next((tmp_path / "b" / "lidar").glob("*.pcd"))).dtype.names == XYZI.names


def test_a_point_type_that_is_no_profile_is_refused_naming_the_key(tmp_path, capsys):
    sensors = _sensors(tmp_path, point_type="PCL")
    code, err = _scan(capsys, sensors, tmp_path / "o")
    assert code == 2
    allowed = "XYZI, XYZIRT, XYZIRT_labels, velodyne, ouster, nebula, hesai"
    assert f"sensors file '{sensors}': lidar.point_type = 'PCL': expected a point layout: one of {allowed}" in err
    assert "Traceback" not in err and not (tmp_path / "o").exists()


@pytest.mark.parametrize("topic", ["", "lidar points", "/2d", "/a//b", "/a/", 7])
def test_a_topic_that_is_no_ros_name_is_refused(tmp_path, topic):
    with pytest.raises(ConfigError, match=r"lidar\.topic = .*: expected a topic name such as /lidar/points"):
        load_sensor_config(_sensors(tmp_path, topic=topic))
