"""The options of ``acres-lidar bench`` (light: the parser imports it before any command runs)."""

from __future__ import annotations

import argparse

from acres_lidar_ros.apps.packet_bench import add_packet_bench_arguments


def add_bench_arguments(bench: argparse.ArgumentParser) -> None:
    """The options of ``acres-lidar bench`` (besides the common ones and ``--scaling``'s)."""
    bench.add_argument("--scans", type=int, default=20, help="scans to time (default 20)")
    add_packet_bench_arguments(bench)
    bench.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    bench.add_argument(
        "--schedule", action="store_true", help="also run the ROS-free node schedule over 600 simulated scans at 10 Hz"
    )
    bench.add_argument(
        "--odom-hz",
        type=float,
        default=50.0,
        metavar="HZ",
        help="odometry rate of --schedule, > 0 and <= 1000 (default 50)",
    )
    bench.add_argument(
        "--against",
        metavar="SCENE",
        help="also scan SCENE (as --scene), alternated scan by scan, and report the paired cost ratio",
    )
