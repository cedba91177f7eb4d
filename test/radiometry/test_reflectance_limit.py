"""The engine paper's linear reflectance-limit detection (``radiometry.detection_model``).

A point is detected when R_L(d) <= R_lambda and d <= d_max, R_L linear from 0 at 0 m to R_L,max
at d_max; d carries Gaussian range noise with std_m from the spec's noise stream. The numbers
below are worked by hand from those sentences.
"""

import json
import math

import numpy as np
import pytest

from acres_lidar_ros.config.material_table import CLASS_ID, MATERIAL_ID
from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.radiometry.detection import detect, draw_positions
from acres_lidar_ros.radiometry.echoes import Echoes
from acres_lidar_ros.radiometry.equations import reflectance_limit
from acres_lidar_ros.radiometry.noise import NoiseStreams
from acres_lidar_ros.radiometry.radiometric_model import BeamModel
from acres_lidar_ros.scene.instances import NO_INSTANCE

LIMIT = {"detection_model": "reflectance_limit", "max_range_m": 100.0, "reflectance_at_max_range": 0.2}


def write(tmp_path, lidar, name="s.json"):
    path = tmp_path / name
    path.write_text(json.dumps({"lidar": lidar}))
    return path


def sensor(tmp_path, **radiometry):
    lidar = {"columns": 8, "rings": 1, "range_m": 150.0, "min_range_m": 0.5, "return_mode": "strongest"}
    return load_sensor_config(write(tmp_path, {**lidar, "radiometry": {**LIMIT, **radiometry}}))


def echoes(cells, ranges_m, reflectances):
    n = len(cells)
    return Echoes(
        cell=np.asarray(cells, np.int64),
        range_m=np.asarray(ranges_m, np.float64),
        reflectance=np.asarray(reflectances, np.float64),
        peak=np.ones(n),
        class_id=np.full(n, CLASS_ID["building"], np.uint8),
        material_id=np.full(n, MATERIAL_ID["building"], np.uint8),
        instance=np.full(n, NO_INSTANCE, np.uint32),
        cos_incidence=np.empty(0),  # not kept
    )


def test_the_limit_is_linear_from_zero_to_its_value_at_d_max():
    assert reflectance_limit(0.0, 100.0, 0.2) == 0.0
    assert reflectance_limit(100.0, 100.0, 0.2) == pytest.approx(0.2)
    assert reflectance_limit(25.0, 100.0, 0.2) == pytest.approx(0.05)
    assert reflectance_limit(-1.0, 100.0, 0.2) == 0.0  # a range noised below 0 needs nothing


def test_hand_computed_case_without_noise(tmp_path):
    # d_max 100 m and R_L,max 0.2: a target needs 0.002 per metre of range.
    model = BeamModel.build(sensor(tmp_path), noise=False)
    cases = [  # (cell, range m, reflectance, detected?)
        (0, 50.0, 0.11, True),  # needs 0.10
        (1, 50.0, 0.09, False),  # needs 0.10
        (2, 10.0, 0.021, True),  # needs 0.020
        (3, 10.0, 0.019, False),  # needs 0.020
        (4, 99.0, 0.5, True),  # needs 0.198
        (5, 101.0, 0.9, False),  # beyond d_max: dropped whatever its reflectance
        (6, 0.4, 0.9, False),  # nearer than min_range_m
        (7, 140.0, 0.01, False),
    ]
    cells, ranges, rhos, expected = zip(*cases)
    returns, _ = detect(echoes(cells, ranges, rhos), model, NoiseStreams(0), 0)
    assert returns.valid[:, 0].tolist() == list(expected)
    hit = np.flatnonzero(expected)
    np.testing.assert_array_equal(returns.range_m[hit, 0], np.asarray(ranges)[hit])  # no noise: d = R_e
    # Clear air: the reported reflectivity is R_lambda = rho_e.
    np.testing.assert_allclose(returns.reflectivity[hit, 0], np.asarray(rhos)[hit], rtol=1e-12)


def test_fog_darkens_the_target_by_its_two_way_extinction(tmp_path):
    model = BeamModel.build(sensor(tmp_path), noise=False, visibility_m=500.0)
    alpha = model.atmosphere.alpha_per_m
    assert alpha > 0.0
    # At 50 m the target needs 0.1; in fog it shows rho e^{-100 alpha}.
    needed = 0.1 / math.exp(-2.0 * alpha * 50.0)
    returns, _ = detect(echoes([0, 1], [50.0, 50.0], [needed * 1.01, needed * 0.99]), model, NoiseStreams(0), 0)
    assert returns.valid[:, 0].tolist()[:2] == [True, False]
    assert returns.reflectivity[0, 0] == pytest.approx(needed * 1.01 * math.exp(-100.0 * alpha), rel=1e-12)


def test_range_noise_is_std_m_times_the_noise_streams_n2(tmp_path):
    config = sensor(tmp_path).with_overrides({"std_m": 0.5})
    model = BeamModel.build(config, noise=True)
    cells = np.arange(8)
    ranges = np.full(8, 50.0)
    # Exactly at the limit (0.1 at 50 m): detected where the noised range is nearer, n2 <= 0.
    rhos = np.full(8, 0.2 * 50.0 / 100.0)
    returns, _ = detect(echoes(cells, ranges, rhos), model, NoiseStreams(7), 0)
    _, n2 = NoiseStreams(7).noise_pairs(8)  # the same stream, drawn on its own
    n2 = n2[draw_positions(cells, 8, 1)]
    assert returns.valid[:, 0].tolist() == (n2 <= 0.0).tolist()
    assert 0 < returns.valid.sum() < 8  # seed 7 gives both signs
    hit = returns.valid[:, 0]
    np.testing.assert_allclose(returns.range_m[hit, 0], 50.0 + 0.5 * n2[hit], rtol=0, atol=1e-12)
    # Same seed, same scan, bit for bit.
    again, _ = detect(echoes(cells, ranges, rhos), model, NoiseStreams(7), 0)
    np.testing.assert_array_equal(again.range_m, returns.range_m)
    np.testing.assert_array_equal(again.valid, returns.valid)


def test_without_its_keys_reflectance_limit_is_an_error(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_sensor_config(write(tmp_path, {"radiometry": {"detection_model": "reflectance_limit"}}))
    message = str(err.value)
    assert "lidar.radiometry.detection_model = 'reflectance_limit' needs lidar.radiometry.max_range_m" in message
    assert "lidar.radiometry.reflectance_at_max_range (a number > 0 and <= 1" in message
    # An overlay that sets the spec's model back can unset the keys with null.
    limited = write(tmp_path, {"radiometry": LIMIT}, name="limited.json")
    back = tmp_path / "back.json"
    back.write_text(
        json.dumps(
            {
                "extends": str(limited),
                "lidar": {
                    "radiometry": {"detection_model": "spec", "max_range_m": None, "reflectance_at_max_range": None}
                },
            }
        )
    )
    assert load_sensor_config(limited).radiometry.max_range_m == 100.0
    assert load_sensor_config(back).radiometry.max_range_m is None
    with pytest.raises(ConfigError, match=r"needs lidar\.radiometry\.reflectance_at_max_range \(a number"):
        load_sensor_config(
            write(tmp_path, {"radiometry": {"detection_model": "reflectance_limit", "max_range_m": 80.0}})
        )
    with pytest.raises(ConfigError, match=r"detection_model = 'threshold': expected one of spec, reflectance_limit"):
        load_sensor_config(write(tmp_path, {"radiometry": {"detection_model": "threshold"}}))


def test_the_spec_model_is_the_default():
    c = load_sensor_config("polaris")
    rad = c.radiometry
    assert (rad.detection_model, rad.max_range_m, rad.reflectance_at_max_range) == ("spec", None, None)


def test_a_farm_scan_keeps_exactly_the_points_above_the_limit():
    from acres_lidar_ros.scan.scan_types import ScanOptions
    from acres_lidar_ros.scan.scanner import Scanner
    from acres_lidar_ros.scene.farm_v1 import build_default_farm
    from acres_lidar_ros.scene.tour import default_tour
    from acres_lidar_ros.sensor.poses import PoseHistory
    from acres_lidar_ros.tracing.trace import Tracer

    scene = build_default_farm()
    tracer = Tracer(scene)
    times, positions, quaternions = default_tour(scene)
    tour = PoseHistory.from_arrays(times, positions, quaternions)
    stamp_ns = int(round((tour.start_s + 3.0) * 1e9))
    config = load_sensor_config("default").with_overrides(
        {f"radiometry.{k}": v for k, v in {**LIMIT, "max_range_m": 40.0, "reflectance_at_max_range": 0.3}.items()}
    )
    options = ScanOptions(seed=3, self_returns=False)
    scan = Scanner(config, tracer=tracer, options=options).scan(tour, stamp_ns=stamp_ns)
    valid = scan.returns.valid
    assert valid.sum() > 100
    range_m, reflectivity = scan.returns.range_m[valid], scan.returns.reflectivity[valid]
    # Every point is within d_max and at least as bright as the limit at its (noised) range.
    assert range_m.max() <= 40.0
    assert np.all(reflectance_limit(range_m, 40.0, 0.3) <= reflectivity * (1 + 1e-12))
    # A stricter sensor keeps a subset of the beams.
    strict = config.with_overrides({"radiometry.reflectance_at_max_range": 0.6})
    fewer = Scanner(strict, tracer=tracer, options=options).scan(tour, stamp_ns=stamp_ns).returns.valid
    assert fewer.any(axis=1).sum() < valid.any(axis=1).sum()
    assert not (fewer.any(axis=1) & ~valid.any(axis=1)).any()
