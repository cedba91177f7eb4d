"""Compiled passes of ``trace.Tracer.trace``: the bookkeeping of the sub-rays between Embree
casts, one loop over the sub-rays of each cast (numba).

A call of ``Tracer.trace`` runs rounds. A round casts every active sub-ray once from its start
``s`` (``round_rays`` writes the rays, ``first_cast_results`` takes the hits); those whose first
primitive was a crop box are cast again against the triangles alone (``triangle_cast_results``)
and walk the crop patches in front of the triangle (``crop_walk.crop_walk``, stepping to neighbour
patches or casting against the crop boxes between patches); then ``finish`` records each sub-ray's hit and lists the sub-rays that go
on in the next round.

Each pass does, per sub-ray, exactly the float64 / float32 arithmetic of the numpy formulation
it replaced (same operations in the same order, no fused multiply-adds), so the ``Hits`` are
bit-identical to it. NaNs follow numpy: ``np.maximum`` / ``np.minimum`` propagate one,
``np.fmin`` / ``np.fmax`` drop it (``_maximum``, ``_minimum``, ``_fmin``, ``_fmax``).

Rays for Embree are float32 rows ``(x, y, z, dx, dy, dz)`` about the tracer's local origin:
``float32(float64(float32(d * start)) + o)`` and ``float32(d)``.

Argument groups (built by ``trace.Tracer``):

``state``
    Per sub-ray arrays of the call, a ``TraceState``.
``tables``
    The scene's lookups and the call's range limits, a ``trace_records.SceneTables``.
``params``
    The call's numbers and the tracer's constants, a ``trace_records.TraceParams``.
``out``
    The ``Hits`` arrays ``range_m, valid, class_id, material_id, cos_incidence, instance,
    wetness, pond_depth_m`` (n, k).
``sub``
    The call's sub-rays about the tracer's local origin, a ``SubRays``.
``cast``
    One Embree cast's results, a ``CastHits``.
``work``
    The per-thread lists of sub-rays and the rays for Embree, a ``WorkLists``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from acres_lidar_ros.tracing.trace_records import SceneTables, TraceParams


class TraceState(NamedTuple):
    """Per sub-ray arrays of a trace call (length >= n; ``trace.Tracer._buffers``), distances in m
    along the sub-ray from the tracer's local origin."""

    s: np.ndarray  # float64: start of the sub-ray's next cast
    t: np.ndarray  # float64: the round's triangle hit
    prim: np.ndarray  # int64: its primitive
    cos_signed: np.ndarray  # float32: the ray's cosine with its normal, signed
    first_t: np.ndarray  # float64: the round's first hit (a crop box or a triangle)
    first_patch: np.ndarray  # int64: the crop patch of that box
    crop_t: np.ndarray  # float64: the crop walk's hit
    crop_patch: np.ndarray  # int64: its patch
    walk_from: np.ndarray  # float64: where the walk goes on in its patch
    walk_end: np.ndarray  # float64: where the walk ends (the triangle hit or the range limit)
    walk_t_e: np.ndarray  # float64: where the walk enters its patch
    walk_patch: np.ndarray  # int64: the patch it walks
    cache_t: np.ndarray  # float64: a triangle hit behind a crop hit, kept for the next round
    cache_prim: np.ndarray  # int64: its primitive
    cache_cos: np.ndarray  # float32: its signed cosine
    cache_patch: np.ndarray  # int64: the crop patch in front of it
    known: np.ndarray  # bool: the cache holds this sub-ray's next triangle hit
    slot: np.ndarray  # int64: the next hit slot of the sub-ray
    ended: np.ndarray  # bool: the sub-ray ends this round


class SubRays(NamedTuple):
    """The sub-rays of a trace call, (n, 3) float64 each, in the scene's frame."""

    origin_m: np.ndarray  # origins about the tracer's local origin, m
    direction: np.ndarray  # unit directions


class CastHits(NamedTuple):
    """One ``cast_rays`` of ``m`` rays (Open3D's names): the first primitive of each."""

    t_hit: np.ndarray  # (m,) float32 ray parameter of the hit from the ray's start, m (inf: none)
    primitive_ids: np.ndarray  # (m,) uint32, Embree's INVALID_ID where none
    primitive_normals: np.ndarray  # (m, 3) float32


class WorkLists(NamedTuple):
    """The per-thread work arrays of a trace (``trace.Tracer._buffers``): lists of sub-rays (int64,
    length >= n, each filled from its start), the rays for Embree and the crop walk's counts."""

    rays: np.ndarray  # (n, 6) float32: rays of the next cast (module notes)
    fresh: np.ndarray  # the sub-rays of the round's first cast
    listed: np.ndarray  # those re-cast against the triangles alone
    walk: np.ndarray  # those walking the crop patches
    done: np.ndarray  # those whose round's hit is found (for ``finish``)
    walked: np.ndarray  # per sub-ray: patches of its crop walk this round


# --- numpy's scalar min / max ----------------------------------------------------------------


@njit(cache=True, error_model="numpy", inline="always")
def _maximum(a, b):
    """``np.maximum``: a NaN in either wins."""
    return a if (a >= b or a != a) else b


@njit(cache=True, error_model="numpy", inline="always")
def _minimum(a, b):
    """``np.minimum``: a NaN in either wins."""
    return a if (a <= b or a != a) else b


@njit(cache=True, error_model="numpy", inline="always")
def _fmin(a, b):
    """``np.fmin``: a NaN is dropped."""
    if a != a:
        return b
    if b != b:
        return a
    return a if a <= b else b


@njit(cache=True, error_model="numpy", inline="always")
def _fmax(a, b):
    """``np.fmax``: a NaN is dropped."""
    if a != a:
        return b
    if b != b:
        return a
    return a if a >= b else b


@njit(cache=True, error_model="numpy", inline="always")
def _write_ray(rays, r, ol, d, g, start):
    """Row ``r`` of ``rays``: sub-ray ``g`` from ray parameter ``start`` (float32, local)."""
    rays[r, 0] = np.float32(np.float64(np.float32(d[g, 0] * start)) + ol[g, 0])
    rays[r, 1] = np.float32(np.float64(np.float32(d[g, 1] * start)) + ol[g, 1])
    rays[r, 2] = np.float32(np.float64(np.float32(d[g, 2] * start)) + ol[g, 2])
    rays[r, 3] = np.float32(d[g, 0])
    rays[r, 4] = np.float32(d[g, 1])
    rays[r, 5] = np.float32(d[g, 2])


@njit(cache=True, error_model="numpy", inline="always")
def _dot32(normals, i, d, g):
    """``n . d`` in float32, summed left to right (as ``einsum`` does over float32 rows)."""
    return (normals[i, 0] * np.float32(d[g, 0]) + normals[i, 1] * np.float32(d[g, 1])) + normals[i, 2] * np.float32(
        d[g, 2]
    )


@njit(cache=True, error_model="numpy", inline="always")
def _cell(x, y, inv, ox, oy, nx, ny):
    """Flat index into a ``CellGrid``'s padded values (``CellGrid.flat_index``); scalars only."""
    j = np.floor(x * inv - ox)
    i = np.floor(y * inv - oy)
    j = min(max(j, -1.0), nx)
    i = min(max(i, -1.0), ny)
    return np.int64((i + 1.0) * (nx + 2.0) + j + 1.0)


@njit(cache=True, error_model="numpy", inline="always")
def _slabs4(p, inv, e0, e1, e2, e3, e4):
    """Ray parameter intervals ``(lo, hi)`` (4-tuples) of ``p + t q`` in the slabs between the 5
    edges ``e``, with ``inv = 1 / q``: ``(e - p) inv`` ordered by ``fmin`` / ``fmax``."""
    a0 = (e0 - p) * inv
    a1 = (e1 - p) * inv
    a2 = (e2 - p) * inv
    a3 = (e3 - p) * inv
    a4 = (e4 - p) * inv
    return (
        (_fmin(a0, a1), _fmin(a1, a2), _fmin(a2, a3), _fmin(a3, a4)),
        (_fmax(a0, a1), _fmax(a1, a2), _fmax(a2, a3), _fmax(a3, a4)),
    )


# Note: helpers above take arrays but have no branches. A helper with arrays and branches, inlined
# or not, costs numba reference counting of every array on every call (measured 150 ns per
# sub-ray), so the logic with branches sits in the loop bodies below.

# --- casts of a round -------------------------------------------------------------------------


@njit(cache=True, nogil=True, error_model="numpy")
def round_rays(
    rows: np.ndarray,
    n_rows: int,
    first_round: bool,
    sub: SubRays,
    state: TraceState,
    params: TraceParams,
    work: WorkLists,
) -> tuple[int, int]:
    """Start a round: the rays of its first cast, and the crop walks of cached sub-rays.

    ``first_round``: the sub-rays are ``0 ... n_rows - 1`` (``rows`` unused) and their state is
    reset. A sub-ray with ``known`` takes its cached triangle hit and walks the crop from ``s``
    in its cached patch (listed in ``walk``); the others are written to ``rays[:m]`` (sub-rays
    ``fresh[:m]``). Returns ``(m, w)``.
    """
    ol, d = sub.origin_m, sub.direction
    rays, fresh, walk = work.rays, work.fresh, work.walk
    s = state.s
    t = state.t
    prim = state.prim
    cos_signed = state.cos_signed
    first_t = state.first_t
    first_patch = state.first_patch
    crop_patch = state.crop_patch
    cache_t = state.cache_t
    cache_prim = state.cache_prim
    cache_cos = state.cache_cos
    cache_patch = state.cache_patch
    known = state.known
    slot = state.slot
    start_m = params.start_m
    if first_round:  # every sub-ray, none cached: one straight pass
        for g in range(n_rows):
            s[g] = start_m
            slot[g] = 0
            known[g] = False
            crop_patch[g] = -1
            fresh[g] = g
            _write_ray(rays, g, ol, d, g, start_m)
        return n_rows, 0
    m = 0
    w = 0
    for i in range(n_rows):
        g = rows[i]
        crop_patch[g] = -1
        if known[g]:
            known[g] = False
            t[g] = cache_t[g]
            prim[g] = cache_prim[g]
            cos_signed[g] = cache_cos[g]
            first_t[g] = s[g]
            first_patch[g] = cache_patch[g]
            walk[w] = g
            w += 1
        else:
            _write_ray(rays, m, ol, d, g, s[g])
            fresh[m] = g
            m += 1
    return m, w


@njit(cache=True, nogil=True, error_model="numpy")
def first_cast_results(
    m: int,
    cast: CastHits,
    sub: SubRays,
    state: TraceState,
    params: TraceParams,
    work: WorkLists,
    nd: int,
) -> tuple[int, int]:
    """Take the first cast (triangles and crop boxes) of the sub-rays ``fresh[:m]``.

    A sub-ray whose first primitive is a triangle is done (appended to ``done`` after its
    first ``nd``); one whose first primitive is a crop box keeps that box (``first_t``,
    ``first_patch``) and is written to ``rays`` for a cast against the triangles alone (listed
    in ``listed``). Returns ``(r, nd)``: how many are re-cast, the new length of ``done``.
    """
    t_hit, prim_ids, normals = cast.t_hit, cast.primitive_ids, cast.primitive_normals
    ol, d = sub.origin_m, sub.direction
    fresh, rays, recast, done = work.fresh, work.rays, work.listed, work.done
    s, t, prim, cos_signed, first_t, first_patch = (
        state.s,
        state.t,
        state.prim,
        state.cos_signed,
        state.first_t,
        state.first_patch,
    )
    miss = params.miss
    first_box = params.first_box
    r = 0
    for i in range(m):
        g = fresh[i]
        p = np.int64(min(prim_ids[i], miss))
        tt = np.float64(t_hit[i]) + s[g]
        if first_box <= p < miss:  # a crop box (after the triangles, before the miss entry)
            first_t[g] = tt
            first_patch[g] = (p - first_box) // 12
            _write_ray(rays, r, ol, d, g, s[g])
            recast[r] = g
            r += 1
        else:
            t[g] = tt
            prim[g] = p
            cos_signed[g] = _dot32(normals, i, d, g)
            done[nd] = g
            nd += 1
    return r, nd


@njit(cache=True, nogil=True, error_model="numpy")
def triangle_cast_results(
    r: int,
    cast: CastHits,
    sub: SubRays,
    state: TraceState,
    params: TraceParams,
    work: WorkLists,
    w: int,
) -> int:
    """Take the triangles-only cast of the sub-rays ``listed[:r]`` and list them in ``walk``
    after its first ``w``. Returns the new length of ``walk``."""
    t_hit, prim_ids, normals = cast.t_hit, cast.primitive_ids, cast.primitive_normals
    d = sub.direction
    recast, walk = work.listed, work.walk
    s, t, prim, cos_signed = state.s, state.t, state.prim, state.cos_signed
    miss = params.miss
    for i in range(r):
        g = recast[i]
        t[g] = s[g] + np.float64(t_hit[i])
        prim[g] = np.int64(min(prim_ids[i], miss))
        cos_signed[g] = _dot32(normals, i, d, g)
        walk[w] = g
        w += 1
    return w


# --- recording the hits -----------------------------------------------------------------------


@njit(cache=True, nogil=True, error_model="numpy")
def finish(
    done: np.ndarray,
    nd: int,
    sub: SubRays,
    state: TraceState,
    tables: SceneTables,
    params: TraceParams,
    out: tuple,
    next_rows: np.ndarray,
) -> int:
    """Record the round's hit of each sub-ray ``done[:nd]``, decide whether and where it goes on.

    A crop step point (``crop_patch >= 0``) comes before the triangle hit ``t``; a closed proxy's
    triangle left from inside is passed (``exit_step_m`` behind it); foliage continues
    ``continue_step_m`` behind the hit while slots are free; a crop hit keeps the triangle hit
    behind it for the next round while that is still ahead. Ground hits take material, wetness
    and pond depth by the ground rules (``Scene.ground_properties``). Returns the number of
    sub-rays written to ``next_rows``.
    """
    ol, d = sub.origin_m, sub.direction
    s = state.s
    t = state.t
    prim = state.prim
    cos_signed = state.cos_signed
    crop_t = state.crop_t
    crop_patch = state.crop_patch
    cache_t = state.cache_t
    cache_prim = state.cache_prim
    cache_cos = state.cache_cos
    cache_patch = state.cache_patch
    known = state.known
    slot = state.slot
    ended = state.ended
    (
        tri_class,
        tri_material,
        tri_instance,
        tri_closed,
        is_foliage,
        crop_class,
        crop_material,
        crop_instance,
        _xs,
        _ys,
        _pc,
        _pcos,
        _psin,
        _pb,
        _pt,
        ground_grids,
        gp,
        limit,
        _limit_next,
        local_origin,
        _neighbour,
        _box_lo_z,
        _box_hi_z,
    ) = tables
    (
        k,
        foliage_solid,
        per_ray_limit,
        continue_step_m,
        pond_threshold_m,
        _miss,
        _fb,
        _lcp,
        _start_m,
        _step_m,
        exit_step_m,
        crop_cos,
        ground_class,
        mud_class,
        grass,
        soil,
        water,
        no_polygon,
        wetness_per_depth,
    ) = params
    range_m, valid, class_id, material_id, cos_incidence, instance, wetness, pond_depth_m = out
    cover, polygon, pond, soil_w = ground_grids
    water_cells_shared = (
        gp[2, 0] == gp[3, 0]
        and gp[2, 1] == gp[3, 1]
        and gp[2, 2] == gp[3, 2]
        and (gp[2, 3] == gp[3, 3] and gp[2, 4] == gp[3, 4])
    )  # pond depth and soil wetness on the same cells: one index (as ground_properties)
    n_next = 0
    for i in range(nd):
        g = done[i]
        lim = limit[g * per_ray_limit]
        is_crop = crop_patch[g] >= 0
        tt = crop_t[g] if is_crop else t[g]
        ok = tt <= lim
        p = prim[g]
        exits = (not is_crop) and tri_closed[p] and ok and cos_signed[g] > 0.0
        rec = ok and not exits
        col = slot[g]
        cls = np.int64(0)
        if rec:
            if is_crop:
                patch = crop_patch[g]
                cls = np.int64(crop_class[patch])
                mat = np.int64(crop_material[patch])
                label = crop_instance[patch]
                cos = crop_cos
            else:
                cls = np.int64(tri_class[p])
                mat = np.int64(tri_material[p])
                label = tri_instance[p]
                cos = np.float64(abs(cos_signed[g]))
            w = 0.0
            depth = 0.0
            if cls == ground_class:
                x = ol[g, 0] + tt * d[g, 0] + local_origin[0]
                y = ol[g, 1] + tt * d[g, 1] + local_origin[1]
                c_cover = np.int64(cover[_cell(x, y, gp[0, 0], gp[0, 1], gp[0, 2], gp[0, 3], gp[0, 4])])
                c_poly = np.int64(polygon[_cell(x, y, gp[1, 0], gp[1, 1], gp[1, 2], gp[1, 3], gp[1, 4])])
                water_index = _cell(x, y, gp[2, 0], gp[2, 1], gp[2, 2], gp[2, 3], gp[2, 4])
                depth = pond[water_index]
                if not water_cells_shared:
                    water_index = _cell(x, y, gp[3, 0], gp[3, 1], gp[3, 2], gp[3, 3], gp[3, 4])
                sw = soil_w[water_index]
                if c_poly != no_polygon:
                    mat = c_poly
                elif c_cover == grass:
                    mat = np.int64(grass)
                else:
                    mat = np.int64(soil)
                if depth > pond_threshold_m:
                    mat = np.int64(water)
                w = sw if mat == soil else depth * wetness_per_depth
                w = min(max(w, 0.0), 1.0)
            elif cls == mud_class:
                w = 1.0
            range_m[g, col] = tt
            valid[g, col] = True
            class_id[g, col] = cls
            material_id[g, col] = mat
            cos_incidence[g, col] = cos
            instance[g, col] = label
            wetness[g, col] = w
            pond_depth_m[g, col] = depth
            col += 1
            slot[g] = col
        foliage = rec and is_foliage[cls]
        if foliage_solid:
            ended[g] = rec
            go_on = exits
        else:
            ended[g] = rec and not foliage
            go_on = (foliage and col < k) or exits
        if go_on:
            s_next = tt + exit_step_m if exits else tt + continue_step_m
            if is_crop and s_next < t[g]:
                cache_t[g] = t[g]
                cache_prim[g] = p
                cache_cos[g] = cos_signed[g]
                cache_patch[g] = crop_patch[g]
                known[g] = True
            s[g] = s_next
            next_rows[n_next] = g
            n_next += 1
    return n_next
