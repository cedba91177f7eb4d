"""The package's top-level names: the objects of their home modules, loaded only when used."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys

import pytest

import acres_lidar_ros


def test_the_top_level_names_are_the_objects_their_modules_define():
    from acres_lidar_ros import Scanner as top_scanner
    from acres_lidar_ros import ScanOptions as top_options
    from acres_lidar_ros import build_default_farm as top_farm
    from acres_lidar_ros import load_sensor_config as top_load
    from acres_lidar_ros import point_cloud as top_cloud
    from acres_lidar_ros.config.sensors import load_sensor_config
    from acres_lidar_ros.outputs.layouts import point_cloud
    from acres_lidar_ros.scan.scan_types import ScanOptions
    from acres_lidar_ros.scan.scanner import Scanner
    from acres_lidar_ros.scene.farm_v1 import build_default_farm

    assert (top_scanner, top_options, top_load, top_farm, top_cloud) == (
        Scanner,
        ScanOptions,
        load_sensor_config,
        build_default_farm,
        point_cloud,
    )
    assert set(acres_lidar_ros.__all__) <= set(dir(acres_lidar_ros))


def test_the_version_is_the_installed_distribution_s():
    assert acres_lidar_ros.__version__ == importlib.metadata.version("acres_lidar_ros")


def test_an_unknown_name_is_an_attribute_error_naming_it():
    with pytest.raises(AttributeError, match="no_such_name"):
        acres_lidar_ros.no_such_name  # noqa: B018


def test_importing_the_package_loads_neither_the_core_nor_ros():
    code = (
        "import sys, acres_lidar_ros\n"
        "heavy = [m for m in sys.modules if m.startswith(('acres_lidar_ros.', 'rclpy', 'open3d', 'numba'))]\n"
        "print(heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"
