"""The rain clutter of a whole scan (``clutter.kept_slabs``) against the spec's statistics.

The spec ("Rain and Fog", "Clutter"): a beam's slabs of ``Delta R`` start at ``min_range_m``; slab
``k`` holds ``N`` drops, Poisson with the mean ``Lambda_k = n_d pi (d_exit/2 + R_c beta/2)^2 Delta R``
(``n_d = 1951 R_r^0.21``); each drop has an exponential energy ``E_i`` of mean 1, and
``rho_slab = pi beta_rain Delta R (1/Lambda) sum E_i^2/2`` (no fog at an infinite visibility,
``beta_rain = alpha_rain / 500``, ``alpha_rain = 1.076 R_r^0.67 / 4343``). The slab is kept
unless ``S + 5 sqrt(S + B) < S_T`` with ``S`` the range equation at ``R_c``.

So a slab is kept when ``T = sum E_i^2 / 2`` reaches a threshold ``t`` of its ring and range bin.
The test computes ``P(T >= t)`` and the moments of ``T`` above ``t`` by numerical integration,
independently of the pass: with ``H_n(u) = P(E_1^2 + ... + E_n^2 > u^2)``,

    H_1(u) = exp(-u),   H_n(u) = exp(-u) + int_0^u exp(-e) H_{n-1}(sqrt(u^2 - e^2)) de,

summed over the Poisson weights of ``N``. Over the 57,600 beams of a Polaris scan it then compares,
per range bin, the count of kept slabs and the sum of their ``rho_slab`` (the echo strength the
clutter adds) with their expectations, within 5 standard deviations of the binomial / compound
sums. Doubling the drop energy (``E^2`` for ``E^2 / 2``) moves the nearest bin's count by about
40 sigma.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import roots_legendre
from scipy.stats import poisson

from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.radiometry.clutter import kept_slabs
from acres_lidar_ros.radiometry.noise import NoiseStreams
from acres_lidar_ros.radiometry.radiometric_model import BeamModel

RAIN_MM_PER_H = 10.0
SIGMAS = 5.0
U_MAX = 60.0  # H_n(60) < 1e-20 for the n that matter: the integrals stop there
U_GRID = np.linspace(0.0, U_MAX, 6001)
NODES, WEIGHTS = roots_legendre(160)


def tail_tables(n_max: int) -> np.ndarray:
    """(n_max + 1, len(U_GRID)): ``H_n`` on ``U_GRID`` (row 0 is ``H_0 = 0`` for u > 0)."""
    tables = np.zeros((n_max + 1, U_GRID.size))
    u = U_GRID[:, None]
    e = 0.5 * u * (NODES[None, :] + 1.0)  # Gauss-Legendre nodes on [0, u]
    w = 0.5 * u * WEIGHTS[None, :]
    rest = np.sqrt(np.maximum(u * u - e * e, 0.0))
    for n in range(1, n_max + 1):
        inner = np.interp(rest, U_GRID, tables[n - 1])
        tables[n] = np.exp(-U_GRID) + (w * np.exp(-e) * inner).sum(axis=1)
    return tables


def _integral_above(f: np.ndarray, u0: np.ndarray) -> np.ndarray:
    """``int_{u0}^{U_MAX} f(u) du`` for each ``u0`` (trapezoids on ``U_GRID``, linear at the start)."""
    steps = 0.5 * (f[1:] + f[:-1]) * np.diff(U_GRID)
    from_start = np.concatenate([[0.0], np.cumsum(steps)])
    total = from_start[-1]
    return total - np.interp(u0, U_GRID, from_start)


def kept_statistics(mean_drops: np.ndarray, t: np.ndarray, tables: np.ndarray):
    """Per slab of mean ``Lambda`` and threshold ``t`` (same shapes): ``P(T >= t)``,
    ``E[T; T >= t]`` and ``E[T^2; T >= t]`` of the compound sum ``T``."""
    u0 = np.sqrt(2.0 * np.maximum(t, 0.0))
    n = np.arange(tables.shape[0])
    weight = poisson.pmf(n[:, None], mean_drops.reshape(-1)[None, :])  # (n, slabs)
    u0f = u0.reshape(-1)
    tail = np.stack([np.interp(u0f, U_GRID, row) for row in tables])  # H_n(u0)
    # E[T; T >= t] = t P(T >= t) + int_t^inf P(T > s) ds, with s = u^2/2, ds = u du.
    first = np.stack([_integral_above(row * U_GRID, u0f) for row in tables])
    second = np.stack([_integral_above(row * U_GRID**3, u0f) for row in tables])
    tf = np.maximum(t, 0.0).reshape(-1)
    p = (weight * tail).sum(axis=0)
    m1 = tf * p + (weight * first).sum(axis=0)
    m2 = tf * tf * p + (weight * second).sum(axis=0)  # t^2 P + int_t^inf 2 s P(T > s) ds
    return p.reshape(t.shape), m1.reshape(t.shape), m2.reshape(t.shape)


def test_the_tail_tables_have_the_moments_of_the_drop_sums():
    # E[E^2 / 2] = 1 and Var = (E[E^4] / 4 - 1) = 6 - 1 = 5 per drop: the integration is good to 1e-4,
    # far below the 1-3 % statistical sigmas of the scan test.
    tables = tail_tables(6)
    zero = np.zeros(1)
    for n in range(1, 7):
        mean = _integral_above(tables[n] * U_GRID, zero)[0]
        second = _integral_above(tables[n] * U_GRID**3, zero)[0]
        assert mean == pytest.approx(n, rel=1e-4)
        assert second - mean**2 == pytest.approx(5.0 * n, rel=1e-4)
    np.testing.assert_allclose(tables[1], np.exp(-U_GRID), rtol=1e-12)
    # Two drops: P(E1^2 + E2^2 > u^2) at u = 2 by a direct quadrature of the quarter disc's complement.
    x = np.linspace(0.0, 2.0, 200_001)
    inside = np.trapezoid(np.exp(-x) * (1.0 - np.exp(-np.sqrt(4.0 - x * x))), x)
    assert np.interp(2.0, U_GRID, tables[2]) == pytest.approx(1.0 - inside, rel=1e-5)


@pytest.fixture(scope="module")
def polaris_rain():
    config = load_sensor_config("polaris")
    model = BeamModel.build(config, noise=False, rain_mm_per_h=RAIN_MM_PER_H, visibility_m=math.inf)
    return config, model


def expected_per_bin(config, model):
    """(center_m, count, count variance, rho sum, rho sum variance) per slab bin, from the spec."""
    rad, weather = config.radiometry, config.weather
    separation = config.min_return_separation_m
    start_m = max(config.min_range_m, config.windows.range_offset_m)
    stop_m = min(weather.clutter_max_range_m, config.range_m)
    n_bins = int(math.floor((stop_m - start_m) / separation + 1e-9))
    center_m = start_m + (np.arange(n_bins) + 0.5) * separation
    n_d = 1951.0 * RAIN_MM_PER_H**0.21
    radius_m = 0.5 * weather.exit_diameter_m + 0.5 * center_m * config.beam_divergence_rad
    mean_drops = n_d * math.pi * radius_m**2 * separation  # Lambda_k
    alpha_rain = 1.076 * RAIN_MM_PER_H**0.67 / 4343.0
    rain_factor = math.pi * (alpha_rain / 500.0) * separation
    r10 = np.asarray(rad.ring_range_at_10pct_m, dtype=np.float64)[:, None]  # (rings, 1)
    r = center_m[None, :]
    unit_signal = (
        rad.signal_at_10pct_counts / 0.1 * (r10 / r) ** 2 * (1.0 - np.exp(-((r / rad.overlap_range_m) ** 2)))
    ) * np.exp(-2.0 * alpha_rain * r)  # S of rho = 1, (rings, bins)
    # The smallest S that is kept: S + 5 sqrt(S + B) = S_T, with q = sqrt(S + B).
    b, s_t = float(rad.ambient_counts), float(model.detection_threshold_counts)
    q = 0.5 * (-5.0 + math.sqrt(25.0 + 4.0 * (s_t + b)))
    s_min = q * q - b
    t = s_min / unit_signal * mean_drops[None, :] / rain_factor  # threshold on T = sum E^2/2
    p, m1, m2 = kept_statistics(np.broadcast_to(mean_drops, t.shape), t, tail_tables(24))
    beams = config.columns  # per ring
    scale = rain_factor / mean_drops[None, :]  # rho_slab = scale T
    count = beams * p.sum(axis=0)
    count_var = beams * (p * (1.0 - p)).sum(axis=0)
    rho = beams * (scale * m1).sum(axis=0)
    rho_var = beams * (scale**2 * (m2 - m1 * m1)).sum(axis=0)
    return center_m, count, count_var, rho, rho_var


def test_rain_clutter_counts_and_strengths_per_range_bin_follow_the_spec(polaris_rain):
    config, model = polaris_rain
    assert model.power_ratio is None and model.atmosphere.beta_fog_per_m_sr == 0.0
    center_m, count, count_var, rho, rho_var = expected_per_bin(config, model)
    n_beams = config.columns * config.rings
    cell, slab_center_m, slab_rho = kept_slabs(model, NoiseStreams(0).rain, np.full(n_beams, np.inf))
    assert slab_center_m.size == cell.size == slab_rho.size
    bin_of = np.rint((slab_center_m - center_m[0]) / config.min_return_separation_m).astype(np.int64)
    np.testing.assert_allclose(slab_center_m, center_m[bin_of], rtol=0.0, atol=1e-12)
    seen = np.bincount(bin_of, minlength=center_m.size)
    seen_rho = np.bincount(bin_of, weights=slab_rho, minlength=center_m.size)
    assert seen.size == center_m.size  # no slab beyond clutter_max_range_m
    count_z = (seen - count) / np.sqrt(count_var)
    rho_z = (seen_rho - rho) / np.sqrt(rho_var)
    table = "\n".join(
        f"R_c {c:5.3f} m: kept {s:5d} expected {e:8.1f} (z {zc:+.1f}); rho sum {sr:.4g} expected {er:.4g} (z {zr:+.1f})"
        for c, s, e, zc, sr, er, zr in zip(center_m, seen, count, count_z, seen_rho, rho, rho_z)
    )
    assert seen[0] > 2000 and seen[3] > 500, table  # the near bins hold thousands: the sigmas are a few %
    # Bins expecting 20 or more kept slabs one by one (the normal limit holds there); the far bins pooled.
    each = count >= 20.0
    assert each.sum() >= 6, table
    assert np.all(np.abs(count_z[each]) < SIGMAS), table
    assert np.all(np.abs(rho_z[each]) < SIGMAS), table
    far = ~each
    assert abs(seen[far].sum() - count[far].sum()) < SIGMAS * math.sqrt(count_var[far].sum()) + 1.0, table
    # Over the whole scan the same, tighter in relative terms.
    assert abs(seen.sum() - count.sum()) < SIGMAS * math.sqrt(count_var.sum()), table
    # Each kept slab is of its beam's first 13 slabs, cells of the scan, each at most once per bin.
    assert cell.min() >= 0 and cell.max() < n_beams
    assert np.unique(cell * center_m.size + bin_of).size == cell.size
