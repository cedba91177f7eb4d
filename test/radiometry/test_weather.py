"""Rain and fog: extinction, backscatter, drops and slabs against hand computations."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from acres_lidar_ros.config.schema import LIDAR_PARAMS
from acres_lidar_ros.config.sensors import WeatherConfig, load_sensor_config
from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.radiometry.noise import Pcg32
from acres_lidar_ros.radiometry.weather import (
    CLEAR_AIR,
    atmosphere,
    check_conditions,
    clutter_slabs,
    drop_density_per_m3,
    exponential_from_uniform,
    fog_backscatter,
    haze_blend,
    mean_drops_in_slab,
    poisson_from_uniform,
    rain_backscatter,
    slab_drop_energy,
    slab_is_skipped,
    slab_reflectance,
)

WAVELENGTH_NM = 905.0
WEATHER = WeatherConfig(**{p.name.split(".", 1)[1]: p.default for p in LIDAR_PARAMS if p.name.startswith("weather.")})
"""The schema's defaults of the weather block."""
WAVELENGTH_FACTOR = WAVELENGTH_NM / 550.0  # 1.645455


def hand_alpha(rain: float, visibility_m: float) -> tuple[float, float]:
    """(alpha_rain, alpha_fog) written out from the spec's equations, step by step."""
    alpha_rain = 1.076 * rain**0.67 / 4343.0 if rain > 0 else 0.0
    sigma_env = 3.912 / (11100.0 * rain**-0.63) if rain > 0.05 else 0.0
    sigma = max(0.0, 3.912 / visibility_m - sigma_env)
    if sigma == 0.0:
        return alpha_rain, 0.0
    v_km = 3.912 / sigma / 1000.0
    if v_km > 50:
        q = 1.6
    elif v_km > 6:
        q = 1.3
    elif v_km > 1:
        q = 0.16 * v_km + 0.34
    elif v_km > 0.5:
        q = v_km - 0.5
    else:
        q = 0.0
    return alpha_rain, sigma * WAVELENGTH_FACTOR**-q


@pytest.mark.parametrize(
    "rain, visibility_m, alpha_rain, alpha_fog",
    [
        # Light rain, clear air: 2^0.67 = 1.591073, 1.076 * 1.591073 / 4343 = 3.941963e-4;
        # sigma = max(0, 0 - sigma_env) = 0.
        (2.0, math.inf, 3.941963e-4, 0.0),
        # 10 mm/h in 5 km: sigma_env = 1.503405e-3, sigma = 7.824e-4 - env < 0 -> no fog.
        (10.0, 5000.0, 1.158843e-3, 0.0),
        # Dry haze of 3 km: sigma = 1.304e-3, q = 0.16 * 3 + 0.34 = 0.82, alpha = 1.304e-3 * 1.645455^-0.82.
        (0.0, 3000.0, 0.0, 1.304e-3 * WAVELENGTH_FACTOR**-0.82),
        # Fog of 300 m with 25 mm/h: 25^0.67 = 8.642110, alpha_rain = 1.076 * 8.642110 / 4343 = 2.141126e-3;
        # 25^0.63 = 7.598051, sigma_env = 3.912 * 7.598051 / 11100 = 2.677800e-3,
        # sigma = 0.01304 - 2.677800e-3 = 1.036220e-2, V_f = 377.5 m < 500 m -> q = 0, alpha_fog = sigma.
        (25.0, 300.0, 2.141126e-3, 1.036220e-2),
    ],
)
def test_atmosphere_extinction_at_three_rates_and_visibilities(rain, visibility_m, alpha_rain, alpha_fog):
    atm = atmosphere(rain, visibility_m, WAVELENGTH_NM, WEATHER)
    exact_rain, exact_fog = hand_alpha(rain, visibility_m)
    assert atm.alpha_rain_per_m == pytest.approx(exact_rain, rel=1e-12, abs=1e-18)
    assert atm.alpha_fog_per_m == pytest.approx(exact_fog, rel=1e-12, abs=1e-18)
    # The rounded numbers written in the parameter list, to 1e-5 relative.
    assert atm.alpha_rain_per_m == pytest.approx(alpha_rain, rel=1e-5, abs=1e-18)
    assert atm.alpha_fog_per_m == pytest.approx(alpha_fog, rel=1e-5, abs=1e-18)
    assert atm.alpha_per_m == pytest.approx(exact_rain + exact_fog, rel=1e-12, abs=1e-18)


def test_haze_blend_and_fog_backscatter_by_hand():
    assert haze_blend(500.0) == 0.0
    assert haze_blend(750.0) == pytest.approx(0.5)
    assert haze_blend(1000.0) == 1.0
    assert haze_blend(math.inf) == 1.0
    # alpha 0.01, V_f 750 m (h = 0.5): 0.01 (0.5 / 18.8 + 0.5 / 60) = 3.492908e-4.
    assert fog_backscatter(0.01, 750.0, 18.8, 60.0) == pytest.approx(0.01 * (0.5 / 18.8 + 0.5 / 60.0), rel=1e-12)
    assert fog_backscatter(0.01, 750.0, 18.8, 60.0) == pytest.approx(3.492908e-4, rel=1e-6)
    assert rain_backscatter(1e-3, 500.0) == pytest.approx(2e-6, rel=1e-12)


def test_atmosphere_backscatter_and_drops():
    atm = atmosphere(10.0, 400.0, WAVELENGTH_NM, WEATHER)
    # V_f < 500 m: pure fog ratio.
    assert atm.fog_visibility_m < 500.0
    assert atm.beta_fog_per_m_sr == pytest.approx(atm.alpha_fog_per_m / 18.8, rel=1e-12)
    assert atm.beta_rain_per_m_sr == pytest.approx(atm.alpha_rain_per_m / 500.0, rel=1e-12)
    # n_d = 1951 * 10^0.21 = 3162.1 drops per m^3.
    assert atm.drop_density_per_m3 == pytest.approx(1951.0 * 10.0**0.21, rel=1e-12)
    assert drop_density_per_m3(0.0) == 0.0
    assert atm.has_clutter


def test_disabled_weather_and_clear_air():
    assert atmosphere(50.0, 100.0, WAVELENGTH_NM, replace(WEATHER, enabled=False)) is CLEAR_AIR
    clear = atmosphere(0.0, math.inf, WAVELENGTH_NM, WEATHER)
    assert clear.alpha_per_m == 0.0 and not clear.has_clutter


@pytest.mark.parametrize(
    "rain, visibility, name",
    [
        (600.0, math.inf, "rain_mm_per_h"),
        (-1.0, math.inf, "rain_mm_per_h"),
        (float("nan"), 1e4, "rain_mm_per_h"),
        (0.0, 5.0, "visibility_m"),
        (0.0, float("nan"), "visibility_m"),
    ],
)
def test_bad_conditions_are_rejected_with_the_option_name(rain, visibility, name):
    with pytest.raises(ConfigError, match=name):
        check_conditions(rain, visibility)
    with pytest.raises(ConfigError, match=name):
        atmosphere(rain, visibility, WAVELENGTH_NM, WEATHER)


def test_the_weather_block_is_the_schemas_with_its_defaults_and_bad_values_refused():
    # The defaults of the spec's "Parameters" table, declared once in config/schema.py.
    assert (WEATHER.rain_extinction_db_per_km, WEATHER.rain_extinction_exponent) == (1.076, 0.67)
    assert (WEATHER.rain_drops_per_m3, WEATHER.rain_drops_exponent) == (1951.0, 0.21)
    assert (WEATHER.fog_lidar_ratio_sr, WEATHER.haze_lidar_ratio_sr, WEATHER.rain_lidar_ratio_sr) == (18.8, 60.0, 500.0)
    config = load_sensor_config("default")
    with pytest.raises(ConfigError, match=r"lidar\.weather\.fog_lidar_ratio_sr = 0\.0 is out of range"):
        config.with_overrides({"weather.fog_lidar_ratio_sr": 0.0})
    with pytest.raises(ConfigError, match=r"lidar\.weather\.exit_diameter_m = -0\.1 is out of range"):
        config.with_overrides({"weather.exit_diameter_m": -0.1})


# --- Drops -----------------------------------------------------------------------------------------


def test_mean_drops_by_hand():
    # n_d 3000, d_exit 0.01, R_c 5, beta 3 mrad, Delta R 0.75: radius 0.005 + 0.0075 = 0.0125 m,
    # Lambda = 3000 pi 0.0125^2 0.75 = 1.104466.
    assert mean_drops_in_slab(3000.0, 0.01, 5.0, 0.003, 0.75) == pytest.approx(3000 * math.pi * 0.0125**2 * 0.75)
    assert mean_drops_in_slab(3000.0, 0.01, 5.0, 0.003, 0.75) == pytest.approx(1.104466, rel=1e-6)


def test_poisson_inversion_by_hand():
    # Lambda 1: CDF(0) = 0.367879, CDF(1) = 0.735759, CDF(2) = 0.919699, CDF(3) = 0.981012.
    u = np.array([0.3, 0.5, 0.8, 0.95, 0.99])
    assert poisson_from_uniform(u, np.ones(5)).tolist() == [0, 1, 2, 3, 4]
    # No rain, and the cap of 64 (also for a huge mean).
    assert poisson_from_uniform(np.array([0.999]), np.array([0.0])).tolist() == [0]
    assert poisson_from_uniform(np.array([0.5, 1e-9, 0.5]), np.array([100.0, 1e6, 149.0])).tolist() == [64, 64, 64]
    # The cap acts only above 64: Lambda 100 with u = 1e-9 inverts to 46 (P(N <= 46) is about 1e-9).
    assert poisson_from_uniform(np.array([1e-9]), np.array([100.0])).tolist() == [46]


def test_poisson_inversion_matches_scipy_quantiles():
    from scipy.stats import poisson

    rng = np.random.default_rng(4)
    u = rng.uniform(1e-6, 1 - 1e-6, 5000)
    lam = rng.uniform(0.01, 80.0, 5000)
    expected = np.minimum(poisson.ppf(u, lam), 64).astype(np.int64)
    got = poisson_from_uniform(u, lam)
    # Summing the series in floating point can move a u that sits within ~1e-12 of a CDF step.
    assert np.mean(got == expected) > 0.999
    assert np.all(np.abs(got - expected) <= 1)


def test_poisson_mean_from_the_rain_stream():
    u = Pcg32(3, 5).next_uniform_array(100_000)
    n = poisson_from_uniform(u, np.full(u.size, 3.0))
    # Poisson(3): mean 3 and variance 3; standard error of the mean 0.0055.
    assert abs(n.mean() - 3.0) < 0.025
    assert abs(n.var() - 3.0) < 0.1


def test_exponential_by_hand():
    assert exponential_from_uniform(np.array([math.exp(-2.0)])) == pytest.approx([2.0])


def test_slab_drop_energy_draw_count_and_mean():
    stream = Pcg32(11, 5)
    reference = stream.copy()
    means = np.array([0.0, 2.0, 5.0, 0.5])
    energy = slab_drop_energy(stream, means)
    # One number per slab for N, then one per drop: replay the counts with the reference stream.
    counts = poisson_from_uniform(reference.next_uniform_array(4), means)
    drops = exponential_from_uniform(reference.next_uniform_array(int(counts.sum())))
    assert stream.state == reference.state
    expected = np.bincount(np.repeat(np.arange(4), counts), weights=0.5 * drops**2, minlength=4)
    assert energy == pytest.approx(expected)
    assert energy[0] == 0.0
    # E[sum E^2 / 2] = Lambda E[E^2] / 2 = Lambda: the rain term of rho_slab has the mean 1.
    big = slab_drop_energy(Pcg32(12, 5), np.full(50_000, 2.0))
    assert abs(big.mean() / 2.0 - 1.0) < 0.03


def test_slab_drop_energy_draws_nothing_without_rain():
    stream = Pcg32(1, 5)
    state = stream.state
    assert slab_drop_energy(stream, np.zeros(10)).tolist() == [0.0] * 10
    assert stream.state == state


def test_slab_reflectance_by_hand():
    # pi * 4e-3 * 0.75 + pi * 2e-6 * 0.75 * (3.0 / 1.5).
    rho = slab_reflectance(4e-3, 2e-6, 0.75, np.array([1.5, 0.0]), np.array([3.0, 0.0]))
    assert rho[0] == pytest.approx(math.pi * 4e-3 * 0.75 + math.pi * 2e-6 * 0.75 * 2.0, rel=1e-12)
    assert rho[1] == pytest.approx(math.pi * 4e-3 * 0.75, rel=1e-12)


def test_skip_rule_by_hand():
    # S_T 85.96, B 20: S = 50 -> 50 + 5 sqrt(70) = 91.83 (kept); S = 40 -> 40 + 5 sqrt(60) = 78.73 (skipped).
    assert slab_is_skipped(np.array([50.0, 40.0, 0.0]), 20.0, 85.961306).tolist() == [False, True, True]


def test_clutter_slabs_by_hand():
    # R_min 0.5, Delta R 0.75. Stop 10 -> floor(9.5 / 0.75) = 12 slabs; stop 2.0 -> 2 slabs (exact);
    # stop 0.4 -> none; stop 1.9 -> 1 slab.
    beam, center = clutter_slabs(np.array([10.0, 2.0, 0.4, 1.9]), 0.5, 0.75)
    assert np.bincount(beam, minlength=4).tolist() == [12, 2, 0, 1]
    assert center[:3] == pytest.approx([0.875, 1.625, 2.375])
    assert center[11] == pytest.approx(0.5 + 11.5 * 0.75)
    assert center[12:].tolist() == pytest.approx([0.875, 1.625, 0.875])
    # Every slab ends at or before its beam's stop range.
    stop = np.array([10.0, 2.0, 0.4, 1.9])
    assert np.all(center + 0.375 <= stop[beam] + 1e-9)
    assert clutter_slabs(np.array([10.0]), 0.5, 0.0)[0].size == 0
