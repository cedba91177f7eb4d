"""``acres-lidar self-table``: trace a URDF body into a self-return table and write its two files.

The generator (``body.self_table.generate_self_table``) returns the table and its statistics and
writes nothing; this command refuses existing files before it traces (unless ``--force``), writes
the table and ``<out>.json`` whole through ``outputs.files.atomic_write`` (both or neither), and
prints the statistics.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from acres_lidar_ros.body.urdf import LIDAR_LINK
from acres_lidar_ros.errors import OutputError


def add_self_table_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``acres-lidar self-table``."""
    parser.add_argument("--urdf", required=True, type=Path, help="URDF of the vehicle (links base_footprint and lidar)")
    parser.add_argument("--sensor", default="polaris", help="named sensor (polaris, default) or a sensors file")
    parser.add_argument(
        "--out", required=True, type=Path, help="table file (.f32); the statistics go to .json beside it"
    )
    parser.add_argument("--lidar-link", default=LIDAR_LINK, help=f"URDF link of the sensor (default: {LIDAR_LINK})")
    parser.add_argument("--force", action="store_true", help="overwrite existing files")


def run_self_table(args: argparse.Namespace) -> int:
    """Trace the URDF body (``body.self_table``), write the table and its statistics whole
    (``outputs``), print the statistics. The generator (scipy, Open3D) is imported here, not
    when the CLI builds its parser."""
    from acres_lidar_ros.body.self_table_gen import generate_self_table
    from acres_lidar_ros.outputs.files import atomic_write, refuse_existing
    from acres_lidar_ros.outputs.json_files import json_key_lines

    started = time.perf_counter()
    out = Path(args.out)
    json_path = out.with_suffix(".json")
    if not args.force:  # refused before the trace, which takes seconds
        for path in (out, json_path):
            try:
                refuse_existing(path)
            except OutputError as exc:
                raise OutputError(f"{exc} (--force replaces it)") from exc
    table, s = generate_self_table(args.urdf, args.sensor, lidar_link=args.lidar_link)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot create the directory of {out}: {exc.strerror or exc}") from exc
    # The statistics name the table file after the URDF and the sensor (the committed file's order).
    statistics = {"urdf": s["urdf"], "sensor": s["sensor"], "table": out.name} | s
    atomic_write(out, table.to_bytes(), overwrite=args.force)
    try:
        atomic_write(json_path, json_key_lines(statistics).encode("utf-8"), overwrite=args.force)
    except BaseException:
        if not args.force:
            out.unlink(missing_ok=True)  # a new table without its statistics: neither is written
        raise
    elapsed_s = time.perf_counter() - started
    print(f"wrote {out} ({s['table_bytes']} bytes) and {json_path} in {elapsed_s:.1f} s")
    print(
        f"cells with a body return: {s['cells_with_return']} of {s['cells']} at "
        f"{s['return_range_min_m']} m to {s['return_range_max_m']} m"
    )
    print(f"cells the body blocks in some scans: {s['cells_blocking']}")
    print(f"cells always body: {s['cells_always_body']}")
    print(f"expected body points per scan: {s['expected_body_points_per_scan']}")
    print(f"expected blocked beams per scan: {s['expected_blocked_beams_per_scan']}")
    print(f"nearest body range: {s['nearest_body_range_m']} m")
    return 0
