"""``acres-lidar compare A B --out DIR``: two runs (run directories or bags) compared beam by beam.

Writes ``DIR/compare.json`` and ``DIR/compare.md`` (docs/calibration.md, "Comparing two runs").
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

COMPARE_EXAMPLES = """\
examples:
  acres-lidar compare runs/full runs/core --out runs/full_vs_core
  acres-lidar compare real.bag runs/render --sensor config/sensors_polaris.json --topic /rslidar_points --out cmp
"""


def add_compare_parser(sub: Any) -> None:
    """The ``compare`` subcommand on the CLI's subparsers."""
    compare = sub.add_parser(
        "compare",
        help="compare two runs beam by beam (compare.json, compare.md)",
        description="Pair the scans of two runs by stamp and compare them beam by beam: the share of beams "
        "with a return for the lower and upper rings, the range difference B minus A by class and ring group, "
        "the share of beams that agree, each ring's fitted elevation and azimuth offset, the body mask, the "
        "return rate per ring and the points per scan.",
        epilog=COMPARE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    compare.add_argument("a", type=Path, metavar="A", help="run directory, rosbag2 directory or ROS 1 .bag")
    compare.add_argument("b", type=Path, metavar="B", help="the run compared with A (B minus A)")
    compare.add_argument("--out", type=Path, required=True, metavar="DIR", help="output directory (made if missing)")
    compare.add_argument(
        "--sensor", default="polaris", metavar="NAME|FILE", help="sensors file of both runs (default polaris)"
    )
    compare.add_argument("--topic", default=None, help="cloud topic (default: each bag's one PointCloud2 topic)")
    compare.add_argument(
        "--ring-field",
        choices=("rank", "index"),
        default="rank",
        help="a dense cloud's ring field: the elevation rank (rslidar_sdk, velodyne) or the ring index (hesai)",
    )


def cmd_compare(args: argparse.Namespace) -> int:
    from acres_lidar_ros.config.sensors import load_sensor_config
    from acres_lidar_ros.outputs.files import atomic_write, make_directory
    from acres_lidar_ros.outputs.json_files import write_json
    from acres_lidar_ros.recordings.compare_runs import compare_markdown, compare_recordings
    from acres_lidar_ros.recordings.recorded_scans import beam_table, read_recording

    config = load_sensor_config(args.sensor)
    runs = []
    for path in (args.a, args.b):
        print(f"reading {path} ...", file=sys.stderr)
        runs.append(read_recording([path], config, topic=args.topic, poses=None, ring_field=args.ring_field))
    result = compare_recordings(runs[0], runs[1], beam_table(config))
    result["a"]["path"], result["b"]["path"] = str(args.a), str(args.b)
    out = make_directory(args.out)
    write_json(out / "compare.json", result, overwrite=True)
    atomic_write(out / "compare.md", compare_markdown(result).encode(), overwrite=True)
    agree = result["agree_share"]
    print(
        f"{result['scans']} scans compared, {100 * agree:.1f} % of the beams agree, body mask IoU "
        f"{result['body_mask_iou']:.3f} -> {out / 'compare.json'}, {out / 'compare.md'}"
    )
    return 0
