"""Open3D/Embree over a plain triangle soup, and the gate that checks one tracer against another.

``EmbreeSoup`` is the BVH side of the cost-against-scene-size benchmark: one Embree scene of
float32 triangles, cast with Open3D's ``cast_rays`` (all cores), as ``Tracer`` casts the farm.
``gate`` compares two tracers' nearest hits ray by ray: the same hit or miss, the same object,
and distances within a tolerance.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import open3d as o3d

from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.tracing.brute_force import NO_TRIANGLE

GATE_TOLERANCE_M = 1e-6  # the simulator README: distances within 1e-6 m


class EmbreeSoup:
    """One Embree scene of a triangle soup.

    Parameters
    ----------
    vertices_m : (v, 3) float64 or float32; cast to float32 (exact for ``ScalingScene``)
    triangles : (t, 3) int
    nthreads : int, threads of ``cast_rays`` (0: all cores)
    """

    def __init__(self, vertices_m: np.ndarray, triangles: np.ndarray, nthreads: int = 0) -> None:
        self.triangle_count = int(len(triangles))
        self._nthreads = int(nthreads)
        self._scene = o3d.t.geometry.RaycastingScene()
        self._scene.add_triangles(
            o3d.core.Tensor.from_numpy(np.ascontiguousarray(vertices_m, np.float32)),
            o3d.core.Tensor.from_numpy(np.ascontiguousarray(triangles, np.uint32)),
        )

    def cast(self, rays: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Nearest hits of float32 rays ``(n, 6)`` (origin, direction; C-contiguous).

        Returns ``t (n,) float32`` (Embree's ray parameter, inf where no hit) and
        ``triangle (n,) int64`` (``NO_TRIANGLE`` where no hit).
        """
        result = self._scene.cast_rays(o3d.core.Tensor.from_numpy(rays), nthreads=self._nthreads)
        t = result["t_hit"].numpy()
        ids = result["primitive_ids"].numpy().astype(np.int64)
        ids[~np.isfinite(t)] = NO_TRIANGLE
        return t, ids


def soup_rays(origins: np.ndarray, directions: np.ndarray) -> np.ndarray:
    """``(n, 6)`` float32 rays for ``EmbreeSoup.cast`` from (n, 3) origins and directions."""
    o = np.asarray(origins)
    d = np.asarray(directions)
    if o.ndim != 2 or o.shape[1] != 3 or d.shape != o.shape:
        raise ConfigError(f"origins {o.shape} and directions {d.shape}: must both have shape (n, 3)")
    return np.ascontiguousarray(np.hstack([o, d]), np.float32)


@dataclass(frozen=True)
class GateResult:
    """Mismatches of tracer ``b`` against the reference ``a`` over ``rays`` rays.

    ``hit_miss``: one hits and the other does not; ``object``: both hit, different objects;
    ``distance``: both hit the same object more than ``tolerance_m`` apart.
    ``max_distance_error_m``: the largest distance difference where both hit the same object.
    """

    rays: int
    hit_miss: int
    object: int
    distance: int
    max_distance_error_m: float
    tolerance_m: float

    @property
    def mismatches(self) -> int:
        return self.hit_miss + self.object + self.distance

    def as_dict(self) -> dict:
        return dict(asdict(self), mismatches=self.mismatches)


def gate(
    range_a_m: np.ndarray,
    object_a: np.ndarray,
    range_b_m: np.ndarray,
    object_b: np.ndarray,
    tolerance_m: float = GATE_TOLERANCE_M,
) -> GateResult:
    """Compare two tracers' nearest hits: ranges (n,) float (inf: no hit) and object ids (n,)."""
    ra, rb = np.asarray(range_a_m, np.float64), np.asarray(range_b_m, np.float64)
    oa, ob = np.asarray(object_a), np.asarray(object_b)
    if not (ra.shape == rb.shape == oa.shape == ob.shape) or ra.ndim != 1:
        raise ConfigError(f"gate: ranges {ra.shape}, {rb.shape} and objects {oa.shape}, {ob.shape} must be (n,)")
    if not (np.isfinite(tolerance_m) and tolerance_m >= 0):
        raise ConfigError(f"gate: tolerance_m = {tolerance_m!r}: must be a finite number >= 0")
    hit_a, hit_b = np.isfinite(ra), np.isfinite(rb)
    both = hit_a & hit_b
    same = both & (oa == ob)
    error = np.abs(ra[same] - rb[same])
    return GateResult(
        rays=len(ra),
        hit_miss=int(np.count_nonzero(hit_a != hit_b)),
        object=int(np.count_nonzero(both & (oa != ob))),
        distance=int(np.count_nonzero(error > tolerance_m)),
        max_distance_error_m=float(error.max()) if len(error) else 0.0,
        tolerance_m=float(tolerance_m),
    )


__all__ = ["GATE_TOLERANCE_M", "EmbreeSoup", "GateResult", "gate", "soup_rays"]
