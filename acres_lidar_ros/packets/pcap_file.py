"""UDP datagrams as Ethernet frames and classic pcap files (``packets.pcap``).

A frame is Ethernet II + IPv4 (20 bytes, no options) + UDP + the payload: 42 bytes before the
payload, as the drivers slice a capture (rs_driver reads the payload from byte 42; velodyne-decoder
and libpcap readers walk the headers). The file is the classic libpcap format (little-endian,
microsecond timestamps, link type 1 = Ethernet), each record captured whole (``incl_len`` =
``orig_len``) at its packet's send time. Frames of one payload size are one structured array
(``frame_dtype``); records of several streams are merged in time order without a loop over packets.

``PcapStream`` writes a file that grows as a recording runs: it lives as a temporary file beside
its target and gets the target's name only when closed (``outputs.files.publish_temporary``), so a
failed run leaves no ``packets.pcap``, and an existing one is never replaced.
"""

from __future__ import annotations

import ipaddress
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import numpy as np

from acres_lidar_ros.errors import ConfigError, OutputError
from acres_lidar_ros.outputs.files import publish_temporary, refuse_existing

HEADER_BYTES = 42
"""Ethernet (14) + IPv4 (20) + UDP (8) bytes before a payload."""
LINKTYPE_ETHERNET = 1
PCAP_MAGIC_US = 0xA1B2C3D4
SNAPLEN = 65535
#: A locally administered source MAC (no vendor's), and the host's (also local).
SENSOR_MAC = bytes.fromhex("020000000001")
HOST_MAC = bytes.fromhex("020000000002")

GLOBAL_HEADER = np.dtype(
    [
        ("magic", "<u4"),
        ("version_major", "<u2"),
        ("version_minor", "<u2"),
        ("thiszone", "<i4"),
        ("sigfigs", "<u4"),
        ("snaplen", "<u4"),
        ("linktype", "<u4"),
    ]
)


def frame_dtype(payload_bytes: int) -> np.dtype:
    """The dtype of one Ethernet/IPv4/UDP frame carrying ``payload_bytes`` (network byte order)."""
    return np.dtype(
        [
            ("eth_destination", "u1", (6,)),
            ("eth_source", "u1", (6,)),
            ("ethertype", ">u2"),
            ("ip_version_ihl", "u1"),
            ("ip_tos", "u1"),
            ("ip_total_length", ">u2"),
            ("ip_identification", ">u2"),
            ("ip_flags_fragment", ">u2"),
            ("ip_ttl", "u1"),
            ("ip_protocol", "u1"),
            ("ip_checksum", ">u2"),
            ("ip_source", "u1", (4,)),
            ("ip_destination", "u1", (4,)),
            ("udp_source_port", ">u2"),
            ("udp_destination_port", ">u2"),
            ("udp_length", ">u2"),
            ("udp_checksum", ">u2"),
            ("payload", "u1", (payload_bytes,)),
        ]
    )


def record_dtype(payload_bytes: int) -> np.dtype:
    """One pcap record: its 16-byte header and the frame."""
    return np.dtype(
        [
            ("ts_sec", "<u4"),
            ("ts_usec", "<u4"),
            ("incl_len", "<u4"),
            ("orig_len", "<u4"),
            ("frame", frame_dtype(payload_bytes)),
        ]
    )


def ipv4_address(address: str, what: str, allow_broadcast: bool = True) -> bytes:
    """The 4 bytes of a dotted IPv4 address; ``ConfigError`` naming ``what`` for anything else."""
    try:
        parsed = ipaddress.IPv4Address(str(address))
    except ValueError as error:
        raise ConfigError(f"{what} = {address!r}: expected an IPv4 address such as 127.0.0.1") from error
    if not allow_broadcast and parsed == ipaddress.IPv4Address("255.255.255.255"):
        raise ConfigError(f"{what} = {address}: the broadcast address is sent to only when asked for")
    return parsed.packed


def check_port(port: int, what: str) -> int:
    if isinstance(port, bool) or not isinstance(port, (int, np.integer)) or not 1 <= int(port) <= 65535:
        raise ConfigError(f"{what} = {port!r}: expected a UDP port from 1 to 65535")
    return int(port)


@dataclass(frozen=True)
class Addresses:
    """Where a sensor's packets go: its own IPv4 address and the host's (dotted strings)."""

    sensor_ip: str
    host_ip: str

    def __post_init__(self) -> None:
        ipv4_address(self.sensor_ip, "sensor address")
        ipv4_address(self.host_ip, "host address")


def udp_frames(
    payloads: np.ndarray,
    addresses: Addresses,
    source_port: int,
    destination_port: int,
    first_identification: int = 0,
) -> np.ndarray:
    """Frames around ``payloads`` ((n, L) uint8): a structured (n,) array of ``frame_dtype(L)``.

    The IPv4 identification counts from ``first_identification`` (mod 2^16), the IPv4 header
    checksum is computed (RFC 791), and the UDP checksum is 0 (none, allowed over IPv4).
    """
    payloads = np.ascontiguousarray(payloads, dtype=np.uint8)
    n, length = payloads.shape
    frames = np.zeros(n, frame_dtype(length))
    frames["eth_destination"] = np.frombuffer(HOST_MAC, np.uint8)
    frames["eth_source"] = np.frombuffer(SENSOR_MAC, np.uint8)
    frames["ethertype"] = 0x0800
    frames["ip_version_ihl"] = 0x45
    frames["ip_total_length"] = 20 + 8 + length
    frames["ip_identification"] = (first_identification + np.arange(n)) & 0xFFFF
    frames["ip_flags_fragment"] = 0x4000  # don't fragment
    frames["ip_ttl"] = 64
    frames["ip_protocol"] = 17
    frames["ip_source"] = np.frombuffer(ipv4_address(addresses.sensor_ip, "sensor address"), np.uint8)
    frames["ip_destination"] = np.frombuffer(ipv4_address(addresses.host_ip, "host address"), np.uint8)
    frames["udp_source_port"] = check_port(source_port, "source port")
    frames["udp_destination_port"] = check_port(destination_port, "destination port")
    frames["udp_length"] = 8 + length
    if n == 0:
        return frames
    raw = frames.view(np.uint8).reshape(n, -1)
    words = raw[:, 14:34].astype(np.uint32)
    total = (words[:, 0::2] << 8 | words[:, 1::2]).sum(axis=1)
    total = (total & 0xFFFF) + (total >> 16)
    total = (total & 0xFFFF) + (total >> 16)
    frames["ip_checksum"] = ~total.astype(np.uint16)
    frames["payload"] = payloads
    return frames


def pcap_records(frames: np.ndarray, send_ns: np.ndarray) -> np.ndarray:
    """pcap records of ``frames`` captured at ``send_ns`` (int64 ns, UNIX epoch), structured (n,)."""
    send_ns = np.asarray(send_ns, dtype=np.int64)
    if send_ns.size and send_ns.min() < 0:
        raise OutputError(f"a packet's send time {int(send_ns.min())} ns is before 1970; pcap times are UNIX times")
    records = np.zeros(frames.shape[0], record_dtype(frames.dtype["payload"].shape[0]))
    usec = (send_ns + 500) // 1000
    records["ts_sec"] = usec // 1_000_000
    records["ts_usec"] = usec % 1_000_000
    records["incl_len"] = records["orig_len"] = frames.dtype.itemsize
    records["frame"] = frames
    return records


def merge_records(groups: list[tuple[np.ndarray, np.ndarray]]) -> bytes:
    """The bytes of several record arrays (each with its (n,) send times, ns) in send-time order.

    Ties keep the order of ``groups``. Records of different sizes are scattered into one buffer.
    """
    times = np.concatenate([np.asarray(t, dtype=np.int64) for _, t in groups]) if groups else np.zeros(0, np.int64)
    sizes = np.concatenate([np.full(len(r), r.dtype.itemsize, np.int64) for r, _ in groups]) if groups else times
    order = np.argsort(times, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    starts = np.zeros(order.size, np.int64)
    starts[1:] = np.cumsum(sizes[order])[:-1]
    out = np.empty(int(sizes.sum()), np.uint8)
    first = 0
    for records, _ in groups:  # one pass per stream (two or three), not per packet
        count, size = len(records), records.dtype.itemsize
        at = starts[rank[first : first + count]]
        out[at[:, None] + np.arange(size)] = records.view(np.uint8).reshape(count, size)
        first += count
    return out.tobytes()


def global_header() -> bytes:
    header = np.zeros(1, GLOBAL_HEADER)
    header["magic"], header["version_major"], header["version_minor"] = PCAP_MAGIC_US, 2, 4
    header["snaplen"], header["linktype"] = SNAPLEN, LINKTYPE_ETHERNET
    return header.tobytes()


class PcapStream:
    """A pcap file written record by record, named ``path`` only once closed whole.

    Use as a context manager: leaving the block normally publishes the file; an exception (or
    ``abort()``) removes the temporary file, so ``path`` never holds part of a capture.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = refuse_existing(path)
        if not self.path.parent.is_dir():
            raise OutputError(f"cannot write {self.path}: directory {self.path.parent} does not exist")
        try:
            fd, tmp_name = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent)
        except OSError as error:
            raise OutputError(f"cannot write {self.path}: {error}") from error
        self._tmp = Path(tmp_name)
        os.fchmod(fd, 0o644)  # as every other output file (mkstemp makes it 0600)
        self._handle = os.fdopen(fd, "wb")
        self.packets = 0
        self.write(global_header())

    def write(self, data: bytes, packets: int = 0) -> None:
        """Append record bytes (``packets`` of them, for the count)."""
        try:
            self._handle.write(data)
        except OSError as error:
            self.abort()
            raise OutputError(f"cannot write {self.path}: {error}") from error
        self.packets += packets

    def close(self) -> Path:
        """Flush, sync and publish the file under its name."""
        try:
            self._handle.flush()
            os.fsync(self._handle.fileno())
            self._handle.close()
            return publish_temporary(self._tmp, self.path)
        except BaseException as error:
            self.abort()
            if isinstance(error, OSError) and not isinstance(error, OutputError):
                raise OutputError(f"cannot write {self.path}: {error}") from error
            raise

    def abort(self) -> None:
        """Drop the capture: the temporary file goes, ``path`` stays absent."""
        if not self._handle.closed:
            self._handle.close()
        self._tmp.unlink(missing_ok=True)

    def __enter__(self) -> PcapStream:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if kind is None:
            self.close()
        else:
            self.abort()
