"""Tracing sub-rays through a ``Scene`` with Open3D/Embree: foliage continuation, crop cells
and dynamic boxes (spec "CPU Path" and "The Shader").

Rules of a sub-ray:

* It starts ``START_M`` (0.5 cm) from its origin, or at a sensor's ``range_offset_m`` beyond
  that, and ends at ``max_range_m``; ranges are measured from the origin.
* A solid hit ends it. A foliage hit (``materials.IS_FOLIAGE_CLASS``) is recorded and the
  search continues ``continue_step_m`` behind it, up to ``max_hits`` hits.
* Leaving a closed foliage proxy (tree crown, shrub, ground cover) is not a hit.
* Crop patches: the sub-ray moves in ``CROP_STEP_M`` steps from its start; the first step
  point inside a crop cell (below the top of its cell) is the hit, with ``|cos theta| = 0.5``.
  The tracer finds that point exactly from the cell boxes instead of walking.
* Ground hits take material, wetness and pond depth from the scene's ground rules; mud clods
  have wetness 1.
* Dynamic boxes (``boxes.VehicleBox``) are traced analytically; a box hit ends the sub-ray.
* Each hit carries the instance label of its object (``scene.instances``), gathered by primitive
  id after each cast like the class and the material.

Embree works in float32 about a local origin near the scene centre (about 3e-5 m of rounding
at 500 m from it); ranges are float64 from there on.

Three Embree scenes: all triangles plus one box per crop patch (the first cast of every ray),
the triangles alone (re-cast of the few rays whose first hit is a crop box) and the crop boxes
alone (the walk from patch to patch where it leaves a field or its neighbour patch is not
clearly next, ``crop_walk``). Between casts, the bookkeeping of the sub-rays (crop walk, proxy
exits, continuation, ground rules, writing the hits) is compiled, one pass per cast
(``trace_kernel``, ``crop_walk``); its work arrays are kept per thread and reused. A round's
finish pass over many sub-rays runs in two parts side by side (``cores``, ``Tracer._finish``).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
import open3d as o3d

from acres_lidar_ros.config.material_table import CLASS_ID, IS_FOLIAGE_CLASS, MATERIAL_ID
from acres_lidar_ros.cores import map_parts, split_bounds
from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.scene.boxes import VehicleBox, trace_boxes
from acres_lidar_ros.scene.grids import NO_POLYGON
from acres_lidar_ros.scene.instances import NO_INSTANCE
from acres_lidar_ros.scene.scene_model import CROP_CELLS, CROP_PATCH_SIZE_M, WETNESS_DEPTH_M, Scene
from acres_lidar_ros.tracing import trace_kernel as kernel
from acres_lidar_ros.tracing.crop_walk import WalkCall, crop_links, crop_walk
from acres_lidar_ros.tracing.hits import Hits
from acres_lidar_ros.tracing.trace_kernel import CastHits, SubRays, TraceState, WorkLists
from acres_lidar_ros.tracing.trace_records import SceneTables, TraceParams

START_M = 0.005  # spec: the ray starts 0.5 cm from its origin
CROP_STEP_M = 0.05  # spec: step of the walk through crop cells
CROP_COS_INCIDENCE = 0.5  # spec: |cos theta| of a crop hit
EXIT_STEP_M = 1e-3  # restart distance behind the surface a ray leaves (proxy exits, crop boxes)
# Embree sees the crop patch boxes this much smaller at the sides, so that a ray inside one patch
# meets that patch's face before the coplanar face of its neighbour; the cells themselves are
# intersected analytically at full size.
CROP_BOX_SHRINK_M = 1e-3
CAST_PIECE_RAYS = 16384  # most rays per cast_rays call (see Tracer._cast_rays)
MIN_FINISH_PER_PART = 8192  # sub-rays per part of a round's finish pass (Tracer._finish)
_MAX_ROUNDS = 64  # bound of the continuation loop (hits + proxy exits) per call
_MAX_CROP_PATCHES = 256  # bound of the patch-to-patch crop walk of a sub-ray per round
_CPU = o3d.core.Device("CPU:0")  # where the Embree scenes and their tensors live
# The start of a crop walk has no cast to take (``crop_walk``): empty, never written.
_NO_CAST = CastHits(np.zeros(0, np.float32), np.zeros(0, np.uint32), np.zeros((0, 3), np.float32))

_GROUND = CLASS_ID["ground"]
_MUD = CLASS_ID["mud_clod"]
_VEHICLE_CLASS = CLASS_ID["vehicle"]
_VEHICLE_MATERIAL = MATERIAL_ID["vehicle"]
_GRASS = MATERIAL_ID["grass"]
_SOIL = MATERIAL_ID["soil"]
_WATER = MATERIAL_ID["water"]


class Tracer:
    """Traces sub-rays through one scene; builds the Embree scenes once.

    Parameters
    ----------
    scene : Scene
    nthreads : int
        Threads of ``cast_rays``; 0 uses all cores.
    T_scene_odom : (4, 4) float64, optional
        The odometry (world) frame's pose in the scene's frame (``tracing.scene_frame``): rays
        given in the world are traced at ``T_scene_odom`` applied to them, vehicle boxes stay in
        the world. None: the scene sits at the world's origin.
    """

    def __init__(self, scene: Scene, nthreads: int = 0, T_scene_odom: np.ndarray | None = None) -> None:
        self.scene = scene
        self._nthreads = int(nthreads)
        if T_scene_odom is not None:
            T_scene_odom = np.asarray(T_scene_odom, np.float64)
            R = T_scene_odom[:3, :3] if T_scene_odom.shape == (4, 4) else np.zeros((3, 3))
            if not (np.isfinite(T_scene_odom).all() and np.allclose(R @ R.T, np.eye(3), atol=1e-9)):
                raise ConfigError(f"T_scene_odom {T_scene_odom.tolist()}: expected a rigid (4, 4) transform")
        self.T_scene_odom = T_scene_odom
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
        else:
            self._rc = self._main_rc = self._crop_rc = self._embree(tri_v, tri_t)
        # Lookup tables over the primitives of the first cast: triangles, crop boxes, then one
        # entry for a miss (the cast's INVALID_ID is clipped to it).
        n_box = 12 * len(crops)
        self._miss = n_tri + n_box
        self._first_box = n_tri

        def table(per_tri, box_value, miss_value, dtype):
            return np.concatenate([per_tri, np.full(n_box, box_value), [miss_value]]).astype(dtype)

        self._class = table(scene.triangle_class, 0, 0, np.uint8)
        self._material = table(scene.triangle_material, 0, 0, np.int16)
        self._instance = table(scene.triangle_instance, NO_INSTANCE, NO_INSTANCE, np.uint32)
        self._closed = table(scene.triangle_closed, False, False, bool)
        # The compiled passes' scene tables and numbers (see trace_kernel's module docstring).
        edges = np.arange(CROP_CELLS + 1) / CROP_CELLS
        grids = [g.lookup_table() for g in (scene.cover, scene.polygon_raster, scene.pond_depth, scene.soil_wetness)]
        contiguous = np.ascontiguousarray
        # The crop walk's neighbour steps and box heights.
        neighbour, box_lo_z, box_hi_z = crop_links(
            crops.centre_xy_m,
            crops.yaw_rad,
            crops.instance,
            CROP_PATCH_SIZE_M,
            crops.cell_base_z_m,
            crops.cell_top_z_m,
            float(self.local_origin_m[2]),
        )
        no_limit = np.array([np.inf])  # each call sets its own
        self._tables = SceneTables(
            tri_class=self._class,
            tri_material=self._material,
            tri_instance=self._instance,
            tri_closed=self._closed,
            is_foliage=contiguous(IS_FOLIAGE_CLASS, bool),
            crop_class=contiguous(crops.class_id, np.uint8),
            crop_material=contiguous(crops.material_id, np.uint8),
            crop_instance=contiguous(crops.instance, np.uint32),
            cell_xs=edges * CROP_PATCH_SIZE_M[0],  # cell edges along the patch's x (the 1.52 m side) from its corner
            cell_ys=edges * CROP_PATCH_SIZE_M[1],
            patch_centre=np.column_stack([crops.centre_xy_m - self.local_origin_m[:2], np.zeros(len(crops))]),
            patch_cos=contiguous(np.cos(crops.yaw_rad)),
            patch_sin=contiguous(np.sin(crops.yaw_rad)),
            patch_base=contiguous(crops.cell_base_z_m - self.local_origin_m[2], np.float64),  # local heights
            patch_top=contiguous(crops.cell_top_z_m - self.local_origin_m[2], np.float64),
            ground_grids=tuple(values for values, _ in grids),
            grid_numbers=np.stack([numbers for _, numbers in grids]),
            limit=no_limit,
            limit_next=no_limit,
            local_origin=self.local_origin_m,
            neighbour=neighbour,
            box_lo_z=box_lo_z,
            box_hi_z=box_hi_z,
        )
        self._params = TraceParams(
            k=1,
            foliage_solid=False,
            per_ray_limit=0,
            continue_step_m=0.0,
            pond_threshold_m=0.0,
            miss=self._miss,
            first_box=self._first_box,
            last_crop_prim=n_box - 1,
            start_m=START_M,
            crop_step_m=CROP_STEP_M,
            exit_step_m=EXIT_STEP_M,
            crop_cos=CROP_COS_INCIDENCE,
            ground_class=_GROUND,
            mud_class=_MUD,
            grass=_GRASS,
            soil=_SOIL,
            water=_WATER,
            no_polygon=NO_POLYGON,
            wetness_per_depth=1.0 / WETNESS_DEPTH_M,
        )
        self._local = threading.local()  # per-thread state buffers of trace (see _buffers)

    @staticmethod
    def _embree(vertices: np.ndarray, triangles: np.ndarray):
        rc = o3d.t.geometry.RaycastingScene()
        rc.add_triangles(
            o3d.core.Tensor(vertices, o3d.core.float32, _CPU), o3d.core.Tensor(triangles, o3d.core.uint32, _CPU)
        )
        return rc

    def _buffers(self, n: int) -> tuple[TraceState, np.ndarray, np.ndarray, WorkLists]:
        """Work arrays of a trace of ``n`` sub-rays, kept per thread and reused by later calls.

        ``(state, rows, next_rows, work)``: the ``trace_kernel.TraceState``, the int64 lists of the round's sub-rays and of those going
        on, and the ``trace_kernel.WorkLists``. Their contents do not carry over between calls
        (``round_rays`` resets what is read before it is written).
        """
        buf = getattr(self._local, "buffers", None)
        if buf is None or len(buf[1]) < n:
            f8, i8 = np.float64, np.int64
            dtypes = (f8, f8, i8, np.float32, f8, i8, f8, i8, f8, f8, f8, i8, f8, i8, np.float32, i8, bool, i8, bool)
            state = TraceState(*(np.empty(n, dtype) for dtype in dtypes))
            work = WorkLists(np.empty((n, 6), np.float32), *(np.empty(n, i8) for _ in range(5)))
            buf = (state, np.empty(n, i8), np.empty(n, i8), work)
            self._local.buffers = buf
        return buf

    # --- casts ----------------------------------------------------------------------------
    def _cast_rays(self, rc, rays: np.ndarray) -> CastHits:
        """``cast_rays`` of ready float32 rays ``(m, 6)`` (C-contiguous; shared, not copied):
        ``t_hit (m,)``, ``primitive_ids (m,)`` and ``primitive_normals (m, 3)``.

        Open3D holds the GIL for a whole ``cast_rays``, so the rays go in pieces of at most
        ``CAST_PIECE_RAYS``: between pieces the node's timers and callbacks get the GIL (a whole
        Polaris scan in one call held it for 6-7 ms; a piece holds it for under 2 ms, and the
        node's pretrace blocks of 360 columns fit in one). Pieces of 16384 rays cost about 5 %
        over one call, of 8192 about 11 %. Each ray's hit does not depend on the others, so the
        pieces change no bit."""
        m = len(rays)
        if m <= CAST_PIECE_RAYS:
            result = rc.cast_rays(o3d.core.Tensor.from_numpy(rays), nthreads=self._nthreads)
            return CastHits(
                result["t_hit"].numpy(), result["primitive_ids"].numpy(), result["primitive_normals"].numpy()
            )
        t_hit = np.empty(m, np.float32)
        ids = np.empty(m, np.uint32)
        normals = np.empty((m, 3), np.float32)
        for first in range(0, m, CAST_PIECE_RAYS):
            piece = slice(first, min(first + CAST_PIECE_RAYS, m))
            result = rc.cast_rays(o3d.core.Tensor.from_numpy(rays[piece]), nthreads=self._nthreads)
            t_hit[piece] = result["t_hit"].numpy()
            ids[piece] = result["primitive_ids"].numpy()
            normals[piece] = result["primitive_normals"].numpy()
        return CastHits(t_hit, ids, normals)

    def _cast(self, rc, origins_local: np.ndarray, directions: np.ndarray, start=None) -> dict:
        """One ``cast_rays`` from ``origins_local + start directions`` (float32 rays)."""
        rays = np.empty((len(origins_local), 6), np.float32)
        if start is None:
            rays[:, :3] = origins_local
        else:
            np.multiply(
                directions, start if np.isscalar(start) else start[:, None], out=rays[:, :3], casting="same_kind"
            )
            np.add(rays[:, :3], origins_local, out=rays[:, :3], casting="same_kind")
        rays[:, 3:] = directions
        return rc.cast_rays(o3d.core.Tensor(rays, o3d.core.float32, _CPU), nthreads=self._nthreads)

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
        origins, directions = self.to_scene(np.asarray(origins_world), np.asarray(directions_world))
        result = self._cast(self._rc, origins - self.local_origin_m, directions)
        return result["t_hit"].numpy()

    def to_scene(self, origins_world: np.ndarray, directions_world: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The rays in the scene's frame (``T_scene_odom``); unchanged without one."""
        if self.T_scene_odom is None:
            return origins_world, directions_world
        R, t = self.T_scene_odom[:3, :3], self.T_scene_odom[:3, 3]
        return origins_world @ R.T + t, directions_world @ R.T

    @staticmethod
    def _finish(done, nd, sub, state, tables, params, out, next_rows) -> int:
        """``trace_kernel.finish`` of the sub-rays ``done[:nd]``; a long list in parts side by side
        (each sub-ray writes only its own state and hits), each part's continuing sub-rays moved up
        behind the previous parts', so ``next_rows`` is what one pass gives."""
        bounds = split_bounds(nd, MIN_FINISH_PER_PART)

        def part(a: int, b: int) -> int:  # its continuing sub-rays go to next_rows[a:]
            return kernel.finish(done[a:], b - a, sub, state, tables, params, out, next_rows[a:])

        n_next = 0
        for start, count in zip(bounds[:-1], map_parts(part, bounds), strict=True):
            if start > n_next:
                next_rows[n_next : n_next + count] = next_rows[start : start + count]
            n_next += count
        return n_next

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
        range_offset_m: float = 0.0,
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
        range_offset_m : float
            A sensor's ``range_offset_m``: each sub-ray starts at ``max(START_M, range_offset_m)``
            along its direction, so nothing nearer is hit; ranges stay measured from the origin.

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
        if not (np.isfinite(range_offset_m) and 0.0 <= range_offset_m < max_range_m):
            raise ConfigError(
                f"range_offset_m = {range_offset_m!r}: must be a finite number >= 0 and below max_range_m"
            )
        start_m = max(START_M, float(range_offset_m))
        n, k = len(o), int(max_hits)
        hits = Hits.empty(n, k)
        if n == 0:
            return hits
        d = np.ascontiguousarray(d)
        o_scene, d_scene = self.to_scene(o, d)
        ol = o_scene - self.local_origin_m
        if boxes:
            box_t, box_cos, box_instance = trace_boxes(o, d, boxes, start_m)
            box_t[box_t > max_range_m] = np.inf
            limit = np.minimum(max_range_m, box_t)
        else:
            limit = np.array([float(max_range_m)])
        d = np.ascontiguousarray(d_scene)  # the boxes are in the world, the scene's casts in its own frame
        tables = self._tables._replace(limit=limit, limit_next=np.nextafter(limit, np.inf))
        params = self._params._replace(
            k=k,
            foliage_solid=bool(foliage_solid),
            per_ray_limit=1 if boxes else 0,
            continue_step_m=float(continue_step_m),
            pond_threshold_m=float(pond_threshold_m),
            start_m=start_m,
        )
        out = (
            hits.range_m,
            hits.valid,
            hits.class_id,
            hits.material_id,
            hits.cos_incidence,
            hits.instance,
            hits.wetness,
            hits.pond_depth_m,
        )
        sub = SubRays(origin_m=ol, direction=d)
        state, rows, next_rows, work = self._buffers(n)
        rays, walk, done = work.rays, work.walk, work.done
        n_rows = n
        for round_index in range(_MAX_ROUNDS):
            # One cast of every active sub-ray (a cached triangle hit behind a crop hit spares it),
            # a triangles-only cast of those that met a crop box first, their crop walk, the hits.
            m, w = kernel.round_rays(rows, n_rows, round_index == 0, sub, state, params, work)
            nd = 0
            if m:
                cast = self._cast_rays(self._rc, rays[:m])
                r, nd = kernel.first_cast_results(m, cast, sub, state, params, work, nd)
                if r:
                    cast = self._cast_rays(self._main_rc, rays[:r])
                    w = kernel.triangle_cast_results(r, cast, sub, state, params, work, w)
            if w:
                call = WalkCall(start_walk=True, w=w, max_patches=_MAX_CROP_PATCHES, shrink_m=CROP_BOX_SHRINK_M)
                w, nd = crop_walk(call, _NO_CAST, sub, state, tables, params, work, nd)
                for _ in range(_MAX_CROP_PATCHES - 1):
                    if not w:
                        break
                    cast = self._cast_rays(self._crop_rc, rays[:w])
                    call = call._replace(start_walk=False, w=w)
                    w, nd = crop_walk(call, cast, sub, state, tables, params, work, nd)
                done[nd : nd + w] = walk[:w]  # the walk's bound: no crop hit
                nd += w
            n_rows = self._finish(done, nd, sub, state, tables, params, out, next_rows)
            if n_rows == 0:
                break
            rows, next_rows = next_rows, rows
        slot, ended = state.slot[:n], state.ended[:n]
        if boxes:
            box_rows = np.flatnonzero(np.isfinite(box_t) & (slot < k) & ~ended)
            cols = slot[box_rows]
            hits.range_m[box_rows, cols] = box_t[box_rows]
            hits.valid[box_rows, cols] = True
            hits.class_id[box_rows, cols] = _VEHICLE_CLASS
            hits.material_id[box_rows, cols] = _VEHICLE_MATERIAL
            hits.cos_incidence[box_rows, cols] = box_cos[box_rows]
            hits.instance[box_rows, cols] = box_instance[box_rows]
        return hits


__all__ = ["CROP_COS_INCIDENCE", "CROP_STEP_M", "EXIT_STEP_M", "START_M", "Tracer"]
