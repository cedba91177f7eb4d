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

With rain or fog clutter the slabs are contributions too, and they need the rain stream in the
whole scan's ring-major order: then ``detection.finish_returns`` forms the echoes.

Foliage option: with ``foliage_solid`` the tracer stops at foliage and a foliage hit is a solid
surface: ``tau = 0``, the sub-ray ends there, the echo stretch uses ``beta`` and the hit ends
the clutter slabs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

import numba
import numpy as np

from acres_lidar_ros.config.materials import CLASS_ID, IS_FOLIAGE_CLASS
from acres_lidar_ros.radiometry.model import BeamModel
from acres_lidar_ros.radiometry.noise import place_normal, roughness_normal
from acres_lidar_ros.radiometry.physics import (
    MAX_TILT_RAD,
    footprint_range_spread_m,
    minnaert_backscatter,
    pulse_peak_factor,
    rough_range_sigma_m,
)
from acres_lidar_ros.radiometry.returns import segment_first_argmax
from acres_lidar_ros.tracing.hits import Hits

_ByCell = TypeVar("_ByCell", bound=Any)

MICRO_SLOPE_CELL_M = 0.25
ALBEDO_CELL_M = 0.1
MIN_ROUGH_RANGE_M = 0.01
GROUND_CLASS = CLASS_ID["ground"]


@dataclass(frozen=True)
class Contributions:
    """The lit contributions of some beams, in beam (cell) order and range order within a beam.

    Attributes
    ----------
    cell : (m,) int64
        Cell ``c N_r + r`` of each contribution's beam.
    range_m, power, peak : (m,) float64
        ``R`` (after the roughness move), ``P`` (> 0) and ``g``.
    class_id, material_id : (m,) uint8
    instance : (m,) uint32
        Instance label (``scene.instances``).
    cos_incidence : (m,) float64 or None
        ``|cos theta|`` the backscatter used (``theta'`` on ground; NaN for clutter slabs); only
        with ``BeamModel.truth``, None otherwise.
    """

    cell: np.ndarray
    range_m: np.ndarray
    power: np.ndarray
    peak: np.ndarray
    class_id: np.ndarray
    material_id: np.ndarray
    instance: np.ndarray
    cos_incidence: np.ndarray | None = None

    @staticmethod
    def of_beams(parts: list[Contributions]) -> Contributions:
        """The contributions of groups of different beams, beams in cell order (each beam's
        contributions keep their order)."""
        return _joined_by_cell(Contributions, parts)

    def merged(self, other: Contributions) -> Contributions:
        """These and ``other``'s contributions (both by beam and range) by beam and range; on a
        tie of both, these come first."""
        order = _merge_order(self.cell, self.range_m, other.cell, other.range_m)
        return _joined(Contributions, [self, other], order)


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
    cos_incidence : (e,) float64 or None
        The largest contribution's (``Contributions.cos_incidence``); None without it.
    """

    cell: np.ndarray
    range_m: np.ndarray
    reflectance: np.ndarray
    peak: np.ndarray
    class_id: np.ndarray
    material_id: np.ndarray
    instance: np.ndarray
    cos_incidence: np.ndarray | None = None

    @staticmethod
    def concatenate(parts: list[Echoes]) -> Echoes:
        """Echoes of several groups of beams, beams in cell order (a beam's echoes stay in order)."""
        return _joined_by_cell(Echoes, parts)


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
    """

    cells: np.ndarray
    nearest_solid_m: np.ndarray
    contributions: Contributions
    echoes: Echoes | None


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
    """Contributions and (without clutter) echoes of a block of beams: see the module notes.

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
    contributions, nearest_solid = contributions_of_hits(
        hits, origins, directions, weights, model, seed, scan_index, cells
    )
    echoes = None if model.has_clutter else form_echoes(contributions, model.config.min_return_separation_m)
    return BeamBlock(cells, nearest_solid, contributions, echoes)


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
    k_slots = hits.shape[1]

    # --- 1. Which hits light reaches, and the foliage transmission in front of each. ---
    # Valid slots are a prefix of each row (the Hits contract), so in the flat list of valid
    # hits the hit in front of slot k > 0 is the previous entry.
    flat = np.flatnonzero(hits.valid.ravel())
    slot = flat % k_slots
    cls = hits.class_id.ravel()[flat]
    mat = hits.material_id.ravel()[flat].astype(np.intp)
    passes = np.zeros(flat.size, bool) if model.foliage_solid else IS_FOLIAGE_CLASS[cls]
    tau_hit = np.where(passes, mats.transmission[mat], 0.0)
    t_hit = np.ones(flat.size)
    for k in range(1, k_slots):  # over the hit slots of a sub-ray (a handful), not beams
        at = np.flatnonzero(slot == k)
        if at.size == 0:
            break
        t_hit[at] = t_hit[at - 1] * tau_hit[at - 1]
    reached = np.flatnonzero(t_hit > 0.0)
    if reached.size != flat.size:
        flat, cls, mat = flat[reached], cls[reached], mat[reached]
        passes, tau_hit, t_hit = passes[reached], tau_hit[reached], t_hit[reached]
    row = flat // k_slots
    beam = row // n_sub  # the block's beam
    sub_ray = row - beam * n_sub
    range_m = hits.range_m.ravel()[flat]
    if range_m.size and not (np.all(range_m >= 0.0) and np.all(np.isfinite(range_m))):
        raise ValueError("hits: every valid hit needs a finite range_m >= 0")
    cos_theta = np.clip(np.abs(hits.cos_incidence.ravel()[flat]), 0.0, 1.0)
    albedo = np.ones(flat.size)

    # --- 2. Ground relief and texture. ---
    ground = np.flatnonzero(cls == GROUND_CLASS)
    is_ground = np.zeros(flat.size, bool)
    is_ground[ground] = True
    if ground.size:
        g_mat = mat[ground]
        g_row = row[ground]
        g_range = range_m[ground]
        point_x = origins[g_row, 0] + g_range * directions[g_row, 0]
        point_y = origins[g_row, 1] + g_range * directions[g_row, 1]
        sigma_t = mats.micro_slope_rad[g_mat]
        tilt = np.flatnonzero(sigma_t > 0.0)
        theta = np.arccos(cos_theta[ground])
        if tilt.size:
            z_slope = place_normal(point_x[tilt], point_y[tilt], MICRO_SLOPE_CELL_M, seed)
            theta[tilt] += sigma_t[tilt] * z_slope
        g_cos = np.cos(np.clip(theta, 0.0, MAX_TILT_RAD))
        cos_theta[ground] = g_cos
        s_rho = mats.reflectivity_sd[g_mat]
        tex = np.flatnonzero(s_rho > 0.0)
        if tex.size:
            z_albedo = place_normal(point_x[tex], point_y[tex], ALBEDO_CELL_M, seed + 1)
            albedo[ground[tex]] = np.exp(s_rho[tex] * z_albedo - 0.5 * s_rho[tex] ** 2)
        sigma_h = mats.roughness_m[g_mat]
        rough = np.flatnonzero(sigma_h > 0.0)
        if rough.size:
            hit = ground[rough]
            z_rough = roughness_normal(seed, scan_index, cells[beam[hit]], sub_ray[hit])
            moved = g_range[rough] + rough_range_sigma_m(sigma_h[rough], g_cos[rough]) * z_rough
            range_m[hit] = np.maximum(MIN_ROUGH_RANGE_M, moved)

    # --- Contribution and echo stretch of each hit. ---
    rho_bs = minnaert_backscatter(
        cos_theta,
        mats.reflectivity[mat],
        mats.incidence_exponent[mat],
        mats.specular[mat],
        mats.specular_width_rad[mat],
        mats.wet_darkening[mat],
        hits.wetness.ravel()[flat],
    )
    power = weights[sub_ray] * t_hit * t_hit * (1.0 - tau_hit) * rho_bs * albedo
    if config.pulse_length_m > 0.0:
        divergence = np.where(is_ground, config.beam_divergence_v_rad, config.beam_divergence_rad)
        stretch = pulse_peak_factor(config.pulse_length_m, footprint_range_spread_m(range_m, cos_theta, divergence))
        peak = np.where(passes, 1.0, stretch)
    else:
        peak = np.ones(flat.size)

    nearest_solid = (
        _nearest_solid(beam, range_m, passes, cells.size) if model.has_clutter else np.full(cells.size, np.inf)
    )

    lit = np.flatnonzero(power > 0.0)
    beam, range_m, power, peak = beam[lit], range_m[lit], power[lit], peak[lit]
    cls, mat_out, obj = cls[lit], mat[lit].astype(np.uint8), hits.instance.ravel()[flat[lit]]
    cos_out = cos_theta[lit] if model.truth else None  # the truth output's incidence, only when asked
    # By beam, then range (stable: ties keep the sub-ray and slot order).
    if not _sorted_by_beam_and_range(beam, range_m):
        order = _order_within_beams(beam, range_m)
        beam, range_m, power, peak = beam[order], range_m[order], power[order], peak[order]
        cls, mat_out, obj = cls[order], mat_out[order], obj[order]
        cos_out = None if cos_out is None else cos_out[order]
    return (
        Contributions(cells[beam], range_m, power, peak, cls.astype(np.uint8), mat_out, obj.astype(np.uint32), cos_out),
        nearest_solid,
    )


def form_echoes(contributions: Contributions, separation_m: float) -> Echoes:
    """Step 4 of the module notes: the echoes of contributions in beam and range order."""
    c = contributions
    if c.cell.size == 0:
        empty = np.zeros(0)
        return Echoes(
            np.zeros(0, np.int64),
            empty,
            empty,
            empty,
            np.zeros(0, np.uint8),
            np.zeros(0, np.uint8),
            np.zeros(0, np.uint32),
            None if c.cos_incidence is None else empty,
        )
    start = np.flatnonzero(_echo_opens(c.cell, c.range_m, float(separation_m)))
    rho_e = np.add.reduceat(c.power, start)
    range_e = np.add.reduceat(c.power * c.range_m, start) / rho_e
    peak_e = np.add.reduceat(c.power * c.peak, start) / rho_e
    largest = segment_first_argmax(c.power, start)
    return Echoes(
        c.cell[start],
        range_e,
        rho_e,
        peak_e,
        c.class_id[largest],
        c.material_id[largest],
        c.instance[largest],
        None if c.cos_incidence is None else c.cos_incidence[largest],
    )


def _sorted_by_beam_and_range(beam: np.ndarray, range_m: np.ndarray) -> bool:
    if beam.size < 2:
        return True
    step = np.diff(beam)
    return bool(np.all((step > 0) | ((step == 0) & (range_m[1:] >= range_m[:-1]))))


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


@numba.njit(cache=True, nogil=True)
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


@numba.njit(cache=True, nogil=True)
def _nearest_solid(beam, range_m, passes, n_beams):
    """Per beam, the smallest range of its hits that do not pass light (inf where none)."""
    out = np.full(n_beams, np.inf)
    for i in range(beam.shape[0]):
        if not passes[i] and range_m[i] < out[beam[i]]:
            out[beam[i]] = range_m[i]
    return out


@numba.njit(cache=True, nogil=True)
def _order_within_beams(beam, range_m):
    """The stable order by range within each beam of a list already in beam order (a beam's
    contributions are a few dozen at most: an insertion sort per beam)."""
    n = beam.shape[0]
    order = np.arange(n)
    start = 0
    while start < n:
        end = start + 1
        while end < n and beam[end] == beam[start]:
            end += 1
        for i in range(start + 1, end):
            item = order[i]
            r = range_m[item]
            j = i - 1
            while j >= start and range_m[order[j]] > r:
                order[j + 1] = order[j]
                j -= 1
            order[j + 1] = item
        start = end
    return order


def _joined_by_cell(kind: type[_ByCell], parts: list[_ByCell]) -> _ByCell:
    """Groups of different beams' records (a dataclass of equal-length arrays with a ``cell``
    field) as one, beams in cell order; each beam's records keep their order."""
    if len(parts) == 1:
        return parts[0]
    cell = np.concatenate([p.cell for p in parts])
    in_order = cell.size < 2 or bool(np.all(cell[1:] >= cell[:-1]))
    return _joined(kind, parts, None if in_order else np.argsort(cell, kind="stable"))


def _joined(kind: type[_ByCell], parts: list[_ByCell], order: np.ndarray | None) -> _ByCell:
    """The records of ``parts`` one after the other, taken in ``order`` (None: as they are). An
    optional field (None in some part) is None in the result."""
    joined: dict[str, np.ndarray | None] = {}
    for name in kind.__dataclass_fields__:
        arrays = [getattr(p, name) for p in parts]
        if any(a is None for a in arrays):
            joined[name] = None
            continue
        a = np.concatenate(arrays)
        joined[name] = a if order is None else a[order]
    return kind(**joined)
