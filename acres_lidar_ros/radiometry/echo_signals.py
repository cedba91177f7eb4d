"""What each echo gives before its noise numbers are drawn (step 3 of ``detection``, the part that
needs no draw).

An echo's mean signal ``S`` (the range equation with per-ring ``R10``, overlap, the emitter's power
and two-way extinction), its ``S`` in clear air (``alpha = 0``: the reported reflectance's
``S_c = S e^{2 alpha R_e}`` and the truth output's clear-air test), its range noise ``sigma_R`` (of
``SNR = S / sqrt(S + B)``) and the windows that depend on its range alone (near, far, azimuth:
``windows.CellWindows.range_bits``) depend on the echo and its beam only. So, like the echoes, they
are formed per column block while the sweep runs (``echoes.prepare_block``), and after the stamp
``detection.detect`` only takes each echo's two normals at its ring-major place, forms ``S'`` and
``R_meas`` and decides. With clutter the echoes, and so these, are formed after the stamp.

The transcendental work of the step (the overlap's ``expm1`` and the extinction's ``exp``) is all
here; what remains after the stamp is a square root per echo. Each equation is
``scalar_physics``'.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba
import numpy as np

from acres_lidar_ros.cores import map_parts, split_bounds
from acres_lidar_ros.radiometry.equation_kernels import range_sigma_of_snr, snr
from acres_lidar_ros.radiometry.equation_kernels import signal_counts as signal_counts_of
from acres_lidar_ros.radiometry.radiometric_model import BeamModel
from acres_lidar_ros.radiometry.windows import CellWindows

MIN_ECHOES_PER_PART = 4096


@dataclass(frozen=True)
class EchoSignals:
    """Per echo (the order of its ``Echoes``), what the noise draws act on.

    Attributes
    ----------
    clear_counts : (e,) float64
        ``S`` in clear air (``alpha = 0``).
    signal_counts : (e,) float64
        ``S``, after the two-way extinction of the scan's atmosphere (``clear_counts`` in clear air).
    range_sigma_m : (e,) float64
        ``sigma_R`` of ``S``, m.
    window : (e,) uint8
        The ``windows.WINDOW_*`` bits of the range windows and the azimuth window (the
        separation near limit needs the detection: ``detection.detect`` adds it).
    """

    clear_counts: np.ndarray
    signal_counts: np.ndarray
    range_sigma_m: np.ndarray
    window: np.ndarray

    @staticmethod
    def concatenate(parts: list[EchoSignals]) -> EchoSignals:
        """The signals of consecutive groups of echoes, one after the other."""
        if len(parts) == 1:
            return parts[0]
        return EchoSignals(
            *(np.concatenate([getattr(p, name) for p in parts]) for name in EchoSignals.__dataclass_fields__)
        )

    def take(self, order: np.ndarray) -> EchoSignals:
        """The signals of the echoes ``order`` (indices)."""
        return EchoSignals(*(getattr(self, name)[order] for name in EchoSignals.__dataclass_fields__))


def model_windows(model: BeamModel) -> CellWindows:
    """The beams' windows of ``model`` (the spec's band where the model has none)."""
    return model.windows if model.windows is not None else CellWindows.band(model.config, model.beams)


def echo_signals(
    cell: np.ndarray,
    range_m: np.ndarray,
    reflectance: np.ndarray,
    peak: np.ndarray,
    model: BeamModel,
    windows: CellWindows | None = None,
    split: bool = True,
) -> EchoSignals:
    """``S``, ``S`` in clear air, ``sigma_R`` and the range and azimuth window bits of each echo
    (see the module notes), over the cores for many echoes.

    Parameters
    ----------
    cell : (e,) int64
        Beam of each echo (``echoes.Echoes``).
    range_m, reflectance, peak : (e,) float64
        ``R_e``, ``rho_e`` and ``g_e``.
    model : BeamModel
    windows : CellWindows, optional
        ``model_windows(model)`` (given to save forming the band again).
    split : bool
        Split many echoes between the cores (``cores``); False in a part that already runs on one.
    """
    n_echo = cell.size
    clear, signal, sigma = np.empty(n_echo), np.empty(n_echo), np.empty(n_echo)
    config = model.config
    rad = config.radiometry
    inputs = (
        reflectance,
        range_m,
        peak,
        cell,
        config.rings,
        float(rad.signal_at_10pct_counts),
        np.ones(model.beams) if model.power_ratio is None else model.power_ratio,
        np.asarray(rad.ring_range_at_10pct_m, dtype=np.float64),
        float(rad.overlap_range_m),
        float(model.atmosphere.alpha_per_m),
        float(rad.ambient_counts),
        float(config.std_m),
        float(rad.range_std_low_snr_m),
    )

    def part(lo: int, hi: int) -> None:
        _mean_signals(*inputs, lo, hi, clear, signal, sigma)

    map_parts(part, split_bounds(n_echo, MIN_ECHOES_PER_PART) if split else np.array([0, n_echo]))
    windows = model_windows(model) if windows is None else windows
    return EchoSignals(clear, signal, sigma, windows.range_bits(cell, range_m))


@numba.njit(cache=True, nogil=True)
def _mean_signals(
    reflectance,
    range_m,
    peak,
    cell,
    rings,
    signal_at_10pct_counts,
    power_ratio,
    ring_range_at_10pct_m,
    overlap_range_m,
    alpha_per_m,
    ambient_counts,
    std_m,
    range_std_low_snr_m,
    lo,
    hi,
    clear,
    signal,
    sigma,
):
    """``S`` in clear air, ``S`` after the extinction and ``sigma_R`` of the echoes ``lo .. hi - 1``,
    written into the three output arrays. ``power_ratio`` (cells,) scales each beam's ``S_10`` by
    its emitter's peak power (``BeamModel.power_ratio``)."""
    snr_spec = snr(signal_at_10pct_counts, ambient_counts)
    for i in range(lo, hi):
        r = range_m[i]
        s_clear = signal_counts_of(
            reflectance[i],
            r,
            peak[i],
            signal_at_10pct_counts * power_ratio[cell[i]],
            ring_range_at_10pct_m[cell[i] % rings],
            overlap_range_m,
            0.0,
        )
        s = s_clear * math.exp(-2.0 * alpha_per_m * r) if alpha_per_m > 0.0 else s_clear
        clear[i] = s_clear
        signal[i] = s
        sigma[i] = range_sigma_of_snr(snr(s, ambient_counts), snr_spec, std_m, range_std_low_snr_m)
