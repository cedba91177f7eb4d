"""``acres-lidar calibrate``: measure a recording, fit the sensor, write the calibrated files, score it
(docs/calibration.md, "Calibration").

Files written into the output directory, each whole or not at all:

==========================  ======================================================================
``sensors_calibrated.json``  overlay that ``extends`` the start file (``lidar_model.calibrated_overlay``)
``self_table.f32``           the body measured in the scans (``lidar_stats.body_stats``), the table format
                             ``body.self_returns`` loads; ``self_table.json`` its statistics
``measures.json``            the beam fit with standard errors, return rate per ring, points per scan,
                             the ground fit, what reading the recording found
``metrics.json``             the spec's 11 metrics before and after (``lidar_sim``), with ``report.md``
==========================  ======================================================================
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from acres_lidar_ros.body.self_returns import SelfReturnTable
from acres_lidar_ros.config.sensors import load_sensor_config, resolve_sensor
from acres_lidar_ros.errors import RecordingError
from acres_lidar_ros.outputs.files import atomic_write, make_directory
from acres_lidar_ros.outputs.json_files import write_json
from acres_lidar_ros.recordings.lidar_model import (
    body_margin,
    calibrate_beams,
    calibrated_overlay,
    fit_ground,
    ground_cells,
)
from acres_lidar_ros.recordings.lidar_stats import (
    BODY_RANGE_M,
    body_stats,
    finite_or_none,
    points_per_scan,
    return_rate_per_ring,
)
from acres_lidar_ros.recordings.recorded_scans import Recording, beam_table, read_recording, retimed

SENSORS_NAME = "sensors_calibrated.json"
SELF_TABLE_NAME = "self_table.f32"


def self_table_stats(table: SelfReturnTable, scans: int) -> dict:
    has = table.p_self > 0
    return {
        "table": SELF_TABLE_NAME,
        "table_bytes": int(table.planes().nbytes),
        "columns": table.columns,
        "rings": table.rings,
        "scans_measured": scans,
        "body_range_below_m": BODY_RANGE_M,
        "cells_with_return": int(has.sum()),
        "cells_blocking": int((table.p_block > 0).sum()),
        "cells_in_mask": int((table.p_self >= 0.5).sum()),
        "return_range_min_m": float(table.range_m[has].min()) if has.any() else None,
        "return_range_max_m": float(table.range_m[has].max()) if has.any() else None,
        "expected_body_points_per_scan": float(table.p_self.sum()),
    }


def calibrate(
    bags: Sequence[str | os.PathLike[str]],
    sensor: str,
    out_dir: str | os.PathLike[str],
    *,
    scene: Any = None,
    topic: str | None = None,
    poses: str = "odom",
    max_scans: int | None = None,
    render_scans: int | None = None,
    score: bool = True,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict:
    """Calibrate the sensor file ``sensor`` against the recording ``bags``; returns the summary.

    ``scene``: a ``scene.Scene`` over which the recording was driven (the ground fit and the
    render need it; None skips them). ``render_scans``: the most scans rendered for the metrics;
    ``score`` False: no render and no metrics.
    """
    start_path = resolve_sensor(sensor)
    start = load_sensor_config(start_path)
    out = make_directory(out_dir)

    def step(name: str, done: int, total: int) -> None:
        if progress is not None:
            progress(name, done, total)

    recording = read_recording(
        bags, start, topic=topic, poses=poses, max_scans=max_scans, progress=lambda n: step("read", n, 0)
    )
    scans = recording.scans
    table = beam_table(start)
    beams = calibrate_beams(scans, table)
    body = body_stats(scans, table)
    self_table = SelfReturnTable.from_planes(body.planes(), start.columns, start.rings, where="measured body")
    atomic_write(out / SELF_TABLE_NAME, self_table.to_bytes(), overwrite=True)
    write_json(out / "self_table.json", self_table_stats(self_table, len(scans)), overwrite=True)
    tracer = None
    ground = None
    if scene is not None:
        from acres_lidar_ros.tracing.trace import Tracer

        tracer = Tracer(scene)
        geometry = calibrated_overlay("", beams, recording.T_base_sensor, None, None, start.columns)["lidar"]
        measured = start.with_overrides(geometry)
        # The column times came from START's column order; the fitted order may be the other one.
        recording = retimed(recording, measured)
        scans = recording.scans
        skip = body_margin((body.p_self + body.p_block) > 0, start.columns, start.rings)
        cells = ground_cells(scans, measured, tracer, skip_cells=skip)
        ground = fit_ground(cells, measured)
    overlay = calibrated_overlay(
        os.path.relpath(start_path.resolve(), out.resolve()),
        beams,
        recording.T_base_sensor,
        SELF_TABLE_NAME,
        ground,
        start.columns,
    )
    write_json(out / SENSORS_NAME, overlay, overwrite=True)
    try:
        calibrated = load_sensor_config(out / SENSORS_NAME)
    except Exception as error:  # the overlay must load as it is; say what is wrong with it
        raise RecordingError(f"the calibrated overlay {out / SENSORS_NAME} does not load: {error}") from error
    measures = _measures(recording, beams, table, ground)
    write_json(out / "measures.json", measures, overwrite=True)
    summary: dict = {"out": str(out), "scans": len(scans), "recording": recording.summary(), "files": [SENSORS_NAME]}
    if tracer is not None and score:
        from acres_lidar_ros.recordings.calibration_plots import write_plots
        from acres_lidar_ros.recordings.lidar_sim import score_configs, write_report

        metrics, curves = score_configs(recording, start, calibrated, tracer, render_scans, progress=step)
        write_json(out / "metrics.json", {"metrics": metrics}, overwrite=True)
        plots = write_plots(out, curves, start.columns, start.rings)
        write_report(out, metrics, recording, plots)
        summary["metrics"] = metrics
        summary["plots"] = plots
    return summary


def _measures(recording: Recording, beams: Any, table: Any, ground: dict | None) -> dict:
    scans = recording.scans
    points = points_per_scan(scans)
    return {
        "recording": recording.summary(),
        "beam_table": {
            **beams.fit.as_dict(),
            "azimuth_order": beams.azimuth_order,
            "lens_center_m": beams.lens_center_m,
        },
        "start_beam_table": {
            "elevations_deg": finite_or_none(np.rad2deg(table.elevations_rad)),
            "azimuth_offsets_deg": finite_or_none(np.rad2deg(table.azimuth_offsets_rad)),
            "azimuth_order": table.azimuth_order,
        },
        "return_rate_per_ring_percent": return_rate_per_ring(scans, table).tolist(),
        "points_per_scan": {"mean": float(points.mean()), "min": int(points.min()), "max": int(points.max())},
        "ground": ground,
    }


def write_text(path: Path, text: str) -> Path:
    return atomic_write(path, text.encode("utf-8"), overwrite=True)
