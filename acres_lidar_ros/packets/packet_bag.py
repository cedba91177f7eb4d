"""The sensor's packets as the drivers' ROS 2 packet messages, in the run's rosbag2 (docs/packets.md).

The message types are registered in the bag's typestore from their ``.msg`` definitions (below,
as the driver repositories write them), so no ROS package is needed to write or read them:

================================  ========================  ======================================
type                              topic                     one message per
================================  ========================  ======================================
``rslidar_msg/msg/RslidarPacket`` ``/rslidar_packets``      MSOP or DIFOP packet (rslidar_sdk's
                                                            ``msg_source: 2``), reliable, depth 100
``velodyne_msgs/msg/VelodyneScan`` ``/velodyne_packets``    scan: its data packets, stamped with
                                                            the last one's time (velodyne_driver)
================================  ========================  ======================================

``ouster_sensor_msgs/msg/PacketMsg`` on ``/ouster/lidar_packets``: one per lidar packet, at its send
time (reliable, depth 10).

Sources: RoboSense-LiDAR/rslidar_msg ``msg/RslidarPacket.msg`` (commit
fe8a95cb242bd294cc3d5e3422f2093fb49a56ee); ros-drivers/velodyne branch ros2
``velodyne_msgs/msg/VelodyneScan.msg``, ``VelodynePacket.msg`` and
``velodyne_driver/src/driver/driver.cpp`` (topic ``velodyne_packets``, depth 10, frame
``velodyne``, stamp of the last packet), commit 04a7ca722eaed13fe902366e0831717e91f9f77a;
ouster-lidar/ouster-ros branch jazzy-devel ``ouster-sensor-msgs/msg/PacketMsg.msg`` (``uint8[] buf``),
``ouster-ros/src/os_pcap_node.cpp`` (topic ``lidar_packets``), commit eaaf35d194627a1ddc34f9e7b3f572dfd17d5313.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.packets.packet_types import PacketGroup

MESSAGE_DEFINITIONS: dict[str, str] = {
    "rslidar_msg/msg/RslidarPacket": "std_msgs/Header header\nuint8 is_difop\nuint8 is_frame_begin\nuint8[] data\n",
    "velodyne_msgs/msg/VelodynePacket": "builtin_interfaces/Time stamp\nuint8[1206] data\n",
    "velodyne_msgs/msg/VelodyneScan": "std_msgs/Header header\nvelodyne_msgs/VelodynePacket[] packets\n",
    "ouster_sensor_msgs/msg/PacketMsg": "uint8[] buf\n",
}
RSLIDAR_TOPIC = "/rslidar_packets"
VELODYNE_TOPIC = "/velodyne_packets"
RSLIDAR_QOS = {"reliability": "reliable", "durability": "volatile", "history": "keep_last", "depth": 100}
OUSTER_TOPIC = "/ouster/lidar_packets"
#: ouster-ros's replay and record launches publish with the system default QoS (reliable, depth 10)
OUSTER_QOS = {"reliability": "reliable", "durability": "volatile", "history": "keep_last", "depth": 10}
VELODYNE_QOS = {"reliability": "reliable", "durability": "volatile", "history": "keep_last", "depth": 10}


def register_packet_types(typestore: Any) -> Any:
    """Add the packet message types to a rosbags typestore (once; returns it)."""
    from rosbags.typesys import get_types_from_msg

    missing = {name: text for name, text in MESSAGE_DEFINITIONS.items() if name not in typestore.types}
    types: dict = {}
    for name, text in missing.items():
        types.update(get_types_from_msg(text, name))
    if types:
        typestore.register(types)
    return typestore


def _time(typestore: Any, stamp_ns: int) -> Any:
    stamp_ns = max(int(stamp_ns), 0)
    return typestore.types["builtin_interfaces/msg/Time"](
        sec=stamp_ns // 1_000_000_000, nanosec=stamp_ns % 1_000_000_000
    )


def _header(typestore: Any, stamp_ns: int, frame_id: str) -> Any:
    return typestore.types["std_msgs/msg/Header"](stamp=_time(typestore, stamp_ns), frame_id=frame_id)


class PacketBagWriter:
    """Writes each scan's packets into an open ``outputs.bag.BagWriter``.

    Parameters
    ----------
    encoder : the sensor's packet encoder (``formats.packet_encoder``)
    driver : ``"rslidar"``, ``"velodyne"`` or ``"ouster"``: the message family
    frame_id : the packets' frame (the driver's: ``rslidar``, ``velodyne``)
    """

    def __init__(self, encoder: Any, driver: str, frame_id: str) -> None:
        if driver not in ("rslidar", "velodyne", "ouster"):
            raise ConfigError(f"--packets bag: driver {driver!r}; the message families are rslidar, velodyne, ouster")
        self.encoder, self.driver, self.frame_id = encoder, driver, frame_id
        self.first = True
        self.scans_before_zero = 0
        self._bag: Any = None

    def _open(self, bag: Any) -> None:
        register_packet_types(bag.typestore)
        if self.driver == "rslidar":
            bag.add_topic(RSLIDAR_TOPIC, "rslidar_msg/msg/RslidarPacket", RSLIDAR_QOS)
        elif self.driver == "ouster":
            bag.add_topic(OUSTER_TOPIC, "ouster_sensor_msgs/msg/PacketMsg", OUSTER_QOS)
        else:
            bag.add_topic(VELODYNE_TOPIC, "velodyne_msgs/msg/VelodyneScan", VELODYNE_QOS)
        self._bag = bag

    def write_scan(self, scan: Any, bag: Any = None) -> int:
        """The scan's packets as messages in ``bag``; returns their number of packets."""
        from acres_lidar_ros.packets.formats import before_time_zero

        if bag is None:
            raise ValueError("packet messages need the run's bag")
        if self._bag is not bag:
            self._open(bag)
        groups = self.encoder.encode(scan, first=self.first)
        if before_time_zero(groups):
            self.scans_before_zero += 1
            return 0
        self.first = False
        if self.driver == "rslidar":
            return self._rslidar(bag, groups)
        if self.driver == "ouster":
            return self._ouster(bag, next(g for g in groups if g.kind == "lidar"))
        return self._velodyne(bag, next(g for g in groups if g.kind == "data"))

    def _rslidar(self, bag: Any, groups: list[PacketGroup]) -> int:
        store = bag.typestore
        message = store.types["rslidar_msg/msg/RslidarPacket"]
        rows = [(int(t), g.kind, i) for g in groups for i, t in enumerate(g.send_ns)]
        rows.sort(key=lambda row: row[0])
        by_kind = {g.kind: g for g in groups}
        first_msop = True
        for send_ns, kind, i in rows:  # one message per packet, as the SDK publishes them
            difop = kind == "difop"
            bag.write_message(
                RSLIDAR_TOPIC,
                send_ns,
                message(
                    header=_header(store, 0 if difop else send_ns, self.frame_id),
                    is_difop=int(difop),
                    is_frame_begin=int(not difop and first_msop),
                    data=np.ascontiguousarray(by_kind[kind].payloads[i]),
                ),
            )
            first_msop = first_msop and difop
        return len(rows)

    def _velodyne(self, bag: Any, data: PacketGroup) -> int:
        store = bag.typestore
        packet = store.types["velodyne_msgs/msg/VelodynePacket"]
        packets = [
            packet(stamp=_time(store, t), data=np.ascontiguousarray(p)) for t, p in zip(data.send_ns, data.payloads)
        ]
        last_ns = int(data.send_ns[-1])
        scan = store.types["velodyne_msgs/msg/VelodyneScan"](
            header=_header(store, last_ns, self.frame_id), packets=packets
        )
        bag.write_message(VELODYNE_TOPIC, last_ns, scan)
        return len(packets)

    def __enter__(self) -> PacketBagWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def _ouster(self, bag: Any, lidar: PacketGroup) -> int:
        """One ``PacketMsg`` per lidar packet at its send time (the message has no header: ouster-ros
        takes the times from the packets' columns)."""
        message = bag.typestore.types["ouster_sensor_msgs/msg/PacketMsg"]
        for send_ns, payload in zip(lidar.send_ns, lidar.payloads):
            bag.write_message(OUSTER_TOPIC, int(send_ns), message(buf=np.ascontiguousarray(payload)))
        return len(lidar.payloads)
