"""The node's parameter declarations and on-set validation come from the one schema (no ROS)."""

from __future__ import annotations

import math

import pytest
from rosbags.typesys import Stores, get_typestore

from acres_lidar_ros.config.schema import LIDAR_PARAMS, OPTION_PARAMS
from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.ros.params import (
    NODE_PARAMS,
    PARAMETER_TYPE,
    by_name,
    check_changes,
    declarations,
    node_values,
    option_values,
    split_changes,
    startup_overrides,
)
from acres_lidar_ros.runtime.lidar_set import check_set_start_up

TYPES = get_typestore(Stores.ROS2_JAZZY).types


@pytest.fixture(scope="module")
def polaris():
    return load_sensor_config("polaris")


@pytest.fixture(scope="module")
def decls(polaris):
    return by_name(declarations(polaris))


def test_every_schema_key_and_node_parameter_is_declared_once(polaris):
    names = [d.name for d in declarations(polaris)]
    assert len(names) == len(set(names))
    expected = (
        {"lidar." + p.name for p in LIDAR_PARAMS} | {p.name for p in OPTION_PARAMS} | {p.name for p in NODE_PARAMS}
    )
    assert set(names) == expected


def test_only_the_fixed_keys_are_read_only(decls):
    # Live keys and the keys whose beam pattern is rebuilt between scans are
    # writable; these change the node's schedule, frames, files or publisher and need a restart.
    read_only = sorted(name for name, d in decls.items() if d.read_only and d.group != "node")
    assert read_only == sorted(
        [
            "lidar.enabled",
            "lidar.scan_type",
            "lidar.hz",
            "lidar.delay_s",
            "lidar.output",
            "lidar.frame_id",
            "lidar.topic",
            "lidar.point_type",
            "lidar.self_returns",
            "lidar.model",
            "seed",
        ]
    )
    rebuilt = sorted(name for name, d in decls.items() if d.additional_constraints.endswith("beam pattern is rebuilt"))
    assert "lidar.columns" in rebuilt and "lidar.elevations_deg" in rebuilt and "lidar.rpy_deg" in rebuilt
    assert "lidar.std_m" not in rebuilt and "lidar.valid_start_azimuth_deg" not in rebuilt
    assert not decls["lidar.coordinates"].read_only and "lidar.coordinates" not in rebuilt  # outputs: live
    assert all(d.read_only for d in decls.values() if d.group == "node")


def test_defaults_come_from_the_loaded_sensors_file(decls, polaris):
    assert decls["lidar.columns"].default == 1800
    assert decls["lidar.delay_s"].default == 0.012
    assert decls["lidar.frame_id"].default == "lidar"
    assert decls["lidar.return_mode"].default == "strongest"
    assert decls["lidar.position_flu_m"].default == [2.5, 0.0, 2.039]
    assert decls["lidar.rpy_deg"].default == [-1.518, 5.317, 0.0]
    assert len(decls["lidar.elevations_deg"].default) == 32
    assert decls["lidar.hz"].type == "double" and decls["lidar.columns"].type == "integer"
    # the node's topic and point type are empty: the sensors file's, its driver's defaults
    assert decls["topic"].default == "" and decls["point_type"].default == ""
    assert decls["lidar.topic"].default == "/lidar/points" and decls["lidar.point_type"].default == "XYZI"
    assert decls["qos_depth"].default == 100
    default = by_name(declarations(load_sensor_config("default")))
    assert default["lidar.elevations_deg"].default is None  # declared without a value
    assert default["lidar.self_returns"].default == ""


def _in_descriptor_range(fields: dict, value) -> bool:
    """The range check rclpy applies before the on-set callback."""
    for r in fields["floating_point_range"]:
        if not r["from_value"] <= value <= r["to_value"]:
            return False
    for r in fields["integer_range"]:
        if not r["from_value"] <= value <= r["to_value"]:
            return False
        if value != r["to_value"] and (value - r["from_value"]) % r["step"]:
            return False
    return True


def test_descriptors_are_valid_messages_and_hold_their_defaults(decls):
    Descriptor = TYPES["rcl_interfaces/msg/ParameterDescriptor"]
    FloatRange = TYPES["rcl_interfaces/msg/FloatingPointRange"]
    IntRange = TYPES["rcl_interfaces/msg/IntegerRange"]
    for decl in decls.values():
        fields = decl.descriptor_fields()
        message = Descriptor(
            **{
                **fields,
                "floating_point_range": [FloatRange(**r) for r in fields["floating_point_range"]],
                "integer_range": [IntRange(**r) for r in fields["integer_range"]],
            }
        )
        assert message.type == PARAMETER_TYPE[decl.type] and message.description
        if decl.default is not None and decl.type in ("double", "integer"):
            assert _in_descriptor_range(fields, decl.default), decl.name


def test_ranges_follow_the_schema(decls):
    hz = decls["lidar.hz"].descriptor_fields()["floating_point_range"]
    assert hz == [{"from_value": 1.0, "to_value": 120.0, "step": 0.0}]
    sub_rays = decls["lidar.sub_rays"].descriptor_fields()
    assert sub_rays["integer_range"] == [{"from_value": 1, "to_value": 7, "step": 6}]
    assert [v for v in range(9) if _in_descriptor_range(sub_rays, v)] == [1, 7]
    visibility = decls["visibility_m"].descriptor_fields()["floating_point_range"]
    assert visibility[0]["from_value"] == 10.0 and visibility[0]["to_value"] == math.inf
    assert decls["lidar.return_mode"].descriptor_fields()["floating_point_range"] == []
    assert "dual_strongest_last" in decls["lidar.return_mode"].additional_constraints
    assert decls["lidar.hz"].read_only and "read-only" in decls["lidar.hz"].additional_constraints
    assert (
        not decls["lidar.columns"].read_only
        and "beam pattern is rebuilt" in decls["lidar.columns"].additional_constraints
    )


@pytest.mark.parametrize(
    "changes, reason",
    [
        ({"lidar.std_m": 2.0}, "lidar.std_m = 2.0 is out of range: expected a number >= 0 and <= 1"),
        ({"lidar.std_m": "x"}, "lidar.std_m = 'x': expected a number >= 0 and <= 1"),
        ({"lidar.return_mode": "median"}, "lidar.return_mode = 'median': expected one of strongest, first"),
        ({"visibility_m": 5.0}, "visibility_m = 5.0 is out of range: expected a number >= 10"),
        ({"rain_mm_per_h": -1.0}, "rain_mm_per_h = -1.0 is out of range"),
        ({"noise": 1}, "noise = 1: expected true or false"),
        ({"lidar.hz": 5.0}, "lidar.hz is read-only"),
        ({"lidar.range_offset_m": 180.0}, "lidar.range_offset_m = 180.0 is not below lidar.range_m"),
        ({"topic": "/other"}, "topic is read-only"),
        ({"lidar.bogus": 1}, "lidar.bogus: not a parameter of lidar_node"),
    ],
)
def test_bad_runtime_changes_are_refused_with_a_reason(decls, polaris, changes, reason):
    ok, why = check_changes(changes, decls, polaris)
    assert not ok and why.startswith(reason)


def test_good_runtime_changes_are_accepted_and_split(decls, polaris):
    changes = {
        "lidar.std_m": 0.01,
        "lidar.return_mode": "last",
        "rain_mm_per_h": 12.5,
        "visibility_m": math.inf,
        "noise": False,
        "lidar.weather.enabled": False,
    }
    assert check_changes(changes, decls, polaris) == (True, "")
    lidar, options = split_changes(changes, decls)
    assert lidar == {"std_m": 0.01, "return_mode": "last", "weather.enabled": False}
    assert options == {"rain_mm_per_h": 12.5, "visibility_m": math.inf, "noise": False}
    updated = polaris.with_overrides(lidar)
    assert updated.std_m == 0.01 and updated.return_mode == "last" and not updated.weather.enabled


def test_every_declared_default_passes_its_own_validation(polaris):
    decls = declarations(polaris)
    values = {d.name: d.default for d in decls}
    assert startup_overrides(values, polaris) == {}
    assert option_values(values) == {"rain_mm_per_h": 0.0, "visibility_m": math.inf, "noise": True, "seed": 0}
    assert node_values(values)["pose_source"] == "odom"


def test_startup_values_become_overrides_and_bad_ones_name_the_parameter(polaris):
    overrides = startup_overrides({"lidar.columns": 900, "lidar.frame_id": "rslidar", "lidar.delay_s": 0.012}, polaris)
    assert overrides == {"columns": 900, "frame_id": "rslidar"}
    assert polaris.with_overrides(overrides).frame_id == "rslidar"
    with pytest.raises(ConfigError, match=r"lidar\.columns = 2 is out of range: expected an integer >= 4"):
        startup_overrides({"lidar.columns": 2}, polaris)
    with pytest.raises(
        ConfigError, match="point_type = 'XYZ': expected one of XYZI, XYZIRT, XYZIRT_labels, velodyne, ouster, nebula"
    ):
        node_values({"point_type": "XYZ"})
    with pytest.raises(ConfigError, match="topic = 'lidar points'"):
        node_values({"topic": "lidar points"})
    with pytest.raises(ConfigError, match="qos_depth = 0 is out of range"):
        node_values({"qos_depth": 0})
    assert node_values({"vehicle_markers_topic": ""})["vehicle_markers_topic"] == ""


def test_docs_ros_md_holds_the_generated_parameter_table(polaris):
    from pathlib import Path

    from acres_lidar_ros.ros.params import markdown_table

    docs = (Path(__file__).resolve().parents[2] / "docs" / "ros.md").read_text()
    start = docs.index("<!-- ros_params table -->\n") + len("<!-- ros_params table -->\n")
    end = docs.index("\n<!-- end ros_params table -->")
    assert docs[start:end] == markdown_table(declarations(polaris)), (
        "docs/ros.md's parameter table is stale: regenerate it with the command above it"
    )


@pytest.mark.parametrize(
    "changes, reason",
    [
        ({"lidar.std_m": 10**400}, r"lidar\.std_m = 1000.*: expected a number >= 0 and <= 1"),
        ({"lidar.std_m": float("nan")}, r"lidar\.std_m = nan: expected"),
        ({"lidar.return_mode": "first\n"}, r"lidar\.return_mode = 'first\\n': expected one of"),
        ({"rain_mm_per_h": -(10**30)}, r"rain_mm_per_h = -1000.*: expected a number >= 0"),
        ({"seed": 2**64}, r"seed is read-only"),
    ],
)
def test_bad_runtime_values_get_a_reason_not_an_exception(decls, polaris, changes, reason):
    import re

    ok, why = check_changes(changes, decls, polaris)
    assert not ok and re.search(reason, why), why


def test_node_parameters_refuse_huge_numbers_and_trailing_newlines():
    with pytest.raises(ConfigError, match=r"qos_depth = 1000.* is out of range"):
        node_values({"qos_depth": 10**400})
    with pytest.raises(ConfigError, match=r"odom_frame = 'odom\\n': expected a frame name"):
        node_values({"odom_frame": "odom\n"})
    with pytest.raises(ConfigError, match=r"topic = '/lidar/points\\n': expected a topic name"):
        node_values({"topic": "/lidar/points\n"})
    with pytest.raises(ConfigError, match=r"lidar\.elevations_deg\[0\] = 'a'"):
        startup_overrides({"lidar.elevations_deg": ["a"] * 32}, load_sensor_config("polaris"))


def test_the_one_type_map_is_rclpy_s_own_numbering():
    """``params.PARAMETER_TYPE`` is the only map of the node's parameter types: its numbers are
    rcl_interfaces' ParameterType, which rclpy's ``Parameter.Type`` carries by name."""
    parameter = pytest.importorskip("rclpy.parameter", reason="needs rclpy").Parameter
    from acres_lidar_ros.ros.params import PARAMETER_TYPE

    names = {
        "bool": "BOOL",
        "integer": "INTEGER",
        "double": "DOUBLE",
        "string": "STRING",
        "double_array": "DOUBLE_ARRAY",
        "string_array": "STRING_ARRAY",
    }
    assert {k: parameter.Type(v).name for k, v in PARAMETER_TYPE.items()} == names


def test_lidar_set_takes_a_list_of_sensors_and_refuses_what_is_one_sensors():
    settings = node_values({"lidar_set": ["polaris", "vlp16"]})
    assert settings["lidar_set"] == ["polaris", "vlp16"] and node_values({})["lidar_set"] is None
    with pytest.raises(ConfigError, match=r"lidar_set = \['polaris', ''\]: expected a list of sensors files"):
        node_values({"lidar_set": ["polaris", ""]})
    check_set_start_up(settings, {"lidar_set": ["polaris", "vlp16"], "seed": 3})  # options are every sensor's
    with pytest.raises(ConfigError, match=r"lidar.hz = 5.0 with lidar_set: each sensor's keys come from its own"):
        check_set_start_up(settings, {"lidar.hz": 5.0})
    with pytest.raises(ConfigError, match=r"sensors = 'vlp16' and lidar_set = \['polaris', 'vlp16'\]: give sensors"):
        check_set_start_up(settings, {"sensors": "vlp16"})
    for name, value in (("topic", "/points"), ("truth", True), ("packets", "udp")):
        with pytest.raises(ConfigError, match=rf"{name} = {value!r} with lidar_set: allowed only for one sensor"):
            check_set_start_up(node_values({"lidar_set": ["polaris"], name: value}), {name: value})
    names = {d.name for d in declarations(None)}
    assert "lidar_set" in names and "seed" in names and not any(n.startswith("lidar.") for n in names)
