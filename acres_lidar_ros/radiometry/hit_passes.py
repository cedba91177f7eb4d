"""The compiled passes from a block's hits to its contributions (steps 1 to 3 of ``echoes``).

Three passes over the valid hits, in the hits' own order (beams one after the other, a beam's
sub-rays in order, a sub-ray's hits in range order):

1. ``reached_hits``: which hits light reaches, and the foliage transmission ``T`` in front of
   each (the product of the ``tau`` of the foliage hits before it on its sub-ray).
2. ``ground_keys``: the hash keys of the ground terms (the 0.25 m micro-slope cell, the 0.1 m
   albedo cell and the (scan, beam, sub-ray) roughness key, ``noise``); their normals are then
   formed by ``noise.hash_normals_of`` (numpy's vectorised logarithm and cosine) in one call.
3. ``lit_contributions``: per hit the tilt, texture, roughness move, backscatter, contribution
   and echo stretch (each equation from ``scalar_physics``), the nearest solid range of each beam,
   and the lit contributions of each beam sorted by range (stable), built as ``Contributions``.

The equations are those of ``scalar_physics`` and ``noise``; what is here is bookkeeping.
``Contributions`` is the one record of the lit contributions on both sides of the compiled
boundary (the clutter slabs join them as the same record); ``joined`` and ``joined_by_cell`` put
such records of groups of beams together (``echoes.Echoes`` too).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple, TypeVar

import numba
import numpy as np

from acres_lidar_ros.radiometry.equation_kernels import (
    albedo_factor,
    contribution_power,
    footprint_range_spread_m,
    minnaert_backscatter,
    pulse_peak_factor,
    rough_range_sigma_m,
    tilted_angle_rad,
)
from acres_lidar_ros.radiometry.noise import place_hash_of, roughness_hash_of

_jit = numba.njit(cache=True, nogil=True)
_Record = TypeVar("_Record", bound=Any)


class ReachedHits(NamedTuple):
    """Pass 1's result: (n,) arrays over the hits light reaches, in the hits' order."""

    flat: np.ndarray  # int64: flat index ``row * K + slot`` of the hit
    rows: np.ndarray  # int64: its sub-ray row
    t_front: np.ndarray  # T in front of it
    tau: np.ndarray  # its own tau (0 for a solid hit)
    passes: np.ndarray  # bool: it passes light (foliage, unless solid)


class HitFields(NamedTuple):
    """The block's hits, flat (by ``ReachedHits.flat``)."""

    range_m: np.ndarray
    cos_incidence: np.ndarray
    class_id: np.ndarray
    material_id: np.ndarray
    instance: np.ndarray
    wetness: np.ndarray


class SurfaceLaws(NamedTuple):
    """The material table's columns the passes read, by material id (``MaterialTable``'s names)."""

    reflectivity: np.ndarray
    incidence_exponent: np.ndarray
    specular: np.ndarray
    specular_width_rad: np.ndarray
    wet_darkening: np.ndarray
    micro_slope_rad: np.ndarray
    reflectivity_sd: np.ndarray
    roughness_m: np.ndarray


class GroundKeying(NamedTuple):
    """What the ground terms' hash keys are made of (``noise``): the seed terms, the scan and the cells."""

    ground_class: int
    slope_seed_term: np.uint64
    albedo_seed_term: np.uint64
    rough_seed_term: np.uint64
    scan: int
    slope_cell_m: float
    albedo_cell_m: float


class GroundTerms(NamedTuple):
    """Pass 2's places and the normals formed from its keys, per reached hit (-1: none)."""

    ground_at: np.ndarray  # place among the ground hits
    slope_at: np.ndarray  # places of its keys' normals in ``z``
    albedo_at: np.ndarray
    rough_at: np.ndarray
    theta_ground: np.ndarray  # (ground hits,) incidence angle, rad
    z: np.ndarray  # the keys' standard normals


class PulseShape(NamedTuple):
    """The scalars of the roughness move and the echo stretch."""

    min_rough_range_m: float
    pulse_length_m: float
    divergence_rad: float
    divergence_v_rad: float


class Contributions(NamedTuple):
    """The lit contributions of some beams, in beam (cell) order and range order within a beam:
    what ``lit_contributions`` builds and the clutter slabs join (``detection``).

    Attributes
    ----------
    cell : (m,) int64
        Cell ``c N_r + r`` of each contribution's beam.
    range_m, power, peak : (m,) float64
        ``R`` (after the roughness move), ``P`` (> 0) and ``g``.
    class_id, material_id : (m,) uint8
    instance : (m,) uint32
        Instance label (``scene.instances``).
    cos_incidence : (m,) float64, or (0,) when not kept
        ``|cos theta|`` the backscatter used (``theta'`` on ground; NaN for clutter slabs); kept
        only with ``BeamModel.truth``, an empty array otherwise (the compiled passes' "none").
    """

    cell: np.ndarray
    range_m: np.ndarray
    power: np.ndarray
    peak: np.ndarray
    class_id: np.ndarray
    material_id: np.ndarray
    instance: np.ndarray
    cos_incidence: np.ndarray

    @staticmethod
    def of_beams(parts: list[Contributions]) -> Contributions:
        """The contributions of groups of different beams, beams in cell order (each beam's
        contributions keep their order)."""
        return joined_by_cell(Contributions, parts)

    def merged(self, other: Contributions) -> Contributions:
        """These and ``other``'s contributions (both by beam and range) by beam and range; on a
        tie of both, these come first."""
        order = _merge_order(self.cell, self.range_m, other.cell, other.range_m)
        return joined(Contributions, [self, other], order)


class LitContributions(NamedTuple):
    """Pass 3's result: ``bad_range`` (a reached hit without a finite range >= 0), each beam's
    nearest solid range and the lit contributions."""

    bad_range: bool
    nearest_solid: np.ndarray
    contributions: Contributions


@_jit
def reached_hits(
    valid: np.ndarray,
    class_id: np.ndarray,
    material_id: np.ndarray,
    foliage_class: np.ndarray,
    transmission: np.ndarray,
    foliage_solid: bool,
) -> ReachedHits:
    """Pass 1: flat index ``row * K + slot`` and row of each hit light reaches, ``T`` in front of it, its
    ``tau`` (0 for a solid hit) and whether it passes light (foliage, unless solid)."""
    n_rows, k_slots = valid.shape
    n_classes = foliage_class.shape[0]
    n_materials = transmission.shape[0]
    n_valid = 0
    for row in range(n_rows):
        for j in range(k_slots):
            if valid[row, j]:
                n_valid += 1
    flat = np.empty(n_valid, np.int64)
    rows = np.empty(n_valid, np.int64)
    t_front = np.empty(n_valid)
    tau = np.empty(n_valid)
    passes = np.empty(n_valid, np.bool_)
    m = 0
    for row in range(n_rows):
        t = 1.0
        for j in range(k_slots):
            if not valid[row, j] or t <= 0.0:
                break  # valid slots are a prefix of the row; behind a solid hit no light
            cls = class_id[row, j]
            mat = material_id[row, j]
            if cls < 0 or cls >= n_classes or mat < 0 or mat >= n_materials:
                raise IndexError("hits: a class or material number outside the tables")
            lets_through = foliage_class[cls] and not foliage_solid
            tau_hit = transmission[mat] if lets_through else 0.0
            flat[m] = row * k_slots + j
            rows[m] = row
            t_front[m] = t
            tau[m] = tau_hit
            passes[m] = lets_through
            m += 1
            t = t * tau_hit
    return ReachedHits(flat[:m], rows[:m], t_front[:m], tau[:m], passes[:m])


@_jit
def ground_keys(
    reached: ReachedHits,
    hits: HitFields,
    laws: SurfaceLaws,
    keying: GroundKeying,
    origins: np.ndarray,
    directions: np.ndarray,
    cells: np.ndarray,
    n_sub: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Pass 2: for the reached ground hits, their ``|cos theta|`` (one per ground hit, in order)
    and the hash keys of their terms, all in one uint64 array (each distinct place key once): for hit ``i`` of the reached list,
    ``ground_at[i]`` is its place among the ground hits (-1: not ground) and ``slope_at``,
    ``albedo_at``, ``rough_at`` the places of its keys (-1 where the material's term is 0)."""
    flat, rows = reached.flat, reached.rows
    class_id, material_id, range_m, cos_incidence = hits.class_id, hits.material_id, hits.range_m, hits.cos_incidence
    micro_slope_rad, reflectivity_sd, roughness_m = laws.micro_slope_rad, laws.reflectivity_sd, laws.roughness_m
    ground_class, scan = keying.ground_class, keying.scan
    slope_cell_m, albedo_cell_m = keying.slope_cell_m, keying.albedo_cell_m
    slope_seed_term, albedo_seed_term, rough_seed_term = (
        keying.slope_seed_term,
        keying.albedo_seed_term,
        keying.rough_seed_term,
    )
    n = flat.shape[0]
    ground_at = np.full(n, -1, np.int64)
    slope_at = np.full(n, -1, np.int64)
    albedo_at = np.full(n, -1, np.int64)
    rough_at = np.full(n, -1, np.int64)
    cos_ground = np.empty(n)
    keys = np.empty(3 * n, np.uint64)
    n_ground = 0
    n_keys = 0
    # Neighbouring hits often fall in the same ground cell: a key seen lately keeps its place
    # (a direct-mapped table of recent keys), so its normal is formed once.
    seen_key = np.zeros(_SEEN_SLOTS, np.uint64)
    seen_at = np.full(_SEEN_SLOTS, -1, np.int64)
    for i in range(n):
        f = flat[i]
        if class_id[f] != ground_class:
            continue
        row = rows[i]
        mat = material_id[f]
        cos_ground[n_ground] = min(abs(cos_incidence[f]), 1.0)
        ground_at[i] = n_ground
        n_ground += 1
        r = range_m[f]
        x = origins[row, 0] + r * directions[row, 0]
        y = origins[row, 1] + r * directions[row, 1]
        if micro_slope_rad[mat] > 0.0:
            slope_at[i], n_keys = _key_place(
                place_hash_of(x, y, slope_cell_m, slope_seed_term), keys, n_keys, seen_key, seen_at
            )
        if reflectivity_sd[mat] > 0.0:
            albedo_at[i], n_keys = _key_place(
                place_hash_of(x, y, albedo_cell_m, albedo_seed_term), keys, n_keys, seen_key, seen_at
            )
        if roughness_m[mat] > 0.0:
            beam = _beam_of(row, n_sub)
            keys[n_keys] = roughness_hash_of(
                np.uint64(scan), np.uint64(cells[beam]), np.uint64(row - beam * n_sub), rough_seed_term
            )
            rough_at[i] = n_keys
            n_keys += 1
    return ground_at, slope_at, albedo_at, rough_at, cos_ground[:n_ground], keys[:n_keys]


_SEEN_SLOTS = 4096


@_jit
def _beam_of(row: int, n_sub: int) -> int:
    """The block's beam of a sub-ray row (no integer division for one sub-ray per beam)."""
    return row if n_sub == 1 else row // n_sub


@_jit
def _key_place(key, keys, n_keys, seen_key, seen_at):
    """The place of ``key`` in ``keys[:n_keys]`` if the table of recent keys holds it, else its
    new place at the end; returns (place, new n_keys)."""
    slot = np.int64(key & np.uint64(_SEEN_SLOTS - 1))
    if seen_at[slot] >= 0 and seen_key[slot] == key:
        return seen_at[slot], n_keys
    keys[n_keys] = key
    seen_key[slot] = key
    seen_at[slot] = n_keys
    return n_keys, n_keys + 1


@_jit
def lit_contributions(
    reached: ReachedHits,
    ground: GroundTerms,
    hits: HitFields,
    laws: SurfaceLaws,
    shape: PulseShape,
    n_sub: int,
    weights: np.ndarray,
    cells: np.ndarray,
    keep_incidence: bool = False,
) -> LitContributions:
    """Pass 3: the lit contributions of the block's beams (beam order, range order within a beam,
    stable) and each beam's nearest solid range (inf where none); with ``keep_incidence`` also
    each contribution's ``|cos theta|`` as the backscatter used it (the truth output's), else
    ``Contributions.cos_incidence`` is empty."""
    flat, rows, t_front, tau, passes = reached
    ground_at, slope_at, albedo_at, rough_at, theta_ground, z = ground
    range_m, cos_incidence, class_id, material_id, instance, wetness = hits
    reflectivity, incidence_exponent, specular, specular_width_rad = (
        laws.reflectivity,
        laws.incidence_exponent,
        laws.specular,
        laws.specular_width_rad,
    )
    wet_darkening, micro_slope_rad, reflectivity_sd, roughness_m = (
        laws.wet_darkening,
        laws.micro_slope_rad,
        laws.reflectivity_sd,
        laws.roughness_m,
    )
    min_rough_range_m, pulse_length_m, divergence_rad, divergence_v_rad = shape
    n = flat.shape[0]
    n_beams = cells.shape[0]
    nearest_solid = np.full(n_beams, np.inf)
    out_cell = np.empty(n, np.int64)
    out_range = np.empty(n)
    out_power = np.empty(n)
    out_peak = np.empty(n)
    out_class = np.empty(n, np.uint8)
    out_material = np.empty(n, np.uint8)
    out_object = np.empty(n, np.uint32)
    out_cos = np.empty(n if keep_incidence else 0)
    m = 0
    start = 0  # first contribution of the current beam
    current = -1
    bad_range = False
    for i in range(n):
        f = flat[i]
        row = rows[i]
        beam = _beam_of(row, n_sub)
        if beam != current:
            _sort_by_range(out_range, out_power, out_peak, out_class, out_material, out_object, out_cos, start, m)
            start = m
            current = beam
        r = range_m[f]
        if not (r >= 0.0 and math.isfinite(r)):
            bad_range = True
            break
        mat = material_id[f]
        cos_theta = min(abs(cos_incidence[f]), 1.0)
        albedo = 1.0
        g = ground_at[i]
        if g >= 0:
            z_slope = z[slope_at[i]] if slope_at[i] >= 0 else 0.0
            cos_theta = math.cos(tilted_angle_rad(theta_ground[g], micro_slope_rad[mat], z_slope))
            if albedo_at[i] >= 0:
                albedo = albedo_factor(reflectivity_sd[mat], z[albedo_at[i]])
            if rough_at[i] >= 0:
                moved = r + rough_range_sigma_m(roughness_m[mat], cos_theta) * z[rough_at[i]]
                r = max(min_rough_range_m, moved)
        rho_bs = minnaert_backscatter(
            cos_theta,
            reflectivity[mat],
            incidence_exponent[mat],
            specular[mat],
            specular_width_rad[mat],
            wet_darkening[mat],
            wetness[f],
        )
        if not passes[i] and r < nearest_solid[beam]:
            nearest_solid[beam] = r
        power = contribution_power(weights[row - beam * n_sub], t_front[i], tau[i], rho_bs, albedo)
        if not power > 0.0:
            continue
        peak = 1.0
        if pulse_length_m > 0.0 and not passes[i]:
            divergence = divergence_v_rad if g >= 0 else divergence_rad
            peak = pulse_peak_factor(pulse_length_m, footprint_range_spread_m(r, cos_theta, divergence))
        out_cell[m] = cells[beam]
        out_range[m] = r
        out_power[m] = power
        out_peak[m] = peak
        out_class[m] = class_id[f]
        out_material[m] = mat
        out_object[m] = instance[f]
        if keep_incidence:
            out_cos[m] = cos_theta
        m += 1
    _sort_by_range(out_range, out_power, out_peak, out_class, out_material, out_object, out_cos, start, m)
    contributions = Contributions(
        cell=out_cell[:m],
        range_m=out_range[:m],
        power=out_power[:m],
        peak=out_peak[:m],
        class_id=out_class[:m],
        material_id=out_material[:m],
        instance=out_object[:m],
        cos_incidence=out_cos[:m] if keep_incidence else out_cos,
    )
    return LitContributions(bad_range, nearest_solid, contributions)


@_jit
def _sort_by_range(range_m, power, peak, class_id, material_id, instance, cos, start, end):
    """Stable insertion sort of the records ``[start, end)`` by range (a beam's few contributions);
    ``cos`` moves with them unless it is empty."""
    move_cos = cos.shape[0] > 0
    for i in range(start + 1, end):
        r = range_m[i]
        if r >= range_m[i - 1]:
            continue
        p, g, c, mt, o = power[i], peak[i], class_id[i], material_id[i], instance[i]
        k = cos[i] if move_cos else 0.0
        j = i - 1
        while j >= start and range_m[j] > r:
            range_m[j + 1] = range_m[j]
            power[j + 1] = power[j]
            peak[j + 1] = peak[j]
            class_id[j + 1] = class_id[j]
            material_id[j + 1] = material_id[j]
            instance[j + 1] = instance[j]
            if move_cos:
                cos[j + 1] = cos[j]
            j -= 1
        range_m[j + 1] = r
        power[j + 1] = p
        peak[j + 1] = g
        class_id[j + 1] = c
        material_id[j + 1] = mt
        instance[j + 1] = o
        if move_cos:
            cos[j + 1] = k


def joined(kind: type[_Record], parts: list[Any], order: np.ndarray | None = None) -> _Record:
    """The records of ``parts`` one after the other (consecutive parts of a block: the block's
    beam order), taken in ``order`` (None: as they are). A field empty in every part (not
    kept: ``Contributions.cos_incidence``) is empty in the result."""
    fields: dict[str, np.ndarray] = {}
    for name in _field_names(kind):
        a = np.concatenate([getattr(p, name) for p in parts])
        fields[name] = a if order is None or a.size == 0 else a[order]
    return kind(**fields)


def joined_by_cell(kind: type[_Record], parts: list[_Record]) -> _Record:
    """Groups of different beams' records (a NamedTuple or dataclass of equal-length arrays with a
    ``cell`` field) as one, beams in cell order; each beam's records keep their order."""
    if len(parts) == 1:
        return parts[0]
    cell = np.concatenate([p.cell for p in parts])
    in_order = cell.size < 2 or bool(np.all(cell[1:] >= cell[:-1]))
    return joined(kind, parts, None if in_order else np.argsort(cell, kind="stable"))


def _field_names(kind: type[Any]) -> tuple[str, ...]:
    """The fields of a record type: a NamedTuple's (``Contributions``) or a dataclass's (``echoes.Echoes``)."""
    return kind._fields if hasattr(kind, "_fields") else tuple(kind.__dataclass_fields__)


@_jit
def _merge_order(cell_a, range_a, cell_b, range_b):
    """Indices into ``a`` then ``b`` concatenated that merge two (cell, range)-sorted lists, ``a``
    first on a tie."""
    na, nb = cell_a.shape[0], cell_b.shape[0]
    order = np.empty(na + nb, np.int64)
    i = j = 0
    for at in range(na + nb):
        if j < nb and (i == na or cell_b[j] < cell_a[i] or (cell_b[j] == cell_a[i] and range_b[j] < range_a[i])):
            order[at] = na + j
            j += 1
        else:
            order[at] = i
            i += 1
    return order
