"""Beam geometry of a LiDAR (spec "Scan Pattern", "Sub-Rays"; ACRES Core's planar scan).

Sensor frame is FLU; azimuth is counter-clockwise from forward. The beams come from the sensor's
firing pattern (``emitters.FiringPattern``): a column is a tick and a ring an emitter, cells are
ordered column-major: cell = column x rings + ring. For the rings x columns keys column 0 points
forward for both column orders, and the lens origin of a beam lies on its column's block
azimuth, not on the ring's azimuth.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from acres_lidar_ros.config.sensors import SensorConfig
from acres_lidar_ros.sensor.emitters import FiringCells, FiringPattern
from acres_lidar_ros.sensor.rays import sensor_points, world_rays

# Sub-ray pattern of a 7-sub-ray beam (AcresLidar::SubRayPattern).
SUB_RAY_OFFSET_FRACTION = 0.35
SUB_RAY_CENTRE_WEIGHT = 0.25
SUB_RAY_RING_WEIGHT = 0.125
UP_AXIS_LIMIT = 0.9  # |d_z| >= this uses the forward axis to build the sub-ray basis


def mount_rotation(rpy_rad: np.ndarray) -> np.ndarray:
    """``M = Rz(yaw) Ry(pitch) Rx(roll)``: (3, 3) float64, sensor frame -> base_footprint frame."""
    roll, pitch, yaw = (float(a) for a in rpy_rad)
    cr, sr, cp, sp, cy, sy = (
        math.cos(roll),
        math.sin(roll),
        math.cos(pitch),
        math.sin(pitch),
        math.cos(yaw),
        math.sin(yaw),
    )
    rz = np.array([[cy, -sy, 0.0], [sy, cy, 0.0], [0.0, 0.0, 1.0]])
    ry = np.array([[cp, 0.0, sp], [0.0, 1.0, 0.0], [-sp, 0.0, cp]])
    rx = np.array([[1.0, 0.0, 0.0], [0.0, cr, -sr], [0.0, sr, cr]])
    return rz @ ry @ rx


def beam_directions(elevation_rad: np.ndarray, azimuth_rad: np.ndarray) -> np.ndarray:
    """Unit beam directions ``d`` from broadcastable elevation and azimuth arrays: (..., 3)."""
    elevation_rad, azimuth_rad = np.broadcast_arrays(elevation_rad, azimuth_rad)
    cos_e = np.cos(elevation_rad)
    return np.stack([cos_e * np.cos(azimuth_rad), cos_e * np.sin(azimuth_rad), np.sin(elevation_rad)], axis=-1)


def sub_ray_pattern(sub_rays: int, divergence_rad: float) -> tuple[np.ndarray, np.ndarray]:
    """Angular offsets (S, 2) rad and energy weights (S,) of the sub-rays of a beam.

    Seven sub-rays: the centre (weight 0.25) and six at ``0.35 beta`` at the angles ``k pi / 3``
    (0.125 each). One sub-ray, or ``beta = 0``: the beam itself with weight 1.
    """
    if sub_rays == 1 or divergence_rad == 0.0:
        return np.zeros((1, 2)), np.ones(1)
    angles = np.arange(6) * np.pi / 3.0
    ring = SUB_RAY_OFFSET_FRACTION * divergence_rad * np.stack([np.cos(angles), np.sin(angles)], axis=1)
    offsets = np.vstack([np.zeros((1, 2)), ring])
    weights = np.array([SUB_RAY_CENTRE_WEIGHT] + [SUB_RAY_RING_WEIGHT] * 6)
    return offsets, weights


def sub_ray_directions(directions: np.ndarray, offsets_rad: np.ndarray) -> np.ndarray:
    """Sub-ray directions ``d_j = norm(d + o1 u + o2 v)`` with ``u = norm(d x a)``, ``v = d x u``.

    ``a`` is the up axis, or the forward axis where ``|d_z| >= 0.9``.

    Parameters
    ----------
    directions : (..., 3) float64 unit beam directions
    offsets_rad : (S, 2) float64

    Returns
    -------
    (..., S, 3) float64 unit directions.
    """
    d = np.asarray(directions, dtype=np.float64)
    axis = np.where((np.abs(d[..., 2]) >= UP_AXIS_LIMIT)[..., None], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0])
    u = np.cross(d, axis)
    u /= np.linalg.norm(u, axis=-1, keepdims=True)
    v = np.cross(d, u)
    sub = d[..., None, :] + offsets_rad[:, 0, None] * u[..., None, :] + offsets_rad[:, 1, None] * v[..., None, :]
    return sub / np.linalg.norm(sub, axis=-1, keepdims=True)


def elevation_rank(elevations_rad: np.ndarray) -> np.ndarray:
    """Rank of each ring's elevation, 0 = lowest (rslidar_sdk's ``ring``): (rings,) uint16."""
    order = np.argsort(elevations_rad, kind="stable")
    rank = np.empty(len(order), dtype=np.uint16)
    rank[order] = np.arange(len(order), dtype=np.uint16)
    return rank


@dataclass(frozen=True)
class BeamPattern:
    """All beams of a sensor in its own frame, and its mount on base_footprint.

    Attributes
    ----------
    column_azimuth_rad : (N_c,) block (tick) azimuth of each column
    directions_sensor : (N_c, N_r, 3) unit beam directions ``d``
    sub_directions_sensor : (N_c, N_r, S, 3) unit sub-ray directions ``d_j``
    sub_ray_weights : (S,) energy weights ``w_j``
    lens_origins_sensor : (N_c, N_r, 3) origin ``o`` of each beam (the lens centre of its column,
        or its emitter's offsets)
    R_base_sensor : (3, 3) mount rotation ``M``
    t_base_sensor_m : (3,) mount position in base_footprint
    ring_rank : (N_r,) elevation rank of each ring (of the first state's emitters)
    cells : the firing cells the beams come from (fire times, channel ids, corrections, ...)
    """

    columns: int
    rings: int
    column_azimuth_rad: np.ndarray
    directions_sensor: np.ndarray
    sub_directions_sensor: np.ndarray
    sub_ray_weights: np.ndarray
    lens_origins_sensor: np.ndarray
    R_base_sensor: np.ndarray
    t_base_sensor_m: np.ndarray
    ring_rank: np.ndarray
    cells: FiringCells

    @classmethod
    def from_config(cls, config: SensorConfig, sub_rays: int | None = None) -> BeamPattern:
        """The pattern of a sensor; ``sub_rays`` overrides the configured count (1 or 7)."""
        return cls.from_firing(FiringPattern.from_config(config), config, sub_rays)

    @classmethod
    def from_firing(
        cls, firing: FiringPattern, config: SensorConfig, sub_rays: int | None = None, index: int = 0
    ) -> BeamPattern:
        """The beams of scan ``index`` of ``firing`` (the scan picks a solid-state sensor's state)."""
        cells = firing.cells(index)
        directions = beam_directions(cells.elevation_rad, cells.azimuth_rad)
        offsets, weights = sub_ray_pattern(sub_rays or config.sub_rays, config.beam_divergence_rad)
        return cls(
            columns=firing.ticks,
            rings=firing.emitters,
            column_azimuth_rad=firing.tick_azimuth_rad,
            directions_sensor=directions,
            sub_directions_sensor=sub_ray_directions(directions, offsets),
            sub_ray_weights=weights,
            lens_origins_sensor=np.ascontiguousarray(cells.origin_sensor_m),
            R_base_sensor=mount_rotation(config.rpy_rad),
            t_base_sensor_m=np.asarray(config.position_flu_m, dtype=np.float64),
            ring_rank=elevation_rank(config.elevations_rad),
            cells=cells,
        )

    @property
    def T_base_sensor(self) -> np.ndarray:
        """(4, 4) mount transform: sensor coordinates -> base_footprint coordinates."""
        T = np.eye(4)
        T[:3, :3] = self.R_base_sensor
        T[:3, 3] = self.t_base_sensor_m
        return T

    def rays_world(
        self, T_world_sensor: np.ndarray, columns: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Origins and unit directions of every sub-ray in the world: two (n, 3) float64 arrays.

        ``T_world_sensor`` is (N_c, 4, 4), or (len(columns), 4, 4) for a subset of ``columns``:
        one pose per column. Row ``(c * N_r + r) * S + j`` is sub-ray ``j`` of ring ``r`` of
        column ``c`` (counting only the given columns, in their order).
        """
        sub, origins = self.sub_directions_sensor, self.lens_origins_sensor
        if columns is not None:
            sub, origins = sub[columns], origins[columns]
        return world_rays(T_world_sensor, sub, origins)

    def rays_world_of_cells(self, T_world_sensor: np.ndarray, cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """As ``rays_world`` with one pose per cell: ``T_world_sensor`` (len(cells), 4, 4)."""
        sub = self.sub_directions_sensor.reshape(-1, 1, len(self.sub_ray_weights), 3)
        origins = self.lens_origins_sensor.reshape(-1, 1, 3)
        if not (cells.size == len(sub) and (cells == np.arange(cells.size)).all()):  # a block, not the scan
            sub, origins = sub[cells], origins[cells]
        return world_rays(T_world_sensor, sub, origins)

    def points_sensor(self, range_m: np.ndarray, cells: np.ndarray | None = None) -> np.ndarray:
        """``p = R d + o`` of every return slot in the sensor frame: (cells, R, 3) float64 from
        the (cells, R) ranges; NaN where the range is NaN. ``cells``: the ranges are those of
        these cells only (one slice's)."""
        directions = np.ascontiguousarray(self.directions_sensor).reshape(-1, 3)
        origins = np.ascontiguousarray(self.lens_origins_sensor).reshape(-1, 3)
        if cells is not None:
            directions, origins = directions[cells], origins[cells]
        return sensor_points(range_m, directions, origins)


def planar_config(config: SensorConfig, beams: int = 360, max_range_m: float = 30.0) -> SensorConfig:
    """ACRES Core's planar scan (FAcresLidarPattern::Planar) at the position of ``config``'s sensor.

    ``beams`` beams ``360 / beams`` deg apart counter-clockwise from forward, level in the vehicle
    frame (no mount tilt), ``max_range_m`` range, no lens offset, one sub-ray. Scan it with the
    no-radiometry option (every in-range hit is a return).
    """
    return config.with_overrides(
        {
            "emitters": None,
            "scan_type": "rotary",
            "columns": beams,
            "elevations_deg": [0.0],
            "azimuth_offsets_deg": [0.0],
            "radiometry.ring_range_at_10pct_m": [config.radiometry.range_at_10pct_m],
            "azimuth_order": "ccw",
            "lens_center_m": 0.0,
            "range_m": max_range_m,
            "min_range_m": min(config.min_range_m, max_range_m / 2.0),
            "rpy_deg": [0.0, 0.0, 0.0],
            "sub_rays": 1,
            "motion_distortion": False,
        }
    )
