"""Downstream LiDAR-inertial odometry on our IMU and clouds: evalio's (PyPI) compiled DLIO and LIO-SAM,
pipelines this project did not write, follow a short recorded drive of the built-in tour.

A 16 s ``record --still-start 1.5 --point-type velodyne --imu`` run of a piece of the tour (from
its 2 s stop at (60, 0) m: with the still start 3.5 s at rest for DLIO's IMU calibration, then
about 45 m with the 90 deg turn north at (90, 0) m; the shipped IMU's noise) goes through
``scripts/evalio_check.py`` in evalio's own venv (``.ci/run`` makes ``.venv-evalio``;
``ACRES_EVALIO_PYTHON`` names another python); the test is skipped where that python is absent.
It fails when either pipeline's final error, start aligned, is above 5 % of the path: a divergence
check (measured: DLIO 0.56 %, LIO-SAM 3.31 % of 44.5 m). The whole tour's figures are in docs/imu.md.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from acres_lidar_ros.apps import cli
from acres_lidar_ros.outputs.tum import write_tum
from acres_lidar_ros.scene.farm_v1 import build_default_farm
from acres_lidar_ros.scene.tour import TOUR_V2_STOPS, default_tour

ROOT = Path(__file__).resolve().parents[2]
EVALIO_PYTHON = Path(os.environ.get("ACRES_EVALIO_PYTHON", ROOT / ".venv-evalio" / "bin" / "python"))
MAX_FINAL_ERROR_PCT = 5.0


@pytest.mark.skipif(
    not EVALIO_PYTHON.exists(),
    reason=f"no evalio python at {EVALIO_PYTHON} (.ci/run makes .venv-evalio; or set ACRES_EVALIO_PYTHON)",
)
def test_dlio_and_lio_sam_follow_a_short_drive_on_our_imu_and_clouds(tmp_path):
    times, positions, quaternions = default_tour(build_default_farm(seed=0, layout="v2"))
    stop_xy = np.array(TOUR_V2_STOPS[1][:2])  # (60, 0): 2 s at rest, then the corner at (90, 0)
    at_stop = np.flatnonzero(np.linalg.norm(positions[:, :2] - stop_xy, axis=1) < 1e-6)
    piece = (times >= times[at_stop[0]]) & (times <= times[at_stop[0]] + 14.5)
    assert at_stop.size > 150 and np.ptp(np.unwrap(2 * np.arctan2(quaternions[piece, 2], quaternions[piece, 3]))) > 1.5
    write_tum(tmp_path / "piece.tum", times[piece], positions[piece], quaternions[piece])
    run = tmp_path / "lio"
    argv = ["record", "--trajectory", str(tmp_path / "piece.tum"), "--still-start", "1.5", "--point-type", "velodyne"]
    assert cli.main([*argv, "--imu", "--files", "none", "--no-progress", "--out", str(run)]) == 0
    done = subprocess.run(
        [str(EVALIO_PYTHON), str(ROOT / "scripts" / "evalio_check.py"), str(run), "dlio", "liosam"]
        + ["--max-final-error-pct", str(MAX_FINAL_ERROR_PCT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    print(done.stdout)  # the figures, for -s or -rP
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (scans,) = re.findall(r": (\d+) scans,", done.stdout)
    figures = dict(re.findall(r"^(\w+): (\d+) poses", done.stdout, re.MULTILINE))
    assert figures == {"dlio": scans, "liosam": scans} and int(scans) >= 160, done.stdout  # a pose a scan
    paths_m = [float(p) for p in re.findall(r"; path ([\d.]+) m;", done.stdout)]
    assert len(paths_m) == 2 and all(35.0 < p < 55.0 for p in paths_m), done.stdout  # the piece of the tour
