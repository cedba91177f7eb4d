"""``acres-lidar``: the simulator without ROS (one scan, a recorded drive, the benchmark, the body table)."""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from acres_lidar_ros.errors import AcresLidarError, ConfigError

EXAMPLES = """\
examples:
  acres-lidar scan                                   one Polaris scan at the tour start -> runs/scan_<time>/
  acres-lidar scan --pose 120 -40 0.3 0 0 90 --format both --out runs/yard
  acres-lidar record --duration 20 --out runs/drive  drive the built-in farm tour, write a bag and PCD files
  acres-lidar record --trajectory my.tum --point-type XYZIRT --files none --rain 10
  acres-lidar record --point-type velodyne --out runs/lio  clouds as LIO-SAM and FAST-LIO read them
  acres-lidar bench --scans 20 --json                per-stage ms against a bare Open3D cast
  acres-lidar self-table --urdf urdf/polaris.urdf --sensor polaris --out /tmp/polaris_lidar_self.f32
"""


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--sensor",
        default="polaris",
        metavar="polaris|default|FILE",
        help="sensors file or a named sensor (default: polaris)",
    )
    parser.add_argument(
        "--scene",
        default="default",
        metavar="default|FILE",
        help="scene file (JSON, docs/scene_format.md) or the built-in farm (default)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the noise streams and hashes (default 0)")
    parser.add_argument("--rain", type=float, default=0.0, metavar="MM_PER_H", help="rain rate, 0 to 500 mm/h")
    parser.add_argument(
        "--visibility",
        type=float,
        default=math.inf,
        metavar="M",
        help="meteorological visibility, >= 10 m (default: clear air)",
    )
    parser.add_argument("--no-noise", action="store_true", help="no signal or range noise (-SensorNoNoise)")
    parser.add_argument("--no-weather", action="store_true", help="no rain and no fog (-SensorLidarNoWeather)")
    parser.add_argument("--no-motion", action="store_true", help="no motion distortion (-SensorLidarNoMotion)")
    parser.add_argument("--ideal", action="store_true", help="no motion distortion and no weather; noise stays")
    parser.add_argument(
        "--no-radiometry",
        action="store_true",
        help="every nearest in-range hit is a return (ACRES Core's planar/no-radiometry mode)",
    )
    parser.add_argument("--solid-foliage", action="store_true", help="foliage stops beams instead of passing them")
    parser.add_argument("--no-self-returns", action="store_true", help="leave the vehicle's body out of its scans")


def _add_point_type(parser: argparse.ArgumentParser, what: str) -> None:
    from acres_lidar_ros.outputs.point_types import PROFILES

    parser.add_argument(
        "--point-type",
        default="XYZI",
        metavar="|".join(PROFILES),
        help=f"point layout of {what} (docs/outputs.md; default XYZI, the vehicle's rslidar_sdk layout)",
    )


def _check_point_type(args) -> None:
    from acres_lidar_ros.outputs.point_types import point_profile

    point_profile(args.point_type)  # ConfigError listing the profiles


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="acres-lidar",
        description="Ray-traced LiDAR simulator of the Polaris vehicle's RoboSense Helios, without ROS.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="{scan,record,bench,self-table}")

    scan = sub.add_parser(
        "scan",
        help="one scan at a pose, sensor at rest",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_common(scan)
    scan.add_argument(
        "--pose",
        nargs=6,
        type=float,
        metavar=("X", "Y", "Z", "ROLL", "PITCH", "YAW"),
        help="base_footprint in the world: metres and degrees (default: the tour's start)",
    )
    scan.add_argument("--out", type=Path, help="new run directory (default runs/scan_<UTC time>)")
    scan.add_argument(
        "--format",
        choices=("pcd", "ply", "both"),
        help="point files (default: the sensors file's lidar.output; pcd for the Polaris)",
    )
    _add_point_type(scan, "the PCD file")

    record = sub.add_parser(
        "record",
        help="drive a trajectory and record a rosbag2 and files",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_common(record)
    record.add_argument(
        "--trajectory",
        default="default",
        metavar="default|FILE.tum",
        help="base_footprint poses in the world (TUM: t x y z qx qy qz qw); default: the farm tour",
    )
    record.add_argument("--duration", type=float, metavar="S", help="seconds to record (default: whole trajectory)")
    record.add_argument("--out", type=Path, help="new run directory (default runs/record_<UTC time>)")
    _add_point_type(record, "/lidar/points and the PCD files")
    record.add_argument(
        "--files",
        choices=("pcd", "ply", "both", "none"),
        help="point files per scan (default: the sensors file's lidar.output; pcd for the Polaris)",
    )
    record.add_argument("--boxes", type=Path, metavar="FILE", help="other vehicles: a box-tracks JSON file")
    record.add_argument("--no-progress", action="store_true", help="no progress bar")

    bench = sub.add_parser("bench", help="per-stage milliseconds against a bare Open3D cast")
    _add_common(bench)
    bench.add_argument("--scans", type=int, default=20, help="scans to time (default 20)")
    bench.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    bench.add_argument("--sub-rays", type=int, choices=(1, 7), help="override the sensor's sub-rays per beam")
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

    table = sub.add_parser("self-table", help="generate the self-return table from a URDF body")
    try:
        from acres_lidar_ros.body.self_table import add_self_table_arguments
    except ImportError as exc:  # the generator module is optional at import time of the CLI
        table.set_defaults(_missing=str(exc))
    else:
        add_self_table_arguments(table)
    return parser


def _options(args):
    from acres_lidar_ros.scan import ScanOptions

    return ScanOptions(
        noise=not args.no_noise,
        foliage=not args.solid_foliage,
        radiometry=not args.no_radiometry,
        self_returns=not args.no_self_returns,
        motion_distortion=False if args.no_motion else None,
        weather=not args.no_weather,
        rain_mm_per_h=args.rain,
        visibility_m=args.visibility,
        seed=args.seed,
        ideal=args.ideal,
    )


def _load(args, overrides: dict | None = None):
    """Sensor config, scene and scanner; reports the scene build time on stderr."""
    from acres_lidar_ros.config.sensors import load_sensor_config
    from acres_lidar_ros.scan import Scanner
    from acres_lidar_ros.scene import build_default_farm, load_scene
    from acres_lidar_ros.tracing.trace import Tracer

    options = _options(args)
    config = load_sensor_config(args.sensor)
    if overrides:
        config = config.with_overrides(overrides)
    started = time.perf_counter()
    scene = build_default_farm(seed=0) if args.scene == "default" else load_scene(Path(args.scene))
    built = time.perf_counter()
    tracer = Tracer(scene)
    traced = time.perf_counter()
    print(
        f"scene: {'built-in farm' if args.scene == 'default' else args.scene}, {scene.triangle_count} triangles, "
        f"generated in {built - started:.2f} s, Embree structure in {traced - built:.2f} s",
        file=sys.stderr,
    )
    return config, scene, Scanner(config, options=options, tracer=tracer)


def _tour(scene):
    from acres_lidar_ros.scene import default_tour
    from acres_lidar_ros.sensor.poses import PoseHistory

    times, positions, quaternions = default_tour(scene)
    return PoseHistory.from_arrays(times, positions, quaternions, where="built-in tour")


def _run_dir(out: Path | None, command: str) -> Path:
    if out is not None:
        return out
    return Path("runs") / f"{command}_{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%SZ')}"


def cmd_scan(args) -> int:
    from acres_lidar_ros.apps.recorder import single_scan
    from acres_lidar_ros.sensor.poses import pose_matrix

    _check_point_type(args)
    config, scene, scanner = _load(args)
    if args.pose is not None:
        values = np.asarray(args.pose, dtype=np.float64)
        if not np.isfinite(values).all():
            raise ConfigError(f"--pose {args.pose}: expected six finite numbers X Y Z (m) ROLL PITCH YAW (deg)")
        T_world_base = pose_matrix(values[:3], np.deg2rad(values[3:]))
    else:
        T_world_base = _tour(scene).transforms([_tour(scene).start_s])[0]
    out = _run_dir(args.out, "scan")
    scan = single_scan(
        scanner,
        T_world_base,
        out,
        files=args.format or config.output,
        run=vars_for_json(args),
        point_type=args.point_type,
    )
    print(f"{int(scan.returns.valid.sum())} points of {scan.columns * scan.rings} beams -> {out}")
    return 0


def cmd_record(args) -> int:
    from acres_lidar_ros.apps.recorder import record_drive
    from acres_lidar_ros.outputs.tum import read_tum
    from acres_lidar_ros.scan import freeze_startup_objects
    from acres_lidar_ros.sensor.poses import PoseHistory

    if args.duration is not None and not (math.isfinite(args.duration) and args.duration > 0):
        raise ConfigError(f"--duration {args.duration}: expected a number of seconds > 0")
    _check_point_type(args)
    config, scene, scanner = _load(args)
    if args.trajectory == "default":
        trajectory = _tour(scene)
    else:
        times, positions, quaternions = read_tum(Path(args.trajectory))
        trajectory = PoseHistory.from_arrays(times, positions, quaternions, where=args.trajectory)
    boxes_at = None
    if args.boxes is not None:
        from acres_lidar_ros.scene.box_tracks import load_box_tracks

        boxes_at = load_box_tracks(args.boxes).boxes_at
    bar = None
    progress = None
    if not args.no_progress:
        from tqdm import tqdm

        bar = tqdm(unit="scan", file=sys.stderr, dynamic_ncols=True)

        def progress(done: int, total: int) -> None:
            bar.total = total
            bar.update(done - bar.n)

    out = _run_dir(args.out, "record")
    freeze_startup_objects()  # scene and modules loaded: full collections stay short
    try:
        summary = record_drive(
            scanner,
            trajectory,
            out,
            duration_s=args.duration,
            point_type=args.point_type,
            files=args.files or config.output,
            boxes_at=boxes_at,
            run=vars_for_json(args),
            progress=progress,
        )
    finally:
        if bar is not None:
            bar.close()
    print(f"{summary.line()} -> {out}")
    return 0


def cmd_bench(args) -> int:
    from acres_lidar_ros.apps.bench import bench_scans, peak_memory_mb
    from acres_lidar_ros.scan import freeze_startup_objects

    if args.scans < 1:
        raise ConfigError(f"--scans {args.scans}: expected an integer >= 1")
    if not (math.isfinite(args.odom_hz) and 0.0 < args.odom_hz <= 1000.0):
        raise ConfigError(f"--odom-hz {args.odom_hz}: expected a rate > 0 and <= 1000 Hz")
    started = time.perf_counter()
    _config, scene, scanner = _load(args, {"sub_rays": args.sub_rays} if args.sub_rays else None)
    build_s = time.perf_counter() - started
    tour = _tour(scene)
    freeze_startup_objects()  # as the node and record do
    result = bench_scans(scanner, tour, n_scans=args.scans)
    result.update(
        sensor=args.sensor,
        sub_rays=scanner.sub_rays,
        scene_triangles=scene.triangle_count,
        scene_build_s=build_s,
        peak_memory_mb=peak_memory_mb(),
    )
    if args.schedule:
        from acres_lidar_ros.runtime.scheduler import run_schedule_benchmark

        result["schedule"] = run_schedule_benchmark(n_scans=600, odom_hz=args.odom_hz)
    if args.json:
        print(json.dumps(result, sort_keys=True))
        return 0
    print(
        f"sensor {args.sensor}: {result['rays_per_scan']} rays per scan, {args.scans} scans, "
        f"scene {result['scene_triangles']} triangles built in {build_s:.2f} s"
    )
    for key in ("rays_ms", "trace_ms", "returns_ms", "points_ms", "packing_ms"):
        print(f"  {key[:-3]:<10} {result[key + '_median']:8.2f} ms (median)")
    print(f"  scan       {result['scan_ms_median']:8.2f} ms (median), p90 {result['scan_ms_p90']:.2f} ms")
    print(f"  bare cast  {result['bare_cast_ms_median']:8.2f} ms (median)")
    print(f"  ratio      {result['ratio']:8.2f} (scan / bare cast)")
    print(f"  peak memory {result['peak_memory_mb']:.0f} MiB; {result['points_per_scan_median']:.0f} points per scan")
    if args.schedule:
        print(f"  schedule   {json.dumps(result['schedule'])}")
    return 0


def cmd_self_table(args) -> int:
    if hasattr(args, "_missing"):
        raise ConfigError(f"self-table is not available: {args._missing}")
    from acres_lidar_ros.body.self_table import run_self_table

    return run_self_table(args)


def vars_for_json(args) -> dict:
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if not k.startswith("_")}


COMMANDS = {"scan": cmd_scan, "record": cmd_record, "bench": cmd_bench, "self-table": cmd_self_table}


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except AcresLidarError as exc:
        print(f"acres-lidar {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"acres-lidar {args.command}: interrupted; files written so far are complete", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
