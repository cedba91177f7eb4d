"""``--packets pcap|udp`` of ``acres-lidar record``: the sensor's own packets beside the bag (docs/packets.md).

Every check (a sensor without a packet format, an existing pcap, a bad or unreachable address,
a source port in use) runs before the run directory is made, so a refusal leaves nothing behind.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from acres_lidar_ros.errors import ConfigError, OutputError

if TYPE_CHECKING:
    from acres_lidar_ros.config.sensors import SensorConfig
    from acres_lidar_ros.packets.formats import PcapRecorder, UdpStreamer
    from acres_lidar_ros.packets.packet_bag import PacketBagWriter

    PacketSink = PcapRecorder | UdpStreamer | PacketBagWriter

PCAP_NAME = "packets.pcap"


def add_packet_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("sensor packets (docs/packets.md)")
    group.add_argument(
        "--packets",
        choices=("pcap", "udp", "bag"),
        help="also the sensor's own UDP packets: pcap (a packets.pcap file), udp (sent live) or bag (packet "
        "messages in the run's bag)",
    )
    group.add_argument(
        "--pcap", type=Path, metavar="FILE", help=f"the pcap file (default <out>/{PCAP_NAME}); must not exist"
    )
    group.add_argument(
        "--sensor-ip", metavar="IPV4", help="source address in the pcap (default: the unit's factory one)"
    )
    group.add_argument(
        "--host-ip", metavar="IPV4", help="destination address in the pcap (default: the unit's factory one)"
    )
    group.add_argument(
        "--udp-host", default="127.0.0.1", metavar="IPV4", help="where --packets udp sends (default 127.0.0.1)"
    )
    group.add_argument(
        "--udp-source-port", type=int, default=0, metavar="PORT", help="bind the sender to PORT (0: any)"
    )
    group.add_argument("--udp-broadcast", action="store_true", help="allow a broadcast --udp-host")


def packet_sink(args: argparse.Namespace, config: SensorConfig) -> Callable[[Path], PacketSink] | None:
    """What ``record_drive`` opens in its run directory for ``--packets``, checked now; None without it."""
    if args.packets is None:
        given = [
            f for f, v in (("--pcap", args.pcap), ("--sensor-ip", args.sensor_ip), ("--host-ip", args.host_ip)) if v
        ]
        if given:
            raise ConfigError(f"{', '.join(given)} without --packets pcap: nothing would use it")
        return None
    if args.packets == "udp":
        from acres_lidar_ros.packets.formats import UdpStreamer, packet_encoder
        from acres_lidar_ros.packets.udp_stream import UdpSender

        encoder = packet_encoder(args.sensor, config)
        if args.pcap is not None:
            raise ConfigError(f"--pcap {args.pcap} with --packets udp: only --packets pcap writes a pcap")
        sender = UdpSender(args.udp_host, source_port=args.udp_source_port, broadcast=args.udp_broadcast)
        return lambda out_dir: UdpStreamer(encoder, sender)
    return recorded_packet_sink(args.packets, args.sensor, config, args.pcap, args.sensor_ip, args.host_ip)


def recorded_packet_sink(
    kind: str,
    sensor: str,
    config: SensorConfig,
    pcap: Path | None = None,
    sensor_ip: str | None = None,
    host_ip: str | None = None,
) -> Callable[[Path], PacketSink]:
    """The sink of ``--packets pcap`` or ``bag`` (``kind``) for ``sensor``, checked now: what both
    ``record`` and each shard of ``dataset`` open in their run directory."""
    from acres_lidar_ros.packets.formats import (
        PcapRecorder,
        default_addresses,
        metadata_path,
        packet_driver,
        packet_encoder,
    )
    from acres_lidar_ros.packets.packet_bag import PacketBagWriter
    from acres_lidar_ros.packets.pcap_file import Addresses

    encoder = packet_encoder(sensor, config)
    if kind == "pcap":
        factory = default_addresses(sensor)
        addresses = Addresses(sensor_ip or factory.sensor_ip, host_ip or factory.host_ip)
        if pcap is not None:
            if pcap.exists() or pcap.is_symlink():
                raise OutputError(f"--pcap {pcap} exists already; refusing to overwrite it")
            if not pcap.parent.is_dir():
                raise OutputError(f"--pcap {pcap}: directory {pcap.parent} does not exist")
            metadata = metadata_path(pcap)
            if hasattr(encoder, "metadata_json") and (metadata.exists() or metadata.is_symlink()):
                raise OutputError(
                    f"--pcap {pcap}: its sensor metadata {metadata} exists already; refusing to overwrite it"
                )
        return lambda out_dir: PcapRecorder(pcap if pcap is not None else out_dir / PCAP_NAME, encoder, addresses)
    if pcap is not None:
        raise ConfigError(f"--pcap {pcap} with --packets {kind}: only --packets pcap writes a pcap")
    return lambda out_dir: PacketBagWriter(encoder, packet_driver(sensor), config.frame_id)
