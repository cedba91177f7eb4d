"""Tracing sub-rays through a ``Scene`` with Open3D/Embree: foliage continuation, crop cells
and dynamic boxes (spec "CPU Path" and "The Shader").

Rules of a sub-ray:

* It starts ``START_M`` (0.5 cm) from its origin and ends at ``max_range_m``; ranges are
  measured from the origin.
* A solid hit ends it. A foliage hit (``materials.IS_FOLIAGE_CLASS``) is recorded and the
  search continues ``continue_step_m`` behind it, up to ``max_hits`` hits.
* Leaving a closed foliage proxy (tree crown, shrub, ground cover) is not a hit.
* Crop patches: the sub-ray moves in ``CROP_STEP_M`` steps from its start; the first step
  point inside a crop cell (below the top of its cell) is the hit, with ``|cos theta| = 0.5``.
  The tracer finds that point exactly from the cell boxes instead of walking.
* Ground hits take material, wetness and pond depth from the scene's ground rules; mud clods
  have wetness 1.
* Dynamic boxes (``boxes.VehicleBox``) are traced analytically; a box hit ends the sub-ray.

Embree works in float32 about a local origin near the scene centre (about 3e-5 m of rounding
at 500 m from it); ranges are float64 from there on.

Three Embree scenes: all triangles plus one box per crop patch (the first cast of every ray),
the triangles alone (re-cast of the few rays whose first hit is a crop box) and the crop boxes
alone (the walk from patch to patch).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import open3d as o3d

from acres_lidar_ros.boxes import VehicleBox, trace_boxes
from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.hits import NO_OBJECT, Hits
from acres_lidar_ros.materials import CLASS_ID, IS_FOLIAGE_CLASS, MATERIAL_ID
from acres_lidar_ros.scene.model import CROP_CELLS, CROP_PATCH_SIZE_M, Scene

START_M = 0.005  # spec: the ray starts 0.5 cm from its origin
CROP_STEP_M = 0.05  # spec: step of the walk through crop cells
CROP_COS_INCIDENCE = 0.5  # spec: |cos theta| of a crop hit
EXIT_STEP_M = 1e-3  # restart distance behind the surface a ray leaves (proxy exits, crop boxes)
# Embree sees the crop patch boxes this much smaller at the sides, so that a ray inside one patch
# meets that patch's face before the coplanar face of its neighbour; the cells themselves are
# intersected analytically at full size.
CROP_BOX_SHRINK_M = 1e-3
_MAX_ROUNDS = 64  # bound of the continuation loop (hits + proxy exits) per call
_MAX_CROP_ROUNDS = 256  # bound of the patch-to-patch crop walk per round

_GROUND = CLASS_ID["ground"]
_MUD = CLASS_ID["mud_clod"]
_VEHICLE_CLASS = CLASS_ID["vehicle"]
_VEHICLE_MATERIAL = MATERIAL_ID["vehicle"]


def _slab(p: np.ndarray, q: np.ndarray, lo, hi) -> tuple[np.ndarray, np.ndarray]:
    """Ray parameter interval where ``p + t q`` lies in ``[lo, hi]`` along one axis (broadcast).

    A ray parallel to the slab (``q`` = 0) gets (-inf, inf) inside it and an empty interval
    outside (IEEE infinities; ``fmin``/``fmax`` drop the NaN of a ray exactly on a face).
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = 1.0 / q
        t1 = (lo - p) * inv
        t2 = (hi - p) * inv
    return np.fmin(t1, t2), np.fmax(t1, t2)


class Tracer:
    """Traces sub-rays through one scene; builds the Embree scenes once.

    Parameters
    ----------
    scene : Scene
    nthreads : int
        Threads of ``cast_rays``; 0 uses all cores.
    """

    def __init__(self, scene: Scene, nthreads: int = 0) -> None:
        self.scene = scene
        self._nthreads = int(nthreads)
        lo, hi = scene.vertices_m.min(axis=0), scene.vertices_m.max(axis=0)
        self.local_origin_m = np.round((lo + hi) / 2.0)  # (3,) float64, world
        tri_v = (scene.vertices_m - self.local_origin_m).astype(np.float32)
        tri_t = scene.triangles.astype(np.uint32)
        n_tri = len(tri_t)
        crops = scene.crops
        self._has_crops = len(crops) > 0
        if self._has_crops:
            bv, bt = crops.box_mesh(shrink_m=CROP_BOX_SHRINK_M)
            box_v = (bv - self.local_origin_m).astype(np.float32)
            box_t = bt.astype(np.uint32)
            self._crop_rc = self._embree(box_v, box_t)
            self._main_rc = self._embree(tri_v, tri_t)
            self._rc = self._embree(np.vstack([tri_v, box_v]), np.vstack([tri_t, box_t + len(tri_v)]))
            self._patch_centre = np.column_stack([crops.centre_xy_m - self.local_origin_m[:2], np.zeros(len(crops))])
            self._patch_cos = np.cos(crops.yaw_rad)
            self._patch_sin = np.sin(crops.yaw_rad)
            self._patch_base = crops.cell_base_z_m - self.local_origin_m[2]
            self._patch_top = crops.cell_top_z_m - self.local_origin_m[2]
        else:
            self._rc = self._main_rc = self._embree(tri_v, tri_t)
        # Lookup tables over the primitives of the first cast: triangles, crop boxes, then one
        # entry for a miss (the cast's INVALID_ID is clipped to it).
        n_box = 12 * len(crops)
        self._miss = n_tri + n_box
        self._first_box = n_tri

        def table(per_tri, box_value, miss_value, dtype):
            return np.concatenate([per_tri, np.full(n_box, box_value), [miss_value]]).astype(dtype)

        self._class = table(scene.triangle_class, 0, 0, np.uint8)
        self._material = table(scene.triangle_material, 0, 0, np.int16)
        self._object = table(scene.triangle_object, NO_OBJECT, NO_OBJECT, np.int32)
        self._closed = table(scene.triangle_closed, False, False, bool)
        self._crop_box = table(np.zeros(n_tri, bool), True, False, bool)

    @staticmethod
    def _embree(vertices: np.ndarray, triangles: np.ndarray):
        rc = o3d.t.geometry.RaycastingScene()
        rc.add_triangles(o3d.core.Tensor(vertices), o3d.core.Tensor(triangles))
        return rc

    # --- casts ----------------------------------------------------------------------------
    def _cast(self, rc, origins_local: np.ndarray, directions: np.ndarray, start=None) -> dict:
        """One ``cast_rays`` from ``origins_local + start directions`` (float32 rays)."""
        rays = np.empty((len(origins_local), 6), np.float32)
        if start is None:
            rays[:, :3] = origins_local
        else:
            np.multiply(directions, start if np.isscalar(start) else start[:, None], out=rays[:, :3], casting="same_kind")
            np.add(rays[:, :3], origins_local, out=rays[:, :3], casting="same_kind")
        rays[:, 3:] = directions
        return rc.cast_rays(o3d.core.Tensor(rays), nthreads=self._nthreads)

    def cast_bare(self, origins_world: np.ndarray, directions_world: np.ndarray) -> np.ndarray:
        """Exactly one ``cast_rays`` of the rays against the scene (the benchmark reference).

        Parameters
        ----------
        origins_world, directions_world : (n, 3) float64

        Returns
        -------
        (n,) float32: Embree's distance from the origin to the first triangle or crop box, inf
        where none.
        """
        result = self._cast(self._rc, np.asarray(origins_world) - self.local_origin_m, directions_world)
        return result["t_hit"].numpy()

    # --- crops ----------------------------------------------------------------------------
    def _crop_hits(self, o, d, start, end, t_first, patch_first):
        """First crop step point of each ray in ``[start, end)``.

        Parameters
        ----------
        o, d : (m, 3) float64 local origins and unit directions
        start, end : (m,) float64 ray parameters
        t_first, patch_first : (m,) float64 and int64
            The first crop box each ray meets after ``start`` and the parameter where it does.

        Returns
        -------
        t : (m,) float64, inf where none; patch : (m,) int64, -1 where none.
        """
        m = len(o)
        t_out = np.full(m, np.inf)
        patch_out = np.full(m, -1, np.int64)
        sel = np.arange(m)
        walk_from = start.copy()
        t_e, patch = t_first, patch_first
        edges = np.arange(CROP_CELLS + 1) / CROP_CELLS
        xs = edges * CROP_PATCH_SIZE_M[0]
        ys = edges * CROP_PATCH_SIZE_M[1]
        for _ in range(_MAX_CROP_ROUNDS):
            keep = t_e < end[sel]
            sel, walk_from, t_e, patch = sel[keep], walk_from[keep], t_e[keep], patch[keep]
            if len(sel) == 0:
                break
            os_, ds_, end_s = o[sel], d[sel], end[sel]
            # Ray in the patch frame: x along the 1.52 m side from the patch corner.
            rel = os_ - self._patch_centre[patch]
            c, s = self._patch_cos[patch], self._patch_sin[patch]
            px = c * rel[:, 0] + s * rel[:, 1] + CROP_PATCH_SIZE_M[0] / 2
            py = -s * rel[:, 0] + c * rel[:, 1] + CROP_PATCH_SIZE_M[1] / 2
            qx = c * ds_[:, 0] + s * ds_[:, 1]
            qy = -s * ds_[:, 0] + c * ds_[:, 1]
            x_lo, x_hi = _slab(px[:, None], qx[:, None], xs[None, :-1], xs[None, 1:])  # (k, 4) by ix
            y_lo, y_hi = _slab(py[:, None], qy[:, None], ys[None, :-1], ys[None, 1:])  # (k, 4) by iy
            with np.errstate(divide="ignore", invalid="ignore"):
                inv_z = 1.0 / ds_[:, 2]
                t_top = (self._patch_top[patch] - rel[:, 2, None, None]) * inv_z[:, None, None]  # (k, 4, 4)
                t_base = (self._patch_base[patch] - rel[:, 2, None, None]) * inv_z[:, None, None]
            z_lo, z_hi = np.fmin(t_top, t_base), np.fmax(t_top, t_base)
            lo = np.maximum(np.maximum(x_lo[:, None, :], y_lo[:, :, None]), z_lo)
            np.maximum(lo, walk_from[:, None, None], out=lo)
            hi = np.minimum(np.minimum(x_hi[:, None, :], y_hi[:, :, None]), z_hi)
            g = START_M + np.ceil((lo - START_M) / CROP_STEP_M) * CROP_STEP_M
            g = np.where((hi >= lo) & (g <= hi), g, np.inf).reshape(len(sel), -1).min(axis=1)
            found = g < end_s
            t_out[sel[found]] = g[found]
            patch_out[sel[found]] = patch[found]
            # No step point in this patch: go on from where the ray leaves its box.
            box_hi = np.minimum(
                np.minimum(_slab(px, qx, 0.0, CROP_PATCH_SIZE_M[0])[1], _slab(py, qy, 0.0, CROP_PATCH_SIZE_M[1])[1]),
                z_hi.max(axis=(1, 2)),
            )
            exit_t = np.maximum(np.maximum(box_hi, walk_from), t_e)
            go_on = ~found & (exit_t < end_s)
            sel, walk_from = sel[go_on], exit_t[go_on]
            if len(sel) == 0:
                break
            cast_from = walk_from + EXIT_STEP_M
            res = self._cast(self._crop_rc, o[sel], d[sel], cast_from)
            t_e = cast_from + res["t_hit"].numpy()
            patch = np.minimum(res["primitive_ids"].numpy(), 12 * len(self._patch_cos) - 1).astype(np.int64) // 12
        return t_out, patch_out

    def _first_hits(self, o: np.ndarray, d: np.ndarray, s: np.ndarray):
        """First triangle of each ray from parameter ``s`` on, and the first crop box before it.

        Parameters
        ----------
        o, d : (m, 3) float64 local origins and unit directions; s : (m,) float64

        Returns
        -------
        t : (m,) float64 ray parameter of the first triangle (inf none)
        prim : (m,) uint32 its lookup index (``self._miss`` for none)
        cos_signed : (m,) float64 ``n . d`` with the triangle's right-hand normal
        box_t : (m,) float64 where the ray meets a crop box first (inf where a triangle is first)
        box_patch : (m,) int64 that box's patch (-1 where none)
        """
        res = self._cast(self._rc, o, d, s)
        t = res["t_hit"].numpy().astype(np.float64)
        t += s
        prim = np.minimum(res["primitive_ids"].numpy(), self._miss)
        normal = res["primitive_normals"].numpy()
        box_t = np.full(len(t), np.inf)
        box_patch = np.full(len(t), -1, np.int64)
        if self._has_crops:
            rows = np.flatnonzero(self._crop_box[prim])
            if len(rows):
                box_t[rows] = t[rows]
                box_patch[rows] = (prim[rows].astype(np.int64) - self._first_box) // 12
                main = self._cast(self._main_rc, o[rows], d[rows], s[rows])
                t[rows] = s[rows] + main["t_hit"].numpy()
                prim[rows] = np.minimum(main["primitive_ids"].numpy(), self._miss)
                normal[rows] = main["primitive_normals"].numpy()
        return t, prim, np.einsum("ij,ij->i", normal, d.astype(np.float32)), box_t, box_patch

    # --- main -----------------------------------------------------------------------------
    def trace(
        self,
        origins_world: np.ndarray,
        directions_world: np.ndarray,
        max_range_m: float,
        max_hits: int,
        continue_step_m: float,
        pond_threshold_m: float,
        boxes: Sequence[VehicleBox] = (),
        foliage_solid: bool = False,
    ) -> Hits:
        """Hits of ``n`` sub-rays, up to ``max_hits`` each, sorted by range.

        Parameters
        ----------
        origins_world : (n, 3) float64
            Ray origins (lens centres) in the world, m.
        directions_world : (n, 3) float64
            Unit directions in the world.
        max_range_m : float
            ``lidar.range_m``: hits farther than this from the origin are dropped.
        max_hits : int
            ``K``, >= 1.
        continue_step_m : float
            Distance behind a foliage hit where the search continues, m (>= 0).
        pond_threshold_m : float
            Water depth that makes ground water, m.
        boxes : sequence of VehicleBox
            Dynamic boxes, traced analytically.
        foliage_solid : bool
            True: foliage ends the sub-ray like a solid (ACRES Core).

        Returns
        -------
        Hits of shape (n, max_hits).
        """
        o = np.asarray(origins_world, np.float64)
        d = np.asarray(directions_world, np.float64)
        if o.ndim != 2 or o.shape[1] != 3 or d.shape != o.shape:
            raise ConfigError(f"origins_world {o.shape} and directions_world {d.shape}: must both have shape (n, 3)")
        if not (np.isfinite(max_range_m) and max_range_m > 0):
            raise ConfigError(f"max_range_m = {max_range_m!r}: must be a finite number > 0")
        if int(max_hits) != max_hits or max_hits < 1:
            raise ConfigError(f"max_hits = {max_hits!r}: must be an integer >= 1")
        if not (np.isfinite(continue_step_m) and continue_step_m >= 0):
            raise ConfigError(f"continue_step_m = {continue_step_m!r}: must be a finite number >= 0")
        n, k = len(o), int(max_hits)
        hits = Hits.empty(n, k)
        if n == 0:
            return hits
        ol = o - self.local_origin_m
        limit: float | np.ndarray = float(max_range_m)
        if boxes:
            box_t, box_cos, box_id = trace_boxes(o, d, boxes, START_M)
            box_t[box_t > max_range_m] = np.inf
            limit = np.minimum(max_range_m, box_t)
        slot = np.zeros(n, np.int64)
        ended = np.zeros(n, bool)  # a solid hit ended the sub-ray
        rows: slice | np.ndarray = slice(None)  # the active sub-rays
        s = np.full(n, START_M)
        os_, ds_ = ol, d
        # The first triangle behind a crop hit, kept for the next round while it is still ahead.
        cache_t = np.zeros(n)
        cache_prim = np.zeros(n, np.uint32)
        cache_cos = np.zeros(n)
        cache_patch = np.zeros(n, np.int64)
        known: np.ndarray | None = None  # (m,) bool: active rows with a cached triangle hit
        for _ in range(_MAX_ROUNDS):
            m = len(s)
            if known is None:
                t, prim, cos_signed, first_t, first_patch = self._first_hits(os_, ds_, s)
            else:
                t, cos_signed = np.empty(m), np.empty(m)
                prim = np.empty(m, np.uint32)
                first_t, first_patch = np.full(m, np.inf), np.full(m, -1, np.int64)
                fresh = np.flatnonzero(~known)
                if len(fresh):
                    t[fresh], prim[fresh], cos_signed[fresh], first_t[fresh], first_patch[fresh] = self._first_hits(
                        os_[fresh], ds_[fresh], s[fresh]
                    )
                kn = np.flatnonzero(known)
                g = rows[kn]
                t[kn], prim[kn], cos_signed[kn] = cache_t[g], cache_prim[g], cache_cos[g]
                first_t[kn], first_patch[kn] = s[kn], cache_patch[g]
            lim = limit if np.isscalar(limit) else limit[rows]
            crop_rows: np.ndarray = np.zeros(0, np.int64)
            walk = np.flatnonzero(first_patch >= 0) if self._has_crops else crop_rows
            if len(walk):
                # The first crop step point before the first triangle.
                w_lim = lim if np.isscalar(lim) else lim[walk]
                w_end = np.minimum(t[walk], np.nextafter(w_lim, np.inf))
                crop_t, crop_patch = self._crop_hits(os_[walk], ds_[walk], s[walk], w_end, first_t[walk], first_patch[walk])
                found = np.isfinite(crop_t)
                crop_rows, crop_t, crop_patch = walk[found], crop_t[found], crop_patch[found]
                behind_t, behind_prim, behind_cos = t[crop_rows], prim[crop_rows], cos_signed[crop_rows]
                t[crop_rows] = crop_t
            ok = t <= lim
            exits = self._closed[prim]
            exits &= ok
            exits &= cos_signed > 0.0
            if len(crop_rows):
                exits[crop_rows] = False
            rec = ok & ~exits
            p_rec = np.where(rec, prim, self._miss)
            if len(crop_rows):
                p_rec[crop_rows] = self._miss
            cls = self._class[p_rec]
            material = self._material[p_rec]
            wetness = np.zeros(len(t))
            pond = np.zeros(len(t))
            cos = np.abs(cos_signed)
            cos[~rec] = 0.0
            object_id = self._object[p_rec]
            if len(crop_rows):
                crops = self.scene.crops
                cls[crop_rows] = crops.class_id[crop_patch]
                material[crop_rows] = crops.material_id[crop_patch]
                object_id[crop_rows] = crops.object_id[crop_patch]
                cos[crop_rows] = CROP_COS_INCIDENCE
            ground = np.flatnonzero(cls == _GROUND)
            if len(ground):
                px = os_[ground, 0] + t[ground] * ds_[ground, 0] + self.local_origin_m[0]
                py = os_[ground, 1] + t[ground] * ds_[ground, 1] + self.local_origin_m[1]
                material[ground], wetness[ground], pond[ground] = self.scene.ground_properties(px, py, pond_threshold_m)
            wetness[cls == _MUD] = 1.0
            # Write every active sub-ray's current slot (defaults where it recorded nothing).
            cols = 0 if isinstance(rows, slice) else slot[rows]  # the first round fills slot 0
            hits.range_m[rows, cols] = np.where(rec, t, np.inf)
            hits.valid[rows, cols] = rec
            hits.class_id[rows, cols] = cls
            hits.material_id[rows, cols] = material
            hits.cos_incidence[rows, cols] = cos
            hits.object_id[rows, cols] = object_id
            hits.wetness[rows, cols] = wetness
            hits.pond_depth_m[rows, cols] = pond
            cols = cols + rec
            slot[rows] = cols
            # Who goes on: foliage with free slots (from behind the hit), proxy exits (from just behind).
            foliage = IS_FOLIAGE_CLASS[cls] & rec
            if foliage_solid:
                ended[rows] = rec
                go_on = exits
            else:
                ended[rows] = rec & ~foliage
                go_on = (foliage & (cols < k)) | exits
            active = np.flatnonzero(go_on)
            if len(active) == 0:
                break
            s_next = np.where(exits, t + EXIT_STEP_M, t + continue_step_m)
            known = None
            if len(crop_rows):
                sel = s_next[crop_rows] < behind_t
                reuse = crop_rows[sel]
                if len(reuse):
                    flag = np.zeros(m, bool)
                    flag[reuse] = True
                    g = reuse if isinstance(rows, slice) else rows[reuse]
                    cache_t[g], cache_prim[g], cache_cos[g] = behind_t[sel], behind_prim[sel], behind_cos[sel]
                    cache_patch[g] = crop_patch[sel]
                    known = flag[active]
            s = s_next[active]
            rows = active if isinstance(rows, slice) else rows[active]
            os_, ds_ = ol[rows], d[rows]
        if boxes:
            box_rows = np.flatnonzero(np.isfinite(box_t) & (slot < k) & ~ended)
            cols = slot[box_rows]
            hits.range_m[box_rows, cols] = box_t[box_rows]
            hits.valid[box_rows, cols] = True
            hits.class_id[box_rows, cols] = _VEHICLE_CLASS
            hits.material_id[box_rows, cols] = _VEHICLE_MATERIAL
            hits.cos_incidence[box_rows, cols] = box_cos[box_rows]
            hits.object_id[box_rows, cols] = box_id[box_rows]
        return hits


__all__ = ["Tracer", "START_M", "CROP_STEP_M", "CROP_COS_INCIDENCE", "EXIT_STEP_M"]
