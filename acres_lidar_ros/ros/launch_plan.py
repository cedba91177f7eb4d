"""What ``launch/lidar.launch.py`` starts for one or several sensors files and a URDF, as plain
data (no launch import): the lidar_node parameters, and how each cloud's frame gets into TF.

* ``sensors`` is one sensors file or shipped name, or several separated by commas: one
  ``lidar_node`` runs them all over one scene (its ``lidar_set`` parameter, docs/ros.md "Several
  LiDARs"), each on its own topic in its own frame.
* Topic, frame and point type are the sensors file's (``lidar.topic``, ``lidar.frame_id``,
  ``lidar.point_type``: each shipped sensor's driver defaults) unless a launch argument gives one
  (``topic`` and ``frame_id`` for one sensor only; ``point_type`` for every sensor).
* Each frame exists in TF: with ``urdf``, robot_state_publisher publishes the URDF (a ``.xacro``
  is expanded with the xacro package), which must have the ``base_frame`` link; a sensor whose
  frame is no link of it, and every sensor without ``urdf``, gets a static transform
  ``base_frame -> frame`` from its sensors file's mount.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scipy.spatial.transform import Rotation

from acres_lidar_ros.errors import ConfigError

LAUNCH_ARGUMENTS: tuple[tuple[str, str, str], ...] = (
    (
        "sensors",
        "polaris",
        "Sensors file or a shipped sensor's name (polaris, helios5515, vlp16, hdl32e, ...); several, separated by "
        "commas, run in one lidar_node over one scene.",
    ),
    ("urdf", "", "URDF or .xacro of the vehicle for robot_state_publisher; empty: a static TF from the mount."),
    ("scene", "", "Scene file; empty (or default): the built-in farm."),
    ("topic", "", "Cloud topic; empty: the sensors file's lidar.topic."),
    ("frame_id", "", "Cloud frame; empty: the sensors file's lidar.frame_id."),
    ("point_type", "", "Cloud layout; empty: the sensors file's lidar.point_type."),
    ("base_frame", "base_footprint", "Vehicle frame: the odometry's child frame and the mount's parent."),
    ("use_sim_time", "false", "Run on /clock (the demo drive publishes it when true)."),
    ("demo", "false", "Drive the built-in tour: /odom, /tf odom -> base_frame, /imu/data (and /clock)."),
    ("node_name", "lidar_node", "Name of the lidar node."),
)


@dataclass(frozen=True)
class SensorPlan:
    """One sensor of a launch: its sensors file, what its cloud will be, and the static transform
    ``base_frame -> frame_id`` of its mount (static_transform_publisher's arguments), or None where
    the URDF has the frame."""

    sensors: str
    topic: str
    frame_id: str
    point_type: str
    static_transform: list[str] | None = field(default=None)


@dataclass(frozen=True)
class LaunchPlan:
    """The nodes of a launch: one lidar_node (``lidar_parameters``, a launch ``parameters`` dict),
    its sensors (``sensors``, in order), and the URDF text for robot_state_publisher or None.
    ``topic``, ``frame_id``, ``point_type`` and ``static_transform`` are the first sensor's (the
    only one's without a set)."""

    lidar_parameters: dict[str, Any]
    sensors: tuple[SensorPlan, ...]
    robot_description: str | None = None

    @property
    def topic(self) -> str:
        return self.sensors[0].topic

    @property
    def frame_id(self) -> str:
        return self.sensors[0].frame_id

    @property
    def point_type(self) -> str:
        return self.sensors[0].point_type

    @property
    def static_transform(self) -> list[str] | None:
        return self.sensors[0].static_transform

    @property
    def static_transforms(self) -> list[list[str]]:
        """One static_transform_publisher's arguments per sensor whose frame the URDF lacks."""
        return [s.static_transform for s in self.sensors if s.static_transform is not None]


def _flag(value: str, name: str) -> bool:
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise ConfigError(f"launch argument {name} = {value!r}: expected true or false")
    return text == "true"


def sensors_list(value: str) -> list[str]:
    """The ``sensors`` launch argument's files or names (several separated by commas)."""
    names = [part.strip() for part in str(value).split(",")]
    if not all(names):
        raise ConfigError(
            f"launch argument sensors = {value!r}: expected a sensors file or shipped name, or several separated "
            "by commas (polaris,vlp16), none empty"
        )
    return names


def mount_transform(config: Any, base_frame: str, frame_id: str) -> list[str]:
    """static_transform_publisher's arguments of the sensors file's mount ``base_frame -> frame_id``."""
    x, y, z = (f"{v:.9g}" for v in config.position_flu_m)
    qx, qy, qz, qw = (f"{v:.9g}" for v in Rotation.from_euler("xyz", config.rpy_rad).as_quat())
    return [
        *("--x", x, "--y", y, "--z", z),
        *("--qx", qx, "--qy", qy, "--qz", qz, "--qw", qw),
        *("--frame-id", base_frame, "--child-frame-id", frame_id),
    ]


def lidar_launch_plan(arguments: dict[str, str]) -> LaunchPlan:
    """The plan for the launch arguments (``LAUNCH_ARGUMENTS``' names, string values as launch
    gives them; missing ones take their defaults).

    Raises ``ConfigError`` when a sensors file does not load, the URDF does not parse or lacks the
    base frame, ``topic`` or ``frame_id`` is given for several sensors, or two sensors share a
    topic or a frame (the message says which argument or key fixes it).
    """
    from acres_lidar_ros.config.schema import LIDAR_PARAM
    from acres_lidar_ros.config.sensors import load_sensor_config

    args = {name: default for name, default, _ in LAUNCH_ARGUMENTS} | {k: str(v) for k, v in arguments.items()}
    unknown = sorted(set(args) - {name for name, _, _ in LAUNCH_ARGUMENTS})
    if unknown:
        raise ConfigError(
            f"launch argument {unknown[0]!r}: unknown; allowed: {', '.join(n for n, _, _ in LAUNCH_ARGUMENTS)}"
        )
    names = sensors_list(args["sensors"])
    several = len(names) > 1
    for name in ("topic", "frame_id"):
        if several and args[name]:
            raise ConfigError(
                f"launch argument {name} = {args[name]!r} with {len(names)} sensors ({args['sensors']}): each sensor "
                f"takes its own from its sensors file (lidar.{name}); leave {name} empty"
            )
    if args["point_type"]:  # the sensors file's rule for the key
        LIDAR_PARAM["point_type"].validate(args["point_type"], "launch argument point_type")
    sim_time = _flag(args["use_sim_time"], "use_sim_time")
    robot = None
    robot_description = None
    if args["urdf"]:
        from acres_lidar_ros.body.urdf import expand_xacro, load_urdf

        path = Path(args["urdf"])
        robot = load_urdf(path)
        if args["base_frame"] not in robot.links:
            raise ConfigError(
                f"URDF {str(path)!r} has no link {args['base_frame']!r} (launch argument base_frame): the mounts "
                f"hang from it; links: {', '.join(robot.links)}"
            )
        robot_description = (
            expand_xacro(path).decode("utf-8") if path.suffix == ".xacro" else path.read_text(encoding="utf-8")
        )
    plans = []
    for name in names:
        config = load_sensor_config(name)
        frame_id = args["frame_id"] or config.frame_id
        in_urdf = robot is not None and frame_id in robot.links
        plans.append(
            SensorPlan(
                name,
                args["topic"] or config.topic,
                frame_id,
                args["point_type"] or config.point_type,
                None if in_urdf else mount_transform(config, args["base_frame"], frame_id),
            )
        )
    for what in ("topic", "frame_id"):
        seen: dict[str, str] = {}
        for plan in plans:
            value = getattr(plan, what)
            if value in seen:
                raise ConfigError(
                    f"launch argument sensors = {args['sensors']!r}: {seen[value]!r} and {plan.sensors!r} both have "
                    f"lidar.{what} {value!r}; give one of them its own in an overlay of its sensors file"
                )
            seen[value] = plan.sensors
    parameters: dict[str, Any] = {
        "scene": args["scene"],
        "point_type": args["point_type"] or (plans[0].point_type if not several else ""),
        "base_frame": args["base_frame"],
        "use_sim_time": sim_time,
    }
    if several:
        parameters["lidar_set"] = names
    else:
        parameters |= {"sensors": names[0], "topic": plans[0].topic}
        if plans[0].frame_id != load_sensor_config(names[0]).frame_id:
            parameters["lidar.frame_id"] = plans[0].frame_id
    return LaunchPlan(parameters, tuple(plans), robot_description)
