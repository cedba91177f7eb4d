"""pcap files: Ethernet/IPv4/UDP framing read by dpkt, records in send order, a file published
whole when closed and absent after a failure, an existing file never replaced."""

from __future__ import annotations

import numpy as np
import pytest

from acres_lidar_ros.errors import ConfigError, OutputError
from acres_lidar_ros.packets.pcap_file import (
    Addresses,
    PcapStream,
    global_header,
    merge_records,
    pcap_records,
    udp_frames,
)

dpkt = pytest.importorskip("dpkt", reason="dpkt (comes with velodyne-decoder) parses the pcap independently")


def _records(n, size, port, t0_ns, step_ns, fill):
    payloads = np.full((n, size), fill, np.uint8)
    send = t0_ns + step_ns * np.arange(n, dtype=np.int64)
    frames = udp_frames(payloads, Addresses("10.1.2.3", "127.0.0.1"), port, port + 1)
    return pcap_records(frames, send), send


def test_streams_merge_in_send_order_and_dpkt_reads_every_frame(tmp_path):
    a = _records(5, 1248, 6699, 1_000_000_000, 666_700, 0xAB)
    b = _records(2, 1248, 7788, 1_000_500_000, 1_000_000, 0xCD)
    c = _records(3, 512, 8308, 999_000_000, 1_300_000, 0x11)
    path = tmp_path / "p.pcap"
    path.write_bytes(global_header() + merge_records([a, b, c]))
    with open(path, "rb") as handle:
        reader = dpkt.pcap.Reader(handle)
        assert reader.datalink() == dpkt.pcap.DLT_EN10MB
        rows = [(stamp, dpkt.ethernet.Ethernet(frame)) for stamp, frame in reader]
    stamps = [stamp for stamp, _ in rows]
    expected = np.sort(np.concatenate([a[1], b[1], c[1]])) * 1e-9
    assert np.allclose(stamps, expected, atol=1e-6)
    for _, eth in rows:
        ip = eth.data
        assert dpkt.in_cksum(bytes(eth)[14:34]) == 0  # valid header checksum
        assert ip.src == bytes([10, 1, 2, 3]) and ip.dst == bytes([127, 0, 0, 1]) and ip.p == 17
        udp = ip.data
        fill = {6699: 0xAB, 7788: 0xCD, 8308: 0x11}[udp.sport]
        assert udp.dport == udp.sport + 1 and udp.ulen == 8 + len(udp.data)
        assert set(bytes(udp.data)) == {fill}


def test_a_stream_is_published_whole_and_is_absent_after_a_failure(tmp_path):
    records, _ = _records(3, 100, 2368, 0, 1000, 7)
    with PcapStream(tmp_path / "ok.pcap") as stream:
        stream.write(records.tobytes(), 3)
        assert not (tmp_path / "ok.pcap").exists()  # not before it is whole
    assert (tmp_path / "ok.pcap").stat().st_size == 24 + 3 * records.dtype.itemsize
    with pytest.raises(RuntimeError):
        with PcapStream(tmp_path / "bad.pcap") as stream:
            stream.write(records.tobytes(), 3)
            raise RuntimeError("the run failed")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ok.pcap"]  # no target, no temporary


def test_an_existing_pcap_is_refused_and_kept(tmp_path):
    path = tmp_path / "packets.pcap"
    path.write_bytes(b"old")
    with pytest.raises(OutputError, match="packets.pcap exists already; refusing to overwrite it"):
        PcapStream(path)
    assert path.read_bytes() == b"old"


@pytest.mark.parametrize("address", ["localhost", "300.1.1.1", "::1", ""])
def test_a_bad_address_is_refused(address):
    with pytest.raises(ConfigError, match="expected an IPv4 address"):
        Addresses(address, "127.0.0.1")


def test_times_before_1970_are_refused():
    frames = udp_frames(np.zeros((1, 8), np.uint8), Addresses("127.0.0.1", "127.0.0.1"), 1, 2)
    with pytest.raises(OutputError, match="before 1970"):
        pcap_records(frames, np.array([-5]))
