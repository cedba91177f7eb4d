"""Ouster OS1-64 lidar packets (LEGACY profile) and the sensor metadata JSON that reads them.

Lidar packet, 12608-byte UDP payload to port 7502, all fields little-endian: 16 columns of 788
bytes, each a header (the column's timestamp in ns, uint64; its measurement id 0 ... W - 1,
uint16; the frame id, uint16; the encoder count, uint32, 90112 a turn), 64 pixels of 12 bytes
(range in mm from the lidar origin in the low 20 bits of a uint32; reflectivity, signal, near-IR
uint16; 2 bytes unused) and a status word (``0xFFFFFFFF``: the column is valid). A pixel without
a return has range 0. Source: ouster-lidar/ouster-sdk ``ouster_client/src/parsing.cpp``
(``legacy_field_info``: range mask ``0x000fffff`` at byte 0, reflectivity at 4, signal at 6,
near-IR at 8) and the OS1 firmware user manual's "Lidar Data Format" (LEGACY column header and
status); checked by ouster-sdk 1.0.1 (``PacketFormat``: 16 + 64 x 12 + 4 bytes a column, 16
columns, 12608 bytes) which decodes our packets in ``test/packets/test_ouster_packets.py``.

Our column ``m`` (tick, clockwise from +x, all 64 beams fire together) is the packet's
measurement id ``m``, beam ``i`` its pixel ``i`` (the sensors file's beams are Ouster's, highest
first): the pixels are sent staggered, as the sensor measures them. The profile has one return,
so a beam sends its primary return (the one our ``ouster`` cloud publishes). Ouster's range
counts from the lidar origin, ``lidar_origin_to_beam_origin_mm`` (the sensors file's
``hor_offset_m``) more than our range from the beam origin.
"""

from __future__ import annotations

import json

import numpy as np

from acres_lidar_ros.config.sensors import SensorConfig
from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.packets.packet_types import PacketGroup, quantise
from acres_lidar_ros.scan.scan_types import Scan
from acres_lidar_ros.sensor.emitters import FiringPattern

LIDAR_PORT = 7502
IMU_PORT = 7503
COLUMNS_PER_PACKET = 16
PIXELS = 64
ENCODER_TICKS_PER_TURN = 90112
RANGE_STEP_M = 0.001
RANGE_LIMIT_STEPS = 0xFFFFF  # 20 bits
STATUS_VALID = 0xFFFFFFFF
#: lidar modes by columns per frame and rate (Hz)
LIDAR_MODES = {
    (512, 10): "512x10",
    (512, 20): "512x20",
    (1024, 10): "1024x10",
    (1024, 20): "1024x20",
    (2048, 10): "2048x10",
}
#: the OS1's housing: lidar frame to sensor frame (mm), the SDK's default (``SensorInfo.from_default``)
LIDAR_TO_SENSOR_MM = [-1.0, 0.0, 0.0, 0.0, 0.0, -1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 36.18, 0.0, 0.0, 0.0, 1.0]
IMU_TO_SENSOR_MM = [1.0, 0.0, 0.0, 6.253, 0.0, 1.0, 0.0, -11.775, 0.0, 0.0, 1.0, 7.645, 0.0, 0.0, 0.0, 1.0]

PIXEL = np.dtype(
    [("range_mm", "<u4"), ("reflectivity", "<u2"), ("signal", "<u2"), ("near_ir", "<u2"), ("unused", "<u2")]
)
COLUMN = np.dtype(
    [
        ("timestamp_ns", "<u8"),
        ("measurement_id", "<u2"),
        ("frame_id", "<u2"),
        ("encoder_count", "<u4"),
        ("pixels", PIXEL, (PIXELS,)),
        ("status", "<u4"),
    ]
)
LIDAR_PACKET = np.dtype([("columns", COLUMN, (COLUMNS_PER_PACKET,))])
assert COLUMN.itemsize == 788 and LIDAR_PACKET.itemsize == 12608


class OusterEncoder:
    """Encodes scans of the OS1-64 firing pattern (64 beams fired together, W columns a turn).

    Parameters
    ----------
    config : the sensors file; its pattern must be rotary, clockwise, 64 beams fired at their
        column's time, one state, with a column count and rate of an Ouster lidar mode (checked).
    """

    def __init__(self, config: SensorConfig) -> None:
        pattern = FiringPattern.from_config(config)
        cells = pattern.cells(0)
        columns, hz = pattern.ticks, round(1.0 / config.period_s)
        fire_s = np.asarray(cells.fire_time_s, dtype=np.float64)
        step_deg = np.degrees(np.diff(pattern.tick_azimuth_rad))
        if (
            pattern.emitters != PIXELS
            or pattern.scan_type != "rotary"
            or (columns, hz) not in LIDAR_MODES
            or np.any(fire_s != 0.0)
            or not np.allclose(step_deg, -360.0 / columns, rtol=0, atol=1e-9)
            or abs(float(pattern.tick_azimuth_rad[0])) > 1e-12
        ):
            raise ConfigError(
                f"{config.source}: the Ouster packet needs 64 beams fired together in columns turning "
                f"clockwise from azimuth 0 in a lidar mode ({', '.join(LIDAR_MODES.values())}), "
                f"as the shipped os1_64 sensors file; this pattern has {pattern.emitters} emitters, "
                f"{columns} columns at {1.0 / config.period_s:g} Hz"
            )
        origin = cells.origin_sensor_m[0]
        beam_origin_m = float(origin[0, 0])
        if not np.allclose(origin[:, 0], beam_origin_m, rtol=0, atol=1e-12) or np.any(origin[:, 1:] != 0.0):
            raise ConfigError(f"{config.source}: the Ouster metadata has one beam origin on +x for all beams")
        self.columns = columns
        self.lidar_mode = LIDAR_MODES[(columns, hz)]
        self.period_s = config.period_s
        self.beam_origin_m = beam_origin_m
        self.elevation_deg = np.degrees(cells.elevation_rad[0])
        # Ouster's beam azimuth is clockwise, ours counter-clockwise: azimuth relative to the column.
        self.beam_azimuth_cw_deg = -np.degrees(cells.azimuth_rad[0] - pattern.tick_azimuth_rad[0])
        self.packets_per_scan = columns // COLUMNS_PER_PACKET
        self.column_s = config.period_s / columns

    @property
    def packet_s(self) -> float:
        """Time between two lidar packets, s."""
        return COLUMNS_PER_PACKET * self.column_s

    def lidar_packets(self, scan: Scan) -> np.ndarray:
        """(packets_per_scan,) ``LIDAR_PACKET`` array of ``scan``."""
        if scan.columns != self.columns or scan.rings != PIXELS:
            raise ConfigError(f"scan of {scan.columns} x {scan.rings}: the encoder expects {self.columns} x {PIXELS}")
        returns = scan.returns
        beams = np.arange(self.columns * PIXELS)
        slot = np.zeros(beams.size, np.int64) if returns.valid.shape[1] == 1 else returns.primary_index()
        valid = returns.valid[beams, slot]
        range_m = np.where(valid, returns.range_m[beams, slot] + self.beam_origin_m, np.nan)
        range_mm = quantise(range_m, RANGE_STEP_M, "Ouster range_m", limit=RANGE_LIMIT_STEPS)
        packets = np.zeros(self.packets_per_scan, LIDAR_PACKET)
        column = packets["columns"].reshape(self.columns)  # a view: the columns in send order
        pixels = column["pixels"]
        pixels["range_mm"] = range_mm.reshape(self.columns, PIXELS)
        pixels["reflectivity"] = np.where(valid, returns.intensity[beams, slot], 0).reshape(self.columns, PIXELS)
        pixels["signal"] = np.where(valid, returns.signal[beams, slot], 0).reshape(self.columns, PIXELS)
        column["timestamp_ns"] = self.column_ns(scan)
        column["measurement_id"] = np.arange(self.columns)
        column["frame_id"] = scan.index % 65536
        column["encoder_count"] = np.arange(self.columns) * (ENCODER_TICKS_PER_TURN // self.columns)
        column["status"] = STATUS_VALID
        return packets

    def column_ns(self, scan: Scan) -> np.ndarray:
        """(columns,) int64: each column's firing time, ns on the scan's clock."""
        return int(scan.stamp_ns) + np.rint(np.asarray(scan.time_offset_s, dtype=np.float64) * 1e9).astype(np.int64)

    def encode(self, scan: Scan, first: bool = False) -> list[PacketGroup]:
        """The scan's lidar packets; each leaves when its last column's period has passed."""
        data = self.lidar_packets(scan).view(np.uint8).reshape(self.packets_per_scan, LIDAR_PACKET.itemsize)
        last = self.column_ns(scan)[COLUMNS_PER_PACKET - 1 :: COLUMNS_PER_PACKET]
        send_ns = last + int(round(self.column_s * 1e9))
        return [PacketGroup("lidar", LIDAR_PORT, data, send_ns)]

    def metadata(self, serial: str = "0") -> dict:
        """The sensor metadata ouster-sdk reads the packets with (its 1.0 JSON layout)."""
        n_mm = self.beam_origin_m * 1e3
        azimuth = self.beam_azimuth_cw_deg
        shift = np.rint((azimuth - azimuth.min()) * self.columns / 360.0).astype(int)
        return {
            "beam_intrinsics": {
                "beam_altitude_angles": [round(float(a), 6) for a in self.elevation_deg],
                "beam_azimuth_angles": [round(float(a), 6) for a in azimuth],
                "beam_to_lidar_transform": [1.0, 0.0, 0.0, n_mm, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0]
                + [0.0, 0.0, 0.0, 1.0],
                "lidar_origin_to_beam_origin_mm": n_mm,
            },
            "calibration_status": {},
            "config_params": {
                "lidar_mode": self.lidar_mode,
                "udp_port_lidar": LIDAR_PORT,
                "udp_port_imu": IMU_PORT,
                "udp_profile_lidar": "LEGACY",
                "udp_profile_imu": "LEGACY",
                "columns_per_packet": COLUMNS_PER_PACKET,
            },
            "imu_intrinsics": {"imu_to_sensor_transform": IMU_TO_SENSOR_MM},
            "lidar_data_format": {
                "column_window": [0, self.columns - 1],
                "columns_per_frame": self.columns,
                "columns_per_packet": COLUMNS_PER_PACKET,
                "pixel_shift_by_row": [int(s) for s in shift],
                "pixels_per_column": PIXELS,
                "udp_profile_lidar": "LEGACY",
                "udp_profile_imu": "LEGACY",
            },
            "lidar_intrinsics": {"lidar_to_sensor_transform": LIDAR_TO_SENSOR_MM},
            "sensor_info": {
                "build_date": "",
                "build_rev": "v2.0.0",
                "image_rev": "",
                "initialization_id": 0,
                "prod_line": "OS-1-64",
                "prod_pn": "",
                "prod_sn": serial,
                "status": "RUNNING",
            },
        }

    def metadata_json(self) -> bytes:
        return (json.dumps(self.metadata(), indent=2) + "\n").encode()
