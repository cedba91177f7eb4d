"""The firing pattern (docs/sensors.md, "Firing pattern"): directions, origins and firing times
of small rotary and solid-state patterns worked out by hand, fractional ticks, state cycling, and
the rings x columns keys as one way of writing a pattern."""

import json
import math

import numpy as np
import pytest

from acres_lidar_ros.config.emitter_block import rotary_tick_count
from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.sensor.emitters import FiringPattern
from acres_lidar_ros.sensor.pattern import BeamPattern
from acres_lidar_ros.sensor.timing import column_time_offset


def write(tmp_path, lidar, name="s.json"):
    path = tmp_path / name
    path.write_text(json.dumps({"lidar": lidar}))
    return path


ROTARY = {
    "hz": 10.0,
    "spin_direction": "cw",
    "scan_start_azimuth_deg": 0.0,
    "emitters": {
        "rot_pattern_firing_res_deg": 90.0,
        "states": [
            {
                "azimuth_deg": [1.0, -2.0],
                "elevation_deg": [10.0, -5.0],
                "fire_time_ns": [0, 1000],
                "channel_id": [7, 42],
                "hor_offset_m": [0.05, 0.05],
                "vert_offset_m": [0.01, -0.02],
            }
        ],
    },
}


def direction(elevation_deg, azimuth_deg):
    e, a = math.radians(elevation_deg), math.radians(azimuth_deg)
    return [math.cos(e) * math.cos(a), math.cos(e) * math.sin(a), math.sin(e)]


def test_a_small_rotary_pattern_by_hand(tmp_path):
    config = load_sensor_config(write(tmp_path, ROTARY))
    # 360 / 90 = 4 ticks of 2 emitters: the organised cloud is 4 columns x 2 rings.
    assert (config.columns, config.rings) == (4, 2)
    firing = FiringPattern.from_config(config)
    # cw spin from 0 deg: tick k points at -90 k deg and starts k T / 4 - T before the stamp (T = 0.1 s).
    np.testing.assert_allclose(np.rad2deg(firing.tick_azimuth_rad), [0.0, -90.0, -180.0, -270.0], atol=1e-12)
    np.testing.assert_allclose(firing.tick_time_offset_s, [-0.1, -0.075, -0.05, -0.025], atol=1e-15)
    pattern = BeamPattern.from_config(config)
    # Tick 1, emitter 0: azimuth -90 + 1 = -89 deg, elevation 10 deg.
    np.testing.assert_allclose(pattern.directions_sensor[1, 0], direction(10.0, -89.0), atol=1e-15)
    # Tick 3, emitter 1: -270 - 2 = -272 deg, elevation -5 deg.
    np.testing.assert_allclose(pattern.directions_sensor[3, 1], direction(-5.0, -272.0), atol=1e-15)
    # The origin: 0.05 m along the tick's azimuth, plus the vertical offset (tick 1 points at -y).
    np.testing.assert_allclose(pattern.lens_origins_sensor[1, 0], [0.0, -0.05, 0.01], atol=1e-15)
    np.testing.assert_allclose(pattern.lens_origins_sensor[2, 1], [-0.05, 0.0, -0.02], atol=1e-15)
    cells = pattern.cells
    assert cells.channel_id.tolist() == [[7, 42]] * 4  # vendor ids, unchanged
    np.testing.assert_allclose(cells.fire_time_s[:, 1], 1e-6)
    # Firing angle (the attribute list, clockwise from the start): tick 1 emitter 0 at 90 - 1 = 89 deg.
    assert math.degrees(cells.firing_angle_rad[1, 0]) == pytest.approx(89.0)
    assert math.degrees(cells.firing_angle_rad[0, 1]) == pytest.approx(2.0)


def test_ccw_spin_and_start_azimuth(tmp_path):
    lidar = {**ROTARY, "spin_direction": "ccw", "scan_start_azimuth_deg": 45.0}
    firing = FiringPattern.from_config(load_sensor_config(write(tmp_path, lidar)))
    # ccw from 45 deg: 45, 135, 225, 315; tick 0 is the first to fire, one period before the stamp.
    np.testing.assert_allclose(np.rad2deg(firing.tick_azimuth_rad), [45.0, 135.0, 225.0, 315.0], atol=1e-12)
    np.testing.assert_allclose(firing.tick_time_offset_s, [-0.1, -0.075, -0.05, -0.025], atol=1e-15)
    # The attribute list's firing angle is measured clockwise: a ccw sweep runs it down from 360.
    angle = np.rad2deg(firing.cells().firing_angle_rad[:, 0])
    np.testing.assert_allclose(angle, [359.0, 269.0, 179.0, 89.0], atol=1e-9)


@pytest.mark.parametrize(
    "res_deg, ticks, last_deg",
    [(90.0, 4, 270.0), (0.2, 1800, 359.8), (0.3, 1200, 359.7), (0.7, 515, 359.8), (7.0, 52, 357.0), (360.0, 1, 0.0)],
)
def test_a_rotation_holds_the_ticks_below_360_deg(tmp_path, res_deg, ticks, last_deg):
    """Ticks at k res while k res < 360 (the decimal the file writes: 0.3 deg gives 1200, not 1201)."""
    assert rotary_tick_count(res_deg) == ticks
    lidar = {**ROTARY, "hz": 10.0, "emitters": {**ROTARY["emitters"], "rot_pattern_firing_res_deg": res_deg}}
    lidar["emitters"]["states"] = [{**ROTARY["emitters"]["states"][0], "fire_time_ns": [0, 0]}]
    config = load_sensor_config(write(tmp_path, lidar))
    firing = FiringPattern.from_config(config)
    assert config.columns == firing.ticks == ticks
    assert firing.tick_azimuth_rad.shape == (ticks,)
    # The last tick's angle and time come from its angle, not from a whole-number share of T.
    assert -math.degrees(firing.tick_azimuth_rad[-1]) == pytest.approx(last_deg)
    assert firing.tick_time_offset_s[-1] == pytest.approx(last_deg / 360.0 * 0.1 - 0.1, abs=1e-15)
    assert (np.diff(firing.tick_time_offset_s) > 0).all() and firing.tick_time_offset_s[-1] < 0


SOLID = {
    "hz": 10.0,
    "scan_type": "solid_state",
    "scan_start_azimuth_deg": 30.0,  # a solid-state sensor's directions do not include it
    "emitters": {
        "num_lines": 2,
        "num_rays_per_line": [2, 1],
        "states": [
            {
                "azimuth_deg": [10.0, -10.0, 0.0],
                "elevation_deg": [0.0, 0.0, -5.0],
                "fire_time_ns": [0, 30_000_000, 60_000_000],
                "channel_id": [1, 2, 3],
                "bank": [0, 0, 1],
            }
        ],
    },
}


def test_a_solid_state_tick_by_hand(tmp_path):
    config = load_sensor_config(write(tmp_path, SOLID))
    assert (config.columns, config.rings, config.scan_type) == (1, 3, "solid_state")
    firing = FiringPattern.from_config(config)
    assert firing.tick_azimuth_rad.tolist() == [0.0]
    assert firing.tick_time_offset_s.tolist() == [-0.1]  # the tick spans the scan
    pattern = BeamPattern.from_config(config)
    for e, (el, az) in enumerate(((0.0, 10.0), (0.0, -10.0), (-5.0, 0.0))):
        np.testing.assert_allclose(pattern.directions_sensor[0, e], direction(el, az), atol=1e-15)
    np.testing.assert_allclose(pattern.cells.fire_time_s[0], [0.0, 0.03, 0.06])
    assert pattern.cells.bank[0].tolist() == [0, 0, 1]


def two_states(scan_type="rotary", step=2):
    state = {"azimuth_deg": [0.0], "elevation_deg": [0.0], "fire_time_ns": [0], "channel_id": [5]}
    other = {**state, "elevation_deg": [-10.0], "channel_id": [6]}
    third = {**state, "elevation_deg": [-20.0], "channel_id": [7]}
    block = {"rot_pattern_firing_res_deg": 60.0, "state_resolution_step": step, "number_of_channels": 3}
    states = [state, other] if scan_type == "rotary" else [state, other, third]
    return {"hz": 10.0, "scan_type": scan_type, "emitters": {**block, "states": states}}


def test_rotary_states_cycle_every_step_ticks(tmp_path):
    firing = FiringPattern.from_config(load_sensor_config(write(tmp_path, two_states())))
    assert firing.tick_states().tolist() == [0, 0, 1, 1, 0, 0]
    assert firing.tick_states(index=7).tolist() == [0, 0, 1, 1, 0, 0]  # every rotation alike
    cells = firing.cells()
    np.testing.assert_allclose(np.rad2deg(cells.elevation_rad[:, 0]), [0, 0, -10, -10, 0, 0], atol=1e-12)
    assert cells.channel_id[:, 0].tolist() == [5, 5, 6, 6, 5, 5]


def test_solid_state_states_cycle_every_step_scans(tmp_path):
    firing = FiringPattern.from_config(load_sensor_config(write(tmp_path, two_states("solid_state"))))
    assert [firing.phase_of_scan(i) for i in range(8)] == [0, 0, 1, 1, 2, 2, 0, 0]
    assert firing.cells(index=4).channel_id.tolist() == [[7]]


def test_an_roi_state_fires_its_roi_emitters_only_inside_the_interval(tmp_path):
    base = {"azimuth_deg": [0.0, 1.0], "elevation_deg": [0.0, 1.0], "fire_time_ns": [0, 0], "channel_id": [1, 2]}
    roi = {**base, "is_roi_state": True, "roi": [True, False]}
    lidar = {
        "hz": 10.0,
        "scan_start_azimuth_deg": 0.0,
        # ROI from 300 to 30 deg on the tick's firing angle: wraps through 360.
        "emitters": {
            "rot_pattern_firing_res_deg": 30.0,
            "min_azimuth_roi_deg": 300.0,
            "max_azimuth_roi_deg": 30.0,
            "states": [base, roi],
        },
    }
    cells = FiringPattern.from_config(load_sensor_config(write(tmp_path, lidar))).cells()
    # 12 ticks at 0, 30, ..., 330 deg; odd ticks use the ROI state; inside [300, 30]: 0, 30, 300, 330.
    inside = np.isin(np.arange(12) * 30, [0, 30, 300, 330])
    roi_tick = np.arange(12) % 2 == 1
    np.testing.assert_array_equal(cells.fires[:, 0], ~roi_tick | inside)
    np.testing.assert_array_equal(cells.fires[:, 1], ~roi_tick)  # not flagged: never fired by the ROI state


def test_the_rings_by_columns_keys_are_one_way_of_writing_a_pattern():
    """The Polaris: columns are ticks of one state whose emitters are the rings, firing together."""
    polaris = load_sensor_config("polaris")
    firing = FiringPattern.from_config(polaris)
    assert (firing.ticks, firing.emitters, len(firing.states)) == (1800, 32, 1)
    assert firing.shared_fire_times
    np.testing.assert_array_equal(
        firing.tick_time_offset_s,
        column_time_offset(firing.tick_azimuth_rad, polaris.scan_start_azimuth_rad, "cw", polaris.period_s),
    )
    np.testing.assert_allclose(np.rad2deg(firing.tick_azimuth_rad[:3]), [0.0, -0.2, -0.4], atol=1e-12)
    cells = firing.cells()
    assert cells.channel_id[5].tolist() == list(range(32))
    assert not cells.fire_time_s.any()
    np.testing.assert_allclose(np.linalg.norm(cells.origin_sensor_m, axis=-1), 0.035)


def test_an_emitters_sensor_writes_an_effective_file_that_loads_back(tmp_path):
    config = load_sensor_config(write(tmp_path, ROTARY))
    again = load_sensor_config(write(tmp_path, config.effective["lidar"], name="effective.json"))
    assert again.emitters is not None and again.columns == 4
    np.testing.assert_array_equal(again.emitters.states[0].channel_id, [7, 42])
    np.testing.assert_array_equal(
        BeamPattern.from_config(again).directions_sensor, BeamPattern.from_config(config).directions_sensor
    )


def test_an_emitter_peak_power_is_relative_to_the_sensors(tmp_path):
    state = {**ROTARY["emitters"]["states"][0], "peak_power_w": [20.0, 0.0]}
    lidar = {**ROTARY, "peak_power_w": 8.0, "emitters": {**ROTARY["emitters"], "states": [state]}}
    cells = BeamPattern.from_config(load_sensor_config(write(tmp_path, lidar))).cells
    # 20 W over the sensor's 8 W; an entry at or below 1e-5 W falls back to the sensor's power.
    np.testing.assert_allclose(cells.power_ratio[:, 0], 2.5)
    np.testing.assert_allclose(cells.power_ratio[:, 1], 1.0)


def test_overrides_of_keys_the_emitters_block_leaves_unread_are_refused(tmp_path):
    from acres_lidar_ros.errors import ConfigError

    config = load_sensor_config(write(tmp_path, ROTARY))
    with pytest.raises(ConfigError, match=r"lidar\.columns = 100: the sensor's pattern is its lidar\.emitters block"):
        config.with_overrides({"columns": 100})
    assert config.with_overrides({"std_m": 0.01}).emitters is not None
    # Setting the block to null gives the rings x columns keys back (the planar scan does so).
    rings_by_columns = config.with_overrides({"emitters": None, "columns": 100})
    assert rings_by_columns.emitters is None and rings_by_columns.columns == 100
    from acres_lidar_ros.sensor.pattern import planar_config

    assert planar_config(config).columns == 360
