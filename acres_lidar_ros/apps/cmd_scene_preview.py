"""``acres-lidar scene-preview``: a scene from above with its objects, classes and a trajectory
(``outputs.scene_picture``)."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from acres_lidar_ros.errors import ConfigError

#: Margin round a trajectory when the picture is fitted to it, m.
TRAJECTORY_MARGIN_M = 20.0


def add_scene_preview_parser(sub: argparse._SubParsersAction) -> None:
    """``acres-lidar scene-preview`` and its options."""
    parser = sub.add_parser(
        "scene-preview",
        help="a scene from above: objects by class, relief, names, a trajectory, legend and scale bar (PNG)",
    )
    parser.add_argument("--scene", required=True, metavar="default|farm-v1|FILE", help="scene file or built-in farm")
    parser.add_argument("--trajectory", type=Path, metavar="FILE.tum", help="a drive to draw (TUM)")
    parser.add_argument("--centre", nargs=2, type=float, metavar=("X", "Y"), help="picture centre, m")
    parser.add_argument("--half-width", type=float, metavar="M", help="centre to edge, m (default: fit)")
    parser.add_argument("--size", type=int, default=900, metavar="PX", help="picture side, px (default 900)")
    parser.add_argument("--out", required=True, type=Path, metavar="FILE.png", help="new PNG file")


def cmd_scene_preview(args: argparse.Namespace, built_in_farms: dict[str, str]) -> int:
    """Load the scene (and the trajectory), fit the view, write the picture."""
    import numpy as np

    from acres_lidar_ros.outputs.files import refuse_existing
    from acres_lidar_ros.outputs.scene_picture import scene_picture_png, write_scene_picture
    from acres_lidar_ros.outputs.tum import read_tum
    from acres_lidar_ros.scene.farm_v1 import build_default_farm
    from acres_lidar_ros.scene.scene_file import load_scene

    refuse_existing(args.out)
    if args.centre is not None and not all(math.isfinite(v) for v in args.centre):
        raise ConfigError(f"--centre {args.centre}: expected two finite numbers X Y, m")
    track = None if args.trajectory is None else read_tum(args.trajectory)[1][:, :2]
    layout = built_in_farms.get(args.scene)
    scene = build_default_farm(seed=0, layout=layout) if layout else load_scene(Path(args.scene))
    if track is not None:
        low, high = track.min(axis=0) - TRAJECTORY_MARGIN_M, track.max(axis=0) + TRAJECTORY_MARGIN_M
    else:
        low, high = scene.extent_xy_m
    centre = np.asarray(args.centre if args.centre is not None else (low + high) / 2, float)
    half = args.half_width if args.half_width is not None else float(np.max(high - low)) / 2
    png = scene_picture_png(scene, centre, half, args.size, track, title=f"{args.scene} from above")
    write_scene_picture(args.out, png)
    print(f"{args.out}: {2 * half:g} m x {2 * half:g} m round ({centre[0]:g}, {centre[1]:g}), {args.size} px")
    return 0
