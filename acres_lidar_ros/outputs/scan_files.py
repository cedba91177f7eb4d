"""The files of one scan in a session folder, as the spec lays them out.

``<session>/lidar/scan_<time>.ply`` (all returns) and/or ``.pcd`` (organised cloud) by
``lidar.output``, ``<session>/lidar/scan_<time>.png`` (top view), ``<session>/lidar/scan_<time>.truth.npz`` for a
scan with its cell truth (``outputs.truth``), then one row appended to ``<session>/lidar.jsonl``. The time is the scan stamp in microseconds. The row is appended only
after the scan's files exist (spec "Delay": the recorder releases the row when the files exist).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from acres_lidar_ros.errors import ConfigError, OutputError
from acres_lidar_ros.outputs.files import scan_file_stem
from acres_lidar_ros.outputs.json_files import append_jsonl
from acres_lidar_ros.outputs.pcd import write_pcd
from acres_lidar_ros.outputs.ply import write_ply
from acres_lidar_ros.outputs.preview import render_top_view, write_png
from acres_lidar_ros.outputs.preview_overlay import scale_bar_length_m
from acres_lidar_ros.outputs.records import scan_row
from acres_lidar_ros.outputs.shaping import ShapedScan
from acres_lidar_ros.outputs.truth_cloud import truth_file_name, write_truth_npz
from acres_lidar_ros.scan.scan_types import Scan

OUTPUT_MODES = ("ply", "pcd", "both")
#: The preview's range when none is given: from the sensor to the image's edges, m.
PREVIEW_RANGE_M = 40.0
SCAN_FOLDER = "lidar"
JSONL_NAME = "lidar.jsonl"


def write_scan_files(
    session_dir: str | os.PathLike[str],
    scan: Scan,
    output: str,
    *,
    delay_s: float,
    period_s: float,
    T_world_sensor_stamp: np.ndarray | None = None,
    preview: bool = True,
    cloud: np.ndarray | None = None,
    pose_coverage: str = "covered",
    shaped: ShapedScan | None = None,
    labels: bool = False,
    preview_range_m: float = PREVIEW_RANGE_M,
) -> dict[str, Any]:
    """Write a scan's point files and preview, then append its ``lidar.jsonl`` row.

    Parameters
    ----------
    session_dir : path
        Existing session folder; ``lidar/`` is created in it when missing.
    scan : Scan
    output : {"ply", "pcd", "both"}
        ``lidar.output``.
    delay_s, period_s : float
        ``lidar.delay_s`` and the scan period, s (see ``records.scan_row``).
    T_world_sensor_stamp : (4, 4) float64, optional
        Sensor pose at the stamp for the row.
    preview : bool
        Write the 384 x 384 px top view, with its legend and scale bar.
    preview_range_m : float
        The preview's range, from the sensor to the image's edges, m (> 0); its range circles are
        half a scale bar apart (10 m at the default 40 m).
    cloud : (height, width) structured array, optional
        The PCD's cloud (``layouts.point_cloud`` of the run's point type; default the spec's
        organised ``XYZI``), e.g. when the caller has made it already (a recording made it for
        the bag), so the PCD does not make it again.
    pose_coverage : str
        How the poses covered the sweep, for the row (``records.scan_row``).
    shaped : ShapedScan, optional
        The scan in its output frame and coordinates (``shaping.shape_scan``) for the PLY;
        default the scan as traced (sensor frame, Cartesian).
    labels : bool
        The PLY file carries each point's instance label (``ply.write_ply``).

    Returns
    -------
    The row appended to ``lidar.jsonl``; its ``files`` are relative to ``session_dir``.

    Raises
    ------
    ConfigError
        ``output`` is not one of ``OUTPUT_MODES``.
    OutputError
        ``session_dir`` is missing, or a file of this scan exists already (no row is appended).
    """
    if output not in OUTPUT_MODES:
        raise ConfigError(f"lidar.output {output!r} is not an output mode; allowed: {', '.join(OUTPUT_MODES)}")
    session_dir = Path(session_dir)
    if not session_dir.is_dir():
        raise OutputError(f"session folder {session_dir} does not exist")
    scan_dir = session_dir / SCAN_FOLDER
    try:
        scan_dir.mkdir(exist_ok=True)
    except OSError as error:
        raise OutputError(f"cannot create {scan_dir}: {error}") from error
    stem = scan_file_stem(scan.stamp_ns)
    files = []
    if output in ("ply", "both"):
        files.append(write_ply(scan_dir / f"{stem}.ply", scan if shaped is None else shaped, labels))
    if output in ("pcd", "both"):
        files.append(write_pcd(scan_dir / f"{stem}.pcd", scan, cloud))
    if preview:
        if not (np.isfinite(preview_range_m) and preview_range_m > 0):
            raise ConfigError(f"preview_range_m {preview_range_m!r}: allowed a finite range > 0 m")
        image = render_top_view(
            scan,
            half_width_m=preview_range_m,
            ring_spacing_m=scale_bar_length_m(preview_range_m) / 2.0,
            legend=True,
            scale_bar=True,
        )
        files.append(write_png(scan_dir / f"{stem}.png", image))
    if scan.truth is not None:
        files.append(write_truth_npz(scan_dir / truth_file_name(stem), scan))
    row = scan_row(
        scan,
        delay_s,
        period_s,
        T_world_sensor_stamp=T_world_sensor_stamp,
        files=[path.relative_to(session_dir).as_posix() for path in files],
        pose_coverage=pose_coverage,
    )
    append_jsonl(session_dir / JSONL_NAME, row)
    return row


def write_truth_file(session_dir: str | os.PathLike[str], scan: Scan) -> Path:
    """Write a scan's ``lidar/scan_<time>.truth.npz`` alone (a run without point files); the
    session's ``lidar/`` folder must exist. Returns its path."""
    scan_dir = Path(session_dir) / SCAN_FOLDER
    if not scan_dir.is_dir():
        raise OutputError(f"scan folder {scan_dir} does not exist")
    return write_truth_npz(scan_dir / truth_file_name(scan_file_stem(scan.stamp_ns)), scan)
