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
from typing import NamedTuple

import numba
import numpy as np

from acres_lidar_ros.cores import map_parts, split_bounds
from acres_lidar_ros.radiometry.equation_kernels import range_sigma_of_snr, snr
from acres_lidar_ros.radiometry.equation_kernels import signal_counts as signal_counts_of
from acres_lidar_ros.radiometry.radiometric_model import BeamModel
from acres_lidar_ros.radiometry.windows import CellWindows

MIN_ECHOES_PER_PART = 4096


class EchoSignals(NamedTuple):
    """Per echo (the order of its ``Echoes``), what the noise draws act on; ``_mean_signals`` fills
    it and ``detection._noisy_signals`` reads it by these names.

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
        return EchoSignals(*(np.concatenate([getattr(p, name) for p in parts]) for name in EchoSignals._fields))

    def take(self, order: np.ndarray) -> EchoSignals:
        """The signals of the echoes ``order`` (indices)."""
        return EchoSignals(*(getattr(self, name)[order] for name in EchoSignals._fields))


class EchoTerms(NamedTuple):
    """The echoes' fields the compiled signal passes read: (e,) arrays, named as in ``echoes.Echoes``."""

    cell: np.ndarray  # int64: beam of each echo
    range_m: np.ndarray  # R_e, m
    reflectance: np.ndarray  # rho_e
    peak: np.ndarray  # g_e


class SignalTerms(NamedTuple):
    """The sensor's terms of the range equation and of ``sigma_R`` (``scalar_physics``) for ``_mean_signals``."""

    rings: int
    signal_at_10pct_counts: float  # S_10
    power_ratio: np.ndarray  # (cells,): each beam's emitter peak power ratio (BeamModel.power_ratio)
    ring_range_at_10pct_m: np.ndarray  # (rings,): R10 of each ring, m
    overlap_range_m: float
    alpha_per_m: float  # the atmosphere's extinction
    ambient_counts: float  # B
    std_m: float  # sigma_0, the range noise at high SNR, m
    range_std_low_snr_m: float  # the range noise's low-SNR term at SNR_spec, m


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
    config = model.config
    rad = config.radiometry
    windows = model_windows(model) if windows is None else windows
    out = EchoSignals(np.empty(n_echo), np.empty(n_echo), np.empty(n_echo), windows.range_bits(cell, range_m))
    echoes = EchoTerms(cell=cell, range_m=range_m, reflectance=reflectance, peak=peak)
    terms = SignalTerms(
        rings=config.rings,
        signal_at_10pct_counts=float(rad.signal_at_10pct_counts),
        power_ratio=np.ones(model.beams) if model.power_ratio is None else model.power_ratio,
        ring_range_at_10pct_m=np.asarray(rad.ring_range_at_10pct_m, dtype=np.float64),
        overlap_range_m=float(rad.overlap_range_m),
        alpha_per_m=float(model.atmosphere.alpha_per_m),
        ambient_counts=float(rad.ambient_counts),
        std_m=float(config.std_m),
        range_std_low_snr_m=float(rad.range_std_low_snr_m),
    )

    def part(lo: int, hi: int) -> None:
        _mean_signals(echoes, terms, lo, hi, out)

    map_parts(part, split_bounds(n_echo, MIN_ECHOES_PER_PART) if split else np.array([0, n_echo]))
    return out


@numba.njit(cache=True, nogil=True)
def _mean_signals(echoes, terms, lo, hi, out):
    """``S`` in clear air, ``S`` after the extinction and ``sigma_R`` of the echoes ``lo .. hi - 1``
    of ``echoes`` (an ``EchoTerms``) under ``terms`` (a ``SignalTerms``), written into ``out`` (an
    ``EchoSignals``: its ``clear_counts``, ``signal_counts`` and ``range_sigma_m``; its ``window``
    is not touched). ``terms.power_ratio`` (cells,) scales each beam's ``S_10`` by its emitter's
    peak power (``BeamModel.power_ratio``)."""
    reflectance, range_m, peak, cell = echoes.reflectance, echoes.range_m, echoes.peak, echoes.cell
    rings, power_ratio, ring_range_at_10pct_m = terms.rings, terms.power_ratio, terms.ring_range_at_10pct_m
    signal_at_10pct_counts, overlap_range_m = terms.signal_at_10pct_counts, terms.overlap_range_m
    alpha_per_m, ambient_counts = terms.alpha_per_m, terms.ambient_counts
    std_m, range_std_low_snr_m = terms.std_m, terms.range_std_low_snr_m
    clear, signal, sigma = out.clear_counts, out.signal_counts, out.range_sigma_m
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
