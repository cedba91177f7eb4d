"""``--odom-in-scene`` of ``acres-lidar scan``, ``record`` and ``bench``: where the scene sits in
the odom frame (``tracing.scene_frame``), so a scene need not sit at the odom origin.

Light imports only: ``apps.cli`` imports this before the signal handlers are installed.
"""

from __future__ import annotations

import argparse
from typing import Any

OPTION = "--odom-in-scene"


def add_scene_frame_argument(parser: argparse.ArgumentParser) -> None:
    """``--odom-in-scene X Y Z ROLL PITCH YAW`` (default: the scene at the odom origin)."""
    parser.add_argument(
        OPTION,
        dest="odom_in_scene",
        nargs=6,
        type=float,
        metavar=("X", "Y", "Z", "ROLL", "PITCH", "YAW"),
        help="the odom frame's pose in the scene, m and deg (e.g. the robot's spawn pose in a Gazebo world); "
        "poses and --trajectory stay in odom (default: the scene at the odom origin)",
    )


def scene_frame(args: argparse.Namespace) -> Any:
    """``T_scene_odom`` (4, 4) of ``--odom-in-scene``, or None."""
    from acres_lidar_ros.tracing.scene_frame import odom_in_scene_transform

    return odom_in_scene_transform(getattr(args, "odom_in_scene", None), OPTION)


def positions_in_scene(args: argparse.Namespace, positions_m: Any) -> Any:
    """(n, 3) odom positions in the scene's frame (for the terrain-height warnings)."""
    import numpy as np

    T = scene_frame(args)
    positions_m = np.asarray(positions_m, np.float64)
    return positions_m if T is None else positions_m @ T[:3, :3].T + T[:3, 3]


def tour_in_odom(args: argparse.Namespace, positions_m: Any, quaternions_xyzw: Any) -> tuple[Any, Any]:
    """A tour made in the scene's frame (the built-in one) as odom poses, so it drives the same
    ground under ``--odom-in-scene``: ``T_odom_base = T_scene_odom^-1 T_scene_base``."""
    import numpy as np
    from scipy.spatial.transform import Rotation

    T = scene_frame(args)
    if T is None:
        return positions_m, quaternions_xyzw
    R, t = T[:3, :3], T[:3, 3]
    positions_odom = (np.asarray(positions_m, np.float64) - t) @ R
    rotations = Rotation.from_matrix(R.T) * Rotation.from_quat(quaternions_xyzw)
    return positions_odom, rotations.as_quat()
