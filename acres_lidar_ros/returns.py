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

import numpy as np

from acres_lidar_ros.hits import NO_OBJECT, Hits

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
    sub_rays = len(weights)
    n_rows, k = hits.shape
    n = n_rows // sub_rays
    in_window = hits.valid & (hits.range_m >= min_range_m) & (hits.range_m <= max_range_m)
    # Hits of a sub-ray are sorted by range: its nearest in-window hit is its first in-window slot.
    flat = np.arange(n_rows) * k + in_window.argmax(axis=1)
    range_m = np.where(in_window.reshape(-1)[flat], hits.range_m.reshape(-1)[flat], np.inf)
    if sub_rays > 1:
        best = range_m.reshape(n, sub_rays).argmin(axis=1)
        flat = flat.reshape(n, sub_rays)[np.arange(n), best]
        range_m = range_m.reshape(n, sub_rays)[np.arange(n), best]
    valid = np.isfinite(range_m)

    def pick(field: np.ndarray) -> np.ndarray:
        return field.reshape(-1)[flat]

    material_id = np.where(valid, pick(hits.material_id), 0).astype(np.uint8)
    rho = np.where(valid, reflectivity_by_material[material_id], 0.0)
    flags = np.where(valid, FLAG_FIRST | FLAG_STRONGEST | FLAG_LAST, 0).astype(np.uint8)
    return Returns(
        range_m=np.where(valid, range_m, np.nan)[:, None],
        valid=valid[:, None],
        reflectivity=rho[:, None],
        signal=np.zeros((n, 1), np.uint16),
        intensity=np.rint(100.0 * rho).astype(np.uint8)[:, None],
        class_id=np.where(valid, pick(hits.class_id), 0).astype(np.uint8)[:, None],
        material_id=material_id[:, None],
        object_id=np.where(valid, pick(hits.object_id), NO_OBJECT).astype(np.int32)[:, None],
        return_flags=flags[:, None],
    )
