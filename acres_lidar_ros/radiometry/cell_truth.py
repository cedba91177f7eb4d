"""Why a beam gave no return: the per-cell truth of a scan (``ScanOptions.truth``, ``--truth``).

The truth is read from what the passes decided (``detection.EchoTruth``, kept only when the model
asks for it): nothing here forms an echo, draws a number or evaluates an equation again.

Each cell ``c N_r + r`` gets one **deciding echo**:

* a cell with a return: the echo of the return the organised cloud carries (the strongest, else
  the first: ``Returns.primary_index``);
* a cell without one: of its echoes from surfaces (clutter slabs of rain and fog are not
  surfaces), the one with the largest mean signal ``S``; none when it has no such echo, or when
  its echoes were not formed (``EchoTruth.unformed``: a cell the body returns from, whose truth
  ``merge_self_truth`` gives whole).

and a reason code (``REASON_NAMES``). The rules in the order they are tried, the first that holds
giving the code:

======  =========================  ==========================================================
code    name                       the cell ...
======  =========================  ==========================================================
4       blocked_by_body            the self-return table's body stopped the beam
                                   (``body.self_returns.merge_self_truth``)
0       returned                   has a return (from the body, the scene or its clutter)
1       no_surface                 has no surface echo within ``range_m`` (nothing was hit, or
                                   the deciding echo lies beyond ``range_m``)
2       below_min_range            the deciding echo is nearer than ``min_range_m``
6       outside_window             the deciding echo lies outside another window of the beam
                                   (``windows``: a range region, the azimuth window, the
                                   separation near limit)
5       extinguished_by_weather    the deciding echo failed the signal test, and the same test
                                   with the same draws in clear air (``alpha = 0``) passes
3       below_threshold            the deciding echo failed the signal test: ``S' < S_T``
                                   (reflectance limit: ``R_L(d) > R_lambda`` or ``d > d_max``)
======  =========================  ==========================================================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numba
import numpy as np

from acres_lidar_ros.config.material_table import CLASS_ID
from acres_lidar_ros.radiometry.detection import ScanEchoes
from acres_lidar_ros.radiometry.radiometric_model import BeamModel
from acres_lidar_ros.radiometry.returns import Returns
from acres_lidar_ros.radiometry.windows import WINDOW_NEAR
from acres_lidar_ros.scene.instances import NO_INSTANCE

REASON_NAMES: tuple[str, ...] = (
    "returned",
    "no_surface",
    "below_min_range",
    "below_threshold",
    "blocked_by_body",
    "extinguished_by_weather",
    "outside_window",
)
REASON: dict[str, int] = {name: code for code, name in enumerate(REASON_NAMES)}
RETURNED = REASON["returned"]
NO_SURFACE = REASON["no_surface"]
BELOW_MIN_RANGE = REASON["below_min_range"]
BELOW_THRESHOLD = REASON["below_threshold"]
BLOCKED_BY_BODY = REASON["blocked_by_body"]
EXTINGUISHED_BY_WEATHER = REASON["extinguished_by_weather"]
OUTSIDE_WINDOW = REASON["outside_window"]

PRECIPITATION_CLASS = CLASS_ID["precipitation"]


class CellTruthArrays(NamedTuple):
    """The (n,) arrays of a ``CellTruth`` as compiled code takes them, under its field names
    (``CellTruth.arrays``)."""

    range_m: np.ndarray
    incidence_rad: np.ndarray
    class_id: np.ndarray
    material_id: np.ndarray
    instance: np.ndarray
    signal_counts: np.ndarray
    threshold_counts: np.ndarray
    reason: np.ndarray


@dataclass(frozen=True)
class CellTruth:
    """The truth of every cell of one scan (cell ``c N_r + r``), from its deciding echo.

    Attributes
    ----------
    range_m : (n,) float64
        ``R_e``: the noise-free range (before the range noise), m; NaN without a deciding echo.
    incidence_rad : (n,) float64
        ``theta`` of the deciding echo's largest contribution, as the backscatter used it (the
        micro-slope ``theta'`` on ground), rad; NaN without one, for clutter and for the body.
    class_id, material_id : (n,) uint8
        Of the deciding echo's largest contribution (0 without a deciding echo).
    instance : (n,) uint32
        Instance label of that contribution (``scene.instances``; ``NO_INSTANCE`` without one).
    signal_counts : (n,) float64
        ``S``: the mean signal of the deciding echo after extinction, counts; NaN without one
        and for the body (its table has no signal).
    threshold_counts : (n,) float64
        ``S_T``; NaN in the reflectance-limit detection model, which has no signal threshold.
    reason : (n,) uint8
        The code of ``REASON_NAMES``.
    points_sensor : (n, 3) float64 or None
        The noise-free point ``R_e d + o`` in the sensor frame, m (NaN without a deciding echo);
        the scanner fills it in (``Scan.truth`` always has it).
    """

    range_m: np.ndarray
    incidence_rad: np.ndarray
    class_id: np.ndarray
    material_id: np.ndarray
    instance: np.ndarray
    signal_counts: np.ndarray
    threshold_counts: np.ndarray
    reason: np.ndarray
    points_sensor: np.ndarray | None = None

    def arrays(self) -> CellTruthArrays:
        """These arrays but the points as a ``CellTruthArrays`` (no copies)."""
        return CellTruthArrays(*(getattr(self, name) for name in CellTruthArrays._fields))


def cell_truth(scan_echoes: ScanEchoes, returns: Returns, model: BeamModel) -> CellTruth:
    """The truth of a scan's cells from its echoes and its scene returns (before the body).

    Parameters
    ----------
    scan_echoes : ScanEchoes
        ``detection.finish_returns``' echoes of a model with ``truth`` on.
    returns : Returns of shape (n, R)
        The returns ``finish_returns`` gave with them.
    model : BeamModel

    Raises
    ------
    ValueError
        When the echoes were formed without ``model.truth`` (they hold no truth).
    """
    return truth_of_primary_slots(scan_echoes, returns.primary_index(), model)


def truth_of_primary_slots(scan_echoes: ScanEchoes, primary_slot: np.ndarray, model: BeamModel) -> CellTruth:
    """``cell_truth`` from the returns' primary slots alone (``Returns.primary_index``), which is
    all it reads of them: the returns may change meanwhile (the scanner merges the body into them
    while this runs in a thread)."""
    t = scan_echoes.truth
    if t is None:
        raise ValueError("the scan's echoes hold no truth: build the BeamModel with truth=True")
    echoes = t.echoes
    none = np.zeros(0, np.bool_)
    echo_cos = echoes.cos_incidence
    slots = _TruthSlots(
        return_echo=t.return_echo,
        primary_slot=primary_slot,
        unformed=none if t.unformed is None else t.unformed,
    )
    truth_echoes = _TruthEchoes(
        cell=echoes.cell,
        range_m=echoes.range_m,
        cos_incidence=echo_cos if echo_cos.size == echoes.cell.size else np.full(echoes.cell.size, np.nan),
        class_id=echoes.class_id,
        material_id=echoes.material_id,
        instance=echoes.instance,
        signal_counts=scan_echoes.signal_counts,
        clear_air_detected=none if t.clear_air_detected is None else t.clear_air_detected,
        outside_window=scan_echoes.outside_window,
    )
    range_m, cos_incidence, class_id, material_id, instance, signal, reason = _cell_truth(
        slots, truth_echoes, float(model.config.min_range_m), float(model.config.range_m), PRECIPITATION_CLASS
    )
    # arccos in numpy's SIMD loop, about 10x the scalar libm call of the compiled pass (NaN stays NaN).
    incidence = np.arccos(np.clip(cos_incidence, 0.0, 1.0, out=cos_incidence), out=cos_incidence)
    spec_model = model.config.radiometry.detection_model != "reflectance_limit"
    threshold = np.full(model.beams, model.detection_threshold_counts if spec_model else np.nan)
    return CellTruth(range_m, incidence, class_id, material_id, instance, signal, threshold, reason)


class _TruthSlots(NamedTuple):
    """Per cell, what picks its deciding echo first: its return slots' echoes and its primary slot (``EchoTruth``)."""

    return_echo: np.ndarray  # (n, R) int64: the echo of each return slot (-1: empty)
    primary_slot: np.ndarray  # (n,) int64: Returns.primary_index
    unformed: np.ndarray  # (n,) bool: the cell's echoes were not formed (empty: none)


class _TruthEchoes(NamedTuple):
    """What the truth reads of each echo (cell order): (e,) arrays of ``Echoes``, ``ScanEchoes`` and ``EchoTruth``."""

    cell: np.ndarray
    range_m: np.ndarray  # R_e, m
    cos_incidence: np.ndarray  # |cos theta| of its largest contribution (NaN where not kept)
    class_id: np.ndarray
    material_id: np.ndarray
    instance: np.ndarray
    signal_counts: np.ndarray  # S
    clear_air_detected: np.ndarray  # bool: the signal test in clear air (empty: in clear air)
    outside_window: np.ndarray  # uint8: the windows.WINDOW_* bits


@numba.njit(cache=True, nogil=True)
def _cell_truth(slots, echoes, min_range_m, max_range_m, precipitation):
    """The cell arrays of ``CellTruth`` (but ``S_T``, and the incidence as its cosine): each
    cell's deciding echo in one pass over the echoes (``echoes``, a ``_TruthEchoes``; cell order),
    then its fields and its reason by the module's table (the first rule that holds) in one pass
    over the cells.

    The deciding echo is the echo of the cell's primary return (``return_echo`` at
    ``primary_slot`` of ``slots``, a ``_TruthSlots``; -1 where none), else its non-clutter echo of
    the largest ``S`` (the first on a tie), else none. The echoes of the cells where ``unformed``
    is set (``EchoTruth``; empty: none) are no candidates. ``clear_air_detected`` empty: in clear
    air (never extinguished)."""
    return_echo, primary_slot, unformed = slots.return_echo, slots.primary_slot, slots.unformed
    cell, range_m, cos_incidence = echoes.cell, echoes.range_m, echoes.cos_incidence
    class_id, material_id, instance = echoes.class_id, echoes.material_id, echoes.instance
    signal, clear_air, outside_window = echoes.signal_counts, echoes.clear_air_detected, echoes.outside_window
    n = primary_slot.shape[0]
    primary = np.empty(n, np.int64)
    for c in range(n):
        primary[c] = return_echo[c, primary_slot[c]]
    deciding = primary.copy()
    best = np.empty(n)
    any_unformed = unformed.shape[0] > 0
    for i in range(cell.shape[0]):
        c = cell[i]
        if primary[c] >= 0 or class_id[i] == precipitation or (any_unformed and unformed[c]):
            continue
        if deciding[c] < 0 or signal[i] > best[c]:
            deciding[c] = i
            best[c] = signal[i]
    weather = clear_air.shape[0] > 0
    out_range = np.empty(n)
    out_cos = np.empty(n)
    out_class = np.empty(n, np.uint8)
    out_material = np.empty(n, np.uint8)
    out_instance = np.empty(n, np.uint32)
    out_signal = np.empty(n)
    out_reason = np.empty(n, np.uint8)
    for c in range(n):
        e = deciding[c]
        if e < 0:
            out_range[c] = out_cos[c] = out_signal[c] = np.nan
            out_class[c] = out_material[c] = 0
            out_instance[c] = NO_INSTANCE
            out_reason[c] = NO_SURFACE
            continue
        out_range[c] = range_m[e]
        out_cos[c] = cos_incidence[e]  # its angle is taken after the pass (vectorised)
        out_class[c] = class_id[e]
        out_material[c] = material_id[e]
        out_instance[c] = instance[e]
        out_signal[c] = signal[e]
        if primary[c] >= 0:
            out_reason[c] = RETURNED
        elif range_m[e] > max_range_m:
            out_reason[c] = NO_SURFACE
        elif (outside_window[e] & WINDOW_NEAR) and range_m[e] < min_range_m:
            out_reason[c] = BELOW_MIN_RANGE
        elif outside_window[e]:
            out_reason[c] = OUTSIDE_WINDOW
        elif weather and clear_air[e]:
            out_reason[c] = EXTINGUISHED_BY_WEATHER
        else:
            out_reason[c] = BELOW_THRESHOLD
    return out_range, out_cos, out_class, out_material, out_instance, out_signal, out_reason
