"""The recorder's due times and its honest pose coverage (spec "Scan Stamp")."""

from __future__ import annotations

import json

import numpy as np

from acres_lidar_ros.apps.cmd_record import record_drive
from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.scan.scan_types import ScanOptions
from acres_lidar_ros.scan.scanner import Scanner
from acres_lidar_ros.scene.builder import SceneBuilder
from acres_lidar_ros.scene.grids import TerrainGrid
from acres_lidar_ros.sensor.poses import PoseHistory
from acres_lidar_ros.tracing.trace import Tracer


def test_stamps_on_physics_steps_and_flags_for_the_first_scan_and_a_pose_gap(tmp_path):
    # 7 Hz (the spec's example) over a drive with poses 0 .. 0.3 s and 1.0 .. 1.3 s (50 Hz).
    config = load_sensor_config("polaris").with_overrides({"hz": 7.0})
    tracer = Tracer(SceneBuilder(TerrainGrid(np.array([-300.0, -300.0]), 600.0, np.zeros((2, 2)))).build())
    scanner = Scanner(config, tracer=tracer, options=ScanOptions(self_returns=False, seed=1))
    t = np.concatenate([np.arange(0.0, 0.3001, 0.02), np.arange(1.0, 1.3001, 0.02)])
    drive = PoseHistory.from_arrays(
        t, np.column_stack([2.0 * t, 0 * t, 0 * t]), np.tile([0.0, 0.0, 0.0, 1.0], (t.size, 1))
    )
    summary = record_drive(scanner, drive, tmp_path / "run", files="none")
    rows = [json.loads(line) for line in (tmp_path / "run" / "lidar.jsonl").read_text().splitlines()]
    stamps_s = [round(r["sample_time_s"], 5) for r in rows]
    # k T = 0, 1/7, 2/7, ... s on the first 1/120 s step at or after each, up to the end at 1.3 s.
    steps = [int(np.ceil(k * 120 / 7 - 1e-9)) for k in range(10)]
    assert stamps_s == [round(n / 120, 5) for n in steps]
    assert stamps_s[:4] == [0.0, 0.15, 0.29167, 0.43333]
    coverage = [r["sweep"]["pose_coverage"] for r in rows]
    # Sweeps end at 0, 0.15, 0.29, 0.43, 0.58, 0.72, 0.86, 1.0, 1.14, 1.29 s: the first holds the
    # first pose; those touching the 0.3 .. 1.0 s hole are interpolated across it.
    assert coverage == ["before_first_pose", "covered", "covered"] + ["gap"] * 5 + ["covered"] * 2
    assert (summary.held_first_pose, summary.across_pose_gap, summary.scans) == (1, 5, 10)
    counters = json.loads((tmp_path / "run" / "episode.json").read_text())["counters"]
    assert (counters["scans_held_first_pose"], counters["scans_across_pose_gap"]) == (1, 5)
