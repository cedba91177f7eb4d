"""Returns of the beams of one scan: the contract between radiometry and the outputs.

A scan of ``n`` beams (cell = column x rings + ring) with up to ``R`` returns per beam gives
arrays of shape ``(n, R)``. The returns of a beam are in range order and packed to the front;
slots after the last return have ``valid`` False.

``nearest_hit_returns`` is ACRES Core's "no radiometry" mode: a beam's return is its nearest
hit within ``[min_range_m, range_m]``. The full radiometric model (``echoes``, ``detection``)
produces the same ``Returns``; ``select_returns`` is its choice of echoes by the return mode.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numba
import numpy as np

from acres_lidar_ros.config.schema import RETURN_MODES
from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.scene.instances import NO_INSTANCE
from acres_lidar_ros.tracing.hits import Hits

# Bits of the return_flags byte (spec "Return Mode").
FLAG_FIRST = 1
FLAG_STRONGEST = 2
FLAG_LAST = 4
FLAG_SECOND_STRONGEST = 8


class ReturnArrays(NamedTuple):
    """The nine arrays of a ``Returns`` as compiled code takes them, under its field names: (n, R)
    each, or their flat (n R,) views (``Returns.arrays``)."""

    range_m: np.ndarray
    valid: np.ndarray
    reflectivity: np.ndarray
    signal: np.ndarray
    intensity: np.ndarray
    class_id: np.ndarray
    material_id: np.ndarray
    instance: np.ndarray
    return_flags: np.ndarray


@dataclass(frozen=True)
class Returns:
    """Returns of ``n`` beams, ``R`` slots each.

    Attributes
    ----------
    range_m : (n, R) float64
        Measured range from the lens centre along the beam direction, m; NaN where not valid.
    valid : (n, R) bool
    reflectivity : (n, R) float64
        Reported reflectance ``rho_rep`` (1 = Lambertian 100 %).
    signal : (n, R) uint16
        Measured signal, counts, saturated.
    intensity : (n, R) uint8
        Intensity byte ``I``.
    class_id, material_id : (n, R) uint8
        Of the return's strongest contribution (its echo's largest).
    instance : (n, R) uint32
        Instance label of the same contribution (``scene.instances``): the scene object's id, a
        vehicle box's, ``BODY_INSTANCE`` for the body, ``CLUTTER_INSTANCE`` for rain and fog;
        ``NO_INSTANCE`` where not valid.
    return_flags : (n, R) uint8
        1 first, 2 strongest, 4 last, 8 second strongest.
    """

    range_m: np.ndarray
    valid: np.ndarray
    reflectivity: np.ndarray
    signal: np.ndarray
    intensity: np.ndarray
    class_id: np.ndarray
    material_id: np.ndarray
    instance: np.ndarray
    return_flags: np.ndarray

    def arrays(self, flat: bool = False) -> ReturnArrays:
        """These arrays as a ``ReturnArrays`` (no copies); ``flat``: their (n R,) views."""
        return ReturnArrays(
            *(getattr(self, name).reshape(-1) if flat else getattr(self, name) for name in ReturnArrays._fields)
        )

    @property
    def num_returns(self) -> np.ndarray:
        """(n,) uint8: returns of each beam."""
        return self.valid.sum(axis=1).astype(np.uint8)

    def primary_index(self) -> np.ndarray:
        """(n,) int64: the slot of the return an organised cloud carries.

        The strongest return, or the first when no return of the beam has the strongest flag
        (spec "Organised Cloud"). Beams without a return give 0 (check ``valid``).
        """
        if self.valid.shape[1] == 1:  # one slot: it is the primary one
            return np.zeros(self.valid.shape[0], np.int64)
        strongest = self.valid & ((self.return_flags & FLAG_STRONGEST) != 0)
        has_strongest = strongest.any(axis=1)
        return np.where(has_strongest, strongest.argmax(axis=1), 0)


def empty_returns(n_beams: int, slots: int) -> Returns:
    """``Returns`` of ``n_beams`` beams and ``slots`` slots, none valid (NaN ranges)."""
    return Returns(
        range_m=np.full((n_beams, slots), np.nan),
        valid=np.zeros((n_beams, slots), bool),
        reflectivity=np.zeros((n_beams, slots)),
        signal=np.zeros((n_beams, slots), np.uint16),
        intensity=np.zeros((n_beams, slots), np.uint8),
        class_id=np.zeros((n_beams, slots), np.uint8),
        material_id=np.zeros((n_beams, slots), np.uint8),
        instance=np.full((n_beams, slots), NO_INSTANCE, np.uint32),
        return_flags=np.zeros((n_beams, slots), np.uint8),
    )


def select_returns(
    mode: str, measured_counts: np.ndarray, starts: np.ndarray, lengths: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The echoes each beam reports by the return mode (spec "Return Mode"), in range order.

    Parameters
    ----------
    mode : str
        One of ``schema.RETURN_MODES``.
    measured_counts : (d,) float64
        ``S'`` of the detected echoes, beams one after the other, echoes in range order.
    starts, lengths : (n,) int64
        Where each beam's echoes start in ``measured_counts``, and how many (>= 1).

    Returns
    -------
    chosen : (n, C) int64
        Indices into ``measured_counts`` (-1 for an empty slot, filled slots first, in range
        order); ``C`` is 1, 2 or 3 by the mode.
    flags : (n, C) uint8
        The return_flags byte of each: a point that fills several functions (first and last of a
        single echo) carries all their bits; the flags only name the functions the mode selects.
        In ``dual_strongest_last`` the second strongest joins only when the strongest is the last.
    """
    if mode not in _MODE_CODE:
        raise ConfigError(f"lidar.return_mode = {mode!r}: must be one of {', '.join(RETURN_MODES)}")
    starts = np.asarray(starts, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    width = _MODE_SLOTS[mode]
    chosen = np.empty((starts.size, width), np.int64)
    flags = np.empty((starts.size, width), np.uint8)
    _select(_MODE_CODE[mode], np.asarray(measured_counts, dtype=np.float64), starts, lengths, chosen, flags)
    return chosen, flags


# The modes' numbers in the compiled pass, and the columns ``select_returns`` gives for each
# (the functions it names; a point that fills several is one slot with all their bits).
_STRONGEST, _FIRST, _LAST, _DUAL_FIRST_LAST, _TRIPLE, _DUAL_STRONGEST_LAST = range(6)
_MODE_CODE = {
    "strongest": _STRONGEST,
    "first": _FIRST,
    "last": _LAST,
    "dual_first_last": _DUAL_FIRST_LAST,
    "triple_first_strongest_last": _TRIPLE,
    "dual_strongest_last": _DUAL_STRONGEST_LAST,
}
_MODE_SLOTS = {
    "strongest": 1,
    "first": 1,
    "last": 1,
    "dual_first_last": 2,
    "triple_first_strongest_last": 3,
    "dual_strongest_last": 3,  # second strongest, strongest, last: at most two remain
}


@numba.njit(cache=True, nogil=True)
def _first_argmax(values: np.ndarray, lo: int, hi: int, skip: int) -> int:
    """Index of the first maximum of ``values[lo:hi]`` (``lo < hi``), index ``skip`` taken as
    ``-inf`` (-1: none skipped)."""
    best = lo
    best_value = -np.inf if lo == skip else values[lo]
    for i in range(lo + 1, hi):
        value = -np.inf if i == skip else values[i]
        if value > best_value:
            best, best_value = i, value
    return best


@numba.njit(cache=True, nogil=True)
def _select(mode, measured, starts, lengths, chosen, flags):
    """``select_returns`` of each beam: its candidates by the mode (functions in a fixed order),
    ordered by echo (stable), an echo named twice kept once with both bits, filled slots first."""
    width = chosen.shape[1]
    index = np.empty(3, np.int64)
    bits = np.empty(3, np.uint8)
    for b in range(starts.shape[0]):
        lo = starts[b]
        hi = lo + lengths[b]
        last = hi - 1
        strongest = _first_argmax(measured, lo, hi, -1)
        if mode == _STRONGEST:
            index[0], bits[0] = strongest, FLAG_STRONGEST
        elif mode == _FIRST:
            index[0], bits[0] = lo, FLAG_FIRST
        elif mode == _LAST:
            index[0], bits[0] = last, FLAG_LAST
        elif mode == _DUAL_FIRST_LAST:
            index[0], bits[0] = lo, FLAG_FIRST
            index[1], bits[1] = last, FLAG_LAST
        elif mode == _TRIPLE:
            index[0], bits[0] = lo, FLAG_FIRST
            index[1], bits[1] = strongest, FLAG_STRONGEST
            index[2], bits[2] = last, FLAG_LAST
        else:  # dual_strongest_last: the second strongest joins only when the strongest is the last
            second = _first_argmax(measured, lo, hi, strongest) if hi - lo >= 2 and strongest == last else -1
            index[0], bits[0] = second, FLAG_SECOND_STRONGEST if second >= 0 else 0
            index[1], bits[1] = strongest, FLAG_STRONGEST
            index[2], bits[2] = last, FLAG_LAST
        # Order by echo, empty candidates last (insertion sort: stable, at most three).
        for i in range(1, width):
            j = i
            while j > 0 and (index[j - 1] < 0 or index[j - 1] > index[j]) and index[j] >= 0:
                index[j - 1], index[j] = index[j], index[j - 1]
                bits[j - 1], bits[j] = bits[j], bits[j - 1]
                j -= 1
        # One slot per echo, with the bits of every function it fills; filled slots first.
        for i in range(width - 1, 0, -1):
            if index[i] >= 0 and index[i] == index[i - 1]:
                bits[i - 1] |= bits[i]
                index[i] = -1
        k = 0
        for i in range(width):
            if index[i] >= 0:
                chosen[b, k] = index[i]
                flags[b, k] = bits[i]
                k += 1
        for i in range(k, width):
            chosen[b, i] = -1
            flags[b, i] = 0


def nearest_hit_returns(
    hits: Hits,
    weights: np.ndarray,
    min_range_m: float | np.ndarray,
    max_range_m: float | np.ndarray,
    reflectivity_by_material: np.ndarray,
    separation_m: float = 0.0,
) -> Returns:
    """One return per beam: the nearest hit of its sub-rays within ``[min_range_m, max_range_m]``.

    Parameters
    ----------
    hits : Hits of shape (n * S, K)
        Sub-ray ``j`` of beam ``b`` is row ``b * S + j``.
    weights : (S,) float64
        Energy weights of the sub-rays (only their count is used: any sub-ray may give the hit).
    min_range_m, max_range_m : float or (n,) float64
        Range window, m, of all beams or of each (``windows.CellWindows``; ``inf`` as the near
        limit drops a beam).
    reflectivity_by_material : (M,) float64
        Diffuse reflectance ``rho`` of each material; the intensity is ``round(100 rho)``.
    separation_m : float
        The separation near limit (0: off): a beam whose nearest hit is nearer gives nothing.

    Returns
    -------
    Returns with ``R`` = 1: flags first | strongest | last, signal 0.
    """
    beams = hits.shape[0] // max(len(weights), 1)
    near = np.ascontiguousarray(np.broadcast_to(np.asarray(min_range_m, dtype=np.float64), (beams,)))
    far = np.ascontiguousarray(np.broadcast_to(np.asarray(max_range_m, dtype=np.float64), (beams,)))
    columns = _nearest_in_window(
        _WindowHits(*(getattr(hits, name) for name in _WindowHits._fields)),
        len(weights),
        _RangeWindow(min_range_m=near, max_range_m=far, separation_m=float(separation_m)),
        np.asarray(reflectivity_by_material, dtype=np.float64),
    )
    n = len(columns[0])
    range_m, valid, rho, intensity, class_id, material_id, instance, flags = (c[:, None] for c in columns)
    return Returns(
        range_m=range_m,
        valid=valid,
        reflectivity=rho,
        signal=np.zeros((n, 1), np.uint16),
        intensity=intensity,
        class_id=class_id,
        material_id=material_id,
        instance=instance,
        return_flags=flags,
    )


class _WindowHits(NamedTuple):
    """The (n * S, K) arrays of a ``Hits`` that ``_nearest_in_window`` reads (``Hits``' names)."""

    range_m: np.ndarray
    valid: np.ndarray
    class_id: np.ndarray
    material_id: np.ndarray
    instance: np.ndarray


class _RangeWindow(NamedTuple):
    """Each beam's range window, m: (n,) near and far limits and the separation near limit (0: off)."""

    min_range_m: np.ndarray
    max_range_m: np.ndarray
    separation_m: float


@numba.njit(cache=True, nogil=True)
def _nearest_in_window(hits, sub_rays, window, reflectivity_by_material):
    """Per beam, its nearest hit within its window and that hit's fields, in one pass.

    ``hits`` is a ``_WindowHits``, ``window`` a ``_RangeWindow``. Hits of a sub-ray are sorted, so
    each sub-ray's first in-window hit is its nearest; the beam keeps the nearest over its
    sub-rays (the first on a tie). A beam whose nearest hit of all (a sub-ray's first) is nearer
    than ``separation_m`` keeps none. Beams without one get NaN range, zeros and ``NO_INSTANCE``.
    """
    n_rows, k = hits.range_m.shape
    n = n_rows // sub_rays
    out_range = np.full(n, np.nan)
    out_valid = np.zeros(n, np.bool_)
    out_rho = np.zeros(n)
    out_intensity = np.zeros(n, np.uint8)
    out_class = np.zeros(n, np.uint8)
    out_material = np.zeros(n, np.uint8)
    out_instance = np.full(n, NO_INSTANCE, np.uint32)
    out_flags = np.zeros(n, np.uint8)
    for b in range(n):
        best = np.inf
        best_row = -1
        best_slot = 0
        nearest = np.inf
        near, far = window.min_range_m[b], window.max_range_m[b]
        for row in range(b * sub_rays, (b + 1) * sub_rays):
            if hits.valid[row, 0] and hits.range_m[row, 0] < nearest:
                nearest = hits.range_m[row, 0]
            for j in range(k):
                r = hits.range_m[row, j]
                if hits.valid[row, j] and r >= near:
                    if r <= far and r < best:
                        best = r
                        best_row = row
                        best_slot = j
                    break
        if best_row >= 0 and nearest >= window.separation_m:
            material = hits.material_id[best_row, best_slot]
            rho = reflectivity_by_material[material]
            out_range[b] = best
            out_valid[b] = True
            out_rho[b] = rho
            out_intensity[b] = np.uint8(np.rint(100.0 * rho))
            out_class[b] = hits.class_id[best_row, best_slot]
            out_material[b] = material
            out_instance[b] = hits.instance[best_row, best_slot]
            out_flags[b] = FLAG_FIRST | FLAG_STRONGEST | FLAG_LAST
    return out_range, out_valid, out_rho, out_intensity, out_class, out_material, out_instance, out_flags
