"""The range noise fitted back from simulated scans with a known ``std_m`` (docs/calibration.md, "Calibration").

Truth: the Polaris sensor over flat grass with an asphalt road (``recording_support.two_surface_scene``),
its ``std_m`` set to 8 mm (the shipped file has 2.2 mm), no roughness and no micro-slope, so the residual
of a return against the ground hit is the spec's range noise alone, ``sigma_R^2 = std_m^2 + (sigma_low
SNR_spec / SNR)^2``. The fit (``lidar_model.fit_range_noise``, the noise part of ``fit_ground``) sees only the scans, the scene and the sensor's
signal constants.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from recording_support import two_surface_scene

from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.config.share_paths import config_dir
from acres_lidar_ros.recordings.cloud_cells import CellCloud
from acres_lidar_ros.recordings.lidar_model import fit_range_noise, ground_cells
from acres_lidar_ros.recordings.recorded_scans import RecordedScan
from acres_lidar_ros.scan.scan_types import ScanOptions
from acres_lidar_ros.scan.scanner import Scanner
from acres_lidar_ros.sensor.poses import PoseHistory
from acres_lidar_ros.tracing.trace import Tracer

STD_M = 0.008


def test_std_m_is_recovered_from_the_range_residuals_on_flat_ground(tmp_path):
    smooth = {"roughness_m": 0.0, "micro_slope_deg": 0.0}
    overlay = {
        "extends": str(config_dir() / "sensors_polaris.json"),
        "lidar": {
            "columns": 360,
            "self_returns": None,
            "std_m": STD_M,
            "materials": {"grass": smooth, "asphalt": smooth},
        },
    }
    (tmp_path / "truth.json").write_text(json.dumps(overlay))
    truth = load_sensor_config(tmp_path / "truth.json")
    tracer = Tracer(two_surface_scene())
    scanner = Scanner(truth, tracer=tracer, options=ScanOptions(seed=5, self_returns=False))
    times = np.arange(0.0, 0.61, 0.01)
    positions = np.stack([-20.0 + 3.0 * times, np.zeros_like(times), np.zeros_like(times)], axis=1)
    poses = PoseHistory.from_arrays(times, positions, np.tile([0.0, 0.0, 0.0, 1.0], (times.size, 1)))
    scans = []
    for k in range(4):
        scan = scanner.scan(poses, int(round((0.2 + 0.1 * k) * 1e9)), index=k)
        valid = scan.returns.valid[:, 0]
        points = np.where(valid[:, None], scan.points_sensor[:, 0], np.nan)
        intensity = np.where(valid, scan.returns.intensity[:, 0], 0).astype(np.float32)
        cells = CellCloud(
            truth.columns, truth.rings, points, intensity, np.full(valid.size, np.nan), "sim", int(valid.sum())
        )
        times_s = scan.stamp_ns * 1e-9 + scan.time_offset_s
        scans.append(RecordedScan(k, scan.stamp_ns, cells, times_s, scan.T_world_sensor, "sim"))
    ground = fit_range_noise(ground_cells(scans, truth, tracer), truth)
    assert ground["std_m"] == pytest.approx(STD_M, rel=0.1)  # stated tolerance: 10 %
    assert set(ground["surfaces"]) == {"grass", "asphalt"}
    for name in ("grass", "asphalt"):  # none of the spread is taken for roughness
        assert ground["surfaces"][name]["roughness_m"] < 0.1 * STD_M, name
