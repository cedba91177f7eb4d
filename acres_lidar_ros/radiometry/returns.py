"""Returns of the beams of one scan: the contract between radiometry and the outputs.

A scan of ``n`` beams (cell = column x rings + ring) with up to ``R`` returns per beam gives
arrays of shape ``(n, R)``. The returns of a beam are in range order and packed to the front;
slots after the last return have ``valid`` False.

``nearest_hit_returns`` is ACRES Core's "no radiometry" mode: a beam's return is its nearest
hit within ``[min_range_m, range_m]``. The full radiometric model (``beam_model``) produces the
same ``Returns``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from acres_lidar_ros.tracing.hits import NO_OBJECT, Hits

# Bits of the return_flags byte (spec "Return Mode").
FLAG_FIRST = 1
FLAG_STRONGEST = 2
FLAG_LAST = 4
FLAG_SECOND_STRONGEST = 8


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
    object_id : (n, R) int32
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
    object_id: np.ndarray
    return_flags: np.ndarray

    @property
    def num_returns(self) -> np.ndarray:
        """(n,) uint8: returns of each beam."""
        return self.valid.sum(axis=1).astype(np.uint8)

    def primary_index(self) -> np.ndarray:
        """(n,) int64: the slot of the return an organised cloud carries.

        The strongest return, or the first when no return of the beam has the strongest flag
        (spec "Organised Cloud"). Beams without a return give 0 (check ``valid``).
        """
        strongest = self.valid & ((self.return_flags & FLAG_STRONGEST) != 0)
        has_strongest = strongest.any(axis=1)
        return np.where(has_strongest, strongest.argmax(axis=1), 0)


def nearest_hit_returns(
    hits: Hits,
    weights: np.ndarray,
    min_range_m: float,
    max_range_m: float,
    reflectivity_by_material: np.ndarray,
) -> Returns:
    """One return per beam: the nearest hit of its sub-rays within ``[min_range_m, max_range_m]``.

    Parameters
    ----------
    hits : Hits of shape (n * S, K)
        Sub-ray ``j`` of beam ``b`` is row ``b * S + j``.
    weights : (S,) float64
        Energy weights of the sub-rays (only their count is used: any sub-ray may give the hit).
    min_range_m, max_range_m : float
        Range window, m.
    reflectivity_by_material : (M,) float64
        Diffuse reflectance ``rho`` of each material; the intensity is ``round(100 rho)``.

    Returns
    -------
    Returns with ``R`` = 1: flags first | strongest | last, signal 0.
    """
    columns = _nearest_in_window(
        hits.range_m,
        hits.valid,
        hits.class_id,
        hits.material_id,
        hits.object_id,
        len(weights),
        float(min_range_m),
        float(max_range_m),
        np.asarray(reflectivity_by_material, dtype=np.float64),
    )
    n = len(columns[0])
    range_m, valid, rho, intensity, class_id, material_id, object_id, flags = (c[:, None] for c in columns)
    return Returns(
        range_m=range_m,
        valid=valid,
        reflectivity=rho,
        signal=np.zeros((n, 1), np.uint16),
        intensity=intensity,
        class_id=class_id,
        material_id=material_id,
        object_id=object_id,
        return_flags=flags,
    )


@numba.njit(cache=True, nogil=True)
def _nearest_in_window(
    range_m, valid, class_id, material_id, object_id, sub_rays, min_range_m, max_range_m, reflectivity_by_material
):
    """Per beam, its nearest hit within the window and that hit's fields, in one pass.

    Hits of a sub-ray are sorted, so each sub-ray's first in-window hit is its nearest; the beam
    keeps the nearest over its sub-rays (the first on a tie). Beams without one get NaN range,
    zeros and ``NO_OBJECT``.
    """
    n_rows, k = range_m.shape
    n = n_rows // sub_rays
    out_range = np.full(n, np.nan)
    out_valid = np.zeros(n, np.bool_)
    out_rho = np.zeros(n)
    out_intensity = np.zeros(n, np.uint8)
    out_class = np.zeros(n, np.uint8)
    out_material = np.zeros(n, np.uint8)
    out_object = np.full(n, NO_OBJECT, np.int32)
    out_flags = np.zeros(n, np.uint8)
    for b in range(n):
        best = np.inf
        best_row = -1
        best_slot = 0
        for row in range(b * sub_rays, (b + 1) * sub_rays):
            for j in range(k):
                r = range_m[row, j]
                if valid[row, j] and r >= min_range_m:
                    if r <= max_range_m and r < best:
                        best = r
                        best_row = row
                        best_slot = j
                    break
        if best_row >= 0:
            material = material_id[best_row, best_slot]
            rho = reflectivity_by_material[material]
            out_range[b] = best
            out_valid[b] = True
            out_rho[b] = rho
            out_intensity[b] = np.uint8(np.rint(100.0 * rho))
            out_class[b] = class_id[best_row, best_slot]
            out_material[b] = material
            out_object[b] = object_id[best_row, best_slot]
            out_flags[b] = FLAG_FIRST | FLAG_STRONGEST | FLAG_LAST
    return out_range, out_valid, out_rho, out_intensity, out_class, out_material, out_object, out_flags
