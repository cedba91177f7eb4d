"""Ouster OS1-64 packets read back by ouster-sdk (PyPI), a decoder this project did not write:
every decoded pixel is our primary return (from the pcap, the bag's packet messages and live UDP) within the format's 1 mm range step, none is missing
or added, and each column's time is its firing time.

ouster-sdk pins rosbags==0.9.23, which conflicts with ours, so it lives in a venv of its own
(``.ci/run`` makes ``.venv-ouster``; ``ACRES_OUSTER_PYTHON`` names another python) and
``ouster_decode.py`` runs there; the test is skipped where that python is absent.
"""

from __future__ import annotations

import copy
import json
import os
import socket
import subprocess
from pathlib import Path

import numpy as np
import pytest
from packet_scans import scans_of

from acres_lidar_ros.errors import OutputError
from acres_lidar_ros.outputs.bag import BagWriter
from acres_lidar_ros.outputs.layouts import point_cloud
from acres_lidar_ros.packets.formats import (
    PcapRecorder,
    UdpStreamer,
    default_addresses,
    packet_driver,
    packet_encoder,
)
from acres_lidar_ros.packets.ouster import LIDAR_PACKET, LIDAR_PORT
from acres_lidar_ros.packets.packet_bag import OUSTER_TOPIC, PacketBagWriter, register_packet_types
from acres_lidar_ros.packets.pcap_file import PcapStream, merge_records, pcap_records, udp_frames
from acres_lidar_ros.packets.udp_stream import UdpSender

HERE = Path(__file__).resolve().parent
OUSTER_PYTHON = Path(os.environ.get("ACRES_OUSTER_PYTHON", HERE.parents[1] / ".venv-ouster" / "bin" / "python"))
RANGE_TOLERANCE_M = 0.0005 + 1e-5  # half the 1 mm step, plus the metadata's 1e-6 deg angles at 10 m


def _record(directory: Path):
    config, scans = scans_of("os1_64")
    with PcapRecorder(directory / "packets.pcap", packet_encoder("os1_64", config), default_addresses("os1_64")) as r:
        counts = [r.write_scan(scan) for scan in scans]
    return config, scans, counts


def test_packets_and_metadata_layout(tmp_path):
    config, scans, counts = _record(tmp_path)
    assert counts == [64, 64, 64]  # 1024 columns, 16 a packet
    metadata = json.loads((tmp_path / "sensor_metadata.json").read_text())
    fmt = metadata["lidar_data_format"]
    assert (fmt["columns_per_frame"], fmt["columns_per_packet"], fmt["pixels_per_column"]) == (1024, 16, 64)
    assert fmt["udp_profile_lidar"] == "LEGACY" and metadata["config_params"]["lidar_mode"] == "1024x10"
    assert metadata["config_params"]["udp_port_lidar"] == LIDAR_PORT == 7502
    # The SDK's default gen-1 OS1-64 tables (docs/sensors.md): 3.164, 1.055, -1.055, -3.164 deg.
    assert metadata["beam_intrinsics"]["beam_azimuth_angles"][:4] == [3.164, 1.055, -1.055, -3.164]
    assert metadata["beam_intrinsics"]["lidar_origin_to_beam_origin_mm"] == pytest.approx(15.806)
    assert fmt["pixel_shift_by_row"][:4] == [18, 12, 6, 0]  # 6.328 deg x 1024 / 360, ...
    # Each frame: an Ethernet + IPv4 + UDP header, then a 12608-byte payload.
    size = (tmp_path / "packets.pcap").stat().st_size
    assert size == 24 + 3 * 64 * (16 + 14 + 20 + 8 + LIDAR_PACKET.itemsize)


def test_existing_metadata_is_refused(tmp_path):
    (tmp_path / "sensor_metadata.json").write_text("{}")
    with pytest.raises(OutputError, match="sensor_metadata.json exists"):
        _record(tmp_path)
    assert not (tmp_path / "packets.pcap").exists()


def test_ranges_past_65_535_m_fill_the_20_bit_field():
    """Ouster's range is 20 bits of mm (up to 1048.575 m): a range past 16 bits is not wrapped."""
    config, scans = scans_of("os1_64")
    scan = copy.deepcopy(scans[0])
    returns = scan.returns
    beams = np.arange(scan.columns * scan.rings)
    slot = returns.primary_index()
    valid = returns.valid[beams, slot]
    returns.range_m[beams[valid], slot[valid]] += 100.0  # every hit 100 m farther
    encoder = packet_encoder("os1_64", config)
    range_mm = encoder.lidar_packets(scan)["columns"]["pixels"]["range_mm"].reshape(-1)
    expected_mm = np.rint((returns.range_m[beams, slot] + encoder.beam_origin_m) * 1e3)
    assert range_mm.dtype == np.dtype("<u4") and range_mm[valid].min() > 0xFFFF
    np.testing.assert_array_equal(range_mm[valid], expected_mm[valid])
    assert not range_mm[~valid].any()
    returns.range_m[beams[valid][:1], slot[valid][:1]] = 1048.6  # past 2^20 - 1 mm: refused
    with pytest.raises(
        OutputError, match=r"Ouster range_m 1048\.6[0-9]* does not fit the packet.s field \(0 to 1048575 steps"
    ):
        encoder.lidar_packets(scan)


needs_ouster_sdk = pytest.mark.skipif(
    not OUSTER_PYTHON.exists(),
    reason=f"no ouster-sdk python at {OUSTER_PYTHON} (.ci/run makes .venv-ouster; or set ACRES_OUSTER_PYTHON)",
)


def _decode(pcap: Path, metadata: Path, out: Path):
    """ouster-sdk's decoding of ``pcap`` with ``metadata`` (``ouster_decode.py`` in its own venv)."""
    done = subprocess.run(
        [str(OUSTER_PYTHON), str(HERE / "ouster_decode.py"), str(pcap), str(metadata), str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return np.load(out)


def _assert_our_points(decoded, scans) -> None:
    assert decoded["range_mm"].shape == (len(scans), 64, 1024)
    assert list(decoded["frame_id"]) == [scan.index for scan in scans]
    total = 0
    for k, scan in enumerate(scans):
        returns = scan.returns
        beams = np.arange(scan.columns * scan.rings)
        slot = returns.primary_index()
        valid = returns.valid[beams, slot]

        def grid(values, scan=scan):
            """(cells,) in cell order (column-major) -> (rings, columns) as the decoder gives it."""
            return values.reshape(scan.columns, scan.rings).T

        assert np.array_equal(decoded["measurement_id"][k], np.arange(1024))
        column_ns = scan.stamp_ns + np.rint(scan.time_offset_s * 1e9).astype(np.int64)
        assert np.abs(decoded["timestamp_ns"][k].astype(np.int64) - column_ns).max() <= 1000  # 1 us
        has = decoded["range_mm"][k] > 0
        assert np.array_equal(has, grid(valid))
        total += int(has.sum())
        ours = scan.points_sensor[beams, slot].reshape(scan.columns, scan.rings, 3).transpose(1, 0, 2)
        error = np.linalg.norm(decoded["xyz"][k] - ours, axis=2)[has]
        assert error.max() <= RANGE_TOLERANCE_M
        assert np.array_equal(decoded["reflectivity"][k][has], grid(returns.intensity[beams, slot])[has])
        assert np.array_equal(decoded["signal"][k][has], grid(returns.signal[beams, slot])[has])
    primary = [s.returns.valid[np.arange(s.returns.valid.shape[0]), s.returns.primary_index()] for s in scans]
    assert total == sum(int(v.sum()) for v in primary) > 10_000


@needs_ouster_sdk
def test_ouster_sdk_gives_our_points(tmp_path):
    _, scans, _ = _record(tmp_path)
    decoded = _decode(tmp_path / "packets.pcap", tmp_path / "sensor_metadata.json", tmp_path / "decoded.npz")
    _assert_our_points(decoded, scans)
    # ouster_ros's ``range`` is ouster-sdk's ChanField.RANGE (point_cloud_compose.h copies it), and
    # our ``ouster`` cloud's is the same pixel for pixel (rows = pixels, columns = measurement ids).
    for k, scan in enumerate(scans):
        np.testing.assert_array_equal(point_cloud(scan, "ouster")["range"], decoded["range_mm"][k])


@needs_ouster_sdk
def test_packet_messages_in_the_bag_are_the_packets_ouster_sdk_reads(tmp_path):
    """``ouster_sensor_msgs/msg/PacketMsg`` on ``/ouster/lidar_packets``, read back with rosbags; their
    bytes framed into a pcap and decoded by ouster-sdk give our points."""
    from rosbags.highlevel import AnyReader
    from rosbags.typesys import Stores, get_typestore

    config, scans = scans_of("os1_64")
    encoder = packet_encoder("os1_64", config)
    writer = PacketBagWriter(encoder, packet_driver("os1_64"), config.frame_id)
    with BagWriter(tmp_path / "bag") as bag:
        counts = [writer.write_scan(scan, bag) for scan in scans]
    store = register_packet_types(get_typestore(Stores.ROS2_JAZZY))
    with AnyReader([tmp_path / "bag"], default_typestore=store) as reader:
        connections = [c for c in reader.connections if c.topic == OUSTER_TOPIC]
        assert [c.msgtype for c in connections] == ["ouster_sensor_msgs/msg/PacketMsg"]
        rows = [(stamp, reader.deserialize(raw, c.msgtype).buf) for c, stamp, raw in reader.messages(connections)]
    assert len(rows) == sum(counts) == 3 * 64
    payloads = np.stack([np.asarray(buf, np.uint8) for _, buf in rows])
    send_ns = np.array([stamp for stamp, _ in rows], np.int64)
    frames = udp_frames(payloads, default_addresses("os1_64"), LIDAR_PORT, LIDAR_PORT, 0)
    with PcapStream(tmp_path / "from_bag.pcap") as pcap:
        pcap.write(merge_records([(pcap_records(frames, send_ns), send_ns)]), len(frames))
    (tmp_path / "from_bag.json").write_bytes(encoder.metadata_json())
    decoded = _decode(tmp_path / "from_bag.pcap", tmp_path / "from_bag.json", tmp_path / "decoded.npz")
    _assert_our_points(decoded, scans)


def test_record_writes_the_pcap_and_its_metadata(tmp_path):
    import argparse

    from acres_lidar_ros.apps.cmd_record import record_drive
    from acres_lidar_ros.apps.packet_flags import packet_sink
    from acres_lidar_ros.config.sensors import load_sensor_config
    from acres_lidar_ros.scan.scan_types import ScanOptions
    from acres_lidar_ros.scan.scanner import Scanner
    from acres_lidar_ros.scene.builder import SceneBuilder
    from acres_lidar_ros.scene.grids import TerrainGrid
    from acres_lidar_ros.sensor.poses import PoseHistory
    from acres_lidar_ros.tracing.trace import Tracer

    config = load_sensor_config("os1_64").with_overrides({"position_flu_m": [0.0, 0.0, 1.9], "sub_rays": 1})
    tracer = Tracer(SceneBuilder(TerrainGrid(np.array([-300.0, -300.0]), 600.0, np.zeros((2, 2)))).build())
    scanner = Scanner(config, tracer=tracer, options=ScanOptions(self_returns=False, seed=1))
    t = np.arange(0.0, 0.2001, 0.02)
    drive = PoseHistory.from_arrays(t, np.column_stack([2.0 * t, 0 * t, 0 * t]), np.tile([0, 0, 0, 1.0], (t.size, 1)))
    given = dict(packets="pcap", pcap=None, sensor_ip=None, host_ip=None, udp_host="127.0.0.1")
    args = argparse.Namespace(**given, udp_source_port=0, udp_broadcast=False, sensor="os1_64")
    summary = record_drive(scanner, drive, tmp_path / "run", files="none", packets=packet_sink(args, config))
    # Scans at 0, 0.1, 0.2 s; the one at 0 s swept the period before 0 s: no UNIX time, no packets.
    assert (summary.scans, summary.scans_without_packets, summary.packets) == (3, 1, 2 * 64)
    run = tmp_path / "run"
    assert (run / "packets.pcap").stat().st_size == 24 + 2 * 64 * (16 + 14 + 20 + 8 + LIDAR_PACKET.itemsize)
    assert json.loads((run / "sensor_metadata.json").read_text())["config_params"]["lidar_mode"] == "1024x10"
    # --pcap FILE: its metadata is FILE.json, refused before anything is written where it exists.
    (tmp_path / "mine.json").write_text("{}")
    with pytest.raises(OutputError, match="mine.json exists already"):
        packet_sink(argparse.Namespace(**{**vars(args), "pcap": tmp_path / "mine.pcap"}), config)


class _ManualClock:
    """A monotonic clock (ns) that advances only when slept on."""

    def __init__(self) -> None:
        self.now_ns = 7_000_000_000
        self.sleeps_s: list[float] = []

    def __call__(self) -> int:
        return self.now_ns

    def sleep(self, seconds: float) -> None:
        self.sleeps_s.append(seconds)
        self.now_ns += int(round(seconds * 1e9))


def _loopback_receiver(expected: int):
    """A UDP socket on 127.0.0.1 and a thread that keeps (arrival ns, payload) of at most
    ``expected`` datagrams, giving up after 3 s without one."""
    import threading
    import time

    receiver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    receiver.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    receiver.bind(("127.0.0.1", 0))
    receiver.settimeout(3.0)
    got: list[tuple[int, bytes]] = []

    def receive() -> None:
        try:
            while len(got) < expected:
                data = receiver.recv(65536)
                got.append((time.monotonic_ns(), data))
        except TimeoutError:
            pass

    thread = threading.Thread(target=receive)
    thread.start()
    return receiver, thread, got


def _column_headers(payloads: list[bytes]) -> np.ndarray:
    """(packets, 16) column headers of LEGACY lidar packets, by the firmware manual's layout: each
    column 788 bytes from its start, uint64 timestamp, uint16 measurement id, uint16 frame id."""
    header = np.dtype([("timestamp_ns", "<u8"), ("measurement_id", "<u2"), ("frame_id", "<u2")])
    rows = np.stack([np.frombuffer(p, np.uint8) for p in payloads]).reshape(len(payloads), 16, 788)
    return np.ascontiguousarray(rows[:, :, :12]).view(header)[..., 0]


def test_live_udp_paces_the_lidar_packets_at_their_column_times():
    """Paced on an injected clock: each packet leaves 16 columns (1.5625 ms at 1024 x 10) after the
    one before, in order of their measurement ids, to the port given for ``lidar``."""
    config, scans = scans_of("os1_64")
    receiver, thread, got = _loopback_receiver(64)
    clock = _ManualClock()
    port = receiver.getsockname()[1]
    sender = UdpSender("127.0.0.1", ports={"lidar": port}, clock_ns=clock, sleep_s=clock.sleep)
    with UdpStreamer(packet_encoder("os1_64", config), sender) as stream:
        assert stream.write_scan(scans[0]) == 64
    thread.join(timeout=10)
    receiver.close()
    assert len(got) == 64 and {len(p) for _, p in got} == {LIDAR_PACKET.itemsize} == {12608}
    headers = _column_headers([p for _, p in got])
    assert np.array_equal(headers["measurement_id"].reshape(-1), np.arange(1024))
    assert np.all(headers["frame_id"] == scans[0].index)
    assert np.allclose(clock.sleeps_s, 0.1 * 16 / 1024, rtol=0, atol=1e-9) and len(clock.sleeps_s) == 63
    assert np.all(sender.lateness_ns == 0) and sender.late == 0


@needs_ouster_sdk
def test_live_udp_packets_are_the_ones_ouster_sdk_reads(tmp_path):
    """Three scans sent live to loopback against the wall clock (about 0.3 s): the 192 datagrams
    received, framed into a pcap at their arrival times, give ouster-sdk our points."""
    config, scans = scans_of("os1_64")
    encoder = packet_encoder("os1_64", config)
    receiver, thread, got = _loopback_receiver(3 * 64)
    sender = UdpSender("127.0.0.1", ports={"lidar": receiver.getsockname()[1]})
    with UdpStreamer(encoder, sender) as stream:
        sent = [stream.write_scan(scan) for scan in scans]
    thread.join(timeout=10)
    receiver.close()
    assert sent == [64, 64, 64] and len(got) == 192
    payloads = np.stack([np.frombuffer(p, np.uint8) for _, p in got])
    arrival_ns = np.array([t for t, _ in got], np.int64) - got[0][0] + int(scans[0].stamp_ns)
    frames = udp_frames(payloads, default_addresses("os1_64"), LIDAR_PORT, LIDAR_PORT, 0)
    with PcapStream(tmp_path / "live.pcap") as pcap:
        pcap.write(merge_records([(pcap_records(frames, arrival_ns), arrival_ns)]), len(frames))
    (tmp_path / "live.json").write_bytes(encoder.metadata_json())
    decoded = _decode(tmp_path / "live.pcap", tmp_path / "live.json", tmp_path / "decoded.npz")
    _assert_our_points(decoded, scans)
