"""The dataset file's outputs, layouts and the worlds it draws per shard (no Ray here)."""

from __future__ import annotations

import json

import pytest

from acres_lidar_ros.config.dataset_file import FARM_CROP_FIELDS, load_dataset
from acres_lidar_ros.errors import ConfigError

DRIVES = {"tours": ["default"], "seeds": [0], "sensors": ["polaris"], "point_types": ["XYZI"]}


def write(tmp_path, **top):
    path = tmp_path / "d.json"
    path.write_text(json.dumps({"drives": DRIVES, **top}))
    return path


def test_record_outputs_are_keys_and_every_shard_carries_them(tmp_path):
    path = write(tmp_path, labels=True, truth=True, files="both", layouts=["semantic_kitti", "kitti_objects"])
    (shard,) = load_dataset(path).shards
    assert (shard.labels, shard.truth, shard.files, shard.layouts) == (
        True,
        True,
        "both",
        ("semantic_kitti", "kitti_objects"),
    )
    assert shard.farm_seed == 0 and shard.shard_id.startswith("tour-f0-s0-clear-polaris-XYZI-")


def test_farm_seeds_take_a_list_or_first_and_count(tmp_path):
    path = write(tmp_path, drives=dict(DRIVES, farm_seeds={"first": 3, "count": 4}))
    shards = load_dataset(path).shards
    assert [s.farm_seed for s in shards] == [3, 4, 5, 6]
    assert len({s.shard_id for s in shards}) == 4


@pytest.mark.parametrize(
    ("top", "message"),
    [
        ({"packets": True}, "packets = True: allowed: pcap, bag (record --packets; udp sends live) or null"),
        ({"packets": "udp"}, "packets = 'udp': allowed: pcap, bag"),
        ({"layouts": ["semantic_kitti"]}, "labels = False: layouts semantic_kitti needs the labels"),
        (
            {"layouts": ["nuscenes"]},
            "layouts = ['nuscenes']: expected a list of distinct layouts; allowed: semantic_kitti",
        ),
        ({"labels": True, "layouts": ["semantic_kitti"], "files": "ply"}, "files = 'ply': layouts ['semantic_kitti']"),
        ({"labels": "yes"}, "labels = 'yes': expected true or false"),
        (
            {"vary": {"crop_growth": {"uniform": [0.5, 1.5]}}},
            "vary.crop_growth.uniform[1] = 1.5: expected a number from 0 to 1",
        ),
        (
            {"vary": {"rain_mm_per_h": {"gauss": [1, 2]}}},
            "vary.rain_mm_per_h = {'gauss': [1, 2]}: expected a number, {\"uniform\"",
        ),
        ({"vary": {"vehicles": {"count": 99}}}, "vary.vehicles.count = 99: expected an integer from 0 to 50"),
        ({"vary": {"vehicles": {"count": 1, "colour": "red"}}}, "vary.vehicles.colour: unknown key; allowed: count"),
        ({"vary": {"fog": 1}}, "vary.fog: unknown key; allowed: seed, crop_growth"),
        ({"boxes": "missing.json"}, "boxes = 'missing.json': expected the path of a box-tracks file that exists"),
    ],
)
def test_bad_keys_name_the_key_the_value_and_what_is_allowed(tmp_path, top, message):
    with pytest.raises(ConfigError) as caught:
        load_dataset(write(tmp_path, **top))
    assert message in str(caught.value) and str(tmp_path / "d.json") in str(caught.value)


VARY = {
    "seed": 11,
    "crop_growth": {"uniform": [0.2, 1.0]},
    "harvested": {"choice": [0, 0.5]},
    "soil_wetness": {"uniform": [-0.2, 0.4]},
    "rain_mm_per_h": {"choice": [0, 0, 25]},
    "vehicles": {"count": {"integers": [1, 3]}, "speed_m_s": {"uniform": [0, 6]}, "distance_m": 15},
}


def test_each_shard_draws_its_world_within_the_distributions(tmp_path):
    path = write(tmp_path, drives=dict(DRIVES, farm_seeds={"first": 0, "count": 12}), vary=VARY)
    shards = load_dataset(path).shards
    for s in shards:
        d = s.drawn
        assert set(d["crop_growth"]) == set(FARM_CROP_FIELDS) and all(
            0.2 <= g <= 1.0 for g in d["crop_growth"].values()
        )
        assert set(d["harvested"].values()) <= {0.0, 0.5} and -0.2 <= d["soil_wetness"] <= 0.4
        assert s.rain_mm_per_h == d["rain_mm_per_h"] in (0.0, 25.0) and s.weather == "drawn"
        assert 1 <= len(d["vehicles"]) <= 3 and all(v["distance_m"] == 15.0 for v in d["vehicles"])
        assert [v["object_id"] for v in d["vehicles"]] == list(range(1, len(d["vehicles"]) + 1))
    assert {s.rain_mm_per_h for s in shards} == {0.0, 25.0}  # rain in some
    assert len({json.dumps(s.drawn, sort_keys=True) for s in shards}) == 12


def test_a_shards_draw_is_its_own_and_reproducible(tmp_path):
    few = load_dataset(write(tmp_path, drives=dict(DRIVES, farm_seeds=[0, 1]), vary=VARY)).shards
    (tmp_path / "more").mkdir()
    more = load_dataset(write(tmp_path / "more", drives=dict(DRIVES, farm_seeds=[5, 1, 0]), vary=VARY)).shards
    by_farm = {s.farm_seed: s for s in more}
    for s in few:  # another dataset with the same shard draws the same world for it
        assert by_farm[s.farm_seed].drawn == s.drawn and by_farm[s.farm_seed].shard_id == s.shard_id
    reseeded = load_dataset(write(tmp_path, drives=dict(DRIVES, farm_seeds=[0, 1]), vary=dict(VARY, seed=12))).shards
    assert [s.drawn for s in reseeded] != [s.drawn for s in few]
