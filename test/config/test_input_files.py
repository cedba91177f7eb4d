"""The reader every input file goes through: regular files only, size limits, JSON limits."""

from __future__ import annotations

import os
import threading

import pytest

from acres_lidar_ros.config.input_files import (
    MAX_JSON_DEPTH,
    InvalidNumber,
    json_depth,
    load_json_file,
    parse_json,
    read_regular_file,
)
from acres_lidar_ros.errors import ConfigError, SceneError


@pytest.fixture
def fifo(tmp_path):
    """A FIFO with a guard: should a reader ever open it blocking, a writer opened after 5 s
    releases it, so a regression fails the test instead of hanging the suite."""
    path = tmp_path / "pipe.json"
    os.mkfifo(path)
    stop = threading.Event()

    def release() -> None:
        if not stop.wait(5):
            os.close(os.open(path, os.O_RDWR | os.O_NONBLOCK))

    guard = threading.Thread(target=release, daemon=True)
    guard.start()
    yield path
    stop.set()
    guard.join(timeout=5)


def test_a_fifo_is_refused_without_reading(fifo):
    with pytest.raises(ConfigError, match=r"pipe.json' is a FIFO \(named pipe\): expected a regular file"):
        read_regular_file(fifo, "sensors file", 1 << 20)


def test_a_device_is_refused_without_reading():
    with pytest.raises(SceneError, match=r"'/dev/zero' is a character device: expected a regular file"):
        read_regular_file("/dev/zero", "scene file", 1 << 20, SceneError)


def test_a_directory_and_a_missing_file_are_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"is a directory: expected a regular file"):
        read_regular_file(tmp_path, "sensors file", 1 << 20)
    with pytest.raises(ConfigError, match=r"nothing.json' cannot be read: No such file or directory"):
        read_regular_file(tmp_path / "nothing.json", "sensors file", 1 << 20)
    with pytest.raises(ConfigError, match=r"cannot be read"):
        read_regular_file("bad\0name", "sensors file", 1 << 20)


def test_sizes_are_checked_before_reading(tmp_path):
    path = tmp_path / "big.json"
    path.write_bytes(b" " * 1001)
    with pytest.raises(ConfigError, match=r"big.json' has 1001 bytes: the limit is 1000 bytes"):
        read_regular_file(path, "sensors file", 1000)
    with pytest.raises(ConfigError, match=r"has 1001 bytes: expected 1000 bytes"):
        read_regular_file(path, "table", 2000, expected_bytes=1000)
    assert read_regular_file(path, "sensors file", 1001) == b" " * 1001


def test_bytes_that_are_not_utf8_name_their_offset():
    with pytest.raises(ConfigError, match=r"byte 0xff at offset 9 is not UTF-8: expected a UTF-8 text file"):
        parse_json(b'{"lidar":\xff}', "sensors file", "s.json")


def test_nesting_is_limited_before_parsing():
    deep = b"[" * 5000 + b"]" * 5000  # Python's json would raise RecursionError near 1000
    with pytest.raises(
        ConfigError, match=rf"nest 5000 levels deep \(at character 4999\): the limit is {MAX_JSON_DEPTH}"
    ):
        parse_json(deep, "sensors file", "s.json")
    ok = b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH
    assert parse_json(ok, "sensors file", "s.json") is not None


def test_brackets_inside_strings_do_not_count():
    assert json_depth('{"a": "[[[[{{{{", "b": ["\\"[["]}')[0] == 2
    assert json_depth("") == (0, -1)
    deep = '{"é[": ' + "[" * 70 + "]" * 70 + "}"
    assert json_depth(deep) == (71, 76)  # characters, strings included


def test_duplicate_keys_are_refused():
    with pytest.raises(ConfigError, match=r"key 'hz' appears twice in one object: expected each key once"):
        parse_json(b'{"lidar": {"hz": 10, "hz": 20}}', "sensors file", "s.json")


@pytest.mark.parametrize(
    "literal, shown",
    [
        ("NaN", "NaN"),
        ("-Infinity", "-Infinity"),
        ("9223372036854775808", "9223372036854775808"),  # int64 max + 1
        ("1" * 5000, "111111111111...(5000 digits)"),  # beyond Python's 4300-digit conversion limit
    ],
)
def test_numbers_that_are_not_finite_64_bit_values_load_as_invalid(literal, shown):
    value = parse_json(f'{{"x": [{literal}]}}'.encode(), "sensors file", "s.json")["x"][0]
    assert isinstance(value, InvalidNumber)
    assert not isinstance(value, (int, float))
    assert repr(value) == shown


def test_int64_limits_are_numbers():
    data = parse_json(b"[9223372036854775807, -9223372036854775808, 1.5e308, 1e400]", "f", "f.json")
    assert data == [2**63 - 1, -(2**63), 1.5e308, float("inf")]  # inf: refused by every validator


def test_invalid_json_is_named(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text("{ not json")
    with pytest.raises(SceneError, match=r"box tracks '.*bad.json' is not valid JSON: Expecting property name"):
        load_json_file(path, "box tracks", 1 << 20, SceneError)
