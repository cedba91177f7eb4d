"""Clutter slabs of rain and fog for a whole scan, in two compiled passes over the slabs.

A scan has up to ``N_c N_r clutter_max_range_m / min_return_separation_m`` slabs (750,000 for
the Polaris), and most fail the skip rule; so the slabs are never listed. The passes walk the
beams in ring-major sequence and each beam's slabs in range order, which is the rain stream's
drawing order (``weather``):

1. ``_draw_drop_counts``: one rain-stream number per slab, its drop count ``N`` by Poisson
   inversion (``weather.invert_cdf`` against the CDF of the slab's mean ``Lambda``).
2. The drops' energies ``E_i = -ln U`` (numpy's vectorised logarithm), all drops of the first
   slab first.
3. ``_kept_slabs``: ``sum E_i^2 / 2`` of each slab, ``rho_slab`` (``weather.slab_reflectance_of``),
   the signal and the skip rule (``weather.slab_skipped``); only the slabs it keeps come out.

A slab's centre range, mean drop count and signal per unit reflectance depend only on its number
``k`` (and ring), so they are evaluated once per ``k`` with the vectorised equations
(``weather.mean_drops_in_slab``, ``physics.signal_counts``, linear in the reflectance).
"""

from __future__ import annotations

from itertools import pairwise
from typing import NamedTuple

import numba
import numpy as np

from acres_lidar_ros.cores import map_parts, split_bounds
from acres_lidar_ros.radiometry.equations import signal_counts
from acres_lidar_ros.radiometry.noise import Pcg32, pcg32_step, uniform_of_u32
from acres_lidar_ros.radiometry.radiometric_model import BeamModel, ring_major_cells, ring_major_order
from acres_lidar_ros.radiometry.weather import (
    exponential_from_uniform,
    invert_cdf,
    mean_drops_in_slab,
    poisson_cdfs,
    slab_center_m,
    slab_reflectance_of,
    slab_skipped,
    slabs_per_beam,
)


def kept_slabs(
    model: BeamModel, rain: Pcg32, nearest_solid_m: np.ndarray, cells: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The clutter slabs of a scan (or of the beams ``cells``) that survive the skip rule (the
    rain stream advances).

    Parameters
    ----------
    model : BeamModel
        With clutter (``model.has_clutter``).
    rain : Pcg32
        The run's rain stream.
    nearest_solid_m : (N_c N_r,) float64
        Each cell's nearest solid range, m (inf where none): where its slabs stop.
    cells : (n,) int64, optional
        Only these beams (one slice of a partial-output scan), walked in the ring-major sequence
        restricted to them (``ring_major_order``); None: every beam.

    Returns
    -------
    cell : (j,) int64
        Beam of each kept slab, beams in ring-major sequence, slabs in range order.
    center_m : (j,) float64
        ``R_c``, m.
    rho_slab : (j,) float64
    """
    config, atm = model.config, model.atmosphere
    rad = config.radiometry
    separation = config.min_return_separation_m
    cells_rm = (
        ring_major_cells(config.columns, config.rings) if cells is None else ring_major_order(cells, config.rings)
    )
    stop = np.minimum(nearest_solid_m[cells_rm], min(config.weather.clutter_max_range_m, config.range_m))
    start_m = max(config.min_range_m, config.windows.range_offset_m)  # nothing inside the range offset
    per_beam = slabs_per_beam(stop, start_m, separation)
    most = int(per_beam.max(initial=0))
    if most == 0:
        return np.zeros(0, np.int64), np.zeros(0), np.zeros(0)
    centers_m = slab_center_m(np.arange(most), start_m, separation)
    unit_signal = signal_counts(
        1.0,
        centers_m[None, :],
        1.0,
        rad.signal_at_10pct_counts,
        rad.ring_range_at_10pct_m[:, None],
        rad.overlap_range_m,
        atm.alpha_per_m,
    )  # (rings, k): the range equation per unit reflectance
    if atm.drop_density_per_m3 > 0.0:
        mean_k = mean_drops_in_slab(
            atm.drop_density_per_m3, config.weather.exit_diameter_m, centers_m, config.beam_divergence_rad, separation
        )
    # The passes run over parts of the beams side by side (``cores``): a part's first slab and
    # first drop are known, and the stream jumps there (O(log n)), so the numbers are the same.
    bounds = split_bounds(per_beam.size, MIN_BEAMS_PER_PART)
    first_slab = np.concatenate([[0], np.cumsum(per_beam, dtype=np.int64)])[bounds]  # of each part, and the end
    counts = np.zeros(int(first_slab[-1]), np.uint8)
    if atm.drop_density_per_m3 > 0.0:
        mean_k = mean_drops_in_slab(
            atm.drop_density_per_m3, config.weather.exit_diameter_m, centers_m, config.beam_divergence_rad, separation
        )
        cdf = poisson_cdfs(mean_k)

        def draw_counts(lo: int, hi: int) -> None:
            part = rain.copy()
            part.advance(int(first_slab[lo]))
            _draw_drop_counts(
                per_beam,
                bounds[lo],
                bounds[hi],
                first_slab[lo],
                np.uint64(part.state),
                np.uint64(part.inc),
                cdf,
                mean_k,
                counts,
            )

        map_parts(draw_counts, np.arange(bounds.size))
        rain.advance(counts.size)
        first_drop = np.concatenate(
            [[0], np.cumsum([counts[a:b].sum(dtype=np.int64) for a, b in pairwise(first_slab)])]
        )
        energy = np.empty(int(first_drop[-1]))

        def draw_energies(lo: int, hi: int) -> None:
            part = rain.copy()
            part.advance(lo)
            energy[lo:hi] = exponential_from_uniform(part.next_uniform_array(hi - lo))

        map_parts(draw_energies, split_bounds(energy.size, MIN_DROPS_PER_PART))
        rain.advance(energy.size)
    else:  # fog alone: nothing is drawn
        mean_k = np.zeros(most)
        first_drop = np.zeros(bounds.size, np.int64)
        energy = np.zeros(0)
    power_rm = np.ones(cells_rm.size) if model.power_ratio is None else model.power_ratio[cells_rm]

    walk = _SlabWalk(per_beam=per_beam, power_ratio=power_rm, ring=cells_rm % config.rings)
    drops = _SlabDrops(counts=counts, energy=energy)
    terms = _SlabTerms(
        mean_k=mean_k,
        unit_signal_counts=unit_signal,
        fog_term=np.pi * atm.beta_fog_per_m_sr * separation,
        rain_factor=np.pi * atm.beta_rain_per_m_sr * separation,
        ambient_counts=float(rad.ambient_counts),
        threshold_counts=float(model.detection_threshold_counts),
    )

    def keep(lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        part = _SlabPart(
            first_beam=int(bounds[lo]),
            end_beam=int(bounds[hi]),
            first_slab=int(first_slab[lo]),
            first_drop=int(first_drop[lo]),
        )
        return _kept_slabs(walk, part, drops, terms)

    parts = map_parts(keep, np.arange(bounds.size))
    position, k, rho = (np.concatenate([p[i] for p in parts]) for i in range(3))
    return cells_rm[position], centers_m[k], rho


MIN_BEAMS_PER_PART = 4096
MIN_DROPS_PER_PART = 65536


@numba.njit(cache=True, nogil=True)
def _draw_drop_counts(per_beam, first_beam, end_beam, first_slab, state, inc, cdf, mean_k, counts):
    """Pass 1 over the beams ``first_beam .. end_beam - 1``: the drop count of each of their
    slabs (from ``counts[first_slab]`` on) from the rain stream at ``state`` (the state of their
    first slab)."""
    state = np.uint64(state)
    inc = np.uint64(inc)
    at = first_slab
    for b in range(first_beam, end_beam):
        for k in range(per_beam[b]):
            output, state = pcg32_step(state, inc)
            counts[at] = invert_cdf(uniform_of_u32(output), cdf[k], mean_k[k])
            at += 1


class _SlabWalk(NamedTuple):
    """The beams the passes walk, in the walk's (ring-major) order: (b,) arrays."""

    per_beam: np.ndarray  # int64: the beam's slabs
    power_ratio: np.ndarray  # its emitter's peak power ratio (``BeamModel.power_ratio``)
    ring: np.ndarray  # int64: its ring


class _SlabPart(NamedTuple):
    """One part of the walk: the beams ``first_beam .. end_beam - 1``, their first slab and first drop."""

    first_beam: int
    end_beam: int
    first_slab: int
    first_drop: int


class _SlabDrops(NamedTuple):
    """The drawn drops: each slab's drop count (uint8) and each drop's energy ``E_i`` (passes 1 and 2)."""

    counts: np.ndarray
    energy: np.ndarray


class _SlabTerms(NamedTuple):
    """By slab number ``k`` its mean drop count and signal per unit reflectance; the slab law's and skip rule's scalars."""

    mean_k: np.ndarray  # (k,) Lambda
    unit_signal_counts: np.ndarray  # (rings, k) S per unit reflectance
    fog_term: float  # pi beta_fog separation
    rain_factor: float  # pi beta_rain separation
    ambient_counts: float  # B
    threshold_counts: float  # S_T


@numba.njit(cache=True, nogil=True)
def _kept_slabs(walk, part, drops, terms):
    """Pass 3 over the beams of ``part`` (a ``_SlabPart``: their slabs from ``first_slab``, their
    drops from ``first_drop``) of ``walk`` (a ``_SlabWalk``), with the ``drops`` drawn (a
    ``_SlabDrops``) and the slab ``terms`` (a ``_SlabTerms``): (ring-major position, slab number,
    rho_slab) of the slabs the skip rule keeps."""
    per_beam, power_rm, ring_of = walk.per_beam, walk.power_ratio, walk.ring
    first_beam, end_beam, first_slab, first_drop = part.first_beam, part.end_beam, part.first_slab, part.first_drop
    counts, energy = drops.counts, drops.energy
    mean_k, unit_signal, fog_term, rain_factor = (
        terms.mean_k,
        terms.unit_signal_counts,
        terms.fog_term,
        terms.rain_factor,
    )
    ambient, threshold = terms.ambient_counts, terms.threshold_counts
    n = 0
    for b in range(first_beam, end_beam):
        n += per_beam[b]
    position = np.empty(n, np.int64)
    number = np.empty(n, np.int64)
    rho = np.empty(n)
    m = 0
    slab = first_slab
    drop = first_drop
    for b in range(first_beam, end_beam):
        ring = ring_of[b]
        for k in range(per_beam[b]):
            total = 0.0
            for _ in range(counts[slab]):
                e = energy[drop]
                total += 0.5 * e * e
                drop += 1
            r = slab_reflectance_of(fog_term, rain_factor, mean_k[k], total)
            if r > 0.0 and not slab_skipped(r * unit_signal[ring, k] * power_rm[b], ambient, threshold):
                position[m] = b
                number[m] = k
                rho[m] = r
                m += 1
            slab += 1
    return position[:m], number[:m], rho[:m]
