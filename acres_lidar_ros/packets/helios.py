"""RoboSense RS-Helios MSOP and DIFOP packets (docs/packets.md, "RoboSense").

MSOP (data), 1248 bytes to port 6699, big-endian: a 42-byte header (``55 AA 05 5A``, protocol
version 1, range resolution byte 17 = 1 for 0.25 cm, the UNIX time of block 0's first firing as 6
bytes of seconds and 4 of microseconds at byte 20, LiDAR type ``06`` at 31), 12 blocks of 100 bytes
(``FF EE``, azimuth in 0.01 deg clockwise from +x, 32 channels of distance in 2.5 mm and intensity,
in firing order), a 6-byte tail ending ``00 FF``. Single return: 12 columns a packet; dual return
(DIFOP return mode ``00``): blocks in pairs of one azimuth, the strongest (the second strongest where
the strongest is the last) then the last, 6 columns a packet; a beam with one return sends it in
both blocks, one without a return distance 0.

DIFOP (device info), 1248 bytes to port 7788, sent before the first MSOP and then at each whole
second: ``A5 FF 00 5A 11 11 55 55``, motor speed (rpm) at 8, ports at 24-31, FOV 0-36000 at 32,
return mode at 300 (``04`` strongest, ``05`` last, ``06`` first, ``00`` dual), the vertical and
horizontal angle tables at 468 and 564 (32 x sign byte + uint16 0.01 deg), tail ``0F F0``.

The tables make rs_driver's arithmetic give our beams: a channel's elevation is its vertical
entry; its azimuth is the block azimuth plus rs_driver's interpolation inside the block
(``int(20 x tss_c / 55.56)`` 0.01 deg at 10 Hz, ``tss_c`` = 1.73 us x c) plus its horizontal
entry, so the horizontal entry is our channel's azimuth minus that interpolation, rounded to
0.01 deg. The distance is the traced range from the lens centre (rs_driver adds its 3.498 cm lens
offset, as the sensors file's origin has it). Sources: RoboSense-LiDAR/rs_driver
``decoder_RSHELIOS.hpp`` (commit 4eeadace465023db65a63fc8ef680dfaaca5812c), RS-Helios user manuals.
"""

from __future__ import annotations

import numpy as np

from acres_lidar_ros.config.sensors import SensorConfig
from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.packets.packet_types import PacketGroup, quantise
from acres_lidar_ros.scan.scan_types import Scan
from acres_lidar_ros.sensor.emitters import FiringPattern

MSOP_PORT = 6699
DIFOP_PORT = 7788
BLOCKS = 12
CHANNELS = 32
COLUMNS = 1800
HZ = 10.0
DISTANCE_STEP_M = 0.0025
BLOCK_S = 55.56e-6
"""rs_driver's Helios block duration (its constant); the channel times are 1.73 us apart."""
CHANNEL_TSS_US = 1.73 * np.arange(CHANNELS)
BLOCK_AZIMUTH_STEP = 20
"""Block azimuth step at 10 Hz, 0.01 deg (0.2 deg a column)."""
RETURN_MODE_BYTE = {"strongest": 0x04, "last": 0x05, "first": 0x06, "dual_strongest_last": 0x00}
MSOP_MAGIC = bytes.fromhex("55AA055A")
DIFOP_MAGIC = bytes.fromhex("A5FF005A11115555")
LIDAR_TYPE_HELIOS = 0x06

CHANNEL = np.dtype([("distance", ">u2"), ("intensity", "u1")])
BLOCK = np.dtype([("flag", "u1", (2,)), ("azimuth", ">u2"), ("channels", CHANNEL, (CHANNELS,))])
HEADER = np.dtype(
    [
        ("magic", "u1", (4,)),
        ("protocol_version", ">u2"),
        ("reserved_1", ">u2"),
        ("top_count", ">u4"),
        ("bottom_count", ">u4"),
        ("reserved_2", "u1"),
        ("range_resolution", "u1"),
        ("angle_pulse_interval", ">u2"),
        ("seconds_high", ">u2"),
        ("seconds_low", ">u4"),
        ("microseconds", ">u4"),
        ("reserved_3", "u1"),
        ("lidar_type", "u1"),
        ("lidar_model", "u1"),
        ("reserved_4", "u1", (9,)),
    ]
)
MSOP = np.dtype([("header", HEADER), ("blocks", BLOCK, (BLOCKS,)), ("reserved", "u1", (4,)), ("tail", "u1", (2,))])
ANGLE = np.dtype([("sign", "u1"), ("value", ">u2")])
DIFOP = np.dtype(
    {
        "names": [
            "magic",
            "rpm",
            "lidar_ip",
            "destination_ip",
            "msop_port",
            "msop_destination_port",
            "difop_port",
            "difop_destination_port",
            "fov_start",
            "fov_end",
            "return_mode",
            "seconds_high",
            "seconds_low",
            "microseconds",
            "vertical",
            "horizontal",
            "tail",
        ],
        "formats": [
            ("u1", (8,)),
            ">u2",
            ("u1", (4,)),
            ("u1", (4,)),
            ">u2",
            ">u2",
            ">u2",
            ">u2",
            ">u2",
            ">u2",
            "u1",
            ">u2",
            ">u4",
            ">u4",
            (ANGLE, (CHANNELS,)),
            (ANGLE, (CHANNELS,)),
            ("u1", (2,)),
        ],
        "offsets": [0, 8, 10, 14, 24, 26, 28, 30, 32, 34, 300, 303, 305, 309, 468, 564, 1246],
        "itemsize": 1248,
    }
)
assert MSOP.itemsize == 1248 and HEADER.itemsize == 42 and BLOCK.itemsize == 100


def rs_driver_interpolation() -> np.ndarray:
    """(32,) int: rs_driver's azimuth step inside a block per channel, 0.01 deg: the block step times
    the channel's fraction ``tss_c / 55.56`` in float32, truncated."""
    per_channel = CHANNEL_TSS_US.astype(np.float32) / np.float32(BLOCK_S * 1e6)  # its float fraction of a block
    return (np.float32(BLOCK_AZIMUTH_STEP) * per_channel).astype(np.int64)


def angle_table(value_centideg: np.ndarray) -> np.ndarray:
    """(32,) ``ANGLE`` entries of integer 0.01 deg values: sign byte 0 / 1, magnitude."""
    value = np.asarray(value_centideg, dtype=np.int64)
    table = np.zeros(value.size, ANGLE)
    table["sign"] = value < 0
    table["value"] = np.abs(value)
    return table


class HeliosEncoder:
    """Encodes scans of a 32 x 1800, 10 Hz Helios pattern (``helios5515``, ``polaris``) as MSOP/DIFOP.

    Parameters
    ----------
    config : the sensors file; 32 emitters, 1800 ticks, 10 Hz, a return mode the Helios sends
    """

    def __init__(self, config: SensorConfig) -> None:
        pattern = FiringPattern.from_config(config)
        if pattern.scan_type != "rotary" or pattern.emitters != CHANNELS or pattern.ticks != COLUMNS or config.hz != HZ:
            raise ConfigError(
                f"{config.source}: the RS-Helios packet needs {CHANNELS} emitters x {COLUMNS} columns at "
                f"{HZ:g} Hz (0.2 deg a block); this pattern has {pattern.emitters} x {pattern.ticks} at {config.hz:g} Hz"
            )
        if config.return_mode not in RETURN_MODE_BYTE:
            raise ConfigError(
                f"lidar.return_mode = {config.return_mode!r}: the RS-Helios sends {', '.join(RETURN_MODE_BYTE)} (packets)"
            )
        self.return_mode = config.return_mode
        self.dual = config.return_mode == "dual_strongest_last"
        self.tick_time_offset_s = np.asarray(pattern.tick_time_offset_s, dtype=np.float64)
        azimuth_cw_deg = np.mod(-np.degrees(pattern.tick_azimuth_rad), 360.0)
        self.block_azimuth = np.rint(azimuth_cw_deg * 100.0).astype(np.int64) % 36000
        cells = pattern.cells(0)
        # Channel c's azimuth, clockwise from the block's, 0.01 deg: what rs_driver must reproduce.
        relative_rad = np.angle(np.exp(1j * (cells.azimuth_rad[0] - pattern.tick_azimuth_rad[0])))
        relative_cw = -np.degrees(relative_rad) * 100.0
        self.vertical = np.rint(np.degrees(cells.elevation_rad[0]) * 100.0).astype(np.int64)
        self.horizontal = np.rint(relative_cw - rs_driver_interpolation()).astype(np.int64)
        self.ticks_per_packet = BLOCKS // (2 if self.dual else 1)
        self.packets_per_scan = COLUMNS // self.ticks_per_packet

    @property
    def packet_s(self) -> float:
        return self.ticks_per_packet * float(np.median(np.diff(self.tick_time_offset_s)))

    def msop_packets(self, scan: Scan) -> np.ndarray:
        """(packets_per_scan,) ``MSOP`` array of ``scan``."""
        if scan.columns != COLUMNS or scan.rings != CHANNELS:
            raise ConfigError(f"scan of {scan.columns} x {scan.rings}: the encoder expects {COLUMNS} x {CHANNELS}")
        returns = scan.returns
        counts = np.where(returns.valid, quantise(returns.range_m, DISTANCE_STEP_M, "RS-Helios range_m"), 0)
        intensity = np.where(returns.valid, returns.intensity, 0)
        n = COLUMNS * CHANNELS
        if self.dual:  # range order: the last is the farther; the other is the strongest (or second)
            last = np.maximum(returns.num_returns.astype(np.int64) - 1, 0)
            pick = np.stack([np.zeros(n, np.int64), last], axis=1)
            rows = np.arange(n)[:, None]
            counts, intensity = counts[rows, pick], intensity[rows, pick]
        ways = counts.shape[1]
        shape = (self.packets_per_scan, self.ticks_per_packet, CHANNELS, ways)
        # (packet, column, channel, way) -> (packet, column, way, channel) -> 12 blocks
        blocks_d = counts.reshape(shape).transpose(0, 1, 3, 2).reshape(self.packets_per_scan, BLOCKS, CHANNELS)
        blocks_i = intensity.reshape(shape).transpose(0, 1, 3, 2).reshape(self.packets_per_scan, BLOCKS, CHANNELS)
        packets = np.zeros(self.packets_per_scan, MSOP)
        header = packets["header"]
        header["magic"] = np.frombuffer(MSOP_MAGIC, np.uint8)
        header["protocol_version"] = 1
        index = int(scan.index) * self.packets_per_scan + np.arange(self.packets_per_scan)
        header["top_count"] = header["bottom_count"] = (3 * index) & 0xFFFFFFFF
        header["range_resolution"] = 1
        header["lidar_type"] = LIDAR_TYPE_HELIOS
        first_ns = self.first_firing_ns(scan.stamp_ns)
        usec = (first_ns + 500) // 1000
        seconds = usec // 1_000_000
        header["seconds_high"], header["seconds_low"] = seconds >> 32, seconds & 0xFFFFFFFF
        header["microseconds"] = usec % 1_000_000
        blocks = packets["blocks"]
        blocks["flag"] = (0xFF, 0xEE)
        tick = np.arange(self.packets_per_scan)[:, None] * self.ticks_per_packet + np.arange(BLOCKS)[None, :] // ways
        blocks["azimuth"] = self.block_azimuth[tick]
        blocks["channels"]["distance"] = blocks_d
        blocks["channels"]["intensity"] = blocks_i
        packets["tail"] = (0x00, 0xFF)
        return packets

    def difop(self, send_ns: np.ndarray) -> np.ndarray:
        """(k, 1248) uint8 DIFOP payloads stamped ``send_ns``."""
        send_ns = np.asarray(send_ns, dtype=np.int64)
        packets = np.zeros(send_ns.size, DIFOP)
        packets["magic"] = np.frombuffer(DIFOP_MAGIC, np.uint8)
        packets["rpm"] = int(round(HZ * 60))
        packets["msop_port"] = packets["msop_destination_port"] = MSOP_PORT
        packets["difop_port"] = packets["difop_destination_port"] = DIFOP_PORT
        packets["fov_start"], packets["fov_end"] = 0, 36000
        packets["return_mode"] = RETURN_MODE_BYTE[self.return_mode]
        usec = (send_ns + 500) // 1000
        seconds = usec // 1_000_000
        packets["seconds_high"], packets["seconds_low"] = seconds >> 32, seconds & 0xFFFFFFFF
        packets["microseconds"] = usec % 1_000_000
        packets["vertical"] = angle_table(self.vertical)
        packets["horizontal"] = angle_table(self.horizontal)
        packets["tail"] = (0x0F, 0xF0)
        return packets.view(np.uint8).reshape(send_ns.size, DIFOP.itemsize)

    def first_firing_ns(self, stamp_ns: int) -> np.ndarray:
        first_tick = np.arange(self.packets_per_scan) * self.ticks_per_packet
        return int(stamp_ns) + np.rint(self.tick_time_offset_s[first_tick] * 1e9).astype(np.int64)

    def send_ns(self, stamp_ns: int) -> np.ndarray:
        """Each MSOP leaves when its last column has fired."""
        return self.first_firing_ns(stamp_ns) + int(round(self.packet_s * 1e9))

    def encode(self, scan: Scan, first: bool = False) -> list[PacketGroup]:
        """The scan's MSOPs and the DIFOPs of its sweep: one at each whole second in ``[stamp - T, stamp)``,
        and with ``first`` one before its first MSOP (rs_driver decodes nothing before a DIFOP)."""
        msop = self.msop_packets(scan).view(np.uint8).reshape(self.packets_per_scan, MSOP.itemsize)
        msop_ns = self.send_ns(scan.stamp_ns)
        period_ns = int(round(1e9 / HZ))
        start_ns = int(scan.stamp_ns) - period_ns
        seconds = np.arange(-(-start_ns // 1_000_000_000), -(-int(scan.stamp_ns) // 1_000_000_000), dtype=np.int64)
        difop_ns = seconds * 1_000_000_000
        if first and not (difop_ns.size and difop_ns[0] <= msop_ns[0]):  # none of a whole second before it
            difop_ns = np.concatenate([[int(msop_ns[0]) - 1000], difop_ns])
        return [
            PacketGroup("difop", DIFOP_PORT, self.difop(difop_ns), difop_ns),
            PacketGroup("msop", MSOP_PORT, msop, msop_ns),
        ]
