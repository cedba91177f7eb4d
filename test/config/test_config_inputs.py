"""Sensors files and self-return tables a fuzzer found wrong: every one refused by name."""

from __future__ import annotations

import json
import os
import re

import numpy as np
import pytest

from acres_lidar_ros.body.self_returns import expected_size_bytes, load_self_table
from acres_lidar_ros.config.input_files import MAX_JSON_DEPTH
from acres_lidar_ros.config.schema import LIDAR_PARAMS, MATERIAL_PARAMS
from acres_lidar_ros.config.sensors import MAX_EXTENDS_DEPTH, load_sensor_config
from acres_lidar_ros.config.share_paths import config_dir
from acres_lidar_ros.errors import ConfigError


def write(tmp_path, lidar, name="s.json", **top):
    path = tmp_path / name
    path.write_text(json.dumps({"lidar": lidar, **top}))
    return path


def nest(key, value):
    if "." in key:
        a, b = key.split(".")
        return {a: {b: value}}
    return {key: value}


def test_bytes_that_are_not_utf8_are_refused(tmp_path):
    path = tmp_path / "s.json"
    path.write_bytes(b'{"lidar": {"frame_id": "l\xe9"}}')  # latin-1, not UTF-8
    with pytest.raises(ConfigError, match=r"s.json': byte 0xe9 at offset 25 is not UTF-8"):
        load_sensor_config(path)


def test_nesting_beyond_the_limit_is_refused_without_recursion_error(tmp_path):
    path = tmp_path / "s.json"
    path.write_text('{"lidar": {"_c": ' + "[" * 2000 + "]" * 2000 + "}}")
    with pytest.raises(ConfigError, match=rf"nest 2002 levels deep .*the limit is {MAX_JSON_DEPTH}"):
        load_sensor_config(path)


def test_an_extends_chain_beyond_the_limit_is_refused(tmp_path):
    (tmp_path / "f0.json").write_text(json.dumps({"extends": str(config_dir() / "sensors.json"), "lidar": {}}))
    for i in range(1, 40):
        (tmp_path / f"f{i}.json").write_text(json.dumps({"extends": f"f{i - 1}.json", "lidar": {"hz": 5 + i % 3}}))
    with pytest.raises(ConfigError, match=rf"the extends chain from .*f39.json' is longer than {MAX_EXTENDS_DEPTH}"):
        load_sensor_config(tmp_path / "f39.json")
    assert load_sensor_config(tmp_path / f"f{MAX_EXTENDS_DEPTH - 2}.json").hz == 5 + (MAX_EXTENDS_DEPTH - 2) % 3


@pytest.mark.parametrize("digits", [25, 400, 4400])
def test_huge_integers_are_refused_naming_the_key(tmp_path, digits):
    path = tmp_path / "s.json"
    path.write_text('{"lidar": {"hz": ' + "9" * digits + "}}")
    with pytest.raises(ConfigError, match=r"lidar\.hz = 9+(\.\.\.\(\d+ digits\))?: expected a number >= 1 and <= 120"):
        load_sensor_config(path)
    path.write_text('{"lidar": {"radiometry": {"ambient_counts": -' + "9" * digits + "}}}")
    with pytest.raises(ConfigError, match=r"lidar\.radiometry\.ambient_counts = -9+"):
        load_sensor_config(path)


def test_nan_and_infinity_literals_are_refused_naming_the_key(tmp_path):
    path = tmp_path / "s.json"
    path.write_text('{"lidar": {"std_m": NaN}}')
    with pytest.raises(ConfigError, match=r"lidar\.std_m = NaN: expected a number >= 0 and <= 1"):
        load_sensor_config(path)
    path.write_text('{"lidar": {"elevations_deg": [0, -Infinity]}}')
    with pytest.raises(ConfigError, match=r"lidar\.elevations_deg\[1\] = -Infinity: expected"):
        load_sensor_config(path)
    path.write_text('{"lidar": {"range_m": 1e400}}')
    with pytest.raises(ConfigError, match=r"lidar\.range_m = inf: expected"):
        load_sensor_config(path)


@pytest.mark.parametrize("frame", ["lidar\n", "lidar\r", "lid ar", "", "1lidar", "lidar\x00"])
def test_frame_ids_must_match_whole(tmp_path, frame):
    with pytest.raises(ConfigError, match=r"lidar\.frame_id = .*: expected a frame name"):
        load_sensor_config(write(tmp_path, {"frame_id": frame}))


NOT_NULLABLE = [p.name for p in LIDAR_PARAMS if not p.nullable]


@pytest.mark.parametrize("key", NOT_NULLABLE)
def test_null_is_an_error_for_every_key_without_a_documented_null(tmp_path, key):
    with pytest.raises(ConfigError, match=rf"lidar\.{re.escape(key)} = null: expected .*null is allowed only where"):
        load_sensor_config(write(tmp_path, nest(key, None)))


@pytest.mark.parametrize("key", [p.name for p in MATERIAL_PARAMS])
def test_null_is_an_error_in_materials(tmp_path, key):
    with pytest.raises(ConfigError, match=rf"lidar\.materials\.water\.{key} = null: expected"):
        load_sensor_config(write(tmp_path, {"materials": {"water": {key: None}}}))


def test_documented_nulls_unset_the_base_files_tables(tmp_path):
    overlay = tmp_path / "o.json"
    overlay.write_text(
        json.dumps(
            {
                "extends": str(config_dir() / "sensors_polaris.json"),
                "lidar": {
                    "elevations_deg": None,
                    "azimuth_offsets_deg": None,
                    "radiometry": {"ring_range_at_10pct_m": None},
                    "self_returns": None,
                    "rings": 4,
                },
            }
        )
    )
    config = load_sensor_config(overlay)
    assert config.rings == 4 and config.self_returns is None
    np.testing.assert_allclose(np.rad2deg(config.elevations_rad), [-20, -10, 0, 10])  # equal steps, spec "Rings"
    assert [p.name for p in LIDAR_PARAMS if p.nullable] == [
        "elevations_deg",
        "azimuth_offsets_deg",
        "ranges_min_m",  # null: no range regions
        "ranges_max_m",
        "self_returns",
        "radiometry.ring_range_at_10pct_m",
        "radiometry.max_range_m",  # null: unset, back to the spec's detection keys
        "radiometry.reflectance_at_max_range",
    ]


@pytest.mark.parametrize("name", ["", ".", "..", "tables/", "a/.", "a\x00b"])
def test_self_returns_must_name_a_file(tmp_path, name):
    with pytest.raises(ConfigError, match=r"lidar\.self_returns = .*: expected a file name relative to the sensors"):
        load_sensor_config(write(tmp_path, {"self_returns": name}))


def test_self_returns_at_dev_zero_or_a_fifo_is_refused_before_reading(tmp_path):
    columns, rings = 4, 2
    with pytest.raises(ConfigError, match=r"self-return table '/dev/zero' is a character device: expected a regular"):
        load_self_table("/dev/zero", columns, rings)
    fifo = tmp_path / "table.f32"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match=r"table.f32' is a FIFO \(named pipe\): expected a regular file"):
        load_self_table(fifo, columns, rings)
    short = tmp_path / "short.f32"
    short.write_bytes(b"\0" * (expected_size_bytes(columns, rings) - 4))
    with pytest.raises(ConfigError, match=r"short.f32' has 124 bytes: expected 128 bytes \(4 planes x 4 columns"):
        load_self_table(short, columns, rings)


def test_a_sensors_file_that_is_a_fifo_or_a_directory_is_refused(tmp_path):
    fifo = tmp_path / "s.json"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match=r"s.json' is a FIFO \(named pipe\): expected a regular file"):
        load_sensor_config(fifo)
    with pytest.raises(ConfigError, match=r"is a directory: expected a regular file"):
        load_sensor_config(write(tmp_path, {}, name="o.json", extends="."))


def test_no_silent_coercion_of_types(tmp_path):
    with pytest.raises(ConfigError, match=r"lidar\.columns = 1800\.5: expected an integer"):
        load_sensor_config(write(tmp_path, {"columns": 1800.5}))
    with pytest.raises(ConfigError, match=r"lidar\.enabled = 1: expected true or false"):
        load_sensor_config(write(tmp_path, {"enabled": 1}))
    with pytest.raises(ConfigError, match=r"lidar\.sub_rays = true: expected one of 1, 7|lidar\.sub_rays = True"):
        load_sensor_config(write(tmp_path, {"sub_rays": True}))


def test_a_huge_list_is_named_briefly(tmp_path):
    with pytest.raises(ConfigError, match=r"lidar\.rpy_deg has 100000 values: expected a list of 3 values"):
        load_sensor_config(write(tmp_path, {"rpy_deg": [0.0] * 100000}))
    with pytest.raises(ConfigError) as info:
        load_sensor_config(write(tmp_path, {"frame_id": "x" * 100000 + " "}))
    assert len(str(info.value)) < 300


def test_the_readme_states_the_sensors_file_limits(repo_root):
    from acres_lidar_ros.config.sensors import limits_markdown

    readme = (repo_root / "README.md").read_text()
    block = readme.split("<!-- sensors-limits-start -->\n", 1)[1].split("\n<!-- sensors-limits-end -->", 1)[0]
    assert block == limits_markdown()


def test_urdf_and_tum_files_are_read_only_when_regular(tmp_path):
    from acres_lidar_ros.body.urdf import load_urdf
    from acres_lidar_ros.errors import OutputError
    from acres_lidar_ros.outputs.tum import read_tum

    with pytest.raises(ConfigError, match=r"URDF '/dev/zero' is a character device: expected a regular file"):
        load_urdf("/dev/zero")
    fifo = tmp_path / "robot.urdf"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match=r"robot.urdf' is a FIFO"):
        load_urdf(fifo)
    with pytest.raises(OutputError, match=r"TUM file '/dev/zero' is a character device"):
        read_tum("/dev/zero")
    latin = tmp_path / "t.tum"
    latin.write_bytes(b"# caf\xe9\n0 0 0 0 0 0 0 1\n")
    with pytest.raises(OutputError, match=r"t.tum: byte 0xe9 at offset 5 is not UTF-8"):
        read_tum(latin)
