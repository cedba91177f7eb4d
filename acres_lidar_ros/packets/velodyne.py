"""Velodyne VLP-16 and HDL-32E data and position packets (docs/packets.md, "Velodyne").

Data packet, 1206-byte UDP payload to port 2368, all fields little-endian: 12 blocks of 100 bytes
(flag ``FF EE``, azimuth in 0.01 deg clockwise from +x, 32 x (distance in 2 mm, intensity)), then
the timestamp (microseconds past the hour of the packet's first firing), the return-mode byte
(``0x37`` strongest, ``0x38`` last, ``0x39`` dual) and the product byte (``0x21`` HDL-32E, ``0x22``
VLP-16). A VLP-16 block holds two firing sequences (lasers 0-15 of the block's azimuth, then of the
next sequence's); an HDL-32E block one. In dual return the blocks come in pairs of one azimuth:
the last return, then the strongest (the second strongest where the strongest is the last), the
same return twice where a beam has one. A beam without a return has distance 0. Source: VLP-16
User Manual 63-9243 Rev D, chapter 9; HDL-32E manual 63-9277 (packet structure, timing).

Position packet, 512 bytes to port 8308: the timestamp (microseconds past the hour, little-endian
at byte 0xC6), the PPS status (0xCA, 0 = none) and an NMEA sentence (0xCE, empty: no GPS is
attached); about one per 14 data packets (manual: "the ratio of data packets to position packets
is about 14 to 1").

The encoder packs a scan's ticks (firing sequences) in order, a packet per 24 (VLP-16) or 12
(HDL-32E) of them, half as many in dual return; the scan's last packet is filled up with the
following sequences' azimuths and no returns, so a packet never spans two scans.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from acres_lidar_ros.config.sensors import SensorConfig
from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.packets.packet_types import MICROSECONDS_PER_HOUR, PacketGroup, quantise
from acres_lidar_ros.scan.scan_types import Scan
from acres_lidar_ros.sensor.emitters import FiringPattern

DATA_PORT = 2368
POSITION_PORT = 8308
BLOCKS = 12
DISTANCE_STEP_M = 0.002
BLOCK_FLAG = 0xEEFF  # bytes FF EE
RETURN_MODE_BYTE = {"strongest": 0x37, "last": 0x38, "dual_strongest_last": 0x39}
POSITION_BYTES = 512
POSITION_TIMESTAMP_AT = 0xC6
PACKETS_PER_POSITION = 14

CHANNEL = np.dtype([("distance", "<u2"), ("intensity", "u1")])
BLOCK = np.dtype([("flag", "<u2"), ("azimuth", "<u2"), ("channels", CHANNEL, (32,))])
DATA_PACKET = np.dtype(
    [("blocks", BLOCK, (BLOCKS,)), ("timestamp_us", "<u4"), ("return_mode", "u1"), ("product", "u1")]
)
assert DATA_PACKET.itemsize == 1206


@dataclass(frozen=True)
class VelodyneModel:
    """A model's packet constants: lasers, sequences per block, firing timing, product byte."""

    name: str
    lasers: int
    sequences_per_block: int
    sequence_s: float
    firing_s: float
    product: int


VLP16 = VelodyneModel("VLP-16", 16, 2, 55.296e-6, 2.304e-6, 0x22)
HDL32E = VelodyneModel("HDL-32E", 32, 1, 46.080e-6, 1.152e-6, 0x21)


class VelodyneEncoder:
    """Encodes scans of a VLP-16 or HDL-32E firing pattern as the unit's packets.

    Parameters
    ----------
    model : VLP16 or HDL32E
    config : the sensors file; its pattern must be the model's (checked: lasers, sequence and
        firing times) and its ``return_mode`` one the model sends.
    """

    def __init__(self, model: VelodyneModel, config: SensorConfig) -> None:
        pattern = FiringPattern.from_config(config)
        if config.return_mode not in RETURN_MODE_BYTE:
            raise ConfigError(
                f"lidar.return_mode = {config.return_mode!r}: the {model.name} sends "
                f"{', '.join(RETURN_MODE_BYTE)} (packets)"
            )
        fire_s = pattern.cells(0).fire_time_s[0]
        step_s = np.diff(pattern.tick_time_offset_s)
        expected = model.firing_s * np.arange(model.lasers)
        if (
            pattern.emitters != model.lasers
            or pattern.scan_type != "rotary"
            or not np.allclose(fire_s, expected, rtol=0, atol=1e-9)
            or not np.allclose(step_s, model.sequence_s, rtol=0, atol=1e-9)
        ):
            raise ConfigError(
                f"{config.source}: the {model.name} packet needs {model.lasers} lasers fired "
                f"{model.firing_s * 1e6:g} us apart in sequences {model.sequence_s * 1e6:g} us apart "
                f"(the shipped sensors file); this pattern has {pattern.emitters} emitters, "
                f"sequences {float(np.median(step_s)) * 1e6:.3f} us apart"
            )
        self.model = model
        self.dual = config.return_mode == "dual_strongest_last"
        self.return_mode_byte = RETURN_MODE_BYTE[config.return_mode]
        self.ticks = pattern.ticks
        self.tick_time_offset_s = np.asarray(pattern.tick_time_offset_s, dtype=np.float64)
        self.period_s = config.period_s
        # Block azimuth of each tick: clockwise from +x, degrees in [0, 360); extended past the scan.
        self.azimuth_cw_deg = np.mod(-np.degrees(pattern.tick_azimuth_rad), 360.0)
        self.step_cw_deg = float(np.mod(self.azimuth_cw_deg[1] - self.azimuth_cw_deg[0], 360.0))
        self.ticks_per_packet = BLOCKS * model.sequences_per_block // (2 if self.dual else 1)
        self.packets_per_scan = -(-self.ticks // self.ticks_per_packet)

    @property
    def packet_s(self) -> float:
        """Time between two data packets, s."""
        return self.ticks_per_packet * self.model.sequence_s

    def data_packets(self, scan: Scan) -> np.ndarray:
        """(packets_per_scan,) ``DATA_PACKET`` array of ``scan``."""
        m, ticks, tpp = self.model, self.ticks, self.ticks_per_packet
        if scan.columns != ticks or scan.rings != m.lasers:
            raise ConfigError(f"scan of {scan.columns} x {scan.rings}: the encoder expects {ticks} x {m.lasers}")
        padded = self.packets_per_scan * tpp
        returns = scan.returns
        counts = quantise(returns.range_m, DISTANCE_STEP_M, f"{m.name} range_m")
        counts = np.where(returns.valid, counts, 0).astype(np.uint16)
        intensity = np.where(returns.valid, returns.intensity, 0).astype(np.uint8)
        n = ticks * m.lasers
        if self.dual:  # returns are in range order: the last is the farther one, the other the strongest
            last = np.maximum(returns.num_returns.astype(np.int64) - 1, 0)
            rows = np.arange(n)
            pair = np.stack([last, np.zeros(n, np.int64)], axis=1)  # (n, 2): last, strongest
            distance = counts[rows[:, None], pair]
            strength = intensity[rows[:, None], pair]
        else:
            distance, strength = counts[:, :1], intensity[:, :1]
        ways = distance.shape[1]
        grid_d = np.zeros((padded, m.lasers, ways), np.uint16)
        grid_i = np.zeros((padded, m.lasers, ways), np.uint8)
        grid_d[:ticks] = distance.reshape(ticks, m.lasers, ways)
        grid_i[:ticks] = strength.reshape(ticks, m.lasers, ways)
        seq = m.sequences_per_block
        # (packet, block group, sequence in block, laser, way) -> (packet, group, way, 32 channels)
        shape = (self.packets_per_scan, tpp // seq, seq, m.lasers, ways)
        order = (0, 1, 4, 2, 3)
        channels_d = grid_d.reshape(shape).transpose(order).reshape(self.packets_per_scan, BLOCKS, 32)
        channels_i = grid_i.reshape(shape).transpose(order).reshape(self.packets_per_scan, BLOCKS, 32)
        packets = np.zeros(self.packets_per_scan, DATA_PACKET)
        packets["blocks"]["flag"] = BLOCK_FLAG
        packets["blocks"]["channels"]["distance"] = channels_d
        packets["blocks"]["channels"]["intensity"] = channels_i
        block_tick = (np.arange(BLOCKS) // ways) * seq
        tick = np.arange(self.packets_per_scan)[:, None] * tpp + block_tick[None, :]
        azimuth = np.where(
            tick < ticks,
            self.azimuth_cw_deg[np.minimum(tick, ticks - 1)],
            self.azimuth_cw_deg[-1] + (tick - ticks + 1) * self.step_cw_deg,
        )
        packets["blocks"]["azimuth"] = np.rint(np.mod(azimuth, 360.0) * 100.0).astype(np.int64) % 36000
        first_ns = self.first_firing_ns(scan.stamp_ns)
        packets["timestamp_us"] = ((first_ns + 500) // 1000) % MICROSECONDS_PER_HOUR
        packets["return_mode"] = self.return_mode_byte
        packets["product"] = m.product
        return packets

    def first_firing_ns(self, stamp_ns: int) -> np.ndarray:
        """(packets_per_scan,) int64: the first firing of each packet of the scan stamped ``stamp_ns``."""
        first_tick = np.arange(self.packets_per_scan) * self.ticks_per_packet
        return int(stamp_ns) + np.rint(self.tick_time_offset_s[first_tick] * 1e9).astype(np.int64)

    def send_ns(self, stamp_ns: int) -> np.ndarray:
        """(packets_per_scan,) int64: each packet leaves when its last sequence of the scan has fired."""
        first_tick = np.arange(self.packets_per_scan) * self.ticks_per_packet
        last_tick = np.minimum(first_tick + self.ticks_per_packet, self.ticks) - 1
        end_s = self.tick_time_offset_s[last_tick] + self.model.sequence_s
        return int(stamp_ns) + np.rint(end_s * 1e9).astype(np.int64)

    def position_packets(self, stamp_ns: int) -> tuple[np.ndarray, np.ndarray]:
        """Position packets sent during the sweep ending at ``stamp_ns``: ((k, 512) uint8, (k,) send ns).

        One every ``PACKETS_PER_POSITION`` data packets' time, at the multiples of that interval
        inside ``[stamp - T, stamp)``, so consecutive scans neither repeat nor miss one.
        """
        interval_ns = int(round(PACKETS_PER_POSITION * self.packet_s * 1e9))
        start_ns = int(stamp_ns) - int(round(self.period_s * 1e9))
        first, end = -(-start_ns // interval_ns), -(-int(stamp_ns) // interval_ns)
        send = np.arange(first, end, dtype=np.int64) * interval_ns
        payloads = np.zeros((send.size, POSITION_BYTES), np.uint8)
        stamp_us = (((send + 500) // 1000) % MICROSECONDS_PER_HOUR).astype("<u4")
        payloads[:, POSITION_TIMESTAMP_AT : POSITION_TIMESTAMP_AT + 4] = stamp_us.view(np.uint8).reshape(-1, 4)
        return payloads, send

    def encode(self, scan: Scan) -> list[PacketGroup]:
        """The scan's data packets and the position packets of its sweep."""
        data = self.data_packets(scan).view(np.uint8).reshape(self.packets_per_scan, DATA_PACKET.itemsize)
        position, position_ns = self.position_packets(scan.stamp_ns)
        return [
            PacketGroup("data", DATA_PORT, data, self.send_ns(scan.stamp_ns)),
            PacketGroup("position", POSITION_PORT, position, position_ns),
        ]
