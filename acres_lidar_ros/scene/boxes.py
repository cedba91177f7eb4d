"""Dynamic oriented boxes (other vehicles) traced analytically per call.

A box hit has class vehicle (12), material vehicle (14) and the box's instance label
(``instances.vehicle_instance`` of its ``object_id``), and truncates the scene hits behind it
(see ``trace.Tracer.trace``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from acres_lidar_ros.errors import SceneError
from acres_lidar_ros.scene.instances import MAX_VEHICLE_OBJECT_ID, NO_INSTANCE, vehicle_instance

QUATERNION_NORM_TOLERANCE = 1e-6


def rotation_from_quaternion_xyzw(q: np.ndarray) -> np.ndarray:
    """(3, 3) float64 rotation matrix of the unit quaternion ``q`` = (x, y, z, w)."""
    x, y, z, w = (float(v) for v in q)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


@dataclass(frozen=True)
class VehicleBox:
    """An oriented box in the world.

    Attributes
    ----------
    centre_m : (3,) float64
        World position of the box centre.
    quaternion_xyzw : (4,) float64
        Unit quaternion that turns box coordinates into the world.
    half_extents_m : (3,) float64
        Half sizes along the box axes, each > 0.
    object_id : int
        The track's (or marker's) number, 0 to ``instances.MAX_VEHICLE_OBJECT_ID``.
    instance : int
        Instance label of the box's hits: ``instances.vehicle_instance(object_id)`` (derived).
    """

    centre_m: np.ndarray
    quaternion_xyzw: np.ndarray
    half_extents_m: np.ndarray
    object_id: int

    def __post_init__(self) -> None:
        centre = np.asarray(self.centre_m, float)
        q = np.asarray(self.quaternion_xyzw, float)
        half = np.asarray(self.half_extents_m, float)
        if centre.shape != (3,) or not np.all(np.isfinite(centre)):
            raise SceneError(f"VehicleBox.centre_m = {np.asarray(self.centre_m).tolist()!r}: must be 3 finite numbers")
        if q.shape != (4,) or not np.all(np.isfinite(q)) or abs(np.linalg.norm(q) - 1.0) > QUATERNION_NORM_TOLERANCE:
            raise SceneError(
                f"VehicleBox.quaternion_xyzw = {np.asarray(self.quaternion_xyzw).tolist()!r}: must be 4 finite numbers "
                f"of norm 1 (within {QUATERNION_NORM_TOLERANCE})"
            )
        if half.shape != (3,) or not np.all(np.isfinite(half)) or not np.all(half > 0):
            raise SceneError(
                f"VehicleBox.half_extents_m = {np.asarray(self.half_extents_m).tolist()!r}: must be 3 finite numbers > 0"
            )
        oid = self.object_id
        if (
            isinstance(oid, bool)
            or not isinstance(oid, (int, np.integer))
            or not 0 <= int(oid) <= MAX_VEHICLE_OBJECT_ID
        ):
            raise SceneError(f"VehicleBox.object_id = {oid!r}: must be an integer 0 to {MAX_VEHICLE_OBJECT_ID}")
        object.__setattr__(self, "centre_m", centre)
        object.__setattr__(self, "quaternion_xyzw", q)
        object.__setattr__(self, "half_extents_m", half)
        object.__setattr__(self, "object_id", int(oid))

    @property
    def instance(self) -> int:
        return vehicle_instance(self.object_id)

    @property
    def rotation(self) -> np.ndarray:
        """(3, 3) float64: box axes in the world (columns)."""
        return rotation_from_quaternion_xyzw(self.quaternion_xyzw)


def trace_boxes(
    origins_m: np.ndarray, directions: np.ndarray, boxes: Sequence[VehicleBox], start_m: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """First crossing of each ray with any box surface at or beyond ``start_m``.

    Parameters
    ----------
    origins_m : (n, 3) float64, world
    directions : (n, 3) float64, unit, world
    boxes : sequence of VehicleBox
    start_m : float
        Ray parameter where the ray starts (a ray starting inside a box hits its far face).

    Returns
    -------
    range_m : (n,) float64, +inf where no box is hit
    cos_incidence : (n,) float64, ``|cos theta|`` with the face normal (0 where none)
    instance : (n,) uint32, the box's instance label; ``NO_INSTANCE`` where none
    """
    n = len(origins_m)
    best = np.full(n, np.inf)
    best_cos = np.zeros(n)
    best_id = np.full(n, NO_INSTANCE, np.uint32)
    for b in boxes:
        r = b.rotation
        p = (origins_m - b.centre_m) @ r  # box coordinates: R^T (o - c)
        q = directions @ r
        with np.errstate(divide="ignore", invalid="ignore"):
            inv = 1.0 / q
            t1 = (-b.half_extents_m - p) * inv
            t2 = (b.half_extents_m - p) * inv
        parallel = q == 0.0
        inside_slab = np.abs(p) <= b.half_extents_m
        t_lo = np.where(parallel, np.where(inside_slab, -np.inf, np.inf), np.minimum(t1, t2))
        t_hi = np.where(parallel, np.where(inside_slab, np.inf, -np.inf), np.maximum(t1, t2))
        near_axis = t_lo.argmax(axis=1)
        far_axis = t_hi.argmin(axis=1)
        rows = np.arange(n)
        t_near = t_lo[rows, near_axis]
        t_far = t_hi[rows, far_axis]
        crosses = (t_near <= t_far) & (t_far >= start_m)
        entering = t_near >= start_m
        t = np.where(crosses, np.where(entering, t_near, t_far), np.inf)
        cos = np.abs(q[rows, np.where(entering, near_axis, far_axis)])
        better = t < best
        best = np.where(better, t, best)
        best_cos = np.where(better, cos, best_cos)
        best_id = np.where(better, np.uint32(b.instance), best_id)
    return best, best_cos, best_id
