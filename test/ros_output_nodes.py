"""Child process of ``test/ros/test_ros_outputs.py``: several ``lidar_node``s in one process.

The node's output options (``point_type``, ``labels``, ``truth``, ``ts_first_point``) are read-only
start-up parameters, so each combination needs a node of its own; starting one process per node
would load the package and the compiled kernels seven times. This script starts the real
``LidarNode`` once per entry of its JSON argument, each in its own namespace with its own
parameter overrides (exactly what ``--ros-args -p`` gives the console script), and spins them all
in one executor until SIGINT or SIGTERM. It prints ``ready`` once every node is up.

    python test/ros_output_nodes.py '[{"namespace": "/n0", "parameters": {"point_type": "XYZIRT"}}]'
"""

from __future__ import annotations

import json
import signal
import sys

import rclpy
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.parameter import Parameter

from acres_lidar_ros.ros.node import LidarNode


def main(argv: list[str]) -> int:
    specs = json.loads(argv[0])
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # ends like Ctrl-C: nodes closed
    rclpy.init()
    nodes: list[LidarNode] = []
    executor = SingleThreadedExecutor()
    try:
        for spec in specs:
            overrides = [Parameter(name, value=value) for name, value in spec["parameters"].items()]
            node = LidarNode(namespace=spec["namespace"], parameter_overrides=overrides)
            nodes.append(node)
            executor.add_node(node)
        print("ready", flush=True)
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        executor.shutdown()
        for node in nodes:
            node.close()
            node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
