"""Compiled backend of ``beam_model.process_beams``: the spec's ProcessBeam in numba loops.

``process_beams_compiled`` takes the same inputs as ``beam_model.process_beams`` and gives the
same ``Returns``; ``beam_model`` stays the readable numpy reference and this module follows it
step by step (the numbered steps of its module notes). Every pass but the clutter works beam by
beam in chunks of beams (``_chunk_beams``, a function of the scan's size only), so the passes
can run on all cores (``PARALLEL_PASSES``) and any chunking gives the same bits:

1. **Reached hits** (``_reached_hits``): the foliage transmission product, and for ground hits
   the SplitMix64 hashes of the three terms, as the uniforms of their normals (a hit in the same
   cell as the previous ground hit of its ring in the chunk reuses that normal). Each chunk
   fills its own stretch of the lists; a sequential copy closes the gaps.
2. numpy's SIMD ``log`` of the normals' uniforms and ``arccos`` of the ground cosines;
   ``_normals`` forms the normals, ``_hit_power`` the tilt, albedo, roughness move,
   MinnaertBackscatter, power, echo stretch and each beam's nearest solid range.
3. **Clutter** (``_clutter``, rain and fog with clutter on; beams in ring-major sequence,
   sequential): the slabs of each beam, the rain drops from the rain stream and the skip rule.
4. **Echoes** (``_echoes``): sort by range, echo formation, into room for one echo per
   contribution; ``_echo_signals`` forms what step 6 needs that draws nothing (clear signal,
   signal after extinction, the shot-noise scale and the range sigma; numpy takes ``expm1`` of
   the overlap and the extinction ``exp``).
5. **Draws and returns**: each echo takes the pair ``n1, n2`` of the noise stream at its place
   in the stream's order (echoes in range order, beams ring-major; ``_draw_base``).
   ``NoiseDraws`` holds those pairs formed ahead from the stream's state (``_noise_uniforms``,
   numpy's ``log`` and ``cos``, ``_normal_pairs``): they depend on the position in the stream
   alone, so the ``Sweep`` forms them before the stamp (``prefetch_noise_draws``) and only the
   look-up is left after it. ``_returns`` forms detection, the returns, range noise and
   brightness.

Blocks: steps 1, 2 and (without clutter) 4 depend on each beam's own hits and draw nothing, so
``prepare_echoes`` runs them on any block of beams (the ``Sweep`` runs it on each column block
as it is traced) and ``finish_echoes`` runs the rest over the whole scan: the clutter (rain
stream, ring-major; with clutter the echoes wait for the slabs), the echoes of a block whose
sort span is below the scan's (the key ``cell * span + R`` must be the whole scan's), the
draws, detection and returns. ``process_beams_compiled`` is one block of every beam, finished:
any split gives the same bits.

Agreement with the reference: the discrete fields are equal; range and reflectivity may differ
by a few ulps, because the compiled passes take ``cos``, ``exp`` (albedo, slabs), ``acos``
(specular lobes) and ``x ** k`` from the C library where numpy uses its SIMD loops, form
``hypot(a, b)`` as ``sqrt(a^2 + b^2)`` and ``c^1.5`` as ``c sqrt(c)``. The order of the sums is
numpy's: the stable sort key ``beam * span + R`` (same power-of-two ``span``) and the order of
``np.add.reduceat`` (the first element plus the pairwise sum of the rest).

Generators: the PCG32 states are uint64 numbers carried through the loops and handed back to
the caller's ``Pcg32`` objects at the end, so the streams continue across scans exactly as the
numpy backend's do. The rain stream draws every slab's drop count first and then every drop's
energy; the energies are drawn from a second state that starts ``n_slabs`` steps ahead
(O'Neill's jump-ahead), which is the same sequence.

numba is imported when this module is imported; if that fails the error is kept and raised by
``process_beams_compiled`` (``beam_model`` imports this module only for ``backend="numba"``).
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, replace

import numpy as np

from acres_lidar_ros.config.materials import CLASS_ID, CLASS_NAMES, IS_FOLIAGE_CLASS, MATERIAL_OF_CLASS
from acres_lidar_ros.radiometry.beam_model import sort_span_m
from acres_lidar_ros.radiometry.noise import (
    MASK64,
    PCG32_MULT,
    PLACE_SEED_MUL,
    ROUGHNESS_SEED_OFFSET,
    SPLITMIX_GAMMA,
    SPLITMIX_MUL1,
    SPLITMIX_MUL2,
    NoiseStreams,
    mix64,
)
from acres_lidar_ros.radiometry.physics import (
    COS_FLOOR,
    HURST_EXPONENT,
    MAX_TILT_RAD,
    ROUGH_COS_MIN,
    SNR_FLOOR,
    intensity_byte,
)
from acres_lidar_ros.radiometry.returns import FLAG_FIRST, FLAG_LAST, FLAG_SECOND_STRONGEST, FLAG_STRONGEST, Returns
from acres_lidar_ros.radiometry.weather import _POISSON_SATURATED_MEAN, MAX_DROPS_PER_SLAB
from acres_lidar_ros.tracing.hits import NO_OBJECT, Hits

try:
    import numba
except ImportError as error:  # kept; raised when the numba backend is asked for
    numba = None
    NUMBA_IMPORT_ERROR: ImportError | None = error
else:
    NUMBA_IMPORT_ERROR = None


PARALLEL_PASSES = False
"""Whether the passes that draw nothing run on all cores (``numba.prange`` over chunks of
beams). Off: on the 2-core development machine, shared with a build, a parallel region costs
0.2 ms to wake the workqueue threads (8 ms under the OpenMP layer's default wait policy) and the
Polaris scan was no faster; the rain and 7-sub-ray scans were 25-35 % faster but noisy. The
chunks do not depend on the thread count, so either setting gives the same bits."""


def _jit(function=None, *, inline: bool = False, parallel: bool = False):
    """``numba.njit(cache=True)``, or the plain function when numba is missing (then
    ``process_beams_compiled`` raises the import error before any kernel is called).

    ``inline`` inlines the function into its callers at numba's level: helpers that take
    arrays are inlined so the hot loops make no calls that count references (atomic
    increments that cost more than the helpers' work).
    """
    if function is None:
        return lambda f: _jit(f, inline=inline, parallel=parallel)
    if numba is None:
        return function
    return numba.njit(
        cache=True, nogil=True, parallel=parallel and PARALLEL_PASSES, inline="always" if inline else "never"
    )(function)


# The numpy backend's constants, as the kernels' typed globals (numba freezes them at compile
# time). Every uint64 operand is an np.uint64: numba types uint64 op int64 as float64.
_U64 = np.uint64
_GAMMA = _U64(SPLITMIX_GAMMA)
_MUL1 = _U64(SPLITMIX_MUL1)
_MUL2 = _U64(SPLITMIX_MUL2)
_PCG_MULT = _U64(PCG32_MULT)
_SHIFT_3 = _U64(3)
_SHIFT_11 = _U64(11)
_SHIFT_18 = _U64(18)
_SHIFT_24 = _U64(24)
_SHIFT_27 = _U64(27)
_SHIFT_30 = _U64(30)
_SHIFT_31 = _U64(31)
_SHIFT_59 = _U64(59)
_MASK32 = _U64(0xFFFFFFFF)
_U64_ZERO = _U64(0)
_U64_ONE = _U64(1)
_U64_32 = _U64(32)
_INV_TWO_POW_53 = 1.0 / float(1 << 53)
_TWO_PI_OVER_TWO_POW_53 = 2.0 * np.pi / float(1 << 53)
_TWO_POW_32 = float(1 << 32)
_TWO_PI = 2.0 * np.pi
_ROUGH_EXPONENT = 1.0 + HURST_EXPONENT
_LOG_64 = math.log(64.0)
_POISSON_CAP = MAX_DROPS_PER_SLAB
_POISSON_SATURATED = _POISSON_SATURATED_MEAN
_SLAB_ROUNDING = 1e-9  # weather.clutter_slabs' tolerance on the last slab
_PAIRWISE_BLOCK = 128  # numpy's PW_BLOCKSIZE
_EMPTY = np.zeros(0)
_CHUNK_BEAMS = 2048  # most beams per chunk of the passes
_MIN_CHUNK_BEAMS = 256
_PRECIPITATION_CLASS = np.uint8(CLASS_ID["precipitation"])
_PRECIPITATION_MATERIAL = np.uint8(MATERIAL_OF_CLASS[CLASS_ID["precipitation"]])

# Status codes of the kernels (0: done).
_BAD_RANGE = 1
_BAD_CLASS = 2
_BAD_MATERIAL = 3

MICRO_SLOPE_CELL_M = 0.25
ALBEDO_CELL_M = 0.1
MIN_ROUGH_RANGE_M = 0.01


# ---------------------------------------------------------------------------------------------
# Hashes and the PCG32 stream (noise.py, one number at a time)
# ---------------------------------------------------------------------------------------------


@_jit
def _mix64(x):
    """SplitMix64 finaliser of one uint64 (``noise.mix64``)."""
    x = x + _GAMMA
    x = (x ^ (x >> _SHIFT_30)) * _MUL1
    x = (x ^ (x >> _SHIFT_27)) * _MUL2
    return x ^ (x >> _SHIFT_31)


@_jit
def _hash_normal(h):
    """``sqrt(-2 ln U(h)) cos(2 pi U(mix(h)))`` of one uint64 (``noise.hash_normal``)."""
    radius = math.sqrt(math.log((np.float64(h >> _SHIFT_11) + 0.5) * _INV_TWO_POW_53) * -2.0)
    angle = (np.float64(_mix64(h) >> _SHIFT_11) + 0.5) * _TWO_PI_OVER_TWO_POW_53
    return radius * math.cos(angle)


@_jit
def _floor_cell(coordinate_m, cell_m):
    """``floor(X / s)`` as int64 reinterpreted as uint64; non-finite gives 0 (``noise._floor_cell``)."""
    q = np.floor(coordinate_m / cell_m)
    if not math.isfinite(q):
        q = 0.0
    return _U64(np.int64(q))


@_jit
def _place_normal(x_m, y_m, cell_m, seed_term):
    """PlaceNormal of the cell holding (x, y); ``seed_term = k * 0x632be59bd9b4e019`` (uint64)."""
    h = _mix64(_floor_cell(x_m, cell_m) ^ seed_term)
    h = _mix64(h ^ _floor_cell(y_m, cell_m))
    return _hash_normal(h)


@_jit
def _pcg32_next(state, inc):
    """One PCG32 (XSH RR) output: returns (output as uint64 < 2^32, next state)."""
    xorshifted = (((state >> _SHIFT_18) ^ state) >> _SHIFT_27) & _MASK32
    rot = state >> _SHIFT_59
    output = ((xorshifted >> rot) | (xorshifted << ((_U64_32 - rot) & _SHIFT_31))) & _MASK32
    return output, state * _PCG_MULT + inc


@_jit
def _pcg32_advance(state, inc, steps):
    """The state ``steps`` (int64 >= 0) outputs later, in O(log steps) (``Pcg32.advance``)."""
    acc_mult = _U64_ONE
    acc_plus = _U64_ZERO
    cur_mult = _PCG_MULT
    cur_plus = inc
    delta = _U64(steps)
    while delta > _U64_ZERO:
        if delta & _U64_ONE:
            acc_mult = acc_mult * cur_mult
            acc_plus = acc_plus * cur_mult + cur_plus
        cur_plus = (cur_mult + _U64_ONE) * cur_plus
        cur_mult = cur_mult * cur_mult
        delta = delta >> _U64_ONE
    return acc_mult * state + acc_plus


@_jit
def _uniform_u32(output):
    """``(x + 0.5) / 2^32`` of one 32-bit output."""
    return (np.float64(output) + 0.5) / _TWO_POW_32


# ---------------------------------------------------------------------------------------------
# numpy's reductions, in numpy's order
# ---------------------------------------------------------------------------------------------


@_jit
def _pairwise_sum(values, start, n):
    """numpy's pairwise summation of ``values[start : start + n]`` (``DOUBLE_pairwise_sum``)."""
    if n < 8:
        total = 0.0
        for i in range(start, start + n):
            total += values[i]
        return total
    if n <= _PAIRWISE_BLOCK:
        r0 = values[start]
        r1 = values[start + 1]
        r2 = values[start + 2]
        r3 = values[start + 3]
        r4 = values[start + 4]
        r5 = values[start + 5]
        r6 = values[start + 6]
        r7 = values[start + 7]
        i = 8
        while i < n - (n % 8):
            r0 += values[start + i]
            r1 += values[start + i + 1]
            r2 += values[start + i + 2]
            r3 += values[start + i + 3]
            r4 += values[start + i + 4]
            r5 += values[start + i + 5]
            r6 += values[start + i + 6]
            r7 += values[start + i + 7]
            i += 8
        total = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
        while i < n:
            total += values[start + i]
            i += 1
        return total
    half = n // 2
    half -= half % 8
    return _pairwise_sum(values, start, half) + _pairwise_sum(values, start + half, n - half)


# ---------------------------------------------------------------------------------------------
# The spec's equations for one number (physics.py, weather.py)
# ---------------------------------------------------------------------------------------------


@_jit
def _overlap_geometry(range_m, overlap_range_m):
    """``(1 / R^2) (1 - exp(-(R / R_ov)^2))`` as ``physics.signal_counts`` computes it, 1/m^2."""
    r = abs(range_m)
    safe_ov = overlap_range_m if overlap_range_m > 0.0 else 1.0
    q = r / safe_ov
    x = q * q
    f = -math.expm1(-x) / x if x > 0.0 else 1.0
    geometry = f / (safe_ov * safe_ov)
    if not overlap_range_m > 0.0:
        near = max(r, 1e-3)
        geometry = 1.0 / (near * near)
    return geometry


@_jit
def _signal_from_geometry(reflectance, geometry, peak, s10, r10, extinction):
    """``S10 (rho / 0.1) R10^2 geometry g``, times ``extinction`` when it is not 1, counts."""
    signal = s10 * (reflectance / 0.1) * (r10 * r10) * geometry * peak
    if extinction != 1.0:
        signal = signal * extinction
    return signal


@_jit
def _signal_counts(reflectance, range_m, peak, s10, r10, overlap_range_m, alpha):
    """SignalCounts of one echo, counts (``physics.signal_counts``)."""
    extinction = math.exp(-2.0 * alpha * abs(range_m)) if alpha != 0.0 else 1.0
    return _signal_from_geometry(reflectance, _overlap_geometry(range_m, overlap_range_m), peak, s10, r10, extinction)


@_jit
def _intensity_byte(rho):
    """IntensityByte of one reported reflectance (``physics.intensity_byte``), as an int."""
    if not rho > 0.0:
        return 0
    if rho > 1.0:
        log_scale = min(1.0, math.log(rho) / _LOG_64)
        return int(max(101.0, 100.0 + np.floor(155.0 * log_scale + 0.5)))
    return int(np.floor(100.0 * min(rho, 1.0) + 0.5))


@_jit
def _poisson(u, mean):
    """Poisson count by inversion, at most 64 (``weather.poisson_from_uniform``)."""
    if mean >= _POISSON_SATURATED:
        return _POISSON_CAP
    if not mean > 0.0:
        return 0
    term = math.exp(-mean)
    cdf = term
    k = 0
    while k < _POISSON_CAP and u > cdf:
        k += 1
        term = term * mean / k
        cdf = cdf + term
    return k


# ---------------------------------------------------------------------------------------------
# Pass 1: the hits that light reaches, and the inputs of the ground hashes' normals
# ---------------------------------------------------------------------------------------------


@_jit(parallel=True)
def _reached_hits(
    hit_range_m,
    hit_valid,
    hit_class,
    hit_material,
    hit_cos,
    n_sub,
    origins,
    directions,
    transmission,
    micro_slope_rad,
    reflectivity_sd,
    roughness_m,
    incidence_exponent,
    specular,
    specular_width_rad,
    is_foliage,
    foliage_solid,
    ground_class,
    rings,
    slope_seed_term,
    albedo_seed_term,
    rough_seed_term,
    scan_index,
    cells,
    chunk,
):
    """Step 1 and the hash half of step 2, in chunks of ``chunk`` beams on all threads: no
    transcendental function here.

    Lists the hits that light reaches (``T > 0``), beam by beam in (sub-ray, slot) order:
    ``start (n_beams + 1,)``, ``flat (n,) int64`` (``row * K + slot``), ``range_m, cos_theta
    (clipped |cos|), t (T in front), tau (n,) float64``, ``passes (n,) bool``, ``ground (n,)
    int64`` (position in the ground list or -1). The ground list (``ground_hit (G,)``) carries
    for each of its three terms the index of its normal (``z_index (3, G)``, -1 when the term
    is off); the normals are listed once per distinct hash within a chunk (a hit in the same
    0.25 m or 0.1 m cell as the previous ground hit of its ring reuses that one) as the
    argument of the log, ``U(h)``, and the angle ``2 pi U(mix h)`` (``normal_u, normal_angle
    (U,)``). A normal is a function of its hash alone, so the chunking changes no value.

    Row ``b * S + j`` is sub-ray ``j`` of the ``b``-th beam given, whose cell (its number in
    the whole scan, ``c N_r + r``: the roughness hash and the ring) is ``cells[b]``.

    Each chunk writes into its own stretch of the lists (sized by its valid hits), and a last
    sequential pass closes the gaps. Returns ``status`` first (0, or the first bad input).
    """
    n_rows, k_slots = hit_range_m.shape
    n_beams = n_rows // n_sub
    n_classes = is_foliage.shape[0]
    n_materials = transmission.shape[0]
    n_chunks = (n_beams + chunk - 1) // chunk
    cap_n = np.zeros(n_chunks + 1, np.int64)
    cap_g = np.zeros(n_chunks + 1, np.int64)
    for c in numba.prange(n_chunks):
        valid = 0
        on_ground = 0
        for row in range(c * chunk * n_sub, min((c + 1) * chunk, n_beams) * n_sub):
            for k in range(k_slots):
                if hit_valid[row, k]:
                    valid += 1
                    if hit_class[row, k] == ground_class:
                        on_ground += 1
        cap_n[c + 1] = valid
        cap_g[c + 1] = on_ground
    for c in range(n_chunks):
        cap_n[c + 1] += cap_n[c]
        cap_g[c + 1] += cap_g[c]
    capacity = cap_n[n_chunks]
    n_ground = cap_g[n_chunks]
    start = np.zeros(n_beams + 1, np.int64)
    out_flat = np.empty(capacity, np.int64)
    out_range = np.empty(capacity)
    out_cos = np.empty(capacity)
    out_t = np.empty(capacity)
    out_tau = np.empty(capacity)
    out_passes = np.empty(capacity, np.bool_)
    out_ground = np.empty(capacity, np.int64)
    ground_hit = np.empty(n_ground, np.int64)
    z_index = np.empty((3, n_ground), np.int64)
    normal_u = np.empty(3 * n_ground)
    normal_angle = np.empty(3 * n_ground)
    used = np.zeros((n_chunks, 3), np.int64)  # hits, ground hits, normals written by each chunk
    status = np.zeros(n_chunks, np.int64)
    scan_key = _U64(scan_index) << _SHIFT_24
    for c in numba.prange(n_chunks):
        last_hash = np.zeros((2, rings), np.uint64)
        last_normal = np.full((2, rings), -1, np.int64)
        n = cap_n[c]
        g = cap_g[c]
        u = 3 * cap_g[c]
        bad = 0
        for beam in range(c * chunk, min((c + 1) * chunk, n_beams)):
            start[beam] = n
            cell = cells[beam]
            ring = cell % rings
            beam_key = scan_key | (_U64(cell) << _SHIFT_3)
            for j in range(n_sub):
                row = beam * n_sub + j
                t = 1.0
                for k in range(k_slots):
                    if not hit_valid[row, k]:
                        continue
                    cls = np.int64(hit_class[row, k])
                    mat = np.int64(hit_material[row, k])
                    if mat >= n_materials:
                        bad = _BAD_MATERIAL
                        break
                    if cls >= n_classes and not foliage_solid:
                        bad = _BAD_CLASS
                        break
                    passes = (not foliage_solid) and is_foliage[cls]
                    tau = transmission[mat] if passes else 0.0
                    t_hit = t
                    t = t * tau
                    if not t_hit > 0.0:
                        continue  # behind a solid surface: no light
                    range_m = hit_range_m[row, k]
                    if not (range_m >= 0.0 and math.isfinite(range_m)):
                        bad = _BAD_RANGE
                        break
                    out_flat[n] = row * k_slots + k
                    out_range[n] = range_m
                    out_cos[n] = min(max(abs(hit_cos[row, k]), 0.0), 1.0)
                    out_t[n] = t_hit
                    out_tau[n] = tau
                    out_passes[n] = passes
                    out_ground[n] = -1
                    if cls == ground_class:
                        out_ground[n] = g
                        ground_hit[g] = n
                        point_x = origins[row, 0] + range_m * directions[row, 0]
                        point_y = origins[row, 1] + range_m * directions[row, 1]
                        for term in range(3):
                            z_index[term, g] = -1
                            if term == 0:
                                if not micro_slope_rad[mat] > 0.0:
                                    continue
                                h = _mix64(_floor_cell(point_x, MICRO_SLOPE_CELL_M) ^ slope_seed_term)
                                h = _mix64(h ^ _floor_cell(point_y, MICRO_SLOPE_CELL_M))
                            elif term == 1:
                                if not reflectivity_sd[mat] > 0.0:
                                    continue
                                h = _mix64(_floor_cell(point_x, ALBEDO_CELL_M) ^ albedo_seed_term)
                                h = _mix64(h ^ _floor_cell(point_y, ALBEDO_CELL_M))
                            else:
                                if not roughness_m[mat] > 0.0:
                                    continue
                                h = _mix64((beam_key | _U64(j)) ^ rough_seed_term)
                            if term < 2 and last_normal[term, ring] >= 0 and last_hash[term, ring] == h:
                                z_index[term, g] = last_normal[term, ring]
                                continue
                            normal_u[u] = (np.float64(h >> _SHIFT_11) + 0.5) * _INV_TWO_POW_53
                            normal_angle[u] = (np.float64(_mix64(h) >> _SHIFT_11) + 0.5) * _TWO_PI_OVER_TWO_POW_53
                            z_index[term, g] = u
                            if term < 2:
                                last_hash[term, ring] = h
                                last_normal[term, ring] = u
                            u += 1
                        g += 1
                    n += 1
                if bad != 0:
                    break
            if bad != 0:
                break
        status[c] = bad
        used[c, 0] = n - cap_n[c]
        used[c, 1] = g - cap_g[c]
        used[c, 2] = u - 3 * cap_g[c]
    for c in range(n_chunks):
        if status[c] != 0:
            return (
                status[c],
                start,
                out_flat[:0],
                out_range[:0],
                out_cos[:0],
                out_t[:0],
                out_tau[:0],
                out_passes[:0],
                out_ground[:0],
                ground_hit[:0],
                z_index[:, :0],
                normal_u[:0],
                normal_angle[:0],
            )
    # Close the gaps between the chunks' stretches (each moves left, so a forward copy is safe).
    n = 0
    g = 0
    u = 0
    for c in range(n_chunks):
        shift_n = n - cap_n[c]
        shift_g = g - cap_g[c]
        shift_u = u - 3 * cap_g[c]
        for beam in range(c * chunk, min((c + 1) * chunk, n_beams)):
            start[beam] += shift_n
        for i in range(used[c, 0]):
            src = cap_n[c] + i
            out_flat[n + i] = out_flat[src]
            out_range[n + i] = out_range[src]
            out_cos[n + i] = out_cos[src]
            out_t[n + i] = out_t[src]
            out_tau[n + i] = out_tau[src]
            out_passes[n + i] = out_passes[src]
            out_ground[n + i] = out_ground[src] + shift_g if out_ground[src] >= 0 else -1
        for i in range(used[c, 1]):
            src = cap_g[c] + i
            ground_hit[g + i] = ground_hit[src] + shift_n
            for term in range(3):
                z_index[term, g + i] = z_index[term, src] + shift_u if z_index[term, src] >= 0 else -1
        for i in range(used[c, 2]):
            normal_u[u + i] = normal_u[3 * cap_g[c] + i]
            normal_angle[u + i] = normal_angle[3 * cap_g[c] + i]
        n += used[c, 0]
        g += used[c, 1]
        u += used[c, 2]
    start[n_beams] = n
    return (
        0,
        start,
        out_flat[:n],
        out_range[:n],
        out_cos[:n],
        out_t[:n],
        out_tau[:n],
        out_passes[:n],
        out_ground[:n],
        ground_hit[:g],
        z_index[:, :g],
        normal_u[:u],
        normal_angle[:u],
    )


@_jit(parallel=True)
def _normals(log_u, angle):
    """``sqrt(-2 ln U) cos(angle)`` of each listed normal (``ln U`` from numpy; ``cos`` the C
    library's, which numpy's float64 ``cos`` also calls), in ``hash_normal``'s order."""
    z = np.empty(log_u.shape[0])
    for i in numba.prange(log_u.shape[0]):
        z[i] = math.sqrt(log_u[i] * -2.0) * math.cos(angle[i])
    return z


@_jit(parallel=True)
def _hit_power(
    start,
    flat,
    range_m,
    cos_theta,
    t,
    tau,
    passes,
    ground,
    z_index,
    z,
    theta,
    hit_class,
    hit_material,
    hit_wetness,
    n_sub,
    ground_class,
    weights,
    reflectivity,
    wet_darkening,
    incidence_exponent,
    specular,
    specular_width_rad,
    micro_slope_rad,
    reflectivity_sd,
    roughness_m,
    pulse_length_m,
    divergence_rad,
    divergence_v_rad,
    chunk,
):
    """Steps 2 and 3 for each reached hit, beams in chunks on all threads: the ground tilt
    ``cos theta' = cos(clamp(theta + sigma_t z, 0, MAX_TILT))`` (``theta = arccos`` from numpy),
    the albedo ``exp(s_rho z - s_rho^2 / 2)``, the roughness move ``sigma_h / c^1.5 z`` (``c^1.5``
    as ``c sqrt(c)``), MinnaertBackscatter, the power ``P`` and the echo stretch ``g``. The
    range is moved in place in ``range_m``; returns ``power, peak (n,)`` and the nearest solid
    range of each beam (inf where none)."""
    n_beams = start.shape[0] - 1
    k_slots = hit_class.shape[1]
    n = flat.shape[0]
    power = np.empty(n)
    peak = np.empty(n)
    nearest_solid = np.empty(n_beams)
    n_chunks = (n_beams + chunk - 1) // chunk
    for ch in numba.prange(n_chunks):
        for beam in range(ch * chunk, min((ch + 1) * chunk, n_beams)):
            nearest = np.inf
            for i in range(start[beam], start[beam + 1]):
                hit_row = flat[i] // k_slots
                k = flat[i] - hit_row * k_slots
                mat = np.int64(hit_material[hit_row, k])
                r = range_m[i]
                c = cos_theta[i]
                gi = ground[i]
                a = 1.0
                if gi >= 0:
                    angle = theta[gi]
                    sigma_t = micro_slope_rad[mat]
                    if sigma_t > 0.0:
                        angle = angle + sigma_t * z[z_index[0, gi]]
                    c = math.cos(min(max(angle, 0.0), MAX_TILT_RAD))
                    s_rho = reflectivity_sd[mat]
                    if s_rho > 0.0:
                        a = math.exp(s_rho * z[z_index[1, gi]] - 0.5 * (s_rho * s_rho))
                    sigma_h = roughness_m[mat]
                    if sigma_h > 0.0:
                        rc = min(max(abs(c), ROUGH_COS_MIN), 1.0)
                        # c^(1 + H): c sqrt(c) for the spec's H = 1/2 (a constant numba folds).
                        rough = rc * math.sqrt(rc) if _ROUGH_EXPONENT == 1.5 else rc**_ROUGH_EXPONENT
                        moved = r + sigma_h / rough * z[z_index[2, gi]]
                        r = max(MIN_ROUGH_RANGE_M, moved)
                        range_m[i] = r
                k_exp = incidence_exponent[mat]
                floored = max(c, COS_FLOOR)
                if k_exp == 1.0:
                    inc = floored
                elif k_exp == 0.0:
                    inc = 1.0
                else:
                    inc = floored**k_exp
                wet = wet_darkening[mat]
                darkening = max(0.0, 1.0 - wet * hit_wetness[hit_row, k]) if wet != 0.0 else 1.0
                rho_bs = reflectivity[mat] * darkening * inc
                s = specular[mat]
                width = specular_width_rad[mat]
                if s > 0.0 and width > 0.0:
                    ratio = math.acos(c) / width
                    rho_bs = rho_bs + s * math.exp(-(ratio * ratio))
                p = weights[hit_row % n_sub] * t[i] * t[i] * (1.0 - tau[i]) * rho_bs * a
                power[i] = p
                g_peak = 1.0
                if pulse_length_m > 0.0 and not passes[i]:
                    cc = min(max(c, COS_FLOOR), 1.0)
                    div = divergence_v_rad if np.int64(hit_class[hit_row, k]) == ground_class else divergence_rad
                    spread = r * (math.sqrt(1.0 - cc * cc) / cc) * div
                    g_peak = pulse_length_m / math.sqrt(pulse_length_m * pulse_length_m + spread * spread)
                peak[i] = g_peak
                if not passes[i] and r < nearest:
                    nearest = r
            nearest_solid[beam] = nearest
    return power, peak, nearest_solid


# ---------------------------------------------------------------------------------------------
# Pass 2: clutter slabs
# ---------------------------------------------------------------------------------------------


@_jit
def _clutter(
    nearest_solid,
    columns,
    rings,
    min_range_m,
    slab_length_m,
    stop_limit_m,
    drop_density_per_m3,
    exit_diameter_m,
    divergence_rad,
    fog_term,
    rain_coefficient,
    s10,
    ring_r10,
    overlap_range_m,
    alpha,
    ambient,
    threshold,
    rain_state,
    rain_inc,
):
    """Step 4: the clutter slabs of every beam that pass the skip rule, and their ``rho_slab``.

    Beams in ring-major sequence, slabs in range order; the rain stream draws one number per
    slab (its drop count) and then one per drop. Returns ``start (n_beams,) int64`` (by
    cell, into the slab lists), ``count (n_beams,) int64`` (kept slabs of each cell),
    ``center_range_m, rho_slab (n,) float64`` (listed in ring-major beam order) and the rain
    stream's new state (uint64).
    """
    n_beams = columns * rings
    per_beam = np.zeros(n_beams, np.int64)
    total = 0
    any_drops = False
    for beam in range(n_beams):
        stop = min(nearest_solid[beam], stop_limit_m)
        span = stop - min_range_m if math.isfinite(stop) else 0.0
        count = np.int64(max(np.floor(span / slab_length_m + _SLAB_ROUNDING), 0.0))
        per_beam[beam] = count
        total += count
        if drop_density_per_m3 > 0.0 and count > 0 and not any_drops:
            for k in range(count):
                radius_m = 0.5 * exit_diameter_m + 0.5 * (min_range_m + (k + 0.5) * slab_length_m) * divergence_rad
                if drop_density_per_m3 * np.pi * radius_m * radius_m * slab_length_m > 0.0:
                    any_drops = True
                    break
    # Everything about a slab but its drops depends on its index k only (and the ring): the
    # centre, the mean drop count, P(N = 0), the overlap and extinction factors, and whether a
    # slab without drops passes the skip rule. The same expressions as per slab, computed once.
    most = 0
    for beam in range(n_beams):
        most = max(most, per_beam[beam])
    center_k = np.empty(most)
    mean_k = np.zeros(most)
    none_k = np.zeros(most)  # P(N = 0) = exp(-mean): the first term of the Poisson inversion
    geometry_k = np.empty(most)
    extinction_k = np.empty(most)
    for k in range(most):
        center = min_range_m + (k + 0.5) * slab_length_m
        center_k[k] = center
        if drop_density_per_m3 > 0.0:
            radius_m = 0.5 * exit_diameter_m + 0.5 * center * divergence_rad
            mean_k[k] = drop_density_per_m3 * np.pi * radius_m * radius_m * slab_length_m
            if mean_k[k] > 0.0 and mean_k[k] < _POISSON_SATURATED:
                none_k[k] = math.exp(-mean_k[k])
        geometry_k[k] = _overlap_geometry(center, overlap_range_m)
        extinction_k[k] = math.exp(-2.0 * alpha * abs(center)) if alpha != 0.0 else 1.0
    dry_kept = np.zeros((rings, most), np.bool_)  # a slab without drops: rho = fog_term
    for ring in range(rings):
        for k in range(most):
            signal = _signal_from_geometry(
                fog_term + rain_coefficient * 0.0, geometry_k[k], 1.0, s10, ring_r10[ring], extinction_k[k]
            )
            dry_kept[ring, k] = not (signal + 5.0 * math.sqrt(max(signal + ambient, 0.0)) < threshold)

    count_state = rain_state
    energy_state = _pcg32_advance(rain_state, rain_inc, total) if any_drops else rain_state
    start = np.zeros(n_beams, np.int64)
    kept = np.zeros(n_beams, np.int64)
    center_out = np.empty(total)
    rho_out = np.empty(total)
    n = 0
    for ring in range(rings):
        r10 = ring_r10[ring]
        for column in range(columns):
            beam = column * rings + ring
            start[beam] = n
            for k in range(per_beam[beam]):
                mean = mean_k[k]
                energy = 0.0
                drops = 0
                if any_drops:
                    output, count_state = _pcg32_next(count_state, rain_inc)
                    u = _uniform_u32(output)
                    if mean >= _POISSON_SATURATED or (mean > 0.0 and u > none_k[k]):
                        drops = _poisson(u, mean)
                    for _ in range(drops):
                        output, energy_state = _pcg32_next(energy_state, rain_inc)
                        e = -math.log(_uniform_u32(output))
                        energy += 0.5 * e * e
                if drops == 0:
                    if not dry_kept[ring, k]:
                        continue  # the skip rule
                    rho = fog_term + rain_coefficient * 0.0
                else:
                    rain_term = energy / mean if mean > 0.0 else 0.0
                    rho = fog_term + rain_coefficient * rain_term
                    signal = _signal_from_geometry(rho, geometry_k[k], 1.0, s10, r10, extinction_k[k])
                    if signal + 5.0 * math.sqrt(max(signal + ambient, 0.0)) < threshold:
                        continue  # the skip rule
                if not rho > 0.0:
                    continue  # no light comes back (the numpy backend's P > 0 filter)
                center_out[n] = center_k[k]
                rho_out[n] = rho
                n += 1
            kept[beam] = n - start[beam]
    return start, kept, center_out[:n], rho_out[:n], energy_state


# ---------------------------------------------------------------------------------------------
# Pass 3: echoes, noise, detection and returns
# ---------------------------------------------------------------------------------------------

MODE_CODES: dict[str, int] = {
    "strongest": 0,
    "first": 1,
    "last": 2,
    "dual_strongest_last": 3,
    "dual_first_last": 4,
    "triple_first_strongest_last": 5,
}
"""Return mode -> the kernels' mode number."""


@_jit(inline=True)
def _candidates(mode, first, last, strongest, second, cand_idx, cand_flag):
    """The echoes a return mode selects (``beam_model._select_returns``), merged, in range order.

    Indices are positions in the beam's range-ordered detected echoes (``second`` -1 for none).
    Fills ``cand_idx, cand_flag (3,)`` and returns how many are filled.
    """
    m = 0
    if mode == 0:
        cand_idx[0] = strongest
        cand_flag[0] = FLAG_STRONGEST
        m = 1
    elif mode == 1:
        cand_idx[0] = first
        cand_flag[0] = FLAG_FIRST
        m = 1
    elif mode == 2:
        cand_idx[0] = last
        cand_flag[0] = FLAG_LAST
        m = 1
    elif mode == 3:
        # The second strongest joins only when the strongest is the last.
        if strongest == last and second >= 0:
            cand_idx[m] = second
            cand_flag[m] = FLAG_SECOND_STRONGEST
            m += 1
        cand_idx[m] = strongest
        cand_flag[m] = FLAG_STRONGEST
        cand_idx[m + 1] = last
        cand_flag[m + 1] = FLAG_LAST
        m += 2
    elif mode == 4:
        cand_idx[0] = first
        cand_flag[0] = FLAG_FIRST
        cand_idx[1] = last
        cand_flag[1] = FLAG_LAST
        m = 2
    else:
        cand_idx[0] = first
        cand_flag[0] = FLAG_FIRST
        cand_idx[1] = strongest
        cand_flag[1] = FLAG_STRONGEST
        cand_idx[2] = last
        cand_flag[2] = FLAG_LAST
        m = 3
    # Sort by echo (insertion, stable) and merge an echo chosen twice into one with both flags.
    for i in range(1, m):
        idx = cand_idx[i]
        flag = cand_flag[i]
        j = i - 1
        while j >= 0 and cand_idx[j] > idx:
            cand_idx[j + 1] = cand_idx[j]
            cand_flag[j + 1] = cand_flag[j]
            j -= 1
        cand_idx[j + 1] = idx
        cand_flag[j + 1] = flag
    merged = 0
    for i in range(m):
        if merged > 0 and cand_idx[merged - 1] == cand_idx[i]:
            cand_flag[merged - 1] |= cand_flag[i]
        else:
            cand_idx[merged] = cand_idx[i]
            cand_flag[merged] = cand_flag[i]
            merged += 1
    return merged


@_jit
def _sort_span(hit_range_m, hit_power, slab_range_m):
    """The ``span`` of numpy's sort key ``cell * span + R``: the power of two above every lit
    range (hits with ``P > 0`` and clutter slabs) plus 2 m; 0 when nothing is lit. The span of
    a scan is the largest of its blocks' spans (and its slabs')."""
    largest_m = -np.inf
    for i in range(hit_range_m.shape[0]):
        if hit_power[i] > 0.0:
            largest_m = max(largest_m, hit_range_m[i])
    for i in range(slab_range_m.shape[0]):
        largest_m = max(largest_m, slab_range_m[i])
    if not largest_m > -np.inf:
        return 0.0
    return 2.0 ** math.ceil(math.log2(largest_m + 2.0))


@_jit(parallel=True)
def _echoes(
    start,
    flat,
    hit_range_m,
    hit_power,
    hit_peak,
    hit_class,
    hit_material,
    hit_object,
    slab_start,
    slab_count,
    slab_range_m,
    slab_power,
    echo_base,
    separation_m,
    span,
    cells,
    chunk,
):
    """Step 5 for every beam, beams in chunks on all threads: the beam's contributions (its
    lit hits, ``P > 0``, then its kept clutter slabs) sorted by range, echo formation and the
    echo's sums. The echoes of beam ``b`` go to ``echo_base[b]`` on (room for one echo per
    contribution); returns ``count (n_beams,)`` and ``range_m, reflectance, peak (C,)``
    (``R_e``, ``rho_e``, ``g_e``), ``class, material, object (C,)`` of the largest
    contribution; unused room holds ``R_e = 0``. The sort key of a contribution is numpy's
    ``cell * span + R`` with the scan's ``span`` (``_sort_span``; 0: nothing is lit) and the
    beam's cell ``cells[b]``, so that the ties, and so the sums, are those of the whole scan."""
    n_beams = start.shape[0] - 1
    k_slots = hit_class.shape[1]
    total = echo_base[n_beams]
    count = np.zeros(n_beams, np.int64)
    e_range = np.zeros(total)
    e_rho = np.empty(total)
    e_peak = np.empty(total)
    e_class = np.empty(total, np.uint8)
    e_material = np.empty(total, np.uint8)
    e_object = np.empty(total, np.int32)
    if not span > 0.0:
        return count, e_range, e_rho, e_peak, e_class, e_material, e_object
    capacity = 1
    for beam in range(n_beams):
        capacity = max(capacity, echo_base[beam + 1] - echo_base[beam])
    n_chunks = (n_beams + chunk - 1) // chunk
    for ch in numba.prange(n_chunks):
        key = np.empty(capacity)
        c_range = np.empty(capacity)
        c_power = np.empty(capacity)
        c_peak = np.empty(capacity)
        c_index = np.empty(capacity, np.int64)  # the hit's flat index, or -1 for a slab
        order = np.empty(capacity, np.int64)
        s_range = np.empty(capacity)
        s_power = np.empty(capacity)
        s_power_range = np.empty(capacity)
        s_power_peak = np.empty(capacity)
        starts = np.empty(capacity, np.int64)
        for beam in range(ch * chunk, min((ch + 1) * chunk, n_beams)):
            n = 0
            for i in range(start[beam], start[beam + 1]):
                if not hit_power[i] > 0.0:
                    continue
                c_range[n] = hit_range_m[i]
                c_power[n] = hit_power[i]
                c_peak[n] = hit_peak[i]
                c_index[n] = flat[i]
                n += 1
            for i in range(slab_start[beam], slab_start[beam] + slab_count[beam]):
                c_range[n] = slab_range_m[i]
                c_power[n] = slab_power[i]
                c_peak[n] = 1.0
                c_index[n] = -1
                n += 1
            if n == 0:
                continue
            # Stable sort by numpy's key (insertion: a beam has few contributions).
            beam_offset = np.float64(cells[beam]) * span
            for i in range(n):
                key[i] = beam_offset + c_range[i]
                j = i - 1
                while j >= 0 and key[order[j]] > key[i]:
                    order[j + 1] = order[j]
                    j -= 1
                order[j + 1] = i
            for i in range(n):
                o = order[i]
                s_range[i] = c_range[o]
                s_power[i] = c_power[o]
                s_power_range[i] = c_power[o] * c_range[o]
                s_power_peak[i] = c_power[o] * c_peak[o]
            # Echoes: each takes the contributions within the separation of its first.
            n_echo = 0
            first_m = 0.0
            for i in range(n):
                if i == 0 or s_range[i] > first_m + separation_m:
                    first_m = s_range[i]
                    starts[n_echo] = i
                    n_echo += 1
            e = echo_base[beam]
            for q in range(n_echo):
                lo = starts[q]
                hi = starts[q + 1] if q + 1 < n_echo else n
                length = hi - lo
                # np.add.reduceat's order: the first element plus the pairwise sum of the rest.
                if length - 1 < 8:
                    rest_power = 0.0
                    rest_power_range = 0.0
                    rest_power_peak = 0.0
                    for i in range(lo + 1, hi):
                        rest_power += s_power[i]
                        rest_power_range += s_power_range[i]
                        rest_power_peak += s_power_peak[i]
                else:
                    rest_power = _pairwise_sum(s_power, lo + 1, length - 1)
                    rest_power_range = _pairwise_sum(s_power_range, lo + 1, length - 1)
                    rest_power_peak = _pairwise_sum(s_power_peak, lo + 1, length - 1)
                rho_e = s_power[lo] + rest_power
                largest = lo
                for i in range(lo + 1, hi):
                    if s_power[i] > s_power[largest]:
                        largest = i
                e_range[e] = (s_power_range[lo] + rest_power_range) / rho_e
                e_rho[e] = rho_e
                e_peak[e] = (s_power_peak[lo] + rest_power_peak) / rho_e
                index = c_index[order[largest]]
                if index < 0:
                    e_class[e] = _PRECIPITATION_CLASS
                    e_material[e] = _PRECIPITATION_MATERIAL
                    e_object[e] = NO_OBJECT
                else:
                    hit_row = index // k_slots
                    k = index - hit_row * k_slots
                    e_class[e] = hit_class[hit_row, k]
                    e_material[e] = hit_material[hit_row, k]
                    e_object[e] = hit_object[hit_row, k]
                e += 1
            count[beam] = n_echo
    return count, e_range, e_rho, e_peak, e_class, e_material, e_object


@_jit
def _noise_uniforms(state, inc, n):
    """The next ``n`` pairs of outputs of the noise stream from ``state``, as the uniforms
    ``U_a, U_b (n,)`` (``(x + 0.5) / 2^32``)."""
    u_a = np.empty(n)
    u_b = np.empty(n)
    for i in range(n):
        out_a, state = _pcg32_next(state, inc)
        out_b, state = _pcg32_next(state, inc)
        u_a[i] = _uniform_u32(out_a)
        u_b[i] = _uniform_u32(out_b)
    return u_a, u_b


@_jit
def _normal_pairs(log_u_a, u_b, cos_b):
    """Box-Muller ``n1 = r cos(2 pi U_b)``, ``n2 = r sin(2 pi U_b)`` with ``r = sqrt(-2 ln U_a)``
    (``ln U_a`` and the cosine from numpy; the sine is ``sqrt(1 - cos^2)`` with the sign of
    ``U_b < 1/2``), as ``noise.normal_pairs_from_u32``."""
    n = log_u_a.shape[0]
    n1 = np.empty(n)
    n2 = np.empty(n)
    for i in range(n):
        radius = math.sqrt(-2.0 * log_u_a[i])
        cosine = cos_b[i]
        sine = math.sqrt(max(0.0, 1.0 - cosine * cosine))
        if not u_b[i] < 0.5:
            sine = -sine
        n1[i] = radius * cosine
        n2[i] = radius * sine
    return n1, n2


@_jit
def _draw_base(count, columns, rings):
    """The noise stream's pair index of each beam's first echo: echoes in range order, beams in
    ring-major sequence. Returns ``(n_beams,)`` int64 and the scan's number of echoes."""
    base = np.empty(columns * rings, np.int64)
    total = 0
    for ring in range(rings):
        for beam in range(ring, columns * rings, rings):
            base[beam] = total
            total += count[beam]
    return base, total


@_jit
def _overlap_x(count, echo_base, e_range, overlap_range_m):
    """``x = (R_e / R_ov)^2`` of each echo (1 in unused room)."""
    x = np.ones(e_range.shape[0])
    safe_ov = overlap_range_m if overlap_range_m > 0.0 else 1.0
    for beam in range(count.shape[0]):
        for e in range(echo_base[beam], echo_base[beam] + count[beam]):
            ratio = abs(e_range[e]) / safe_ov
            x[e] = ratio * ratio
    return x


@_jit
def _echo_signals(
    count,
    echo_base,
    cells,
    rings,
    range_m,
    reflectance,
    peak,
    x,
    expm1_minus_x,
    extinction,
    s10,
    ring_r10,
    overlap_range_m,
    alpha,
    ambient,
    std_m,
    range_std_low_snr_m,
):
    """The part of step 6 that draws nothing, for each echo of a block: the clear signal ``S_c``
    (range equation with the overlap term and the ring's R10), the signal after two-way
    extinction ``S``, the shot-noise scale ``sqrt(S + B)`` and the range noise sigma of the SNR
    model. ``expm1_minus_x`` is ``expm1(-x)`` and ``extinction`` ``exp(-2 alpha R_e)`` (used when
    ``alpha > 0``), both from numpy. Returns four ``(C,)`` arrays (unused room: any value)."""
    total_echoes = range_m.shape[0]
    clear = np.empty(total_echoes)
    signal = np.empty(total_echoes)
    spread = np.empty(total_echoes)
    sigma = np.empty(total_echoes)
    safe_ov = overlap_range_m if overlap_range_m > 0.0 else 1.0
    total_spec = s10 + ambient
    snr_spec = s10 / math.sqrt(total_spec) if total_spec > 0.0 else 0.0
    for beam in range(count.shape[0]):
        r10 = ring_r10[cells[beam] % rings]
        for e in range(echo_base[beam], echo_base[beam] + count[beam]):
            r = range_m[e]
            xe = x[e]
            f = -expm1_minus_x[e] / xe if xe > 0.0 else 1.0
            geometry = f / (safe_ov * safe_ov)
            if not overlap_range_m > 0.0:
                near = max(abs(r), 1e-3)
                geometry = 1.0 / (near * near)
            c = s10 * (reflectance[e] / 0.1) * (r10 * r10) * geometry * peak[e]
            s = c * extinction[e] if alpha > 0.0 else c
            clear[e] = c
            signal[e] = s
            spread[e] = math.sqrt(max(s + ambient, 0.0))
            total = s + ambient
            snr = s / math.sqrt(total) if total > 0.0 else 0.0
            low = range_std_low_snr_m * snr_spec / max(snr, SNR_FLOOR)
            sigma[e] = math.sqrt(std_m * std_m + low * low)
    return clear, signal, spread, sigma


@_jit(parallel=True)
def _returns(
    count,
    echo_base,
    draw_base,
    n1,
    n2,
    range_m,
    reflectance,
    clear,
    signal,
    spread,
    sigma,
    e_class,
    e_material,
    e_object,
    threshold,
    noise_on,
    min_range_m,
    max_range_m,
    signal_limit,
    mode,
    slots,
    chunk,
):
    """Steps 6 and 7 for every beam, beams in chunks on all threads: the measured signal ``S' =
    S + sqrt(S + B) n1`` and detection; the returns among the detected echoes, with the range
    noise ``sigma n2`` and the brightness of the chosen ones. Echo ``q`` of a beam takes the
    noise pair ``draw_base[beam] + q`` (``n1, n2``). Returns the nine (n_beams, slots) fields of
    ``Returns``; the intensity byte of a reflectivity above 1 is left 0 (it needs numpy's
    logarithm)."""
    n_beams = count.shape[0]
    # Every slot starts empty (filled in bulk: 30 % faster than per beam); detections overwrite.
    out_range = np.full((n_beams, slots), np.nan)
    out_valid = np.zeros((n_beams, slots), np.bool_)
    out_reflectivity = np.zeros((n_beams, slots))
    out_signal = np.zeros((n_beams, slots), np.uint16)
    out_intensity = np.zeros((n_beams, slots), np.uint8)
    out_class = np.zeros((n_beams, slots), np.uint8)
    out_material = np.zeros((n_beams, slots), np.uint8)
    out_object = np.full((n_beams, slots), NO_OBJECT, np.int32)
    out_flags = np.zeros((n_beams, slots), np.uint8)
    most = 1
    for beam in range(n_beams):
        most = max(most, count[beam])
    n_chunks = (n_beams + chunk - 1) // chunk
    for ch in numba.prange(n_chunks):
        found = np.empty(most, np.int64)
        measured = np.empty(most)
        noise2 = np.empty(most)
        cand_idx = np.empty(3, np.int64)
        cand_flag = np.empty(3, np.uint8)
        for beam in range(ch * chunk, min((ch + 1) * chunk, n_beams)):
            base = echo_base[beam]
            pair = draw_base[beam]
            n_detected = 0
            for q in range(count[beam]):
                e = base + q
                r = range_m[e]
                m = signal[e] + spread[e] * n1[pair + q] if noise_on else signal[e]
                if m >= threshold and r >= min_range_m and r <= max_range_m:
                    found[n_detected] = e
                    measured[n_detected] = m
                    noise2[n_detected] = n2[pair + q]
                    n_detected += 1
            if n_detected == 0:
                continue
            strongest = 0
            for i in range(1, n_detected):
                if measured[i] > measured[strongest]:
                    strongest = i
            second = -1
            if mode == 3 and n_detected >= 2:
                for i in range(n_detected):
                    if i != strongest and (second < 0 or measured[i] > measured[second]):
                        second = i
            m = _candidates(mode, 0, n_detected - 1, strongest, second, cand_idx, cand_flag)
            for slot in range(min(m, slots)):
                i = cand_idx[slot]
                e = found[i]
                c = clear[e]
                if noise_on:
                    range_meas = min(max(range_m[e] + sigma[e] * noise2[i], 0.0), max_range_m)
                else:
                    range_meas = min(max(range_m[e], 0.0), max_range_m)
                s_meas = measured[i]
                reflectivity = reflectance[e] * max(s_meas, 0.0) / c if c > 0.0 else 0.0
                out_range[beam, slot] = range_meas
                out_valid[beam, slot] = True
                out_reflectivity[beam, slot] = reflectivity
                out_signal[beam, slot] = np.uint16(np.floor(min(max(s_meas, 0.0), signal_limit) + 0.5))
                if not reflectivity > 1.0:
                    out_intensity[beam, slot] = np.uint8(_intensity_byte(reflectivity))
                out_class[beam, slot] = e_class[e]
                out_material[beam, slot] = e_material[e]
                out_object[beam, slot] = e_object[e]
                out_flags[beam, slot] = cand_flag[slot]
    return (
        out_range,
        out_valid,
        out_reflectivity,
        out_signal,
        out_intensity,
        out_class,
        out_material,
        out_object,
        out_flags,
    )


# ---------------------------------------------------------------------------------------------
# The backend's entry point
# ---------------------------------------------------------------------------------------------

_FOLIAGE_CLASS_TABLE = np.ascontiguousarray(IS_FOLIAGE_CLASS, dtype=np.bool_)
_GROUND_CLASS = CLASS_ID["ground"]
PRECIPITATION_CLASS = _PRECIPITATION_CLASS
PRECIPITATION_MATERIAL = _PRECIPITATION_MATERIAL

_PARALLEL_LOCK = threading.Lock()
"""Held while the compiled passes run: numba's default threading layer (workqueue) aborts the
process when two Python threads enter parallel regions at once."""


def _u64(value: int) -> np.uint64:
    return np.uint64(int(value) & MASK64)


def _chunk_beams(n_beams: int) -> int:
    """Beams per chunk of the parallel passes: a function of the scan's size only, never of the
    thread count, so that the output does not depend on the machine."""
    return max(_MIN_CHUNK_BEAMS, min(_CHUNK_BEAMS, -(-n_beams // 8)))


@dataclass(frozen=True)
class EchoBlock:
    """The radiometry of a block of beams up to the noise draws (``prepare_echoes``).

    Everything here depends on the block's own hits only; ``finish_echoes`` draws the noise over
    the whole scan in ring-major order, detects and selects. The lists are ``_reached_hits``'
    and ``_hit_power``'s (see there); the echoes are ``_echoes``' for the block's ``span``, or
    None when the scan has clutter (the slabs need the rain stream, so the echoes are formed
    in ``finish_echoes``).

    Attributes
    ----------
    cells : (n,) int64
        Cell ``c N_r + r`` of each beam of the block, in the order of its rows.
    start, flat, range_m, power, peak : the reached hits of the block's beams
    nearest_solid_m : (n,) float64
        Nearest solid range of each beam, m (inf where none).
    hit_class, hit_material, hit_object : (n * S, K)
        The block's hit fields, which ``flat`` indexes.
    span : float
        The block's sort span (``_sort_span``, 0 when nothing is lit).
    echoes : (count, echo_base, range_m, reflectance, peak, class, material, object) or None
    """

    cells: np.ndarray
    start: np.ndarray
    flat: np.ndarray
    range_m: np.ndarray
    power: np.ndarray
    peak: np.ndarray
    nearest_solid_m: np.ndarray
    hit_class: np.ndarray
    hit_material: np.ndarray
    hit_object: np.ndarray
    span: float
    echoes: tuple | None


def _check_numba() -> None:
    if NUMBA_IMPORT_ERROR is not None:
        raise ImportError(
            "process_beams(backend='numba') needs numba (pip install numba), or use backend='numpy'"
        ) from NUMBA_IMPORT_ERROR


def _has_clutter(params, atm) -> bool:
    return bool(atm.has_clutter and float(params.min_return_separation_m) > 0.0)


def process_beams_compiled(
    hits: Hits,
    origins: np.ndarray,
    directions: np.ndarray,
    weights: np.ndarray,
    params,
    options,
    atm,
    streams: NoiseStreams,
    scan_index: int,
) -> Returns:
    """ProcessBeam for every beam of a scan in compiled passes (``backend="numba"``):
    ``prepare_echoes`` over every beam, then ``finish_echoes``.

    ``beam_model.process_beams`` checks the inputs and calls this; the parameters are its own.

    Parameters
    ----------
    hits : Hits of shape (n_beams * S, K)
        Sub-ray ``j`` of beam ``b`` is row ``b * S + j``; beam ``b`` is the cell ``c N_r + r``.
    origins, directions : (n_beams * S, 3) float64
        Sub-ray origins and unit directions in the world frame, m.
    weights : (S,) float64
        Energy weights of the sub-rays.
    params : beam_model.BeamModelParams
    options : beam_model.BeamModelOptions
    atm : weather.Atmosphere
        The scan's rain and fog (``beam_model.scan_atmosphere``).
    streams : NoiseStreams
        ``streams.noise`` (and ``streams.rain`` with rain clutter) advance exactly as in the
        numpy backend; nothing advances when the inputs are refused.
    scan_index : int
        Scan number, for the roughness hash.

    Returns
    -------
    Returns of shape (n_beams, R).

    Raises
    ------
    ImportError
        When numba cannot be imported (the kept error is the cause).
    ValueError
        For a lit hit whose range is negative or not finite (as the numpy backend).
    IndexError
        For a class or material number outside the tables (as numpy's indexing would).
    """
    n_beams = params.rings * params.columns
    block = prepare_echoes(
        hits,
        origins,
        directions,
        weights,
        params,
        options,
        atm,
        int(streams.seed),
        scan_index,
        np.arange(n_beams, dtype=np.int64),
    )
    return finish_echoes([block], params, options, atm, streams)


def prepare_echoes(
    hits: Hits,
    origins: np.ndarray,
    directions: np.ndarray,
    weights: np.ndarray,
    params,
    options,
    atm,
    seed: int,
    scan_index: int,
    cells: np.ndarray,
) -> EchoBlock:
    """The radiometry of a block of beams that draws no random number: reached hits, ground
    hashes, power and echo stretch, and (without clutter) the echoes. The ROS node runs it on
    each column block as the block is traced; ``finish_echoes`` completes the scan.

    Parameters
    ----------
    hits : Hits of shape (n * S, K)
        Sub-ray ``j`` of the block's beam ``b`` is row ``b * S + j``.
    origins, directions : (n * S, 3) float64
        Sub-ray origins and unit directions in the world frame, m.
    weights : (S,) float64
    params, options, atm, scan_index : as ``process_beams_compiled``
    seed : int
        The run's seed (``NoiseStreams.seed``), which keys the ground hashes.
    cells : (n,) int64
        Cell ``c N_r + r`` of each beam of the block (the scan's beam numbers); the blocks of a
        scan hold every cell once.

    Returns
    -------
    EchoBlock

    Raises
    ------
    ImportError, ValueError, IndexError
        As ``process_beams_compiled``; ValueError also for rows that do not match ``cells``.
    """
    _check_numba()
    cells = np.ascontiguousarray(cells, dtype=np.int64)
    weights = np.ascontiguousarray(weights, dtype=np.float64)
    n_sub = int(weights.shape[0])
    if n_sub < 1 or hits.shape[0] != cells.size * n_sub:
        raise ValueError(f"hits have {hits.shape[0]} rows; expected cells * sub_rays = {cells.size} * {n_sub}")
    with _PARALLEL_LOCK:
        return _prepare_locked(hits, origins, directions, weights, params, options, atm, int(seed), scan_index, cells)


def _prepare_locked(hits, origins, directions, weights, params, options, atm, seed, scan_index, cells) -> EchoBlock:
    mats = params.materials
    mats = params.materials
    n_rings = params.rings
    n_beams = cells.size
    n_sub = int(weights.shape[0])
    chunk = _chunk_beams(n_beams)
    hit_class = np.ascontiguousarray(hits.class_id, dtype=np.uint8)
    hit_material = np.ascontiguousarray(hits.material_id, dtype=np.uint8)
    hit_object = np.ascontiguousarray(hits.object_id, dtype=np.int32)

    # --- Pass 1: reached hits and the hashes of the ground terms (no transcendentals). ---
    (
        status,
        start,
        flat,
        range_m,
        cos_theta,
        t_hit,
        tau,
        passes,
        ground,
        ground_hit,
        z_index,
        normal_u,
        normal_angle,
    ) = _reached_hits(
        np.ascontiguousarray(hits.range_m, dtype=np.float64),
        np.ascontiguousarray(hits.valid, dtype=np.bool_),
        hit_class,
        hit_material,
        np.ascontiguousarray(hits.cos_incidence, dtype=np.float64),
        n_sub,
        np.ascontiguousarray(origins, dtype=np.float64),
        np.ascontiguousarray(directions, dtype=np.float64),
        mats.transmission,
        mats.micro_slope_rad,
        mats.reflectivity_sd,
        mats.roughness_m,
        mats.incidence_exponent,
        mats.specular,
        mats.specular_width_rad,
        _FOLIAGE_CLASS_TABLE,
        bool(options.foliage_solid),
        _GROUND_CLASS,
        n_rings,
        _u64(seed * PLACE_SEED_MUL),
        _u64((seed + 1) * PLACE_SEED_MUL),
        _u64(mix64(((seed + ROUGHNESS_SEED_OFFSET) * PLACE_SEED_MUL) & MASK64)),
        int(scan_index),
        cells,
        chunk,
    )
    if status == _BAD_RANGE:
        raise ValueError("hits: every valid hit needs a finite range_m >= 0")
    if status in (_BAD_CLASS, _BAD_MATERIAL):
        what = "class_id" if status == _BAD_CLASS else "material_id"
        size = len(CLASS_NAMES) if status == _BAD_CLASS else mats.reflectivity.size
        raise IndexError(f"hits.{what}: a valid hit has a number outside the table of {size} entries")

    # --- Step 2 and 3: numpy's SIMD log and arccos, then the compiled per-hit pass. ---
    z = _normals(np.log(normal_u), normal_angle)
    theta = np.arccos(cos_theta[ground_hit])
    power, peak, nearest_solid = _hit_power(
        start,
        flat,
        range_m,
        cos_theta,
        t_hit,
        tau,
        passes,
        ground,
        z_index,
        z,
        theta,
        hit_class,
        hit_material,
        np.ascontiguousarray(hits.wetness, dtype=np.float64),
        n_sub,
        _GROUND_CLASS,
        weights,
        mats.reflectivity,
        mats.wet_darkening,
        mats.incidence_exponent,
        mats.specular,
        mats.specular_width_rad,
        mats.micro_slope_rad,
        mats.reflectivity_sd,
        mats.roughness_m,
        float(params.pulse_length_m),
        float(params.beam_divergence_rad),
        float(params.beam_divergence_v_rad),
        chunk,
    )
    block = EchoBlock(
        cells,
        start,
        flat,
        range_m,
        power,
        peak,
        nearest_solid,
        hit_class,
        hit_material,
        hit_object,
        max(float(_sort_span(range_m, power, _EMPTY)), sort_span_m(float(params.range_m))),
        None,
    )
    if _has_clutter(params, atm):
        return block  # the slabs are contributions too: echoes in finish_echoes
    # --- Step 5 without clutter: the block's echoes, sorted with the block's span. ---
    return replace(block, echoes=_block_echoes(block, None, block.span, params, atm))


def _block_echoes(block: EchoBlock, slabs, span: float, params, atm) -> tuple:
    """``_echoes`` of one block and their signals: ``(count, echo_base, range, reflectance,
    peak, class, material, object, clear, signal, spread, sigma)`` with ``echo_base (n + 1,)``
    local to the block (``_echo_signals`` for the last four). ``slabs`` are ``_clutter``'s
    ``(start, count, range, rho)`` of the whole scan, or None."""
    n = block.cells.size
    if slabs is None:
        slab_start = slab_count = np.zeros(n, np.int64)
        slab_range = slab_power = _EMPTY
    else:
        slab_start, slab_count = slabs[0][block.cells], slabs[1][block.cells]
        slab_range, slab_power = slabs[2], slabs[3]
    # Room for one echo per contribution: beam b's echoes start at echo_base[b].
    echo_base = np.zeros(n + 1, np.int64)
    np.cumsum(np.diff(block.start) + slab_count, out=echo_base[1:])
    fields = _echoes(
        block.start,
        block.flat,
        block.range_m,
        block.power,
        block.peak,
        block.hit_class,
        block.hit_material,
        block.hit_object,
        slab_start,
        slab_count,
        slab_range,
        slab_power,
        echo_base,
        float(params.min_return_separation_m),
        span,
        block.cells,
        _chunk_beams(n),
    )
    count, e_range, e_rho, e_peak = fields[0], fields[1], fields[2], fields[3]
    overlap = float(params.overlap_range_m)
    alpha = float(atm.alpha_per_m)
    x = _overlap_x(count, echo_base, e_range, overlap)
    signals = _echo_signals(
        count,
        echo_base,
        block.cells,
        params.rings,
        e_range,
        e_rho,
        e_peak,
        x,
        np.expm1(-x),
        np.exp(-2.0 * alpha * e_range) if alpha > 0.0 else e_range,
        float(params.signal_at_10pct_counts),
        params.ring_range_at_10pct_m,
        overlap,
        alpha,
        float(params.ambient_counts),
        float(params.std_m),
        float(params.range_std_low_snr_m),
    )
    return (count, echo_base) + tuple(fields[1:]) + signals


class NoiseDraws:
    """The noise pairs ``n1, n2`` of a noise stream from one state on, computed ahead.

    Pair ``i`` is what the stream's outputs ``2i`` and ``2i + 1`` from ``state`` give
    (``noise.normal_pairs_from_u32``). The pairs are a function of the stream's position alone,
    so they can be formed before the scan that uses them is traced: the ``Sweep`` does that on
    its first block (``prefetch_noise_draws``) and ``finish_echoes`` then only looks them up.
    """

    def __init__(self, state: int, inc: int) -> None:
        self.state = int(state)
        self.inc = int(inc)
        self.n1 = _EMPTY
        self.n2 = _EMPTY
        self.used_last = 0  # pairs the last scan used: the size of the next prefetch

    def matches(self, generator) -> bool:
        return self.state == int(generator.state) and self.inc == int(generator.inc)

    def extend(self, n: int) -> None:
        """Hold at least ``n`` pairs."""
        have = self.n1.shape[0]
        if n <= have:
            return
        start = _u64(_pcg32_advance(_u64(self.state), _u64(self.inc), 2 * have))
        u_a, u_b = _noise_uniforms(start, _u64(self.inc), n - have)
        with np.errstate(invalid="ignore", over="ignore"):
            n1, n2 = _normal_pairs(np.log(u_a), u_b, np.cos(_TWO_PI * u_b))
        self.n1 = np.concatenate([self.n1, n1]) if have else n1
        self.n2 = np.concatenate([self.n2, n2]) if have else n2

    def advanced(self, pairs: int) -> NoiseDraws:
        """The draws from ``pairs`` pairs further on (the kept pairs carry over)."""
        later = NoiseDraws(int(_pcg32_advance(_u64(self.state), _u64(self.inc), 2 * pairs)), self.inc)
        later.n1, later.n2 = self.n1[pairs:], self.n2[pairs:]
        later.used_last = pairs
        return later


def _noise_draws(streams: NoiseStreams) -> NoiseDraws:
    """The streams' ``NoiseDraws`` from the noise stream's current state (a new one when the
    state moved on without them, e.g. after ``process_beams`` of the numpy backend)."""
    draws = streams.noise_draws
    if not isinstance(draws, NoiseDraws) or not draws.matches(streams.noise):
        used_last = draws.used_last if isinstance(draws, NoiseDraws) else 0
        draws = NoiseDraws(streams.noise.state, streams.noise.inc)
        draws.used_last = used_last
        streams.noise_draws = draws
    return draws


def prefetch_noise_draws(streams: NoiseStreams, n_beams: int) -> int:
    """Form the noise pairs the next scan will probably use (the last scan's count plus a
    quarter, or one per beam when there was none), so that its ``finish_echoes`` only looks
    them up. Changes no number: the pairs are the stream's own. Returns the pairs held."""
    _check_numba()
    with _PARALLEL_LOCK:
        draws = _noise_draws(streams)
        want = draws.used_last + draws.used_last // 4 + 1024 if draws.used_last else int(n_beams)
        draws.extend(want)
        return int(draws.n1.shape[0])


def finish_echoes(blocks, params, options, atm, streams: NoiseStreams) -> Returns:
    """Complete the radiometry of a scan from its blocks (``prepare_echoes``): the clutter slabs
    (rain stream, ring-major), the echoes of blocks that need them (clutter, or a block whose
    sort span is below the scan's), the noise draws in ring-major order, detection and the
    returns. Gives the bits of one ``process_beams_compiled`` over the whole scan.

    Parameters
    ----------
    blocks : sequence of EchoBlock
        Their ``cells`` hold every cell of the scan once, in any order of blocks.
    params, options, atm, streams : as ``process_beams_compiled``

    Returns
    -------
    Returns of shape (columns * rings, R).

    Raises
    ------
    ValueError
        When the blocks' cells are not every cell once (nothing advances then).
    """
    _check_numba()
    n_beams = params.rings * params.columns
    for block in blocks:
        if block.cells.size and (block.cells.min() < 0 or block.cells.max() >= n_beams):
            raise ValueError(f"an EchoBlock has a cell outside 0 .. {n_beams - 1}")
    seen = (
        np.bincount(np.concatenate([block.cells for block in blocks]), minlength=n_beams)
        if blocks
        else np.zeros(n_beams, np.int64)
    )
    if not (seen == 1).all():
        raise ValueError(
            f"the blocks must hold each of the {n_beams} cells once; "
            f"{int((seen == 0).sum())} missing, {int((seen > 1).sum())} repeated"
        )
    with _PARALLEL_LOCK:
        return _finish_locked(list(blocks), params, options, atm, streams)


def _finish_locked(blocks, params, options, atm, streams) -> Returns:
    n_rings, n_columns = params.rings, params.columns
    n_beams = n_rings * n_columns
    chunk = _chunk_beams(n_beams)
    separation = float(params.min_return_separation_m)
    rain = streams.rain
    rain_state = _u64(rain.state)

    # --- Pass 2: clutter slabs of rain and fog (sequential: the rain stream's draws). ---
    slabs = None
    span = max([block.span for block in blocks] + [sort_span_m(float(params.range_m))])
    if _has_clutter(params, atm):
        nearest_solid = np.empty(n_beams)
        for block in blocks:
            nearest_solid[block.cells] = block.nearest_solid_m
        slab_start, slab_count, slab_range, slab_power, rain_state = _clutter(
            nearest_solid,
            n_columns,
            n_rings,
            float(params.min_range_m),
            separation,
            float(min(params.weather.clutter_max_range_m, params.range_m)),
            float(atm.drop_density_per_m3),
            float(params.weather.exit_diameter_m),
            float(params.beam_divergence_rad),
            float(np.pi * atm.beta_fog_per_m_sr * separation),
            float(np.pi * atm.beta_rain_per_m_sr * separation),
            float(params.signal_at_10pct_counts),
            params.ring_range_at_10pct_m,
            float(params.overlap_range_m),
            float(atm.alpha_per_m),
            float(params.ambient_counts),
            float(params.detection_threshold_counts),
            rain_state,
            _u64(rain.inc),
        )
        slabs = (slab_start, slab_count, slab_range, slab_power)
        span = max(span, _sort_span(_EMPTY, _EMPTY, slab_range))

    # --- Step 5 where the prepared echoes do not hold: clutter, or a smaller sort span. ---
    echoes = []
    for block in blocks:
        if block.echoes is None or (block.span != span and block.span > 0.0):
            echoes.append(_block_echoes(block, slabs, span, params, atm))
        else:
            echoes.append(block.echoes)

    # --- The scan's echo lists: the blocks' lists one after the other, echo_base by cell. ---
    if len(blocks) == 1 and np.array_equal(blocks[0].cells, np.arange(n_beams)):
        count, echo_base = echoes[0][0], echoes[0][1]
        lists = echoes[0][2:]
    else:
        count = np.zeros(n_beams, np.int64)
        echo_base = np.zeros(n_beams + 1, np.int64)
        offset = 0
        for block, block_echoes in zip(blocks, echoes):
            count[block.cells] = block_echoes[0]
            echo_base[block.cells] = block_echoes[1][:-1] + offset
            offset += int(block_echoes[1][-1])
        echo_base[n_beams] = offset
        lists = tuple(np.concatenate([block_echoes[i] for block_echoes in echoes]) for i in range(2, 12))
    e_range, e_rho, _, e_class, e_material, e_object, clear, signal, spread, sigma = lists

    # --- Pass 3: the echoes' draws (ring-major, looked up), detection, returns. ---
    noise = streams.noise
    draw_base, total = _draw_base(count, n_columns, n_rings)
    draws = _noise_draws(streams)
    draws.extend(int(total))
    fields = _returns(
        count,
        echo_base,
        draw_base,
        draws.n1,
        draws.n2,
        e_range,
        e_rho,
        clear,
        signal,
        spread,
        sigma,
        e_class,
        e_material,
        e_object,
        float(params.detection_threshold_counts),
        bool(options.noise),
        float(params.min_range_m),
        float(params.range_m),
        float(min(params.saturation_counts, 65535)),
        MODE_CODES[params.return_mode],
        params.returns_per_beam,
        chunk,
    )
    bright = fields[2] > 1.0
    if bright.any():  # IntensityByte's logarithmic scale, with numpy's log as the reference
        fields[4][bright] = intensity_byte(fields[2][bright])
    streams.noise_draws = draws.advanced(int(total))
    noise.state = streams.noise_draws.state
    rain.state = int(rain_state)
    names = (
        "range_m",
        "valid",
        "reflectivity",
        "signal",
        "intensity",
        "class_id",
        "material_id",
        "object_id",
        "return_flags",
    )
    return Returns(**dict(zip(names, fields)))
