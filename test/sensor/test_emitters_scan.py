"""Scans of ticks x emitters patterns: each emitter fires from the pose at its own firing time (a
plane passing a moving sensor, worked out by hand), peak power scales the signal, distance
corrections and ROI states shape the returns."""

import json
import math

import numpy as np
import pytest

from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.scan.scan_types import ScanOptions
from acres_lidar_ros.scan.scanner import Scanner
from acres_lidar_ros.scene.builder import SceneBuilder
from acres_lidar_ros.scene.grids import TerrainGrid
from acres_lidar_ros.sensor.poses import PoseHistory

GEOMETRY = {"position_flu_m": [0.0, 0.0, 0.0], "rpy_deg": [0.0, 0.0, 0.0], "sub_rays": 1, "hz": 10.0}
BARE = ScanOptions(radiometry=False, self_returns=False)
STAMP_NS = 1_000_000_000


@pytest.fixture(scope="module")
def ground():
    """The plane z = 0."""
    from acres_lidar_ros.tracing.trace import Tracer

    return Tracer(SceneBuilder(TerrainGrid(np.array([-200.0, -200.0]), 400.0, np.zeros((2, 2)))).build())


def sensor(tmp_path, emitters, **lidar):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"lidar": {**GEOMETRY, **lidar, "emitters": emitters}}))
    return load_sensor_config(path)


def rising(z0_m=2.0, speed_m_s=10.0, until_s=2.0):
    """Straight up at ``speed_m_s`` from ``z0_m`` at t = 0, a pose every 10 ms up to ``until_s``
    (linear, so interpolation is exact to rounding)."""
    t = np.arange(0.0, until_s + 1e-9, 0.01)
    positions = np.stack([np.zeros_like(t), np.zeros_like(t), z0_m + speed_m_s * t], axis=1)
    return PoseHistory.from_arrays(t, positions, np.tile([0.0, 0.0, 0.0, 1.0], (t.size, 1)))


ROTARY = {
    "rot_pattern_firing_res_deg": 90.0,
    "states": [
        {
            "azimuth_deg": [0.0, 5.0],
            "elevation_deg": [-30.0, -60.0],
            "fire_time_ns": [0, 20_000_000],  # within one tick (25 ms at 10 Hz)
            "channel_id": [3, 9],
        }
    ],
}
SOLID = {
    "num_lines": 1,
    "num_rays_per_line": [3],
    "states": [
        {
            "azimuth_deg": [20.0, 0.0, -20.0],
            "elevation_deg": [-30.0, -45.0, -60.0],
            "fire_time_ns": [0, 40_000_000, 90_000_000],  # spread over the 100 ms scan
            "channel_id": [1, 2, 3],
            "bank": [0, 0, 0],
        }
    ],
}


@pytest.mark.parametrize(
    "emitters, scan_type, tick_time_s",
    [(ROTARY, "rotary", [-0.1, -0.075, -0.05, -0.025]), (SOLID, "solid_state", [-0.1])],
)
def test_each_emitter_fires_from_its_own_pose(tmp_path, ground, emitters, scan_type, tick_time_s):
    """A sensor rising at 10 m/s over the plane z = 0: the emitter firing at t sees the plane at
    R = (2 + 10 t) / sin(-elevation), and its point, moved with the pose of that same time, lies on
    the plane."""
    config = sensor(tmp_path, emitters, scan_type=scan_type)
    scan = Scanner(config, tracer=ground, options=BARE).scan(rising(), STAMP_NS)
    state = emitters["states"][0]
    fire_s = np.array(state["fire_time_ns"]) * 1e-9
    t_s = 1.0 + np.array(tick_time_s)[:, None] + fire_s[None, :]  # (ticks, emitters), by hand
    np.testing.assert_allclose(scan.cell_time_offset_s, (t_s - 1.0).ravel(), atol=1e-12)
    elevation = np.deg2rad(state["elevation_deg"])
    expected_m = (2.0 + 10.0 * t_s) / np.sin(-elevation)[None, :]
    np.testing.assert_allclose(scan.returns.range_m[:, 0], expected_m.ravel(), rtol=1e-6)
    # The pose of each cell is that of its own firing time, and its point lands on the plane.
    cells = np.arange(scan.columns * scan.rings)
    T = scan.T_world_sensor_of(cells)
    np.testing.assert_allclose(T[:, 2, 3], (2.0 + 10.0 * t_s).ravel(), atol=1e-9)
    world = np.einsum("nij,nj->ni", T[:, :3, :3], scan.points_sensor[:, 0]) + T[:, :3, 3]
    np.testing.assert_allclose(world[:, 2], 0.0, atol=1e-5)
    # The pose of the tick's start would put the late emitters' points below the plane.
    late = np.repeat(fire_s[None, :] > 0, len(tick_time_s), axis=0).ravel()
    T_tick = scan.T_world_sensor[cells // scan.rings]
    wrong = np.einsum("nij,nj->ni", T_tick[:, :3, :3], scan.points_sensor[:, 0]) + T_tick[:, :3, 3]
    assert (wrong[late, 2] < -0.1).all()
    assert scan.cells is not None and scan.cells.channel_id.ravel().tolist() == state["channel_id"] * scan.columns


def test_emitters_that_share_a_fire_time_share_one_pose_per_tick(tmp_path, ground):
    together = {**ROTARY, "states": [{**ROTARY["states"][0], "fire_time_ns": [5_000_000, 5_000_000]}]}
    scan = Scanner(sensor(tmp_path, together), tracer=ground, options=BARE).scan(rising(), STAMP_NS)
    assert scan.fire_time_s is None and scan.emitter_T_world_sensor is None
    # The tick's time is its start plus the common fire time.
    np.testing.assert_allclose(scan.time_offset_s, [-0.095, -0.07, -0.045, -0.02], atol=1e-12)
    np.testing.assert_allclose(scan.T_world_sensor[:, 2, 3], 2.0 + 10.0 * (1.0 + scan.time_offset_s), atol=1e-9)


def test_a_sweep_traced_in_blocks_equals_one_scan_with_per_emitter_poses(tmp_path, ground):
    config = sensor(tmp_path, ROTARY)
    whole = Scanner(config, tracer=ground, options=BARE).scan(rising(), STAMP_NS)
    scanner = Scanner(config, tracer=ground, options=BARE)
    sweep = scanner.start_sweep(STAMP_NS)
    poses = rising(until_s=0.94)
    # Only tick 0 has fired wholly by 0.94 s (its second emitter at 0.92 s; tick 1's at 0.945 s).
    assert sweep.trace_covered(poses) == 1
    blocks = sweep.finish(rising())
    np.testing.assert_array_equal(blocks.returns.range_m, whole.returns.range_m)
    np.testing.assert_array_equal(blocks.emitter_T_world_sensor, whole.emitter_T_world_sensor)


def test_distance_correction_is_subtracted_from_the_ranges_an_emitter_reports(tmp_path, ground):
    corrected = {**ROTARY, "states": [{**ROTARY["states"][0], "distance_correction_m": [0.25, -0.5]}]}
    plain = Scanner(sensor(tmp_path, ROTARY), tracer=ground, options=BARE).scan(rising(), STAMP_NS)
    scan = Scanner(sensor(tmp_path, corrected), tracer=ground, options=BARE).scan(rising(), STAMP_NS)
    np.testing.assert_allclose(scan.returns.range_m[0::2, 0], plain.returns.range_m[0::2, 0] - 0.25, atol=1e-12)
    np.testing.assert_allclose(scan.returns.range_m[1::2, 0], plain.returns.range_m[1::2, 0] + 0.5, atol=1e-12)
    # The point is the reported range along the beam.
    np.testing.assert_allclose(np.linalg.norm(scan.points_sensor[:, 0], axis=1), scan.returns.range_m[:, 0])


def test_an_roi_state_leaves_its_unfired_cells_without_returns(tmp_path, ground):
    base = ROTARY["states"][0]
    roi = {**base, "is_roi_state": True, "roi": [True, False]}
    emitters = {**ROTARY, "min_azimuth_roi_deg": 80.0, "max_azimuth_roi_deg": 100.0, "states": [base, roi]}
    scan = Scanner(sensor(tmp_path, emitters, scan_start_azimuth_deg=0.0), tracer=ground, options=BARE).scan(
        rising(), STAMP_NS
    )
    valid = scan.returns.valid[:, 0].reshape(4, 2)
    # Ticks at 0, 90, 180, 270 deg; 1 and 3 use the ROI state, and only tick 1 (90 deg) is inside.
    np.testing.assert_array_equal(valid, [[True, True], [True, False], [True, True], [False, False]])
    assert np.isnan(scan.points_sensor[~scan.returns.valid[:, 0], 0]).all()


def test_peak_power_scales_the_signal_of_the_range_equation(tmp_path, ground):
    """Two emitters along one ray, 20 W and the sensor's 10 W: the first's signal is twice the second's."""
    state = {
        "azimuth_deg": [0.0, 0.0],
        "elevation_deg": [-30.0, -30.0],
        "fire_time_ns": [0, 0],
        "channel_id": [0, 1],
        "peak_power_w": [20.0, 0.0],
    }
    config = sensor(tmp_path, {**ROTARY, "states": [state]}, peak_power_w=10.0, min_return_separation_m=0.3)
    still = PoseHistory.from_arrays(np.zeros(1), np.array([[0.0, 0.0, 2.0]]), [[0, 0, 0, 1]])
    scanner = Scanner(config, tracer=ground, options=ScanOptions(noise=False, self_returns=False, weather=False))
    _, echoes = scanner.scan_echoes(still, STAMP_NS)
    assert echoes is not None
    per_cell = np.full(8, np.nan)
    per_cell[echoes.cell] = echoes.signal_counts
    np.testing.assert_allclose(per_cell[0::2], 2.0 * per_cell[1::2], rtol=1e-12)
    assert math.isfinite(per_cell[1]) and per_cell[1] > 0


def test_a_runtime_change_of_the_pattern_is_refused_and_changes_nothing(tmp_path, ground):
    from acres_lidar_ros.errors import ConfigError

    config = sensor(tmp_path, ROTARY)
    scanner = Scanner(config, tracer=ground, options=BARE)
    before = scanner.pattern
    with pytest.raises(ConfigError, match=r"lidar\.scan_type cannot change while running"):
        scanner.set_runtime_config({"scan_type": "solid_state"})
    with pytest.raises(ConfigError, match=r"lidar\.emitters cannot change while running"):
        scanner.set_runtime_config({"emitters": SOLID})
    assert scanner.config is config and scanner.pattern is before
    scanner.set_runtime_config({"std_m": 0.01})  # a runtime key still changes
    assert scanner.config.std_m == 0.01 and scanner.config.emitters is not None


def test_solid_state_scans_take_their_states_in_turn(tmp_path, ground):
    """Two states of one emitter, 30 and 60 deg down, one scan each: the ranges alternate."""
    first = {"azimuth_deg": [0.0], "elevation_deg": [-30.0], "fire_time_ns": [0], "channel_id": [1]}
    second = {**first, "elevation_deg": [-60.0], "channel_id": [2]}
    config = sensor(tmp_path, {"number_of_channels": 2, "states": [first, second]}, scan_type="solid_state")
    scanner = Scanner(config, tracer=ground, options=BARE)
    still = PoseHistory.from_arrays(np.zeros(1), np.array([[0.0, 0.0, 2.0]]), [[0, 0, 0, 1]])
    ranges = [scanner.scan(still, STAMP_NS + i * 100_000_000).returns.range_m[0, 0] for i in range(4)]
    expected = [2.0 / math.sin(math.radians(a)) for a in (30.0, 60.0, 30.0, 60.0)]
    np.testing.assert_allclose(ranges, expected, rtol=1e-6)  # the tracer works in float32
