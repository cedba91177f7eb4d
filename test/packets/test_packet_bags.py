"""Packet messages in the rosbag2: rslidar_msg/msg/RslidarPacket and velodyne_msgs/msg/VelodyneScan,
registered from their .msg definitions, read back with rosbags and decoded (velodyne-decoder for the
Velodyne scans, the format's reader for the Helios packets) into our returns."""

from __future__ import annotations

import numpy as np
import pytest
from helios_reader import decode_packets
from packet_scans import our_returns, scans_of

from acres_lidar_ros.outputs.bag import BagWriter
from acres_lidar_ros.packets.formats import packet_encoder
from acres_lidar_ros.packets.packet_bag import RSLIDAR_TOPIC, VELODYNE_TOPIC, PacketBagWriter, register_packet_types


def _bag(tmp_path, sensor, driver):
    config, scans = scans_of(sensor)
    writer = PacketBagWriter(packet_encoder(sensor, config), driver, config.frame_id)
    with BagWriter(tmp_path / "bag") as bag:
        counts = [writer.write_scan(scan, bag) for scan in scans]
    return config, scans, counts


def _messages(tmp_path, topic):
    from rosbags.highlevel import AnyReader
    from rosbags.typesys import Stores, get_typestore

    store = register_packet_types(get_typestore(Stores.ROS2_JAZZY))
    with AnyReader([tmp_path / "bag"], default_typestore=store) as reader:
        connections = [c for c in reader.connections if c.topic == topic]
        assert len(connections) == 1
        return connections[0], [
            (stamp, reader.deserialize(raw, c.msgtype)) for c, stamp, raw in reader.messages(connections=connections)
        ]


def test_rslidar_packets_in_the_bag_decode_to_our_points(tmp_path):
    _, scans, counts = _bag(tmp_path, "helios5515", "rslidar")
    connection, messages = _messages(tmp_path, RSLIDAR_TOPIC)
    assert connection.msgtype == "rslidar_msg/msg/RslidarPacket"
    assert len(messages) == sum(counts) == 2 + 3 * 150
    difop = [m.is_difop for _, m in messages]
    assert difop[0] == 1 and sum(difop) == 2  # a DIFOP first, then one at the whole second
    assert sum(m.is_frame_begin for _, m in messages) == 3  # the first MSOP of each scan
    ports = [7788 if m.is_difop else 6699 for _, m in messages]
    points, _ = decode_packets(ports, [np.asarray(m.data, np.uint8) for _, m in messages])
    ours = our_returns(scans)
    assert points.distance_m.size == ours["cell"].size
    mine = np.lexsort((ours["range_m"], ours["cell"], ours["scan"]))
    theirs = np.lexsort((points.distance_m, points.column * 32 + points.channel, points.frame))
    assert np.array_equal(ours["cell"][mine], (points.column * 32 + points.channel)[theirs])
    assert np.abs(points.distance_m[theirs] - ours["range_m"][mine]).max() <= 0.00125 + 1e-9
    assert np.abs(points.time_s[theirs] - ours["time_s"][mine]).max() < 1e-6


def test_velodyne_scans_in_the_bag_are_read_by_velodyne_decoder(tmp_path):
    vd = pytest.importorskip("velodyne_decoder", reason="velodyne-decoder reads the VelodyneScan packets")
    _, scans, counts = _bag(tmp_path, "vlp16", "velodyne")
    connection, messages = _messages(tmp_path, VELODYNE_TOPIC)
    assert connection.msgtype == "velodyne_msgs/msg/VelodyneScan" and len(messages) == 3
    decoder = vd.ScanDecoder(vd.Config(model=vd.Model.VLP16))
    total = 0
    for (_, message), scan, count in zip(messages, scans, counts):
        assert len(message.packets) == count == 151  # dual return: 12 sequences a packet
        last = message.packets[-1].stamp
        assert (message.header.stamp.sec, message.header.stamp.nanosec) == (last.sec, last.nanosec)  # velodyne_driver
        packets = vd.PacketVector(
            [vd.VelodynePacket(p.stamp.sec + p.stamp.nanosec * 1e-9, bytes(p.data)) for p in message.packets]
        )
        _, cloud = decoder.decode(packets)
        # The decoder's default range gate (0.1 .. 200 m) keeps every return of the sensor's 0.9 .. 100 m.
        assert cloud.shape[0] == int(scan.returns.valid.sum())
        total += cloud.shape[0]
    assert total > 10_000
