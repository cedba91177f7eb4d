"""``acres-lidar self-table``: trace a URDF body into a self-return table and write its two files.

The generator (``body.self_table.generate_self_table``) returns the table and its statistics and
writes nothing; this command refuses existing files before it traces (unless ``--force``), writes
the table and ``<out>.json`` whole through ``outputs.files.atomic_write`` (both or neither), and
prints the statistics.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from acres_lidar_ros.body.urdf import BASE_LINK, LIDAR_LINK
from acres_lidar_ros.errors import OutputError


def add_self_table_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``acres-lidar self-table``."""
    parser.add_argument(
        "--urdf", required=True, type=Path, help="URDF (or .xacro) of the vehicle, with the base and lidar links"
    )
    parser.add_argument("--sensor", default="polaris", help="named sensor (polaris, default) or a sensors file")
    parser.add_argument(
        "--out", required=True, type=Path, help="table file (.f32); the statistics go to .json beside it"
    )
    parser.add_argument("--lidar-link", default=LIDAR_LINK, help=f"URDF link of the sensor (default: {LIDAR_LINK})")
    parser.add_argument(
        "--base-link",
        default=BASE_LINK,
        help=f"URDF link of the vehicle frame the mount and the poses are in (default: {BASE_LINK})",
    )
    parser.add_argument(
        "--mount-from-urdf",
        action="store_true",
        help="take the mount from the URDF and write <out>_sensors.json, the sensors overlay with it and the table",
    )
    parser.add_argument(
        "--body-return-max-m",
        type=float,
        metavar="M",
        help="farthest body return; farther body hits block without one (default: the spec's Polaris mask, 1.58 m)",
    )
    parser.add_argument("--force", action="store_true", help="overwrite existing files")


def overlay_path(out: Path) -> Path:
    """The sensors overlay ``--mount-from-urdf`` writes beside the table ``out``."""
    return out.with_name(f"{out.stem}_sensors.json")


def sensors_overlay(statistics: dict, sensor_source: str, out: Path) -> dict:
    """The sensors overlay of a table made with ``--mount-from-urdf``: the sensors file it extends
    (relative to the overlay), the URDF's mount and the table."""
    mount = statistics["mount"]
    return {
        "_comment": (
            f"Written by acres-lidar self-table --mount-from-urdf: the mount of link {mount['lidar_link']!r} on "
            f"{mount['base_link']!r} in {statistics['urdf']} and the self-return table traced from its body."
        ),
        "extends": os.path.relpath(Path(sensor_source).resolve(), out.parent.resolve()),
        "lidar": {
            "position_flu_m": mount["position_flu_m"],
            "rpy_deg": mount["rpy_deg"],
            "self_returns": out.name,
        },
    }


def run_self_table(args: argparse.Namespace) -> int:
    """Trace the URDF body (``body.self_table``), write the table and its statistics whole
    (``outputs``), print the statistics. The generator (scipy, Open3D) is imported here, not
    when the CLI builds its parser."""
    from acres_lidar_ros.body.self_table_gen import BODY_RETURN_MAX_M, generate_self_table
    from acres_lidar_ros.config.sensors import load_sensor_config
    from acres_lidar_ros.outputs.files import atomic_write, refuse_existing
    from acres_lidar_ros.outputs.json_files import json_key_lines, json_text

    started = time.perf_counter()
    out = Path(args.out)
    json_path = out.with_suffix(".json")
    paths = [out, json_path] + ([overlay_path(out)] if args.mount_from_urdf else [])
    if not args.force:  # refused before the trace, which takes seconds
        for path in paths:
            try:
                refuse_existing(path)
            except OutputError as exc:
                raise OutputError(f"{exc} (--force replaces it)") from exc
    config = load_sensor_config(args.sensor)
    table, s = generate_self_table(
        args.urdf,
        config,
        lidar_link=args.lidar_link,
        base_link=args.base_link,
        mount_from_urdf=args.mount_from_urdf,
        body_return_max_m=BODY_RETURN_MAX_M if args.body_return_max_m is None else args.body_return_max_m,
    )
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot create the directory of {out}: {exc.strerror or exc}") from exc
    # The statistics name the table file after the URDF and the sensor (the committed file's order).
    statistics = {"urdf": s["urdf"], "sensor": s["sensor"], "table": out.name} | s
    contents = [table.to_bytes(), json_key_lines(statistics).encode("utf-8")]
    if args.mount_from_urdf:
        contents.append(json_text(sensors_overlay(s, config.source, out)).encode("utf-8"))
    written: list[Path] = []
    try:
        for path, data in zip(paths, contents, strict=True):
            atomic_write(path, data, overwrite=args.force)
            written.append(path)
    except BaseException:
        if not args.force:
            for path in written:  # a new table without its statistics (or overlay): none is written
                path.unlink(missing_ok=True)
        raise
    elapsed_s = time.perf_counter() - started
    print(f"wrote {out} ({s['table_bytes']} bytes) and {json_path} in {elapsed_s:.1f} s")
    mount = s["mount"]
    print(
        f"mount: link {mount['lidar_link']} on {mount['base_link']} at position_flu_m {mount['position_flu_m']}, "
        f"rpy_deg {mount['rpy_deg']}"
    )
    if args.mount_from_urdf:
        print(f"wrote {paths[2]}: the sensors overlay with this mount and table (scan with --sensor {paths[2]})")
    print(
        f"cells with a body return: {s['cells_with_return']} of {s['cells']} at "
        f"{s['return_range_min_m']} m to {s['return_range_max_m']} m"
    )
    if s["body_return_max_m"] is not None:
        print(
            f"sub-ray hits beyond {s['body_return_max_m']} m that block without a return (--body-return-max-m): "
            f"{s['sub_ray_hits_beyond_return_max']}"
        )
    print(f"cells the body blocks in some scans: {s['cells_blocking']}")
    print(f"cells always body: {s['cells_always_body']}")
    print(f"expected body points per scan: {s['expected_body_points_per_scan']}")
    print(f"expected blocked beams per scan: {s['expected_blocked_beams_per_scan']}")
    print(f"nearest body range: {s['nearest_body_range_m']} m")
    return 0
