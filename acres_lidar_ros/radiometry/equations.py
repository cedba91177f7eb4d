"""The spec's radiometric equations, one pure vectorised function each (AcresLidarPhysics.h).

Every function takes floats or numpy arrays that broadcast together and returns float64
(a numpy scalar or 0-d result for scalar inputs; ``intensity_byte`` gives uint8). None of them
mutates its inputs or draws random numbers. Degenerate inputs (``cos theta = 0``, ``R = 0``,
``S + B = 0``) give the finite results stated in each docstring.

Angles are radians, ranges metres, signals counts, extinction coefficients 1/m.

The hash functions and the generator live in ``noise`` and the column timing in ``timing``:
import them from there (one import path per name).
"""

from __future__ import annotations

import math

import numpy as np

from acres_lidar_ros.config.schema import LIDAR_PARAM, MATERIAL_PARAM
from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.radiometry import equation_kernels as _scalar

__all__ = [
    "detection_threshold",
    "fog_extinction",
    "fog_visibility_m",
    "footprint_range_spread_m",
    "in_plane_divergence",
    "intensity_byte",
    "kim_q",
    "minnaert_backscatter",
    "normal_quantile",
    "pulse_peak_factor",
    "rain_extinction",
    "rain_visibility_extinction",
    "range_sigma_m",
    "reflectance_limit",
    "rough_range_sigma_m",
    "signal_counts",
    "tilted_cos",
    "tilted_incidence_rad",
]

HURST_EXPONENT = 0.5  # rough_range_sigma_m's exponent 1 + H is written as c sqrt(c)
KOSCHMIEDER_CONSTANT = 3.912
DB_PER_NEPER_FACTOR = 4.343  # 10 / ln 10: dB to natural-log extinction
FOG_REFERENCE_WAVELENGTH_NM = 550.0
RAIN_VISIBILITY_MIN_RATE_MM_PER_H = 0.05

# Defaults of the keyword arguments: the schema's (the spec's "Parameters"), declared there once.
_SPECULAR_WIDTH_RAD = math.radians(MATERIAL_PARAM["specular_width_deg"].default)
_INCIDENCE_EXPONENT = MATERIAL_PARAM["incidence_exponent"].default
_RAIN_EXTINCTION_DB_PER_KM = LIDAR_PARAM["weather.rain_extinction_db_per_km"].default
_RAIN_EXTINCTION_EXPONENT = LIDAR_PARAM["weather.rain_extinction_exponent"].default
_WAVELENGTH_NM = LIDAR_PARAM["wavelength_nm"].default


def _f64(x: np.ndarray | float) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def tilted_incidence_rad(
    cos_theta: np.ndarray | float, micro_slope_rad: np.ndarray | float, z: np.ndarray | float
) -> np.ndarray:
    """Micro-slope tilt: ``theta' = clamp(theta + sigma_t z, 0, pi/2 - 1e-4)``.

    Parameters
    ----------
    cos_theta : (...) float64
        ``|cos theta|`` of the hit (values outside [0, 1] are clipped first).
    micro_slope_rad : (...) float64
        ``sigma_t``, rad (0 switches the term off: ``theta' = min(theta, pi/2 - 1e-4)``).
    z : (...) float64
        Standard normal number of the 0.25 m ground cell.

    Returns
    -------
    (...) float64 ``theta'``, rad.
    """
    theta = np.arccos(np.clip(np.abs(_f64(cos_theta)), 0.0, 1.0))
    return _scalar.tilted_angle_ufunc(theta, micro_slope_rad, z)


def tilted_cos(cos_theta: np.ndarray | float, micro_slope_rad: np.ndarray | float, z: np.ndarray | float) -> np.ndarray:
    """TiltedCos: ``cos theta'`` with ``theta' = clamp(theta + sigma_t z, 0, pi/2 - 1e-4)``.

    Shapes and units as ``tilted_incidence_rad``; the result is in [sin 1e-4, 1], never 0.
    """
    return np.cos(tilted_incidence_rad(cos_theta, micro_slope_rad, z))


def rough_range_sigma_m(roughness_m: np.ndarray | float, cos_theta: np.ndarray | float) -> np.ndarray:
    """RoughRangeSigmaM: ``sigma_h / c^1.5`` with ``c = clamp(|cos theta'|, 0.05, 1)``.

    The roughness moves a ground hit to ``R <- max(0.01, R + sigma_h / c^1.5 z)``; the exponent
    1.5 is ``1 + H`` for a self-affine surface with the Hurst exponent ``H = 0.5``.

    Parameters
    ----------
    roughness_m : (...) float64
        ``sigma_h``, m.
    cos_theta : (...) float64
        ``|cos theta'|`` after the micro-slope tilt; 0 gives ``c = 0.05``.

    Returns
    -------
    (...) float64, m.
    """
    # c^(1 + H) with H = 1/2 is c sqrt(c): a square root instead of a power function.
    return _scalar.rough_range_sigma_ufunc(roughness_m, cos_theta)


def minnaert_backscatter(
    cos_theta: np.ndarray | float,
    reflectivity: np.ndarray | float,
    incidence_exponent: np.ndarray | float = _INCIDENCE_EXPONENT,
    specular: np.ndarray | float = 0.0,
    specular_width_rad: np.ndarray | float = _SPECULAR_WIDTH_RAD,
    wet_darkening: np.ndarray | float = 0.0,
    wetness: np.ndarray | float = 0.0,
) -> np.ndarray:
    """MinnaertBackscatter: the backscatter as an equivalent Lambertian reflectance.

    ``rho_bs = rho max(0, 1 - a_w w) max(|cos theta|, 1e-4)^k + s exp(-(theta / theta_s)^2)``

    Parameters
    ----------
    cos_theta : (...) float64
        ``|cos theta|`` (clipped to [0, 1]; ``theta = arccos |cos theta|``).
    reflectivity : (...) float64
        ``rho``, diffuse reflectance at normal incidence.
    incidence_exponent : (...) float64
        Minnaert ``k``: 1 Lambertian, 0 no change with incidence.
    specular : (...) float64
        ``s``, peak of the lobe as an equivalent Lambertian reflectance.
    specular_width_rad : (...) float64
        ``theta_s``, rad. A width of 0 is a lobe of no width: the term is 0.
    wet_darkening, wetness : (...) float64
        ``a_w`` and ``w``.

    Returns
    -------
    (...) float64 ``rho_bs`` >= 0, finite for ``cos theta = 0``.
    """
    with np.errstate(over="ignore"):  # theta / theta_s of a very narrow lobe: exp(-inf) = 0
        return _scalar.minnaert_backscatter_ufunc(
            cos_theta, reflectivity, incidence_exponent, specular, specular_width_rad, wet_darkening, wetness
        )


def footprint_range_spread_m(
    range_m: np.ndarray | float, cos_theta: np.ndarray | float, divergence_rad: np.ndarray | float
) -> np.ndarray:
    """FootprintRangeSpreadM: ``Delta R = R tan theta beta_p``.

    Parameters
    ----------
    range_m : (...) float64
        ``R``, m.
    cos_theta : (...) float64
        ``|cos theta|``; limited to 1e-4 or more, so grazing hits give a large finite spread.
    divergence_rad : (...) float64
        ``beta_p``, full-angle divergence in the plane of incidence, rad.

    Returns
    -------
    (...) float64, m.
    """
    return _scalar.footprint_range_spread_ufunc(range_m, cos_theta, divergence_rad)


def pulse_peak_factor(pulse_length_m: np.ndarray | float, range_spread_m: np.ndarray | float) -> np.ndarray:
    """PulsePeakFactor: ``g = L / sqrt(L^2 + Delta R^2)``; ``g = 1`` where ``L = 0``.

    Parameters
    ----------
    pulse_length_m : (...) float64
        ``L``, m (0 switches the echo stretch off).
    range_spread_m : (...) float64
        ``Delta R``, m.

    Returns
    -------
    (...) float64 in (0, 1].
    """
    return _scalar.pulse_peak_factor_ufunc(pulse_length_m, range_spread_m)


def in_plane_divergence(
    normal: np.ndarray,
    direction: np.ndarray,
    up: np.ndarray,
    divergence_h_rad: float | np.ndarray,
    divergence_v_rad: float | np.ndarray,
) -> np.ndarray:
    """InPlaneDivergence (ACRES Core): the divergence ``beta_p`` in the plane of incidence.

    ``n_perp = n - (n.d) d``, ``k_perp = k - (k.d) d``,
    ``cos psi = |n_perp . k_perp| / (|n_perp| |k_perp|)``,
    ``beta_p = sqrt((beta_v cos psi)^2 + (beta sin psi)^2)``.

    Parameters
    ----------
    normal, direction, up : (..., 3) float64
        Hit normal ``n``, unit ray direction ``d`` and the sensor's up axis ``k`` (broadcast).
    divergence_h_rad, divergence_v_rad : float or (...) float64
        ``beta`` and ``beta_v``, rad.

    Returns
    -------
    (...) float64, rad. Where the plane of incidence is undefined (normal incidence,
    ``n_perp = 0``) or the ray is along the up axis (``k_perp = 0``), ``cos psi = 1`` and
    ``beta_p = beta_v``; the echo stretch of a normal hit is 0 either way.
    """
    n = _f64(normal)
    d = _f64(direction)
    k = _f64(up)
    n_perp = n - np.sum(n * d, axis=-1, keepdims=True) * d
    k_perp = k - np.sum(k * d, axis=-1, keepdims=True) * d
    denom = np.linalg.norm(n_perp, axis=-1) * np.linalg.norm(k_perp, axis=-1)
    dot = np.abs(np.sum(n_perp * k_perp, axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        cos_psi = np.where(denom > 1e-12, np.clip(dot / np.where(denom > 1e-12, denom, 1.0), 0.0, 1.0), 1.0)
    sin_psi = np.sqrt(1.0 - cos_psi * cos_psi)
    return np.hypot(_f64(divergence_v_rad) * cos_psi, _f64(divergence_h_rad) * sin_psi)


def signal_counts(
    reflectance: np.ndarray | float,
    range_m: np.ndarray | float,
    peak_factor: np.ndarray | float,
    signal_at_10pct_counts: np.ndarray | float,
    range_at_10pct_m: np.ndarray | float,
    overlap_range_m: np.ndarray | float,
    extinction_per_m: np.ndarray | float = 0.0,
) -> np.ndarray:
    """SignalCounts: the range equation of an echo.

    ``S = S10 (rho_e / 0.1) (R10 / R_e)^2 (1 - exp(-(R_e / R_ov)^2)) g_e exp(-2 alpha R_e)``

    Parameters
    ----------
    reflectance : (...) float64
        ``rho_e``.
    range_m : (...) float64
        ``R_e``, m (>= 0).
    peak_factor : (...) float64
        ``g_e``.
    signal_at_10pct_counts : (...) float64
        ``S10``, counts.
    range_at_10pct_m : (...) float64
        ``R10``, m (per ring).
    overlap_range_m : (...) float64
        ``R_ov``, m. At ``R_e = 0`` the product ``(R10/R)^2 (1 - exp(-(R/R_ov)^2))`` takes its
        limit ``(R10 / R_ov)^2``. With ``R_ov = 0`` the overlap factor is 1 and ranges below
        1 mm count as 1 mm, so the signal stays finite.
    extinction_per_m : (...) float64
        ``alpha``, 1/m (0 in clear air).

    Returns
    -------
    (...) float64, counts.
    """
    with np.errstate(over="ignore", under="ignore"):
        return _scalar.signal_counts_ufunc(
            reflectance,
            range_m,
            peak_factor,
            signal_at_10pct_counts,
            range_at_10pct_m,
            overlap_range_m,
            extinction_per_m,
        )


def _normal_cdf(z: float) -> float:
    return 0.5 * math.erfc(-z / math.sqrt(2.0))


def normal_quantile(probability: float) -> float:
    """``z_p`` with ``Phi(z_p) = p``, found by bisection on [-40, 40] as the spec's C++ does.

    Raises
    ------
    ConfigError
        If ``p`` is not strictly between 0 and 1 (``radiometry.detection_probability_at_spec``).
    """
    p = float(probability)
    if not 0.0 < p < 1.0:
        raise ConfigError(
            f"radiometry.detection_probability_at_spec = {probability!r}: must be strictly between 0 and 1 "
            "(the schema allows 0.5 to 0.9999)"
        )
    lo, hi = -40.0, 40.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if _normal_cdf(mid) < p:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def detection_threshold(signal_at_10pct_counts: float, ambient_counts: float, detection_probability: float) -> float:
    """DetectionThreshold: ``S_T = S10 - z_p sqrt(S10 + B)``, ``Phi(z_p) = p_spec``.

    ``z_p`` comes from ``normal_quantile`` (bisection). The shipped ``S10 = 100``, ``B = 20``,
    ``p = 0.9`` give ``z_p = 1.2816`` and ``S_T = 85.961306`` counts. ``S10 + B <= 0`` gives
    ``S_T = S10``.

    Parameters
    ----------
    signal_at_10pct_counts : float
        ``S10``, counts.
    ambient_counts : float
        ``B``, counts.
    detection_probability : float
        ``p_spec`` in (0, 1).

    Returns
    -------
    float, counts.
    """
    z_p = normal_quantile(detection_probability)
    total = float(signal_at_10pct_counts) + float(ambient_counts)
    return float(signal_at_10pct_counts) - z_p * math.sqrt(max(total, 0.0))


def reflectance_limit(range_m: np.ndarray | float, max_range_m: float, reflectance_at_max_range: float) -> np.ndarray:
    """The engine paper's linear reflectance limit ``R_L(d) = R_L,max max(d, 0) / d_max``: the smallest
    Lambertian reflectance a target needs to be detected at the range ``d`` (0 at 0 m,
    ``R_L,max`` at ``d_max``). The detection model is ``R_L(d) <= R_lambda`` and ``d <= d_max``
    (``detection.reflectance_limit_detection``). ``max_range_m`` must be > 0."""
    return reflectance_at_max_range * np.maximum(_f64(range_m), 0.0) / max_range_m


def range_sigma_m(
    mean_signal_counts: np.ndarray | float,
    ambient_counts: np.ndarray | float,
    signal_at_10pct_counts: np.ndarray | float,
    std_m: np.ndarray | float,
    range_std_low_snr_m: np.ndarray | float,
) -> np.ndarray:
    """Range noise: ``sigma_R = sqrt(sigma_0^2 + (sigma_low SNR_spec / max(SNR, 1e-3))^2)``.

    ``SNR = S / sqrt(S + B)`` and ``SNR_spec = S10 / sqrt(S10 + B)``; ``S + B <= 0`` gives
    ``SNR = 0`` (so the floor 1e-3 applies), and the same for ``SNR_spec``.

    Parameters
    ----------
    mean_signal_counts : (...) float64
        ``S``, mean signal of the echo, counts.
    ambient_counts, signal_at_10pct_counts : (...) float64
        ``B`` and ``S10``, counts.
    std_m, range_std_low_snr_m : (...) float64
        ``sigma_0`` and ``sigma_low``, m.

    Returns
    -------
    (...) float64, m.
    """
    return _scalar.range_sigma_ufunc(
        mean_signal_counts, ambient_counts, signal_at_10pct_counts, std_m, range_std_low_snr_m
    )


def intensity_byte(reflectivity: np.ndarray | float) -> np.ndarray:
    """IntensityByte: the reported reflectance ``rho_rep`` as one byte.

    ``I = 0`` for ``rho <= 0`` (and NaN); ``round(100 rho)`` for ``0 < rho <= 1``;
    ``100 + round(155 min(1, ln rho / ln 64))`` for ``rho > 1``, at least 101 (the spec: the
    logarithmic scale for specular returns has the minimum 101). ``round`` is half away from
    zero, as C++ ``std::round``.

    Parameters
    ----------
    reflectivity : (...) float64

    Returns
    -------
    (...) uint8.
    """
    return _scalar.intensity_byte_ufunc(reflectivity)


def rain_extinction(
    rain_mm_per_h: np.ndarray | float,
    extinction_db_per_km: np.ndarray | float = _RAIN_EXTINCTION_DB_PER_KM,
    exponent: np.ndarray | float = _RAIN_EXTINCTION_EXPONENT,
) -> np.ndarray:
    """RainExtinction (Carbonneau and Wisely 1998): ``alpha_rain = a R_r^b / (4.343 * 1000)``.

    Parameters
    ----------
    rain_mm_per_h : (...) float64
        ``R_r``, mm/h (negative values count as 0).
    extinction_db_per_km : (...) float64
        ``a``, dB/km at 1 mm/h.
    exponent : (...) float64
        ``b``.

    Returns
    -------
    (...) float64, 1/m (0 without rain).
    """
    rate = np.maximum(_f64(rain_mm_per_h), 0.0)
    return np.where(rate > 0.0, _f64(extinction_db_per_km) * rate ** _f64(exponent), 0.0) / (
        DB_PER_NEPER_FACTOR * 1000.0
    )


def rain_visibility_extinction(rain_mm_per_h: np.ndarray | float) -> np.ndarray:
    """The rain part of the visibility: ``sigma_env = 3.912 / (11100 R_r^-0.63)`` for ``R_r > 0.05``, else 0.

    Parameters
    ----------
    rain_mm_per_h : (...) float64

    Returns
    -------
    (...) float64, 1/m at 550 nm.
    """
    rate = _f64(rain_mm_per_h)
    heavy = rate > RAIN_VISIBILITY_MIN_RATE_MM_PER_H
    return np.where(heavy, KOSCHMIEDER_CONSTANT * np.where(heavy, rate, 1.0) ** 0.63 / 11100.0, 0.0)


def fog_visibility_m(
    visibility_m: np.ndarray | float, rain_mm_per_h: np.ndarray | float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """Koschmieder with the rain part removed: ``sigma_550 = max(0, 3.912 / V - sigma_env)``, ``V_f = 3.912 / sigma_550``.

    Parameters
    ----------
    visibility_m : (...) float64
        ``V``, m; ``inf`` is clear air.
    rain_mm_per_h : (...) float64
        ``R_r``, mm/h.

    Returns
    -------
    sigma_550 : (...) float64, 1/m
    fog_visibility_m : (...) float64, m (``inf`` where ``sigma_550 = 0``).
    """
    v = _f64(visibility_m)
    with np.errstate(divide="ignore"):
        sigma = np.maximum(0.0, KOSCHMIEDER_CONSTANT / v - rain_visibility_extinction(rain_mm_per_h))
        v_f = np.where(sigma > 0.0, KOSCHMIEDER_CONSTANT / np.where(sigma > 0.0, sigma, 1.0), np.inf)
    return sigma, v_f


def kim_q(fog_visibility_m_: np.ndarray | float) -> np.ndarray:
    """Kim, McArthur and Korevaar (2001) size exponent ``q`` of the fog visibility ``V_f``.

    ``q = 1.6`` for ``V_f > 50 km``; 1.3 for 6 km < ``V_f`` <= 50 km; ``0.16 V_f + 0.34`` for
    1 km < ``V_f`` <= 6 km; ``V_f - 0.5`` for 0.5 km < ``V_f`` <= 1 km; 0 for ``V_f`` <= 0.5 km
    (``V_f`` in km in the formulas; the pieces meet at 6, 1 and 0.5 km).

    Parameters
    ----------
    fog_visibility_m_ : (...) float64, m

    Returns
    -------
    (...) float64.
    """
    v_km = _f64(fog_visibility_m_) / 1000.0
    return np.select(
        [v_km > 50.0, v_km > 6.0, v_km > 1.0, v_km > 0.5],
        [1.6, 1.3, 0.16 * v_km + 0.34, v_km - 0.5],
        default=0.0,
    )


def fog_extinction(
    visibility_m: np.ndarray | float,
    rain_mm_per_h: np.ndarray | float = 0.0,
    wavelength_nm: np.ndarray | float = _WAVELENGTH_NM,
) -> np.ndarray:
    """FogExtinction: ``alpha_fog = sigma_550 (lambda / 550 nm)^(-q)``.

    ``sigma_550`` and ``V_f`` come from ``fog_visibility_m`` (Koschmieder without the rain part),
    ``q`` from ``kim_q(V_f)``.

    Parameters
    ----------
    visibility_m : (...) float64
        Meteorological visibility ``V``, m; ``inf`` is clear air (``alpha_fog = 0``).
    rain_mm_per_h : (...) float64
        ``R_r``, mm/h.
    wavelength_nm : (...) float64
        ``lambda``, nm.

    Returns
    -------
    (...) float64, 1/m.
    """
    sigma, v_f = fog_visibility_m(visibility_m, rain_mm_per_h)
    return sigma * (_f64(wavelength_nm) / FOG_REFERENCE_WAVELENGTH_NM) ** (-kim_q(v_f))
