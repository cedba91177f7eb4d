"""Fuzzed inputs: sensors files, scene files, box tracks, ROS parameters, CLI options.

Each example starts from a valid input and mutates it: a value replaced, a key added or removed,
a value nested deep, or bytes inserted into the file. The loader must either accept the input or
raise the project's error (``AcresLidarError``) whose message names the file and the key; any
other exception fails the test. Mutations that can never be valid (``NaN``, an integer beyond
int64, ``null`` where the schema has none, an unknown key, nesting beyond the limit, bytes that
are not UTF-8) must be refused: accepting one is a failure too.

``ACRES_FUZZ_EXAMPLES=N`` sets the examples per input kind (default 200, derandomised so CI is
reproducible; with the variable set, the examples are random). ``ACRES_FUZZ_REPORT=FILE``
writes the cases run, the refusals and the acceptances per kind as JSON.
"""

from __future__ import annotations

import copy
import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acres_lidar_ros.apps import cli
from acres_lidar_ros.config.input_files import MAX_JSON_DEPTH
from acres_lidar_ros.config.schema import LIDAR_PARAM
from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.config.share_paths import config_dir
from acres_lidar_ros.errors import AcresLidarError
from acres_lidar_ros.ros.params import (
    NODE_PARAM,
    by_name,
    check_changes,
    declarations,
    node_values,
    option_values,
    startup_overrides,
)
from acres_lidar_ros.scene.box_tracks import load_box_tracks
from acres_lidar_ros.scene.scene_file import load_scene

EXAMPLES = int(os.environ.get("ACRES_FUZZ_EXAMPLES", "200"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize="ACRES_FUZZ_EXAMPLES" not in os.environ,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)
STATS: dict[str, Counter] = {}


@pytest.fixture(scope="module", autouse=True)
def report():
    yield
    target = os.environ.get("ACRES_FUZZ_REPORT")
    if target:
        Path(target).write_text(json.dumps({k: dict(v) for k, v in STATS.items()}, indent=2, sort_keys=True))


class Raw:
    """A literal written into the JSON text as is (``NaN``, an integer of 5000 digits)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.marker = f"\u0001RAW{abs(hash(text))}\u0001"


NEVER_VALID = [Raw("NaN"), Raw("Infinity"), Raw("-Infinity"), Raw("1" + "0" * 30), Raw("-" + "9" * 5000)]
STRINGS = [
    "",
    ".",
    "..",
    "lidar\n",
    "lidar",
    "/dev/zero",
    "pipe.npy",
    "missing.npy",
    "terrain.npy",
    "hut.ply",
    "a" * 300,
    "box",
    "grass",
    "corn",
    "strongest",
    "\u00e9\u4e2d",
    "x\u0000y",
]
MAYBE = st.one_of(
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0, 1, 2, 3, 7, 32, 1800, 3600, 4096, 10**12, -1, 0.9, 2.7, 1e-300, 1e39, -1e39, 1e308]),
    st.sampled_from(STRINGS),
    st.lists(st.floats(-200, 200), max_size=40),
    st.lists(st.lists(st.integers(0, 5), min_size=2, max_size=2), min_size=2, max_size=3),
    st.just([]),
    st.just({}),
)
UNKNOWN_KEYS = ["colour", "Hz", "", " hz", "typo_m", "ring", "TYPE"]


def leaves(value: Any, path: tuple = ()) -> list[tuple]:
    """Paths of every value that is not an object (lists themselves and their elements too)."""
    out = []
    if isinstance(value, dict):
        for key, item in value.items():
            out += leaves(item, path + (key,))
    else:
        out.append(path)
        if isinstance(value, list):
            for i, item in enumerate(value):
                out += leaves(item, path + (i,))
    return out


def objects(value: Any, path: tuple = ()) -> list[tuple]:
    out = [path] if isinstance(value, dict) else []
    if isinstance(value, dict):
        for key, item in value.items():
            out += objects(item, path + (key,))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            out += objects(item, path + (i,))
    return out


def at(doc: Any, path: tuple) -> Any:
    for part in path:
        doc = doc[part]
    return doc


def put(doc: Any, path: tuple, value: Any) -> None:
    at(doc, path[:-1])[path[-1]] = value


def serialise(doc: Any) -> bytes:
    raws: dict[str, str] = {}

    def default(value: Any) -> str:
        raws[value.marker] = value.text
        return value.marker

    text = json.dumps(doc, default=default)
    for marker, literal in raws.items():
        text = text.replace(json.dumps(marker), literal)
    return text.encode()


@st.composite
def mutated(draw, base: dict, nullable: set[tuple] = frozenset(), comment_keys: bool = False):
    """(file bytes, path of the change or None, must_refuse) for one mutation of ``base``."""
    doc = copy.deepcopy(base)
    kinds = ["nudge", "nudge", "value", "never_valid", "null", "unknown_key", "remove", "deep", "bytes"]
    kind = draw(st.sampled_from(kinds))
    if kind == "nudge":  # a plausible change of a number: exercises the checks past the types
        numbers = [p for p in leaves(doc) if type(at(doc, p)) in (int, float)]
        path = draw(st.sampled_from(numbers))
        factor = draw(st.sampled_from([0, 0.5, 0.99, 1.01, 1.5, 2, 10, -1, 1000]))
        value = at(doc, path) * factor
        put(doc, path, int(value) if type(at(doc, path)) is int and float(value).is_integer() else value)
        return serialise(doc), path, False
    if kind in ("value", "never_valid", "null", "deep"):
        path = draw(st.sampled_from(leaves(doc)))
        if not path:
            return serialise(doc), None, False
        if kind == "value":
            put(doc, path, draw(MAYBE))
            return serialise(doc), path, False
        if kind == "never_valid":
            put(doc, path, draw(st.sampled_from(NEVER_VALID)))
            return serialise(doc), path, True
        if kind == "null":
            put(doc, path, None)
            named = tuple(p for p in path if isinstance(p, str))
            return serialise(doc), path, named not in nullable or not isinstance(path[-1], str)
        nested: Any = 1
        for _ in range(MAX_JSON_DEPTH + 5):
            nested = [nested]
        put(doc, path, nested)
        return serialise(doc), path, True
    if kind == "unknown_key":
        where = draw(st.sampled_from(objects(doc)))
        key = draw(st.sampled_from(UNKNOWN_KEYS))
        at(doc, where)[key] = draw(MAYBE)
        return serialise(doc), where + (key,), True
    if kind == "remove":
        where = draw(st.sampled_from([p for p in objects(doc) if at(doc, p)]))
        key = draw(st.sampled_from(sorted(at(doc, where))))
        del at(doc, where)[key]
        return serialise(doc), None, False
    data = serialise(doc)
    offset = draw(st.integers(0, len(data)))
    junk = draw(st.sampled_from([b"\xff", b"\xc3", b"\x80abc", b"\xed\xa0\x80"]))
    return data[:offset] + junk + data[offset:], None, True


def judge(kind: str, load, file: Path, data: bytes, path: tuple | None, must_refuse: bool) -> None:
    """Load ``data`` from ``file``: accepted, or refused by name; count the outcome."""
    stats = STATS.setdefault(kind, Counter())
    stats["cases"] += 1
    file.write_bytes(data)
    try:
        load(file)
    except AcresLidarError as exc:
        stats["refused"] += 1
        message = str(exc)
        assert str(file) in message, f"the message does not name the file: {message}"
        key = next((p for p in reversed(path or ()) if isinstance(p, str)), None)
        if key:
            assert key in message, f"the message does not name the key {key!r} of {path}: {message}"
        return
    # Any other exception propagates and fails the example: a raw exception.
    stats["accepted"] += 1
    if must_refuse:
        stats["wrongly_accepted"] += 1
        raise AssertionError(f"accepted an input that must be refused (change at {path}): {data[:300]!r}")


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz")
    os.mkfifo(root / "pipe.npy")
    np.save(root / "terrain.npy", np.zeros((3, 3)))
    import open3d as o3d

    from acres_lidar_ros.scene import shapes

    v, t = shapes.box([2.0, 1.0, 1.0])
    mesh = o3d.geometry.TriangleMesh(o3d.utility.Vector3dVector(v), o3d.utility.Vector3iVector(t.astype(np.int32)))
    o3d.io.write_triangle_mesh(str(root / "hut.ply"), mesh)
    return root


# --- sensors files --------------------------------------------------------------------------------
POLARIS = json.loads((config_dir() / "sensors_polaris.json").read_text())
SENSORS_BASE = {
    "lidar": {
        k: v for k, v in POLARIS["lidar"].items() if not k.startswith("_") and k not in ("self_returns", "materials")
    }
}
SENSORS_BASE["lidar"]["materials"] = {"water": {"reflectivity": 0.02, "specular": 5.0}, "grass": {"transmission": 0.4}}
SENSORS_BASE["lidar"]["weather"] = {"enabled": True, "fog_lidar_ratio_sr": 18.8}
SENSORS_NULLABLE = {("lidar", *p.name.split(".")) for p in LIDAR_PARAM.values() if p.nullable}


@FUZZ
@given(case=mutated(SENSORS_BASE, SENSORS_NULLABLE))
def test_fuzzed_sensors_files(work, case):
    data, path, must_refuse = case
    # An overlay of the shipped default file: the merge and the extends reader are fuzzed too.
    doc_text = data.replace(
        b'{"lidar"', b'{"extends": ' + json.dumps(str(config_dir() / "sensors.json")).encode() + b', "lidar"', 1
    )
    judge("sensors file", load_sensor_config, work / "sensors.json", doc_text, path, must_refuse)


# --- scene files ----------------------------------------------------------------------------------
SCENE_BASE = {
    "format": "acres_lidar_scene",
    "version": 1,
    "terrain": {"origin_xy_m": [-20, -20], "cell_m": 10.0, "height_m": [[0, 0.5, 0], [0, 1, 0], [0, 0, 0.2]]},
    "cover": {"origin_xy_m": [-20, -20], "cell_m": 4.0, "material": [["grass", "soil"], ["gravel", "grass"]]},
    "polygons": [{"name": "road", "material": "asphalt", "vertices_xy_m": [[-20, -1], [20, -1], [20, 1], [-20, 1]]}],
    "water": {"origin_xy_m": [-20, -20], "cell_m": 2.0, "pond_depth_m": [[0.5, 0.0]], "soil_wetness": [[0.2, 0.9]]},
    "polygon_raster_cell_m": 0.5,
    "objects": [
        {"type": "mesh", "path": "hut.ply", "class": "building", "base_xy_m": [5, 5], "yaw_deg": 90, "scale": 2.0},
        {"type": "box", "class": "building", "base_xy_m": [0, 8], "size_m": [3, 2, 2], "roof_height_m": 1},
        {"type": "cylinder", "class": "silo", "base_xy_m": [-8, 8], "radius_m": 2, "height_m": 5, "segments": 12},
        {"type": "tree", "base_xy_m": [8, -8], "height_m": 9, "trunk_radius_m": 0.2},
        {"type": "shrub", "base_xy_m": [-8, -8], "height_m": 2, "material": "shrub"},
        {
            "type": "crop_field",
            "class": "potato",
            "corner_xy_m": [-15, -15],
            "patches": [2, 1],
            "crop_height_m": 0.6,
            "growth": 0.5,
            "cell_state": [[0] * 8, [1] * 8, [2] * 8, [0] * 8],
        },
        {"type": "mud_clod", "base_xy_m": [0, -5], "size_m": [0.5, 0.4, 0.1]},
        {"type": "ground_cover", "base_xy_m": [0, -10], "size_m": [3, 2, 0.3], "yaw_deg": 30},
    ],
}


@FUZZ
@given(case=mutated(SCENE_BASE))
def test_fuzzed_scene_files(work, case):
    data, path, must_refuse = case
    judge("scene file", load_scene, work / "scene.json", data, path, must_refuse)


@FUZZ
@given(case=mutated({**SCENE_BASE, "terrain": {**SCENE_BASE["terrain"], "height_m": "terrain.npy"}}))
def test_fuzzed_scene_files_with_npy_grids(work, case):
    data, path, must_refuse = case
    judge("scene file (.npy)", load_scene, work / "scene_npy.json", data, path, must_refuse)


# --- box tracks -----------------------------------------------------------------------------------
def sample(t: float, x: float) -> dict:
    return {"t_s": t, "centre_m": [x, 3.0, 0.9], "quaternion_xyzw": [0, 0, 0, 1], "half_extents_m": [2.0, 0.8, 0.9]}


TRACKS_BASE = {
    "tracks": [
        {"object_id": 101, "samples": [sample(0.0, 12.0), sample(4.0, 20.0)]},
        {"object_id": 7, "samples": [sample(1.0, -3.0)]},
    ]
}


@FUZZ
@given(case=mutated(TRACKS_BASE))
def test_fuzzed_box_tracks(work, case):
    data, path, must_refuse = case
    judge("box tracks", load_box_tracks, work / "tracks.json", data, path, must_refuse)


# --- ROS parameters and command-line options ------------------------------------------------------
POLARIS_CONFIG = load_sensor_config("polaris")
DECLS = by_name(declarations(POLARIS_CONFIG))
RUNTIME = sorted(name for name, d in DECLS.items() if not d.read_only)
ROS_VALUES = st.one_of(MAYBE, st.sampled_from([10**400, -(10**30), float("nan"), float("inf"), ["a", 1], "x\n"]))


@FUZZ
@given(name=st.sampled_from(sorted(DECLS)), value=ROS_VALUES)
def test_fuzzed_ros_parameters_get_a_reason(name, value):
    stats = STATS.setdefault("ROS parameter", Counter())
    stats["cases"] += 1
    ok, reason = check_changes({name: value}, DECLS, POLARIS_CONFIG)
    assert isinstance(ok, bool) and isinstance(reason, str)
    if ok:
        stats["accepted"] += 1
        assert name in RUNTIME
    else:
        stats["refused"] += 1
        assert name in reason, reason
    # The same value at start-up (a YAML file or --ros-args -p): applied, or refused by name.
    try:
        if name.startswith("lidar."):
            startup_overrides({name: value}, POLARIS_CONFIG)
        elif name in NODE_PARAM:
            node_values({name: value})
        else:
            option_values({name: value})
    except AcresLidarError as exc:
        assert name in str(exc), str(exc)


@FUZZ
@given(
    options=st.lists(
        st.tuples(
            st.sampled_from(sorted(cli.SENSOR_OPTIONS)),
            st.one_of(
                st.sampled_from(["10", "-1e6", "1e3", "nan", "-inf", "9" * 5000, "first", "7", "1", "0.5", " 3", "x"]),
                st.floats(allow_nan=True).map(repr),
                st.integers(-(10**25), 10**25).map(str),
            ),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_fuzzed_sensor_options(options):
    stats = STATS.setdefault("command-line option", Counter())
    stats["cases"] += 1
    argv = ["scan"] + [word for option, value in options for word in (option, value)]
    try:
        args = cli.build_parser().parse_args(cli.protect_negative_numbers(argv))
    except SystemExit as exc:  # argparse's usage error (a value starting with -): exit 2, no traceback
        assert exc.code == 2
        stats["refused by argparse"] += 1
        return
    try:
        cli.apply_sensor_overrides(POLARIS_CONFIG, cli.sensor_overrides(args))
    except AcresLidarError as exc:
        stats["refused"] += 1
        assert any(option in str(exc) for option, _ in options), str(exc)
    else:
        stats["accepted"] += 1


# --- .npy files a scene names ---------------------------------------------------------------------
NPY_DTYPES = ["<f8", "<f4", ">f8", "<i8", "|u1", "|i1", "|b1", "<c16", "<U4", "<M8[s]", [("a", "<f8"), ("b", "<i4")]]


@st.composite
def npy_files(draw):
    """(bytes of a .npy file, must_refuse): arrays of odd shapes and types, headers that lie,
    truncated or flipped bytes."""
    import io

    shape = draw(st.sampled_from([(3, 3), (2, 2), (1, 5), (0, 3), (3,), (), (2, 2, 2), (4096, 4097)]))
    dtype = np.dtype(draw(st.sampled_from(NPY_DTYPES)))
    buffer = io.BytesIO()
    if shape == (4096, 4097):  # a header claiming more values than the limit, with no data
        np.lib.format.write_array_header_1_0(buffer, {"descr": "<f8", "fortran_order": False, "shape": shape})
        return buffer.getvalue(), True
    values = draw(st.sampled_from([0.0, 1.5, -2.0, 2.7, 1e39, float("nan"), 7.0]))
    with np.errstate(invalid="ignore", over="ignore"):  # NaN or 1e39 cast to an integer or float32 type
        array = np.full(shape, values).astype(dtype) if dtype.names is None else np.zeros(shape, dtype)
    np.save(buffer, array)
    data = buffer.getvalue()
    corruption = draw(st.sampled_from(["none", "truncate", "flip", "header"]))
    if corruption == "truncate":
        data = data[: draw(st.integers(0, len(data) - 1))]
    elif corruption == "flip":
        i = draw(st.integers(0, len(data) - 1))
        data = data[:i] + bytes([data[i] ^ draw(st.integers(1, 255))]) + data[i + 1 :]
    elif corruption == "header":
        data = data.replace(b"'shape': (", b"'shape': (99999, ", 1)
    return data, corruption == "truncate" or shape in ((0, 3), (3,), (), (2, 2, 2)) or dtype.kind not in "iuf"


@FUZZ
@given(npy=npy_files(), grid=st.sampled_from(["terrain", "cover", "pond"]))
def test_fuzzed_npy_grids(work, npy, grid):
    data, must_refuse = npy
    (work / "fuzzed.npy").write_bytes(data)
    doc = copy.deepcopy(SCENE_BASE)
    key = {"terrain": ("terrain", "height_m"), "cover": ("cover", "material"), "pond": ("water", "pond_depth_m")}[grid]
    put(doc, key, "fuzzed.npy")
    judge("scene .npy file", load_scene, work / "scene_fuzzed_npy.json", serialise(doc), key, must_refuse)
