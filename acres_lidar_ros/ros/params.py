"""The node's ROS 2 parameters, built from the one schema (``schema.py``), without ROS.

Three groups, all declared by ``lidar_node``:

* ``lidar.<key>``: every key of the sensors file (``schema.LIDAR_PARAMS``), default from the
  loaded sensors file; writable when the schema marks it ``runtime`` (from the next scan) or
  ``rebuild`` (the beam pattern is rebuilt between scans), read-only otherwise: the classes and
  checks of ``config.updates``, the same as ``Scanner.set_runtime_config``.
* the scan options ``rain_mm_per_h``, ``visibility_m``, ``noise`` (runtime) and ``seed``
  (``schema.OPTION_PARAMS``);
* the node's own wiring (``NODE_PARAMS``): sensors file, scene, topics, frames, point type, QoS
  depth, pose source, ``ts_first_point`` and the pose wait. All read-only: they take effect at
  start-up (from ``config/polaris.yaml`` or ``--ros-args -p``).

``declarations`` gives one ``ParamDecl`` per parameter (name, ROS type, default, description,
range, read_only) and ``ParamDecl.descriptor_fields`` the fields of an
``rcl_interfaces/msg/ParameterDescriptor``; the node turns them into messages. ``check_changes``
is the on-set validation: ``(ok, reason)``.
"""

from __future__ import annotations

import contextlib
import math
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from acres_lidar_ros.config.param import FRAME_NAME, TOPIC_NAME, Param, short_repr
from acres_lidar_ros.config.schema import LIDAR_PARAMS, OPTION_PARAMS, check_option
from acres_lidar_ros.config.sensors import SensorConfig
from acres_lidar_ros.config.updates import plan_update
from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.outputs.point_types import PROFILES

LIDAR_PREFIX = "lidar."

# rcl_interfaces/msg/ParameterType
PARAMETER_TYPE = {"bool": 1, "integer": 2, "double": 3, "string": 4, "double_array": 8, "string_array": 9}
_TYPE_OF_KIND = {
    "bool": "bool",
    "int": "integer",
    "float": "double",
    "str": "string",
    "frame_name": "string",
    "profile": "string",
    "topic": "string",
    "path": "string",
    "float_list": "double_array",
    "float_array": "double_array",
}

READ_ONLY = "; read-only: set it at start-up"
REBUILT = "; changes between scans: the beam pattern is rebuilt"


@dataclass(frozen=True)
class ParamDecl:
    """One ROS parameter of the node.

    ``type`` is a key of ``PARAMETER_TYPE``; ``default`` is None only for a list key the sensors
    file leaves unset (declared without a value). ``low``/``high`` become a floating-point or
    integer range (closed: an open bound of the schema is enforced by ``check_changes``);
    ``step`` is the integer step (``sub_rays``: 1 or 7 is the range 1..7 step 6). ``group`` is
    ``lidar``, ``option`` or ``node``; ``key`` the sensors-file key or option name.
    """

    name: str
    type: str
    default: Any
    description: str
    read_only: bool
    group: str
    key: str
    low: float | int | None = None
    high: float | int | None = None
    step: float | int = 0
    additional_constraints: str = ""
    choices: tuple[str, ...] = ()

    def descriptor_fields(self) -> dict[str, Any]:
        """Fields of ``rcl_interfaces/msg/ParameterDescriptor``; ranges as lists of dicts of
        ``FloatingPointRange`` / ``IntegerRange`` fields (empty when unbounded)."""
        fp_range: list[dict[str, Any]] = []
        int_range: list[dict[str, Any]] = []
        if self.low is not None or self.high is not None:
            if self.type == "double":
                fp_range.append(
                    {
                        "from_value": float(-math.inf if self.low is None else self.low),
                        "to_value": float(math.inf if self.high is None else self.high),
                        "step": float(self.step),
                    }
                )
            elif self.type == "integer":
                int_range.append(
                    {
                        "from_value": int(-(2**63) if self.low is None else self.low),
                        "to_value": int(2**63 - 1 if self.high is None else self.high),
                        "step": int(self.step or 1),
                    }
                )
        return {
            "name": self.name,
            "type": PARAMETER_TYPE[self.type],
            "description": self.description,
            "additional_constraints": self.additional_constraints,
            "read_only": self.read_only,
            "dynamic_typing": False,
            "floating_point_range": fp_range,
            "integer_range": int_range,
        }


@dataclass(frozen=True)
class NodeParam:
    name: str
    type: str
    default: Any
    description: str
    choices: tuple[str, ...] = ()
    low: float | None = None
    high: float | None = None
    pattern: str = ""  # "topic", "frame_name", "profile" (a point layout), "topic_or_empty" or ""
    empty_means: str = ""  # what an empty value stands for, where it may be empty

    def _or_empty(self) -> str:
        return f", or empty for {self.empty_means}" if self.empty_means else ""

    def allowed(self) -> str:
        if self.type == "string_array":
            return "sensors files or shipped sensor names (polaris, vlp16, ...), or unset"
        if self.type == "bool":
            return "true or false"
        if self.choices:
            what = "a point layout: one of " if self.pattern == "profile" else "one of "
            return what + ", ".join(self.choices) + self._or_empty()
        if self.low is not None:
            return f"{self.low:g} to {self.high:g}"
        return {
            "topic": "a topic name",
            "topic_or_empty": "a topic name, or empty for " + (self.empty_means or "none"),
            "frame_name": "a frame name",
        }.get(self.pattern, "a string")

    def check(self, value: Any) -> Any:
        where = self.name
        if self.type == "string_array":
            items = list(value) if isinstance(value, (list, tuple)) else None
            if items is None or not all(isinstance(v, str) and v.strip() for v in items):
                raise ConfigError(f"{where} = {short_repr(value)}: expected a list of {self.allowed()}")
            return items
        if self.type == "bool":
            if not isinstance(value, bool):
                raise ConfigError(f"{where} = {value!r}: expected true or false")
            return value
        if self.type == "string":
            if not isinstance(value, str):
                raise ConfigError(f"{where} = {value!r}: expected a string")
            if value == "" and self.empty_means:
                return value
            if self.choices and value not in self.choices:
                raise ConfigError(f"{where} = {value!r}: expected one of {', '.join(self.choices)}")
            if self.pattern == "topic_or_empty" and value == "":
                return value
            if self.pattern.startswith("topic") and not TOPIC_NAME.fullmatch(value):
                raise ConfigError(f"{where} = {value!r}: expected a topic name such as /lidar/points")
            if self.pattern == "frame_name" and not FRAME_NAME.fullmatch(value):
                raise ConfigError(f"{where} = {value!r}: expected a frame name (letters, digits, _ and /)")
            return value
        integer = self.type == "integer"
        ok = isinstance(value, int) if integer else isinstance(value, (int, float))
        # Compared, not converted: a huge integer is refused, never an OverflowError.
        if (
            isinstance(value, bool)
            or not ok
            or (not integer and not -sys.float_info.max <= value <= sys.float_info.max)
        ):
            raise ConfigError(f"{where} = {short_repr(value)}: expected {'an integer' if integer else 'a number'}")
        if (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
            raise ConfigError(f"{where} = {short_repr(value)} is out of range: expected {self.low:g} to {self.high:g}")
        return int(value) if integer else float(value)


NODE_PARAMS: tuple[NodeParam, ...] = (
    NodeParam("sensors", "string", "polaris", "Sensors file: polaris, default, or a path to a JSON file."),
    NodeParam(
        "lidar_set",
        "string_array",
        None,
        "Several LiDARs over one scene in this node: one sensors file or shipped name per sensor, each "
        "publishing on its own lidar.topic in its own lidar.frame_id, with its own mount, schedule, "
        "self-return table and seed (seed + i); their keys come from their files (no lidar.* parameters), "
        "and topic, truth and packets are one sensor's (docs/ros.md, 'Several LiDARs'); unset: the one "
        "sensor of sensors.",
    ),
    NodeParam("scene", "string", "", "Scene file; empty (or default): the built-in farm."),
    NodeParam(
        "odom_in_scene",
        "string",
        "",
        "The odom frame's pose in the scene, 'X Y Z ROLL PITCH YAW' in m and deg (e.g. the robot's spawn pose in a "
        "Gazebo world), so a scene need not sit at the odom origin; empty: the scene at the odom origin.",
        empty_means="the scene at the odom origin",
    ),
    NodeParam(
        "topic",
        "string",
        "",
        "Cloud topic; empty: the sensors file's lidar.topic, its driver's default (/lidar/points for the "
        "Polaris; rslidar_sdk: /rslidar_points).",
        pattern="topic_or_empty",
        empty_means="the sensors file's lidar.topic",
    ),
    NodeParam(
        "point_type",
        "string",
        "",
        "Point layout of the cloud (docs/outputs.md): XYZI (the vehicle's rslidar_sdk build), XYZIRT "
        "(rslidar_sdk's PointXYZIRT), velodyne (LIO-SAM, FAST-LIO), ouster (ouster_ros), nebula "
        "(Autoware's PointXYZIRCAEDT) or hesai (HesaiLidar_ROS_2.0); empty: the sensors file's lidar.point_type, its driver's layout.",
        choices=tuple(PROFILES),
        pattern="profile",
        empty_means="the sensors file's lidar.point_type",
    ),
    NodeParam(
        "labels",
        "bool",
        False,
        "Instance labels on every point: publish the XYZIRT_labels layout (XYZIRT + class + instance of the "
        "primary return; point_type XYZI or XYZIRT), docs/outputs.md.",
    ),
    NodeParam(
        "qos_depth",
        "integer",
        100,
        "Keep-last depth of the reliable, volatile cloud publisher (rslidar_sdk: 100).",
        low=1,
        high=10000,
    ),
    NodeParam(
        "ts_first_point",
        "bool",
        False,
        "Stamp the cloud with its first point instead of its last, as rslidar_sdk's ts_first_point "
        "(XYZI, XYZIRT; velodyne, ouster and nebula always stamp the sweep start).",
    ),
    NodeParam(
        "pose_source",
        "string",
        "odom",
        "Base pose from nav_msgs/Odometry (odom) or from TF odom_frame -> base_frame (tf).",
        choices=("odom", "tf"),
    ),
    NodeParam("odom_topic", "string", "/odom", "nav_msgs/Odometry topic (pose_source odom).", pattern="topic"),
    NodeParam(
        "odom_frame",
        "string",
        "odom",
        "World frame of the poses (the odometry's header.frame_id).",
        pattern="frame_name",
    ),
    NodeParam(
        "base_frame",
        "string",
        "base_footprint",
        "Vehicle frame the lidar is mounted on (the odometry's child_frame_id).",
        pattern="frame_name",
    ),
    NodeParam(
        "pose_timeout_s",
        "double",
        0.05,
        "Wait after the end of a sweep for a pose at or after it; then extrapolate.",
        low=0.0,
        high=1.0,
    ),
    NodeParam(
        "max_extrapolation_s",
        "double",
        0.1,
        "Longest extrapolation beyond the newest pose; a scan further away is skipped.",
        low=0.0,
        high=1.0,
    ),
    NodeParam(
        "max_pose_speed_mps",
        "double",
        50.0,
        "Speed between two poses beyond which the second is a jump (a teleport): reported, counted, "
        "and the pose history restarts at it, so no scan is interpolated across it; 0: no check.",
        low=0.0,
        high=1000.0,
    ),
    NodeParam(
        "max_pose_acceleration_mps2",
        "double",
        50.0,
        "Change of velocity between two pose segments beyond which it is reported and counted (kept); 0: no check.",
        low=0.0,
        high=100000.0,
    ),
    NodeParam(
        "truth",
        "bool",
        False,
        "Publish each scan's cell truth on truth_topic: why each beam gave a return or none "
        "(docs/outputs.md, cell truth).",
    ),
    NodeParam(
        "truth_topic",
        "string",
        "/lidar/truth",
        "Topic of the cell truth (sensor_msgs/PointCloud2, columns x rings, layout acres_lidar_truth/1).",
        pattern="topic",
    ),
    NodeParam(
        "packets",
        "string",
        "",
        "The sensor's own packets as well (docs/packets.md): udp sends them live to packets_udp_host at the "
        "packet rate; ros publishes the driver's packet messages (rslidar_msg, velodyne_msgs, ouster_sensor_msgs), where that "
        "package is installed; empty: none.",
        choices=("udp", "ros"),
        empty_means="none",
    ),
    NodeParam(
        "packets_udp_host",
        "string",
        "127.0.0.1",
        "Where packets udp sends (an IPv4 address; a broadcast one is refused).",
    ),
    NodeParam(
        "vehicle_markers_topic",
        "string",
        "/vehicle_markers",
        "visualization_msgs/MarkerArray of other vehicles (CUBE markers become boxes); empty: none.",
        pattern="topic_or_empty",
    ),
)
NODE_PARAM: dict[str, NodeParam] = {p.name: p for p in NODE_PARAMS}


def _effective_value(config: SensorConfig, key: str) -> Any:
    node: Any = config.effective["lidar"]
    for part in key.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def _ros_default(param: Param, value: Any) -> Any:
    if param.kind == "path":
        return "" if value is None else str(value)
    if value is None:
        return None
    if param.kind == "float":
        return float(value)
    if param.kind in ("float_list", "float_array"):
        return [float(v) for v in value] or None  # an empty array is declared without a value
    return value


def _range(param: Param) -> tuple[Any, Any, Any]:
    if param.kind not in ("int", "float") or param.choices:
        return None, None, 0
    if param.int_values:
        values = sorted(param.int_values)
        steps = {b - a for a, b in zip(values, values[1:])}
        return values[0], values[-1], (steps.pop() if len(steps) == 1 else 1)
    return param.low, param.high, 0


def _decl(param: Param, name: str, default: Any, group: str) -> ParamDecl:
    low, high, step = _range(param)
    unit = f" [{param.unit}]" if param.unit else ""
    when = "" if param.runtime else REBUILT if param.rebuild else READ_ONLY
    return ParamDecl(
        name=name,
        type=_TYPE_OF_KIND[param.kind],
        default=default,
        description=f"{param.description}{unit}",
        read_only=not (param.runtime or param.rebuild),
        group=group,
        key=param.name,
        low=low,
        high=high,
        step=step,
        additional_constraints=param.allowed() + when,
        choices=param.choices,
    )


def node_declarations() -> list[ParamDecl]:
    """The node's own parameters (declared first: ``sensors`` names the file the rest come from)."""
    return [
        ParamDecl(
            name=p.name,
            type=p.type,
            default=p.default,
            description=p.description,
            read_only=True,
            group="node",
            key=p.name,
            low=p.low,
            high=p.high,
            step=1 if p.type == "integer" else 0,
            additional_constraints=p.allowed() + "; read-only: set it at start-up",
            choices=p.choices,
        )
        for p in NODE_PARAMS
    ]


def declarations(config: SensorConfig | None) -> list[ParamDecl]:
    """Every parameter of the node, defaults from ``config`` (the loaded sensors file); None (a
    ``lidar_set``: each sensor's keys are its file's): no ``lidar.<key>`` parameters."""
    out = node_declarations()
    if config is not None:
        for param in LIDAR_PARAMS:
            default = _ros_default(param, _effective_value(config, param.name))
            out.append(_decl(param, LIDAR_PREFIX + param.name, default, "lidar"))
    for param in OPTION_PARAMS:
        out.append(_decl(param, param.name, _ros_default(param, param.default), "option"))
    return out


def _lidar_param(name: str) -> Param:
    for param in LIDAR_PARAMS:
        if LIDAR_PREFIX + param.name == name:
            return param
    raise KeyError(name)


def check_value(decl: ParamDecl, value: Any) -> Any:
    """Validate one value of a parameter; returns it in the sensors file's Python form (a path's
    empty string becomes None) or raises ``ConfigError`` whose message names the parameter."""
    if decl.group == "node":
        return NODE_PARAM[decl.name].check(value)
    if decl.group == "option":
        try:
            return check_option(decl.key, value)
        except ConfigError as exc:
            raise ConfigError(str(exc)) from exc
    param = _lidar_param(decl.name)
    if param.kind == "path" and value in ("", None):
        return None
    listed = param.kind in ("float_list", "float_array")
    if listed and isinstance(value, tuple):
        value = list(value)
    if listed and value is not None and not isinstance(value, (list, str, bytes, dict)):
        with contextlib.suppress(TypeError, ValueError):  # rclpy hands a double_array as array.array
            value = [v if isinstance(v, (int, float)) else float(v) for v in value]
    return param.validate(value, decl.name)


def check_changes(
    changes: Mapping[str, Any], decls: Mapping[str, ParamDecl], config: SensorConfig | None = None
) -> tuple[bool, str]:
    """The on-set validation: ``(True, "")`` or ``(False, reason)`` for the first bad change.

    A read-only parameter is refused (it needs a restart); each value is checked against the
    schema; with ``config``, the sensors-file changes are checked together by
    ``config.updates.plan_update`` (the rules ``Scanner.set_runtime_config`` applies), so that
    cross-key rules hold as well.
    """
    lidar: dict[str, Any] = {}
    for name, value in changes.items():
        decl = decls.get(name)
        if decl is None:
            return False, f"{name}: not a parameter of lidar_node"
        if decl.read_only:
            return False, f"{name} is read-only: it takes effect at start-up; restart the node to change it"
        try:
            checked = check_value(decl, value)
        except ConfigError as exc:
            return False, str(exc)
        if decl.group == "lidar":
            lidar[decl.key] = checked
    if config is not None and lidar:
        try:
            plan_update(config, lidar)
        except ConfigError as exc:
            return False, str(exc)
    return True, ""


def split_changes(changes: Mapping[str, Any], decls: Mapping[str, ParamDecl]) -> tuple[dict, dict]:
    """Accepted runtime changes -> (sensors-file overrides for ``SensorConfig.with_overrides``,
    scan options for ``ScanOptions`` / ``Scanner.set_options``)."""
    lidar: dict[str, Any] = {}
    options: dict[str, Any] = {}
    for name, value in changes.items():
        decl = decls[name]
        checked = check_value(decl, value)
        if decl.group == "lidar":
            lidar[decl.key] = checked
        elif decl.group == "option":
            options[decl.key] = checked
    return lidar, options


def startup_overrides(values: Mapping[str, Any], config: SensorConfig) -> dict[str, Any]:
    """Sensors-file keys whose start-up parameter value (``lidar.<key>`` from a YAML file or the
    command line) differs from the loaded file: the overrides to apply before the first scan.
    Raises ``ConfigError`` naming the parameter for a bad value."""
    overrides: dict[str, Any] = {}
    for param in LIDAR_PARAMS:
        name = LIDAR_PREFIX + param.name
        if name not in values or values[name] is None:
            continue
        decl = _decl(param, name, None, "lidar")
        checked = check_value(decl, values[name])
        current = _effective_value(config, param.name)
        if param.kind == "path":
            current = None if current is None else str(current)
            checked = None if checked is None else str(checked)
        if checked != current:
            overrides[param.name] = checked
    return overrides


def option_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """Scan options from start-up parameter values (validated; unknown names ignored)."""
    out = {}
    for param in OPTION_PARAMS:
        if param.name in values and values[param.name] is not None:
            out[param.name] = check_option(param.name, values[param.name])
    return out


def node_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """The node's own parameters from start-up values, validated, defaults filled in."""
    return {p.name: p.check(values[p.name]) if values.get(p.name) is not None else p.default for p in NODE_PARAMS}


def check_known(overrides: Mapping[str, Any], known: Iterable[str], node: str = "lidar_node") -> None:
    """Refuse start-up values (``--ros-args -p``, parameter files) of parameters the node does not
    have: rclpy drops them silently, so a typo (``self_returns`` for ``lidar.self_returns``)
    would run with the default. The error names each one, its value and the closest names."""
    import difflib

    known = set(known)
    unknown = sorted(name for name in overrides if name not in known)
    if not unknown:
        return
    lines = []
    for name in unknown:
        close = difflib.get_close_matches(name, sorted(known), n=3, cutoff=0.6)
        hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        lines.append(f"{name} = {_value_of(overrides[name])!r}: {node} has no such parameter{hint}")
    raise ConfigError(
        "; ".join(lines) + f". Its parameters are listed in docs/ros.md (and by ros2 param list /{node}); "
        "a parameters file's '/**' section gives its values to every node"
    )


def _value_of(value: Any) -> Any:
    """A start-up value as the user wrote it (rclpy hands over ``Parameter`` objects)."""
    return getattr(value, "value", value)


def by_name(decls: Iterable[ParamDecl]) -> dict[str, ParamDecl]:
    return {d.name: d for d in decls}


def markdown_table(decls: Iterable[ParamDecl], groups: tuple[str, ...] = ("node", "option")) -> str:
    """The parameter table of docs/ros.md (regenerate with
    ``python -c "from acres_lidar_ros.ros.params import *; from acres_lidar_ros.config.sensors import
    load_sensor_config as l; print(markdown_table(declarations(l('polaris'))))"``).

    ``lidar.<key>`` parameters are the sensors-file keys of the README's schema table; the
    runtime ones are listed here too."""
    rows = ["| parameter | type | default | allowed | runtime | description |", "| --- | --- | --- | --- | --- | --- |"]
    for d in decls:
        if d.group not in groups and d.read_only:
            continue
        default = d.default
        if isinstance(default, bool):
            default = str(default).lower()
        elif isinstance(default, float) and math.isinf(default):
            default = ".inf"
        elif default == "":
            default = '""'
        allowed = d.additional_constraints.replace(READ_ONLY, "").replace(REBUILT, "")
        runtime = "no" if d.read_only else "rebuilt" if d.additional_constraints.endswith(REBUILT) else "yes"
        rows.append(f"| `{d.name}` | {d.type} | {default} | {allowed} | {runtime} | {d.description} |")
    return "\n".join(rows)
