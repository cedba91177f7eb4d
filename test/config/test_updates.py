"""Runtime updates: live keys at the next scan, pattern keys rebuilt between
scans, fixed keys refused, and a refused update changes nothing; through ``config.updates``,
``Scanner.set_runtime_config`` and the ROS-free node loop."""

import numpy as np
import pytest

from acres_lidar_ros.config.schema import LIDAR_PARAMS
from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.config.updates import FIXED_REASONS, plan_update, update_class
from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.radiometry.noise import NOISE_SEQUENCE, NOISE_STATE_OFFSET, Pcg32
from acres_lidar_ros.scan.scan_types import ScanOptions
from acres_lidar_ros.scan.scanner import Scanner
from acres_lidar_ros.scene.builder import SceneBuilder
from acres_lidar_ros.scene.grids import TerrainGrid
from acres_lidar_ros.sensor.poses import PoseHistory

AT_REST = PoseHistory.from_arrays(np.zeros(1), np.zeros((1, 3)), np.array([[0.0, 0.0, 0.0, 1.0]]))
OPTIONS = ScanOptions(self_returns=False, seed=3)


@pytest.fixture(scope="module")
def plane_tracer():
    from acres_lidar_ros.tracing.trace import Tracer

    return Tracer(SceneBuilder(TerrainGrid(np.array([-100.0, -100.0]), 200.0, np.zeros((2, 2)))).build())


def small_sensor(**lidar):
    base = {
        "columns": 36,
        "elevations_deg": [-30.0, -20.0],
        "azimuth_offsets_deg": [0.0, 0.0],
        "azimuth_order": "ccw",
        "rpy_deg": [0.0, 0.0, 0.0],
        "sub_rays": 1,
        "motion_distortion": False,
        "self_returns": None,
        "scan_start_azimuth_deg": 0.0,
    }
    return load_sensor_config("default").with_overrides({**base, **lidar})


# -- the classes -------------------------------------------------------------------------------


def test_every_key_has_one_class_and_every_fixed_key_says_why():
    for param in LIDAR_PARAMS:
        assert not (param.runtime and param.rebuild), param.name
    assert update_class("valid_start_azimuth_deg") == "live"
    assert update_class("mechanical_noise.azimuth_error_std_deg") == "live"
    assert update_class("columns") == "rebuild" and update_class("elevations_deg") == "rebuild"
    assert update_class("hz") == "fixed" and update_class("frame_id") == "fixed"
    fixed = [p.name for p in LIDAR_PARAMS if not (p.runtime or p.rebuild)]
    assert set(fixed) <= set(FIXED_REASONS), "a fixed key without its reason"


def test_plan_update_checks_the_whole_update_first():
    config = small_sensor()
    live = plan_update(config, {"range_offset_m": 1.0, "std_m": 0.05})
    assert not live.rebuild and live.changed == ("range_offset_m", "std_m")
    assert live.config.windows.range_offset_m == 1.0 and config.windows.range_offset_m == 0.0
    assert plan_update(config, {"columns": 72}).rebuild
    assert plan_update(config, {"hz": 10.0}).changed == ()  # a fixed key at its own value is no change
    with pytest.raises(ConfigError, match=r"lidar\.hz cannot change while running: the node's scan schedule"):
        plan_update(config, {"std_m": 0.05, "hz": 5.0})
    with pytest.raises(ConfigError, match=r"lidar\.range_offset_m = 60\.0 is not below lidar\.range_m"):
        plan_update(config, {"range_offset_m": 60.0})
    with pytest.raises(ConfigError, match=r"lidar\.azimuth_offsets_deg has 2 values but the sensor has 3 rings"):
        plan_update(config, {"elevations_deg": [-30.0, -20.0, -10.0]})
    with pytest.raises(ConfigError, match=r"lidar\.nope: unknown key"):
        plan_update(config, {"nope": 1})


# -- through the scanner -----------------------------------------------------------------------


def test_a_live_change_applies_from_the_next_scan(plane_tracer):
    scanner = Scanner(small_sensor(), tracer=plane_tracer, options=OPTIONS)
    assert scanner.scan(AT_REST, 10**9).returns.valid.any(axis=1).all()
    assert scanner.set_runtime_config({"valid_start_azimuth_deg": 0.0, "valid_end_azimuth_deg": 90.0}) is False
    valid = scanner.scan(AT_REST, 2 * 10**9).returns.valid.any(axis=1).reshape(36, 2)
    firing = np.mod(-10.0 * np.arange(36), 360.0)  # clockwise from the sweep start (forward)
    assert (valid.all(axis=1) == (firing < 90.0)).all()


def test_a_pattern_change_is_rebuilt_between_scans_and_the_run_goes_on(plane_tracer):
    scanner = Scanner(small_sensor(), tracer=plane_tracer, options=OPTIONS)
    first, echoes = scanner.scan_echoes(AT_REST, 10**9)
    echoes_first = echoes.cell.size
    assert scanner.set_runtime_config({"columns": 72}) is True
    second, echoes = scanner.scan_echoes(AT_REST, 2 * 10**9)
    assert (first.columns, second.columns) == (36, 72) and second.returns.valid.shape[0] == 144
    assert second.index == first.index + 1  # the scan numbers go on
    # The noise stream goes on too: two outputs per echo of both scans from the seed's start.
    stream = Pcg32(3 + NOISE_STATE_OFFSET, NOISE_SEQUENCE)
    stream.advance(2 * (echoes_first + echoes.cell.size))
    assert scanner.streams.noise.state == stream.state
    np.testing.assert_allclose(second.returns.range_m[::2, 0], 1.9 / np.sin(np.radians(30.0)), atol=0.15)


def test_a_refused_update_changes_nothing(plane_tracer):
    scanner = Scanner(small_sensor(), tracer=plane_tracer, options=OPTIONS)
    config, pattern = scanner.config, scanner.pattern
    for bad in ({"hz": 5.0}, {"columns": 72, "frame_id": "other"}, {"range_offset_m": 80.0}, {"columns": 2}):
        with pytest.raises(ConfigError):
            scanner.set_runtime_config(bad)
        assert scanner.config is config and scanner.pattern is pattern
    reference = Scanner(small_sensor(), tracer=plane_tracer, options=OPTIONS).scan(AT_REST, 10**9)
    np.testing.assert_array_equal(scanner.scan(AT_REST, 10**9).points_sensor, reference.points_sensor)


def test_a_sweep_started_before_a_rebuild_is_not_finished_with_the_new_pattern(plane_tracer):
    scanner = Scanner(small_sensor(), tracer=plane_tracer, options=OPTIONS)
    sweep = scanner.start_sweep(10**9, index=0)
    sweep.trace_columns(AT_REST, np.arange(10))
    scanner.set_runtime_config({"columns": 72})
    with pytest.raises(ConfigError, match=r"started before the beam pattern was rebuilt"):
        sweep.finish(AT_REST)
    assert scanner.start_sweep(10**9, index=0).finish(AT_REST).columns == 72


def test_a_live_trace_change_mid_sweep_traces_the_early_blocks_again(plane_tracer):
    scanner = Scanner(small_sensor(), tracer=plane_tracer, options=OPTIONS)
    sweep = scanner.start_sweep(10**9, index=0)
    sweep.trace_columns(AT_REST, np.arange(18))
    scanner.set_runtime_config({"range_offset_m": 6.0})  # beyond the plane at 3.8 and 5.56 m
    assert not sweep.finish(AT_REST).returns.valid.any()


# -- through the node's loop -------------------------------------------------------------------


def test_the_loop_applies_the_same_rules(plane_tracer):
    from acres_lidar_ros.runtime.loop import InlineExecutor, NodeLoop

    scanner = Scanner(small_sensor(), tracer=plane_tracer, options=OPTIONS)
    loop = NodeLoop(scanner, lambda: 10**9, lambda scan, job: scan, lambda out: None, executor=InlineExecutor())
    streams = scanner.streams
    loop.rebuild({"range_m": 30.0})  # live
    assert loop.scanner is scanner and loop.config.range_m == 30.0
    loop.rebuild({"columns": 72})  # rebuilt between scans, on the same scanner and streams
    assert loop.scanner is scanner and loop.config.columns == 72 and scanner.streams is streams
    with pytest.raises(ConfigError, match=r"lidar\.hz cannot change while running"):
        loop.rebuild({"hz": 5.0, "std_m": 0.1})
    assert loop.config.hz == 10.0 and loop.config.std_m == scanner.config.std_m == 0.02
    loop.close()


def test_the_scanning_principle_and_the_emitters_block_are_fixed():
    # The attribute list: scanType needs the model recreated; the emitters block sets the cells' identity.
    config = small_sensor()
    with pytest.raises(ConfigError, match=r"lidar\.scan_type cannot change while running: the model is built"):
        plan_update(config, {"scan_type": "solid_state"})
    with pytest.raises(ConfigError, match=r"lidar\.emitters cannot change while running: the emitters block"):
        plan_update(config, {"emitters": {"states": []}})
    assert plan_update(config, {"peak_power_w": 20.0}).rebuild  # each emitter's power ratio is in the cells
