"""Where the scene sits in the odometry (or map) frame: ``T_scene_odom``, the odom frame's pose in
the scene's frame, so a scene need not sit at the odom origin.

A Gazebo world with the robot spawned at (100, 50, 0) yaw 90 deg has its odom origin there:
``odom_in_scene = [100, 50, 0, 0, 0, 90]``. A pose ``T_odom_base`` is traced at
``T_scene_odom T_odom_base`` in the scene; everything published stays in odom.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.sensor.poses import pose_matrix


def odom_in_scene_transform(values: Sequence[float] | str | None, where: str) -> np.ndarray | None:
    """``T_scene_odom`` (4, 4) of six numbers X Y Z (m) ROLL PITCH YAW (deg, R = Rz Ry Rx) given
    as a sequence or a space- or comma-separated string; None (or an empty string, or all zeros)
    is the identity and returns None, so the default scan stays as it is."""
    if values is None or (isinstance(values, str) and not values.strip()):
        return None
    try:
        numbers = [float(v) for v in (values.replace(",", " ").split() if isinstance(values, str) else values)]
    except (TypeError, ValueError):
        numbers = []
    if len(numbers) != 6 or not np.isfinite(numbers).all():
        raise ConfigError(
            f"{where} = {values!r}: expected six finite numbers X Y Z (m) ROLL PITCH YAW (deg), "
            "the odom frame's pose in the scene"
        )
    if not any(numbers):
        return None
    return pose_matrix(np.array(numbers[:3]), np.deg2rad(numbers[3:]))
