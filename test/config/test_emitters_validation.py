"""Every rule of the attribute list's "Parameter validation" list, and the bad input of the firing
pattern: each refusal is the project's ConfigError naming the key, the index, the value and the rule."""

import copy
import json
import re

import pytest

from acres_lidar_ros.config.emitter_block import MAX_CELLS
from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.errors import ConfigError

STATE = {
    "azimuth_deg": [1.0, -1.0, 2.0],
    "elevation_deg": [5.0, 0.0, -5.0],
    "fire_time_ns": [0, 1000, 2000],
    "channel_id": [10, 11, 12],
}
BASE = {"hz": 10.0, "emitters": {"rot_pattern_firing_res_deg": 1.0, "states": [STATE]}}


def lidar_with(block=None, state=None, **lidar):
    out = copy.deepcopy(BASE)
    out["emitters"].update(block or {})
    out["emitters"]["states"][0].update(state or {})
    out.update(lidar)
    return out


def refused(tmp_path, lidar) -> str:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"lidar": lidar}))
    with pytest.raises(ConfigError) as err:
        load_sensor_config(path)
    return str(err.value)


def test_the_base_case_loads(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"lidar": BASE}))
    assert load_sensor_config(path).columns == 360


@pytest.mark.parametrize("key", ["azimuth_deg", "elevation_deg", "fire_time_ns", "channel_id"])
def test_a_required_array_of_the_wrong_length(tmp_path, key):
    message = refused(tmp_path, lidar_with(state={key: STATE[key][:2]}))
    if key == "azimuth_deg":  # it sets N_e: the next array is the one of another length
        assert "states[0].elevation_deg has 3 entries: expected number_of_emitters = 2 (the length of" in message
    else:
        assert f"lidar.emitters.states[0].{key} has 2 entries: expected number_of_emitters = 3" in message
    assert "every non-empty per-emitter array holds number_of_emitters elements" in message


@pytest.mark.parametrize(
    "key, value",
    [
        ("bank", [0, 0]),
        ("range_id", [0]),
        ("vert_offset_m", [0.0, 0.0, 0.0, 0.0]),
        ("hor_offset_m", [0.0]),
        ("distance_correction_m", [0.0]),
        ("peak_power_w", [1.0]),
        ("roi", [True]),
    ],
)
def test_an_optional_array_is_empty_or_of_n_e_entries(tmp_path, key, value):
    message = refused(tmp_path, lidar_with(state={key: value}))
    assert f"states[0].{key} has {len(value)} entries: expected number_of_emitters = 3 or none" in message


def test_a_second_state_of_another_length(tmp_path):
    lidar = lidar_with()
    lidar["emitters"]["states"].append({**STATE, "elevation_deg": [1.0, 2.0, 3.0, 4.0]})
    message = refused(tmp_path, lidar)
    assert "lidar.emitters.states[1].elevation_deg has 4 entries: expected number_of_emitters = 3" in message


def test_number_of_emitters_when_given_must_match_the_arrays(tmp_path):
    message = refused(tmp_path, lidar_with(block={"number_of_emitters": 4}))
    assert "states[0].azimuth_deg has 3 entries: expected number_of_emitters = 4" in message


def test_fire_times_never_decrease_within_a_state(tmp_path):
    message = refused(tmp_path, lidar_with(state={"fire_time_ns": [0, 2000, 1000]}))
    assert "lidar.emitters.states[0].fire_time_ns[2] = 1000 is below fire_time_ns[1] = 2000" in message
    assert "fire-time order" in message


def test_the_last_fire_time_fits_in_one_tick(tmp_path):
    # 1 deg at 10 Hz: one tick is 1 / 360 / 10 s = 277777.8 ns.
    path = tmp_path / "ok.json"
    path.write_text(json.dumps({"lidar": lidar_with(state={"fire_time_ns": [0, 1000, 277_777]})}))
    load_sensor_config(path)  # just inside
    message = refused(tmp_path, lidar_with(state={"fire_time_ns": [0, 1000, 277_778]}))
    assert "lidar.emitters.states[0].fire_time_ns[2] = 277778 is longer than one tick" in message
    assert "= 277778 ns" in message
    assert "fire-time limit" in message


def test_the_last_fire_time_of_a_solid_state_sensor_fits_in_one_scan(tmp_path):
    solid = {"scan_type": "solid_state", "hz": 10.0}
    path = tmp_path / "ok.json"
    path.write_text(json.dumps({"lidar": lidar_with(state={"fire_time_ns": [0, 1000, 100_000_000]}, **solid)}))
    assert load_sensor_config(path).columns == 1  # exactly one scan is allowed
    message = refused(tmp_path, lidar_with(state={"fire_time_ns": [0, 1000, 100_000_001]}, **solid))
    assert "fire_time_ns[2] = 100000001 is longer than one scan (1 / hz) on a solid-state sensor" in message


def test_no_more_distinct_channel_ids_than_channels(tmp_path):
    lidar = lidar_with(block={"number_of_channels": 4})
    lidar["emitters"]["states"].append({**STATE, "channel_id": [10, 13, 14]})  # 10..14: five distinct
    message = refused(tmp_path, lidar)
    assert "lidar.emitters.states use 5 distinct channel_id values: expected at most number_of_channels = 4" in message
    # Sparse vendor ids are fine as long as they are few enough.
    path = tmp_path / "ok.json"
    path.write_text(json.dumps({"lidar": lidar_with(state={"channel_id": [4294967295, 0, 77]})}))
    cfg = load_sensor_config(path)
    assert cfg.emitters is not None and cfg.emitters.states[0].channel_id.tolist() == [4294967295, 0, 77]


def test_a_range_id_below_range_count(tmp_path):
    message = refused(tmp_path, lidar_with(state={"range_id": [0, 1, 0]}))
    assert "lidar.emitters.states[0].range_id[1] = 1 is out of range: expected below range_count = 0" in message
    assert "a range_count of 0 counts as 1" in message


def test_a_bank_needs_lines(tmp_path):
    message = refused(tmp_path, lidar_with(state={"bank": [0, 0, 0]}))
    assert "lidar.emitters.states[0].bank[0] = 0 is out of range: expected below num_lines = 0" in message
    message = refused(tmp_path, lidar_with(block={"num_lines": 2}, state={"bank": [0, 1, 2]}))
    assert "states[0].bank[2] = 2 is out of range: expected below num_lines = 2" in message


def test_solid_state_lines_hold_every_emitter(tmp_path):
    solid = {"scan_type": "solid_state"}
    block = {"num_lines": 2, "num_rays_per_line": [3]}
    message = refused(tmp_path, lidar_with(block=block, state={"bank": [0, 1, 1]}, **solid))
    assert "lidar.emitters.num_rays_per_line has 1 entries: expected num_lines = 2" in message
    block = {"num_lines": 2, "num_rays_per_line": [1, 1]}
    message = refused(tmp_path, lidar_with(block=block, state={"bank": [0, 1, 1]}, **solid))
    assert "num_rays_per_line = [1, 1] adds up to 2: expected number_of_emitters = 3" in message


def test_a_solid_state_sensor_needs_a_detector_per_emitter(tmp_path):
    message = refused(
        tmp_path, lidar_with(block={"number_of_channels": 2}, state={"channel_id": [1, 1, 2]}, scan_type="solid_state")
    )
    assert "number_of_channels = 2 is below number_of_emitters = 3" in message


@pytest.mark.parametrize("hz", [0.1, 0.465])
def test_the_minimum_scan_rate(tmp_path, hz):
    message = refused(tmp_path, lidar_with(hz=hz))
    assert f"lidar.hz = {hz!r} is below the minimum scan rate of 0.466 Hz" in message


def test_an_unknown_scan_type(tmp_path):
    message = refused(tmp_path, lidar_with(scan_type="flash"))
    assert "lidar.scan_type = 'flash': expected one of rotary, solid_state" in message


def test_solid_state_needs_an_emitters_block(tmp_path):
    message = refused(tmp_path, {"scan_type": "solid_state"})
    assert "lidar.scan_type = 'solid_state' needs a lidar.emitters block" in message


@pytest.mark.parametrize(
    "key, index, value, allowed",
    [
        ("elevation_deg", 1, 95.0, ">= -90 and <= 90"),
        ("azimuth_deg", 2, "left", "a number"),
        ("fire_time_ns", 0, -1, ">= 0"),
        ("fire_time_ns", 1, 1.5, "an integer"),
        ("channel_id", 2, 2**32, "<= 4.29497e+09"),
    ],
)
def test_a_bad_element_names_its_index_value_and_range(tmp_path, key, index, value, allowed):
    values = list(STATE[key])
    values[index] = value
    message = refused(tmp_path, lidar_with(state={key: values}))
    assert f"lidar.emitters.states[0].{key}[{index}] = {value!r}" in message
    assert allowed in message


def test_unknown_keys_are_named(tmp_path):
    assert "lidar.emitters.focal_dist_m: unknown key" in refused(tmp_path, lidar_with(block={"focal_dist_m": 1}))
    assert "lidar.emitters.states[0].focal_slope: unknown key" in refused(
        tmp_path, lidar_with(state={"focal_slope": [0, 0, 0]})
    )


def test_the_roi_limits_are_both_set_or_both_400(tmp_path):
    message = refused(tmp_path, lidar_with(block={"min_azimuth_roi_deg": 10.0}))
    assert "min_azimuth_roi_deg = 10.0 and max_azimuth_roi_deg = 400.0: expected both 400" in message
    message = refused(tmp_path, lidar_with(block={"min_azimuth_roi_deg": 10.0, "max_azimuth_roi_deg": 380.0}))
    assert "lidar.emitters.max_azimuth_roi_deg = 380.0 is out of range: expected 0 to 360 deg, or 400" in message


def test_a_ring_table_and_an_emitters_block_are_two_patterns(tmp_path):
    message = refused(tmp_path, lidar_with(elevations_deg=[0.0, 1.0]))
    assert "lidar.elevations_deg and lidar.emitters both give the firing pattern" in message
    message = refused(tmp_path, lidar_with(lens_center_m=0.03))
    assert "lidar.lens_center_m = 0.03 with lidar.emitters: expected 0" in message


def test_a_pattern_too_large_to_allocate_is_refused_before_anything_is_built(tmp_path):
    state = {k: [0] * 66000 for k in STATE}  # 66000 emitters: too many for one state (in a 1 MiB file)
    message = refused(tmp_path, lidar_with(state=state))
    assert "expected a list of 1 to 65536 numbers" in message
    big = {k: (v * 342)[:1000] for k, v in STATE.items()}
    big["fire_time_ns"] = [0] * 1000
    big["channel_id"] = list(range(1000))
    message = refused(tmp_path, lidar_with(block={"rot_pattern_firing_res_deg": 0.1}, state=big))
    assert re.search(rf"3600 ticks x 1000 emitters = 3600000 cells per scan: expected at most {MAX_CELLS}", message)


def test_the_states_list_is_checked(tmp_path):
    message = refused(tmp_path, {"emitters": {"states": []}})
    assert "lidar.emitters.states = []: expected a list of 1 to 64 state objects" in message
    message = refused(tmp_path, {"emitters": {"states": [STATE, 3]}})
    assert "lidar.emitters.states[1] = 3: expected an object of per-emitter arrays" in message
    message = refused(tmp_path, {"emitters": {"states": [{k: v for k, v in STATE.items() if k != "channel_id"}]}})
    assert (
        "lidar.emitters.states[0].channel_id is missing: expected a list of number_of_emitters = 3 entries" in message
    )
