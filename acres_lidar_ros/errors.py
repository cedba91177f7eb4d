"""Exceptions of acres_lidar_ros.

One base class for the package and a few specific ones under it. Every message names the
key or path, the value and what is allowed, so a user can fix the input without reading code.
"""

from __future__ import annotations


class AcresLidarError(Exception):
    """Base class of every error this package raises on purpose."""


class ConfigError(AcresLidarError, ValueError):
    """A sensors file, a parameter or an option is missing, malformed or out of range."""


class SceneError(AcresLidarError, ValueError):
    """A scene file, mesh, terrain or dynamic box is missing or invalid."""


class PoseError(AcresLidarError, ValueError):
    """A pose, pose history or trajectory is invalid (NaN, non-unit quaternion, time order)."""


class OutputError(AcresLidarError, OSError):
    """An output file or bag cannot be written (it exists, or the write failed)."""


class RecordingError(AcresLidarError, ValueError):
    """A recording (a bag, its clouds, poses or transforms) cannot be read or does not fit the sensor."""
