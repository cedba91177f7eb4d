#!/usr/bin/env python3
"""Write the shipped sensors files ``config/sensors_<name>.json`` from the vendors' tables.

Each file is an overlay of ``sensors.json`` whose ``emitters`` block is the unit's firing pattern
(docs/sensors.md, "Shipped sensors"): a tick per firing sequence, and per emitter its azimuth from the tick,
elevation, fire time and vendor channel id, with the origin offsets where the driver has them. The
tables below are facts carried over from the vendors' drivers, calibration files and manuals;
``docs/sensors.md`` ("Shipped sensors") names each one's repository, file and commit, or document
and page. The files are generated, never edited by hand:

    .venv/bin/python scripts/make_shipped_sensors.py --ft120 "/path/to/FT120C1X_Angle Correction File.dat"

The FT120's per-pixel angles are read from Hesai's angle-correction file (HesaiLidar_SDK_2.0,
``correction/angle_correction/FT120C1X_Angle Correction File.dat``); without ``--ft120`` that
file is left as it is.

Conventions of the emitters block (``config/emitter_block.py``): azimuths are FLU, counter-clockwise
from forward, relative to the tick; the pattern does not turn an emitter by its fire delay, so the
azimuth of an emitter of a spinning head includes the turn ``-omega t`` (clockwise spin) that the
head makes between the tick and its firing, as each driver computes it; ``hor_offset_m`` lies along
the tick azimuth and ``vert_offset_m`` along z. Every file is written for 10 Hz, the drivers'
default, at which ``omega = 3600 deg/s``.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np

from acres_lidar_ros.outputs.files import atomic_write

CONFIG = Path(__file__).resolve().parents[1] / "config"
HZ = 10.0
OMEGA_DEG_PER_S = 360.0 * HZ

# -- RoboSense RS-Helios-5515 -----------------------------------------------------------------
# rs_driver decoder_RSHELIOS.hpp: a block lasts 55.56 us; channel i fires firing_tss[i] us after
# the block and its azimuth advances by firing_tss[i] / 55.56 of the block's azimuth step; the
# lens centre is RX = 0.03498 m along the block azimuth (RY, RZ do not enter its x, y, z).
HELIOS_FIRING_TSS_US = [round(1.73 * i, 2) for i in range(32)]  # 0.00, 1.73, ..., 53.63 as listed
HELIOS_RX_M = 0.03498

# -- Velodyne VLP-16 --------------------------------------------------------------------------
# velodyne_pointcloud params/VLP16db.yaml (laser_id 0..15): vert_correction (deg here) and
# vert_offset_correction (m); rot_correction and horiz_offset_correction are 0.
VLP16_ELEVATION_DEG = [-15, 1, -13, 3, -11, 5, -9, 7, -7, 9, -5, 11, -3, 13, -1, 15]
VLP16_VERT_OFFSET_M = [
    0.0112,
    -0.0007,
    0.0097,
    -0.0022,
    0.0081,
    -0.0037,
    0.0066,
    -0.0051,
    0.0051,
    -0.0066,
    0.0037,
    -0.0081,
    0.0022,
    -0.0097,
    0.0007,
    -0.0112,
]
# VLP-16 User Manual 63-9243 Rev D p. 62: 16 firings 2.304 us apart, a sequence every 55.296 us.
VLP16_SINGLE_FIRING_US = 2.304
VLP16_SEQUENCE_US = 55.296

# -- Velodyne HDL-32E -------------------------------------------------------------------------
# velodyne_pointcloud params/32db.yaml (laser_id 0..31): vert_correction (deg here); the other
# corrections are 0.
HDL32E_ELEVATION_DEG = [
    -30.67,
    -9.33,
    -29.33,
    -8.0,
    -28.0,
    -6.67,
    -26.67,
    -5.33,
    -25.33,
    -4.0,
    -24.0,
    -2.67,
    -22.67,
    -1.33,
    -21.33,
    0.0,
    -20.0,
    1.33,
    -18.67,
    2.67,
    -17.33,
    4.0,
    -16.0,
    5.33,
    -14.67,
    6.67,
    -13.33,
    8.0,
    -12.0,
    9.33,
    -10.67,
    10.67,
]
# VeloView vtkVelodynePacketInterpreter.cxx HDL32AdjustTimeStamp: laser k of a block fires
# 1.152 k us after it; a block (firing sequence) every 46.08 us.
HDL32E_SINGLE_FIRING_US = 1.152
HDL32E_SEQUENCE_US = 46.08

# -- Ouster OS1-64 ----------------------------------------------------------------------------
# ouster-sdk ouster_core/src/sensor_info.cpp: SensorInfo::from_default (prod_line "OS-1-64"):
# GEN1_ALTITUDE_ANGLES, GEN1_AZIMUTH_ANGLES and lidar_origin_to_beam_origin_mm 15.806; 1024 x 10.
OS1_ALTITUDE_DEG = [
    16.611,
    16.084,
    15.557,
    15.029,
    14.502,
    13.975,
    13.447,
    12.920,
    12.393,
    11.865,
    11.338,
    10.811,
    10.283,
    9.756,
    9.229,
    8.701,
    8.174,
    7.646,
    7.119,
    6.592,
    6.064,
    5.537,
    5.010,
    4.482,
    3.955,
    3.428,
    2.900,
    2.373,
    1.846,
    1.318,
    0.791,
    0.264,
    -0.264,
    -0.791,
    -1.318,
    -1.846,
    -2.373,
    -2.900,
    -3.428,
    -3.955,
    -4.482,
    -5.010,
    -5.537,
    -6.064,
    -6.592,
    -7.119,
    -7.646,
    -8.174,
    -8.701,
    -9.229,
    -9.756,
    -10.283,
    -10.811,
    -11.338,
    -11.865,
    -12.393,
    -12.920,
    -13.447,
    -13.975,
    -14.502,
    -15.029,
    -15.557,
    -16.084,
    -16.611,
]
OS1_AZIMUTH_DEG = [3.164, 1.055, -1.055, -3.164] * 16
OS1_BEAM_ORIGIN_M = 0.015806
OS1_COLUMNS = 1024

# -- Hesai PandarXT-32 ------------------------------------------------------------------------
# HesaiLidar_SDK_2.0 correction/angle_correction/PandarXT_Angle Correction File.csv (channel 1..32:
# elevation 15 .. -16 deg, azimuth 0) and correction/firetime_correction/PandarXT-32_Firetime
# Correction File.csv (6 + 1.512 (channel - 1) us); a block every 50 us (0.18 deg at 10 Hz,
# udp_protocol_v6_1.h XT_BLOCK_NS_OFFSET2 = -50000 ns).
XT32_ELEVATION_DEG = [15 - c for c in range(32)]
XT32_FIRETIME_US = [round(6 + 1.512 * c, 3) for c in range(32)]
XT32_BLOCK_US = 50.0


def _emitters(
    firing_res_deg: float,
    azimuth_deg: list[float],
    elevation_deg: list[float],
    fire_time_ns: list[int],
    channel_id: list[int],
    **optional: list[float],
) -> dict[str, Any]:
    state: dict[str, Any] = {
        "azimuth_deg": [round(float(a), 6) + 0.0 for a in azimuth_deg],  # + 0.0: no -0.0
        "elevation_deg": [round(float(e), 6) + 0.0 for e in elevation_deg],
        "fire_time_ns": [int(t) for t in fire_time_ns],
        "channel_id": [int(c) for c in channel_id],
    }
    for name, values in optional.items():
        state[name] = [round(float(v), 7) + 0.0 for v in values]
    return {"rot_pattern_firing_res_deg": firing_res_deg, "number_of_channels": len(channel_id), "states": [state]}


def _turn_deg(fire_time_us: float) -> float:
    """The FLU azimuth a clockwise head turns in ``fire_time_us`` at 10 Hz (negative)."""
    return -OMEGA_DEG_PER_S * fire_time_us * 1e-6


def helios5515() -> dict[str, Any]:
    polaris = json.loads((CONFIG / "sensors_polaris.json").read_text())["lidar"]
    offsets = polaris["azimuth_offsets_deg"]
    return {
        "_comment": (
            "RoboSense RS-Helios-5515 as rslidar_sdk publishes it (topic, frame, POINT_TYPE XYZI), with the "
            "per-channel firing times of rs_driver's Helios decoder. Elevations and azimuth offsets are the "
            "Polaris unit's (spec 'Vertical Angles'; the offsets are synthetic, see sensors_polaris.json). "
            "Generated by scripts/make_shipped_sensors.py; sources in docs/sensors.md."
        ),
        "extends": "sensors.json",
        "lidar": {
            "hz": HZ,
            "frame_id": "rslidar",
            "topic": "/rslidar_points",
            "point_type": "XYZI",
            "spin_direction": "cw",
            "scan_start_azimuth_deg": 0.0,
            "range_m": polaris["range_m"],
            "min_range_m": polaris["min_range_m"],
            "std_m": polaris["std_m"],
            "beam_divergence_mrad": polaris["beam_divergence_mrad"],
            "beam_divergence_v_mrad": polaris["beam_divergence_v_mrad"],
            "pulse_length_m": polaris["pulse_length_m"],
            "sub_rays": 1,
            "return_mode": "strongest",
            "radiometry": {"range_at_10pct_m": polaris["radiometry"]["range_at_10pct_m"]},
            "emitters": _emitters(
                0.2,
                [off + _turn_deg(t) for off, t in zip(offsets, HELIOS_FIRING_TSS_US)],
                polaris["elevations_deg"],
                [round(t * 1000) for t in HELIOS_FIRING_TSS_US],
                list(range(32)),
                hor_offset_m=[HELIOS_RX_M] * 32,
            ),
        },
    }


def _velodyne(name: str, elevation_deg: list[float], single_us: float, sequence_us: float, **optional: Any) -> dict:
    n = len(elevation_deg)
    fire_us = [single_us * k for k in range(n)]
    return {
        "_comment": (
            f"Velodyne {name} as velodyne_pointcloud (ROS 2) publishes it: topic velodyne_points, frame velodyne. "
            "A tick is one firing sequence; generated by scripts/make_shipped_sensors.py; sources in docs/sensors.md."
        ),
        "extends": "sensors.json",
        "lidar": {
            "hz": HZ,
            "frame_id": "velodyne",
            "topic": "/velodyne_points",
            "point_type": "velodyne",
            "spin_direction": "cw",
            "scan_start_azimuth_deg": 0.0,
            "min_range_m": 0.9,
            "wavelength_nm": 903.0,
            "emitters": _emitters(
                round(OMEGA_DEG_PER_S * sequence_us * 1e-6, 9),
                [_turn_deg(t) for t in fire_us],
                elevation_deg,
                [round(t * 1000) for t in fire_us],
                list(range(n)),
                **optional,
            ),
        },
    }


def vlp16() -> dict[str, Any]:
    # velodyne_pointcloud puts a return at d (cos v, sin v) + o (-sin v, cos v) (xy, z): on the ray
    # from height o / cos v along the beam, which is the origin offset the emitters block takes.
    vert = [o / math.cos(math.radians(v)) for o, v in zip(VLP16_VERT_OFFSET_M, VLP16_ELEVATION_DEG)]
    sensor = _velodyne("VLP-16", VLP16_ELEVATION_DEG, VLP16_SINGLE_FIRING_US, VLP16_SEQUENCE_US, vert_offset_m=vert)
    sensor["lidar"].update(range_m=100.0, std_m=0.03)
    return sensor


def hdl32e() -> dict[str, Any]:
    sensor = _velodyne("HDL-32E", HDL32E_ELEVATION_DEG, HDL32E_SINGLE_FIRING_US, HDL32E_SEQUENCE_US)
    sensor["lidar"].update(range_m=100.0, std_m=0.02)
    return sensor


def os1_64() -> dict[str, Any]:
    return {
        "_comment": (
            "Ouster OS1-64 (the ouster-sdk default metadata, 1024 x 10) as ouster-ros (ROS 2) publishes it: "
            "/ouster/points in os_lidar, point type original. All 64 beams of a column fire together. "
            "Generated by scripts/make_shipped_sensors.py; sources in docs/sensors.md."
        ),
        "extends": "sensors.json",
        "lidar": {
            "hz": HZ,
            "frame_id": "os_lidar",
            "topic": "/ouster/points",
            "point_type": "ouster",
            "spin_direction": "cw",
            "scan_start_azimuth_deg": 0.0,
            "emitters": _emitters(
                360.0 / OS1_COLUMNS,
                [-a for a in OS1_AZIMUTH_DEG],  # ouster: theta = theta_encoder - 2 pi azimuth / 360
                OS1_ALTITUDE_DEG,
                [0] * 64,
                list(range(64)),
                hor_offset_m=[OS1_BEAM_ORIGIN_M] * 64,
            ),
        },
    }


def pandar_xt32() -> dict[str, Any]:
    # Hesai azimuths run clockwise from the frame's +y: FLU azimuth = 90 deg - Hesai azimuth, so the
    # sweep (Hesai 0 deg, frame_start_azimuth 0) starts near FLU 90 deg. A tick starts at the first
    # firing of a block, 6 us after the block's time, so its fire times and turns count from there.
    first = XT32_FIRETIME_US[0]
    return {
        "_comment": (
            "Hesai PandarXT-32 as HesaiLidar_ROS_2.0 publishes it (/lidar_points in hesai_lidar), with the "
            "SDK's angle and firetime correction files. Generated by scripts/make_shipped_sensors.py; "
            "sources in docs/sensors.md."
        ),
        "extends": "sensors.json",
        "lidar": {
            "hz": HZ,
            "frame_id": "hesai_lidar",
            "topic": "/lidar_points",
            "point_type": "hesai",
            "spin_direction": "cw",
            # Hesai 0 deg is the encoder at the block's time; the sweep's first firing comes 6 us later.
            "scan_start_azimuth_deg": round(90.0 + _turn_deg(first), 9),
            "emitters": _emitters(
                round(OMEGA_DEG_PER_S * XT32_BLOCK_US * 1e-6, 9),
                [_turn_deg(t - first) for t in XT32_FIRETIME_US],
                XT32_ELEVATION_DEG,
                [round((t - first) * 1000) for t in XT32_FIRETIME_US],
                list(range(32)),
            ),
        },
    }


def read_ft120(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Azimuth and elevation (deg, Hesai convention) of the FT120's pixels, (columns, rows) each.

    The angle-correction file (HesaiLidar_SDK_2.0 udp7_2_parser.cc, version 1 layout): 0xEE 0xFF,
    two version bytes, two reserved bytes, then uint8 columns, uint8 channels (rows), uint8
    resolution, then columns x rows int32 azimuths and as many elevations (column-major: pixel
    ``col * rows + row``), each times resolution x 0.01 deg, then a 32-byte hash.
    """
    data = path.read_bytes()
    if data[:2] != b"\xee\xff" or data[3] != 1:
        raise SystemExit(f"{path}: not a version-1 FT angle-correction file")
    columns, rows, resolution = data[6], data[7], data[8]
    n = columns * rows
    angles = np.frombuffer(data, dtype="<i4", count=2 * n, offset=9).astype(np.float64) * resolution * 0.01
    return angles[:n].reshape(columns, rows), angles[n:].reshape(columns, rows)


def ft120(path: Path) -> dict[str, Any]:
    azimuth_h, elevation = read_ft120(path)
    columns, rows = azimuth_h.shape
    n = columns * rows
    state = {
        "azimuth_deg": [round(float(a), 2) + 0.0 for a in (90.0 - azimuth_h).ravel()],  # 0.01 deg steps
        "elevation_deg": [round(float(e), 2) + 0.0 for e in elevation.ravel()],
        "fire_time_ns": [0] * n,
        "channel_id": [int(r) for r in np.tile(np.arange(rows), columns)],  # the driver's channel index: the row
        "bank": [int(c) for c in np.repeat(np.arange(columns), rows)],
    }
    return {
        "_comment": (
            "Hesai FT120 flash lidar: the 160 x 120 pixel directions of Hesai's angle-correction file, all pixels "
            "of a frame fired in one flash (one solid-state tick); a line is a column, as the driver sends one "
            "packet per column. Range and radiometry are the generic defaults of sensors.json. Generated by "
            "scripts/make_shipped_sensors.py; sources in docs/sensors.md."
        ),
        "extends": "sensors.json",
        "lidar": {
            "hz": HZ,
            "frame_id": "hesai_lidar",
            "topic": "/lidar_points",
            "point_type": "hesai",
            "scan_type": "solid_state",
            "sub_rays": 1,
            "emitters": {
                "number_of_channels": n,
                "num_lines": columns,
                "num_rays_per_line": [rows] * columns,
                "states": [state],
            },
        },
    }


SENSORS = {"helios5515": helios5515, "vlp16": vlp16, "hdl32e": hdl32e, "os1_64": os1_64, "pandar_xt32": pandar_xt32}


def _dump(sensor: dict[str, Any]) -> str:
    """Indented JSON with every list of numbers on one line (the files stay readable and small)."""
    text = json.dumps(sensor, indent=2)
    return (
        re.sub(r"\[\n\s+([^\[\]{}]*?)\n\s*\]", lambda m: "[" + re.sub(r",\n\s+", ", ", m.group(1)) + "]", text) + "\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ft120", type=Path, help="Hesai's FT120C1X angle-correction file (.dat)")
    parser.add_argument("--out", type=Path, default=CONFIG, help="folder of the sensors files (default: config/)")
    args = parser.parse_args()
    built = {name: make() for name, make in SENSORS.items()}
    if args.ft120 is not None:
        built["ft120"] = ft120(args.ft120)
    for name, sensor in built.items():
        path = args.out / f"sensors_{name}.json"
        atomic_write(path, _dump(sensor).encode(), overwrite=True)
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
