"""The spec's per-hit and per-echo equations as compiled scalar functions: their one implementation.

``physics`` exposes each as a vectorised function (a numpy ufunc built from the scalar one, so it
broadcasts and takes floats or arrays), and the compiled passes (``hit_passes``) call the scalar
ones directly, hit by hit, without a numpy pass per term. The docstrings of ``physics`` state the
equations, their parameters and their degenerate cases; here each function names its equation.

Clipping propagates NaN as ``np.clip`` does (``_clip``).
"""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np

COS_FLOOR = 1e-4
"""The diffuse term and the echo stretch limit ``|cos theta|`` to this value or more."""

MAX_TILT_RAD = 0.5 * math.pi - 1e-4
"""Upper limit of the tilted incidence ``theta'``."""

ROUGH_COS_MIN = 0.05
SNR_FLOOR = 1e-3

_jit = numba.njit(cache=True, nogil=True)


@_jit
def _clip(x: float, lo: float, hi: float) -> float:
    """``np.clip`` of one float: NaN stays NaN."""
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x


_NORM2_SAFE = 1e150


@_jit
def _norm2(a: float, b: float) -> float:
    """``sqrt(a^2 + b^2)``: a square root (a few times cheaper than libm's ``hypot``, equal to
    rounding) unless a square could overflow, then ``hypot``."""
    if abs(a) < _NORM2_SAFE and abs(b) < _NORM2_SAFE:
        return math.sqrt(a * a + b * b)
    return math.hypot(a, b)


@_jit
def tilted_angle_rad(theta_rad: float, micro_slope_rad: float, z: float) -> float:
    """Micro-slope tilt ``theta' = clamp(theta + sigma_t z, 0, pi/2 - 1e-4)`` of the incidence ``theta``."""
    return _clip(theta_rad + micro_slope_rad * z, 0.0, MAX_TILT_RAD)


@_jit
def rough_range_sigma_m(roughness_m: float, cos_theta: float) -> float:
    """RoughRangeSigmaM: ``sigma_h / c^1.5``, ``c = clamp(|cos theta'|, 0.05, 1)`` (``c^1.5 = c sqrt c``)."""
    c = _clip(abs(cos_theta), ROUGH_COS_MIN, 1.0)
    return roughness_m / (c * math.sqrt(c))


@_jit
def minnaert_backscatter(
    cos_theta: float,
    reflectivity: float,
    incidence_exponent: float,
    specular: float,
    specular_width_rad: float,
    wet_darkening: float,
    wetness: float,
) -> float:
    """MinnaertBackscatter: ``rho max(0, 1 - a_w w) max(|cos theta|, 1e-4)^k + s exp(-(theta / theta_s)^2)``;
    the lobe only where ``s > 0`` and ``theta_s > 0``."""
    c = _clip(abs(cos_theta), 0.0, 1.0)
    floored = max(c, COS_FLOOR) if c == c else c
    k = incidence_exponent
    # |cos|^k; the common exponents 0 (Polaris) and 1 (Lambertian) skip the power function.
    if k == 0.0:
        incidence = 1.0
    elif k == 1.0:
        incidence = floored
    else:
        incidence = floored**k
    wet = wet_darkening * wetness
    darkening = max(0.0, 1.0 - wet) if wet != 0.0 else 1.0
    rho_bs = reflectivity * darkening * incidence
    if specular > 0.0 and specular_width_rad > 0.0:
        ratio = math.acos(c) / specular_width_rad
        rho_bs += specular * math.exp(-(ratio * ratio))
    return rho_bs


@_jit
def footprint_range_spread_m(range_m: float, cos_theta: float, divergence_rad: float) -> float:
    """FootprintRangeSpreadM: ``Delta R = R tan theta beta_p``, ``|cos theta|`` limited to [1e-4, 1]."""
    c = _clip(abs(cos_theta), COS_FLOOR, 1.0)
    return range_m * (math.sqrt(1.0 - c * c) / c) * divergence_rad


@_jit
def pulse_peak_factor(pulse_length_m: float, range_spread_m: float) -> float:
    """PulsePeakFactor: ``g = L / sqrt(L^2 + Delta R^2)``; ``g = 1`` where ``L = 0``."""
    if pulse_length_m > 0.0:
        return pulse_length_m / _norm2(pulse_length_m, range_spread_m)
    return 1.0


@_jit
def albedo_factor(reflectivity_sd: float, z: float) -> float:
    """Albedo texture ``a = exp(s_rho z - s_rho^2 / 2)`` (mean 1) of the 0.1 m ground cell's normal ``z``."""
    return math.exp(reflectivity_sd * z - 0.5 * (reflectivity_sd * reflectivity_sd))


@_jit
def contribution_power(weight: float, transmission_in_front: float, tau: float, rho_bs: float, albedo: float) -> float:
    """A hit's contribution ``P = w_j T^2 (1 - tau) rho_bs a``."""
    return weight * transmission_in_front * transmission_in_front * (1.0 - tau) * rho_bs * albedo


@_jit
def signal_counts(
    reflectance: float,
    range_m: float,
    peak_factor: float,
    signal_at_10pct_counts: float,
    range_at_10pct_m: float,
    overlap_range_m: float,
    extinction_per_m: float,
) -> float:
    """SignalCounts: ``S = S10 (rho_e / 0.1) (R10 / R_e)^2 (1 - exp(-(R_e / R_ov)^2)) g_e exp(-2 alpha R_e)``.

    ``(R10 / R)^2 (1 - exp(-x))`` with ``x = (R / R_ov)^2`` is ``R10^2 / R_ov^2 f(x)``, where
    ``f(x) = (1 - exp(-x)) / x`` falls from ``f(0) = 1``: no 0/0 for tiny ``R``. ``R_ov = 0``:
    the overlap factor is 1 and ranges below 1 mm count as 1 mm.
    """
    r = abs(range_m)
    if overlap_range_m > 0.0:
        ratio = r / overlap_range_m
        x = ratio * ratio
        f = -math.expm1(-x) / x if x > 0.0 else 1.0
        geometry = f / (overlap_range_m * overlap_range_m)
    else:
        floored = max(r, 1e-3)
        geometry = 1.0 / (floored * floored)
    signal = (
        signal_at_10pct_counts * (reflectance / 0.1) * (range_at_10pct_m * range_at_10pct_m) * geometry * peak_factor
    )
    if extinction_per_m != 0.0:
        signal = signal * math.exp(-2.0 * extinction_per_m * r)
    return signal


@_jit
def range_sigma_m(
    mean_signal_counts: float,
    ambient_counts: float,
    signal_at_10pct_counts: float,
    std_m: float,
    range_std_low_snr_m: float,
) -> float:
    """Range noise ``sigma_R = sqrt(sigma_0^2 + (sigma_low SNR_spec / max(SNR, 1e-3))^2)``,
    ``SNR = S / sqrt(S + B)``, ``SNR_spec = S10 / sqrt(S10 + B)`` (``snr``)."""
    return range_sigma_of_snr(
        snr(mean_signal_counts, ambient_counts),
        snr(signal_at_10pct_counts, ambient_counts),
        std_m,
        range_std_low_snr_m,
    )


@_jit
def snr(signal_counts: float, ambient_counts: float) -> float:
    """``SNR = S / sqrt(S + B)``; 0 where ``S + B <= 0``."""
    total = signal_counts + ambient_counts
    return signal_counts / math.sqrt(total) if total > 0.0 else 0.0


@_jit
def range_sigma_of_snr(snr_echo: float, snr_spec: float, std_m: float, range_std_low_snr_m: float) -> float:
    """``range_sigma_m`` from the two SNRs (a pass over a scan's echoes forms ``SNR_spec`` once)."""
    floored = snr_echo if (snr_echo >= SNR_FLOOR or snr_echo != snr_echo) else SNR_FLOOR
    return _norm2(std_m, range_std_low_snr_m * snr_spec / floored)


@_jit
def measured_signal_counts(signal_counts: float, ambient_counts: float, n1: float) -> float:
    """Shot noise: ``S' = S + sqrt(max(S + B, 0)) n1``."""
    return signal_counts + math.sqrt(max(signal_counts + ambient_counts, 0.0)) * n1


@_jit
def intensity_byte(reflectivity: float) -> np.uint8:
    """IntensityByte: 0 for ``rho <= 0`` (and NaN); ``round(100 rho)`` for ``0 < rho <= 1``;
    ``max(101, 100 + round(155 min(1, ln rho / ln 64)))`` for ``rho > 1``; round half up."""
    if not reflectivity > 0.0:
        return np.uint8(0)
    if reflectivity <= 1.0:
        return np.uint8(math.floor(100.0 * reflectivity + 0.5))
    log_scale = min(1.0, math.log(reflectivity) / _LN_64)
    return np.uint8(max(101.0, 100.0 + math.floor(155.0 * log_scale + 0.5)))


_LN_64 = math.log(64.0)


def _vectorised(signature: str, scalar: Any) -> Any:
    """A numpy ufunc of ``scalar`` (float64 in, float64 out, cached)."""
    return numba.vectorize([signature], cache=True, nopython=True)(scalar.py_func)


_F7 = "float64(float64, float64, float64, float64, float64, float64, float64)"
tilted_angle_ufunc = _vectorised("float64(float64, float64, float64)", tilted_angle_rad)
rough_range_sigma_ufunc = _vectorised("float64(float64, float64)", rough_range_sigma_m)
minnaert_backscatter_ufunc = _vectorised(_F7, minnaert_backscatter)
footprint_range_spread_ufunc = _vectorised("float64(float64, float64, float64)", footprint_range_spread_m)
pulse_peak_factor_ufunc = _vectorised("float64(float64, float64)", pulse_peak_factor)
signal_counts_ufunc = _vectorised(_F7, signal_counts)
measured_signal_counts_ufunc = _vectorised("float64(float64, float64, float64)", measured_signal_counts)
range_sigma_ufunc = _vectorised("float64(float64, float64, float64, float64, float64)", range_sigma_m)
intensity_byte_ufunc = numba.vectorize(["uint8(float64)"], cache=True, nopython=True)(intensity_byte.py_func)
