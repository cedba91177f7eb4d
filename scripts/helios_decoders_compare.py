"""How rs_driver and nebula decode the same RS-Helios pcap (docs/packets.md, "Decoders compared").

Both decoders' arithmetic, as their sources state it, applied to every MSOP return of a pcap
(``acres-lidar record --sensor helios5515 --packets pcap``); prints the differences in azimuth,
position and point time, and the returns one keeps and the other drops.

rs_driver (RoboSense-LiDAR/rs_driver 4eeadace465023db65a63fc8ef680dfaaca5812c,
``src/rs_driver/driver/decoder/decoder_RSHELIOS.hpp``): distances 0.1 to 180 m (lines 133-135);
lens centre RX 0.03498 m, RZ 0 (139-141); channel c fired ``firing_tss[c]`` = 1.73 us x c after its
block, interpolated into the azimuth as ``int(block_az_diff x firing_tss[c] / 55.56)`` 0.01 deg
(146-160, 267-269); x = d cos(v) cos(a + h) + RX cos(a), y = -d cos(v) sin(a + h) - RX sin(a),
z = d sin(v) + RZ (271-279); ``block_az_diff`` the next block's (pair's) azimuth minus this one's,
the last block's 20 at 600 rpm, block times 55.56 us apart (``block_iterator.hpp`` 81-103, 116-138).

nebula (tier4/nebula 606ac41f1f136333915f0114736f2f828e9d2789,
``src/nebula_robosense/nebula_robosense_decoders/include/nebula_robosense_decoders/decoders/``):
azimuth = block azimuth + the DIFOP's horizontal entry, no interpolation inside the block
(``angle_corrector_calibration_based.hpp`` 63-78); x = d cos(v) cos(az), y = -d cos(v) sin(az),
z = d sin(v), no lens offset (``robosense_decoder.hpp`` 157-160); point time = the packet's header
time + ``firing_time_offset_ns_single`` / ``_dual`` [block][channel] (``helios.hpp`` 166-240,
``robosense_decoder.hpp`` 146-147, 192-198); distances 0.2 to 150 m (``helios.hpp`` 257-258,
``robosense_decoder.hpp`` 103-111); in dual return, a return identical to the other block's
(distance and reflectivity) only once, and one within ``dual_return_distance_threshold`` (0.1 m
in ``nebula_robosense/config/Helios.param.yaml``) of the other dropped (``robosense_decoder.hpp``
113-141, ``robosense_sensor.hpp`` 85-102).

Usage: python scripts/helios_decoders_compare.py RUN/packets.pcap [NEBULA/.../decoders/helios.hpp]
(the time tables are read from nebula's helios.hpp, given as the second argument).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

RX_M = 0.03498
BLOCK_US = 55.56
RS_TSS_US = np.array([1.73 * c for c in range(32)])  # rs_driver's firing_tss, to its two decimals


def nebula_tables(helios_hpp: Path) -> tuple[np.ndarray, np.ndarray]:
    """(12, 32) ns tables ``firing_time_offset_ns_single`` and ``_dual`` from nebula's helios.hpp."""
    text = helios_hpp.read_text()
    out = []
    for name in ("firing_time_offset_ns_single", "firing_time_offset_ns_dual"):
        body = text[text.index(name) :]
        body = body[body.index("{") + 1 : body.index("};")]
        values = np.array([int(v) for v in body.replace("{", " ").replace("}", " ").replace(",", " ").split()])
        out.append(values.reshape(12, 32))
    return out[0], out[1]


def read_pcap(path: Path) -> tuple[list[np.ndarray], np.ndarray]:
    """The UDP payloads and destination ports of a classic pcap of Ethernet + IPv4 + UDP frames."""
    data = np.fromfile(path, np.uint8)
    payloads, ports, at = [], [], 24
    while at < data.size:
        length = int(data[at + 8 : at + 12].view("<u4")[0])
        frame = data[at + 16 : at + 16 + length]
        ports.append(int(frame[36]) << 8 | int(frame[37]))
        payloads.append(frame[42:])
        at += 16 + length
    return payloads, np.array(ports)


def _be16(b: np.ndarray) -> np.ndarray:
    return b[..., 0].astype(np.int64) << 8 | b[..., 1].astype(np.int64)


def _table(raw: np.ndarray) -> np.ndarray:
    entries = raw.reshape(32, 3)
    return np.where(entries[:, 0] == 0, 1, -1) * _be16(entries[:, 1:3])


def main(pcap: Path, helios_hpp: Path | None) -> None:
    payloads, ports = read_pcap(pcap)
    difop = next(p for p, port in zip(payloads, ports) if port == 7788)
    dual = int(difop[300]) == 0x00
    vertical, horizontal = _table(difop[468:564]), _table(difop[564:660])
    msops = np.stack([p for p, port in zip(payloads, ports) if port == 6699])
    seconds = np.zeros(len(msops), np.int64)
    for k in range(6):
        seconds = seconds << 8 | msops[:, 20 + k].astype(np.int64)
    micros = np.zeros(len(msops), np.int64)
    for k in range(4):
        micros = micros << 8 | msops[:, 26 + k].astype(np.int64)
    packet_ns = seconds * 1_000_000_000 + micros * 1000
    blocks = msops[:, 42 : 42 + 1200].reshape(len(msops), 12, 100)
    block_az = _be16(blocks[:, :, 2:4])
    units = blocks[:, :, 4:].reshape(len(msops), 12, 32, 3)
    distance_m = _be16(units[..., :2]) * 0.0025
    step = 2 if dual else 1
    az_diff = np.full(block_az.shape, 20, np.int64)  # the last block (pair): 0.2 deg at 600 rpm
    az_diff[:, : 12 - step] = (block_az[:, step:] - block_az[:, : 12 - step]) % 36000
    block_us = (np.arange(12) // step) * BLOCK_US
    # rs_driver
    a = block_az[..., None] + (az_diff[..., None] * (RS_TSS_US / BLOCK_US)).astype(np.int64)
    v = np.radians(vertical * 0.01)
    a_final = np.radians((a + horizontal) * 0.01)
    a_lens = np.radians(a * 0.01)
    xy = distance_m * np.cos(v)
    rs_xyz = np.stack([xy * np.cos(a_final) + RX_M * np.cos(a_lens), -xy * np.sin(a_final) - RX_M * np.sin(a_lens)])
    rs_xyz = np.concatenate([rs_xyz, (distance_m * np.sin(v))[None]])
    rs_ns = packet_ns[:, None, None] + np.rint((block_us[:, None] + RS_TSS_US) * 1e3).astype(np.int64)
    # nebula
    az = np.radians((block_az[..., None] + horizontal) * 0.01)
    neb_xyz = np.stack([xy * np.cos(az), -xy * np.sin(az), distance_m * np.sin(v)])
    az_deg = ((a - block_az[..., None]) * 0.01)[distance_m > 0]
    rs_keep = (distance_m >= 0.1) & (distance_m <= 180.0)
    neb_keep = (distance_m >= 0.2) & (distance_m <= 150.0) & (distance_m > 0)
    if dual:
        first, second = units[:, 0::2], units[:, 1::2]
        identical = np.all(first == second, axis=-1)
        near = np.abs(distance_m[:, 0::2] - distance_m[:, 1::2]) < 0.1
        neb_keep[:, 0::2] &= ~(identical | near)
    both = rs_keep & neb_keep & (distance_m > 0)
    error_m = np.linalg.norm(rs_xyz - neb_xyz, axis=0)[both]
    print(f"{pcap}: {len(msops)} MSOPs, {'dual' if dual else 'single'} return")
    print(
        f"  returns: rs_driver keeps {int((rs_keep & (distance_m > 0)).sum())}, nebula {int(neb_keep.sum())}; "
        f"ranges {distance_m[distance_m > 0].min():.2f} to {distance_m.max():.2f} m"
    )
    print(
        f"  azimuth, rs_driver minus nebula: {az_deg.min():.2f} to {az_deg.max():.2f} deg "
        f"(by channel: {', '.join(f'{d:.2f}' for d in (az_diff[0, 0] * (RS_TSS_US / BLOCK_US)).astype(int) * 0.01)})"
    )
    print(
        f"  position difference: median {np.median(error_m) * 1e3:.1f} mm, p99 {np.percentile(error_m, 99) * 1e3:.1f} mm,"
        f" max {error_m.max() * 1e3:.1f} mm; horizontal lens offset alone {RX_M * 1e3:.2f} mm"
    )
    if helios_hpp is not None:
        single, dual_table = nebula_tables(helios_hpp)
        table = dual_table if dual else single
        neb_ns = packet_ns[:, None, None] + table[None]
        dt_us = (rs_ns - neb_ns)[both] * 1e-3
        per_channel = (block_us[:, None] + RS_TSS_US) * 1e3 - table
        print(
            f"  point time, rs_driver minus nebula: {dt_us.min():.2f} to {dt_us.max():.2f} us "
            f"(tables: channel {int(np.abs(per_channel).max(axis=0).argmax())} the most, "
            f"{np.abs(per_channel).max() * 1e-3:.2f} us)"
        )


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]) if len(sys.argv) > 2 else None)
