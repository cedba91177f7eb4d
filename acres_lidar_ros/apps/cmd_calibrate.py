"""``acres-lidar calibrate``: a sensors file fitted to recorded scans, and scored before and after
(docs/calibration.md, "Calibration")."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

CALIBRATE_EXAMPLES = """\
examples:
  acres-lidar calibrate --bag drive1 --bag drive2 --scene my_farm.json --sensor helios5515 --out runs/calib
  acres-lidar calibrate --bag real.bag --topic /rslidar_points --poses poses.tum --scene default \\
      --sensor config/sensors_helios5515.json --out runs/calib --max-scans 300 --render-scans 30
"""


def add_calibrate_parser(sub: Any) -> None:
    """The ``calibrate`` subcommand on the CLI's subparsers."""
    calibrate = sub.add_parser(
        "calibrate",
        help="fit the sensor to recorded scans: sensors_calibrated.json, self_table.f32, metrics.json, report.md",
        description="Measure the recorded scans (each ring's elevation and azimuth offset, the column order, the "
        "mount, the body, the return rate per ring, the ground intensity and range noise per surface), write a "
        "sensors overlay that extends START and a self-return table, then render the simulator at the recorded "
        "poses with START and with the calibrated file and score the spec's 11 metrics against their limits.",
        epilog=CALIBRATE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    calibrate.add_argument(
        "--bag", action="append", required=True, type=Path, metavar="PATH", help="a recording (repeat for more)"
    )
    calibrate.add_argument("--topic", default=None, help="cloud topic (default: the bags' one PointCloud2 topic)")
    calibrate.add_argument("--poses", default="odom", metavar="odom|tf|FILE.tum", help="vehicle poses (default odom)")
    calibrate.add_argument(
        "--scene", default="default", metavar="default|farm-v1|FILE", help="the scene the recording was driven in"
    )
    calibrate.add_argument("--sensor", required=True, metavar="START", help="sensors file to start from (or a name)")
    calibrate.add_argument("--out", type=Path, required=True, metavar="DIR", help="output directory (made if missing)")
    calibrate.add_argument("--max-scans", type=int, default=None, metavar="N", help="read at most N scans")
    calibrate.add_argument(
        "--render-scans", type=int, default=20, metavar="N", help="scans rendered for the metrics (default 20)"
    )
    calibrate.add_argument("--no-score", action="store_true", help="measure and fit only: no render, no metrics")
    calibrate.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress line (on a terminal it rewrites itself; in a log, a plain line per step and every 10 s)",
    )


def cmd_calibrate(args: argparse.Namespace) -> int:
    from acres_lidar_ros.apps.progress_line import ProgressLine
    from acres_lidar_ros.errors import ConfigError
    from acres_lidar_ros.recordings.calibrate_run import calibrate
    from acres_lidar_ros.scene.farm_v1 import build_default_farm
    from acres_lidar_ros.scene.scene_file import load_scene

    for name in ("max_scans", "render_scans"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise ConfigError(f"--{name.replace('_', '-')} {value}: expected an integer >= 1")
    farms = {"default": "v2", "farm-v1": "v1"}
    layout = farms.get(args.scene)
    scene = build_default_farm(seed=0, layout=layout) if layout else load_scene(Path(args.scene))

    line = None if args.no_progress else ProgressLine(sys.stderr)

    def progress(step: str, done: int, total: int) -> None:
        if line is not None:
            line.update(step, done, total)

    summary = calibrate(
        args.bag,
        args.sensor,
        args.out,
        scene=scene,
        topic=args.topic,
        poses=args.poses,
        max_scans=args.max_scans,
        render_scans=args.render_scans,
        score=not args.no_score,
        progress=progress,
    )
    if line is not None:
        line.close()
    metrics = summary.get("metrics", [])
    inside = sum(m["within_limit"] for m in metrics)
    scored = f", {inside} of {len(metrics)} metrics within their limits" if metrics else ""
    print(f"{summary['scans']} scans calibrated{scored} -> {summary['out']}")
    return 0
