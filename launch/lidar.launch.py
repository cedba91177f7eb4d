"""Any sensor on any vehicle: lidar_node for one or several sensors files, their frames in TF,
optionally the demo drive.

    ros2 launch acres_lidar_ros lidar.launch.py sensors:=vlp16 urdf:=my_tractor.urdf demo:=true
    ros2 launch acres_lidar_ros lidar.launch.py sensors:=my_sensor.json    # static TF from its mount
    ros2 launch acres_lidar_ros lidar.launch.py sensors:=polaris,vlp16 urdf:=urdf/polaris.urdf   # one node, one scene

Topic, frame and point type come from each sensors file (each shipped sensor's driver defaults)
unless topic:=, frame_id:= (one sensor only), point_type:= override them. Several sensors,
separated by commas, run in one lidar_node over one scene (its lidar_set parameter). TF has each
cloud's frame: with urdf:=, robot_state_publisher publishes the URDF; a frame that is no link of
it, and every frame without urdf:=, gets a static transform base_frame -> frame from its sensors
file's mount. The plan is
``acres_lidar_ros.ros.launch_plan.lidar_launch_plan`` (plain Python, tested without launch);
polaris.launch.py stays the Polaris's shortcut. Arguments: ``launch_plan.LAUNCH_ARGUMENTS``.
"""

from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue

from acres_lidar_ros.ros.launch_plan import LAUNCH_ARGUMENTS, lidar_launch_plan
from launch import LaunchDescription


def _nodes(context, *_args, **_kwargs):
    values = {name: LaunchConfiguration(name).perform(context) for name, _, _ in LAUNCH_ARGUMENTS}
    plan = lidar_launch_plan(values)
    sim_time = plan.lidar_parameters["use_sim_time"]
    nodes = [
        Node(
            package="acres_lidar_ros",
            executable="lidar_node",
            name=values["node_name"],
            output="screen",
            emulate_tty=True,
            parameters=[plan.lidar_parameters],
        )
    ]
    if plan.robot_description is not None:
        nodes.append(
            Node(
                package="robot_state_publisher",
                executable="robot_state_publisher",
                name="robot_state_publisher",
                output="screen",
                parameters=[{"robot_description": plan.robot_description, "use_sim_time": sim_time}],
            )
        )
    for i, arguments in enumerate(plan.static_transforms):  # the frames the URDF lacks, or every one without it
        nodes.append(
            Node(
                package="tf2_ros",
                executable="static_transform_publisher",
                name=f"{values['node_name']}_mount" + (f"_{i}" if len(plan.sensors) > 1 else ""),
                output="screen",
                arguments=arguments,
                parameters=[{"use_sim_time": sim_time}],
            )
        )
    return nodes


def generate_launch_description() -> LaunchDescription:
    return LaunchDescription(
        [
            *(
                DeclareLaunchArgument(name, default_value=default, description=text)
                for name, default, text in LAUNCH_ARGUMENTS
            ),
            OpaqueFunction(function=_nodes),
            Node(
                package="acres_lidar_ros",
                executable="demo_drive",
                name="demo_drive",
                output="screen",
                condition=IfCondition(LaunchConfiguration("demo")),
                # The demo drive owns /clock when use_sim_time is true, so it runs on the wall clock.
                parameters=[
                    {
                        "publish_clock": ParameterValue(LaunchConfiguration("use_sim_time"), value_type=bool),
                        "base_frame": LaunchConfiguration("base_frame"),
                        "use_sim_time": False,
                    }
                ],
            ),
        ]
    )
