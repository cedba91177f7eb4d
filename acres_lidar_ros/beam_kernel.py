"""Compiled backend of ``beam_model.process_beams``: the spec's ProcessBeam in numba loops.

``process_beams_compiled`` takes the same inputs as ``beam_model.process_beams`` and gives the
same ``Returns``; ``beam_model`` stays the readable numpy reference and this module follows it
step by step (the numbered steps of its module notes). Compiled passes do the hashing, the
branching, the echoes and the PCG32 draws; the transcendental functions are taken from the same
place as in the reference, so the two backends agree bit for bit in clear air:

1. **Reached hits** (``_reached_hits``, cells in order): the foliage transmission product, and
   for ground hits the SplitMix64 hashes of the three terms, as the uniforms of their normals
   (a hit in the same cell as the previous ground hit of its ring reuses that normal).
2. numpy turns the uniforms into normals (``log``, ``sqrt``) and takes ``arccos`` of the ground
   cosines; ``_ground_tilt`` tilts them; numpy takes the albedo ``exp``, the roughness ``pow``
   and, where a material has them, ``|cos|^k`` and the specular lobe; ``_hit_power`` moves the
   ranges and forms the power and echo stretch; ``_lit_contributions`` keeps the lit ones.
3. **Clutter** (``_clutter``, rain and fog with clutter on; beams in ring-major sequence): the
   slabs of each beam, the rain drops from the rain stream and the skip rule.
4. **Echoes** (``_echoes``, beams in ring-major sequence, the noise stream's natural order):
   sort by range, echo formation, the two outputs of each echo; numpy takes ``log U_a``,
   ``expm1`` of the overlap and the extinction ``exp``; ``_echo_signals`` forms the signal and
   detection, ``_select_returns`` the returns, range noise and brightness.

Which library computes what: numpy's float64 ``log``, ``exp``, ``expm1``, ``arccos`` and
``power`` are its own SIMD loops, so they are called on arrays here too; its ``cos`` and
``hypot`` call the C library, as numba's ``math.cos`` and ``math.hypot`` do, so the compiled
loops call those themselves (``sqrt`` is exact everywhere). The kernels use the reference's
order of operations, its stable sort key ``beam * span + R`` (with the same power-of-two
``span``) and numpy's summation order of ``np.add.reduceat`` (the first element plus the
pairwise sum of the rest). The clutter pass still takes ``exp`` and ``log`` from the C library,
so in rain and fog a precipitation echo's range and reflectivity may differ by a few ulps.

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

import numpy as np

from acres_lidar_ros.hits import NO_OBJECT, Hits
from acres_lidar_ros.materials import CLASS_ID, CLASS_NAMES, IS_FOLIAGE_CLASS, MATERIAL_OF_CLASS
from acres_lidar_ros.noise import (
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
from acres_lidar_ros.physics import COS_FLOOR, HURST_EXPONENT, MAX_TILT_RAD, ROUGH_COS_MIN, SNR_FLOOR, intensity_byte
from acres_lidar_ros.returns import FLAG_FIRST, FLAG_LAST, FLAG_SECOND_STRONGEST, FLAG_STRONGEST, Returns
from acres_lidar_ros.weather import MAX_DROPS_PER_SLAB, _POISSON_SATURATED_MEAN

try:
    import numba
except ImportError as error:  # kept; raised when the numba backend is asked for
    numba = None
    NUMBA_IMPORT_ERROR: ImportError | None = error
else:
    NUMBA_IMPORT_ERROR = None


def _jit(function=None, *, inline: bool = False):
    """``numba.njit(cache=True)``, or the plain function when numba is missing (then
    ``process_beams_compiled`` raises the import error before any kernel is called).

    ``inline`` inlines the function into its callers at numba's level: helpers that take
    arrays are inlined so the hot loops make no calls that count references (atomic
    increments that cost more than the helpers' work).
    """
    if function is None:
        return lambda f: _jit(f, inline=inline)
    if numba is None:
        return function
    return numba.njit(cache=True, inline="always" if inline else "never")(function)



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


@_jit
def _reached_hits(
    hit_range_m, hit_valid, hit_class, hit_material, hit_cos, weights, origins, directions,
    transmission, micro_slope_rad, reflectivity_sd, roughness_m, incidence_exponent, specular, specular_width_rad,
    is_foliage, foliage_solid, ground_class, rings,
    slope_seed_term, albedo_seed_term, rough_seed_term, scan_index,
):
    """Step 1 and the hash half of step 2: no transcendental function here.

    Lists the hits that light reaches (``T > 0``), beam by beam in (sub-ray, slot) order:
    ``start (n_beams + 1,)``, ``row, slot (n,) int64``, ``range_m, cos_theta (clipped |cos|),
    t (T in front), tau (n,) float64``, ``passes (n,) bool``, ``ground (n,) int64`` (position in
    the ground list or -1). The ground list (``ground_hit (G,)``) carries for each of its three
    terms the index of its normal (``z_index (3, G)``, -1 when the term is off); the normals
    are listed once per distinct hash (a hit in the same 0.25 m or 0.1 m cell as the previous
    ground hit of its ring reuses that one) as the argument of the log, ``U(h)``, and the
    angle ``2 pi U(mix h)`` (``normal_u, normal_angle (U,)``). ``pow_hits`` and ``lobe_hits``
    list the hits whose backscatter needs ``|cos|^k`` (``k`` not 0 or 1) or the specular lobe.
    Returns ``status`` first (0, or the first bad input).
    """
    n_rows, k_slots = hit_range_m.shape
    n_sub = weights.shape[0]
    n_beams = n_rows // n_sub
    n_classes = is_foliage.shape[0]
    n_materials = transmission.shape[0]
    capacity = 0
    n_ground = 0
    for row in range(n_rows):
        for k in range(k_slots):
            if hit_valid[row, k]:
                capacity += 1
                if hit_class[row, k] == ground_class:
                    n_ground += 1
    start = np.zeros(n_beams + 1, np.int64)
    out_row = np.empty(capacity, np.int64)
    out_slot = np.empty(capacity, np.int64)
    out_range = np.empty(capacity)
    out_cos = np.empty(capacity)
    out_t = np.empty(capacity)
    out_tau = np.empty(capacity)
    out_passes = np.empty(capacity, np.bool_)
    out_ground = np.empty(capacity, np.int64)
    ground_hit = np.empty(n_ground, np.int64)
    z_index = np.full((3, n_ground), -1, np.int64)
    normal_u = np.empty(3 * n_ground)
    normal_angle = np.empty(3 * n_ground)
    pow_hits = np.empty(capacity, np.int64)
    lobe_hits = np.empty(capacity, np.int64)
    last_hash = np.zeros((2, rings), np.uint64)
    last_normal = np.full((2, rings), -1, np.int64)
    scan_key = _U64(scan_index) << _SHIFT_24
    n = 0
    g = 0
    u = 0
    n_pow = 0
    n_lobe = 0
    status = 0
    for beam in range(n_beams):
        start[beam] = n
        ring = beam % rings
        beam_key = scan_key | (_U64(beam) << _SHIFT_3)
        for j in range(n_sub):
            row = beam * n_sub + j
            t = 1.0
            for k in range(k_slots):
                if not hit_valid[row, k]:
                    continue
                cls = np.int64(hit_class[row, k])
                mat = np.int64(hit_material[row, k])
                if mat >= n_materials:
                    status = _BAD_MATERIAL
                    break
                if cls >= n_classes and not foliage_solid:
                    status = _BAD_CLASS
                    break
                passes = (not foliage_solid) and is_foliage[cls]
                tau = transmission[mat] if passes else 0.0
                t_hit = t
                t = t * tau
                if not t_hit > 0.0:
                    continue  # behind a solid surface: no light
                range_m = hit_range_m[row, k]
                if not (range_m >= 0.0 and math.isfinite(range_m)):
                    status = _BAD_RANGE
                    break
                out_row[n] = row
                out_slot[n] = k
                out_range[n] = range_m
                out_cos[n] = min(max(abs(hit_cos[row, k]), 0.0), 1.0)
                out_t[n] = t_hit
                out_tau[n] = tau
                out_passes[n] = passes
                out_ground[n] = -1
                k_exp = incidence_exponent[mat]
                if k_exp != 0.0 and k_exp != 1.0:
                    pow_hits[n_pow] = n
                    n_pow += 1
                if specular[mat] > 0.0 and specular_width_rad[mat] > 0.0:
                    lobe_hits[n_lobe] = n
                    n_lobe += 1
                if cls == ground_class:
                    out_ground[n] = g
                    ground_hit[g] = n
                    point_x = origins[row, 0] + range_m * directions[row, 0]
                    point_y = origins[row, 1] + range_m * directions[row, 1]
                    for term in range(3):
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
            if status != 0:
                break
        if status != 0:
            break
    start[n_beams] = n
    return (status, start, out_row[:n], out_slot[:n], out_range[:n], out_cos[:n], out_t[:n], out_tau[:n],
            out_passes[:n], out_ground[:n], ground_hit[:g], z_index[:, :g], normal_u[:u], normal_angle[:u],
            pow_hits[:n_pow], lobe_hits[:n_lobe])


@_jit
def _cosines(angle):
    """``cos`` of each angle: the C library's, which numpy's float64 ``cos`` also calls."""
    out = np.empty(angle.shape[0])
    for i in range(angle.shape[0]):
        out[i] = math.cos(angle[i])
    return out


@_jit
def _ground_tilt(ground_hit, material, z_index, z, theta, cos_theta, micro_slope_rad, reflectivity_sd, roughness_m):
    """Step 2, the micro-slope: ``cos theta' = cos(clamp(theta + sigma_t z, 0, MAX_TILT))`` of each
    ground hit, written into ``cos_theta``; returns the albedo's exponent ``s_rho z - s_rho^2 / 2``
    and the roughness cosine ``clamp(|cos theta'|, 0.05, 1)`` (G,) (0 and 1 where off)."""
    n_ground = ground_hit.shape[0]
    albedo_exponent = np.zeros(n_ground)
    rough_cos = np.ones(n_ground)
    for g in range(n_ground):
        i = ground_hit[g]
        mat = material[i]
        angle = theta[g]
        sigma_t = micro_slope_rad[mat]
        if sigma_t > 0.0:
            angle = angle + sigma_t * z[z_index[0, g]]
        c = math.cos(min(max(angle, 0.0), MAX_TILT_RAD))
        cos_theta[i] = c
        s_rho = reflectivity_sd[mat]
        if s_rho > 0.0:
            albedo_exponent[g] = s_rho * z[z_index[1, g]] - 0.5 * (s_rho * s_rho)
        if roughness_m[mat] > 0.0:
            rough_cos[g] = min(max(abs(c), ROUGH_COS_MIN), 1.0)
    return albedo_exponent, rough_cos


@_jit
def _hit_power(
    row, slot, range_m, cos_theta, t, tau, passes, ground, material, z_index, z, albedo, rough_pow,
    incidence, lobe, hit_class, hit_wetness, weights, ground_class,
    reflectivity, wet_darkening, incidence_exponent, roughness_m, pulse_length_m, divergence_rad, divergence_v_rad,
):
    """Steps 2 (roughness) and 3 for each reached hit: its range (moved by the roughness), its
    power ``P`` and its echo stretch ``g``, written in place into ``range_m`` and returned as
    ``power, peak (n,)``. ``incidence`` holds ``|cos|^k`` where ``k`` is not 0 or 1 and ``lobe``
    the specular lobe ``s exp(-(theta / theta_s)^2)`` (0 where none), both from numpy."""
    n = row.shape[0]
    n_sub = weights.shape[0]
    power = np.empty(n)
    peak = np.empty(n)
    for i in range(n):
        mat = material[i]
        r = range_m[i]
        c = cos_theta[i]
        g = ground[i]
        a = 1.0
        if g >= 0:
            a = albedo[g]
            sigma_h = roughness_m[mat]
            if sigma_h > 0.0:
                moved = r + sigma_h / rough_pow[g] * z[z_index[2, g]]
                r = max(MIN_ROUGH_RANGE_M, moved)
                range_m[i] = r
        k_exp = incidence_exponent[mat]
        floored = max(c, COS_FLOOR)
        if k_exp == 1.0:
            inc = floored
        elif k_exp == 0.0:
            inc = 1.0
        else:
            inc = incidence[i]
        hit_row = row[i]
        k = slot[i]
        darkening = max(0.0, 1.0 - wet_darkening[mat] * hit_wetness[hit_row, k])
        rho_bs = reflectivity[mat] * darkening * inc + lobe[i]
        j = hit_row % n_sub
        power[i] = weights[j] * t[i] * t[i] * (1.0 - tau[i]) * rho_bs * a
        g_peak = 1.0
        if pulse_length_m > 0.0 and not passes[i]:
            cc = min(max(c, COS_FLOOR), 1.0)
            div = divergence_v_rad if np.int64(hit_class[hit_row, k]) == ground_class else divergence_rad
            spread = r * (math.sqrt(1.0 - cc * cc) / cc) * div
            g_peak = pulse_length_m / math.hypot(pulse_length_m, spread)
        peak[i] = g_peak
    return power, peak


@_jit
def _lit_contributions(start, range_m, power, peak, passes, row, slot, hit_class, hit_material, hit_object):
    """The lit contributions (``P > 0``) of each beam in one compact list (``lit_start
    (n_beams + 1,)``, ``range_m, power, peak``, ``class, material, object``) and the nearest
    solid range of each beam (inf where none): the reached hits, beam by beam."""
    n_beams = start.shape[0] - 1
    n = range_m.shape[0]
    lit = 0
    for i in range(n):
        if power[i] > 0.0:
            lit += 1
    lit_start = np.empty(n_beams + 1, np.int64)
    out_range = np.empty(lit)
    out_power = np.empty(lit)
    out_peak = np.empty(lit)
    out_class = np.empty(lit, np.uint8)
    out_material = np.empty(lit, np.uint8)
    out_object = np.empty(lit, np.int32)
    nearest_solid = np.full(n_beams, np.inf)
    m = 0
    for beam in range(n_beams):
        lit_start[beam] = m
        for i in range(start[beam], start[beam + 1]):
            if not passes[i] and range_m[i] < nearest_solid[beam]:
                nearest_solid[beam] = range_m[i]
            if not power[i] > 0.0:
                continue
            r = row[i]
            k = slot[i]
            out_range[m] = range_m[i]
            out_power[m] = power[i]
            out_peak[m] = peak[i]
            out_class[m] = hit_class[r, k]
            out_material[m] = hit_material[r, k]
            out_object[m] = hit_object[r, k]
            m += 1
    lit_start[n_beams] = m
    return lit_start, out_range, out_power, out_peak, out_class, out_material, out_object, nearest_solid


# ---------------------------------------------------------------------------------------------
# Pass 2: clutter slabs
# ---------------------------------------------------------------------------------------------


@_jit
def _clutter(
    nearest_solid, columns, rings, min_range_m, slab_length_m, stop_limit_m,
    drop_density_per_m3, exit_diameter_m, divergence_rad,
    fog_term, rain_coefficient, s10, ring_r10, overlap_range_m, alpha, ambient, threshold,
    rain_state, rain_inc,
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
            signal = _signal_from_geometry(fog_term + rain_coefficient * 0.0, geometry_k[k], 1.0, s10, ring_r10[ring], extinction_k[k])
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
def _echoes(
    hit_start, hit_range_m, hit_power, hit_peak, hit_class, hit_material, hit_object,
    slab_start, slab_count, slab_range_m, slab_power, precipitation_class, precipitation_material,
    columns, rings, separation_m, overlap_range_m, noise_state, noise_inc,
):
    """Step 5 and the draws of step 6, beams in ring-major sequence (the noise stream's order).

    Contributions of a beam are its hits (``hit_*``, ``hit_start (n_beams + 1,)``) and its kept
    clutter slabs (``slab_*``). Returns the echoes in drawing order: ``echo_start (n_beams + 1,)``
    by ring-major position, ``beam (E,) int64``, ``range_m, reflectance, peak (E,)`` (``R_e``,
    ``rho_e``, ``g_e``), ``class, material, object`` of the largest contribution, the uniforms
    ``u_a, u_b (E,)`` of the echo's two outputs, ``x = (R_e / R_ov)^2 (E,)`` and the noise
    stream's new state.
    """
    n_beams = columns * rings
    n_contrib = hit_range_m.shape[0] + slab_range_m.shape[0]
    echo_start = np.zeros(n_beams + 1, np.int64)
    e_beam = np.empty(n_contrib, np.int64)
    e_range = np.empty(n_contrib)
    e_rho = np.empty(n_contrib)
    e_peak = np.empty(n_contrib)
    e_class = np.empty(n_contrib, np.uint8)
    e_material = np.empty(n_contrib, np.uint8)
    e_object = np.empty(n_contrib, np.int32)
    u_a = np.empty(n_contrib)
    u_b = np.empty(n_contrib)
    x = np.empty(n_contrib)
    if n_contrib == 0:
        return echo_start, e_beam, e_range, e_rho, e_peak, e_class, e_material, e_object, u_a, u_b, x, noise_state
    # numpy's sort key beam * span + R, span a power of two above every lit range.
    largest_m = -np.inf
    for i in range(hit_range_m.shape[0]):
        largest_m = max(largest_m, hit_range_m[i])
    for i in range(slab_range_m.shape[0]):
        largest_m = max(largest_m, slab_range_m[i])
    span = 2.0 ** math.ceil(math.log2(largest_m + 2.0))
    safe_ov = overlap_range_m if overlap_range_m > 0.0 else 1.0

    capacity = 1
    for beam in range(n_beams):
        capacity = max(capacity, hit_start[beam + 1] - hit_start[beam] + slab_count[beam])
    key = np.empty(capacity)
    c_range = np.empty(capacity)
    c_power = np.empty(capacity)
    c_peak = np.empty(capacity)
    c_class = np.empty(capacity, np.uint8)
    c_material = np.empty(capacity, np.uint8)
    c_object = np.empty(capacity, np.int32)
    order = np.empty(capacity, np.int64)
    s_range = np.empty(capacity)
    s_power = np.empty(capacity)
    s_power_range = np.empty(capacity)
    s_power_peak = np.empty(capacity)
    starts = np.empty(capacity, np.int64)
    state = noise_state
    e = 0
    position = 0
    for ring in range(rings):
        for column in range(columns):
            beam = column * rings + ring
            echo_start[position] = e
            position += 1
            n = 0
            for i in range(hit_start[beam], hit_start[beam + 1]):
                c_range[n] = hit_range_m[i]
                c_power[n] = hit_power[i]
                c_peak[n] = hit_peak[i]
                c_class[n] = hit_class[i]
                c_material[n] = hit_material[i]
                c_object[n] = hit_object[i]
                n += 1
            for i in range(slab_start[beam], slab_start[beam] + slab_count[beam]):
                c_range[n] = slab_range_m[i]
                c_power[n] = slab_power[i]
                c_peak[n] = 1.0
                c_class[n] = precipitation_class
                c_material[n] = precipitation_material
                c_object[n] = NO_OBJECT
                n += 1
            if n == 0:
                continue
            # Stable sort by numpy's key (insertion: a beam has few contributions).
            beam_offset = np.float64(beam) * span
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
                range_e = (s_power_range[lo] + rest_power_range) / rho_e
                largest = lo
                for i in range(lo + 1, hi):
                    if s_power[i] > s_power[largest]:
                        largest = i
                o = order[largest]
                e_beam[e] = beam
                e_range[e] = range_e
                e_rho[e] = rho_e
                e_peak[e] = (s_power_peak[lo] + rest_power_peak) / rho_e
                e_class[e] = c_class[o]
                e_material[e] = c_material[o]
                e_object[e] = c_object[o]
                out_a, state = _pcg32_next(state, noise_inc)
                out_b, state = _pcg32_next(state, noise_inc)
                u_a[e] = _uniform_u32(out_a)
                u_b[e] = _uniform_u32(out_b)
                ratio = abs(range_e) / safe_ov
                x[e] = ratio * ratio
                e += 1
    echo_start[n_beams] = e
    return (echo_start, e_beam[:e], e_range[:e], e_rho[:e], e_peak[:e], e_class[:e], e_material[:e],
            e_object[:e], u_a[:e], u_b[:e], x[:e], state)


@_jit
def _echo_signals(
    beam, range_m, reflectance, peak, log_u_a, u_b, x, expm1_minus_x, extinction, rings,
    s10, ring_r10, overlap_range_m, alpha, ambient, threshold, noise_on, min_range_m, max_range_m,
):
    """Step 6 for each echo: ``n1, n2`` from the echo's uniforms (``ln U_a`` from numpy), the
    clear signal ``S_c``, the measured signal ``S'`` and detection. ``expm1_minus_x`` is
    ``expm1(-x)`` and ``extinction`` ``exp(-2 alpha R_e)`` (used when ``alpha > 0``), both from
    numpy. Returns ``clear, measured, n2 (E,)`` and ``detected (E,) bool``."""
    n = beam.shape[0]
    clear = np.empty(n)
    measured = np.empty(n)
    n2 = np.empty(n)
    detected = np.empty(n, np.bool_)
    safe_ov = overlap_range_m if overlap_range_m > 0.0 else 1.0
    for e in range(n):
        radius = math.sqrt(-2.0 * log_u_a[e])
        cosine = math.cos(_TWO_PI * u_b[e])
        sine = math.sqrt(max(0.0, 1.0 - cosine * cosine))
        if not u_b[e] < 0.5:
            sine = -sine
        n2[e] = radius * sine
        r = range_m[e]
        xe = x[e]
        f = -expm1_minus_x[e] / xe if xe > 0.0 else 1.0
        geometry = f / (safe_ov * safe_ov)
        if not overlap_range_m > 0.0:
            near = max(abs(r), 1e-3)
            geometry = 1.0 / (near * near)
        r10 = ring_r10[beam[e] % rings]
        c = s10 * (reflectance[e] / 0.1) * (r10 * r10) * geometry * peak[e]
        clear[e] = c
        signal = c * extinction[e] if alpha > 0.0 else c
        m = signal + math.sqrt(max(signal + ambient, 0.0)) * (radius * cosine) if noise_on else signal
        measured[e] = m
        detected[e] = m >= threshold and r >= min_range_m and r <= max_range_m
    return clear, measured, n2, detected


@_jit
def _select_returns(
    echo_start, beam, range_m, reflectance, clear, measured, n2, detected, e_class, e_material, e_object,
    columns, rings, alpha, extinction, ambient, s10, noise_on, std_m, range_std_low_snr_m, max_range_m,
    signal_limit, mode, slots,
):
    """Step 7 for every beam: the returns among its detected echoes, with the range noise and the
    brightness of the chosen ones. Returns the nine (n_beams, slots) fields of ``Returns`` and
    the flat indices of the returns whose reflectivity is above 1 (their intensity byte needs
    numpy's logarithm; they hold 0 here)."""
    n_beams = columns * rings
    out_range = np.full((n_beams, slots), np.nan)
    out_valid = np.zeros((n_beams, slots), np.bool_)
    out_reflectivity = np.zeros((n_beams, slots))
    out_signal = np.zeros((n_beams, slots), np.uint16)
    out_intensity = np.zeros((n_beams, slots), np.uint8)
    out_class = np.zeros((n_beams, slots), np.uint8)
    out_material = np.zeros((n_beams, slots), np.uint8)
    out_object = np.full((n_beams, slots), NO_OBJECT, np.int32)
    out_flags = np.zeros((n_beams, slots), np.uint8)
    bright = np.empty(n_beams * slots, np.int64)
    n_bright = 0
    most = 1
    for p in range(n_beams):
        most = max(most, echo_start[p + 1] - echo_start[p])
    found = np.empty(most, np.int64)
    cand_idx = np.empty(3, np.int64)
    cand_flag = np.empty(3, np.uint8)
    total_spec = s10 + ambient
    snr_spec = s10 / math.sqrt(total_spec) if total_spec > 0.0 else 0.0
    for p in range(n_beams):
        n_detected = 0
        for e in range(echo_start[p], echo_start[p + 1]):
            if detected[e]:
                found[n_detected] = e
                n_detected += 1
        if n_detected == 0:
            continue
        strongest = 0
        for i in range(1, n_detected):
            if measured[found[i]] > measured[found[strongest]]:
                strongest = i
        second = -1
        if mode == 3 and n_detected >= 2:
            for i in range(n_detected):
                if i != strongest and (second < 0 or measured[found[i]] > measured[found[second]]):
                    second = i
        m = _candidates(mode, 0, n_detected - 1, strongest, second, cand_idx, cand_flag)
        for slot in range(min(m, slots)):
            e = found[cand_idx[slot]]
            b = beam[e]
            signal = clear[e] * extinction[e] if alpha > 0.0 else clear[e]
            if noise_on:
                total = signal + ambient
                snr = signal / math.sqrt(total) if total > 0.0 else 0.0
                sigma_r = math.hypot(std_m, range_std_low_snr_m * snr_spec / max(snr, SNR_FLOOR))
                range_meas = min(max(range_m[e] + sigma_r * n2[e], 0.0), max_range_m)
            else:
                range_meas = min(max(range_m[e], 0.0), max_range_m)
            s_meas = measured[e]
            c = clear[e]
            reflectivity = reflectance[e] * max(s_meas, 0.0) / c if c > 0.0 else 0.0
            out_range[b, slot] = range_meas
            out_valid[b, slot] = True
            out_reflectivity[b, slot] = reflectivity
            out_signal[b, slot] = np.uint16(np.floor(min(max(s_meas, 0.0), signal_limit) + 0.5))
            if reflectivity > 1.0:
                bright[n_bright] = b * slots + slot
                n_bright += 1
            else:
                out_intensity[b, slot] = np.uint8(_intensity_byte(reflectivity))
            out_class[b, slot] = e_class[e]
            out_material[b, slot] = e_material[e]
            out_object[b, slot] = e_object[e]
            out_flags[b, slot] = cand_flag[slot]
    return (out_range, out_valid, out_reflectivity, out_signal, out_intensity, out_class,
            out_material, out_object, out_flags, bright[:n_bright])


# ---------------------------------------------------------------------------------------------
# The backend's entry point
# ---------------------------------------------------------------------------------------------

_FOLIAGE_CLASS_TABLE = np.ascontiguousarray(IS_FOLIAGE_CLASS, dtype=np.bool_)
_GROUND_CLASS = CLASS_ID["ground"]
PRECIPITATION_CLASS = CLASS_ID["precipitation"]
PRECIPITATION_MATERIAL = int(MATERIAL_OF_CLASS[PRECIPITATION_CLASS])


def _u64(value: int) -> np.uint64:
    return np.uint64(int(value) & MASK64)


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
    """ProcessBeam for every beam of a scan in compiled passes (``backend="numba"``).

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
    if NUMBA_IMPORT_ERROR is not None:
        raise ImportError(
            "process_beams(backend='numba') needs numba (pip install numba), "
            "or use backend='numpy'"
        ) from NUMBA_IMPORT_ERROR
    mats = params.materials
    seed = int(streams.seed)
    n_rings, n_columns = params.rings, params.columns
    n_beams = n_rings * n_columns
    hit_range = np.ascontiguousarray(hits.range_m, dtype=np.float64)
    hit_class = np.ascontiguousarray(hits.class_id, dtype=np.uint8)
    hit_material = np.ascontiguousarray(hits.material_id, dtype=np.uint8)
    weights = np.ascontiguousarray(weights, dtype=np.float64)

    # --- Pass 1: reached hits and the hashes of the ground terms (no transcendentals). ---
    (status, start, row, slot, range_m, cos_theta, t_hit, tau, passes, ground, ground_hit, z_index,
     normal_u, normal_angle, pow_hits, lobe_hits) = _reached_hits(
        hit_range,
        np.ascontiguousarray(hits.valid, dtype=np.bool_),
        hit_class,
        hit_material,
        np.ascontiguousarray(hits.cos_incidence, dtype=np.float64),
        weights,
        np.ascontiguousarray(origins, dtype=np.float64),
        np.ascontiguousarray(directions, dtype=np.float64),
        mats.transmission, mats.micro_slope_rad, mats.reflectivity_sd, mats.roughness_m,
        mats.incidence_exponent, mats.specular, mats.specular_width_rad,
        _FOLIAGE_CLASS_TABLE, bool(options.foliage_solid), _GROUND_CLASS, n_rings,
        _u64(seed * PLACE_SEED_MUL),
        _u64((seed + 1) * PLACE_SEED_MUL),
        _u64(mix64(((seed + ROUGHNESS_SEED_OFFSET) * PLACE_SEED_MUL) & MASK64)),
        int(scan_index),
    )
    if status == _BAD_RANGE:
        raise ValueError("hits: every valid hit needs a finite range_m >= 0")
    if status in (_BAD_CLASS, _BAD_MATERIAL):
        what = "class_id" if status == _BAD_CLASS else "material_id"
        size = len(CLASS_NAMES) if status == _BAD_CLASS else mats.reflectivity.size
        raise IndexError(f"hits.{what}: a valid hit has a number outside the table of {size} entries")
    material = hit_material[row, slot].astype(np.intp)

    # --- Step 2 with numpy's transcendentals between compiled loops (hash_normal's order). ---
    z = np.log(normal_u)
    z *= -2.0
    np.sqrt(z, out=z)
    z *= _cosines(normal_angle)
    theta = np.arccos(cos_theta[ground_hit])
    albedo_exponent, rough_cos = _ground_tilt(ground_hit, material, z_index, z, theta, cos_theta,
        mats.micro_slope_rad, mats.reflectivity_sd, mats.roughness_m,
    )
    albedo = np.exp(albedo_exponent)
    rough_pow = np.power(rough_cos, _ROUGH_EXPONENT)
    # MinnaertBackscatter's |cos|^k (k not 0 or 1) and specular lobe, where a material has them.
    incidence = _EMPTY
    if pow_hits.size:
        incidence = np.zeros(range_m.size)
        incidence[pow_hits] = np.maximum(cos_theta[pow_hits], COS_FLOOR) ** mats.incidence_exponent[material[pow_hits]]
    lobe = np.zeros(range_m.size)
    if lobe_hits.size:
        lobe_mat = material[lobe_hits]
        ratio = np.arccos(cos_theta[lobe_hits]) / mats.specular_width_rad[lobe_mat]
        lobe[lobe_hits] = mats.specular[lobe_mat] * np.exp(-np.square(ratio))
    power, peak = _hit_power(row, slot, range_m, cos_theta, t_hit, tau, passes, ground, material, z_index, z, albedo,
        rough_pow, incidence, lobe, hit_class, np.ascontiguousarray(hits.wetness, dtype=np.float64), weights,
        _GROUND_CLASS, mats.reflectivity, mats.wet_darkening, mats.incidence_exponent, mats.roughness_m,
        float(params.pulse_length_m), float(params.beam_divergence_rad), float(params.beam_divergence_v_rad),
    )
    hit_start, h_range, h_power, h_peak, h_class, h_material, h_object, nearest_solid = _lit_contributions(
        start, range_m, power, peak, passes, row, slot, hit_class, hit_material,
        np.ascontiguousarray(hits.object_id, dtype=np.int32),
    )

    # --- Pass 2: clutter slabs of rain and fog. ---
    separation = float(params.min_return_separation_m)
    rain = streams.rain
    rain_state = _u64(rain.state)
    if atm.has_clutter and separation > 0.0:
        slab_start, slab_count, slab_range, slab_power, rain_state = _clutter(
            nearest_solid, n_columns, n_rings, float(params.min_range_m), separation,
            float(min(params.weather.clutter_max_range_m, params.range_m)),
            float(atm.drop_density_per_m3), float(params.weather.exit_diameter_m), float(params.beam_divergence_rad),
            float(np.pi * atm.beta_fog_per_m_sr * separation), float(np.pi * atm.beta_rain_per_m_sr * separation),
            float(params.signal_at_10pct_counts), params.ring_range_at_10pct_m, float(params.overlap_range_m),
            float(atm.alpha_per_m), float(params.ambient_counts), float(params.detection_threshold_counts),
            rain_state, _u64(rain.inc),
        )
    else:
        slab_start = np.zeros(n_beams, np.int64)
        slab_count = np.zeros(n_beams, np.int64)
        slab_range = _EMPTY
        slab_power = _EMPTY

    # --- Pass 3: echoes and their draws (ring-major), signals, returns. ---
    noise = streams.noise
    overlap = float(params.overlap_range_m)
    (echo_start, e_beam, e_range, e_rho, e_peak, e_class, e_material, e_object, u_a, u_b, x,
     noise_state) = _echoes(
        hit_start, h_range, h_power, h_peak, h_class, h_material, h_object,
        slab_start, slab_count, slab_range, slab_power, PRECIPITATION_CLASS, PRECIPITATION_MATERIAL,
        n_columns, n_rings, separation, overlap, _u64(noise.state), _u64(noise.inc),
    )
    alpha = float(atm.alpha_per_m)
    extinction = np.exp(-2.0 * alpha * e_range) if alpha > 0.0 else e_range
    clear, measured, n2, detected = _echo_signals(e_beam, e_range, e_rho, e_peak, np.log(u_a), u_b, x, np.expm1(-x), extinction, n_rings,
        float(params.signal_at_10pct_counts), params.ring_range_at_10pct_m, overlap, alpha,
        float(params.ambient_counts), float(params.detection_threshold_counts), bool(options.noise),
        float(params.min_range_m), float(params.range_m),
    )
    *fields, bright = _select_returns(
        echo_start, e_beam, e_range, e_rho, clear, measured, n2, detected, e_class, e_material, e_object,
        n_columns, n_rings, alpha, extinction, float(params.ambient_counts), float(params.signal_at_10pct_counts),
        bool(options.noise), float(params.std_m), float(params.range_std_low_snr_m), float(params.range_m),
        float(min(params.saturation_counts, 65535)), MODE_CODES[params.return_mode], params.returns_per_beam,
    )
    if bright.size:  # IntensityByte's logarithmic scale, with numpy's log as the reference
        fields[4].reshape(-1)[bright] = intensity_byte(fields[2].reshape(-1)[bright])
    noise.state = int(noise_state)
    rain.state = int(rain_state)
    names = ("range_m", "valid", "reflectivity", "signal", "intensity", "class_id", "material_id", "object_id", "return_flags")
    return Returns(**dict(zip(names, fields)))
