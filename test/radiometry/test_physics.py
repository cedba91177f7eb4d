"""The spec's radiometric equations against values computed by hand from the equations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import ndtri

from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.radiometry import equations, noise
from acres_lidar_ros.radiometry.equations import (
    detection_threshold,
    fog_extinction,
    fog_visibility_m,
    footprint_range_spread_m,
    in_plane_divergence,
    intensity_byte,
    kim_q,
    minnaert_backscatter,
    normal_quantile,
    pulse_peak_factor,
    rain_extinction,
    range_sigma_m,
    rough_range_sigma_m,
    signal_counts,
    tilted_cos,
)
from acres_lidar_ros.sensor import timing


def test_equations_re_export_nothing_of_noise_or_timing():
    """One import path per name: the hashes and the stream are ``noise``'s, the column time ``timing``'s."""
    for name in ("mix64", "uniform_from_hash", "place_normal", "Pcg32", "column_time_offset"):
        assert not hasattr(equations, name), name
    assert callable(noise.mix64) and callable(timing.column_time_offset)


# --- Ground relief -----------------------------------------------------------------------------


def test_tilted_cos_by_hand():
    # theta = 0.5, sigma_t = 0.1, z = 2 -> theta' = 0.7.
    assert tilted_cos(math.cos(0.5), 0.1, 2.0) == pytest.approx(math.cos(0.7), abs=1e-12)
    # theta = 1.5 + 0.2 is clamped to pi/2 - 1e-4, cos = sin(1e-4).
    assert tilted_cos(math.cos(1.5), 0.1, 2.0) == pytest.approx(math.sin(1e-4), rel=1e-9)
    # theta = 0.1 - 0.5 is clamped to 0.
    assert tilted_cos(math.cos(0.1), 0.25, -2.0) == 1.0
    # The term is off with sigma_t = 0.
    assert tilted_cos(0.3, 0.0, 5.0) == pytest.approx(0.3, abs=1e-12)
    arr = tilted_cos(np.array([1.0, 0.5]), np.array([0.0, 0.1]), np.array([1.0, 0.0]))
    assert arr.shape == (2,)


def test_rough_range_sigma_by_hand():
    # sigma_h / c^1.5: 0.002 / 0.5^1.5 = 0.0056568542; c below 0.05 is raised to 0.05.
    assert rough_range_sigma_m(0.002, 0.5) == pytest.approx(0.002 / 0.5**1.5, rel=1e-12)
    assert rough_range_sigma_m(0.002, 0.5) == pytest.approx(0.0056568542, rel=1e-8)
    assert rough_range_sigma_m(0.002, 0.01) == pytest.approx(0.002 / 0.05**1.5, rel=1e-12)
    assert rough_range_sigma_m(0.002, 0.0) == pytest.approx(0.17888543819998318, rel=1e-12)
    assert rough_range_sigma_m(0.0, 0.3) == 0.0


# --- Backscatter --------------------------------------------------------------------------------


def test_minnaert_diffuse_by_hand():
    # Lambertian rho 0.3 at cos 0.5 -> 0.15; wet (a_w 0.5, w 1) -> 0.075; k = 0 -> 0.3.
    assert minnaert_backscatter(0.5, 0.3, 1.0) == pytest.approx(0.15, abs=1e-15)
    assert minnaert_backscatter(0.5, 0.3, 1.0, wet_darkening=0.5, wetness=1.0) == pytest.approx(0.075, abs=1e-15)
    assert minnaert_backscatter(0.5, 0.3, 1.0, wet_darkening=0.5, wetness=0.4) == pytest.approx(0.15 * 0.8, abs=1e-15)
    assert minnaert_backscatter(0.5, 0.3, 0.0) == pytest.approx(0.3, abs=1e-15)
    # max(0, 1 - a_w w) keeps the reflectance at 0, not negative.
    assert minnaert_backscatter(0.5, 0.3, 1.0, wet_darkening=1.0, wetness=1.0) == 0.0
    # k = 2: rho cos^2 = 0.3 * 0.36.
    assert minnaert_backscatter(0.6, 0.3, 2.0) == pytest.approx(0.108, abs=1e-15)


def test_minnaert_grazing_is_finite_with_cos_floor():
    # cos = 0 uses 1e-4: 0.3 * 1e-4 with k = 1.
    assert minnaert_backscatter(0.0, 0.3, 1.0) == pytest.approx(0.3e-4, rel=1e-12)
    assert minnaert_backscatter(0.0, 0.3, 1.0, specular=5.0, specular_width_rad=0.05) == pytest.approx(0.3e-4, rel=1e-9)


def test_minnaert_specular_lobe_by_hand():
    width = math.radians(3.0)
    # Water (rho 0.02, s 5, theta_s 3 deg): at normal incidence 0.02 + 5.
    assert minnaert_backscatter(1.0, 0.02, 1.0, 5.0, width) == pytest.approx(5.02, abs=1e-12)
    # At theta = theta_s the lobe is s / e.
    c = math.cos(width)
    assert minnaert_backscatter(c, 0.02, 1.0, 5.0, width) == pytest.approx(0.02 * c + 5.0 / math.e, rel=1e-12)
    # A lobe of zero width contributes nothing.
    assert minnaert_backscatter(1.0, 0.02, 1.0, 5.0, 0.0) == pytest.approx(0.02, abs=1e-15)


def test_water_returns_only_near_normal_incidence():
    # Spec: "Water has a low rho and a high s. A pond thus gives a return only near normal
    # incidence." Shipped S10 = 100, B = 20, p = 0.9 (S_T = 85.96), R10 = 60 m, water at 40 m:
    # S = 100 (rho_bs / 0.1) (60 / 40)^2 = 2250 rho_bs, so detection needs rho_bs > 0.0382.
    # The diffuse part is at most 0.02, so only the lobe can do it: 5 exp(-(theta/3 deg)^2) > 0.018
    # -> theta < 3 deg * sqrt(ln(5 / 0.018)) = 7.1 deg.
    threshold = detection_threshold(100.0, 20.0, 0.9)
    width = math.radians(3.0)
    for theta_deg, seen in [(0, True), (3, True), (6, True), (8, False), (15, False), (45, False), (85, False)]:
        rho_bs = minnaert_backscatter(math.cos(math.radians(theta_deg)), 0.02, 1.0, 5.0, width)
        s = signal_counts(rho_bs, 40.0, 1.0, 100.0, 60.0, 1.0)
        assert (s > threshold) == seen, theta_deg


# --- Echo stretch -------------------------------------------------------------------------------


def test_footprint_and_peak_factor_by_hand():
    # R 10 m, cos 0.6 (tan 4/3), beta_p 3 mrad -> Delta R = 0.04 m.
    assert footprint_range_spread_m(10.0, 0.6, 0.003) == pytest.approx(0.04, rel=1e-12)
    assert footprint_range_spread_m(10.0, 1.0, 0.003) == 0.0
    # cos = 0 is limited to 1e-4: tan = sqrt(1 - 1e-8) / 1e-4.
    assert footprint_range_spread_m(1.0, 0.0, 1.0) == pytest.approx(math.sqrt(1 - 1e-8) / 1e-4, rel=1e-12)
    # g = L / sqrt(L^2 + Delta R^2): L 1, Delta R 0.75 -> 0.8. L = 0 -> 1.
    assert pulse_peak_factor(1.0, 0.75) == pytest.approx(0.8, abs=1e-15)
    assert pulse_peak_factor(0.0, 0.75) == 1.0
    assert pulse_peak_factor(0.0, 0.0) == 1.0
    g = pulse_peak_factor(np.array([1.0, 0.0, 2.0]), np.array([0.0, 3.0, 1e12]))
    assert g[0] == 1.0 and g[1] == 1.0 and 0.0 < g[2] < 1e-11


def test_in_plane_divergence_by_hand():
    beta, beta_v = 0.0016, 0.0069
    up = np.array([0.0, 0.0, 1.0])
    # Ground seen at -30 deg: the plane of incidence is vertical, cos psi = 1 -> beta_v.
    d = np.array([math.cos(math.radians(-30)), 0.0, math.sin(math.radians(-30))])
    assert in_plane_divergence(up, d, up, beta, beta_v) == pytest.approx(beta_v, rel=1e-12)
    # A vertical wall turned 30 deg about z: n_perp = (0, -0.5, 0) is horizontal -> beta.
    n = np.array([-math.cos(math.radians(30)), -0.5, 0.0])
    assert in_plane_divergence(n, np.array([1.0, 0, 0]), up, beta, beta_v) == pytest.approx(beta, rel=1e-12)
    # n_perp along (0, -1, 1)/sqrt 2: cos psi = sin psi = 1/sqrt 2.
    n = np.array([-1.0, -1.0, 1.0]) / math.sqrt(3.0)
    expected = math.sqrt((beta_v**2 + beta**2) / 2.0)
    assert in_plane_divergence(n, np.array([1.0, 0, 0]), up, beta, beta_v) == pytest.approx(expected, rel=1e-12)
    # Normal incidence: the plane is undefined; the documented choice is beta_v.
    assert in_plane_divergence(np.array([-1.0, 0, 0]), np.array([1.0, 0, 0]), up, beta, beta_v) == pytest.approx(beta_v)
    # Vectorised over (n, 3).
    normals = np.stack([up, np.array([-1.0, -1.0, 1.0]) / math.sqrt(3.0)])
    dirs = np.stack([d, np.array([1.0, 0, 0])])
    out = in_plane_divergence(normals, dirs, up, beta, beta_v)
    assert out.shape == (2,) and out[1] == pytest.approx(expected, rel=1e-12)


# --- Range equation, threshold, range noise --------------------------------------------------------


def test_signal_counts_by_hand():
    # The specification point: 10 % at R10, g = 1, clear air -> S10 (overlap 1 - e^-3600 = 1).
    assert signal_counts(0.1, 60.0, 1.0, 100.0, 60.0, 1.0) == pytest.approx(100.0, rel=1e-15)
    # 100 (0.1/0.1) (60/0.5)^2 (1 - e^-0.25) = 100 * 14400 * 0.22119921692859512.
    assert signal_counts(0.1, 0.5, 1.0, 100.0, 60.0, 1.0) == pytest.approx(318526.8723771770, rel=1e-12)
    # R = 0: the limit (R10 / R_ov)^2 -> 100 * 3600.
    assert signal_counts(0.1, 0.0, 1.0, 100.0, 60.0, 1.0) == pytest.approx(360000.0, rel=1e-12)
    # Two-way extinction: alpha 1e-3, R 60 -> 100 e^-0.12.
    assert signal_counts(0.1, 60.0, 1.0, 100.0, 60.0, 1.0, 1e-3) == pytest.approx(100.0 * math.exp(-0.12), rel=1e-12)
    # rho 0.45 and g 0.8 scale linearly: 100 * 4.5 * 0.8 at R10.
    assert signal_counts(0.45, 87.0, 0.8, 100.0, 87.0, 1.0) == pytest.approx(360.0, rel=1e-12)
    # R_ov = 0: no overlap term, ranges under 1 mm count as 1 mm (finite).
    assert signal_counts(0.1, 30.0, 1.0, 100.0, 60.0, 0.0) == pytest.approx(400.0, rel=1e-12)
    assert np.isfinite(signal_counts(0.1, 0.0, 1.0, 100.0, 60.0, 0.0))
    arr = signal_counts(np.array([0.1, 0.2]), np.array([60.0, 0.0]), 1.0, 100.0, np.array([60.0, 30.0]), 1.0)
    assert arr == pytest.approx([100.0, 2 * 100 * 900.0])


def test_detection_threshold_shipped_values():
    # The spec: S10 = 100, B = 20, p = 0.9 give z_p = 1.2816 and S_T = 85.961306 counts.
    assert normal_quantile(0.9) == pytest.approx(1.2816, abs=5e-5)
    assert normal_quantile(0.9) == pytest.approx(float(ndtri(0.9)), abs=1e-12)
    assert detection_threshold(100.0, 20.0, 0.9) == pytest.approx(85.961306, abs=5e-7)
    # By hand with the table value of z_p: 100 - 1.2815515655 sqrt(120).
    assert detection_threshold(100.0, 20.0, 0.9) == pytest.approx(100.0 - 1.2815515655 * math.sqrt(120.0), abs=1e-8)


@pytest.mark.parametrize("p", [0.5, 0.6, 0.99, 0.9999])
def test_normal_quantile_matches_scipy(p):
    assert normal_quantile(p) == pytest.approx(float(ndtri(p)), abs=1e-10)


def test_detection_threshold_degenerate_and_bad_inputs():
    assert detection_threshold(0.0, 0.0, 0.9) == 0.0
    for bad in (0.0, 1.0, -0.2, 1.5, float("nan")):
        with pytest.raises(ConfigError, match="detection_probability_at_spec"):
            detection_threshold(100.0, 20.0, bad)


def test_range_sigma_by_hand():
    # At S = S10 the SNR is SNR_spec, so sigma_R = sqrt(sigma_0^2 + sigma_low^2).
    assert range_sigma_m(100.0, 20.0, 100.0, 0.02, 0.03) == pytest.approx(math.hypot(0.02, 0.03), rel=1e-12)
    # S = 400, B = 20: SNR = 400 / sqrt(420) = 19.5180; SNR_spec = 100 / sqrt(120) = 9.12871.
    snr, snr_spec = 400 / math.sqrt(420), 100 / math.sqrt(120)
    assert range_sigma_m(400.0, 20.0, 100.0, 0.0022, 0.0393) == pytest.approx(
        math.sqrt(0.0022**2 + (0.0393 * snr_spec / snr) ** 2), rel=1e-12
    )
    # S + B = 0: SNR = 0, the floor 1e-3 applies (finite).
    assert range_sigma_m(0.0, 0.0, 100.0, 0.02, 0.03) == pytest.approx(
        math.hypot(0.02, 0.03 * 100.0 / math.sqrt(100.0) / 1e-3), rel=1e-12
    )


# --- Intensity -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "rho, byte",
    [
        (-0.1, 0),
        (0.0, 0),
        (float("nan"), 0),
        (0.004, 0),  # round(0.4)
        (0.126, 13),  # round(12.6)
        (0.5, 50),
        (1.0, 100),
        (1.001, 101),  # 100 + round(155 * 0.00024) = 100, raised to the minimum 101
        (4.0, 152),  # 100 + round(155 * ln 4 / ln 64) = 100 + round(51.67)
        (64.0, 255),
        (1e6, 255),
    ],
)
def test_intensity_byte_by_hand(rho, byte):
    assert int(intensity_byte(rho)) == byte


def test_intensity_byte_array():
    out = intensity_byte(np.array([[0.0, 0.2], [2.0, 100.0]]))
    assert out.dtype == np.uint8 and out.shape == (2, 2)
    # ln 2 / ln 64 = 1/6 -> 100 + round(25.83) = 126.
    assert out.tolist() == [[0, 20], [126, 255]]


# --- Rain and fog extinction --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "rate, expected",
    [
        (0.0, 0.0),
        (1.0, 1.076 / 4343.0),  # 2.4776e-4 1/m
        (10.0, 1.076 * 10**0.67 / 4343.0),  # 10^0.67 = 4.67735 -> 1.15884e-3
        (100.0, 1.076 * 100**0.67 / 4343.0),  # 100^0.67 = 21.8776 -> 5.42018e-3
    ],
)
def test_rain_extinction_by_hand(rate, expected):
    assert rain_extinction(rate) == pytest.approx(expected, rel=1e-12, abs=1e-18)


def test_rain_extinction_numbers():
    assert rain_extinction(10.0) == pytest.approx(1.15884e-3, rel=1e-5)


@pytest.mark.parametrize(
    "v_km, q",
    [(100.0, 1.6), (50.0, 1.3), (20.0, 1.3), (6.0, 1.3), (2.0, 0.66), (1.0, 0.5), (0.75, 0.25), (0.5, 0.0), (0.2, 0.0)],
)
def test_kim_q_table(v_km, q):
    assert kim_q(v_km * 1000.0) == pytest.approx(q, abs=1e-12)


@pytest.mark.parametrize(
    "visibility_m, q",
    [(200.0, 0.0), (2000.0, 0.16 * 2.0 + 0.34), (20_000.0, 1.3), (100_000.0, 1.6)],
)
def test_fog_extinction_without_rain_by_hand(visibility_m, q):
    sigma = 3.912 / visibility_m
    expected = sigma * (905.0 / 550.0) ** (-q)
    assert fog_extinction(visibility_m, 0.0, 905.0) == pytest.approx(expected, rel=1e-12)


def test_fog_extinction_removes_the_rain_part_by_hand():
    # R_r = 10 mm/h: sigma_env = 3.912 / (11100 * 10^-0.63) = 3.912 * 4.265795 / 11100 = 1.503405e-3 1/m.
    sigma_env = 3.912 / (11100.0 * 10.0**-0.63)
    assert sigma_env == pytest.approx(1.503405e-3, rel=1e-6)
    sigma = 3.912 / 1000.0 - sigma_env  # V = 1 km
    v_f = 3.912 / sigma  # 1624.2 m -> q = 0.16 * 1.6242 + 0.34
    q = 0.16 * v_f / 1000.0 + 0.34
    s550, vf = fog_visibility_m(1000.0, 10.0)
    assert s550 == pytest.approx(sigma, rel=1e-12) and vf == pytest.approx(v_f, rel=1e-12)
    assert fog_extinction(1000.0, 10.0, 905.0) == pytest.approx(sigma * (905 / 550) ** -q, rel=1e-12)
    # The rain part is removed only above 0.05 mm/h, and never below zero extinction.
    assert fog_extinction(1000.0, 0.05, 905.0) == pytest.approx(fog_extinction(1000.0, 0.0, 905.0))
    assert fog_extinction(50_000.0, 100.0, 905.0) == 0.0


def test_fog_extinction_clear_air_and_wavelength():
    assert fog_extinction(math.inf, 0.0, 905.0) == 0.0
    assert fog_visibility_m(math.inf, 0.0)[1] == math.inf
    # At 550 nm the wavelength factor is 1.
    assert fog_extinction(2000.0, 0.0, 550.0) == pytest.approx(3.912 / 2000.0, rel=1e-12)


# --- Laws that must hold ----------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    rho=st.floats(1e-4, 10.0),
    r1=st.floats(0.0, 300.0),
    dr=st.floats(1e-6, 300.0),
    r_ov=st.floats(0.1, 10.0),
    alpha=st.floats(0.0, 0.1),
)
def test_signal_never_rises_with_range(rho, r1, dr, r_ov, alpha):
    s1 = signal_counts(rho, r1, 1.0, 100.0, 60.0, r_ov, alpha)
    s2 = signal_counts(rho, r1 + dr, 1.0, 100.0, 60.0, r_ov, alpha)
    assert s2 <= s1 * (1.0 + 1e-12)


@settings(max_examples=200, deadline=None)
@given(
    rho=st.floats(0.0, 10.0),
    extra=st.floats(0.0, 10.0),
    r=st.floats(0.0, 300.0),
    alpha=st.floats(0.0, 0.1),
)
def test_signal_never_falls_with_reflectance(rho, extra, r, alpha):
    assert signal_counts(rho + extra, r, 1.0, 100.0, 60.0, 1.0, alpha) >= signal_counts(
        rho, r, 1.0, 100.0, 60.0, 1.0, alpha
    )


@settings(max_examples=200, deadline=None)
@given(
    c1=st.floats(0.0, 1.0),
    c2=st.floats(0.0, 1.0),
    k=st.floats(0.0, 4.0),
    s=st.floats(0.0, 100.0),
    width=st.floats(0.0, 0.5),
)
def test_backscatter_never_rises_with_grazing(c1, c2, k, s, width):
    lo, hi = sorted((c1, c2))
    assert (
        minnaert_backscatter(lo, 0.3, k, s, width) <= minnaert_backscatter(hi, 0.3, k, s, width) * (1 + 1e-12) + 1e-300
    )
