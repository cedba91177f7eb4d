"""The sensor fitted to a recording (the spec's ``lidar_model.py``; docs/calibration.md, "Calibration").

* ``calibrate_beams``: the beam table (each ring's elevation and azimuth offset, ``lidar_stats.fit_beam_table``)
  with the column order (``cw`` or ``ccw``) that fits the points best and the lens offset of the start sensor;
* ``ground_returns``: each recorded return traced back through the user's scene along its own beam from the
  recorded pose; a return within ``GROUND_MATCH_M`` of a ground hit is a ground return of that hit's material;
* ``fit_ground``: per ground material, rho as the median intensity (as the Polaris overlay), ``s_rho`` as the
  robust spread of log intensity, the range noise below ``NOISE_RANGE_M`` and ``std_m`` from the smoothest
  surface, ``roughness_m`` by maximum likelihood of the range residuals (below);
* ``calibrated_overlay``: a sensors overlay that ``extends`` the start file.

Range noise model fitted: a ground return's residual ``r = R_rec - R_scene`` is normal with variance
``sigma_0^2 + (sigma_h / c^1.5)^2`` (spec "Ground Relief and Texture", "Range Noise" at high SNR, where
``c = clamp(|cos theta|, 0.05, 1)``); ``sigma_0`` is the robust standard deviation (1.4826 MAD) on the
surface with the least spread, ``sigma_h`` of each surface maximises the likelihood of its residuals.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.spatial.transform import Rotation

from acres_lidar_ros.config.material_table import CLASS_ID, MATERIAL_NAMES
from acres_lidar_ros.config.sensors import SensorConfig
from acres_lidar_ros.recordings.cloud_cells import BeamTable
from acres_lidar_ros.recordings.lidar_stats import BODY_RANGE_M, BeamFit, fit_beam_table, lens_origins_m
from acres_lidar_ros.recordings.recorded_scans import RecordedScan
from acres_lidar_ros.tracing.trace import Tracer

GROUND_MATCH_M = 0.3
NOISE_RANGE_M = 10.0
MIN_GROUND_POINTS = 20
MAD_TO_SIGMA = 1.4826
ROUGHNESS_COS_MIN = 0.05


@dataclass(frozen=True)
class BeamCalibration:
    fit: BeamFit
    azimuth_order: str
    elevations_deg: np.ndarray
    azimuth_offsets_deg: np.ndarray
    fitted_rings: np.ndarray  # (rings,) bool: rings with points; the others keep the start values
    lens_center_m: float


def calibrate_beams(scans: Sequence[RecordedScan], start: BeamTable) -> BeamCalibration:
    """The beam table of the scans; the column order whose azimuth offsets scatter least."""
    best: tuple[float, str, BeamFit] | None = None
    for order in ("cw", "ccw"):
        fit = fit_beam_table(scans, replace(start, azimuth_order=order))
        spread = float(np.nanmedian(fit.azimuth_offset_se_rad * np.sqrt(np.maximum(fit.points, 1))))
        if best is None or spread < best[0]:
            best = (spread, order, fit)
    assert best is not None
    _, order, fit = best
    fitted = fit.points >= 2
    elevations = np.where(fitted, fit.elevation_rad, start.elevations_rad)
    offsets = np.where(fitted, fit.azimuth_offset_rad, start.azimuth_offsets_rad)
    return BeamCalibration(fit, order, np.rad2deg(elevations), np.rad2deg(offsets), fitted, float(start.lens_center_m))


@dataclass(frozen=True)
class GroundReturns:
    """Recorded ground returns: their intensity, range residual against the scene, incidence and material."""

    intensity: np.ndarray
    residual_m: np.ndarray
    range_m: np.ndarray
    cos_incidence: np.ndarray
    material_id: np.ndarray


def ground_returns(
    scans: Sequence[RecordedScan], table: BeamTable, tracer: Tracer, config: SensorConfig
) -> GroundReturns:
    """Trace each return's beam (from its lens centre, through its point) from the recorded pose."""
    o = lens_origins_m(table)
    parts: list[tuple[np.ndarray, ...]] = []
    ground = CLASS_ID["ground"]
    for scan in scans:
        if scan.T_world_sensor is None:
            continue
        p = scan.cells.points_sensor.reshape(table.columns, table.rings, 3)
        q = p - o[:, None, :]
        r = np.linalg.norm(q, axis=2)
        col, ring = np.nonzero(np.isfinite(r) & (r >= BODY_RANGE_M))
        T = scan.T_world_sensor[col]
        d_sensor = q[col, ring] / r[col, ring, None]
        origin = np.einsum("nij,nj->ni", T[:, :3, :3], o[col]) + T[:, :3, 3]
        direction = np.einsum("nij,nj->ni", T[:, :3, :3], d_sensor)
        hits = tracer.trace(origin, direction, config.range_m, 1, config.continue_step_m, config.pond_threshold_m)
        rec = r[col, ring]
        scene_r = hits.range_m[:, 0]
        match = hits.valid[:, 0] & (hits.class_id[:, 0] == ground) & (np.abs(rec - scene_r) <= GROUND_MATCH_M)
        cell = col * table.rings + ring
        parts.append(
            (
                scan.cells.intensity[cell][match].astype(np.float64),
                (rec - scene_r)[match],
                scene_r[match],
                hits.cos_incidence[match, 0],
                hits.material_id[match, 0].astype(np.int64),
            )
        )
    if not parts:
        empty = np.zeros(0)
        return GroundReturns(empty, empty, empty, empty, np.zeros(0, np.int64))
    return GroundReturns(*(np.concatenate([p[k] for p in parts]) for k in range(5)))


def _robust_sigma(values: np.ndarray) -> float:
    return float(MAD_TO_SIGMA * np.median(np.abs(values - np.median(values)))) if values.size else float("nan")


def _roughness_ml(residual_m: np.ndarray, cos_incidence: np.ndarray, sigma_0_m: float) -> float:
    """``sigma_h`` maximising the normal likelihood of the residuals (variance ``s0^2 + (sh / c^1.5)^2``)."""
    c = np.clip(np.abs(cos_incidence), ROUGHNESS_COS_MIN, 1.0)
    r2 = (residual_m - np.median(residual_m)) ** 2

    def nll(sigma_h: float) -> float:
        var = sigma_0_m**2 + (sigma_h / c**1.5) ** 2
        return float(np.sum(np.log(var) + r2 / var))

    result = minimize_scalar(nll, bounds=(0.0, 0.05), method="bounded", options={"xatol": 1e-6})
    return float(result.x)


def fit_ground(returns: GroundReturns) -> dict:
    """Per ground material with at least ``MIN_GROUND_POINTS`` returns: rho, s_rho, range noise, roughness."""
    surfaces: dict[str, dict] = {}
    near = returns.range_m < NOISE_RANGE_M
    for material in np.unique(returns.material_id):
        sel = returns.material_id == material
        if sel.sum() < MIN_GROUND_POINTS:
            continue
        intensity = returns.intensity[sel]
        positive = intensity[(intensity > 0) & (intensity <= 100)]
        noise = sel & near
        surfaces[MATERIAL_NAMES[int(material)]] = {
            "points": int(sel.sum()),
            "reflectivity": float(np.median(intensity) / 100.0),
            "reflectivity_sd": _robust_sigma(np.log(positive)) if positive.size else float("nan"),
            "range_noise_below_10m_m": _robust_sigma(returns.residual_m[noise]),
            "noise_points": int(noise.sum()),
        }
    noisy = {k: v for k, v in surfaces.items() if v["noise_points"] >= MIN_GROUND_POINTS}
    std_m = min((v["range_noise_below_10m_m"] for v in noisy.values()), default=float("nan"))
    for name, v in noisy.items():
        sel = (returns.material_id == MATERIAL_NAMES.index(name)) & near
        v["roughness_m"] = _roughness_ml(returns.residual_m[sel], returns.cos_incidence[sel], std_m)
    return {"surfaces": surfaces, "std_m": std_m}


def mount_keys(T_base_sensor: np.ndarray) -> dict:
    """``position_flu_m`` and ``rpy_deg`` (R = Rz Ry Rx, fixed axes) of a mount transform."""
    rpy = Rotation.from_matrix(T_base_sensor[:3, :3]).as_euler("xyz", degrees=True)
    return {"position_flu_m": [float(v) for v in T_base_sensor[:3, 3]], "rpy_deg": [float(v) for v in rpy]}


def calibrated_overlay(
    start_path: str,
    beams: BeamCalibration,
    T_base_sensor: np.ndarray,
    self_table_name: str | None,
    ground: dict | None,
    columns: int,
) -> dict:
    """A sensors file that ``extends`` the start file and replaces what the recording measured."""
    lidar: dict = {
        "emitters": None,
        "columns": int(columns),
        "rings": len(beams.elevations_deg),
        "elevations_deg": [round(float(v), 4) for v in beams.elevations_deg],
        "azimuth_offsets_deg": [round(float(v), 4) for v in beams.azimuth_offsets_deg],
        "azimuth_order": beams.azimuth_order,
        "lens_center_m": beams.lens_center_m,
        **mount_keys(T_base_sensor),
    }
    if self_table_name is not None:
        lidar["self_returns"] = self_table_name
    if ground is not None and ground["surfaces"]:
        materials = {}
        for name, v in ground["surfaces"].items():
            entry = {"reflectivity": round(v["reflectivity"], 4), "incidence_exponent": 0.0}
            if np.isfinite(v["reflectivity_sd"]):
                entry["reflectivity_sd"] = round(v["reflectivity_sd"], 4)
            if "roughness_m" in v:
                entry["roughness_m"] = round(v["roughness_m"], 5)
            materials[name] = entry
        lidar["materials"] = materials
        if np.isfinite(ground["std_m"]):
            lidar["std_m"] = round(float(ground["std_m"]), 5)
    return {
        "_comment": "Calibrated from recorded scans by acres-lidar calibrate (docs/calibration.md).",
        "extends": start_path,
        "lidar": lidar,
    }
