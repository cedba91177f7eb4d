"""The command behind ``acres-lidar bench --scaling`` and ``--deadline-ms``: flags, checks, output.

The benchmarks themselves are ``scaling_bench`` (cost against scene size) and ``deadline_bench``
(rays completed under a budget).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from acres_lidar_ros.errors import ConfigError


def add_scaling_arguments(parser: argparse.ArgumentParser) -> None:
    """``bench``'s flags of ``scaling_bench`` and ``deadline_bench``."""
    parser.add_argument(
        "--scaling", action="store_true", help="ns per ray against scene size: Embree vs brute force, gated"
    )
    parser.add_argument(
        "--deadline-ms",
        type=float,
        nargs="+",
        metavar="B",
        help="rays completed per frame of the planar scan under budgets of B ms (> 0), BVH vs brute force",
    )
    parser.add_argument(
        "--sizes",
        type=int,
        nargs="+",
        metavar="N",
        help="obstacles of the generated scenes, 1 to 10000 (default: 1 10 32 ... 10000; 10 ... 10000 for --deadline-ms)",
    )
    parser.add_argument("--frames", type=int, default=30, help="frames per row of --deadline-ms (default 30)")
    parser.add_argument("--plot", type=Path, metavar="PNG", help="write the --scaling plot (log-log) to a new file")


def run_scaling_bench(args: argparse.Namespace) -> int:
    """``acres-lidar bench --scaling`` and/or ``--deadline-ms``: tables, or JSON with ``--json``."""
    if getattr(args, "packets", False):  # bench --packets: the packets' own benchmark
        from acres_lidar_ros.apps.packet_bench import run_packet_bench

        return run_packet_bench(args)
    # Imported here: Open3D and numba load only when a benchmark runs, not for every command.
    from acres_lidar_ros.apps.deadline_bench import (
        DEFAULT_DEADLINE_SIZES,
        bench_deadline,
        check_budgets,
        deadline_lines,
    )
    from acres_lidar_ros.apps.scaling_bench import DEFAULT_SIZES, bench_scaling, scaling_lines
    from acres_lidar_ros.config.sensors import load_sensor_config
    from acres_lidar_ros.scene.scaling import check_obstacle_count

    if args.plot is not None and not args.scaling:
        raise ConfigError(f"--plot {args.plot}: the plot is of --scaling; add --scaling")
    if args.plot is not None and args.plot.exists():
        raise ConfigError(f"--plot {args.plot}: exists already; give a new file")
    # Every input is checked before the first scene is built.
    for n in args.sizes or ():
        check_obstacle_count(n, "--sizes")
    if args.deadline_ms is not None:
        check_budgets(args.deadline_ms)
    config = load_sensor_config(args.sensor)

    def report(row: dict) -> None:
        print(json.dumps(row, sort_keys=True), file=sys.stderr)

    out: dict = {}
    if args.scaling:
        out["scaling"] = bench_scaling(config, args.sizes or DEFAULT_SIZES, seed=args.seed, progress=report)
        if args.plot is not None:
            from acres_lidar_ros.outputs.scaling_plot import write_scaling_plot

            write_scaling_plot(args.plot, out["scaling"])
    if args.deadline_ms is not None:
        out["deadline"] = bench_deadline(
            config, args.deadline_ms, args.sizes or DEFAULT_DEADLINE_SIZES, args.frames, seed=args.seed, progress=report
        )
    if args.json:
        print(json.dumps(out, sort_keys=True))
    else:
        for key, lines in (("scaling", scaling_lines), ("deadline", deadline_lines)):
            if key in out:
                print("\n".join(lines(out[key])))
        if args.plot is not None:
            print(f"plot -> {args.plot}")
    failed = out.get("scaling", {}).get("mismatches", 0)
    if failed:
        print(f"acres-lidar bench: the gate failed: {failed} mismatches (must be 0)", file=sys.stderr)
        return 1
    return 0


__all__ = ["add_scaling_arguments", "run_scaling_bench"]
