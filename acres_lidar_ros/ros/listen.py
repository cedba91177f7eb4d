"""``python -m acres_lidar_ros.ros.listen``: print the clouds that arrive, as a consumer sees them.

A tiny subscriber with rslidar_sdk's QoS (reliable, volatile, keep last 100) for trying the node
without a ROS install (no ``ros2 topic echo`` there): one line per cloud with its stamp, its
organised size, its fields, the number of returns and how long it took from the publisher's
``publish`` to this process (the middleware's source and receive timestamps). With ``--count N``
it stops after N clouds and prints the median and p95 of that latency.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from acres_lidar_ros.outputs.pointcloud2 import decode_pointcloud2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m acres_lidar_ros.ros.listen", description=__doc__.split("\n")[0])
    parser.add_argument("--topic", default="/lidar/points", help="PointCloud2 topic (default /lidar/points)")
    parser.add_argument("--count", type=int, default=0, help="stop after this many clouds (default: until Ctrl-C)")
    args, ros_args = parser.parse_known_args(argv)
    if args.count < 0:
        parser.error(f"--count {args.count}: expected an integer >= 0")

    import rclpy
    from rclpy.executors import ExternalShutdownException
    from sensor_msgs.msg import PointCloud2

    from acres_lidar_ros.ros.node import cloud_qos

    rclpy.init(args=ros_args)
    latencies_ms: list[float] = []
    node = rclpy.create_node("acres_lidar_listen")

    def on_cloud(msg: PointCloud2, info: dict) -> None:
        latency_ms = (info["received_timestamp"] - info["source_timestamp"]) * 1e-6
        latencies_ms.append(latency_ms)
        cloud = decode_pointcloud2(msg)
        returns = int(np.isfinite(cloud["x"]).sum())
        fields = " ".join(f"{f.name}@{f.offset}" for f in msg.fields)
        stamp_s = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        print(
            f"{args.topic} stamp {stamp_s:.3f} s, {msg.height} x {msg.width} ({fields}), {returns} returns, "
            f"publish -> receive {latency_ms:.2f} ms",
            flush=True,
        )

    # rclpy passes the MessageInfo to a callback of two parameters (its annotation names one).
    node.create_subscription(PointCloud2, args.topic, on_cloud, cloud_qos(100))  # type: ignore[arg-type]
    try:
        while rclpy.ok() and (not args.count or len(latencies_ms) < args.count):
            rclpy.spin_once(node, timeout_sec=0.5)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
    if latencies_ms:
        v = np.asarray(latencies_ms)
        print(
            f"{v.size} clouds: publish -> receive median {np.median(v):.2f} ms, p95 {np.percentile(v, 95):.2f} ms, "
            f"max {v.max():.2f} ms"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
