"""Scan timing: the firing time of each column relative to the scan stamp (spec "Scan Timing").

The stamp is the end of the sweep. The column at the start azimuth fires first, one period
before the stamp; all rings of a column fire together.
"""

from __future__ import annotations

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
