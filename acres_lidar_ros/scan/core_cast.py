"""The rays of ACRES Core's LiDAR (ACRES Core's header ``FAcresLidar::CastRay``) cast on a scene's triangles.

A self-contained caster, apart from ``tracing.trace``'s ``Tracer`` (whose path and the golden
scans it leaves untouched): it keeps each hit's surface normal, which ACRES Core's divergence in
the plane of incidence needs (Open3D's ``cast_rays`` gives ``primitive_normals``).

Rules of a ray (the spec's "The LiDAR of ACRES Core", ACRES Core's header ``CastRay``):

* It starts ``START_M`` from its origin and ends at ``max_range_m``; ranges are from the origin.
* No crops or ground cover: crop patches are not in the scene it builds, and the triangles of the
  classes ``corn``, ``soybean``, ``potato`` and ``ground_cover`` are left out.
* A tree crown (a closed ``tree`` or ``shrub`` proxy) is one foliage layer: the ray passes it when
  ``U(mix64(BeamKey ^ mix64(instance))) < tau`` of its material (``materials.transmission``), and
  then goes on behind it; leaving a closed proxy is not a hit. With ``foliage`` off a crown is solid.
* Every other triangle ends the ray; so does a vehicle box (``boxes.VehicleBox``).
* With ``T_scene_odom`` (the odom frame's pose in the scene, ``tracing.scene_frame``) the rays,
  given in odom, meet the scene's triangles at ``T_scene_odom`` applied to them, and the ground's
  material is looked up in the scene; vehicle boxes and the normals returned stay in odom, as the
  full model's ``Tracer`` does it.
* Material codes (``FAcresLidarScanOut::Material``): a scene material number (0 ..), or one of
  ``LIDAR_NO_RETURN``, ``LIDAR_TERRAIN``, ``LIDAR_VEHICLE_BOX``, ``LIDAR_SELF``. ACRES Core's header names
  the codes without their values; these are the top four byte values, above every material number.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import open3d as o3d

from acres_lidar_ros.config.material_table import CLASS_ID, IS_FOLIAGE_CLASS, MATERIAL_ID
from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.radiometry.noise import mix64, uniform_from_hash
from acres_lidar_ros.scene.boxes import VehicleBox
from acres_lidar_ros.scene.instances import NO_INSTANCE
from acres_lidar_ros.scene.scene_model import Scene

START_M = 0.005  # as the full model: the ray starts 0.5 cm from its origin
EXIT_STEP_M = 1e-3  # restart distance behind a passed crown's surface or a proxy's exit face
MAX_LAYERS = 32  # bound of the pass/exit rounds of one cast (crowns entered and left)

LIDAR_NO_RETURN = 255
LIDAR_TERRAIN = 254
LIDAR_VEHICLE_BOX = 253
LIDAR_SELF = 252

_LEFT_OUT = [CLASS_ID[n] for n in ("corn", "soybean", "potato", "ground_cover")]
_GROUND = CLASS_ID["ground"]
_CPU = o3d.core.Device("CPU:0")


@dataclass(frozen=True)
class CoreHits:
    """The closest hit of each ray.

    Attributes
    ----------
    range_m : (n,) float64, +inf without a hit
    normal_world : (n, 3) float64, the unit surface normal at the hit (0 without one)
    code : (n,) uint8, the material code (``LIDAR_*`` or a scene material number)
    material : (n,) int16, the material the radiometry uses (the ground's by the scene's ground
        rules, ``vehicle`` for a box); -1 without a hit
    class_id : (n,) uint8, the hit's class (``vehicle`` for a box; 0 without a hit)
    instance : (n,) uint32, the hit's instance label (a box's ``VehicleBox.instance``;
        ``NO_INSTANCE`` without a hit)
    """

    range_m: np.ndarray
    normal_world: np.ndarray
    code: np.ndarray
    material: np.ndarray
    class_id: np.ndarray
    instance: np.ndarray

    @property
    def hit(self) -> np.ndarray:
        return np.isfinite(self.range_m)


def beam_keys(seed: int, scan_index: int, cells: np.ndarray) -> np.ndarray:
    """(n,) uint64 ``BeamKey`` of each cell of a scan: ``mix64(mix64(mix64(seed) ^ scan) ^ cell)``."""
    scan_term = np.uint64(mix64(mix64(int(seed)) ^ (int(scan_index) & 0xFFFFFFFFFFFFFFFF)))
    return np.asarray(mix64(np.asarray(cells, dtype=np.uint64) ^ scan_term), dtype=np.uint64)


class CoreCaster:
    """Casts ACRES Core's rays on one scene (its own Embree structure, built once).

    Parameters
    ----------
    scene : Scene
    transmission : (materials,) float64
        ``tau`` of each material (``SensorConfig.materials.transmission``).
    pond_threshold_m : float
        ``lidar.pond_threshold_m`` of the ground rules (the ground material under a hit).
    T_scene_odom : (4, 4) float64, optional
        The odom frame's pose in the scene's frame (module docstring); None: the scene at the odom origin.
    """

    def __init__(
        self, scene: Scene, transmission: np.ndarray, pond_threshold_m: float, T_scene_odom: np.ndarray | None = None
    ) -> None:
        if T_scene_odom is not None:
            T_scene_odom = np.asarray(T_scene_odom, np.float64)
            R = T_scene_odom[:3, :3] if T_scene_odom.shape == (4, 4) else np.zeros((3, 3))
            if not (np.isfinite(T_scene_odom).all() and np.allclose(R @ R.T, np.eye(3), atol=1e-9)):
                raise ConfigError(f"T_scene_odom {T_scene_odom.tolist()}: expected a rigid (4, 4) transform")
        self.T_scene_odom = T_scene_odom
        self.scene = scene
        self.transmission = np.asarray(transmission, dtype=np.float64)
        self.pond_threshold_m = float(pond_threshold_m)
        keep = ~np.isin(scene.triangle_class, _LEFT_OUT)
        self._tri = np.flatnonzero(keep)  # kept triangle -> scene triangle
        lo, hi = scene.vertices_m.min(axis=0), scene.vertices_m.max(axis=0)
        self.local_origin_m = np.round((lo + hi) / 2.0)
        self._rc = o3d.t.geometry.RaycastingScene()
        if self._tri.size:
            verts = (scene.vertices_m - self.local_origin_m).astype(np.float32)
            tris = scene.triangles[self._tri].astype(np.uint32)
            self._rc.add_triangles(
                o3d.core.Tensor(verts, o3d.core.float32, _CPU), o3d.core.Tensor(tris, o3d.core.uint32, _CPU)
            )
        cls = scene.triangle_class[self._tri]
        self._class = cls
        self._crown = IS_FOLIAGE_CLASS[cls]  # what is left of the foliage classes: tree and shrub
        self._closed = scene.triangle_closed[self._tri]
        self._material = scene.triangle_material[self._tri].astype(np.int16)
        self._instance = scene.triangle_instance[self._tri].astype(np.uint64)

    def _cast_triangles(self, origins: np.ndarray, directions: np.ndarray, tfar: np.ndarray) -> tuple:
        n = len(origins)
        if not self._tri.size or n == 0:
            return np.full(n, np.inf), np.zeros((n, 3)), np.full(n, -1, np.int64)
        rays = np.empty((n, 6), np.float32)
        rays[:, :3] = origins - self.local_origin_m
        rays[:, 3:] = directions
        out = self._rc.cast_rays(o3d.core.Tensor(rays, o3d.core.float32, _CPU))
        t = out["t_hit"].numpy().astype(np.float64)
        prim = out["primitive_ids"].numpy().astype(np.int64)
        normal = out["primitive_normals"].numpy().astype(np.float64)
        hit = np.isfinite(t) & (t <= tfar) & (prim < self._tri.size)
        t = np.where(hit, t, np.inf)
        prim = np.where(hit, prim, -1)
        length = np.linalg.norm(normal, axis=1, keepdims=True)
        normal = np.where(length > 0, normal / np.where(length > 0, length, 1.0), 0.0)
        return t, normal, prim

    def cast(
        self,
        origins_m: np.ndarray,
        directions: np.ndarray,
        max_range_m: float | np.ndarray,
        keys: np.ndarray,
        boxes: Sequence[VehicleBox] = (),
        foliage: bool = True,
    ) -> CoreHits:
        """The closest hit of each ray (ACRES Core's header ``CastRay``, many rays at once).

        Parameters
        ----------
        origins_m, directions : (n, 3) float64, odom (the scene's frame without ``T_scene_odom``); directions unit
        max_range_m : float or (n,) float64, farthest range, m
        keys : (n,) uint64, each ray's ``BeamKey`` (the crown decisions)
        boxes : other vehicles
        foliage : crowns pass the ray with their transmission; False makes them solid
        """
        o = np.ascontiguousarray(origins_m, dtype=np.float64).reshape(-1, 3)
        d = np.ascontiguousarray(directions, dtype=np.float64).reshape(-1, 3)
        n = len(o)
        keys = np.asarray(keys, dtype=np.uint64).reshape(-1)
        if d.shape != o.shape or keys.shape != (n,):
            raise ConfigError(
                f"CoreCaster.cast: {n} origins, {len(d)} directions and {keys.size} keys: expected as many"
            )
        far = np.broadcast_to(np.asarray(max_range_m, dtype=np.float64), (n,))
        o_scene, d_scene = o, d
        if self.T_scene_odom is not None:
            R, t = self.T_scene_odom[:3, :3], self.T_scene_odom[:3, 3]
            o_scene, d_scene = o @ R.T + t, d @ R.T
        range_m = np.full(n, np.inf)
        normal = np.zeros((n, 3))
        prim = np.full(n, -1, np.int64)
        start = np.full(n, START_M)
        live = np.arange(n)
        for _ in range(MAX_LAYERS):
            if live.size == 0:
                break
            s = start[live]
            t, nrm, p = self._cast_triangles(o_scene[live] + s[:, None] * d_scene[live], d_scene[live], far[live] - s)
            hit = p >= 0
            t_abs = t + s
            exiting = hit & self._closed[np.maximum(p, 0)] & (np.einsum("ij,ij->i", nrm, d_scene[live]) > 0.0)
            crown = hit & ~exiting & self._crown[np.maximum(p, 0)]
            passed = np.zeros(live.size, bool)
            if foliage and crown.any():
                c = np.flatnonzero(crown)
                tau = self.transmission[self._material[p[c]]]
                u = uniform_from_hash(mix64(keys[live[c]] ^ mix64(self._instance[p[c]])))
                passed[c] = u < tau
            final = hit & ~exiting & ~passed
            rows = live[final]
            range_m[rows], normal[rows], prim[rows] = t_abs[final], nrm[final], p[final]
            again = exiting | passed
            start[live[again]] = t_abs[again] + EXIT_STEP_M
            live = live[again]
        if self.T_scene_odom is not None:
            normal = normal @ self.T_scene_odom[:3, :3]  # the scene's normals in odom: R^T n
        box_range, box_normal, box_instance = _box_hits(o, d, boxes)
        by_box = (box_range < range_m) & (box_range <= far)
        return self._labelled(o_scene, d_scene, range_m, normal, prim, by_box, box_range, box_normal, box_instance)

    def _labelled(self, o, d, range_m, normal, prim, by_box, box_range, box_normal, box_instance) -> CoreHits:
        """Codes, materials, classes and instances of the hits; ``o`` and ``d`` in the scene's frame
        (the ground's material there), ``normal`` and the box hits in odom."""
        n = len(o)
        code = np.full(n, LIDAR_NO_RETURN, np.uint8)
        material = np.full(n, -1, np.int16)
        class_id = np.zeros(n, np.uint8)
        instance = np.full(n, NO_INSTANCE, np.uint32)
        tri = np.flatnonzero(prim >= 0)
        material[tri] = self._material[prim[tri]]
        class_id[tri] = self._class[prim[tri]]
        instance[tri] = self._instance[prim[tri]].astype(np.uint32)
        code[tri] = self._material[prim[tri]].astype(np.uint8)
        ground = tri[self._class[prim[tri]] == _GROUND]
        if ground.size:
            x = o[ground] + range_m[ground, None] * d[ground]
            material[ground] = self.scene.ground_material_at(x[:, 0], x[:, 1], self.pond_threshold_m)
            code[ground] = LIDAR_TERRAIN
        range_m = np.where(by_box, box_range, range_m)
        normal = np.where(by_box[:, None], box_normal, normal)
        code[by_box] = LIDAR_VEHICLE_BOX
        material[by_box] = MATERIAL_ID["vehicle"]
        class_id[by_box] = CLASS_ID["vehicle"]
        instance[by_box] = box_instance[by_box]
        return CoreHits(range_m, normal, code, material, class_id, instance)


def _box_hits(o: np.ndarray, d: np.ndarray, boxes: Sequence[VehicleBox]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """First crossing of each ray with a box at or beyond ``START_M``, the face's outward normal
    and the box's instance label."""
    n = len(o)
    best = np.full(n, np.inf)
    best_normal = np.zeros((n, 3))
    best_instance = np.full(n, NO_INSTANCE, np.uint32)
    for b in boxes:
        r = np.asarray(b.rotation, dtype=np.float64)
        h = np.asarray(b.half_extents_m, dtype=np.float64)
        p = (o - b.centre_m) @ r
        q = d @ r
        with np.errstate(divide="ignore", invalid="ignore"):
            inv = 1.0 / q
            t1 = (-h - p) * inv
            t2 = (h - p) * inv
        t_near = np.nan_to_num(np.minimum(t1, t2), nan=-np.inf).max(axis=1)
        t_far = np.nan_to_num(np.maximum(t1, t2), nan=np.inf).min(axis=1)
        t = np.where(t_near >= START_M, t_near, t_far)  # from inside: the far face
        ok = (t_near <= t_far) & (t >= START_M) & (t < best)
        if not ok.any():
            continue
        x = p[ok] + t[ok, None] * q[ok]  # box coordinates of the hit
        axis = np.argmax(np.abs(x) / h, axis=1)
        local = np.zeros((int(ok.sum()), 3))
        local[np.arange(local.shape[0]), axis] = np.sign(x[np.arange(local.shape[0]), axis])
        best[ok] = t[ok]
        best_normal[ok] = local @ r.T
        best_instance[ok] = b.instance
    return best, best_normal, best_instance
