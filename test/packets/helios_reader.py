"""A reader of RS-Helios MSOP/DIFOP pcap files, written from the format's description
(docs/packets.md, "RoboSense"), not from a decoder's code: it applies rs_driver's documented
arithmetic (azimuth interpolation inside a block, the DIFOP angle tables, the 3.498 cm lens
offset, the channel times) to the bytes, and splits frames where the block azimuth wraps."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

RX_M = 0.03498
BLOCK_US = 55.56
TSS_US = 1.73 * np.arange(32)


@dataclass
class HeliosPoints:
    """Decoded returns: (n,) arrays; ``frame`` counts from the first complete one; ``column`` is the block's index in it."""

    xyz: np.ndarray
    distance_m: np.ndarray
    intensity: np.ndarray
    time_s: np.ndarray
    frame: np.ndarray
    column: np.ndarray
    channel: np.ndarray


def read_pcap(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(times s, UDP destination ports, payloads as a list) of every record of a classic pcap file."""
    data = np.fromfile(path, np.uint8)
    header = data[:24].view("<u4")
    assert header[0] == 0xA1B2C3D4 and data[20:24].view("<u4")[0] == 1  # microseconds, Ethernet
    times, ports, payloads = [], [], []
    at = 24
    while at < data.size:  # a test reader: one record at a time is fine
        sec, usec, incl, orig = data[at : at + 16].view("<u4")
        assert incl == orig
        frame = data[at + 16 : at + 16 + incl]
        assert frame[12] == 0x08 and frame[13] == 0x00 and frame[14] == 0x45 and frame[23] == 17  # IPv4, UDP
        times.append(sec + usec * 1e-6)
        ports.append(int(frame[36]) << 8 | int(frame[37]))
        payloads.append(frame[42:])
        at += 16 + incl
    return np.array(times), np.array(ports), payloads


def _u16(b: np.ndarray) -> np.ndarray:
    return b[..., 0].astype(np.int64) << 8 | b[..., 1].astype(np.int64)


def _angles(table: np.ndarray) -> np.ndarray:
    """32 entries of (sign, uint16 big-endian) in 0.01 deg."""
    entries = table.reshape(32, 3)
    return np.where(entries[:, 0] == 0, 1, -1) * _u16(entries[:, 1:3])


def decode(path: Path, msop_port: int = 6699, difop_port: int = 7788) -> tuple[HeliosPoints, dict]:
    """The points and the DIFOP's facts of a pcap file."""
    _, ports, payloads = read_pcap(path)
    return decode_packets(ports, payloads, msop_port, difop_port)


def decode_packets(ports, payloads, msop_port: int = 6699, difop_port: int = 7788) -> tuple[HeliosPoints, dict]:
    """The points of MSOP/DIFOP payloads (uint8 arrays) in arrival order, each with its UDP port."""
    ports = np.asarray(ports)
    difops = [p for p, port in zip(payloads, ports) if port == difop_port]
    assert difops and ports[0] == difop_port  # a DIFOP comes before any MSOP
    difop = difops[0]
    assert difop.size == 1248 and bytes(difop[:8]) == bytes.fromhex("A5FF005A11115555")
    info = {
        "rpm": int(_u16(difop[8:10])),
        "return_mode": int(difop[300]),
        "vertical": _angles(difop[468:564]),
        "horizontal": _angles(difop[564:660]),
        "difops": len(difops),
    }
    dual = info["return_mode"] == 0x00
    msops = np.stack([p for p, port in zip(payloads, ports) if port == msop_port])
    assert msops.shape[1] == 1248 and np.all(msops[:, :4] == np.frombuffer(bytes.fromhex("55AA055A"), np.uint8))
    assert np.all(msops[:, 17] == 1)  # 0.25 cm range resolution
    n = msops.shape[0]
    seconds = msops[:, 20:26].astype(np.int64) @ (256 ** np.arange(5, -1, -1))
    micros = msops[:, 26:30].astype(np.int64) @ (256 ** np.arange(3, -1, -1))
    packet_s = seconds + micros * 1e-6
    blocks = msops[:, 42 : 42 + 1200].reshape(n, 12, 100)
    assert np.all(blocks[:, :, 0] == 0xFF) and np.all(blocks[:, :, 1] == 0xEE)
    azimuth = _u16(blocks[:, :, 2:4])  # (n, 12), 0.01 deg
    units = blocks[:, :, 4:].reshape(n, 12, 32, 3)
    distance = _u16(units[..., 0:2]) * 0.0025
    intensity = units[..., 2]
    step = 2 if dual else 1
    # rs_driver: the azimuth step to the next firing block (the next pair in dual), the nominal 20 for the
    # packet's last one or a step over 1 deg; the same for both blocks of a pair.
    flat_az = azimuth.reshape(-1)
    diff = np.full(flat_az.shape, 20, np.int64)
    diff[:-step] = (flat_az[step:] - flat_az[:-step]) % 36000
    diff = diff.reshape(n, 12)
    diff[:, 12 - step :] = 20
    diff = np.where(diff > 100, 20, diff)
    interp = (diff[:, :, None].astype(np.float32) * TSS_US.astype(np.float32) / np.float32(BLOCK_US)).astype(np.int64)
    theta = azimuth[:, :, None] + interp  # before the horizontal table, 0.01 deg
    theta_f = theta + info["horizontal"][None, None, :]
    omega = np.radians(info["vertical"] * 0.01)[None, None, :]
    th, thf = np.radians(theta * 0.01), np.radians(theta_f * 0.01)
    x = distance * np.cos(omega) * np.cos(thf) + RX_M * np.cos(th)
    y = -distance * np.cos(omega) * np.sin(thf) - RX_M * np.sin(th)
    z = distance * np.sin(omega)
    block_time = (np.arange(12) // step) * BLOCK_US
    time_s = packet_s[:, None, None] + (block_time[None, :, None] + TSS_US[None, None, :]) * 1e-6
    # Frames split where the block azimuth decreases (split_angle 0); the blocks before the first wrap are no frame.
    first_blocks = azimuth[:, ::step].reshape(-1)
    wraps = np.concatenate([[0], (np.diff(first_blocks) < 0).astype(np.int64)])
    frame = np.cumsum(wraps)
    frame_start = np.flatnonzero(np.concatenate([[1], np.diff(frame)]))
    column = np.arange(first_blocks.size) - frame_start[frame]
    frame = np.repeat(frame, step).reshape(n, 12)
    column = np.repeat(column, step).reshape(n, 12)
    keep = distance > 0
    if dual:  # the pair's blocks hold the same return twice where the beam has one: keep it once
        same = (distance[:, 0::2] == distance[:, 1::2]) & (intensity[:, 0::2] == intensity[:, 1::2])
        keep[:, 0::2] &= ~same
    shape = (n, 12, 32)
    pick = lambda a: np.broadcast_to(a, shape)[keep]  # noqa: E731
    points = HeliosPoints(
        xyz=np.stack([x[keep], y[keep], z[keep]], axis=1),
        distance_m=distance[keep],
        intensity=intensity[keep],
        time_s=time_s[keep],
        frame=pick(frame[:, :, None]),
        column=pick(column[:, :, None]),
        channel=pick(np.arange(32)[None, None, :]),
    )
    return points, info
