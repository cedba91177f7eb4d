"""Mechanical noise: each firing's azimuth, elevation and origin errors, their
statistics, their geometry, and that they leave the spec's noise stream alone."""

import math

import numpy as np
import pytest

from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.config.window_rules import MechanicalNoiseConfig
from acres_lidar_ros.radiometry.mechanical import block_rays, firing_errors, perturbed_rays
from acres_lidar_ros.radiometry.noise import NOISE_SEQUENCE, NOISE_STATE_OFFSET, Pcg32
from acres_lidar_ros.scan.scan_types import ScanOptions
from acres_lidar_ros.scan.scanner import Scanner
from acres_lidar_ros.scene.builder import SceneBuilder
from acres_lidar_ros.scene.grids import TerrainGrid
from acres_lidar_ros.sensor.poses import PoseHistory

AT_REST = PoseHistory.from_arrays(np.zeros(1), np.zeros((1, 3)), np.array([[0.0, 0.0, 0.0, 1.0]]))
NO_RADIOMETRY = ScanOptions(radiometry=False, self_returns=False)


def noise(az=(0.0, 0.0), el=(0.0, 0.0), origin_mean=(0.0, 0.0, 0.0), origin_std=(0.0, 0.0, 0.0)):
    return MechanicalNoiseConfig(
        math.radians(az[0]),
        math.radians(az[1]),
        math.radians(el[0]),
        math.radians(el[1]),
        np.array(origin_mean, float),
        np.array(origin_std, float),
    )


def direction(azimuth_rad, elevation_rad):
    return np.stack(
        [
            np.cos(elevation_rad) * np.cos(azimuth_rad),
            np.cos(elevation_rad) * np.sin(azimuth_rad),
            np.sin(elevation_rad),
        ],
        axis=-1,
    )


def test_the_errors_have_the_configured_mean_and_std():
    n = 200_000
    config = noise(az=(0.02, 0.05), el=(-0.01, 0.2), origin_mean=(0.001, 0.0, -0.002), origin_std=(0.003, 0.0, 0.01))
    azimuth, elevation, origin = firing_errors(config, seed=7, scan_index=3, cells=np.arange(n))
    for values, mean, std in (
        (azimuth, math.radians(0.02), math.radians(0.05)),
        (elevation, math.radians(-0.01), math.radians(0.2)),
        (origin[:, 0], 0.001, 0.003),
        (origin[:, 2], -0.002, 0.01),
    ):
        assert abs(values.mean() - mean) < 5 * std / math.sqrt(n)
        assert values.std() == pytest.approx(std, rel=0.01)
    assert (origin[:, 1] == 0.0).all()  # no std, no mean: exactly 0
    z = np.stack([azimuth, elevation, origin[:, 0], origin[:, 2]])
    correlation = np.corrcoef(z)
    assert np.abs(correlation[np.triu_indices(4, 1)]).max() < 0.01  # the components are independent


def test_each_firing_and_scan_has_its_own_numbers_fixed_by_the_seed():
    config = noise(az=(0.0, 1.0))
    cells = np.arange(1000)
    a = firing_errors(config, 0, 0, cells)[0]
    assert np.array_equal(a, firing_errors(config, 0, 0, cells)[0])  # the same key, the same numbers
    assert np.array_equal(a[500:], firing_errors(config, 0, 0, cells[500:])[0])  # a block's beams alone
    for other in (firing_errors(config, 0, 1, cells)[0], firing_errors(config, 1, 0, cells)[0]):
        assert abs(np.corrcoef(a, other)[0, 1]) < 0.15


def test_the_errors_turn_the_beam_in_azimuth_and_elevation():
    phi, elev = np.radians([0.0, 40.0, 135.0, -100.0]), np.radians([-30.0, 0.0, 10.0, -5.0])
    d = direction(phi, elev)
    d_az, d_el = np.radians([1.0, -2.0, 0.5, 3.0]), np.radians([0.5, 1.0, -2.0, 0.25])
    yaw = math.radians(30.0)
    R = np.array([[math.cos(yaw), -math.sin(yaw), 0], [math.sin(yaw), math.cos(yaw), 0], [0, 0, 1]])
    R_ws = np.repeat(R[None], 4, axis=0)
    origin_error = np.array([[0.1, 0.0, 0.0], [0.0, 0.2, 0.0], [0.0, 0.0, 0.3], [0.0, 0.0, 0.0]])
    origins, dirs = perturbed_rays(np.zeros((4, 3)), d @ R.T, R_ws, d, (d_az, d_el, origin_error))
    np.testing.assert_allclose(dirs, direction(phi + d_az, elev + d_el) @ R.T, atol=1e-12)
    np.testing.assert_allclose(origins, origin_error @ R.T, atol=1e-15)


def test_sub_rays_turn_with_their_beam():
    d = direction(np.radians([20.0]), np.radians([-10.0]))
    side = direction(np.radians([20.3]), np.radians([-10.2]))
    rays = np.vstack([d, side])
    _, turned = perturbed_rays(
        np.zeros((2, 3)), rays, np.eye(3)[None], d, (np.radians([2.0]), np.radians([1.0]), np.zeros((1, 3)))
    )
    assert float(turned[0] @ turned[1]) == pytest.approx(float(d[0] @ side[0]), abs=1e-14)


def test_without_noise_the_rays_are_not_touched():
    origins, directions = np.zeros((6, 3)), np.tile([1.0, 0.0, 0.0], (6, 1))
    out = block_rays(
        MechanicalNoiseConfig(), 0, 0, np.arange(3), np.eye(3)[None], np.zeros((3, 3)), origins, directions
    )
    assert out[0] is origins and out[1] is directions
    assert not load_sensor_config("polaris").mechanical_noise.active


# -- through the scanner ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def wall_tracer():
    """The plane z = 0 and a wall whose face is at x = 2 m."""
    from acres_lidar_ros.tracing.trace import Tracer

    builder = SceneBuilder(TerrainGrid(np.array([-100.0, -100.0]), 200.0, np.zeros((2, 2))))
    builder.add_box([2.25, 0.0], [0.5, 40.0, 10.0], "building")
    return Tracer(builder.build())


def sensor(**lidar):
    base = {
        "columns": 36,
        "elevations_deg": [-30.0, 0.0],
        "azimuth_offsets_deg": [0.0, 0.0],
        "azimuth_order": "ccw",
        "lens_center_m": 0.0,
        "rpy_deg": [0.0, 0.0, 0.0],
        "position_flu_m": [0.0, 0.0, 1.0],
        "sub_rays": 1,
        "motion_distortion": False,
        "self_returns": None,
        "min_range_m": 0.3,
    }
    return load_sensor_config("default").with_overrides({**base, **lidar})


BACK = 18 * 2  # column 18 looks along -x, ring 0 (30 deg down) meets the plane at 1 / sin 30 = 2 m


def key(name):
    return "mechanical_noise." + name


@pytest.mark.parametrize(
    "overrides, cell, range_m",
    [
        ({}, BACK, 2.0),
        ({key("elevation_error_mean_deg"): 5.0}, BACK, 1.0 / math.sin(math.radians(25.0))),
        ({key("origin_error_mean_m"): [0.0, 0.0, 0.1]}, BACK, 1.1 / math.sin(math.radians(30.0))),
        ({}, 1, 2.0),  # column 0, level ring: the wall 2 m ahead
        ({key("azimuth_error_mean_deg"): 10.0}, 1, 2.0 / math.cos(math.radians(10.0))),
        ({key("origin_error_mean_m"): [0.5, 0.0, 0.0]}, 1, 1.5),
    ],
)
def test_the_traced_ray_takes_the_error_and_the_point_stays_on_the_nominal_beam(wall_tracer, overrides, cell, range_m):
    scan = Scanner(sensor(**overrides), tracer=wall_tracer, options=NO_RADIOMETRY).scan(AT_REST, 10**9)
    assert scan.returns.range_m[cell, 0] == pytest.approx(range_m, abs=2e-4)
    column, ring = divmod(cell, 2)
    nominal = direction(math.radians(10.0 * column), math.radians([-30.0, 0.0][ring]))
    np.testing.assert_allclose(scan.points_sensor[cell, 0], range_m * nominal, atol=2e-4)


def noisy(**lidar):
    return sensor(
        **{
            key("azimuth_error_std_deg"): 0.5,
            key("elevation_error_std_deg"): 0.5,
            key("origin_error_std_m"): [0.01, 0.01, 0.01],
            **lidar,
        }
    )


def test_noisy_scans_are_bit_identical_for_one_seed_and_block_order(wall_tracer):
    options = ScanOptions(self_returns=False, seed=5)
    a = Scanner(noisy(), tracer=wall_tracer, options=options).scan(AT_REST, 10**9)
    b = Scanner(noisy(), tracer=wall_tracer, options=options).scan(AT_REST, 10**9)
    np.testing.assert_array_equal(a.points_sensor, b.points_sensor)
    sweep = Scanner(noisy(), tracer=wall_tracer, options=options).start_sweep(10**9, index=0)
    sweep.trace_columns(AT_REST, np.arange(20, 36))  # the blocks in another order
    sweep.trace_columns(AT_REST, np.arange(0, 20))
    np.testing.assert_array_equal(sweep.finish(AT_REST).points_sensor, a.points_sensor)
    quiet = Scanner(sensor(), tracer=wall_tracer, options=options).scan(AT_REST, 10**9)
    valid = a.returns.valid & quiet.returns.valid
    assert not np.array_equal(a.returns.range_m[valid], quiet.returns.range_m[valid])


def test_the_noise_stream_only_draws_for_the_echoes(wall_tracer):
    # The spec's stream: two outputs per echo, nothing for the mechanical noise.
    scanner = Scanner(noisy(), tracer=wall_tracer, options=ScanOptions(self_returns=False, seed=11))
    _, echoes = scanner.scan_echoes(AT_REST, 10**9)
    assert echoes is not None
    fresh = Pcg32((11 + NOISE_STATE_OFFSET), NOISE_SEQUENCE)
    fresh.advance(2 * echoes.cell.size)
    assert scanner.streams.noise.state == fresh.state
