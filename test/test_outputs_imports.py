"""The outputs are a layer over the core: importing them pulls in no ROS client library."""

from __future__ import annotations

import subprocess
import sys

OUTPUT_MODULES = [
    "acres_lidar_ros.outputs",
    "acres_lidar_ros.outputs.files",
    "acres_lidar_ros.outputs.layouts",
    "acres_lidar_ros.outputs.pointcloud2",
    "acres_lidar_ros.outputs.pcd",
    "acres_lidar_ros.outputs.ply",
    "acres_lidar_ros.outputs.preview",
    "acres_lidar_ros.outputs.records",
    "acres_lidar_ros.outputs.tum",
    "acres_lidar_ros.outputs.bag",
    "acres_lidar_ros.outputs.scan_files",
]


def test_outputs_import_without_rclpy():
    code = (
        "import sys, importlib\n"
        f"for m in {OUTPUT_MODULES!r}: importlib.import_module(m)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('rclpy', 'tf2_ros', 'sensor_msgs_py'))\n"
        "print(bad); sys.exit(1 if bad else 0)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
