"""Scan timing: the firing time of each column relative to the scan stamp (spec "Scan Timing").

The stamp is the end of the sweep. The column at the start azimuth fires first, one period
before the stamp; all rings of a column fire together. Scans are due at ``k T`` and stamped on the
first 1/120 s physics step at or after it (``scan_stamp_ns``).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

SPIN_DIRECTIONS = ("cw", "ccw")


def column_time_offset(
    column_azimuth_rad: np.ndarray | float,
    start_azimuth_rad: float,
    spin_direction: str,
    period_s: float,
) -> np.ndarray:
    """``dt_c``: firing time of a column minus the scan stamp, s (AcresLidar::ColumnTimeOffset).

    ``phi_c = (alpha_c - alpha_s) mod 2 pi`` for a ccw spin, ``(alpha_s - alpha_c) mod 2 pi`` for
    a cw spin, and ``dt_c = phi_c / (2 pi) T - T``, so ``-T <= dt_c < 0``.

    Parameters
    ----------
    column_azimuth_rad : (N_c,) float64 or float
        Block azimuth ``alpha_c`` of each column, counter-clockwise from forward.
    start_azimuth_rad : float
        ``alpha_s``, the azimuth where the sweep starts.
    spin_direction : "cw" or "ccw"
    period_s : float
        Sweep period ``T = 1 / hz``.

    Returns
    -------
    (N_c,) float64 (0-d for a scalar input).
    """
    if spin_direction not in SPIN_DIRECTIONS:
        raise ValueError(f"spin_direction {spin_direction!r} is not one of {SPIN_DIRECTIONS}")
    alpha = np.asarray(column_azimuth_rad, dtype=np.float64)
    turned = alpha - start_azimuth_rad if spin_direction == "ccw" else start_azimuth_rad - alpha
    phi_rad = np.mod(turned, 2.0 * np.pi)
    # np.mod of a tiny negative number can round to exactly 2 pi; that column is the first.
    phi_rad = np.where(phi_rad >= 2.0 * np.pi, 0.0, phi_rad)
    return phi_rad / (2.0 * np.pi) * period_s - period_s


STEPS_PER_S = 120
"""Physics steps per second, 1 / 120 s each, that clock the scans (spec "Scan Stamp")."""


def scan_stamp_ns(k: int, hz: float, stepped: bool = True) -> int:
    """Stamp of the scan due at ``k T`` (``T = 1 / hz``), ns after the episode start.

    A scan is due at ``t = 0`` and each ``T``; it is stamped in the first 1/120 s physics step at
    or after its due time (spec "Scan Stamp"): at 7 Hz 0, 0.15, 0.291667, 0.433333 s. Computed
    in exact rational arithmetic, so a due time on a step (every second at 7 Hz, every scan at
    10 Hz) stays on it. ``stepped`` False: the due time itself, ``round(k 1e9 / hz)``.
    """
    rate = Fraction(hz).limit_denominator(1_000_000)
    if stepped:
        step = -((-k * STEPS_PER_S * rate.denominator) // rate.numerator)  # ceil(k 120 / hz)
        return (step * 1_000_000_000 + STEPS_PER_S // 2) // STEPS_PER_S
    return round(Fraction(k * 1_000_000_000) / rate)


def first_scan_at_or_after(t_ns: int, hz: float, stepped: bool = True) -> int:
    """The smallest ``k >= 0`` whose ``scan_stamp_ns(k)`` is at or after ``t_ns``."""
    rate = Fraction(hz).limit_denominator(1_000_000)
    k = max(int(Fraction(max(t_ns, 0)) * rate // 1_000_000_000) - 1, 0)  # a stamp is never before its due time
    while scan_stamp_ns(k, hz, stepped) < t_ns:
        k += 1
    return k


def column_slices(column_offset_s: np.ndarray, count: int, period_s: float) -> list[tuple[int, np.ndarray]]:
    """The slices of partial output (the attribute list's ``partialOutputs``): the sweep ``[S - T, S)`` cut
    into ``count`` equal parts; slice ``k`` holds the columns whose first firing time falls in
    ``[S - T + k T / count, S - T + (k + 1) T / count)``. A column at or after the stamp (instant
    mode, or no motion distortion: all of them) is in the last slice, one before ``S - T`` in the
    first.

    Parameters
    ----------
    column_offset_s : (N_c,) float64
        Each column's first firing time minus the stamp, s.
    count : int >= 1
    period_s : float
        ``T``.

    Returns
    -------
    list of (k, columns) for the slices that hold a column, in slice order; ``columns`` (n,)
    int64 in firing order (the column number breaks a tie). Every column is in exactly one.
    """
    period_ns = int(round(period_s * 1e9))
    offset_ns = np.rint(np.asarray(column_offset_s, dtype=np.float64) * 1e9).astype(np.int64)
    part = np.clip(((offset_ns + period_ns) * count) // period_ns, 0, count - 1)
    order = np.lexsort((np.arange(part.size), offset_ns, part))  # by slice, then firing time
    bounds = np.searchsorted(part[order], np.arange(count + 1))
    return [(k, order[bounds[k] : bounds[k + 1]]) for k in range(count) if bounds[k + 1] > bounds[k]]


def slice_span_ns(k: int, count: int, stamp_ns: int, period_s: float) -> tuple[int, int]:
    """``[start, end)`` of slice ``k`` of ``count`` of the sweep ending at ``stamp_ns``, ns."""
    period_ns = int(round(period_s * 1e9))
    sweep_start_ns = int(stamp_ns) - period_ns
    return sweep_start_ns + (k * period_ns) // count, sweep_start_ns + ((k + 1) * period_ns) // count
