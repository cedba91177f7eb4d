"""Which sensors have a packet format, and a stream of scans turned into a pcap file.

``packet_encoder(sensor, config)`` picks the encoder of a named sensor (``--sensor``) or of a
sensors file named like a shipped one; any other sensor is refused naming those that have one.
``PcapRecorder`` writes the packets of every scan handed to it into one ``packets.pcap``, whole
or not at all (``pcap_file.PcapStream``).
"""

from __future__ import annotations

import os
from pathlib import Path
from types import TracebackType
from typing import Protocol

from acres_lidar_ros.config.sensors import NAMED_SENSORS, SensorConfig
from acres_lidar_ros.errors import ConfigError, OutputError
from acres_lidar_ros.outputs.files import atomic_write
from acres_lidar_ros.packets.helios import HeliosEncoder
from acres_lidar_ros.packets.ouster import OusterEncoder
from acres_lidar_ros.packets.packet_types import PacketGroup
from acres_lidar_ros.packets.pcap_file import Addresses, PcapStream, merge_records, pcap_records, udp_frames
from acres_lidar_ros.packets.udp_stream import UdpSender
from acres_lidar_ros.packets.velodyne import HDL32E, VLP16, VelodyneEncoder
from acres_lidar_ros.scan.scan_types import Scan


class PacketEncoder(Protocol):
    """Turns one scan into its packets; ``first`` marks the first scan of a stream."""

    @property
    def packet_s(self) -> float: ...

    def encode(self, scan: Scan, first: bool = False) -> list[PacketGroup]: ...


#: sensor name -> (format name, the unit's factory addresses: sensor, host)
FORMATS: dict[str, tuple[str, Addresses]] = {
    "polaris": ("RoboSense RS-Helios MSOP/DIFOP", Addresses("192.168.1.200", "192.168.1.102")),
    "helios5515": ("RoboSense RS-Helios MSOP/DIFOP", Addresses("192.168.1.200", "192.168.1.102")),
    "vlp16": ("Velodyne VLP-16 data/position", Addresses("192.168.1.201", "192.168.1.100")),
    "hdl32e": ("Velodyne HDL-32E data/position", Addresses("192.168.1.201", "192.168.1.100")),
    # The OS1 takes its address by DHCP or link-local; these are link-local ones.
    "os1_64": ("Ouster OS1-64 LEGACY lidar packets", Addresses("169.254.10.10", "169.254.10.1")),
}


def sensor_name(sensor: str | os.PathLike[str]) -> str:
    """The shipped name of ``sensor``: a name itself, or a sensors file named like a shipped one."""
    text = str(sensor)
    if text in NAMED_SENSORS:
        return text
    by_file = {file: name for name, file in NAMED_SENSORS.items()}
    return by_file.get(Path(text).name, text)


def packet_encoder(sensor: str | os.PathLike[str], config: SensorConfig) -> PacketEncoder:
    """The packet encoder of ``sensor`` (a name or a sensors file), checked against ``config``."""
    name = sensor_name(sensor)
    if name not in FORMATS:
        have = ", ".join(f"{n} ({FORMATS[n][0]})" for n in FORMATS)
        raise ConfigError(f"--packets: sensor {sensor!s} has no packet format; the sensors with one are {have}")
    if name in ("polaris", "helios5515"):
        return HeliosEncoder(config)
    if name == "os1_64":
        return OusterEncoder(config)
    return _VelodyneStream(VelodyneEncoder(VLP16 if name == "vlp16" else HDL32E, config))


def packet_driver(sensor: str | os.PathLike[str]) -> str:
    """The driver family of a sensor with a packet format: ``rslidar``, ``velodyne`` or ``ouster``."""
    name = sensor_name(sensor)
    return "rslidar" if name in ("polaris", "helios5515") else "ouster" if name == "os1_64" else "velodyne"


def metadata_path(pcap: Path) -> Path:
    """Where the sensor metadata JSON of ``pcap`` goes (formats that need one): ``sensor_metadata.json``
    beside a ``packets.pcap``, else the pcap's name with ``.json``."""
    return pcap.with_name("sensor_metadata.json") if pcap.name == "packets.pcap" else pcap.with_suffix(".json")


def default_addresses(sensor: str | os.PathLike[str]) -> Addresses:
    return FORMATS[sensor_name(sensor)][1] if sensor_name(sensor) in FORMATS else Addresses("127.0.0.1", "127.0.0.1")


class _VelodyneStream:
    """A Velodyne encoder as a ``PacketEncoder`` (its packets do not depend on the stream's start)."""

    def __init__(self, encoder: VelodyneEncoder) -> None:
        self.encoder = encoder
        self.packet_s = encoder.packet_s

    def encode(self, scan: Scan, first: bool = False) -> list[PacketGroup]:
        return self.encoder.encode(scan)


def before_time_zero(groups: list[PacketGroup]) -> bool:
    """Whether a scan's packets start before 0 s: the scan due at a run's start sweeps the period
    before it, and a UNIX time (pcap, the packets' own stamps) cannot be negative. Such a scan has
    no packets; the sinks count it (``scans_before_zero``)."""
    return any(g.send_ns.size and int(g.send_ns.min()) < 0 for g in groups)


def scan_records(groups: list[PacketGroup], addresses: Addresses, first_identification: int) -> tuple[bytes, int]:
    """The pcap record bytes of one scan's packet groups, in send order, and their number."""
    records = []
    for group in groups:
        frames = udp_frames(group.payloads, addresses, group.port, group.port, first_identification)
        first_identification += len(frames)
        records.append((pcap_records(frames, group.send_ns), group.send_ns))
    return merge_records(records), sum(len(r) for r, _ in records)


class PcapRecorder:
    """Every scan's packets into ``path`` (a new ``packets.pcap``), published whole when closed.

    Use as a context manager; an exception inside the block leaves no file.
    """

    def __init__(self, path: str | os.PathLike[str], encoder: PacketEncoder, addresses: Addresses) -> None:
        self.encoder, self.addresses = encoder, addresses
        metadata = getattr(encoder, "metadata_json", None)
        self.metadata: bytes | None = metadata() if metadata is not None else None
        self.metadata_path = metadata_path(Path(path))
        if self.metadata is not None and (self.metadata_path.exists() or self.metadata_path.is_symlink()):
            raise OutputError(f"{self.metadata_path} exists already; refusing to overwrite it")
        self.stream = PcapStream(path)
        self.first = True
        self.scans_before_zero = 0

    @property
    def path(self) -> Path:
        return self.stream.path

    def write_scan(self, scan: Scan, bag: object = None) -> int:
        """Append the scan's packets; returns their number (0 for a sweep before 0 s, counted).
        ``bag`` (the run's) is not used: the packets go to the file."""
        groups = self.encoder.encode(scan, first=self.first)
        if before_time_zero(groups):
            self.scans_before_zero += 1
            return 0
        self.first = False
        data, count = scan_records(groups, self.addresses, self.stream.packets)
        self.stream.write(data, count)
        return count

    def __enter__(self) -> PcapRecorder:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if kind is not None or self.metadata is None:
            self.stream.__exit__(kind, value, traceback)
            return
        try:  # the metadata first: a pcap is never left without it
            atomic_write(self.metadata_path, self.metadata)
        except BaseException:
            self.stream.abort()
            raise
        try:
            self.stream.close()
        except BaseException:
            self.metadata_path.unlink(missing_ok=True)
            raise


class UdpStreamer:
    """Every scan's packets sent live by ``sender`` (``udp_stream.UdpSender``), at the packet rate."""

    def __init__(self, encoder: PacketEncoder, sender: UdpSender) -> None:
        self.encoder, self.sender = encoder, sender
        self.first = True
        self.scans_before_zero = 0

    @property
    def path(self) -> str:
        return f"udp://{self.sender.host}"

    def write_scan(self, scan: Scan, bag: object = None) -> int:
        """Send the scan's packets at their times; returns their number (``bag`` is not used)."""
        groups = self.encoder.encode(scan, first=self.first)
        if before_time_zero(groups):
            self.scans_before_zero += 1
            return 0
        self.first = False
        self.sender.send(groups)
        return sum(len(g.payloads) for g in groups)

    def __enter__(self) -> UdpStreamer:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.sender.close()
