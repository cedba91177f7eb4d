"""What ``launch/lidar.launch.py`` starts for a sensors file and a URDF, as plain data (no launch
import): the lidar_node parameters, and how the cloud's frame gets into TF.

* Topic, frame and point type are the sensors file's (``lidar.topic``, ``lidar.frame_id``,
  ``lidar.point_type``: each shipped sensor's driver defaults) unless a launch argument gives one.
* The frame exists in TF: with ``urdf``, robot_state_publisher publishes the URDF (a ``.xacro``
  is expanded with the xacro package), which must have a link of that frame name; without it, a
  static transform ``base_frame -> frame`` from the sensors file's mount.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scipy.spatial.transform import Rotation

from acres_lidar_ros.errors import ConfigError

LAUNCH_ARGUMENTS: tuple[tuple[str, str, str], ...] = (
    ("sensors", "polaris", "Sensors file or a shipped sensor's name (polaris, helios5515, vlp16, hdl32e, ...)."),
    ("urdf", "", "URDF or .xacro of the vehicle for robot_state_publisher; empty: a static TF from the mount."),
    ("scene", "", "Scene file; empty (or default): the built-in farm."),
    ("topic", "", "Cloud topic; empty: the sensors file's lidar.topic."),
    ("frame_id", "", "Cloud frame; empty: the sensors file's lidar.frame_id."),
    ("point_type", "", "Cloud layout; empty: the sensors file's lidar.point_type."),
    ("base_frame", "base_footprint", "Vehicle frame: the odometry's child frame and the mount's parent."),
    ("use_sim_time", "false", "Run on /clock (the demo drive publishes it when true)."),
    ("demo", "false", "Drive the built-in tour: /odom, /tf odom -> base_frame, /imu/data (and /clock)."),
    ("node_name", "lidar_node", "Name of the lidar node (one per sensor)."),
)


@dataclass(frozen=True)
class LaunchPlan:
    """The nodes of one sensor's launch.

    Attributes
    ----------
    lidar_parameters : the lidar_node's parameters (a launch ``parameters`` dict)
    topic, frame_id, point_type : what the cloud will be
    robot_description : the URDF text for robot_state_publisher, or None
    static_transform : static_transform_publisher's arguments (base_frame -> frame_id from the
        sensors file's mount), or None when the URDF provides the frame
    """

    lidar_parameters: dict[str, Any]
    topic: str
    frame_id: str
    point_type: str
    robot_description: str | None = None
    static_transform: list[str] | None = field(default=None)


def _flag(value: str, name: str) -> bool:
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise ConfigError(f"launch argument {name} = {value!r}: expected true or false")
    return text == "true"


def lidar_launch_plan(arguments: dict[str, str]) -> LaunchPlan:
    """The plan for the launch arguments (``LAUNCH_ARGUMENTS``' names, string values as launch
    gives them; missing ones take their defaults).

    Raises ``ConfigError`` when the sensors file does not load, the URDF does not parse, or the
    URDF lacks the base frame or the cloud's frame (the message says which argument fixes it).
    """
    from acres_lidar_ros.config.sensors import load_sensor_config
    from acres_lidar_ros.outputs.point_types import PROFILES

    args = {name: default for name, default, _ in LAUNCH_ARGUMENTS} | {k: str(v) for k, v in arguments.items()}
    unknown = sorted(set(args) - {name for name, _, _ in LAUNCH_ARGUMENTS})
    if unknown:
        raise ConfigError(
            f"launch argument {unknown[0]!r}: unknown; allowed: {', '.join(n for n, _, _ in LAUNCH_ARGUMENTS)}"
        )
    config = load_sensor_config(args["sensors"])
    topic = args["topic"] or config.topic
    frame_id = args["frame_id"] or config.frame_id
    point_type = args["point_type"] or config.point_type
    if point_type not in PROFILES:
        raise ConfigError(f"launch argument point_type = {point_type!r}: allowed: {', '.join(PROFILES)}")
    sim_time = _flag(args["use_sim_time"], "use_sim_time")
    parameters: dict[str, Any] = {
        "sensors": args["sensors"],
        "scene": args["scene"],
        "topic": topic,
        "point_type": point_type,
        "base_frame": args["base_frame"],
        "use_sim_time": sim_time,
    }
    if frame_id != config.frame_id:
        parameters["lidar.frame_id"] = frame_id
    robot_description = None
    static_transform = None
    if args["urdf"]:
        from acres_lidar_ros.body.urdf import expand_xacro, load_urdf

        path = Path(args["urdf"])
        robot = load_urdf(path)
        for link, argument in ((args["base_frame"], "base_frame"), (frame_id, "frame_id")):
            if link not in robot.links:
                raise ConfigError(
                    f"URDF {str(path)!r} has no link {link!r} (launch argument {argument}, or the sensors file's "
                    f"lidar.frame_id): TF would lack the cloud's frame; links: {', '.join(robot.links)}"
                )
        robot_description = (
            expand_xacro(path).decode("utf-8") if path.suffix == ".xacro" else path.read_text(encoding="utf-8")
        )
    else:
        x, y, z = (f"{v:.9g}" for v in config.position_flu_m)
        qx, qy, qz, qw = (f"{v:.9g}" for v in Rotation.from_euler("xyz", config.rpy_rad).as_quat())
        static_transform = [
            *("--x", x, "--y", y, "--z", z),
            *("--qx", qx, "--qy", qy, "--qz", qz, "--qw", qw),
            *("--frame-id", args["base_frame"], "--child-frame-id", frame_id),
        ]
    return LaunchPlan(parameters, topic, frame_id, point_type, robot_description, static_transform)
