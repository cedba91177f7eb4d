"""The handler of ``acres-lidar bench`` (its figures are ``apps.cmd_bench``'s; the scaling, deadline
and packet benchmarks ``apps.scene_bench``'s), kept out of ``apps.cli`` for its line limit."""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from typing import Any

from acres_lidar_ros.errors import ConfigError


def run_bench(
    args: argparse.Namespace,
    load: Callable[..., tuple[Any, Any, Any]],
    tour: Callable[[Any, argparse.Namespace], Any],
    built_in_farms: dict[str, str],
) -> int:
    """Run ``acres-lidar bench``; ``load`` and ``tour`` are the CLI's sensor and scene loading and
    its built-in tour (``apps.cli``). The scans are packed in the sensors file's
    ``lidar.point_type`` (its driver's layout), the variant's with ``--labels`` in the labelled one."""
    from acres_lidar_ros.apps.cmd_bench import (
        against_setup,
        bench_lines,
        bench_scans,
        peak_memory_mb,
        plain_and_variant,
    )
    from acres_lidar_ros.outputs.json_files import json_text, jsonable
    from acres_lidar_ros.outputs.point_types import labelled_point_type, point_profile
    from acres_lidar_ros.runtime.startup import freeze_startup_objects

    if args.scaling or args.deadline_ms is not None or args.plot is not None or args.packets:
        from acres_lidar_ros.apps.scene_bench import run_scaling_bench

        return run_scaling_bench(args)
    if args.scans < 1:
        raise ConfigError(f"--scans {args.scans}: expected an integer >= 1")
    if not (math.isfinite(args.odom_hz) and 0.0 < args.odom_hz <= 1000.0):
        raise ConfigError(f"--odom-hz {args.odom_hz}: expected a rate > 0 and <= 1000 Hz")
    started = time.perf_counter()
    config, scene, scanner = load(args, need_lidar="bench")
    build_s = time.perf_counter() - started
    poses = tour(scene, args)
    freeze_startup_objects()  # as the node and record do
    what = f"lidar.point_type of {config.source}"
    profile = point_profile(config.point_type, what)  # the sensor's driver layout, which the config layer checked
    plain, variant = plain_and_variant(scanner, args.labels)
    variant_profile = labelled_point_type(profile, args.labels, what)
    against = None if args.against is None else against_setup(plain, args.against, built_in_farms.get(args.against))
    result = bench_scans(plain, poses, args.scans, profile, variant, variant_profile, against)
    result.update(
        sensor=args.sensor,
        point_type=profile.name,
        sub_rays=scanner.sub_rays,
        scene_triangles=scene.triangle_count,
        scene_build_s=build_s,
        peak_memory_mb=peak_memory_mb(),
    )
    if args.schedule:
        from acres_lidar_ros.runtime.simulate import run_schedule_benchmark

        result["schedule"] = run_schedule_benchmark(n_scans=600, odom_hz=args.odom_hz)
    if args.json:
        print(json_text(jsonable(result), indent=None, sort_keys=True), end="")
        return 0
    print("\n".join(bench_lines(result, args.sensor, args.scans)))
    if args.schedule:
        print(f"  schedule   {json_text(jsonable(result['schedule']), indent=None)}", end="")
    return 0
