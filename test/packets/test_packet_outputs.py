"""``record --packets``: a pcap beside the bag, whole or absent; live UDP paced at the packet rate on
loopback; and the refusals (no packet format, an existing pcap, broadcast, a port in use, an
unreachable host), each before anything is written."""

from __future__ import annotations

import argparse
import errno
import socket
import threading

import numpy as np
import pytest

from acres_lidar_ros.apps.cmd_record import record_drive
from acres_lidar_ros.apps.packet_flags import packet_sink
from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.errors import ConfigError, OutputError
from acres_lidar_ros.packets import udp_stream
from acres_lidar_ros.packets.formats import PcapRecorder, UdpStreamer, default_addresses, packet_encoder
from acres_lidar_ros.packets.helios import DIFOP_PORT, MSOP_PORT
from acres_lidar_ros.packets.packet_types import PacketGroup
from acres_lidar_ros.packets.udp_stream import UdpSender
from acres_lidar_ros.scan.scan_types import ScanOptions
from acres_lidar_ros.scan.scanner import Scanner
from acres_lidar_ros.scene.builder import SceneBuilder
from acres_lidar_ros.scene.grids import TerrainGrid
from acres_lidar_ros.sensor.poses import PoseHistory
from acres_lidar_ros.tracing.trace import Tracer

dpkt = pytest.importorskip("dpkt", reason="dpkt (comes with velodyne-decoder) parses the pcap independently")


def _drive():
    config = load_sensor_config("helios5515").with_overrides({"position_flu_m": [0.0, 0.0, 1.9]})
    tracer = Tracer(SceneBuilder(TerrainGrid(np.array([-300.0, -300.0]), 600.0, np.zeros((2, 2)))).build())
    scanner = Scanner(config, tracer=tracer, options=ScanOptions(self_returns=False, seed=1))
    t = np.arange(0.0, 0.3001, 0.02)
    drive = PoseHistory.from_arrays(t, np.column_stack([2.0 * t, 0 * t, 0 * t]), np.tile([0, 0, 0, 1.0], (t.size, 1)))
    return config, scanner, drive


def _args(**given):
    base = dict(
        packets=None,
        pcap=None,
        sensor_ip=None,
        host_ip=None,
        udp_host="127.0.0.1",
        udp_source_port=0,
        udp_broadcast=False,
        sensor="helios5515",
    )
    return argparse.Namespace(**{**base, **given})


def test_record_writes_a_pcap_of_every_scan_with_packets(tmp_path):
    config, scanner, drive = _drive()
    sink = packet_sink(_args(packets="pcap"), config)
    summary = record_drive(scanner, drive, tmp_path / "run", files="none", packets=sink)
    # Scans at 0, 0.1, 0.2, 0.3 s; the one at 0 s swept the period before 0 s: no UNIX time, no packets.
    assert (summary.scans, summary.scans_without_packets) == (4, 1)
    with open(tmp_path / "run" / "packets.pcap", "rb") as handle:
        ports = [dpkt.ethernet.Ethernet(frame).data.data.dport for _, frame in dpkt.pcap.Reader(handle)]
    assert ports[0] == DIFOP_PORT and ports.count(MSOP_PORT) == 3 * 150  # 12 columns a packet
    assert ports.count(DIFOP_PORT) == 1  # the sweeps [0, 0.3) s hold one whole second, 0 s, before the first MSOP
    assert summary.packets == len(ports)


def test_a_failed_run_leaves_no_pcap(tmp_path):
    config, scanner, drive = _drive()
    encoder = packet_encoder("helios5515", config)

    class Failing(PcapRecorder):
        def write_scan(self, scan, bag=None):
            if scan.index >= 2:
                raise OutputError("the disk is full (simulated)")
            return super().write_scan(scan, bag)

    def sink(out_dir):
        return Failing(out_dir / "packets.pcap", encoder, default_addresses("helios5515"))

    with pytest.raises(OutputError, match="simulated"):
        record_drive(scanner, drive, tmp_path / "run", files="none", packets=sink)
    assert not [p for p in (tmp_path / "run").iterdir() if "pcap" in p.name]  # no pcap, no temporary


def test_refusals_come_before_anything_is_written(tmp_path):
    config = load_sensor_config("pandar_xt32")
    with pytest.raises(ConfigError, match=r"sensor pandar_xt32 has no packet format; the sensors with one are polaris"):
        packet_sink(_args(packets="pcap", sensor="pandar_xt32"), config)
    helios = load_sensor_config("helios5515")
    existing = tmp_path / "old.pcap"
    existing.write_bytes(b"x")
    with pytest.raises(OutputError, match="old.pcap exists already; refusing to overwrite it"):
        packet_sink(_args(packets="pcap", pcap=existing), helios)
    with pytest.raises(ConfigError, match="without --packets pcap"):
        packet_sink(_args(pcap=tmp_path / "new.pcap"), helios)
    with pytest.raises(ConfigError, match="expected an IPv4 address"):
        packet_sink(_args(packets="pcap", host_ip="10.0.0"), helios)
    with pytest.raises(ConfigError, match="broadcast or multicast address; pass --udp-broadcast"):
        packet_sink(_args(packets="udp", udp_host="255.255.255.255"), helios)
    with pytest.raises(ConfigError, match="return_mode = 'first': the VLP-16 sends strongest, last"):
        packet_sink(
            _args(packets="pcap", sensor="vlp16"), load_sensor_config("vlp16").with_overrides({"return_mode": "first"})
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.pcap"]


def test_a_source_port_in_use_is_named():
    taken = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    taken.bind(("0.0.0.0", 0))
    try:
        port = taken.getsockname()[1]
        with pytest.raises(OutputError, match=f"--udp-source-port {port}: the port is in use"):
            UdpSender("127.0.0.1", source_port=port)
    finally:
        taken.close()


def test_an_unreachable_host_is_refused_when_the_sender_opens(monkeypatch):
    class NoRoute(socket.socket):
        def connect(self, address):
            raise OSError(errno.ENETUNREACH, "Network is unreachable")

    monkeypatch.setattr(udp_stream.socket, "socket", NoRoute)
    with pytest.raises(
        OutputError, match=r"--udp-host 10.9.8.7: unreachable from this machine \(Network is unreachable\)"
    ):
        UdpSender("10.9.8.7")


class ManualClock:
    def __init__(self) -> None:
        self.now_ns = 5_000_000_000
        self.sleeps: list[float] = []

    def __call__(self) -> int:
        return self.now_ns

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now_ns += int(round(seconds * 1e9))


def test_packets_leave_at_their_send_times_against_the_clock():
    receiver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    receiver.bind(("127.0.0.1", 0))
    receiver.settimeout(5.0)
    port = receiver.getsockname()[1]
    clock = ManualClock()
    sender = UdpSender("127.0.0.1", ports={"msop": port, "difop": port}, clock_ns=clock, sleep_s=clock.sleep)
    send_ns = 1_000_000_000 + 666_667 * np.arange(4)
    msop = PacketGroup("msop", MSOP_PORT, np.arange(4, dtype=np.uint8)[:, None].repeat(8, 1), send_ns)
    difop = PacketGroup("difop", DIFOP_PORT, np.full((1, 3), 9, np.uint8), np.array([1_000_000_000 - 1000]))
    with sender:
        sender.send([difop, msop])
        got = [receiver.recv(2048) for _ in range(5)]
    receiver.close()
    assert got == [bytes([9] * 3)] + [bytes([k] * 8) for k in range(4)]  # in send-time order
    # The DIFOP goes at once, each MSOP when the clock reaches its offset from it: the sleeps are the gaps.
    assert np.allclose(clock.sleeps, [1000e-9] + [666_667e-9] * 3, atol=1e-12)
    assert np.all(sender.lateness_ns == 0) and sender.sent == 5 and sender.late == 0


def test_record_sends_live_udp_to_loopback(tmp_path):
    config, scanner, drive = _drive()
    receiver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    receiver.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    receiver.bind(("127.0.0.1", 0))
    receiver.settimeout(3.0)
    port = receiver.getsockname()[1]
    sizes: list[int] = []

    def receive() -> None:
        try:
            while len(sizes) < 451:
                sizes.append(len(receiver.recv(2048)))
        except TimeoutError:
            pass

    thread = threading.Thread(target=receive)
    thread.start()
    sender = UdpSender("127.0.0.1", ports={"msop": port, "difop": port})
    encoder = packet_encoder("helios5515", config)
    summary = record_drive(
        scanner, drive, tmp_path / "run", files="none", packets=lambda out_dir: UdpStreamer(encoder, sender)
    )
    thread.join(timeout=10)
    receiver.close()
    assert summary.packets == 451 and len(sizes) == 451  # 1 DIFOP + 3 scans x 150 MSOPs, over about 0.3 s
    assert set(sizes) == {1248}
    assert sender.lateness_ns.size == 451
