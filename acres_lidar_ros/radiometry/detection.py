"""The part of ProcessBeam that needs the whole scan: clutter, noise, detection and returns.

``finish_returns`` takes the ``BeamBlock``s of every beam of a scan (``echoes.prepare_block``)
and completes them, in the order the spec's streams run:

1. **Clutter** (rain and fog with clutter on): slabs of ``min_return_separation_m`` from
   ``min_range_m`` to the smallest of ``clutter_max_range_m``, ``range_m`` and the beam's nearest
   solid hit; ``P = rho_slab`` (the whole beam, ``g = 1``), class precipitation, material other,
   instance ``CLUTTER_INSTANCE``.
   Slabs under the skip rule ``S + 5 sqrt(S + B) < S_T`` are dropped. The slabs are listed and
   their drops drawn from the rain stream in ring-major beam order (``weather``). The slabs join
   the beams' contributions and the echoes are formed then (``echoes.form_echoes``).
2. **Noise draws.** Each echo takes two 32-bit outputs of the noise stream (``NoiseStreams``:
   state seed + 2018, sequence 3), which give ``n1`` and ``n2`` as the two branches of one
   Box-Muller pair; echoes in range order, beams in ring-major sequence: the beam with ring ``r``
   and column ``c`` is number ``r N_c + c`` (the cells are ``c N_r + r``). With noise off the
   numbers are drawn all the same and not used, so the stream stays aligned. With partial output
   (``cells``: one slice's beams) the streams are taken slice by slice in time order, each slice
   in the ring-major sequence restricted to its beams: the one place the model departs from
   the spec's whole-scan order (docs/outputs.md "Partial output"), so that a slice can leave
   before the sweep ends.
3. **Signal and detection.** ``S`` by the range equation (per-ring ``R10``, overlap, two-way
   extinction) and ``sigma_R`` come with the echoes (``echo_signals``: per column block while the
   sweep runs, or here with clutter); after the draws ``S' = S + sqrt(S + B) n1``, detected when ``S' >= S_T`` and
   ``R_min <= R_e <= R_max`` (or the beam's other windows: ``windows.CellWindows``); ``R_meas = clamp(R_e + sigma_R n2, 0, R_max)``;
   ``rho_rep = rho_e max(0, S') / S_c`` with ``S_c = S e^{2 alpha R_e}``; signal
   ``min(S', S_sat)`` rounded half up to uint16 (negative gives 0); the intensity byte.
4. **Returns** by ``return_mode`` (``returns.select_returns``).

With ``radiometry.detection_model = "reflectance_limit"`` step 3 is the engine paper's model instead
(``reflectance_limit_detection``): an echo is detected when ``R_L(d) <= R_lambda`` and
``d <= d_max`` (and ``R_min <= R_e <= R_max``), with ``d = R_e + sigma_0 n2`` and ``R_lambda =
rho_e e^{-2 alpha R_e}``; there is no shot noise (``S' = S``, ``n1`` is drawn and not used), so the
reported reflectivity is ``R_lambda``. docs/detection.md says when each model fits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import NamedTuple

import numba
import numpy as np

from acres_lidar_ros.config.material_table import CLASS_ID, MATERIAL_OF_CLASS
from acres_lidar_ros.radiometry.clutter import kept_slabs
from acres_lidar_ros.radiometry.echo_signals import EchoSignals, EchoTerms, echo_signals, model_windows
from acres_lidar_ros.radiometry.echoes import BeamBlock, Echoes, form_echoes
from acres_lidar_ros.radiometry.equation_kernels import intensity_byte as intensity_byte_of
from acres_lidar_ros.radiometry.equation_kernels import measured_signal_counts, measured_signal_counts_ufunc
from acres_lidar_ros.radiometry.equations import reflectance_limit
from acres_lidar_ros.radiometry.hit_passes import Contributions
from acres_lidar_ros.radiometry.noise import NoiseStreams
from acres_lidar_ros.radiometry.radiometric_model import BeamModel
from acres_lidar_ros.radiometry.returns import Returns, empty_returns, select_returns
from acres_lidar_ros.radiometry.weather import CLEAR_AIR
from acres_lidar_ros.scene.instances import CLUTTER_INSTANCE

PRECIPITATION_CLASS = CLASS_ID["precipitation"]
PRECIPITATION_MATERIAL = int(MATERIAL_OF_CLASS[PRECIPITATION_CLASS])
MAX_SIGNAL_COUNTS = 65535


@dataclass(frozen=True)
class ScanEchoes:
    """Every echo of a scan after detection (what the returns were chosen from).

    Attributes
    ----------
    index : int
        The scan's number in its run.
    cell : (e,) int64
        Beam of each echo; beams in cell order, echoes in range order.
    range_m : (e,) float64
        ``R_e``, m (before the range noise).
    signal_counts : (e,) float64
        ``S``, the mean signal after extinction (NaN for the echoes of cells the body
        replaces, which are not formed: ``finish_returns``' ``replaced_cells``).
    measured_counts : (e,) float64
        ``S'`` (``S`` with noise off; NaN where ``S`` is).
    detected : (e,) bool
        The detector sees it and it lies inside every window: the returns are chosen from these.
    outside_window : (e,) uint8
        Why a window drops the echo: the ``windows.WINDOW_*`` bits (near, far, azimuth,
        separation), 0 inside every window. An echo the detector sees with a reason set is one
        a window dropped.
    truth : EchoTruth or None
        What the per-cell truth output needs (``model.truth`` only).
    """

    index: int
    cell: np.ndarray
    range_m: np.ndarray
    signal_counts: np.ndarray
    measured_counts: np.ndarray
    detected: np.ndarray
    outside_window: np.ndarray
    truth: EchoTruth | None = None


@dataclass(frozen=True)
class EchoTruth:
    """Per echo, what the truth output reads (``radiometry.truth``), kept only with ``model.truth``.

    Attributes
    ----------
    echoes : Echoes
        The scan's echoes (class, material, instance and incidence of each one's largest
        contribution).
    signal_detected : (e,) bool
        The signal test alone, before the windows.
    clear_air_detected : (e,) bool or None
        The signal test with the same draws in clear air (``alpha = 0``); None in clear air.
    return_echo : (n_beams, R) int64
        The echo of each return slot (-1 for an empty slot).
    unformed : (n_beams,) bool or None
        The cells whose echoes were not formed (``finish_returns``' ``replaced_cells``: NaN
        ``S``, never detected); None for none.
    """

    echoes: Echoes
    signal_detected: np.ndarray
    clear_air_detected: np.ndarray | None
    return_echo: np.ndarray
    unformed: np.ndarray | None = None


def finish_returns(
    blocks: list[BeamBlock],
    model: BeamModel,
    streams: NoiseStreams,
    index: int,
    replaced_cells: np.ndarray | None = None,
    cells: np.ndarray | None = None,
    out: Returns | None = None,
) -> tuple[Returns, ScanEchoes]:
    """The returns of a scan from the blocks of all its beams (see the module notes), or of one
    slice of a partial-output scan from the blocks of its beams.

    Parameters
    ----------
    blocks : list of BeamBlock
        Their ``cells`` hold every cell of the scan (of ``cells``) once, in any order of blocks.
    model : BeamModel
        The model the blocks were prepared with.
    streams : NoiseStreams
        The run's streams; ``noise`` (and ``rain`` with rain clutter) advance.
    index : int
        The scan's number (kept in the ``ScanEchoes``).
    replaced_cells : (k,) int64 or None
        Cells whose returns the body replaces (``self_returns.SelfDecision.replaced_cells``):
        their echoes still take their noise pairs (the stream stays where it would be), but
        their signal is not formed and they are not detected (NaN ``S`` and ``S'``, no returns),
        since the merge of the body empties them anyway. With ``model.truth`` pass only the cells
        with a body return (``SelfDecision.body_cells``), whose truth the body gives whole: a
        blocked cell's truth keeps the echo the body hid (its range, ``S`` and labels).
    cells : (n,) int64, optional
        The beams of one slice (partial output): the clutter slabs and the noise pairs of these
        beams alone are drawn, in the ring-major sequence restricted to them (docs/outputs.md,
        "Partial output"); None: every beam, the spec's order.
    out : Returns of shape (columns * rings, R), optional
        Filled in place at the blocks' cells (the slices of one scan share one); default new.

    Returns
    -------
    Returns of shape (columns * rings, R) (``out`` where given), and the echoes of the blocks.

    Raises
    ------
    ValueError
        When the blocks' cells are not every cell (of ``cells``) once (nothing is drawn then).
    """
    config = model.config
    n_beams = model.beams
    held = np.concatenate([block.cells for block in blocks]) if blocks else np.zeros(0, np.int64)
    if held.size and (held.min() < 0 or held.max() >= n_beams):
        raise ValueError(f"a block has a cell outside 0 .. {n_beams - 1}")
    seen = np.bincount(held, minlength=n_beams)
    wanted = np.ones(n_beams, np.int64)
    if cells is not None:
        cells = np.asarray(cells, dtype=np.int64)
        if cells.size and (cells.min() < 0 or cells.max() >= n_beams):
            raise ValueError(f"cells: a cell outside 0 .. {n_beams - 1}")
        wanted = np.bincount(cells, minlength=n_beams)
    if not (seen == wanted).all():
        raise ValueError(
            f"the blocks must hold each of the {int((wanted > 0).sum())} cells once; "
            f"{int(((seen == 0) & (wanted > 0)).sum())} missing, {int((seen > wanted).sum())} repeated or extra"
        )
    if model.has_clutter:
        nearest_solid = np.empty(n_beams)
        for block in blocks:
            nearest_solid[block.cells] = block.nearest_solid_m
        slabs = clutter_contributions(model, streams, nearest_solid, cells)
        hits = Contributions.of_beams([block.contributions for block in blocks])
        echoes = form_echoes(hits.merged(slabs), config.min_return_separation_m)
        signals = None  # formed by detect
    else:
        echoes, signals = _blocks_echoes(blocks)
    skip = None
    if replaced_cells is not None:
        skip = np.zeros(n_beams, np.bool_)
        skip[np.asarray(replaced_cells, dtype=np.int64)] = True
    return detect(echoes, model, streams, index, skip, out, signals)


def _blocks_echoes(blocks: list[BeamBlock]) -> tuple[Echoes, EchoSignals | None]:
    """The echoes of the blocks (of a scan without clutter) in cell order, and their signals
    (None where a block has none)."""
    with_echoes = [block for block in blocks if block.echoes is not None]
    # Column blocks hold runs of cells: taken by their first cell they are usually in cell order.
    with_echoes.sort(key=lambda block: int(block.cells[0]) if block.cells.size else -1)
    echoes = Echoes.concatenate([block.echoes for block in with_echoes])  # type: ignore[misc]
    if any(block.signals is None for block in with_echoes):
        return echoes, None
    signals = EchoSignals.concatenate([block.signals for block in with_echoes])  # type: ignore[misc]
    cell = np.concatenate([block.echoes.cell for block in with_echoes])  # type: ignore[union-attr]
    if cell.size > 1 and not bool(np.all(cell[1:] >= cell[:-1])):  # interleaved blocks: as Echoes.concatenate
        signals = signals.take(np.argsort(cell, kind="stable"))
    return echoes, signals


def clutter_contributions(
    model: BeamModel, streams: NoiseStreams, nearest_solid_m: np.ndarray, cells: np.ndarray | None = None
) -> Contributions:
    """Step 1 of the module notes: the slabs of every beam (of ``cells``) that survive the skip
    rule (``clutter.kept_slabs``; the rain stream advances), as contributions by beam and range."""
    cell, center_m, rho_slab = kept_slabs(model, streams.rain, nearest_solid_m, cells)
    order = np.argsort(cell, kind="stable")  # ring-major -> cell order; a beam's slabs stay in range order
    m = cell.size
    return Contributions(
        cell[order],
        center_m[order],
        rho_slab[order],
        np.ones(m),
        np.full(m, PRECIPITATION_CLASS, np.uint8),
        np.full(m, PRECIPITATION_MATERIAL, np.uint8),
        np.full(m, CLUTTER_INSTANCE, np.uint32),
        np.full(m if model.truth else 0, np.nan),  # a slab has no surface, so no incidence
    )


def draw_positions(cell: np.ndarray, columns: int, rings: int) -> np.ndarray:
    """Step 2 of the module notes: the place of each echo's pair in the noise stream.

    ``cell`` (e,) is the beam of each echo, beams in cell order and echoes in range order (the
    echoes of a beam together). Returns (e,) int64: a permutation of ``0 .. e - 1``.
    """
    cell = np.asarray(cell, dtype=np.int64)
    if cell.size and (cell.min() < 0 or cell.max() >= columns * rings):
        raise ValueError(f"draw_positions: a cell outside 0 .. {columns * rings - 1}")
    if cell.size * 8 < columns * rings:  # a few beams (one slice): sort them, not every beam
        order = np.argsort((cell % rings) * columns + cell // rings, kind="stable")  # a beam's echoes stay in order
        out = np.empty(cell.size, np.int64)
        out[order] = np.arange(cell.size)
        return out
    return _draw_positions(cell, int(columns), int(rings))


@numba.njit(cache=True, nogil=True)
def _draw_positions(cell, columns, rings):
    """``draw_positions``: each echo's place is the echoes of the beams before its beam in the
    ring-major sequence, plus its rank among its beam's echoes."""
    count = np.zeros(columns * rings, np.int64)
    for i in range(cell.shape[0]):
        count[cell[i]] += 1
    offset = np.empty(columns * rings, np.int64)  # by cell: first place of its echoes
    total = 0
    for r in range(rings):
        for c in range(columns):
            offset[c * rings + r] = total
            total += count[c * rings + r]
    out = np.empty(cell.shape[0], np.int64)
    for i in range(cell.shape[0]):
        out[i] = offset[cell[i]]
        offset[cell[i]] += 1
    return out


class _NoiseDraws(NamedTuple):
    """The scan's noise pairs as drawn (``NoiseStreams.noise_pairs``) and each echo's place among them."""

    noise: bool  # the noise is applied (off: drawn and not used)
    n1: np.ndarray  # (e,) the pairs' first branch: the signal's normal
    n2: np.ndarray  # (e,) their second branch: the range's normal
    draw: np.ndarray  # (e,) int64: each echo's pair (``draw_positions``)


class _NoisySignals(NamedTuple):
    """What ``_noisy_signals`` writes of each echo: (e,) float64 arrays (NaN for a skipped cell's echoes)."""

    clear_counts: np.ndarray  # S in clear air
    signal_counts: np.ndarray  # S after the extinction
    measured_counts: np.ndarray  # S'
    range_meas_m: np.ndarray  # R_meas


@numba.njit(cache=True, nogil=True)
def _noisy_signals(signals, echoes, draws, ambient_counts, max_range_m, skip, out):
    """Step 3 after the draws: each echo's ``S'`` and ``R_meas`` from its ``S`` and ``sigma_R``
    (``signals``, an ``EchoSignals``), its range and beam (``echoes``, an ``EchoTerms``) and its
    pair ``(n1, n2)[draw]`` (``draws``, a ``_NoiseDraws``), and its ``S`` in clear air and after
    the extinction, written into ``out`` (a ``_NoisySignals``). Echoes of the cells where ``skip``
    (cells,) is set get NaN in all four (``skip`` empty: none skipped)."""
    clear_in, signal_in, range_sigma_m = signals.clear_counts, signals.signal_counts, signals.range_sigma_m
    range_m, cell = echoes.range_m, echoes.cell
    noise, n1, n2, draw = draws.noise, draws.n1, draws.n2, draws.draw
    clear, signal, measured, range_meas = out.clear_counts, out.signal_counts, out.measured_counts, out.range_meas_m
    any_skip = skip.shape[0] > 0
    for i in range(cell.shape[0]):
        if any_skip and skip[cell[i]]:
            clear[i] = signal[i] = measured[i] = range_meas[i] = np.nan
            continue
        r = range_m[i]
        s = signal_in[i]
        clear[i] = clear_in[i]
        signal[i] = s
        if noise:
            measured[i] = measured_signal_counts(s, ambient_counts, n1[draw[i]])
            moved = r + range_sigma_m[i] * n2[draw[i]]
        else:
            measured[i] = s
            moved = r
        range_meas[i] = min(max(moved, 0.0), max_range_m) if moved == moved else moved


def detect(
    echoes: Echoes,
    model: BeamModel,
    streams: NoiseStreams,
    index: int,
    skip: np.ndarray | None = None,
    out: Returns | None = None,
    signals: EchoSignals | None = None,
) -> tuple[Returns, ScanEchoes]:
    """Steps 2 to 4 of the module notes for the echoes of a whole scan, or of one slice's beams
    (cell order; the pairs are drawn in the ring-major sequence of the beams that have echoes
    here); the echoes of the cells where ``skip`` (n_beams,) bool is set draw their pairs and are
    not formed nor detected (``finish_returns``' ``replaced_cells``). The returns are written into
    ``out`` at the echoes' cells (a new empty ``Returns`` by default). ``signals``: the echoes'
    ``echo_signals`` under ``model`` where they were formed before (per block), None to form them."""
    config = model.config
    rad = config.radiometry
    n_beams, slots = model.beams, model.returns_per_beam
    n_echo = echoes.cell.size
    # R_min <= R_e <= R_max of the spec, widened to the attribute list's windows (windows.py).
    windows = model_windows(model)
    if signals is None:
        signals = echo_signals(echoes.cell, echoes.range_m, echoes.reflectance, echoes.peak, model, windows)
    n1_drawn, n2_drawn = streams.noise_pairs(n_echo)
    draw = draw_positions(echoes.cell, config.columns, config.rings)
    noisy = _NoisySignals(*(np.empty(n_echo) for _ in range(4)))
    _noisy_signals(
        signals,
        EchoTerms(cell=echoes.cell, range_m=echoes.range_m, reflectance=echoes.reflectance, peak=echoes.peak),
        _NoiseDraws(noise=bool(model.noise), n1=n1_drawn, n2=n2_drawn, draw=draw),
        float(rad.ambient_counts),
        float(config.range_m),
        np.zeros(0, np.bool_) if skip is None else skip,
        noisy,
    )
    clear, signal, measured, range_meas = (
        noisy.clear_counts,
        noisy.signal_counts,
        noisy.measured_counts,
        noisy.range_meas_m,
    )
    seen = measured >= model.detection_threshold_counts
    if rad.detection_model == "reflectance_limit":  # the engine paper's detection replaces the spec's
        n2_or_none = n2_drawn[draw] if model.noise else None
        measured, range_meas, seen = reflectance_limit_detection(echoes, signal, n2_or_none, model)
        if skip is not None:
            seen &= ~skip[echoes.cell]
    outside = windows.separation_bits(echoes.cell, echoes.range_m, seen, signals.window)
    detected = seen & (outside == 0)
    truth = None
    if model.truth:  # the truth output's hook: what the passes decided, and the clear-air test
        clear_air = None
        if model.atmosphere.alpha_per_m > 0.0:  # the clear-air test needs each echo's draws
            n1, n2 = (n1_drawn[draw], n2_drawn[draw]) if model.noise else (None, None)
            clear_air = _clear_air_seen(echoes, model, n1, clear, n2)
        truth = EchoTruth(echoes, seen, clear_air, np.full((n_beams, slots), -1, np.int64), skip)
    scan_echoes = ScanEchoes(index, echoes.cell, echoes.range_m, signal, measured, detected, outside, truth)
    out = empty_returns(n_beams, slots) if out is None else out
    det, lit_start, lit_beams, d_n = _detected_runs(detected, echoes.cell)
    if det.size == 0:
        return out, scan_echoes

    # --- 4. Return selection among the detected echoes (beam-major, range order). ---
    chosen, flags = select_returns(config.return_mode, measured[det], lit_start, d_n)
    _write_returns(
        det,
        lit_beams,
        chosen,
        flags,
        _EchoFields(
            measured, clear, echoes.reflectance, range_meas, echoes.class_id, echoes.material_id, echoes.instance
        ),
        float(min(rad.saturation_counts, MAX_SIGNAL_COUNTS)),
        slots,
        np.zeros(0, np.int64) if truth is None else truth.return_echo.reshape(-1),
        out.arrays(flat=True),
    )
    return out, scan_echoes


@numba.njit(cache=True, nogil=True)
def _detected_runs(detected, cell):
    """The detected echoes (indices, in order) and their runs by beam: where each lit beam's
    detected echoes start among them, the beam, and how many there are."""
    det = np.flatnonzero(detected)
    n = det.shape[0]
    lit_start = np.empty(n, np.int64)
    lit_beams = np.empty(n, np.int64)
    runs = 0
    for k in range(n):
        c = cell[det[k]]
        if runs == 0 or c != lit_beams[runs - 1]:
            lit_start[runs] = k
            lit_beams[runs] = c
            runs += 1
    d_n = np.empty(runs, np.int64)
    for j in range(runs):
        d_n[j] = (lit_start[j + 1] if j + 1 < runs else n) - lit_start[j]
    return det, lit_start[:runs], lit_beams[:runs], d_n


class _EchoFields(NamedTuple):
    """What ``_write_returns`` reads of each echo: (e,) arrays."""

    measured: np.ndarray  # S', counts
    clear: np.ndarray  # S in clear air, counts
    reflectance: np.ndarray
    range_meas: np.ndarray  # R_meas, m
    class_id: np.ndarray
    material_id: np.ndarray
    instance: np.ndarray


@numba.njit(cache=True, nogil=True)
def _write_returns(det, lit_beams, chosen, return_flags, echo, max_signal_counts, slots, return_echo, out):
    """The fields of each return: slot ``j`` of lit beam ``lit_beams[i]`` (flat slot ``lit_beams[i]
    slots + j`` of ``out``, ``Returns.arrays(flat=True)``) is the detected echo ``det[chosen[i, j]]`` of
    ``echo`` (an ``_EchoFields``; none where ``chosen`` is -1): ``rho_rep = rho_e max(0, S') /
    S_c``, the signal ``min(S', S_sat)`` rounded half up (negative gives 0), the intensity byte;
    with a ``return_echo`` (flat slots; empty: none) each slot's echo is noted there too."""
    keep_echo = return_echo.shape[0] > 0
    for i in range(chosen.shape[0]):
        for j in range(chosen.shape[1]):
            if chosen[i, j] < 0:
                continue
            e = det[chosen[i, j]]
            a = lit_beams[i] * slots + j
            m = echo.measured[e]
            rho = echo.reflectance[e] * max(m, 0.0) / echo.clear[e] if echo.clear[e] > 0.0 else 0.0
            out.range_m[a] = echo.range_meas[e]
            out.valid[a] = True
            out.reflectivity[a] = rho
            out.signal[a] = np.uint16(math.floor(min(max(m, 0.0), max_signal_counts) + 0.5))
            out.intensity[a] = intensity_byte_of(rho)
            out.class_id[a] = echo.class_id[e]
            out.material_id[a] = echo.material_id[e]
            out.instance[a] = echo.instance[e]
            out.return_flags[a] = return_flags[i, j]
            if keep_echo:
                return_echo[a] = e


def _clear_air_seen(
    echoes: Echoes, model: BeamModel, n1: np.ndarray | None, clear: np.ndarray, n2: np.ndarray | None
) -> np.ndarray | None:
    """The signal test of ``detect`` again with the same draws (``n1``, ``n2``: each echo's
    normals, None with noise off) and no extinction (``clear``: ``S`` in clear air); None in
    clear air, where it is the test itself."""
    if model.atmosphere.alpha_per_m <= 0.0:
        return None
    if model.config.radiometry.detection_model == "reflectance_limit":
        return reflectance_limit_detection(echoes, clear, n2, replace(model, atmosphere=CLEAR_AIR))[2]
    ambient = float(model.config.radiometry.ambient_counts)
    measured = clear if n1 is None else measured_signal_counts_ufunc(clear, ambient, n1)
    return measured >= model.detection_threshold_counts


def reflectance_limit_detection(
    echoes: Echoes, signal: np.ndarray, n2: np.ndarray | None, model: BeamModel
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The engine paper's detection step for the echoes of a scan (``radiometry.detection_model =
    "reflectance_limit"``).

    Parameters
    ----------
    echoes : Echoes
    signal : (e,) float64
        ``S``, the mean signal of each echo after the two-way extinction.
    n2 : (e,) float64 or None
        Each echo's range normal from the noise stream (its pair's second branch), None with
        noise off.
    model : BeamModel

    Returns
    -------
    measured_counts : (e,) float64
        ``S`` (no shot noise in this model): the strongest return and the signal field use it.
    range_meas_m : (e,) float64
        ``d = R_e + sigma_0 n2`` (``lidar.std_m``), clamped to ``[0, R_max]``.
    detected : (e,) bool
        ``R_L(d) <= R_lambda`` with ``R_lambda = rho_e e^{-2 alpha R_e}`` and ``d <= d_max``
        (the range windows, ``R_min <= R_e <= R_max`` or the beam's region, are ``detect``'s).
    """
    config = model.config
    rad = config.radiometry
    if rad.max_range_m is None or rad.reflectance_at_max_range is None:  # the loader requires both
        raise ValueError("reflectance_limit detection needs radiometry.max_range_m and reflectance_at_max_range")
    alpha = model.atmosphere.alpha_per_m
    reflectance = echoes.reflectance * np.exp(-2.0 * alpha * echoes.range_m) if alpha > 0.0 else echoes.reflectance
    d = echoes.range_m + config.std_m * n2 if n2 is not None else echoes.range_m
    detected = (reflectance_limit(d, rad.max_range_m, rad.reflectance_at_max_range) <= reflectance) & (
        d <= rad.max_range_m
    )
    return signal, np.clip(d, 0.0, config.range_m), detected


def join_scan_echoes(parts: list[ScanEchoes], index: int) -> ScanEchoes:
    """The echoes of a partial-output scan's slices (``finish_returns`` with ``cells``) as the
    scan's: beams in cell order, each beam's echoes in range order; with the truth, each return
    slot's echo renumbered into the joined echoes."""
    if len(parts) == 1:
        return parts[0]
    cell = np.concatenate([p.cell for p in parts])
    order = np.argsort(cell, kind="stable")

    def joined(name: str) -> np.ndarray:
        return np.concatenate([getattr(p, name) for p in parts])[order]

    truth = None
    if all(p.truth is not None for p in parts):
        truths = [p.truth for p in parts if p.truth is not None]
        new_place = np.empty(order.size, np.int64)
        new_place[order] = np.arange(order.size)
        return_echo = np.full_like(truths[0].return_echo, -1)
        first = 0
        for t in truths:
            slot = t.return_echo >= 0
            return_echo[slot] = new_place[t.return_echo[slot] + first]
            first += t.echoes.cell.size
        clear = [t.clear_air_detected for t in truths]
        unformed = [t.unformed for t in truths if t.unformed is not None]  # each slice marks its own cells
        truth = EchoTruth(
            Echoes.concatenate([t.echoes for t in truths]),
            np.concatenate([t.signal_detected for t in truths])[order],
            None if any(c is None for c in clear) else np.concatenate(clear)[order],  # type: ignore[arg-type]
            return_echo,
            np.logical_or.reduce(unformed) if unformed else None,
        )
    return ScanEchoes(
        index,
        cell[order],
        joined("range_m"),
        joined("signal_counts"),
        joined("measured_counts"),
        joined("detected"),
        joined("outside_window"),
        truth,
    )
