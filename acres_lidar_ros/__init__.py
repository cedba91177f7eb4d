"""acres_lidar_ros: a physically based, ray-traced LiDAR simulator (docs/design.md).

The names a user starts from, importable from the package itself::

    from acres_lidar_ros import Scanner, ScanOptions, load_sensor_config, build_default_farm, point_cloud

They are loaded on first use, so ``import acres_lidar_ros`` (and every subpackage import, which
runs this file first) stays cheap and pulls in neither the tracer nor ROS.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from acres_lidar_ros.config.sensors import load_sensor_config
    from acres_lidar_ros.outputs.layouts import point_cloud
    from acres_lidar_ros.scan.scan_types import ScanOptions
    from acres_lidar_ros.scan.scanner import Scanner
    from acres_lidar_ros.scene.farm_v1 import build_default_farm

_HOMES = {
    "Scanner": "acres_lidar_ros.scan.scanner",
    "ScanOptions": "acres_lidar_ros.scan.scan_types",
    "load_sensor_config": "acres_lidar_ros.config.sensors",
    "build_default_farm": "acres_lidar_ros.scene.farm_v1",
    "point_cloud": "acres_lidar_ros.outputs.layouts",
}
"""Each public name -> the module that defines it (its one import path besides this one)."""

__all__ = ["ScanOptions", "Scanner", "__version__", "build_default_farm", "load_sensor_config", "point_cloud"]


def __getattr__(name: str) -> Any:
    """The public names, imported from their modules on first use (PEP 562)."""
    if name == "__version__":
        from importlib.metadata import version

        value: Any = version("acres_lidar_ros")
    elif name in _HOMES:
        value = getattr(import_module(_HOMES[name]), name)
    else:
        raise AttributeError(f"module 'acres_lidar_ros' has no attribute {name!r}")
    globals()[name] = value  # found directly from now on
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
