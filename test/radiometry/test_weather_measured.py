"""The measured-sensor weather option (config/sensors_polaris_weather_measured.json, docs/weather.md).

Expectations: the measured VLP-16 of Linnhoff et al. (Sensors 22(14) 5266, 2022), a rain return on
1.69e-4 of the beams per mm/h and no haze clutter, and the spec's clutter equations written out
here with ``math`` (Koschmieder and Kim-McArthur-Korevaar extinction, the slab reflectance, the range
equation and the skip rule).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import ndtri

from acres_lidar_ros.config.material_table import CLASS_ID
from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.config.share_paths import config_dir
from acres_lidar_ros.scan.scan_types import ScanOptions
from acres_lidar_ros.scan.scanner import Scanner
from acres_lidar_ros.sensor.poses import PoseHistory

OPTION = "sensors_polaris_weather_measured.json"
MEASURED_RAIN_RETURN_PER_MM_H = 1.69e-4  # Linnhoff et al. 2022, VLP-16 (docs/weather.md)


@pytest.fixture(scope="module")
def option():
    return load_sensor_config(config_dir() / OPTION)


def test_the_option_changes_only_the_three_lidar_ratios(option):
    spec = load_sensor_config("polaris")
    changed = {"fog_lidar_ratio_sr": 1000.0, "haze_lidar_ratio_sr": 1000.0, "rain_lidar_ratio_sr": 8000.0}
    for name, value in vars(option.weather).items():
        assert value == changed.get(name, getattr(spec.weather, name)), name
    mine, theirs = dict(option.effective["lidar"]), dict(spec.effective["lidar"])
    mine.pop("weather"), theirs.pop("weather")
    assert mine == theirs


def first_haze_slab_counts(config, visibility_m: float) -> tuple[float, float]:
    """(S, S_T) of the strongest haze slab of any ring by the spec's equations, without rain."""
    rad, weather = config.radiometry, config.weather
    sigma_550 = 3.912 / visibility_m
    q = 0.16 * visibility_m / 1000.0 + 0.34  # 1 to 6 km
    alpha = sigma_550 * (config.wavelength_nm / 550.0) ** -q
    h = min(1.0, max(0.0, (visibility_m / 1000.0 - 0.5) / 0.5))
    beta = alpha * ((1.0 - h) / weather.fog_lidar_ratio_sr + h / weather.haze_lidar_ratio_sr)
    dr = config.min_return_separation_m
    rho = math.pi * beta * dr
    centres = config.min_range_m + dr * (np.arange(int(weather.clutter_max_range_m / dr) + 1) + 0.5)
    r10 = float(np.max(rad.ring_range_at_10pct_m))
    s = (
        rad.signal_at_10pct_counts
        * (rho / 0.1)
        * (r10 / centres) ** 2
        * (1.0 - np.exp(-((centres / rad.overlap_range_m) ** 2)))
        * np.exp(-2.0 * alpha * centres)
    )
    z_p = float(ndtri(rad.detection_probability_at_spec))
    threshold = rad.signal_at_10pct_counts - z_p * math.sqrt(rad.signal_at_10pct_counts + rad.ambient_counts)
    return float(s.max()), threshold


@pytest.mark.parametrize("visibility_m", [1000.0, 2000.0, 5000.0])
def test_haze_gives_no_clutter_with_the_option_and_a_return_with_the_spec(option, visibility_m):
    # The strongest haze slab's detection probability Phi((S - S_T) / sqrt(S + B)): with the option
    # below 1e-6 (less than one clutter return in 20 scans of 57 600 beams with ~13 slabs each),
    # with the spec's S_haze = 60 sr above 1/2.
    b = option.radiometry.ambient_counts
    s, threshold = first_haze_slab_counts(option, visibility_m)
    assert 0.5 * math.erfc(-(s - threshold) / math.sqrt(2.0 * (s + b))) < 1e-6
    s_spec, threshold_spec = first_haze_slab_counts(load_sensor_config("polaris"), visibility_m)
    assert s_spec > threshold_spec
    assert s_spec == pytest.approx(s * 1000.0 / 60.0, rel=1e-12)  # only the haze lidar ratio differs


def clutter_share(config, plane_tracer, rain_mm_per_h: float) -> float:
    """Share of the beams of one scan over flat ground with a rain return."""
    scanner = Scanner(config, options=ScanOptions(seed=3, rain_mm_per_h=rain_mm_per_h), tracer=plane_tracer)
    t = np.array([0.0, 1.0])
    poses = PoseHistory.from_arrays(t, np.zeros((2, 3)), np.tile([0.0, 0.0, 0.0, 1.0], (2, 1)))
    r = scanner.scan(poses, stamp_ns=int(0.5e9)).returns
    clutter = np.asarray(r.valid) & (np.asarray(r.class_id) == CLASS_ID["precipitation"])
    return float(clutter.any(axis=1).mean())


def test_rain_returns_on_the_measured_share_of_the_beams_with_the_option(option, plane_tracer):
    measured = MEASURED_RAIN_RETURN_PER_MM_H * 50.0  # 0.85 % of the beams at 50 mm/h
    assert clutter_share(option, plane_tracer, 50.0) == pytest.approx(measured, rel=0.3)
    # The spec's lidar ratio (500 sr) gives several times the measured share.
    assert clutter_share(load_sensor_config("polaris"), plane_tracer, 50.0) > 4.0 * measured
