"""The sensor's own packets from ``lidar_node`` (the ``packets`` parameter, docs/packets.md): live
UDP, or the driver's packet messages where their ROS 2 package is installed (rclpy wiring only)."""

from __future__ import annotations

import array
from collections.abc import Callable
from typing import Any

from rclpy.node import Node
from rclpy.time import Time
from std_msgs.msg import Header

from acres_lidar_ros.config.sensors import SensorConfig
from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.runtime.packet_feed import PacketFeed


def packet_feed(
    node: Node, mode: str, udp_host: str, sensors: str, config: SensorConfig, qos: Callable[[int], Any]
) -> PacketFeed | None:
    """The ``packets`` parameter's feed (docs/packets.md): live UDP, or the driver's packet messages
    where their ROS 2 package is installed (published with ``qos(depth)``, the cloud's QoS); None
    without it. Refusals come at start-up."""
    if not mode:
        return None
    from acres_lidar_ros.packets.formats import UdpStreamer, packet_driver, packet_encoder

    encoder = packet_encoder(sensors, config)
    if mode == "udp":
        from acres_lidar_ros.packets.udp_stream import UdpSender

        return PacketFeed(UdpStreamer(encoder, UdpSender(udp_host)))
    return PacketFeed(RosPacketSink(node, encoder, packet_driver(sensors), config.frame_id, qos))


class RosPacketSink:
    """Publishes each scan's packets as the driver's messages: ``rslidar_msg/msg/RslidarPacket`` on
    ``/rslidar_packets`` (one a packet, reliable, depth 100), ``velodyne_msgs/msg/VelodyneScan`` on
    ``/velodyne_packets`` (one a scan, depth 10) or ``ouster_sensor_msgs/msg/PacketMsg`` on
    ``/ouster/lidar_packets`` (one a lidar packet, reliable, depth 128: a scan's 64 packets are
    published at once; ouster-ros's subscribers, sensor data or system default QoS, both take it), as
    ``packets.packet_bag`` writes them into a bag."""

    def __init__(self, node: Node, encoder: Any, driver: str, frame_id: str, qos: Callable[[int], Any]) -> None:
        import importlib

        from acres_lidar_ros.packets.packet_bag import OUSTER_TOPIC

        package = {"rslidar": "rslidar_msg", "velodyne": "velodyne_msgs", "ouster": "ouster_sensor_msgs"}[driver]
        try:
            self.msg = importlib.import_module(f"{package}.msg")
        except ImportError as error:
            raise ConfigError(
                f"packets = 'ros' needs the {package} ROS 2 message package, which is not installed here: build "
                f"it in your workspace (docs/packets.md), or set packets to udp"
            ) from error
        self.encoder, self.driver, self.frame_id = encoder, driver, frame_id
        self.first = True
        if driver == "rslidar":
            self.pub = node.create_publisher(self.msg.RslidarPacket, "/rslidar_packets", qos(100))
        elif driver == "ouster":
            # A scan's 64 packets leave at once: a history of two scans keeps a reliable reader whole.
            self.pub = node.create_publisher(self.msg.PacketMsg, OUSTER_TOPIC, qos(128))
        else:
            self.pub = node.create_publisher(self.msg.VelodyneScan, "/velodyne_packets", qos(10))

    def _header(self, ns: int) -> Header:
        return Header(stamp=Time(nanoseconds=max(int(ns), 0)).to_msg(), frame_id=self.frame_id)

    def write_scan(self, scan: Any, bag: Any = None) -> int:
        from acres_lidar_ros.packets.formats import before_time_zero

        groups = self.encoder.encode(scan, first=self.first)
        if before_time_zero(groups):
            return 0
        self.first = False
        if self.driver == "ouster":
            lidar = next(g for g in groups if g.kind == "lidar")
            for payload in lidar.payloads:  # in send order; the message has no header
                self.pub.publish(self.msg.PacketMsg(buf=array.array("B", payload.tobytes())))
            return len(lidar.payloads)
        if self.driver == "velodyne":
            data = next(g for g in groups if g.kind == "data")
            packets = []
            for t, payload in zip(data.send_ns, data.payloads):
                packets.append(self.msg.VelodynePacket(stamp=Time(nanoseconds=int(t)).to_msg(), data=payload.tolist()))
            self.pub.publish(self.msg.VelodyneScan(header=self._header(int(data.send_ns[-1])), packets=packets))
            return len(packets)
        rows = sorted(
            ((int(t), g.kind == "difop", g.payloads[i]) for g in groups for i, t in enumerate(g.send_ns)),
            key=lambda row: row[0],
        )
        first_msop = True
        for t, difop, payload in rows:
            message = self.msg.RslidarPacket(
                header=self._header(0 if difop else t),
                is_difop=int(difop),
                is_frame_begin=int(not difop and first_msop),
                data=array.array("B", payload.tobytes()),
            )
            self.pub.publish(message)
            first_msop = first_msop and difop
        return len(rows)

    def __exit__(self, *exc: object) -> None:
        return None
