"""Where the package's shared files are: the source checkout, a pip install or an ament install.

``config/`` holds the shipped sensors files, the self-return tables and the material spectra; the
first candidate that has ``config/sensors.json`` is the share directory.
"""

from __future__ import annotations

import sys
from pathlib import Path

from acres_lidar_ros.errors import ConfigError

PACKAGE = "acres_lidar_ros"


def share_dir() -> Path:
    """The package's share directory: the source checkout, a pip install or an ament install."""
    source = Path(__file__).resolve().parents[2]
    candidates = [source, Path(sys.prefix) / "share" / PACKAGE]
    try:  # an ament (colcon) install
        from ament_index_python.packages import get_package_share_directory

        candidates.append(Path(get_package_share_directory(PACKAGE)))
    except Exception:
        pass
    for candidate in candidates:
        if (candidate / "config" / "sensors.json").is_file():
            return candidate
    raise ConfigError(f"cannot find the {PACKAGE} config directory (looked in {', '.join(str(c) for c in candidates)})")


def config_dir() -> Path:
    return share_dir() / "config"
