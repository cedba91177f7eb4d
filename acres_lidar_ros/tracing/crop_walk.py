"""The compiled crop walk of ``trace.Tracer.trace``: from crop patch to crop patch along each
sub-ray, the first step point in a crop cell (spec "CPU Path": crop boxes, ``CROP_STEP_M``).

A sub-ray's walk starts at the crop box its first cast met. In a patch, the cells are crossed
analytically (``trace_kernel._slabs4``); a sub-ray that leaves the patch without a step point in
a cell goes on in the next patch box along it. Within a field that box is found on the field's
lattice (``_next_box``): column by column through the neighbours (``crop_links``), the first box
the sub-ray clearly enters, clear of box edges and corners (``LINK_MARGIN_M``); the walk steps
there without a cast. Otherwise (a field's edge, a graze of a box's edge, a corner) it is cast
against the crop boxes from just behind the exit, as every step was before: the hits are those
of that cast-only walk (a step takes the same box the cast would, and its entry parameter only
bounds the next exit from below).

Argument groups as in ``trace_kernel``; ``SceneTables.neighbour``, ``box_lo_z`` and ``box_hi_z`` are ``crop_links``' arrays.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from acres_lidar_ros.tracing.trace_kernel import (
    CastHits,
    SubRays,
    TraceState,
    WorkLists,
    _fmax,
    _fmin,
    _maximum,
    _minimum,
    _slabs4,
    _write_ray,
)
from acres_lidar_ros.tracing.trace_records import SceneTables, TraceParams

#: Clearance of a step to a neighbour patch: the crossing of its box face stays this far from the
#: face's edges, and this far (in ray parameter) behind where a cast from the exit would start,
#: m. Embree's float32 boxes and ray origins are within 2e-5 m of the float64 ones at 300 m from
#: the tracer's local origin, so nearer crossings are left to the cast.
LINK_MARGIN_M = 1e-4

_SIDES = ((-1.0, 0.0), (1.0, 0.0), (0.0, -1.0), (0.0, 1.0))
"""Patch sides in the patch frame, in ``crop_links`` order: -x, +x, -y, +y."""


class WalkCall(NamedTuple):
    """One call of ``crop_walk``: whether its sub-rays start their walk, how many, and its bounds."""

    start_walk: bool  # the sub-rays start their walk (no cast to take)
    w: int  # the sub-rays are ``walk[:w]``
    max_patches: int  # a sub-ray's walk ends without a crop hit after this many patches
    shrink_m: float  # how much smaller Embree's crop boxes are at the sides, m


def crop_links(
    centre_xy_m: np.ndarray,
    yaw_rad: np.ndarray,
    instance: np.ndarray,
    size_m: np.ndarray,
    cell_base_z_m: np.ndarray,
    cell_top_z_m: np.ndarray,
    local_z_m: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Neighbours of the crop patches and the z extent of their boxes, for the walk's steps.

    Parameters
    ----------
    centre_xy_m : (p, 2) float64, world; yaw_rad : (p,) float64; instance : (p,) uint32
        The patches (``CropPatches``); a field is the patches of one instance.
    size_m : (2,) float64
        Patch size along its x and y.
    cell_base_z_m, cell_top_z_m : (p, 4, 4) float64, world
    local_z_m : float
        z of the tracer's local origin.

    Returns
    -------
    neighbour : (p, 4) int64
        The patch of the same field across each side (``_SIDES`` order), -1 where none or where
        the field's footprint comes within 1 cm of another field's (a cast decides there).
    box_lo_z, box_hi_z : (p,) float64
        Bottom and top of each patch's box, local z (as ``CropPatches.box_mesh``).
    """
    from scipy.spatial import cKDTree

    p = len(yaw_rad)
    neighbour = np.full((p, 4), -1, np.int64)
    if p == 0:
        return neighbour, np.zeros(0), np.zeros(0)
    box_lo = cell_base_z_m.reshape(p, -1).min(axis=1) - local_z_m
    box_hi = cell_top_z_m.reshape(p, -1).max(axis=1) - local_z_m
    c, s = np.cos(yaw_rad), np.sin(yaw_rad)
    tree = cKDTree(centre_xy_m)
    for k, (ux, uy) in enumerate(_SIDES):
        step = np.column_stack([c * ux * size_m[0] - s * uy * size_m[1], s * ux * size_m[0] + c * uy * size_m[1]])
        dist, index = tree.query(centre_xy_m + step, distance_upper_bound=1e-6)
        found = np.isfinite(dist)
        q = np.where(found, index, 0)
        same = found & (instance[q] == instance) & (yaw_rad[q] == yaw_rad)
        neighbour[:, k] = np.where(same, q, -1)
    # Fields whose footprints (their patches' corners, axis-aligned) come near another's: no steps.
    half = 0.5 * np.hypot(*size_m)
    fields = np.unique(instance)
    lo = np.array([centre_xy_m[instance == f].min(axis=0) - half - 0.01 for f in fields])
    hi = np.array([centre_xy_m[instance == f].max(axis=0) + half + 0.01 for f in fields])
    overlap = np.all((lo[:, None] <= hi[None]) & (lo[None] <= hi[:, None]), axis=2)
    np.fill_diagonal(overlap, False)
    crowded = np.isin(instance, fields[overlap.any(axis=1)])
    neighbour[crowded] = -1
    return neighbour, box_lo, box_hi


@njit(cache=True, nogil=True, error_model="numpy")
def _next_box(sub, g, patch, origin_t, end, tables, shrink_m, max_columns):
    """The crop box a cast from ``origin_t`` along sub-ray ``g`` would meet after it left
    ``patch``, and the ray parameter where it enters it: ``(q, t_in)``; ``(-2, nan)`` where the
    ray reaches ``end`` (the walk's end) before any further box of the field could begin;
    ``(-1, nan)`` where only a cast can tell (the field's edge, near an edge or corner of a box, a
    ray along an axis).

    From column to column of the field's lattice: the ray leaves a patch's column through one
    side (clear of its corners, so no diagonal box is near), and enters the neighbour's shrunk
    box clearly, or clearly passes over (or under) it to the next column.
    """
    ol, d = sub.origin_m, sub.direction
    patch_centre, patch_cos, patch_sin = tables.patch_centre, tables.patch_cos, tables.patch_sin
    size_x, size_y = tables.cell_xs[-1], tables.cell_ys[-1]
    neighbour, box_lo_z, box_hi_z = tables.neighbour, tables.box_lo_z, tables.box_hi_z
    margin = LINK_MARGIN_M
    dz = d[g, 2]
    if dz == 0.0:
        return -1, np.nan
    cur = patch
    for _ in range(max_columns):
        c = patch_cos[cur]
        sn = patch_sin[cur]
        rel0 = ol[g, 0] - patch_centre[cur, 0]
        rel1 = ol[g, 1] - patch_centre[cur, 1]
        px = c * rel0 + sn * rel1 + size_x / 2
        py = -sn * rel0 + c * rel1 + size_y / 2
        qx = c * d[g, 0] + sn * d[g, 1]
        qy = -sn * d[g, 0] + c * d[g, 1]
        if qx == 0.0 or qy == 0.0:
            return -1, np.nan
        # The side of this column the ray leaves through, where it crosses the full-size edge
        # and the neighbour's shrunk face.
        tx = ((size_x if qx > 0.0 else 0.0) - px) / qx
        ty = ((size_y if qy > 0.0 else 0.0) - py) / qy
        if tx < ty:
            side = 1 if qx > 0.0 else 0
            lat0 = py + tx * qy
            lat1 = py + (((size_x + shrink_m) if qx > 0.0 else -shrink_m) - px) / qx * qy
            lat_hi = size_y - shrink_m - margin
        elif ty < tx:
            side = 3 if qy > 0.0 else 2
            lat0 = px + ty * qx
            lat1 = px + (((size_y + shrink_m) if qy > 0.0 else -shrink_m) - py) / qy * qx
            lat_hi = size_x - shrink_m - margin
        else:
            return -1, np.nan
        if min(tx, ty) > end + margin:
            return -2, np.nan  # every box beyond this column starts past the end
        lat_lo = shrink_m + margin
        if not (lat_lo < lat0 < lat_hi and lat_lo < lat1 < lat_hi):
            return -1, np.nan
        q = neighbour[cur, side]
        if q < 0:
            return -1, np.nan
        # The ray through the neighbour's shrunk box (its own frame).
        rel0 = ol[g, 0] - patch_centre[q, 0]
        rel1 = ol[g, 1] - patch_centre[q, 1]
        px = patch_cos[q] * rel0 + patch_sin[q] * rel1 + size_x / 2
        py = -patch_sin[q] * rel0 + patch_cos[q] * rel1 + size_y / 2
        ax0 = (shrink_m - px) / qx
        ax1 = (size_x - shrink_m - px) / qx
        ay0 = (shrink_m - py) / qy
        ay1 = (size_y - shrink_m - py) / qy
        az0 = (box_lo_z[q] - ol[g, 2]) / dz
        az1 = (box_hi_z[q] - ol[g, 2]) / dz
        t_in = max(min(ax0, ax1), min(ay0, ay1), min(az0, az1))
        t_out = min(max(ax0, ax1), max(ay0, ay1), max(az0, az1))
        if t_in < t_out - margin:
            if t_in > origin_t + margin:
                return q, t_in
            return -1, np.nan
        if not t_out < t_in - margin:
            return -1, np.nan
        cur = q  # clearly over or under this box: on to the next column
    return -1, np.nan


@njit(cache=True, nogil=True, error_model="numpy")
def crop_walk(
    call: WalkCall,
    cast: CastHits,
    sub: SubRays,
    state: TraceState,
    tables: SceneTables,
    params: TraceParams,
    work: WorkLists,
    nd: int,
) -> tuple[int, int]:
    """Walk the crop patches of each sub-ray ``walk[:w]`` until a hit, the end, or a cast.

    ``start_walk``: the sub-rays start their walk; their first box is a crop box before the
    triangle ``t`` (``first_t``, ``first_patch``); the walk ends at the triangle or just past the
    range limit. Otherwise ``cast`` is the cast against the crop boxes that finds
    each one's next patch. In a patch, the first step point at or after ``walk_from`` that lies
    in a cell is the hit (``crop_t``, ``crop_patch``). A sub-ray that leaves the patch without one
    steps to the neighbour patch (module notes) or, where it cannot, is written to ``rays`` (a
    cast from just behind the exit) and kept in ``walk``; the others are done (appended to
    ``done``). ``walked`` counts the patches of each sub-ray's walk: after ``max_patches`` it ends
    without a crop hit. ``shrink_m``: how much smaller Embree's crop boxes are at the sides.
    Returns ``(kept, nd)``.
    """
    start_walk, w, max_patches, shrink_m = call.start_walk, call.w, call.max_patches, call.shrink_m
    t_hit, prim_ids = cast.t_hit, cast.primitive_ids
    ol, d = sub.origin_m, sub.direction
    walk, rays, done, walked = work.walk, work.rays, work.done, work.walked
    s, t, first_t, first_patch = state.s, state.t, state.first_t, state.first_patch
    crop_t, crop_patch = state.crop_t, state.crop_patch
    walk_from, walk_end, walk_t_e, walk_patch = state.walk_from, state.walk_end, state.walk_t_e, state.walk_patch
    xs, ys, patch_centre, patch_cos, patch_sin = (
        tables.cell_xs,
        tables.cell_ys,
        tables.patch_centre,
        tables.patch_cos,
        tables.patch_sin,
    )
    patch_base, patch_top, limit_next = tables.patch_base, tables.patch_top, tables.limit_next
    per_ray_limit, last_prim = params.per_ray_limit, params.last_crop_prim
    start_m, step_m, exit_step_m = params.start_m, params.crop_step_m, params.exit_step_m
    size_x = xs[-1]
    size_y = ys[-1]
    kept = 0
    for i in range(w):
        g = walk[i]
        if start_walk:
            walk_end[g] = min(t[g], limit_next[g * per_ray_limit])
            walk_from[g] = s[g]
            walk_t_e[g] = first_t[g]
            walk_patch[g] = first_patch[g]
            walked[g] = 0
        else:
            walk_t_e[g] = (walk_from[g] + exit_step_m) + np.float64(t_hit[i])
            walk_patch[g] = np.int64(min(prim_ids[i], last_prim)) // 12
        end = walk_end[g]
        go_on = False
        while True:  # the patches of this sub-ray, until a hit, the end or a cast
            t_e = walk_t_e[g]
            walked[g] += 1
            if not (t_e < end and walked[g] <= max_patches):
                break
            patch = walk_patch[g]
            wf = walk_from[g]
            # The ray in the patch frame: x along the 1.52 m side from the patch corner.
            rel0 = ol[g, 0] - patch_centre[patch, 0]
            rel1 = ol[g, 1] - patch_centre[patch, 1]
            rel2 = ol[g, 2] - patch_centre[patch, 2]
            c = patch_cos[patch]
            sn = patch_sin[patch]
            px = c * rel0 + sn * rel1 + size_x / 2
            py = -sn * rel0 + c * rel1 + size_y / 2
            qx = c * d[g, 0] + sn * d[g, 1]
            qy = -sn * d[g, 0] + c * d[g, 1]
            inv_x = 1.0 / qx
            inv_y = 1.0 / qy
            inv_z = 1.0 / d[g, 2]
            x_lo, x_hi = _slabs4(px, inv_x, xs[0], xs[1], xs[2], xs[3], xs[4])
            best = np.inf
            for iy in range(4):
                t1 = (ys[iy] - py) * inv_y
                t2 = (ys[iy + 1] - py) * inv_y
                y_lo = _fmin(t1, t2)
                y_hi = _fmax(t1, t2)
                for ix in range(4):
                    xy_lo = _maximum(x_lo[ix], y_lo)
                    xy_hi = _minimum(x_hi[ix], y_hi)
                    if xy_lo > xy_hi or xy_hi < wf:
                        continue  # the ray misses the cell's column from wf on (hi < lo below)
                    t_top = (patch_top[patch, iy, ix] - rel2) * inv_z
                    t_base = (patch_base[patch, iy, ix] - rel2) * inv_z
                    lo = _maximum(_maximum(xy_lo, _fmin(t_top, t_base)), wf)
                    hi = _minimum(xy_hi, _fmax(t_top, t_base))
                    if hi >= lo:  # the ray crosses the cell: its first step point in it
                        gp = start_m + np.ceil((lo - start_m) / step_m) * step_m
                        if gp <= hi and gp < best:
                            best = gp
            if best < end:
                crop_t[g] = best
                crop_patch[g] = patch
                break
            # No step point in this patch: go on from where the ray leaves its box (the
            # highest cell top or lowest base along z; np.max over the cells: a NaN wins).
            z_max = np.nan
            for iy in range(4):
                for ix in range(4):
                    t_top = (patch_top[patch, iy, ix] - rel2) * inv_z
                    t_base = (patch_base[patch, iy, ix] - rel2) * inv_z
                    z_hi = _fmax(t_top, t_base)
                    z_max = z_hi if (iy == 0 and ix == 0) else _maximum(z_max, z_hi)
            bx = _fmax((0.0 - px) * inv_x, (size_x - px) * inv_x)
            by = _fmax((0.0 - py) * inv_y, (size_y - py) * inv_y)
            box_hi = _minimum(_minimum(bx, by), z_max)
            exit_t = _maximum(_maximum(box_hi, wf), t_e)
            if not exit_t < end:
                break
            walk_from[g] = exit_t
            q, t_in = _next_box(sub, g, patch, exit_t + exit_step_m, end, tables, shrink_m, max_patches)
            if q == -2:
                break  # as a cast would find: no box before the end
            if q >= 0:
                walk_t_e[g] = t_in
                walk_patch[g] = q
                continue
            _write_ray(rays, kept, ol, d, g, exit_t + exit_step_m)
            walk[kept] = g
            kept += 1
            go_on = True
            break
        if not go_on:
            done[nd] = g
            nd += 1
    return kept, nd
