"""From the surface hits of a block of beams to their echoes (AcresLidar::ProcessBeam, the part
that draws nothing).

Everything here depends on each beam's own hits only, so the ``Sweep`` runs it on every column
block as it is traced, before the scan's stamp. The spec's equations come from ``physics`` and
``noise`` (vectorised numpy over the block); what is left here is the bookkeeping between them:

1. **Contributions** (``contributions``). Hits of a sub-ray are taken in range order; ``T`` is
   the product of the transmissions of the foliage hits in front (``T = 1`` at the start). A
   hit contributes ``P = w_j T^2 (1 - tau) rho_bs a``; foliage passes light (``tau`` of its
   material), a solid hit has ``tau = 0`` and ends the sub-ray. Hits behind the end get no light.
2. **Ground relief and texture** (class ground only, each term off when its parameter is 0):
   micro-slope ``theta'`` from the 0.25 m cell normal (key ``seed``), albedo ``a`` from the 0.1 m
   cell normal (key ``seed + 1``), roughness from the normal of the (scan, beam, sub-ray) hash
   (key ``seed + 2``). Hashes, so the noise stream is untouched. ``theta'`` replaces ``theta``
   for the backscatter, the roughness and the echo stretch.
3. **Echo stretch** ``g = L / sqrt(L^2 + (R tan theta beta_p)^2)`` with ``beta_p = beta_v`` for
   ground and ``beta`` for other solids; ``g = 1`` for foliage that passes light.
4. **Echoes** (``form_echoes``). All contributions of a beam with ``P > 0`` in range order; an
   echo starts at the nearest contribution not yet in an echo and takes every contribution
   within ``min_return_separation_m`` of it (``R_i - R_first <= separation``). ``rho_e = sum P``,
   ``R_e`` and ``g_e`` are ``P``-weighted means; class, material and instance are those of the
   largest contribution (the nearest one on a tie).
5. **Signals** (``echo_signals``): each echo's ``S``, ``S`` in clear air, ``sigma_R`` and its range
   and azimuth window bits, which need no noise number.

With rain or fog clutter the slabs are contributions too, and they need the rain stream in the
whole scan's ring-major order: then ``detection.finish_returns`` forms the echoes and their signals.

Foliage option: with ``foliage_solid`` the tracer stops at foliage and a foliage hit is a solid
surface: ``tau = 0``, the sub-ray ends there, the echo stretch uses ``beta`` and the hit ends
the clutter slabs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from acres_lidar_ros.config.material_table import CLASS_ID, IS_FOLIAGE_CLASS
from acres_lidar_ros.cores import map_parts, split_bounds
from acres_lidar_ros.radiometry.echo_signals import EchoSignals, echo_signals, model_windows
from acres_lidar_ros.radiometry.hit_passes import (
    Contributions,
    GroundKeying,
    GroundTerms,
    HitFields,
    PulseShape,
    SurfaceLaws,
    ground_keys,
    joined,
    joined_by_cell,
    lit_contributions,
    reached_hits,
)
from acres_lidar_ros.radiometry.noise import hash_normal, place_seed_term, roughness_seed_term
from acres_lidar_ros.radiometry.radiometric_model import BeamModel
from acres_lidar_ros.tracing.hits import Hits

MICRO_SLOPE_CELL_M = 0.25
ALBEDO_CELL_M = 0.1
MIN_ROUGH_RANGE_M = 0.01
GROUND_CLASS = CLASS_ID["ground"]


@dataclass(frozen=True)
class Echoes:
    """The echoes of some beams, beams in cell order and echoes in range order within a beam.

    Attributes
    ----------
    cell : (e,) int64
    range_m, reflectance, peak : (e,) float64
        ``R_e``, ``rho_e`` and ``g_e``.
    class_id, material_id : (e,) uint8
    instance : (e,) uint32
        Instance label of the echo's largest contribution.
    cos_incidence : (e,) float64, or (0,) when not kept
        The largest contribution's (``Contributions.cos_incidence``); empty without it.
    """

    cell: np.ndarray
    range_m: np.ndarray
    reflectance: np.ndarray
    peak: np.ndarray
    class_id: np.ndarray
    material_id: np.ndarray
    instance: np.ndarray
    cos_incidence: np.ndarray

    @staticmethod
    def concatenate(parts: list[Echoes]) -> Echoes:
        """Echoes of several groups of beams, beams in cell order (a beam's echoes stay in order)."""
        return joined_by_cell(Echoes, parts)


@dataclass(frozen=True)
class BeamBlock:
    """What a block of beams gives before the stamp (``prepare_block``).

    Attributes
    ----------
    cells : (n,) int64
        The block's cells.
    nearest_solid_m : (n,) float64
        Range of each beam's nearest solid hit that light reaches, m (inf where none): where
        its clutter slabs stop.
    contributions : Contributions
    echoes : Echoes or None
        The block's echoes; None when the scan has clutter (then the slabs join first).
    signals : EchoSignals or None
        What the range equation gives each of ``echoes`` (``echo_signals``); None with them.
    """

    cells: np.ndarray
    nearest_solid_m: np.ndarray
    contributions: Contributions
    echoes: Echoes | None
    signals: EchoSignals | None = None


def prepare_block(
    hits: Hits,
    ray_origins_world: np.ndarray,
    ray_directions_world: np.ndarray,
    weights: np.ndarray,
    model: BeamModel,
    seed: int,
    scan_index: int,
    cells: np.ndarray,
) -> BeamBlock:
    """Contributions and (without clutter) echoes and their signals of a block of beams: see the
    module notes.

    Parameters
    ----------
    hits : Hits of shape (n * S, K)
        Sub-ray ``j`` of the block's beam ``i`` is row ``i * S + j``.
    ray_origins_world, ray_directions_world : (n * S, 3) float64
        Lens centre and unit direction of each sub-ray in the world, m (for the ground cells).
    weights : (S,) float64
        ``w_j``.
    model : BeamModel
    seed : int
        The run's seed: key of the ground hashes.
    scan_index : int
        Scan number in the run (the roughness hash).
    cells : (n,) int64
        Cell of each beam of the block.

    Raises
    ------
    ValueError
        For rows that do not match ``cells`` and ``weights``, or a valid hit whose range is not
        finite and >= 0.
    IndexError
        For a class or material number outside the tables.
    """
    cells = np.asarray(cells, dtype=np.int64)
    weights = np.asarray(weights, dtype=np.float64)
    n_rows = hits.shape[0]
    if weights.size < 1 or n_rows != cells.size * weights.size:
        raise ValueError(f"hits have {n_rows} rows; expected beams * sub_rays = {cells.size} * {weights.size}")
    origins = np.asarray(ray_origins_world, dtype=np.float64)
    directions = np.asarray(ray_directions_world, dtype=np.float64)
    if origins.shape != (n_rows, 3) or directions.shape != (n_rows, 3):
        raise ValueError(f"ray origins {origins.shape} and directions {directions.shape} must both be ({n_rows}, 3)")

    def part(lo: int, hi: int) -> BeamBlock:  # beams lo .. hi - 1 of the block
        rows = slice(lo * weights.size, hi * weights.size)
        contributions, nearest_solid = contributions_of_hits(
            _hits_rows(hits, rows), origins[rows], directions[rows], weights, model, seed, scan_index, cells[lo:hi]
        )
        if model.has_clutter:
            return BeamBlock(cells[lo:hi], nearest_solid, contributions, None)
        echoes = form_echoes(contributions, model.config.min_return_separation_m)
        e = echoes
        signals = echo_signals(e.cell, e.range_m, e.reflectance, e.peak, model, windows, split=False)
        return BeamBlock(cells[lo:hi], nearest_solid, contributions, echoes, signals)

    windows = None if model.has_clutter else model_windows(model)
    # A beam's result depends on its own hits only: a large block is split between the cores.
    blocks = map_parts(part, split_bounds(cells.size, MIN_BEAMS_PER_PART))
    if len(blocks) == 1:
        return blocks[0]
    return BeamBlock(
        cells,
        np.concatenate([b.nearest_solid_m for b in blocks]),
        joined(Contributions, [b.contributions for b in blocks]),
        None if model.has_clutter else joined(Echoes, [b.echoes for b in blocks]),
        None if model.has_clutter else EchoSignals.concatenate([b.signals for b in blocks if b.signals is not None]),
    )


MIN_BEAMS_PER_PART = 4096


def _hits_rows(hits: Hits, rows: slice) -> Hits:
    """The hits of some rows (views)."""
    return Hits(**{name: getattr(hits, name)[rows] for name in Hits.__dataclass_fields__})


def contributions_of_hits(
    hits: Hits,
    origins: np.ndarray,
    directions: np.ndarray,
    weights: np.ndarray,
    model: BeamModel,
    seed: int,
    scan_index: int,
    cells: np.ndarray,
) -> tuple[Contributions, np.ndarray]:
    """Steps 1 to 3 of the module notes: the lit contributions of the block's beams and each
    beam's nearest solid range (inputs as ``prepare_block``)."""
    config = model.config
    mats = config.materials
    n_sub = weights.size
    fields = HitFields(
        hits.range_m.ravel(),
        hits.cos_incidence.ravel(),
        hits.class_id.ravel(),
        hits.material_id.ravel(),
        hits.instance.ravel(),
        hits.wetness.ravel(),
    )
    laws = SurfaceLaws(*(getattr(mats, name) for name in SurfaceLaws._fields))
    # 1. Which hits light reaches, and the foliage transmission in front of each.
    reached = reached_hits(
        hits.valid, hits.class_id, hits.material_id, IS_FOLIAGE_CLASS, mats.transmission, model.foliage_solid
    )
    # 2. The keys of the ground terms, and their normals in one vectorised call.
    keying = GroundKeying(
        GROUND_CLASS,
        place_seed_term(seed),
        place_seed_term(seed + 1),
        roughness_seed_term(seed),
        scan_index,
        MICRO_SLOPE_CELL_M,
        ALBEDO_CELL_M,
    )
    ground_at, slope_at, albedo_at, rough_at, cos_ground, keys = ground_keys(
        reached, fields, laws, keying, origins, directions, cells, n_sub
    )
    z = np.asarray(hash_normal(keys), dtype=np.float64)
    ground = GroundTerms(ground_at, slope_at, albedo_at, rough_at, np.arccos(cos_ground), z)
    # 3. Tilt, texture, roughness, backscatter, contribution and echo stretch of each hit.
    shape = PulseShape(
        MIN_ROUGH_RANGE_M,
        float(config.pulse_length_m),
        float(config.beam_divergence_rad),
        float(config.beam_divergence_v_rad),
    )
    lit = lit_contributions(reached, ground, fields, laws, shape, n_sub, weights, cells, keep_incidence=model.truth)
    if lit.bad_range:
        raise ValueError("hits: every valid hit needs a finite range_m >= 0")
    return lit.contributions, lit.nearest_solid


def form_echoes(contributions: Contributions, separation_m: float) -> Echoes:
    """Step 4 of the module notes: the echoes of contributions in beam and range order."""
    c = contributions
    start = np.flatnonzero(_echo_opens(c.cell, c.range_m, float(separation_m)))
    cell, range_m, rho, peak, class_id, material_id, instance, largest = _echoes_of(
        start, c.cell, c.range_m, c.power, c.peak, c.class_id, c.material_id, c.instance
    )
    cos_incidence = c.cos_incidence[largest] if c.cos_incidence.size else c.cos_incidence  # empty: not kept
    return Echoes(cell, range_m, rho, peak, class_id, material_id, instance, cos_incidence)


@numba.njit(cache=True, nogil=True)
def _echoes_of(start, cell, range_m, power, peak, class_id, material_id, instance):
    """The echo of each run ``[start[e], start[e + 1])`` of contributions: ``rho_e = sum P``,
    ``R_e`` and ``g_e`` the ``P``-weighted means (sums in order), and the fields of the first
    largest ``P`` (and its index)."""
    n_echo = start.shape[0]
    out_range = np.empty(n_echo)
    out_rho = np.empty(n_echo)
    out_peak = np.empty(n_echo)
    largest = np.empty(n_echo, np.int64)
    for e in range(n_echo):
        lo = start[e]
        hi = start[e + 1] if e + 1 < n_echo else cell.shape[0]
        sum_p = sum_pr = sum_pg = 0.0
        best = lo
        for i in range(lo, hi):
            sum_p += power[i]
            sum_pr += power[i] * range_m[i]
            sum_pg += power[i] * peak[i]
            if power[i] > power[best]:
                best = i
        out_rho[e] = sum_p
        out_range[e] = sum_pr / sum_p
        out_peak[e] = sum_pg / sum_p
        largest[e] = best
    return (
        cell[start],
        out_range,
        out_rho,
        out_peak,
        class_id[largest],
        material_id[largest],
        instance[largest],
        largest,
    )


@numba.njit(cache=True, nogil=True)
def _echo_opens(cell, range_m, separation_m):
    """Whether each contribution (beam and range order) opens an echo: it is the beam's first,
    or more than ``separation_m`` behind the first contribution of the echo before it."""
    n = cell.shape[0]
    opens = np.empty(n, np.bool_)
    first_m = 0.0
    for i in range(n):
        if i == 0 or cell[i] != cell[i - 1] or range_m[i] > first_m + separation_m:
            opens[i] = True
            first_m = range_m[i]
        else:
            opens[i] = False
    return opens
