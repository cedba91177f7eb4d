"""The progressive ray order of a scan under a deadline (the simulator README, "Deadline Contract").

Rays go centre first, then the two edges of the field of view, then always into the middle of
the largest angular gap left, so every prefix of three or more rays spans the whole field of
view and a scan cut short at any ray is coarse everywhere rather than missing a side. The middle
of a gap with two middles is the one nearer the centre; of gaps of one length, the one nearer the centre goes first, and of two mirror images the left
(negative) one, its mirror right after, so no side is favoured for more than one ray.

The order is computed once per pattern (a heap over the gaps), never per scan.
"""

from __future__ import annotations

import heapq

import numpy as np

from acres_lidar_ros.errors import ConfigError


def progressive_order(n: int) -> np.ndarray:
    """Order of the positions ``0 .. n - 1`` of a sorted angle grid: (n,) int64, a permutation.

    ``[n // 2, 0, n - 1, ...]``: the centre, the edges, then the middle of the largest gap.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ConfigError(f"progressive_order: n = {n!r}: must be an integer >= 1")
    n = int(n)
    centre = n // 2
    order = [centre] + [e for e in dict.fromkeys((0, n - 1)) if e != centre]
    heap: list[tuple[int, int, int, int]] = []

    def push(lo: int, hi: int) -> None:
        if hi - lo >= 2:  # positions strictly between lo and hi remain
            low, high = (lo + hi) // 2, (lo + hi + 1) // 2  # the middle, rounded towards the centre
            mid = high if abs(high - centre) < abs(low - centre) else low
            heapq.heappush(heap, (-(hi - lo), abs(2 * mid - 2 * centre), mid, lo))

    if n >= 3:
        push(0, centre)
        push(centre, n - 1)
    while heap:
        length, _, mid, lo = heapq.heappop(heap)
        order.append(mid)
        push(lo, mid)
        push(mid, lo - length)
    return np.asarray(order, np.int64)


def beam_order(azimuth_rad: np.ndarray) -> np.ndarray:
    """Progressive order of beams at ``azimuth_rad`` (b,) (counter-clockwise from forward): beam
    indices (b,) int64. The field of view is the azimuths wrapped to [-pi, pi) and sorted, so for
    the planar 360-beam scan the centre is forward (beam 0) and the edges are the two beams
    behind (beams 180 and 179)."""
    az = np.asarray(azimuth_rad, np.float64)
    if az.ndim != 1 or len(az) == 0 or not np.isfinite(az).all():
        raise ConfigError(f"beam_order: azimuth_rad {az.shape}: must be (b >= 1,) finite angles")
    wrapped = (az + np.pi) % (2.0 * np.pi) - np.pi
    by_angle = np.argsort(wrapped, kind="stable")
    return by_angle[progressive_order(len(az))]


__all__ = ["beam_order", "progressive_order"]
