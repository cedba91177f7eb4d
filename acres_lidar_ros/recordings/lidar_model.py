"""The sensor fitted to a recording (the spec's ``lidar_model.py``; docs/calibration.md, "Calibration").

* ``calibrate_beams``: the beam table (each ring's elevation and azimuth offset, ``lidar_stats.fit_beam_table``)
  with the column order (``cw`` or ``ccw``) that fits the points best and the lens offset of the start sensor;
* ``ground_cells``: each beam of a run traced through the user's scene from its column's pose; where it meets
  the ground, the run's return within ``GROUND_MATCH_M`` of that range is a detection of that material;
* ``fit_ground``: the radiometry from those beams, k = 0 as the Polaris overlay: per material rho as the
  median intensity, R10 per ring by maximum likelihood of detection against range and incidence, s_rho from
  the spread of log intensity, ``std_m``, ``range_std_low_snr_m`` and each surface's ``roughness_m`` by
  maximum likelihood of the range residuals;
* ``calibrated_overlay``: a sensors overlay that ``extends`` the start file.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy.optimize import minimize, minimize_scalar
from scipy.spatial.transform import Rotation
from scipy.stats import norm

from acres_lidar_ros.config.material_table import CLASS_ID, MATERIAL_NAMES
from acres_lidar_ros.config.sensors import SensorConfig
from acres_lidar_ros.radiometry.equations import (
    detection_threshold,
    footprint_range_spread_m,
    pulse_peak_factor,
    signal_counts,
)
from acres_lidar_ros.recordings.cloud_cells import BeamTable
from acres_lidar_ros.recordings.lidar_stats import BODY_RANGE_M, BeamFit, fit_beam_table, stack_ranges
from acres_lidar_ros.recordings.recorded_scans import RecordedScan, beam_table
from acres_lidar_ros.tracing.trace import Tracer

GROUND_MATCH_M = 0.3
R10_BOUNDS_M = (1.0, 500.0)
BODY_MARGIN_COLUMNS = 5
"""The ground fit leaves out the body's cells and this many columns on each side of them in their ring:
at the body's edge a beam is stopped in some scans without any body return (``p_block``)."""
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
class GroundCells:
    """Every beam whose scene ray meets the ground (at 1.6 m or farther), over the scans: its ring, ground
    range, incidence and material, and the run's return range (NaN where none) and intensity there."""

    ring: np.ndarray
    ground_range_m: np.ndarray
    cos_incidence: np.ndarray
    material_id: np.ndarray
    return_range_m: np.ndarray
    intensity: np.ndarray

    @property
    def detected(self) -> np.ndarray:
        """The beam has a return (a rough surface at a grazing angle can move it far from the ground hit)."""
        return np.isfinite(self.return_range_m)

    @property
    def matched(self) -> np.ndarray:
        """The return lies within ``GROUND_MATCH_M`` of the ground hit: a ground return of its material."""
        return np.abs(self.return_range_m - self.ground_range_m) <= GROUND_MATCH_M


def ground_cells(
    scans: Sequence[RecordedScan], config: SensorConfig, tracer: Tracer, skip_cells: np.ndarray | None = None
) -> GroundCells:
    """Trace each beam of ``config`` (its directions and lens centres) from each scan's column poses;
    ``skip_cells`` (cells,) bool leaves cells out (the body's)."""
    from acres_lidar_ros.sensor.pattern import BeamPattern

    pattern = BeamPattern.from_config(config, sub_rays=1)
    d = pattern.directions_sensor.reshape(-1, 3)
    o = pattern.lens_origins_sensor.reshape(-1, 3)
    table = beam_table(config)
    column = np.repeat(np.arange(config.columns), config.rings)
    ring = np.tile(np.arange(config.rings), config.columns)
    keep = np.ones(column.size, bool) if skip_cells is None else ~np.asarray(skip_cells, bool)
    parts = []
    ground = CLASS_ID["ground"]
    for scan in scans:
        if scan.T_world_sensor is None:
            continue
        T = scan.T_world_sensor[column[keep]]
        origin = np.einsum("nij,nj->ni", T[:, :3, :3], o[keep]) + T[:, :3, 3]
        direction = np.einsum("nij,nj->ni", T[:, :3, :3], d[keep])
        hits = tracer.trace(origin, direction, config.range_m, 1, config.continue_step_m, config.pond_threshold_m)
        on = hits.valid[:, 0] & (hits.class_id[:, 0] == ground) & (hits.range_m[:, 0] >= BODY_RANGE_M)
        cells = np.flatnonzero(keep)[on]
        parts.append(
            (
                ring[cells],
                hits.range_m[on, 0],
                hits.cos_incidence[on, 0],
                hits.material_id[on, 0].astype(np.int64),
                stack_ranges([scan], table)[0][cells],
                scan.cells.intensity[cells].astype(np.float64),
            )
        )
    if not parts:
        e = np.zeros(0)
        return GroundCells(np.zeros(0, np.int64), e, e, np.zeros(0, np.int64), e, e)
    return GroundCells(*(np.concatenate([p[k] for p in parts]) for k in range(6)))


def body_margin(body_cells: np.ndarray, columns: int, rings: int) -> np.ndarray:
    """(cells,) bool: ``body_cells`` widened by ``BODY_MARGIN_COLUMNS`` columns each way (cyclic) in each ring."""
    grid = np.asarray(body_cells, bool).reshape(columns, rings)
    out = grid.copy()
    for shift in range(1, BODY_MARGIN_COLUMNS + 1):
        out |= np.roll(grid, shift, axis=0) | np.roll(grid, -shift, axis=0)
    return out.reshape(-1)


def _robust_sigma(values: np.ndarray) -> float:
    return float(MAD_TO_SIGMA * np.median(np.abs(values - np.median(values)))) if values.size else float("nan")


@dataclass(frozen=True)
class SignalModel:
    """The start sensor's detection constants and the ground materials' reflectances for the fits."""

    s10: float
    ambient: float
    threshold: float
    overlap_m: float
    pulse_m: float
    divergence_v_rad: float
    range_min_m: float
    range_max_m: float

    @classmethod
    def of(cls, config: SensorConfig) -> SignalModel:
        r = config.radiometry
        return cls(
            r.signal_at_10pct_counts,
            r.ambient_counts,
            float(detection_threshold(r.signal_at_10pct_counts, r.ambient_counts, r.detection_probability_at_spec)),
            r.overlap_range_m,
            config.pulse_length_m,
            config.beam_divergence_v_rad,
            config.min_range_m,
            config.range_m,
        )

    def signal(self, rho: np.ndarray, range_m: np.ndarray, cos_theta: np.ndarray, r10_m: float) -> np.ndarray:
        """Mean signal of a ground hit (k = 0, no lobe): the range equation with the echo stretch of beta_v."""
        g = pulse_peak_factor(self.pulse_m, footprint_range_spread_m(range_m, cos_theta, self.divergence_v_rad))
        return signal_counts(rho, range_m, g, self.s10, r10_m, self.overlap_m)

    def detection(
        self, rho: np.ndarray, range_m: np.ndarray, cos_theta: np.ndarray, s_rho: np.ndarray, r10_m: float
    ) -> np.ndarray:
        """P(S' >= S_T), averaged over the albedo texture's lognormal factor (Gauss-Hermite, 9 nodes)."""
        x, w = np.polynomial.hermite_e.hermegauss(9)
        w = w / w.sum()
        p = np.zeros(np.shape(range_m))
        for xk, wk in zip(x, w, strict=True):
            a = np.exp(s_rho * xk - 0.5 * s_rho**2)
            s = self.signal(rho * a, range_m, cos_theta, r10_m)
            p += wk * norm.cdf((s - self.threshold) / np.sqrt(np.maximum(s + self.ambient, 1e-9)))
        return np.clip(p, 1e-9, 1 - 1e-9)


def fit_ground(cells: GroundCells, config: SensorConfig) -> dict:
    """The radiometry from the ground beams (maximum likelihood, docs/calibration.md "Calibration").

    Per ground material with at least ``MIN_GROUND_POINTS`` detected beams: ``reflectivity`` the median
    intensity / 100; ``R10`` per ring from the detection of its ground beams; ``reflectivity_sd`` from the
    spread of log intensity less the shot noise and the byte rounding; then ``std_m``,
    ``range_std_low_snr_m`` and each surface's ``roughness_m`` together from the range residuals below 10 m.
    """
    model = SignalModel.of(config)
    det = cells.matched
    surfaces: dict[str, dict] = {}
    rho = np.full(cells.ring.size, np.nan)
    s_rho = np.zeros(cells.ring.size)
    for material in np.unique(cells.material_id):
        sel = (cells.material_id == material) & det
        if sel.sum() < MIN_GROUND_POINTS:
            continue
        name = MATERIAL_NAMES[int(material)]
        surfaces[name] = {"points": int(sel.sum()), "reflectivity": float(np.median(cells.intensity[sel]) / 100.0)}
        rho[cells.material_id == material] = surfaces[name]["reflectivity"]
    known = np.isfinite(rho) & (cells.ground_range_m <= model.range_max_m)
    r10 = _fit_r10(cells, model, rho, s_rho, known, config)
    r10_of = r10[cells.ring]
    for name, v in surfaces.items():
        sel = (cells.material_id == MATERIAL_NAMES.index(name)) & det & (cells.intensity > 0)
        s_mean = (
            model.signal(v["reflectivity"], cells.ground_range_m[sel], cells.cos_incidence[sel], 1.0) * r10_of[sel] ** 2
        )
        shot = np.mean((s_mean + model.ambient) / np.maximum(s_mean, 1e-9) ** 2)
        rounding = np.mean(1.0 / (12.0 * cells.intensity[sel] ** 2))
        spread = _robust_sigma(np.log(cells.intensity[sel])) ** 2 - shot - rounding
        v["reflectivity_sd"] = float(np.sqrt(max(spread, 0.0)))
        s_rho[cells.material_id == MATERIAL_NAMES.index(name)] = v["reflectivity_sd"]
    noise = _fit_noise(cells, model, rho, r10_of, surfaces)
    return {"surfaces": surfaces, "ring_range_at_10pct_m": r10.tolist(), **noise}


def _fit_r10(cells: GroundCells, model: SignalModel, rho, s_rho, known, config: SensorConfig) -> np.ndarray:
    """Each ring's R10 maximising the Bernoulli likelihood of its ground beams' detection; a ring with fewer
    than ``MIN_GROUND_POINTS`` ground beams keeps the start's value."""
    r10 = np.array(config.radiometry.ring_range_at_10pct_m, dtype=np.float64)
    det = cells.detected
    for ring in range(config.rings):
        sel = known & (cells.ring == ring)
        if sel.sum() < MIN_GROUND_POINTS:
            continue
        rho_r, range_r, cos_r, s_r, d = (
            rho[sel],
            cells.ground_range_m[sel],
            cells.cos_incidence[sel],
            s_rho[sel],
            det[sel],
        )

        def nll(log_r10: float, rho_r=rho_r, range_r=range_r, cos_r=cos_r, s_r=s_r, d=d) -> float:
            p = model.detection(rho_r, range_r, cos_r, s_r, float(np.exp(log_r10)))
            return float(-np.sum(np.where(d, np.log(p), np.log1p(-p))))

        lo, hi = np.log(R10_BOUNDS_M[0]), np.log(R10_BOUNDS_M[1])
        result = minimize_scalar(nll, bounds=(lo, hi), method="bounded", options={"xatol": 1e-4})
        if lo + 0.01 < result.x < hi - 0.01:  # at a bound the ring's beams do not tell R10 (all or none seen)
            r10[ring] = float(np.exp(result.x))
    return r10


def _fit_noise(cells: GroundCells, model: SignalModel, rho, r10_of, surfaces: dict) -> dict:
    """``std_m``, ``range_std_low_snr_m`` and ``roughness_m`` per surface maximising the normal likelihood
    of the range residuals below ``NOISE_RANGE_M``: variance ``s0^2 + (s_low SNR_spec / SNR)^2 +
    (s_h / c^1.5)^2`` (spec "Range Noise", "Ground Relief and Texture")."""
    names = list(surfaces)
    sel = cells.matched & (cells.ground_range_m < NOISE_RANGE_M) & np.isfinite(rho)
    if sel.sum() < MIN_GROUND_POINTS or not names:
        return {"std_m": None, "range_std_low_snr_m": None}
    residual = (cells.return_range_m - cells.ground_range_m)[sel]
    residual = residual - np.median(residual)
    s = model.signal(rho[sel], cells.ground_range_m[sel], cells.cos_incidence[sel], 1.0) * r10_of[sel] ** 2
    snr = s / np.sqrt(s + model.ambient)
    snr_spec = model.s10 / np.sqrt(model.s10 + model.ambient)
    low = (snr_spec / np.maximum(snr, 1e-3)) ** 2
    c3 = np.clip(np.abs(cells.cos_incidence[sel]), ROUGHNESS_COS_MIN, 1.0) ** 3
    surface = np.array(
        [names.index(MATERIAL_NAMES[int(m)]) if MATERIAL_NAMES[int(m)] in names else -1 for m in cells.material_id[sel]]
    )
    ok = surface >= 0
    residual, low, c3, surface = residual[ok], low[ok], c3[ok], surface[ok]
    r2 = residual**2

    def nll(x: np.ndarray) -> float:
        s0, s_low, *s_h = np.exp(x)
        var = s0**2 + s_low**2 * low + np.asarray(s_h)[surface] ** 2 / c3 + 1e-12
        return float(np.sum(np.log(var) + r2 / var))

    start = np.log(np.array([0.002, 0.03] + [0.001] * len(names)))
    result = minimize(nll, start, method="L-BFGS-B", bounds=[(np.log(1e-5), np.log(0.2))] * len(start))
    s0, s_low, *s_h = np.exp(result.x)
    for name, value in zip(names, s_h, strict=True):
        surfaces[name]["roughness_m"] = float(value)
    return {"std_m": float(s0), "range_std_low_snr_m": float(s_low)}


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
            if "reflectivity_sd" in v:
                entry["reflectivity_sd"] = round(v["reflectivity_sd"], 4)
            if "roughness_m" in v:
                entry["roughness_m"] = round(v["roughness_m"], 5)
            materials[name] = entry
        lidar["materials"] = materials
        if ground.get("std_m") is not None:
            lidar["std_m"] = round(float(ground["std_m"]), 5)
        radiometry: dict = {"ring_range_at_10pct_m": [round(float(v), 3) for v in ground["ring_range_at_10pct_m"]]}
        if ground.get("range_std_low_snr_m") is not None:
            radiometry["range_std_low_snr_m"] = round(float(ground["range_std_low_snr_m"]), 5)
        lidar["radiometry"] = radiometry
    return {
        "_comment": "Calibrated from recorded scans by acres-lidar calibrate (docs/calibration.md).",
        "extends": start_path,
        "lidar": lidar,
    }
