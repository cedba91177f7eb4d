"""The surface hits of a set of sub-rays: the contract between tracing and radiometry.

A trace of ``n`` sub-rays with up to ``K`` hits each gives arrays of shape ``(n, K)``.
Hits of one sub-ray are sorted by range; the slots after the last hit have ``valid`` False,
``range_m`` +inf, class and material 0 and ``instance`` ``NO_INSTANCE``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from acres_lidar_ros.scene.instances import NO_INSTANCE


@dataclass(frozen=True)
class Hits:
    """Hits of ``n`` sub-rays, ``K`` slots each.

    Attributes
    ----------
    range_m : (n, K) float64
        Distance along the unit sub-ray direction from the ray origin (the lens centre), m.
    valid : (n, K) bool
        True where the slot holds a hit.
    class_id : (n, K) uint8
        Semantic class number of the spec's class table (0 other ... 13 precipitation).
    material_id : (n, K) uint8
        Material number (index in the materials table); ground hits already resolved by the
        ground rules (cover grid, surface polygons, pond).
    cos_incidence : (n, K) float64
        ``|cos theta|`` between the sub-ray and the surface normal (0.5 where the spec says so).
    instance : (n, K) uint32
        Instance label of the object the hit belongs to (``scene.instances``: the scene object's
        id, a vehicle box's), ``NO_INSTANCE`` where none.
    wetness : (n, K) float64
        Wetness ``w`` in [0, 1] of ground hits by the spec's ground rules; 1 for mud clods; 0 else.
    pond_depth_m : (n, K) float64
        Depth of pond water at the hit, m (0 outside ponds).
    """

    range_m: np.ndarray
    valid: np.ndarray
    class_id: np.ndarray
    material_id: np.ndarray
    cos_incidence: np.ndarray
    instance: np.ndarray
    wetness: np.ndarray
    pond_depth_m: np.ndarray

    @property
    def shape(self) -> tuple[int, int]:
        return self.range_m.shape

    @classmethod
    def empty(cls, n: int, k: int) -> Hits:
        """``n`` sub-rays with ``k`` empty slots each."""
        return cls(
            range_m=np.full((n, k), np.inf),
            valid=np.zeros((n, k), bool),
            class_id=np.zeros((n, k), np.uint8),
            material_id=np.zeros((n, k), np.uint8),
            cos_incidence=np.zeros((n, k)),
            instance=np.full((n, k), NO_INSTANCE, np.uint32),
            wetness=np.zeros((n, k)),
            pond_depth_m=np.zeros((n, k)),
        )

    @classmethod
    def joined(cls, blocks: list[Hits], rows: np.ndarray) -> Hits:
        """The hits of several blocks of sub-rays as one set, rows taken in the order ``rows``
        gives (indices into the blocks' rows one after the other)."""
        return cls(
            **{name: np.concatenate([getattr(b, name) for b in blocks])[rows] for name in cls.__dataclass_fields__}
        )
