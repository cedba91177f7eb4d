"""lidar.jsonl rows and episode.json: values from the scan's arrays, strict JSON files."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest
from scipy.spatial.transform import Rotation
from test_outputs_synthetic import PERIOD_S, STAMP_NS, make_scan

from acres_lidar_ros.config.material_table import CLASS_NAMES, MATERIAL_NAMES
from acres_lidar_ros.errors import OutputError
from acres_lidar_ros.outputs.json_files import append_jsonl, write_json
from acres_lidar_ros.outputs.records import MODEL_PARTS, episode_dict, scan_row


def test_row_counts_timing_pose_and_weather():
    scan = make_scan(seed=30)
    row = scan_row(scan, delay_s=0.012, period_s=PERIOD_S, files=["lidar/scan_1.ply"])
    valid = scan.returns.valid
    assert row["sample_time_s"] == pytest.approx(STAMP_NS / 1e9, abs=1e-6)
    assert row["available_time_s"] - row["sample_time_s"] == pytest.approx(0.012, abs=1e-6)
    assert row["stamp_ns"] == STAMP_NS and row["scan_index"] == 7 and row["frame_id"] == "lidar"
    assert row["points"] == sum(int(v) for v in valid.reshape(-1))
    assert row["beams"] == scan.columns * scan.rings
    assert row["beams_with_return"] == sum(1 for beam in valid if beam.any())
    for counts, ids, names in (
        (row["class_counts"], scan.returns.class_id, CLASS_NAMES),
        (row["material_counts"], scan.returns.material_id, MATERIAL_NAMES),
    ):
        assert list(counts) == list(names)
        for number, name in enumerate(names):
            assert counts[name] == int(np.sum((ids == number) & valid)), name
        assert sum(counts.values()) == row["points"]
    # The fixture's sweep starts at column 3 (dt = -T) and ends at column 2 (dt = -T / columns).
    assert row["sweep"]["period_s"] == PERIOD_S
    assert row["sweep"]["first_firing_time_s"] == pytest.approx(STAMP_NS / 1e9 - PERIOD_S, abs=1e-6)
    assert row["sweep"]["last_firing_time_s"] == pytest.approx(STAMP_NS / 1e9 - PERIOD_S / scan.columns, abs=1e-6)
    # Pose at the last firing column (column 2): yaw 0.4 + 0.5 dt, position 10 + 2 dt, -3 + 0.5 dt, 2.039.
    dt = -PERIOD_S / scan.columns
    np.testing.assert_allclose(row["sensor_pose"]["position_m"], [10 + 2 * dt, -3 + 0.5 * dt, 2.039])
    yaw = 0.4 + 0.5 * dt
    np.testing.assert_allclose(
        row["sensor_pose"]["quaternion_xyzw"], [0, 0, math.sin(yaw / 2), math.cos(yaw / 2)], atol=1e-12
    )
    assert row["weather"] == {"rain_mm_per_h": 2.5, "visibility_m": 800.0}
    assert row["files"] == ["lidar/scan_1.ply"]


def test_row_takes_a_given_stamp_pose_and_maps_clear_air_to_null(tmp_path):
    scan = make_scan(seed=31)
    scan = type(scan)(**{**scan.__dict__, "weather": {"rain_mm_per_h": 0.0, "visibility_m": math.inf}})
    T = np.eye(4)
    T[:3, :3] = Rotation.from_euler("xyz", [0.1, -0.2, 3.0]).as_matrix()
    T[:3, 3] = [1.0, 2.0, 3.0]
    row = scan_row(scan, delay_s=0.05, period_s=PERIOD_S, T_world_sensor_stamp=T)
    q = np.array(row["sensor_pose"]["quaternion_xyzw"])
    np.testing.assert_allclose(Rotation.from_quat(q).as_matrix(), T[:3, :3], atol=1e-12)
    assert q[3] >= 0
    assert row["weather"] == {"rain_mm_per_h": 0.0, "visibility_m": None}
    path = append_jsonl(tmp_path / "lidar.jsonl", row)
    append_jsonl(path, scan_row(make_scan(seed=32), delay_s=0.05, period_s=PERIOD_S))
    lines = path.read_text().splitlines()
    assert len(lines) == 2
    assert json.loads(lines[0]) == row
    assert json.loads(lines[1])["weather"]["visibility_m"] == 800.0


def test_row_rejects_a_class_outside_the_table():
    scan = make_scan(seed=33)
    class_id = scan.returns.class_id.copy()
    class_id[1, 0] = 99  # beam 1 has one return
    bad = type(scan)(
        **{**scan.__dict__, "returns": type(scan.returns)(**{**scan.returns.__dict__, "class_id": class_id})}
    )
    with pytest.raises(OutputError, match="class number 99"):
        scan_row(bad, delay_s=0.0, period_s=PERIOD_S)


def _material_table():
    n = len(MATERIAL_NAMES)
    reflectivity = np.linspace(0.02, 0.48, n)
    return SimpleNamespace(
        names=MATERIAL_NAMES, reflectivity=reflectivity, specular=np.zeros(n),
        specular_width_rad=np.full(n, np.radians(8.0)), transmission=np.zeros(n), wet_darkening=np.zeros(n),
        incidence_exponent=np.ones(n), micro_slope_rad=np.full(n, np.radians(3.3)), reflectivity_sd=np.zeros(n),
        roughness_m=np.full(n, 0.0007),
    )  # fmt: skip


def test_episode_tables_parts_and_counters(tmp_path):
    table = _material_table()
    episode = episode_dict({"lidar_busy": 3, "scans": 120}, material_table=table, extra={"seed": 5})
    assert [c["name"] for c in episode["classes"]] == list(CLASS_NAMES)
    assert [c["number"] for c in episode["classes"]] == list(range(len(CLASS_NAMES)))
    by_name = {c["name"]: c for c in episode["classes"]}
    assert by_name["corn"]["foliage"] and not by_name["building"]["foliage"]
    assert by_name["tree_trunk"]["material"] == "bark" and by_name["ground"]["material"] is None
    assert [m["name"] for m in episode["materials"]] == list(MATERIAL_NAMES)
    assert episode["materials"][4]["reflectivity"] == pytest.approx(table.reflectivity[4])
    assert episode["materials"][4]["specular_width_deg"] == pytest.approx(8.0)
    assert episode["materials"][4]["micro_slope_deg"] == pytest.approx(3.3)
    assert episode["model"] == MODEL_PARTS and all(len(text) > 40 for text in MODEL_PARTS.values())
    assert episode["counters"] == {"lidar_busy": 3, "scans": 120} and episode["seed"] == 5
    path = write_json(tmp_path / "episode.json", episode)
    assert json.loads(path.read_text()) == episode
    with pytest.raises(OutputError, match="episode.json"):
        write_json(path, episode)


def test_episode_without_material_parameters_lists_names():
    episode = episode_dict({"lidar_busy": 0})
    assert episode["materials"][14] == {"number": 14, "name": "vehicle"}


@pytest.mark.parametrize(("counters", "extra", "match"), [({"lidar_busy": 1.5}, None, "integers"),
                                                          ({"lidar_busy": 0}, {"classes": []}, "clash")])  # fmt: skip
def test_episode_rejects_bad_input(counters, extra, match):
    with pytest.raises(OutputError, match=match):
        episode_dict(counters, extra=extra)


def test_counters_as_keywords_and_row_without_period():
    assert episode_dict({"scans": 2}, lidar_busy=1)["counters"] == {"scans": 2, "lidar_busy": 1}
    assert episode_dict(scans=3)["counters"] == {"scans": 3}
    assert scan_row(make_scan(seed=34), delay_s=0.05)["sweep"]["period_s"] is None
