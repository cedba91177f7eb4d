"""Layers point inward: the core, outputs and CLI never import rclpy."""

import subprocess
import sys

CORE = [
    "acres_lidar_ros.config", "acres_lidar_ros.schema", "acres_lidar_ros.pattern", "acres_lidar_ros.timing",
    "acres_lidar_ros.poses", "acres_lidar_ros.scan", "acres_lidar_ros.returns", "acres_lidar_ros.hits",
]


def test_importing_the_core_does_not_import_rclpy():
    code = (
        "import sys, importlib\n"
        f"for m in {CORE!r}: importlib.import_module(m)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('rclpy', 'tf2_ros', 'launch_ros'))\n"
        "print(bad); sys.exit(1 if bad else 0)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
