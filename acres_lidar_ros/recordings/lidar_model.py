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
from scipy.optimize import minimize
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
R10_MIN_GAIN = 3.0
"""The least log-likelihood gain over the start's R10 that a ring's fit must show to replace it."""
BODY_MARGIN_COLUMNS = 5
"""The ground fit leaves out the body's cells and this many columns on each side of them in their ring:
at the body's edge a beam is stopped in some scans without any body return (``p_block``)."""
NOISE_RANGE_M = 10.0
MIN_GROUND_POINTS = 20
MAD_TO_SIGMA = 1.4826
ROUGHNESS_COS_MIN = 0.05
FIT_BEAMS = 10_000
"""The most beams of one surface that the albedo fit takes, evenly thinned; the noise fit takes
``NOISE_FIT_BEAMS`` of each surface and the R10 fit ``R10_FIT_BEAMS`` of each ring (their likelihoods
are integrals over the micro-slope, 5 to 25 times dearer per beam)."""
NOISE_FIT_BEAMS = 3_000
R10_FIT_BEAMS = 2_500
MIN_NOISE_RING_BEAMS = 200
"""The fewest beams of a ring among the noise fit's for its R10 to be fitted from its noise (or to pin
``range_std_low_snr_m``): a ring that meets the ground far away has few beams below 10 m, on slopes."""
MICRO_SLOPE_MAX_DEG = 30.0


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
    wetness: np.ndarray  # the scene's wetness w of the ground hit (soil: its water model; spec "Ground")

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
                hits.wetness[on, 0].astype(np.float64),
            )
        )
    if not parts:
        e = np.zeros(0)
        return GroundCells(np.zeros(0, np.int64), e, e, np.zeros(0, np.int64), e, e, e)
    return GroundCells(*(np.concatenate([p[k] for p in parts]) for k in range(7)))


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
        self,
        rho: np.ndarray,
        range_m: np.ndarray,
        cos_theta: np.ndarray,
        s_rho: np.ndarray,
        r10_m: float,
        sigma_t_rad: np.ndarray | float = 0.0,
    ) -> np.ndarray:
        """P(S' >= S_T), averaged over the albedo texture's lognormal factor and the micro-slope's tilt of
        the incidence (``theta' = theta + sigma_t z``; Gauss-Hermite, 5 x 3 nodes)."""
        x, w = _nodes(5)
        zt, wt = _nodes(3)
        p = np.zeros(np.shape(range_m))
        for zk, wk in zip(zt, wt, strict=True):
            cos_k = tilted_cos(cos_theta, sigma_t_rad, zk)
            for xk, vk in zip(x, w, strict=True):
                a = np.exp(s_rho * xk - 0.5 * s_rho**2)
                s = self.signal(rho * a, range_m, cos_k, r10_m)
                p += wk * vk * norm.cdf((s - self.threshold) / np.sqrt(np.maximum(s + self.ambient, 1e-9)))
        return np.clip(p, 1e-9, 1 - 1e-9)


def _nodes(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Hermite nodes and weights (summing to 1) of the expectation over a standard normal."""
    x, w = np.polynomial.hermite_e.hermegauss(n)
    return x, w / w.sum()


def tilted_cos(cos_theta: np.ndarray, sigma_t_rad: np.ndarray | float, z: float) -> np.ndarray:
    """``cos theta'`` of the spec's micro-slope, ``theta' = clamp(theta + sigma_t z, 0, pi/2 - 1e-4)``."""
    theta = np.arccos(np.clip(np.abs(cos_theta), 0.0, 1.0))
    return np.cos(np.clip(theta + np.asarray(sigma_t_rad) * z, 0.0, np.pi / 2 - 1e-4))


def fit_ground(cells: GroundCells, config: SensorConfig) -> dict:
    """The radiometry from the ground beams (maximum likelihood, docs/calibration.md "Calibration").

    Per ground material with at least ``MIN_GROUND_POINTS`` matched beams: ``reflectivity`` the median
    intensity / 100; ``reflectivity_sd`` from the intensity bytes (``_fit_albedo_sd``); ``std_m``,
    ``range_std_low_snr_m``, each surface's ``roughness_m`` and ``micro_slope_deg`` together from the range
    residuals below 10 m (``_fit_noise``); then ``R10`` per ring from the detection of its ground beams, with
    that albedo texture and micro-slope (``_fit_r10``).
    """
    model = SignalModel.of(config)
    det = cells.matched
    surfaces, rho = _surfaces(cells, config)
    s_rho = np.zeros(cells.ring.size)
    sigma_t = np.zeros(cells.ring.size)
    r10_start = np.array(config.radiometry.ring_range_at_10pct_m, dtype=np.float64)
    for name, v in surfaces.items():
        of = cells.material_id == MATERIAL_NAMES.index(name)
        v["reflectivity_sd"] = _fit_albedo_sd(cells, model, rho, v["reflectivity"], r10_start, of & det)
        s_rho[of] = v["reflectivity_sd"]
    noise = _fit_noise(cells, model, rho, r10_start, surfaces)  # with sigma_t of each surface
    for name, v in surfaces.items():
        sigma_t[cells.material_id == MATERIAL_NAMES.index(name)] = np.deg2rad(v.get("micro_slope_deg", 0.0))
    known = np.isfinite(rho) & (cells.ground_range_m <= model.range_max_m)
    r10, told = _fit_r10(cells, model, rho, s_rho, sigma_t, known, config)
    if noise["std_m"] is not None:
        r10, noise["range_std_low_snr_m"], from_noise = _fit_low_snr(cells, model, rho, r10, ~told, surfaces, noise)
        noise["r10_rings_from_noise"] = from_noise
    return {"surfaces": surfaces, "ring_range_at_10pct_m": r10.tolist(), **noise}


def _surfaces(cells: GroundCells, config: SensorConfig) -> tuple[dict[str, dict], np.ndarray]:
    """The ground materials with at least ``MIN_GROUND_POINTS`` matched beams, each with its ``reflectivity``,
    and each beam's reflectance as the sensor sees it (NaN for the other materials).

    ``reflectivity`` is the median intensity / 100 (as the Polaris overlay has it) of the dry surface: each
    beam's intensity divided by the wetness loss ``max(0, 1 - a_w w)`` of its hit (spec "Backscatter"; ``a_w``
    the material's ``wet_darkening`` of ``config``, ``w`` the scene's wetness there), so a simulator that
    darkens wet ground again does not darken it twice; a beam's reflectance is that times its loss."""
    surfaces: dict[str, dict] = {}
    rho = np.full(cells.ring.size, np.nan)
    loss = np.maximum(0.0, 1.0 - config.materials.wet_darkening[cells.material_id] * cells.wetness)
    for material in np.unique(cells.material_id):
        of = cells.material_id == material
        sel = of & cells.matched & (loss > 0.05)
        if sel.sum() < MIN_GROUND_POINTS:
            continue
        name = MATERIAL_NAMES[int(material)]
        dry = float(np.median(cells.intensity[sel] / loss[sel]) / 100.0)
        surfaces[name] = {
            "points": int(sel.sum()),
            "reflectivity": dry,
            "wet_share": float(np.mean(cells.wetness[sel] > 0)),
        }
        rho[of] = dry * loss[of]
    return surfaces, rho


def fit_range_noise(cells: GroundCells, config: SensorConfig) -> dict:
    """The range-noise part of ``fit_ground`` alone (``_fit_noise``), with ``config``'s R10 per ring:
    ``{"surfaces": {name: {..., roughness_m, micro_slope_deg}}, "std_m", "range_std_low_snr_m", ...}``."""
    surfaces, rho = _surfaces(cells, config)
    r10 = np.array(config.radiometry.ring_range_at_10pct_m, dtype=np.float64)
    return {"surfaces": surfaces, **_fit_noise(cells, SignalModel.of(config), rho, r10, surfaces)}


def _every(selection: np.ndarray, most: int) -> np.ndarray:
    """The indices of ``selection``, evenly thinned to at most ``most`` (deterministic)."""
    idx = np.flatnonzero(selection)
    return idx if idx.size <= most else idx[np.linspace(0, idx.size - 1, most).round().astype(np.int64)]


def _fit_albedo_sd(
    cells: GroundCells, model: SignalModel, rho: np.ndarray, dry: float, r10: np.ndarray, sel: np.ndarray
) -> float:
    """``s_rho`` by maximum likelihood of the intensity bytes of the matched beams (diffuse, 1 to 100).

    The byte is ``round(100 rho a S' / S)`` (spec "Reflectivity, Signal and Intensity"): its log is
    about normal with the mean ``mu`` and the variance ``s_rho^2 + (S + B) / S^2`` (albedo texture and
    shot noise), and a byte ``k`` is that log between ``log(k - 1/2)`` and ``log(k + 1/2)``. The
    rounding is thus in the likelihood (``rho`` each beam's reflectance, ``dry`` the material's: a wet
    beam's mean is lower by ``log(rho / dry)``): a robust spread of the bytes of a dark surface (10 +- 1) is
    set by the byte steps, not by ``s_rho``."""
    idx = _every(sel & (cells.intensity >= 1) & (cells.intensity <= 100), FIT_BEAMS)
    if idx.size < MIN_GROUND_POINTS:
        return 0.0
    k = np.rint(cells.intensity[idx])
    offset = np.log(np.maximum(rho[idx], 1e-6) / dry)
    s = model.signal(rho[idx], cells.ground_range_m[idx], cells.cos_incidence[idx], 1.0)
    s = s * r10[cells.ring[idx]] ** 2
    shot = (s + model.ambient) / np.maximum(s, 1e-9) ** 2
    lo, hi = np.log(np.maximum(k - 0.5, 1e-3)), np.log(k + 0.5)

    def nll(x: np.ndarray) -> float:
        sd = np.sqrt(np.exp(2 * x[1]) + shot)
        p = norm.cdf((hi - x[0] - offset) / sd) - norm.cdf((lo - x[0] - offset) / sd)
        return float(-np.sum(np.log(np.maximum(p, 1e-300))))

    start = np.array([np.log(max(np.median(k), 1.0)), np.log(0.1)])
    result = minimize(nll, start, method="L-BFGS-B", bounds=[(None, None), (np.log(1e-3), np.log(2.0))])
    return float(np.exp(result.x[1]))


def _fit_r10(
    cells: GroundCells, model: SignalModel, rho, s_rho, sigma_t, known, config: SensorConfig
) -> tuple[np.ndarray, np.ndarray]:
    """Each ring's R10 by maximum likelihood of its ground beams' detection: a beam is detected with the
    probability ``(1 - delta) P(S' >= S_T)``, ``delta`` (fitted per ring) the share lost for reasons the
    model does not have (water, an edge of the body's shadow), which would otherwise read as a weak
    signal. A ring keeps the start's value where its beams do not tell R10: fewer than
    ``MIN_GROUND_POINTS`` beams, an optimum at a bound, or a likelihood gain over the start's value below
    ``R10_MIN_GAIN`` (nearly all beams seen at any R10, as the near rings' are). Returns R10 per ring and
    (rings,) bool: the rings whose detection told it."""
    r10 = np.array(config.radiometry.ring_range_at_10pct_m, dtype=np.float64)
    told = np.zeros(config.rings, bool)
    det = cells.detected
    lo, hi = np.log(R10_BOUNDS_M[0]), np.log(R10_BOUNDS_M[1])
    for ring in range(config.rings):
        sel = _every(known & (cells.ring == ring), R10_FIT_BEAMS)
        if sel.size < MIN_GROUND_POINTS:
            continue
        rho_r, range_r, cos_r, s_r, t_r, d = (
            rho[sel],
            cells.ground_range_m[sel],
            cells.cos_incidence[sel],
            s_rho[sel],
            sigma_t[sel],
            det[sel],
        )

        def nll(x: np.ndarray, rho_r=rho_r, range_r=range_r, cos_r=cos_r, s_r=s_r, t_r=t_r, d=d) -> float:
            delta = 1.0 / (1.0 + np.exp(-x[1]))
            p = np.clip(
                (1 - delta) * model.detection(rho_r, range_r, cos_r, s_r, float(np.exp(x[0])), t_r), 1e-9, 1 - 1e-9
            )
            return float(-np.sum(np.where(d, np.log(p), np.log1p(-p))))

        delta_bounds = (np.log(1e-6), np.log(0.5))
        start = np.log(r10[ring])
        at_start = minimize(
            lambda y, start=start: nll(np.array([start, y[0]])), [-5.0], method="L-BFGS-B", bounds=[delta_bounds]
        )
        best = minimize(nll, [start, at_start.x[0]], method="L-BFGS-B", bounds=[(lo, hi), delta_bounds])
        inside = lo + 0.01 < best.x[0] < hi - 0.01
        if inside and at_start.fun - best.fun >= R10_MIN_GAIN:
            r10[ring] = float(np.exp(best.x[0]))
            told[ring] = True
    return r10, told


def _noise_beams(cells: GroundCells, rho, surfaces: dict) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """The noise fits' beams: matched, below ``NOISE_RANGE_M``, ``NOISE_FIT_BEAMS`` of each surface that has
    ``MIN_GROUND_POINTS``; their surfaces' names, indices, surface numbers and squared residuals (median
    removed)."""
    near = cells.matched & (cells.ground_range_m < NOISE_RANGE_M) & np.isfinite(rho)
    names = [
        n
        for n in surfaces
        if np.count_nonzero(near & (cells.material_id == MATERIAL_NAMES.index(n))) >= MIN_GROUND_POINTS
    ]
    parts = [_every(near & (cells.material_id == MATERIAL_NAMES.index(n)), NOISE_FIT_BEAMS) for n in names]
    idx = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    residual = (cells.return_range_m - cells.ground_range_m)[idx]
    r2 = (residual - np.median(residual)) ** 2 if idx.size else residual
    surface = np.concatenate([np.full(p.size, k) for k, p in enumerate(parts)]) if parts else idx
    return names, idx, surface, r2


def _fit_low_snr(
    cells: GroundCells, model: SignalModel, rho, r10: np.ndarray, free: np.ndarray, surfaces: dict, noise: dict
) -> tuple[np.ndarray, float, list[int]]:
    """``range_std_low_snr_m`` again, with the R10 of the rings whose detection did not tell it (``free``)
    fitted from their range noise: the low-SNR term of a beam is ``s_low SNR_spec / SNR``, ``SNR`` about
    ``sqrt(S)`` and ``S`` proportional to ``R10^2``, so a ring's noise tells ``s_low / R10``, and the rings
    whose R10 the detection told pin ``s_low``. ``std_m``, the roughness, the micro-slope and ``eps`` stay
    those of ``_fit_noise``. Returns R10 per ring, ``s_low`` and the rings fitted here."""
    names, idx, surface, r2 = _noise_beams(cells, rho, surfaces)
    ring_i = cells.ring[idx]
    seen = np.bincount(ring_i, minlength=r10.size) >= MIN_NOISE_RING_BEAMS
    free_rings = np.flatnonzero(seen & free)
    if not (seen & ~free).any():  # nothing pins s_low: keep the first fit
        return r10, float(noise["range_std_low_snr_m"]), []
    s_h = np.array([surfaces[n]["roughness_m"] for n in names])[surface]
    s_t = np.deg2rad(np.array([surfaces[n]["micro_slope_deg"] for n in names]))[surface]
    eps, s0 = noise["noise_outlier_share"], noise["std_m"]
    rho_i, range_i, cos_i = rho[idx], cells.ground_range_m[idx], cells.cos_incidence[idx]
    snr_spec = model.s10 / np.sqrt(model.s10 + model.ambient)
    z, w = _nodes(5)
    tilted = [tilted_cos(cos_i, s_t, zk) for zk in z]
    rough = [s_h**2 / np.maximum(c, ROUGHNESS_COS_MIN) ** 3 for c in tilted]
    unit = [model.signal(rho_i, range_i, c, 1.0) for c in tilted]  # S at R10 = 1 m: S scales with R10^2

    def nll(x: np.ndarray) -> float:
        ring_r10 = r10.copy()
        ring_r10[free_rings] = np.exp(x[1:])
        r10_sq = ring_r10[ring_i] ** 2
        density = np.zeros(idx.size)
        for wk, u, rk in zip(w, unit, rough, strict=True):
            s = u * r10_sq
            var = s0**2 + (np.exp(x[0]) * snr_spec * np.sqrt(s + model.ambient) / np.maximum(s, 1e-9)) ** 2 + rk
            density += wk * np.exp(-0.5 * r2 / var) / np.sqrt(2 * np.pi * var)
        return float(-np.sum(np.log((1 - eps) * density + eps / (2.0 * GROUND_MATCH_M) + 1e-300)))

    start = np.concatenate([[np.log(noise["range_std_low_snr_m"])], np.log(r10[free_rings])])
    bounds = [(np.log(1e-5), np.log(0.2))] + [(np.log(R10_BOUNDS_M[0]), np.log(R10_BOUNDS_M[1]))] * free_rings.size
    result = minimize(nll, start, method="L-BFGS-B", bounds=bounds)
    fitted = r10.copy()
    fitted[free_rings] = np.exp(result.x[1:])
    return fitted, float(np.exp(result.x[0])), free_rings.tolist()


def _fit_noise(cells: GroundCells, model: SignalModel, rho, r10: np.ndarray, surfaces: dict) -> dict:
    """``std_m``, ``range_std_low_snr_m``, and per surface ``roughness_m`` and ``micro_slope_deg``, by
    maximum likelihood of the range residuals below ``NOISE_RANGE_M`` (docs/calibration.md,
    "Calibration"). A residual (return minus ground hit, the median removed) is normal with the variance
    ``s0^2 + (s_low SNR_spec / SNR')^2 + (s_h / c'^1.5)^2`` (spec "Range Noise", "Ground Relief and
    Texture"), where the micro-slope tilts the incidence, ``theta' = theta + sigma_t z``, which changes
    ``c' = clamp(cos theta', 0.05, 1)`` and the echo stretch in ``SNR'`` (expectation over ``z``:
    Gauss-Hermite, 5 nodes); with the probability ``eps`` (fitted) it is a return the model does not
    describe, spread evenly over the match window. Near grazing incidence the micro-slope gives the
    residuals heavy tails; a fit without it widens ``s_h`` for them and the simulator's spread comes out
    wider than the recording's.
    ``r10`` (rings,) the R10 of each ring."""
    names, idx, surface, r2 = _noise_beams(cells, rho, surfaces)
    if idx.size < MIN_GROUND_POINTS:
        return {"std_m": None, "range_std_low_snr_m": None}
    rho_i, range_i, cos_i, ring_i = rho[idx], cells.ground_range_m[idx], cells.cos_incidence[idx], cells.ring[idx]
    r10_i = np.asarray(r10, dtype=np.float64)[ring_i]
    snr_spec = model.s10 / np.sqrt(model.s10 + model.ambient)
    z, w = _nodes(5)
    log_uniform = -np.log(2.0 * GROUND_MATCH_M)
    n = len(names)

    def nll(x: np.ndarray) -> float:
        eps = 1.0 / (1.0 + np.exp(-x[0]))
        s0, s_low = np.exp(x[1:3])
        s_h, s_t = np.exp(x[3 : 3 + n])[surface], x[3 + n : 3 + 2 * n][surface]
        density = np.zeros(idx.size)
        for zk, wk in zip(z, w, strict=True):
            c = tilted_cos(cos_i, s_t, zk)
            s = model.signal(rho_i, range_i, c, r10_i)
            snr = s / np.sqrt(s + model.ambient)
            var = (
                s0**2 + (s_low * snr_spec / np.maximum(snr, 1e-3)) ** 2 + s_h**2 / np.maximum(c, ROUGHNESS_COS_MIN) ** 3
            )
            density += wk * np.exp(-0.5 * r2 / var) / np.sqrt(2 * np.pi * var)
        return float(-np.sum(np.log((1 - eps) * density + eps * np.exp(log_uniform) + 1e-300)))

    start = np.concatenate(
        [
            [np.log(0.01 / 0.99)],
            np.log([0.002, 0.03]),
            np.log([0.001] * n),
            [np.deg2rad(3.0)] * n,
        ]
    )
    bounds = (
        [(np.log(1e-6), np.log(1.0))]
        + [(np.log(1e-5), np.log(0.2))] * 2
        + [(np.log(1e-5), np.log(0.2))] * n
        + [(0.0, np.deg2rad(MICRO_SLOPE_MAX_DEG))] * n
    )
    result = minimize(nll, start, method="L-BFGS-B", bounds=bounds)
    eps = 1.0 / (1.0 + np.exp(-result.x[0]))
    s0, s_low = np.exp(result.x[1:3])
    for k, name in enumerate(names):
        surfaces[name]["roughness_m"] = float(np.exp(result.x[3 + k]))
        surfaces[name]["micro_slope_deg"] = float(np.rad2deg(result.x[3 + n + k]))
    return {"std_m": float(s0), "range_std_low_snr_m": float(s_low), "noise_outlier_share": float(eps)}


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
            if "micro_slope_deg" in v:
                entry["micro_slope_deg"] = round(v["micro_slope_deg"], 3)
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
