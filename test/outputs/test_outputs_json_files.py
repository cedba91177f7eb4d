"""JSON text and files: strict JSON only, whole files, one row a line."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from acres_lidar_ros.errors import OutputError
from acres_lidar_ros.outputs.json_files import append_jsonl, json_key_lines, json_line, json_text, jsonable, write_json


def test_jsonable_gives_plain_json_data():
    data = {
        1: (np.float32(0.5), np.int64(7), np.bool_(True)),
        "array": np.arange(3, dtype=np.uint16),
        "path": Path("/tmp/x.f32"),
        "clear_air_m": math.inf,
        "nested": {"nan": np.float64("nan"), "minus": -math.inf},
    }
    plain = jsonable(data)
    assert plain == {
        "1": [0.5, 7, True],
        "array": [0, 1, 2],
        "path": "/tmp/x.f32",
        "clear_air_m": "inf",
        "nested": {"nan": "nan", "minus": "-inf"},
    }
    assert type(plain["1"][1]) is int and type(plain["1"][2]) is bool
    assert json.loads(json_text(plain)) == plain


@pytest.mark.parametrize("bad", [{"x": math.nan}, {"x": math.inf}, {"x": object()}, {"x": np.float32(1.0)}])
def test_text_lines_and_key_lines_refuse_what_is_not_strict_json(bad):
    for encode in (json_text, json_line, json_key_lines):
        with pytest.raises(OutputError, match="strict JSON"):
            encode(bad)


def test_jsonl_refuses_nan_and_writes_nothing(tmp_path):
    path = tmp_path / "never.jsonl"
    with pytest.raises(OutputError, match="strict JSON"):
        append_jsonl(path, {"x": float("nan")})
    assert not path.exists()


def test_jsonl_rows_are_appended_one_a_line(tmp_path):
    path = tmp_path / "lidar.jsonl"
    append_jsonl(path, {"scan": 0, "points": [1, 2]})
    append_jsonl(path, {"scan": 1})
    assert path.read_text() == '{"scan":0,"points":[1,2]}\n{"scan":1}\n'
    with pytest.raises(OutputError, match="nowhere"):
        append_jsonl(tmp_path / "nowhere" / "lidar.jsonl", {"scan": 0})


def test_key_lines_put_one_key_a_line_and_read_back():
    stats = {"urdf": "polaris.urdf", "cells": 57600, "per_ring": [0, 3, 1], "nearest_m": 0.26, "none": None}
    text = json_key_lines(stats)
    assert text.splitlines() == [
        "{",
        '  "urdf": "polaris.urdf",',
        '  "cells": 57600,',
        '  "per_ring": [0, 3, 1],',
        '  "nearest_m": 0.26,',
        '  "none": null',
        "}",
    ]
    assert json.loads(text) == stats


def test_write_json_is_indented_whole_and_refuses_to_overwrite(tmp_path):
    path = write_json(tmp_path / "config.json", {"seed": 3, "options": {"noise": True}})
    assert path.read_text() == '{\n  "seed": 3,\n  "options": {\n    "noise": true\n  }\n}\n'
    with pytest.raises(OutputError, match="config.json.*exists"):
        write_json(path, {"seed": 4})
    with pytest.raises(OutputError, match=r"other.json: not strict JSON"):
        write_json(tmp_path / "other.json", {"visibility_m": math.inf})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json"]
    write_json(path, {"seed": 4}, overwrite=True)
    assert json.loads(path.read_text()) == {"seed": 4}
