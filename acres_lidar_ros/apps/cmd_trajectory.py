"""``acres-lidar trajectory``: a drive through waypoints, draped on a scene's terrain, as a TUM file.

The drive is made as the built-in tours are (``scene.tour.drive_along``): corners rounded, slower
in turns, z on the ground, pitch and roll from the slope; ``record --trajectory`` drives it.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from acres_lidar_ros.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np

    from acres_lidar_ros.scene.scene_model import Scene

#: Options of this command whose values are numbers (negative values are values, not options).
TRAJECTORY_NUMBER_OPTIONS = {
    "--speed": 1,
    "--turn-radius": 1,
    "--centre": 2,
    "--half-width": 1,
    "--cell": 1,
    "--min-height": 1,
}


def add_world_parsers(sub: argparse._SubParsersAction) -> None:
    """The commands of a user's own world: ``trajectory``, ``scene-preview``, ``cloud-to-scene``."""
    from acres_lidar_ros.apps.cmd_cloud_to_scene import add_cloud_to_scene_parser
    from acres_lidar_ros.apps.cmd_scene_preview import add_scene_preview_parser

    add_trajectory_parser(sub)
    add_scene_preview_parser(sub)
    add_cloud_to_scene_parser(sub)


def world_command(args: argparse.Namespace, built_in_farms: dict[str, str]) -> int:
    """Run ``trajectory``, ``scene-preview`` or ``cloud-to-scene``."""
    from acres_lidar_ros.apps.cmd_cloud_to_scene import cmd_cloud_to_scene
    from acres_lidar_ros.apps.cmd_scene_preview import cmd_scene_preview

    if args.command == "cloud-to-scene":
        return cmd_cloud_to_scene(args)
    if args.command == "scene-preview":
        return cmd_scene_preview(args, built_in_farms)
    return cmd_trajectory(args, built_in_farms)


def add_trajectory_parser(sub: argparse._SubParsersAction) -> None:
    """``acres-lidar trajectory`` and its options."""
    from acres_lidar_ros.scene.tour import TURN_RADIUS_M

    parser = sub.add_parser(
        "trajectory",
        help="a drive through waypoints, on the scene's ground, as a TUM file for record --trajectory",
        description=(
            "Drapes a path through the waypoints on the scene's terrain as the built-in tour is made: corners "
            "rounded by arcs, slower in turns, z on the ground, pitch and roll from the slope, 100 Hz."
        ),
    )
    parser.add_argument(
        "--scene",
        required=True,
        metavar="default|farm-v1|FILE",
        help="scene file (JSON, docs/scene_format.md) or a built-in farm",
    )
    parser.add_argument(
        "--waypoints", required=True, type=Path, metavar="FILE.csv", help="x_m,y_m rows in the scene frame"
    )
    parser.add_argument("--speed", type=float, default=5.0, metavar="M_PER_S", help="top speed, m/s (default 5)")
    parser.add_argument(
        "--turn-radius",
        type=float,
        default=TURN_RADIUS_M,
        metavar="M",
        help=f"radius of the arcs at the waypoints, m (default {TURN_RADIUS_M:g})",
    )
    parser.add_argument("--out", required=True, type=Path, metavar="FILE.tum", help="new TUM file")


def cmd_trajectory(args: argparse.Namespace, built_in_farms: dict[str, str]) -> int:
    """Read the waypoints, drape the drive on the scene, write the TUM file, print its figures."""
    import numpy as np

    from acres_lidar_ros.outputs.files import refuse_existing
    from acres_lidar_ros.outputs.tum import write_tum
    from acres_lidar_ros.scene.drives import read_waypoints
    from acres_lidar_ros.scene.farm_v1 import build_default_farm
    from acres_lidar_ros.scene.scene_file import load_scene
    from acres_lidar_ros.scene.tour import TOUR_RATE_HZ, check_corners, drive_along

    if not (math.isfinite(args.speed) and 0.1 <= args.speed <= 50.0):
        raise ConfigError(f"--speed {args.speed}: expected a top speed from 0.1 to 50 m/s")
    if not (math.isfinite(args.turn_radius) and 0.5 <= args.turn_radius <= 1000.0):
        raise ConfigError(f"--turn-radius {args.turn_radius}: expected a radius from 0.5 to 1000 m")
    refuse_existing(args.out)
    waypoints = read_waypoints(args.waypoints)
    check_corners(
        waypoints, args.turn_radius, f"waypoint file {str(args.waypoints)!r} (--turn-radius {args.turn_radius:g})"
    )
    layout = built_in_farms.get(args.scene)
    scene = build_default_farm(seed=0, layout=layout) if layout else load_scene(Path(args.scene))
    times, positions, quaternions = drive_along(scene, waypoints, args.speed, turn_radius_m=args.turn_radius)
    write_tum(args.out, times, positions, quaternions)
    step = np.linalg.norm(np.diff(positions, axis=0), axis=1)
    speed = step * TOUR_RATE_HZ
    print(
        f"{len(times)} poses at {TOUR_RATE_HZ:g} Hz, {times[-1]:.2f} s, {step.sum():.1f} m, speed up to {speed.max():.2f} m/s, "
        f"z from {positions[:, 2].min():.2f} to {positions[:, 2].max():.2f} m -> {args.out}",
        file=sys.stdout,
    )
    return 0


def require_trajectory(args: argparse.Namespace, built_in_farms: dict[str, str]) -> None:
    """``record --scene FILE`` needs ``--trajectory``: the built-in tour drives the built-in farms only."""
    if args.trajectory == "default" and args.scene not in built_in_farms:
        raise ConfigError(
            f"record --scene {args.scene}: --trajectory is missing: the built-in tour drives the built-in farms "
            f"({', '.join(built_in_farms)}) only; give --trajectory FILE.tum, e.g. one made by "
            f"'acres-lidar trajectory --scene {args.scene} --waypoints W.csv --out drive.tum'"
        )


def warn_off_ground(scene: Scene, positions_m: np.ndarray, what: str, times_s: np.ndarray | None = None) -> None:
    """A warning on stderr for poses below the terrain or high above it (``scene.drives.check_ground``)."""
    from acres_lidar_ros.scene.drives import check_ground

    for line in check_ground(scene, positions_m).warnings(positions_m, what, times_s):
        print(f"warning: {line}", file=sys.stderr)
