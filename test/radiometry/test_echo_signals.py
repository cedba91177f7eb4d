"""Each echo's mean signal, clear-air signal, range sigma and window bits (``echo_signals``),
worked by hand from the spec's range equation and range-noise rule:

S = S10 (rho_e / 0.1) (R10 / R_e)^2 (1 - exp(-(R_e / R_ov)^2)) g_e exp(-2 alpha R_e)
sigma_R = sqrt(sigma_0^2 + (sigma_low SNR_spec / max(SNR, 1e-3))^2), SNR = S / sqrt(S + B)
"""

import json
import math

import numpy as np
import pytest

from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.radiometry import echo_signals as signals_module
from acres_lidar_ros.radiometry.echo_signals import EchoSignals, echo_signals
from acres_lidar_ros.radiometry.radiometric_model import BeamModel
from acres_lidar_ros.radiometry.windows import WINDOW_AZIMUTH, WINDOW_FAR, WINDOW_NEAR, CellWindows

S10, R10, R_OV, B, SIGMA_0, SIGMA_LOW = 400.0, 50.0, 2.0, 20.0, 0.02, 0.05


def sensor(tmp_path):
    lidar = {
        "columns": 4,
        "rings": 2,
        "range_m": 150.0,
        "min_range_m": 1.0,
        "std_m": SIGMA_0,
        "radiometry": {
            "signal_at_10pct_counts": S10,
            "range_at_10pct_m": R10,
            "ring_range_at_10pct_m": [R10, 2 * R10],
            "overlap_range_m": R_OV,
            "ambient_counts": B,
            "range_std_low_snr_m": SIGMA_LOW,
        },
    }
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"lidar": lidar}))
    return load_sensor_config(path)


def by_hand(rho, r, g, r10, alpha, power=1.0):
    s = S10 * power * (rho / 0.1) * (r10 / r) ** 2 * (1.0 - math.exp(-((r / R_OV) ** 2))) * g
    s_alpha = s * math.exp(-2.0 * alpha * r)
    snr_spec = S10 / math.sqrt(S10 + B)
    snr = s_alpha / math.sqrt(s_alpha + B)
    return s, s_alpha, math.sqrt(SIGMA_0**2 + (SIGMA_LOW * snr_spec / max(snr, 1e-3)) ** 2)


ECHOES = {  # cell (ring = cell % 2), R_e, rho_e, g_e
    "cell": np.array([0, 1, 3, 6, 7], np.int64),
    "range_m": np.array([10.0, 40.0, 0.5, 149.0, 160.0]),
    "reflectance": np.array([0.1, 0.3, 0.2, 0.05, 0.5]),
    "peak": np.array([1.0, 0.8, 1.0, 0.5, 1.0]),
}


@pytest.mark.parametrize("visibility_m", [math.inf, 500.0])
def test_signals_follow_the_range_equation(tmp_path, visibility_m):
    model = BeamModel.build(sensor(tmp_path), visibility_m=visibility_m)
    alpha = model.atmosphere.alpha_per_m
    assert (alpha > 0.0) == math.isfinite(visibility_m)
    got = echo_signals(ECHOES["cell"], ECHOES["range_m"], ECHOES["reflectance"], ECHOES["peak"], model)
    for i, cell in enumerate(ECHOES["cell"]):
        r10 = R10 if cell % 2 == 0 else 2 * R10
        s, s_alpha, sigma = by_hand(ECHOES["reflectance"][i], ECHOES["range_m"][i], ECHOES["peak"][i], r10, alpha)
        assert got.clear_counts[i] == pytest.approx(s, rel=1e-12)
        assert got.signal_counts[i] == pytest.approx(s_alpha, rel=1e-12)
        assert got.range_sigma_m[i] == pytest.approx(sigma, rel=1e-12)


def test_an_emitters_power_scales_its_signal(tmp_path):
    ratio = np.ones(8)
    ratio[1] = 0.25
    model = BeamModel.build(sensor(tmp_path), power_ratio=ratio)
    got = echo_signals(ECHOES["cell"], ECHOES["range_m"], ECHOES["reflectance"], ECHOES["peak"], model)
    assert got.clear_counts[1] == pytest.approx(by_hand(0.3, 40.0, 0.8, 2 * R10, 0.0, power=0.25)[0], rel=1e-12)


def test_window_bits_are_the_band_and_the_azimuth(tmp_path):
    config = sensor(tmp_path)
    band = echo_signals(
        ECHOES["cell"], ECHOES["range_m"], ECHOES["reflectance"], ECHOES["peak"], BeamModel.build(config)
    )
    # 0.5 m is nearer than min_range_m (1 m); 160 m is beyond range_m (150 m).
    assert band.window.tolist() == [0, 0, WINDOW_NEAR, 0, WINDOW_FAR]
    windows = CellWindows(np.full(8, 5.0), np.full(8, 100.0), np.arange(8) // 2 != 3, 0.0)
    got = echo_signals(
        ECHOES["cell"],
        ECHOES["range_m"],
        ECHOES["reflectance"],
        ECHOES["peak"],
        BeamModel.build(config, windows=windows),
    )
    # cells 6 and 7 fire outside the azimuth window (column 3); 149 m and 160 m beyond 100 m.
    assert got.window.tolist() == [0, 0, WINDOW_NEAR, WINDOW_FAR | WINDOW_AZIMUTH, WINDOW_FAR | WINDOW_AZIMUTH]
    assert got.window.dtype == np.uint8


def test_the_split_between_cores_changes_no_bit(tmp_path, monkeypatch):
    rng = np.random.default_rng(5)
    n = 9000
    cell = np.sort(rng.integers(0, 8, n))
    args = (cell, rng.uniform(0.1, 200.0, n), rng.uniform(0.0, 2.0, n), rng.uniform(0.2, 1.0, n))
    model = BeamModel.build(sensor(tmp_path), visibility_m=800.0)
    whole = echo_signals(*args, model, split=False)
    monkeypatch.setattr(signals_module, "MIN_ECHOES_PER_PART", 1000)
    parts = echo_signals(*args, model)
    for name in EchoSignals._fields:
        assert np.array_equal(getattr(whole, name), getattr(parts, name))
    joined = EchoSignals.concatenate([whole.take(np.arange(0, 4000)), whole.take(np.arange(4000, n))])
    assert all(np.array_equal(getattr(whole, f), getattr(joined, f)) for f in EchoSignals._fields)
