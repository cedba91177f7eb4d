"""The node's ``packets: ros`` against real ROS 2: ``lidar_node`` in its own process publishes each
scan's packets as its driver's messages (docs/packets.md, "From the node"); this process receives
them beside the clouds and decodes them with readers the project did not write (velodyne-decoder,
ouster-sdk) or written from the format's description (``helios_reader``): each scan's packets give
that scan's cloud, point for point within the format's steps.

Runs where rclpy and the sensor's message package import (a ROS 2 workspace with ``rslidar_msg``,
``velodyne_msgs`` and ``ouster_sensor_msgs`` built); skipped naming the package elsewhere (the PyPI
ROS wheels have none of them). Sim time is this process's own clock (``ros_sim_feed``); every wait
is a bounded number of steps.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

rclpy = pytest.importorskip(
    "rclpy", reason="rclpy is not installed (pip install -r requirements-ros.txt, or source ROS 2): skipped"
)

from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from ros_sim_feed import NS, START_NS, SimFeed, process_output, set_stamp, stamp_ns  # noqa: E402
from scipy.spatial import cKDTree  # noqa: E402

from acres_lidar_ros.config.sensors import load_sensor_config  # noqa: E402
from acres_lidar_ros.outputs.pointcloud2 import decode_pointcloud2  # noqa: E402

PACKETS_DIR = Path(__file__).resolve().parents[1] / "packets"
sys.path.insert(0, str(PACKETS_DIR))
SCANS = 3
MAX_STEPS = 150_000
#: (sensor, message package, type, topic, extra parameters)
CASES = [
    ("helios5515", "rslidar_msg", "RslidarPacket", "/rslidar_packets", []),
    ("vlp16", "velodyne_msgs", "VelodyneScan", "/velodyne_packets", ["lidar.return_mode:=strongest"]),
    ("os1_64", "ouster_sensor_msgs", "PacketMsg", "/ouster/lidar_packets", []),
]
#: Position bound: half the range step, 0.01 deg steps at the range, the lens offset's 0.12 mm, float32.
RANGE_STEP_M = {"helios5515": 0.0025, "vlp16": 0.002, "os1_64": 0.001}
ANGLE_RAD = {"helios5515": np.radians(0.01), "vlp16": np.radians(0.0116), "os1_64": 1e-7}
OUSTER_PYTHON = Path(
    os.environ.get("ACRES_OUSTER_PYTHON", Path(__file__).resolve().parents[2] / ".venv-ouster" / "bin" / "python")
)


def _odom_publisher(node):
    pub = node.create_publisher(Odometry, "/odom", 50)

    def publish(ns: int) -> None:
        msg = Odometry()
        set_stamp(msg.header.stamp, ns)
        msg.header.frame_id, msg.child_frame_id = "odom", "base_footprint"
        msg.pose.pose.position.x = 2.0 * (ns - START_NS) / NS  # 2 m/s along x
        msg.pose.pose.orientation.w = 1.0
        pub.publish(msg)

    return publish


def _run_node(sensor: str, msg_type, topic: str, extra: list[str], enough):
    """Start ``lidar_node`` with ``packets: ros`` for ``sensor``; feed sim time until ``enough(packets,
    clouds)``; return (packet messages, clouds, node output)."""
    script = Path(sys.executable).with_name("lidar_node")
    if not script.exists():
        pytest.skip(f"no lidar_node console script beside {sys.executable} (pip install -e .)")
    params = ["use_sim_time:=true", f"sensors:={sensor}", "packets:=ros", "topic:=/lidar/points"]
    params += ["lidar.self_returns:=''", *extra]
    argv = [str(script), "--ros-args"] + [part for p in params for part in ("-p", p)]
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        process.log = log
        rclpy.init()
        node = rclpy.create_node("acres_packets_test")
        packets: list = []
        qos = QoSProfile(
            reliability=ReliabilityPolicy.RELIABLE,
            durability=DurabilityPolicy.VOLATILE,
            history=HistoryPolicy.KEEP_LAST,
            depth=1000,
        )
        node.create_subscription(msg_type, topic, packets.append, qos)
        feed = SimFeed(node, _odom_publisher(node))
        try:
            feed.run_until(lambda: enough(packets, feed.clouds) or process.poll() is not None, MAX_STEPS)
            output = process_output(process)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
            feed.close()
            rclpy.try_shutdown()
    return packets, list(feed.clouds), output


def _xyz(cloud) -> np.ndarray:
    points = decode_pointcloud2(cloud)
    xyz = np.stack([points["x"], points["y"], points["z"]], axis=-1).reshape(-1, 3).astype(np.float64)
    return xyz[np.all(np.isfinite(xyz), axis=1)]


def _cloud_of(clouds, time_ns: int, decoded: np.ndarray) -> np.ndarray:
    """The returns of the cloud of the scan that fired at ``time_ns`` (a time of its sweep): of the
    clouds stamped within 1.5 periods, the one holding most of ``decoded`` within 5 mm (the drive
    moves 0.2 m a scan, so a neighbouring scan's cloud holds few)."""
    stamps = np.array([stamp_ns(c.header.stamp) for c in clouds], np.int64)
    near = np.flatnonzero(np.abs(stamps - time_ns) <= 3 * NS // 20)
    assert near.size, (stamps, time_ns)
    candidates = [_xyz(clouds[k]) for k in near]
    held = [int((cKDTree(xyz).query(decoded)[0] < 0.005).sum()) for xyz in candidates]
    return candidates[int(np.argmax(held))]


def _assert_same_points(sensor: str, decoded: np.ndarray, cloud_xyz: np.ndarray) -> None:
    """One decoded point for each return of the cloud, each within the format's steps of one."""
    assert decoded.shape[0] == cloud_xyz.shape[0] > 1000
    distance, _ = cKDTree(cloud_xyz).query(decoded)
    range_m = np.linalg.norm(decoded, axis=1)
    bound = RANGE_STEP_M[sensor] / 2 + 0.00012 + range_m * ANGLE_RAD[sensor] + 1e-6 * (1 + range_m)
    assert np.all(distance <= bound), float((distance - bound).max())


def _helios(packets, clouds) -> int:
    from helios_reader import decode_packets

    assert packets[0].is_difop  # the stream starts with a DIFOP (rs_driver waits for one)
    ports = [7788 if p.is_difop else 6699 for p in packets]
    payloads = [np.frombuffer(bytes(p.data), np.uint8) for p in packets]
    points, info = decode_packets(ports, payloads)
    begins = [p for p in packets if p.is_frame_begin]
    assert all(not p.is_difop for p in begins) and info["rpm"] == 600
    checked = 0
    for frame in range(SCANS):  # frames split where the azimuth wraps: each a whole scan
        mine = points.frame == frame
        assert np.unique(points.column[mine]).size <= 1800
        cloud_xyz = _cloud_of(clouds, int(round(points.time_s[mine].max() * 1e9)), points.xyz[mine])
        _assert_same_points("helios5515", points.xyz[mine], cloud_xyz)
        checked += 1
    return checked


def _velodyne(packets, clouds) -> int:
    vd = pytest.importorskip("velodyne_decoder", reason="velodyne-decoder reads the VelodyneScan packets")
    from test_velodyne_packets import _calibration

    config = vd.Config(model=vd.Model.VLP16, calibration=_calibration(load_sensor_config("vlp16")))
    config.min_range, config.max_range = 0.0, 1000.0
    decoder = vd.ScanDecoder(config)
    for message in packets[:SCANS]:
        assert (message.header.stamp.sec, message.header.stamp.nanosec) == (
            message.packets[-1].stamp.sec,
            message.packets[-1].stamp.nanosec,
        )  # stamped with its last packet's time, as velodyne_driver does
        vector = vd.PacketVector(
            [vd.VelodynePacket(p.stamp.sec + p.stamp.nanosec * 1e-9, bytes(p.data)) for p in message.packets]
        )
        _, cloud = decoder.decode(vector)
        decoded = np.stack([cloud[:, vd.PointField.x], cloud[:, vd.PointField.y], cloud[:, vd.PointField.z]], axis=1)
        decoded = decoded.astype(np.float64)
        _assert_same_points("vlp16", decoded, _cloud_of(clouds, stamp_ns(message.header.stamp), decoded))
    return SCANS


def _ouster(packets, clouds, tmp_path: Path) -> int:
    if not OUSTER_PYTHON.exists():
        pytest.skip(f"no ouster-sdk python at {OUSTER_PYTHON} (.ci/run makes .venv-ouster; or set ACRES_OUSTER_PYTHON)")
    from acres_lidar_ros.packets.formats import default_addresses, packet_encoder
    from acres_lidar_ros.packets.ouster import LIDAR_PORT
    from acres_lidar_ros.packets.pcap_file import PcapStream, merge_records, pcap_records, udp_frames

    payloads = np.stack([np.frombuffer(bytes(p.buf), np.uint8) for p in packets])
    assert payloads.shape[1] == 12608
    # The frames whose 64 packets all came (the first scans' may be missed while the topic connects).
    frame_id = payloads[:, 10:12].copy().view("<u2")[:, 0]
    ids, counts = np.unique(frame_id, return_counts=True)
    whole = ids[counts == 64][:SCANS]
    assert whole.size == SCANS, (ids, counts)
    payloads = payloads[np.isin(frame_id, whole)]
    column_ns = payloads[:, :8].copy().view("<u8")[:, 0].astype(np.int64)  # each packet's first column time
    frames = udp_frames(payloads, default_addresses("os1_64"), LIDAR_PORT, LIDAR_PORT, 0)
    with PcapStream(tmp_path / "node.pcap") as pcap:
        pcap.write(merge_records([(pcap_records(frames, column_ns), column_ns)]), len(frames))
    (tmp_path / "node.json").write_bytes(packet_encoder("os1_64", load_sensor_config("os1_64")).metadata_json())
    done = subprocess.run(
        [str(OUSTER_PYTHON), str(PACKETS_DIR / "ouster_decode.py"), str(tmp_path / "node.pcap")]
        + [str(tmp_path / "node.json"), str(tmp_path / "decoded.npz")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    decoded = np.load(tmp_path / "decoded.npz")
    assert decoded["range_mm"].shape == (SCANS, 64, 1024) and list(decoded["frame_id"]) == list(whole)
    for k in range(SCANS):
        xyz = decoded["xyz"][k][decoded["range_mm"][k] > 0]
        _assert_same_points("os1_64", xyz, _cloud_of(clouds, int(decoded["timestamp_ns"][k].max()), xyz))
    return SCANS


@pytest.mark.parametrize(("sensor", "package", "type_name", "topic", "extra"), CASES, ids=[c[0] for c in CASES])
def test_the_nodes_packet_messages_decode_to_its_clouds(sensor, package, type_name, topic, extra, tmp_path):
    if importlib.util.find_spec(package) is None:
        pytest.skip(f"the {package} ROS 2 message package is not installed (build it in a ROS 2 workspace)")
    msg_type = getattr(importlib.import_module(f"{package}.msg"), type_name)
    want = {"helios5515": lambda p: sum(m.is_frame_begin for m in p) > SCANS, "vlp16": lambda p: len(p) >= SCANS}
    enough = want.get(sensor, lambda p: len(p) >= 64 * (SCANS + 1))
    packets, clouds, output = _run_node(sensor, msg_type, topic, extra, lambda p, c: enough(p) and len(c) >= SCANS + 1)
    assert enough(packets), f"{len(packets)} packet messages, {len(clouds)} clouds; node output:\n{output}"
    checked = {"helios5515": _helios, "vlp16": _velodyne}.get(sensor)
    count = checked(packets, clouds) if checked is not None else _ouster(packets, clouds, tmp_path)
    assert count == SCANS
