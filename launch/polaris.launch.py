"""The Polaris with its simulated Helios: robot_state_publisher (urdf/polaris.urdf), lidar_node
(config/polaris.yaml), and optionally the demo drive and RViz.

    ros2 launch acres_lidar_ros polaris.launch.py demo:=true rviz:=true

Arguments: scene (scene file; empty: the built-in farm), sensors (polaris, default or a JSON
path), use_sim_time, demo (drive the built-in tour: /odom, /tf and, with use_sim_time, /clock),
rviz (config/polaris.rviz), point_type (XYZI, XYZIRT, velodyne, ouster, nebula or hesai; docs/outputs.md),
labels (instance labels: the XYZIRT_labels layout, XYZIRT + class + instance).
"""

from pathlib import Path

from launch.actions import DeclareLaunchArgument
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue

from launch import LaunchDescription

SHARE = Path(__file__).resolve().parents[1]  # share/acres_lidar_ros (or the source checkout)

ARGUMENTS = (
    ("scene", "", "Scene file; empty (or default): the built-in farm."),
    ("sensors", "polaris", "Sensors file: polaris, default, or a path to a JSON file."),
    ("use_sim_time", "false", "Run on /clock (the demo drive publishes it when true)."),
    ("demo", "false", "Drive the built-in tour: /odom, /tf odom -> base_footprint (and /clock)."),
    ("rviz", "false", "Start RViz with config/polaris.rviz."),
    ("point_type", "XYZI", "Cloud layout: XYZI (the vehicle's), XYZIRT, velodyne, ouster, nebula or hesai."),
    ("labels", "false", "Instance labels on every point: the XYZIRT_labels layout (point_type XYZI or XYZIRT)."),
)


def generate_launch_description() -> LaunchDescription:
    scene = LaunchConfiguration("scene")
    sensors = LaunchConfiguration("sensors")
    use_sim_time = LaunchConfiguration("use_sim_time")
    point_type = LaunchConfiguration("point_type")
    labels = ParameterValue(LaunchConfiguration("labels"), value_type=bool)
    sim_time = ParameterValue(use_sim_time, value_type=bool)
    robot_description = (SHARE / "urdf" / "polaris.urdf").read_text(encoding="utf-8")

    return LaunchDescription(
        [
            *(
                DeclareLaunchArgument(name, default_value=default, description=text)
                for name, default, text in ARGUMENTS
            ),
            Node(
                package="robot_state_publisher",
                executable="robot_state_publisher",
                name="robot_state_publisher",
                output="screen",
                parameters=[{"robot_description": robot_description, "use_sim_time": sim_time}],
            ),
            Node(
                package="acres_lidar_ros",
                executable="lidar_node",
                name="lidar_node",
                output="screen",
                emulate_tty=True,
                parameters=[
                    str(SHARE / "config" / "polaris.yaml"),
                    {
                        # value_type=str keeps an empty scene an empty string (not YAML null).
                        "scene": ParameterValue(scene, value_type=str),
                        "sensors": ParameterValue(sensors, value_type=str),
                        "point_type": ParameterValue(point_type, value_type=str),
                        "labels": labels,
                        "use_sim_time": sim_time,
                    },
                ],
            ),
            Node(
                package="acres_lidar_ros",
                executable="demo_drive",
                name="demo_drive",
                output="screen",
                condition=IfCondition(LaunchConfiguration("demo")),
                # The demo drive owns /clock when use_sim_time is true, so it runs on the wall clock.
                parameters=[{"publish_clock": sim_time, "use_sim_time": False}],
            ),
            Node(
                package="rviz2",
                executable="rviz2",
                name="rviz2",
                output="screen",
                condition=IfCondition(LaunchConfiguration("rviz")),
                arguments=["-d", str(SHARE / "config" / "polaris.rviz")],
                parameters=[{"use_sim_time": sim_time}],
            ),
        ]
    )
