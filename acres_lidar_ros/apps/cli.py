"""``acres-lidar``: the simulator without ROS (one scan, a recorded drive, the benchmark, the body table)."""

from __future__ import annotations

import argparse
import math
import re
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

# Only light imports here: main() installs the signal handlers first, and everything heavy
# (numpy, the scene, numba) is imported after that, inside the commands.
from acres_lidar_ros.apps.argv import mark_negative_numbers
from acres_lidar_ros.apps.cmd_bag_repair import add_bag_repair_parser, cmd_bag_repair
from acres_lidar_ros.apps.cmd_bench_run import run_bench
from acres_lidar_ros.apps.cmd_recordings import RECORDINGS_COMMANDS, add_recordings_parsers
from acres_lidar_ros.apps.cmd_trajectory import (
    TRAJECTORY_NUMBER_OPTIONS,
    add_world_parsers,
    require_trajectory,
    warn_off_ground,
    world_command,
)
from acres_lidar_ros.apps.labels_cli import add_labels_argument, run_point_type
from acres_lidar_ros.apps.model_flags import add_model_arguments, make_scanner
from acres_lidar_ros.apps.output_flags import OUTPUT_NUMBER_OPTIONS, add_output_flags, apply_output_flags, preview_range
from acres_lidar_ros.apps.packet_flags import add_packet_flags, packet_sink
from acres_lidar_ros.apps.scene_frame_cli import (
    add_scene_frame_argument,
    positions_in_scene,
    scene_frame,
    tour_in_odom,
)
from acres_lidar_ros.apps.signals import StopSignals, exit_code
from acres_lidar_ros.apps.truth_cli import add_truth_argument, truth_summary
from acres_lidar_ros.config.schema import LIDAR_PARAM
from acres_lidar_ros.errors import AcresLidarError, ConfigError

if TYPE_CHECKING:
    from acres_lidar_ros.config.sensors import SensorConfig
    from acres_lidar_ros.outputs.point_types import PointProfile

#: ``--scene`` names of the built-in farms -> ``build_default_farm`` layout (its tour is the default).
BUILT_IN_FARMS = {"default": "v2", "farm-v1": "v1"}

#: The spec's -SensorLidar* options: command-line option -> sensors-file key it replaces.
SENSOR_OPTIONS = {
    "--hz": "hz",
    "--columns": "columns",
    "--rings": "rings",
    "--range": "range_m",
    "--return-mode": "return_mode",
    "--sub-rays": "sub_rays",
    "--divergence": "beam_divergence_mrad",
}
#: Options whose values are numbers, by how many values they take: their negative values
#: (``-1e6``) are values, not options (argparse alone reads ``-1e6`` as an option).
NUMBER_OPTIONS = {
    "--pose": 6,
    "--odom-in-scene": 6,
    "--rain": 1,
    "--visibility": 1,
    "--seed": 1,
    "--duration": 1,
    "--odom-hz": 1,
    "--scans": 1,
}
NUMBER_OPTIONS.update({option: 1 for option, key in SENSOR_OPTIONS.items() if LIDAR_PARAM[key].kind != "str"})
NUMBER_OPTIONS.update(OUTPUT_NUMBER_OPTIONS)
NUMBER_OPTIONS.update(TRAJECTORY_NUMBER_OPTIONS)

EXAMPLES = """\
examples:
  acres-lidar scan                                   one Polaris scan at the tour start -> runs/scan_<time>/
  acres-lidar scan --pose 120 -40 0.3 0 0 90 --format both --out runs/yard
  acres-lidar record --duration 20 --out runs/drive  drive the built-in farm tour, write a bag and PCD files
  acres-lidar record --trajectory my.tum --point-type XYZIRT --files none --rain 10
  acres-lidar trajectory --scene my.json --waypoints w.csv --speed 5 --out drive.tum   a drive on my terrain
  acres-lidar record --point-type velodyne --out runs/lio  clouds as LIO-SAM and FAST-LIO read them
  acres-lidar bench --scans 20 --json                per-stage ms against a bare Open3D cast
  acres-lidar bench --scaling --plot scaling.png     ns per ray against scene size, Embree vs brute force
  acres-lidar dataset --config my_dataset.json --out runs/dataset   drives as shards on Ray (docs/datasets.md)
  acres-lidar self-table --urdf urdf/polaris.urdf --sensor polaris --out /tmp/polaris_lidar_self.f32
  acres-lidar bag-repair runs/drive                  after a kill or a full disk: rebuild the bag's index
  acres-lidar materials --sensor default --wavelength 1550   the material table at 1550 nm
"""


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--sensor",
        default="polaris",
        metavar="NAME|FILE",
        help="sensors file, or a named sensor: polaris (default), default, or a shipped one (docs/sensors.md)",
    )
    parser.add_argument(
        "--scene",
        default="default",
        metavar="default|farm-v1|FILE",
        help="scene file (JSON, docs/scene_format.md), the built-in farm (default) or the first farm (farm-v1)",
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
    add_scene_frame_argument(parser)
    add_truth_argument(parser)
    add_labels_argument(parser)
    for option, key in SENSOR_OPTIONS.items():
        param = LIDAR_PARAM[key]
        unit = f" ({param.unit})" if param.unit else ""
        parser.add_argument(
            option,
            dest=f"lidar_{key}",
            metavar=key.upper() if not param.unit else param.unit.upper(),
            help=f"replaces lidar.{key}{unit} of the sensors file: {param.allowed()}",
        )


def _given_profile(args: argparse.Namespace) -> PointProfile | None:
    """The profile of ``--point-type`` (with ``--labels``), resolved before the scene is built
    (``ConfigError`` listing the profiles), or None without the option."""
    return None if args.point_type is None else run_point_type(args.point_type, args.labels)


def _run_profile(args: argparse.Namespace, config: SensorConfig, given: PointProfile | None) -> PointProfile:
    """The run's profile: ``given`` (``--point-type``), else the sensors file's ``lidar.point_type``
    (its driver's layout, which the config layer checked) with ``--labels``."""
    if given is not None:
        return given
    return run_point_type(config.point_type, args.labels, f"lidar.point_type of {config.source}")


def _add_point_type(parser: argparse.ArgumentParser, what: str) -> None:
    from acres_lidar_ros.outputs.point_types import PROFILES  # numpy: after the handlers

    help_ = f"point layout of {what} (docs/outputs.md; default: the sensors file's lidar.point_type, its driver's)"
    parser.add_argument("--point-type", default=None, metavar="|".join(PROFILES), help=help_)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="acres-lidar",
        description="Ray-traced LiDAR simulator of the Polaris vehicle's RoboSense Helios, without ROS.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(
        dest="command",
        required=True,
        metavar="{scan,record,trajectory,scene-preview,cloud-to-scene,bench,self-table,bag-repair,materials,dataset}",
    )

    scan = sub.add_parser(
        "scan",
        help="one scan at a pose, sensor at rest",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_common(scan)
    add_model_arguments(scan)
    add_output_flags(scan)
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
    add_model_arguments(record)
    add_output_flags(record)
    record.add_argument(
        "--trajectory",
        default="default",
        metavar="default|FILE.tum",
        help="base_footprint poses in the world (TUM: t x y z qx qy qz qw); default: the farm tour",
    )
    record.add_argument("--duration", type=float, metavar="S", help="seconds to record (default: whole trajectory)")
    record.add_argument(
        "--still-start",
        type=float,
        default=0.0,
        metavar="S",
        help="wait S s at the first pose (an IMU's rest: docs/imu.md)",
    )
    record.add_argument("--out", type=Path, help="new run directory (default runs/record_<UTC time>)")
    _add_point_type(record, "/lidar/points and the PCD files")
    record.add_argument("--files", choices=("pcd", "ply", "both", "none"), help="point files (default: lidar.output)")
    record.add_argument("--boxes", type=Path, metavar="FILE", help="other vehicles: a box-tracks JSON file")
    record.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_packet_flags(record)
    record.add_argument("--imu", nargs="?", const="default", metavar="FILE", help="an IMU in the bag: docs/imu.md")

    add_world_parsers(sub)
    bench = sub.add_parser("bench", help="per-stage milliseconds against a bare Open3D cast")
    _add_common(bench)
    from acres_lidar_ros.apps.bench_args import add_bench_arguments
    from acres_lidar_ros.apps.scene_bench import add_scaling_arguments

    add_bench_arguments(bench)

    add_scaling_arguments(bench)

    add_bag_repair_parser(sub)

    from acres_lidar_ros.apps.cmd_self_table import add_self_table_arguments

    add_self_table_arguments(sub.add_parser("self-table", help="generate the self-return table from a URDF body"))

    from acres_lidar_ros.apps.cmd_materials import add_materials_arguments

    add_materials_arguments(sub.add_parser("materials", help="the material table at a wavelength, 400 to 2500 nm"))
    from acres_lidar_ros.apps.cmd_dataset import add_dataset_parser

    add_dataset_parser(sub)
    add_recordings_parsers(sub)
    return parser


def _options(args):
    from acres_lidar_ros.scan.scan_types import ScanOptions

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
        truth=args.truth,
    )


def _command_value(text: str, kind: str) -> object:
    """A command-line value in the JSON type a sensors file would give, for the schema to judge:
    ``"10"`` -> 10, ``"1e3"`` -> 1000.0 (an integer key refuses it, as in the file), ``"x"`` -> "x"."""
    if kind == "str":
        return text
    if re.fullmatch(r"\s*[+-]?\d+\s*", text):
        from acres_lidar_ros.config.input_files import parse_integer

        return parse_integer(text)  # as the JSON reader: beyond int64 it is no number
    try:
        return float(text)
    except ValueError:
        return text


def sensor_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The sensors-file keys the -SensorLidar* options replace, as given (validated by the schema)."""
    overrides = {}
    for key in SENSOR_OPTIONS.values():
        text = getattr(args, f"lidar_{key}", None)
        if text is not None:
            overrides[key] = _command_value(text, LIDAR_PARAM[key].kind)
    return overrides


def apply_sensor_overrides(config: SensorConfig, overrides: dict[str, Any]) -> SensorConfig:
    """``config`` with the options' keys replaced; a bad value gets the sensors file's message, after the option."""
    option_of = {key: option for option, key in SENSOR_OPTIONS.items()}
    for key, value in overrides.items():
        try:
            LIDAR_PARAM[key].validate(value, f"lidar.{key}")
        except ConfigError as exc:
            raise ConfigError(f"{option_of[key]} {value}: {exc}") from exc
    rings = overrides.get("rings")
    table = config.effective["lidar"].get("elevations_deg")
    if rings is not None and table is not None and rings != len(table):
        raise ConfigError(
            f"--rings {rings}: lidar.rings = {rings}, but the sensors file {config.source} sets {len(table)} rings "
            f"with lidar.elevations_deg: expected --rings {len(table)}, or a sensors file without an elevation table"
        )
    if not overrides:
        return config
    try:
        return config.with_overrides(overrides)
    except ConfigError as exc:
        given = " ".join(f"{option_of[k]} {v}" for k, v in overrides.items())
        raise ConfigError(f"{given}: {exc}") from exc


def _load(args, overrides: dict | None = None, need_lidar: str = ""):
    """Sensor config, scene and scanner; reports the scene build time on stderr.

    ``need_lidar``: the command's name when it has nothing to do without the LiDAR; then
    ``lidar.enabled: false`` is refused before the scene is built."""
    from acres_lidar_ros.body.self_returns import sensor_self_table
    from acres_lidar_ros.config.sensors import load_sensor_config
    from acres_lidar_ros.scene.farm_v1 import build_default_farm
    from acres_lidar_ros.scene.scene_file import load_scene
    from acres_lidar_ros.tracing.trace import Tracer

    options = _options(args)
    config = apply_sensor_overrides(load_sensor_config(args.sensor), {**sensor_overrides(args), **(overrides or {})})
    config = apply_output_flags(config, args)
    if not config.enabled:
        if need_lidar:
            raise ConfigError(
                f"lidar.enabled is false in {config.source}: the LiDAR is off, so {need_lidar} has nothing to do; "
                "set lidar.enabled to true"
            )
        print(
            f"lidar.enabled is false in {config.source}: recording no LiDAR (odometry, /tf, /clock and the "
            "trajectory only)",
            file=sys.stderr,
        )
    started = time.perf_counter()
    layout = BUILT_IN_FARMS.get(args.scene)
    scene = build_default_farm(seed=0, layout=layout) if layout else load_scene(Path(args.scene))
    built = time.perf_counter()
    tracer = Tracer(scene, T_scene_odom=scene_frame(args))
    traced = time.perf_counter()
    print(
        f"scene: {f'built-in farm {layout}' if layout else args.scene}, {scene.triangle_count} triangles, "
        f"generated in {built - started:.2f} s, Embree structure in {traced - built:.2f} s",
        file=sys.stderr,
    )
    self_table = sensor_self_table(config) if options.self_returns else None
    return config, scene, make_scanner(args, config, options, tracer, self_table)


def _tour(scene, args: argparse.Namespace):
    from acres_lidar_ros.scene.tour import default_tour
    from acres_lidar_ros.sensor.poses import PoseHistory

    times, positions, quaternions = default_tour(scene, layout=BUILT_IN_FARMS.get(args.scene, "v2"))
    positions, quaternions = tour_in_odom(args, positions, quaternions)
    return PoseHistory.from_arrays(times, positions, quaternions, where="built-in tour")


def _run_dir(out: Path | None, command: str) -> Path:
    if out is not None:
        return out
    return Path("runs") / f"{command}_{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%SZ')}"


def _stopped(args: argparse.Namespace) -> int | None:
    """The exit status when a stop signal came (``128 + signal``), else None."""
    stop: StopSignals = args._stop
    return None if stop.requested is None else exit_code(stop.requested)


def cmd_scan(args: argparse.Namespace) -> int:
    import numpy as np

    from acres_lidar_ros.apps.cmd_record import single_scan
    from acres_lidar_ros.sensor.poses import pose_matrix

    given = _given_profile(args)
    config, scene, scanner = _load(args, need_lidar="scan")
    profile = _run_profile(args, config, given)
    if (code := _stopped(args)) is not None:
        print(f"acres-lidar scan: stopped by {args._stop.name} before the scan; nothing written", file=sys.stderr)
        return code
    if args.pose is not None:
        values = np.asarray(args.pose, dtype=np.float64)
        if not np.isfinite(values).all():
            raise ConfigError(f"--pose {args.pose}: expected six finite numbers X Y Z (m) ROLL PITCH YAW (deg)")
        T_world_base = pose_matrix(values[:3], np.deg2rad(values[3:]))
        warn_off_ground(scene, positions_in_scene(args, values[None, :3]), "--pose")
    else:
        tour = _tour(scene, args)
        T_world_base = tour.transforms([tour.start_s])[0]
    out = _run_dir(args.out, "scan")
    scan = single_scan(
        scanner,
        T_world_base,
        out,
        files=args.format or config.output,
        run=vars_for_json(args),
        profile=profile,
        labels=args.labels,
        preview_range_m=preview_range(args, config),
    )
    print(f"{int(scan.returns.valid.sum())} points of {scan.columns * scan.rings} beams -> {out}")
    if scan.truth is not None:
        print(truth_summary(scan))
    if (code := _stopped(args)) is not None:
        print(
            f"acres-lidar scan: stopped by {args._stop.name}; the scan in work was finished -> {out}", file=sys.stderr
        )
        return code
    return 0


def cmd_record(args: argparse.Namespace) -> int:
    from acres_lidar_ros.apps.cmd_record import record_drive
    from acres_lidar_ros.outputs.tum import read_tum
    from acres_lidar_ros.runtime.startup import freeze_startup_objects
    from acres_lidar_ros.sensor.poses import PoseHistory, check_still_start, with_still_start

    if args.duration is not None and not (math.isfinite(args.duration) and args.duration > 0):
        raise ConfigError(f"--duration {args.duration}: expected a number of seconds > 0")
    check_still_start(args.still_start)
    given = _given_profile(args)
    require_trajectory(args, BUILT_IN_FARMS)
    config, scene, scanner = _load(args)
    profile = _run_profile(args, config, given)
    if (code := _stopped(args)) is not None:
        print(f"acres-lidar record: stopped by {args._stop.name} before the drive; nothing written", file=sys.stderr)
        return code
    if args.trajectory == "default":
        trajectory = _tour(scene, args)
    else:
        times, positions, quaternions = read_tum(Path(args.trajectory))
        trajectory = PoseHistory.from_arrays(times, positions, quaternions, where=args.trajectory)
        warn_off_ground(scene, positions_in_scene(args, positions), f"--trajectory {args.trajectory}", times)
    if args.still_start:
        trajectory = with_still_start(trajectory, args.still_start)
    boxes_at, track_ids = None, []
    if args.boxes is not None:
        from acres_lidar_ros.scene.box_tracks import load_box_tracks

        tracks = load_box_tracks(args.boxes)
        boxes_at, track_ids = tracks.boxes_at, [track.object_id for track in tracks.tracks]
    bar = progress = None
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
            profile=profile,
            files=args.files or config.output,
            boxes_at=boxes_at,
            run=vars_for_json(args),
            progress=progress,
            should_stop=lambda: args._stop.requested is not None,
            labels=args.labels,
            vehicle_object_ids=track_ids,
            packets=packet_sink(args, config),  # its refusals come before the run directory
            imu=args.imu,
            preview_range_m=preview_range(args, config),
        )
    finally:
        if bar is not None:
            bar.close()
    print(f"{summary.line()} -> {out}")
    if (code := _stopped(args)) is not None:
        print(
            f"acres-lidar record: stopped by {args._stop.name} after {summary.scans} scans; "
            f"bag and files closed -> {out}",
            file=sys.stderr,
        )
        return code
    return 0


def cmd_self_table(args: argparse.Namespace) -> int:
    from acres_lidar_ros.apps.cmd_self_table import run_self_table

    return run_self_table(args)


def cmd_dataset(args: argparse.Namespace) -> int:
    from acres_lidar_ros.apps.cmd_dataset import cmd_dataset as run_dataset_command

    return run_dataset_command(args)


def vars_for_json(args: argparse.Namespace) -> dict[str, Any]:
    """The command line's values as plain JSON data, for the run's ``config.json``."""
    from acres_lidar_ros.outputs.json_files import jsonable

    return jsonable({k: v for k, v in vars(args).items() if not k.startswith("_")})


def cmd_materials(args: argparse.Namespace) -> int:
    from acres_lidar_ros.apps.cmd_materials import run_materials

    return run_materials(args)


COMMANDS = {
    "scan": cmd_scan,
    "record": cmd_record,
    "bench": lambda a: run_bench(a, _load, _tour, BUILT_IN_FARMS),
    "self-table": cmd_self_table,
    "bag-repair": cmd_bag_repair,
    "materials": cmd_materials,
    "dataset": cmd_dataset,
    **{c: lambda a: world_command(a, BUILT_IN_FARMS) for c in ("trajectory", "scene-preview", "cloud-to-scene")},
    **RECORDINGS_COMMANDS,
    "export": cmd_dataset,  # apps.cmd_dataset adds and runs export too
}


def protect_negative_numbers(argv: list[str]) -> list[str]:
    """``argv`` with the negative values of ``NUMBER_OPTIONS`` marked as values (``apps.argv``)."""
    return mark_negative_numbers(argv, NUMBER_OPTIONS)


def main(argv: list[str] | None = None) -> int:
    """The program (``argv`` None: ``sys.argv``), or one command in a running process (a list)."""
    # First thing: SIGINT, SIGTERM and SIGHUP only set a flag from here on (apps/signals.py), so a Ctrl-C never
    # raises inside an import or a compiled kernel; record and scan stop between scans. As the program, the
    # handlers stay until the process has exited; called with a list, main puts the caller's handlers back.
    with StopSignals("acres-lidar", restore=argv is not None) as stop:
        parser = build_parser()
        args = parser.parse_args(protect_negative_numbers(sys.argv[1:] if argv is None else argv))
        stop.prog = f"acres-lidar {args.command}"
        args._stop = stop
        try:
            code = COMMANDS[args.command](args)
        except AcresLidarError as exc:
            print(f"acres-lidar {args.command}: error: {exc}", file=sys.stderr)
            for note in getattr(exc, "__notes__", ()):
                print(f"  {note}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:  # where no handler could be installed (not the main thread)
            print(f"acres-lidar {args.command}: interrupted; files written so far are complete", file=sys.stderr)
            return 130
        if stop.requested is not None and code == 0:
            print(f"acres-lidar {args.command}: stopped by {stop.name}", file=sys.stderr)
            return exit_code(stop.requested)
        return code


if __name__ == "__main__":
    sys.exit(main())
