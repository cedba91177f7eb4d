"""Scans of the shipped sensors for the packet tests: a sensor 1.9 m above flat ground in rain, so
that beams have zero, one or two returns (rain echoes before the ground), three scans in a row."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from acres_lidar_ros.config.sensors import SensorConfig, load_sensor_config
from acres_lidar_ros.scan.scan_types import Scan, ScanOptions
from acres_lidar_ros.scan.scanner import Scanner
from acres_lidar_ros.scene.builder import SceneBuilder
from acres_lidar_ros.scene.grids import TerrainGrid
from acres_lidar_ros.sensor.poses import PoseHistory
from acres_lidar_ros.tracing.trace import Tracer

FIRST_STAMP_NS = 3_600_000_000_000 + 1_000_000_000  # one hour and a second: packets cross no hour


@lru_cache(maxsize=1)
def _ground() -> Tracer:
    return Tracer(SceneBuilder(TerrainGrid(np.array([-200.0, -200.0]), 400.0, np.zeros((2, 2)))).build())


@lru_cache(maxsize=8)
def scans_of(sensor: str, return_mode: str | None = None, count: int = 3) -> tuple[SensorConfig, tuple[Scan, ...]]:
    overrides: dict = {"sub_rays": 1, "position_flu_m": [0.0, 0.0, 1.9]}
    if return_mode is not None:
        overrides["return_mode"] = return_mode
    config = load_sensor_config(sensor).with_overrides(overrides)
    t = np.array([0.0, 4000.0])
    poses = PoseHistory.from_arrays(t, np.zeros((2, 3)), np.tile([0.0, 0.0, 0.0, 1.0], (2, 1)))
    scanner = Scanner(config, tracer=_ground(), options=ScanOptions(rain_mm_per_h=30.0, seed=3))
    period_ns = int(round(config.period_s * 1e9))
    scans = tuple(scanner.scan(poses, FIRST_STAMP_NS + k * period_ns, index=k) for k in range(count))
    return config, scans


def our_returns(scans: tuple[Scan, ...]) -> dict[str, np.ndarray]:
    """Every return of ``scans``: scan, cell, range, point, intensity, firing time (s)."""
    parts: dict[str, list] = {k: [] for k in ("scan", "cell", "range_m", "xyz", "intensity", "time_s")}
    for k, scan in enumerate(scans):
        valid = scan.returns.valid
        cell = np.nonzero(valid)[0]
        parts["scan"].append(np.full(cell.size, k))
        parts["cell"].append(cell)
        parts["range_m"].append(scan.returns.range_m[valid])
        parts["xyz"].append(scan.points_sensor[valid])
        parts["intensity"].append(scan.returns.intensity[valid])
        parts["time_s"].append((scan.stamp_ns * 1e-9 + scan.cell_time_offset_s)[cell])
    return {k: np.concatenate(v) for k, v in parts.items()}
