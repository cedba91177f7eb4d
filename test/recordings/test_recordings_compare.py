"""``acres-lidar compare``: the laws of a comparison, on drives over flat ground (``recording_support``).

* a run compared with itself: every difference 0, every beam agrees, body mask IoU 1;
* a known shift (+0.3 deg on one ring's elevation) shows as 0.3 deg on that ring and nowhere else.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from recording_support import ground_drive, labelled_cloud, write_rosbag2, xyzirt_cloud

from acres_lidar_ros.apps.cli import main
from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.recordings.compare_runs import compare_recordings
from acres_lidar_ros.recordings.recorded_scans import beam_table, read_recording

SHIFTED_RING = 20
SHIFT_DEG = 0.3


@pytest.fixture(scope="module")
def config():
    return load_sensor_config("polaris").with_overrides({"frame_id": "rslidar"})


@pytest.fixture(scope="module")
def bag_a(tmp_path_factory, config):
    drive = ground_drive(config, body=True)
    path = tmp_path_factory.mktemp("a") / "bag"
    return write_rosbag2(path, config, drive, [labelled_cloud(config, drive, k) for k in range(3)])


def test_run_with_itself_scores_zero(config, bag_a):
    a = read_recording([bag_a], config, poses=None)
    result = compare_recordings(a, a, beam_table(config))
    assert result["scans"] == 3 and result["agree_share"] == 1.0 and result["body_mask_iou"] == 1.0
    assert result["body_mask_cells"]["a"] == 100 * int(np.sum(np.rad2deg(config.elevations_rad) < -45))
    bt = result["beam_table"]
    assert bt["worst_elevation"]["abs_deg"] == 0.0 and bt["worst_azimuth_offset"]["abs_deg"] == 0.0
    assert result["return_rate_per_ring_percent"]["mean_abs_difference_points"] == 0.0
    assert result["points_per_scan"]["relative_difference"] == 0.0
    rows = result["range_difference_b_minus_a"]
    assert {r["class"] for r in rows} == {"ground"}
    assert all(r["median_m"] == 0.0 and r["within_0_1_m"] == 1.0 for r in rows)


def test_elevation_shift_shows_on_its_ring_only(tmp_path, config, bag_a):
    elevations = np.rad2deg(config.elevations_rad)
    elevations[SHIFTED_RING] += SHIFT_DEG
    shifted = config.with_overrides({"elevations_deg": elevations.tolist()})
    drive_b = ground_drive(shifted, body=True)
    bag_b = write_rosbag2(tmp_path / "b", shifted, drive_b, [xyzirt_cloud(shifted, drive_b, k) for k in range(3)])
    table = beam_table(config)  # both read with the nominal table: the fit uses the points only
    a = read_recording([bag_a], config, poses=None)
    b = read_recording([bag_b], config, poses=None)
    result = compare_recordings(a, b, table)
    d_el = np.array([np.nan if v is None else v for v in result["beam_table"]["elevation_difference_deg"]])
    d_az = np.array([np.nan if v is None else v for v in result["beam_table"]["azimuth_offset_difference_deg"]])
    assert d_el[SHIFTED_RING] == pytest.approx(SHIFT_DEG, abs=1e-6)
    others = np.delete(d_el, SHIFTED_RING)
    assert np.isfinite(others).sum() >= 16  # the rings that see the ground
    np.testing.assert_allclose(others[np.isfinite(others)], 0.0, atol=1e-7)
    np.testing.assert_allclose(d_az[np.isfinite(d_az)], 0.0, atol=1e-7)
    assert result["beam_table"]["worst_elevation"]["ring"] == SHIFTED_RING
    assert result["body_mask_iou"] == 1.0


def test_compare_command_writes_json_and_markdown(tmp_path, bag_a, capsys):
    out = tmp_path / "cmp"
    sensor = tmp_path / "sensors.json"
    sensor.write_text(
        json.dumps({"extends": str(load_sensor_config("polaris").source), "lidar": {"frame_id": "rslidar"}})
    )
    assert main(["compare", str(bag_a), str(bag_a), "--out", str(out), "--sensor", str(sensor)]) == 0
    result = json.loads((out / "compare.json").read_text())
    assert result["agree_share"] == 1.0 and result["a"]["path"] == str(bag_a)
    text = (out / "compare.md").read_text()
    assert "| Beams with a return, rings at or below -8 deg | " in text
    assert "| ground, lower rings (" in text and "100.0 % of the beams agree" in text
    assert "3 scans compared, 100.0 % of the beams agree, body mask IoU 1.000" in capsys.readouterr().out
