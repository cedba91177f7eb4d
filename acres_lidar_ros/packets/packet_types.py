"""What a packet encoder gives for a scan: streams of UDP payloads, each with its port and send times."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from acres_lidar_ros.errors import OutputError


@dataclass(frozen=True)
class PacketGroup:
    """Packets of one kind (one UDP port) of one scan.

    Attributes
    ----------
    kind : str
        What they are: ``data``/``position`` (Velodyne), ``msop``/``difop`` (RoboSense).
    port : int
        The sensor's default destination port for them.
    payloads : (n, L) uint8
        The UDP payloads, in send order.
    send_ns : (n,) int64
        When the sensor sends each one (its capture time in a pcap), ns on the scan's clock.
    """

    kind: str
    port: int
    payloads: np.ndarray
    send_ns: np.ndarray


MICROSECONDS_PER_HOUR = 3_600_000_000


def quantise(value: np.ndarray, step: float, what: str, limit: int = 65535) -> np.ndarray:
    """``value / step`` rounded to the nearest integer (NaN -> 0); ``OutputError`` past ``limit``.
    uint16 for a limit that fits one (RoboSense's and Velodyne's 16-bit distances), uint32 for a
    wider field (Ouster's 20-bit range in mm, past 65.535 m).

    A packet field cannot hold a larger value; the real sensor reports nothing that far.
    """
    value = np.asarray(value, dtype=np.float64)
    counts = np.rint(np.where(np.isfinite(value), value, 0.0) / step)
    if counts.size and (counts.max() > limit or counts.min() < 0):
        worst = float(value[np.isfinite(value)].max())
        raise OutputError(
            f"{what} {worst:.3f} does not fit the packet's field (0 to {limit} steps of {step}): "
            f"lower lidar.range_m to at most {limit * step:.3f}"
        )
    return counts.astype(np.uint16 if limit <= 0xFFFF else np.uint32)
