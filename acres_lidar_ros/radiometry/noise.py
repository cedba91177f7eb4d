"""Numbers from a hash and the PCG32 noise streams (spec "Numbers from a Hash", "Random Numbers").

Two sources of randomness, and nothing else in the model draws numbers:

* **Hashes** (``mix64``, ``uniform_from_hash``, ``place_normal``, ``hash_normal``): fixed numbers
  of a place or of a (scan, beam, sub-ray) key. They never touch a generator, so the ground
  texture does not shift the noise stream (the spec: "The three terms and the self returns use
  a hash, not a random generator").
* **PCG32 streams** (``Pcg32``, ``NoiseStreams``): O'Neill's PCG32 (XSH RR 64/32). The LiDAR
  noise stream has the state ``seed + 2018`` and the sequence 3; the rain drop stream has the
  state ``seed + 4036`` and the sequence 5. Drawing ``n`` numbers is a numpy jump-ahead of the
  64-bit LCG, not a Python loop.

Standard normal numbers from PCG32 use the Box-Muller construction of ``place_normal``: two
consecutive 32-bit outputs ``x_a, x_b`` give the uniforms ``U_a = (x_a + 0.5) / 2^32`` and
``U_b = (x_b + 0.5) / 2^32`` (both strictly inside (0, 1)), ``r = sqrt(-2 ln U_a)`` and the
normal ``r cos(2 pi U_b)``. Where the model needs two normals at once (``n1`` and ``n2`` of an
echo) it takes both branches of one pair, ``n1 = r cos(2 pi U_b)`` and ``n2 = r sin(2 pi U_b)``:
two outputs per echo.

All 64-bit arithmetic wraps modulo 2^64, as in C++ ``uint64_t``.
"""

from __future__ import annotations

import numba
import numpy as np

from acres_lidar_ros.cores import map_parts, split_bounds

MASK64 = (1 << 64) - 1
MASK32 = (1 << 32) - 1

SPLITMIX_GAMMA = 0x9E3779B97F4A7C15
SPLITMIX_MUL1 = 0xBF58476D1CE4E5B9
SPLITMIX_MUL2 = 0x94D049BB133111EB
PLACE_SEED_MUL = 0x632BE59BD9B4E019

PCG32_MULT = 6364136223846793005

# Offsets of the two streams from the run's seed (spec "Random Numbers", "Clutter").
NOISE_STATE_OFFSET = 2018
NOISE_SEQUENCE = 3
RAIN_STATE_OFFSET = 4036
RAIN_SEQUENCE = 5

MIN_PAIRS_PER_PART = 8192
_U64 = np.uint64
_TWO_POW_53 = float(1 << 53)
_TWO_POW_32 = float(1 << 32)

# The constants as numba's typed globals: every uint64 operand is an np.uint64 (numba types
# uint64 op int64 as float64).
_GAMMA = _U64(SPLITMIX_GAMMA)
_MUL1 = _U64(SPLITMIX_MUL1)
_MUL2 = _U64(SPLITMIX_MUL2)
_PCG_MULT = _U64(PCG32_MULT)
_S3, _S11, _S18, _S24, _S27, _S30, _S31, _S59 = (_U64(k) for k in (3, 11, 18, 24, 27, 30, 31, 59))
_MASK32_U = _U64(MASK32)
_U32 = _U64(32)
_INV_TWO_POW_53 = 1.0 / _TWO_POW_53
_TWO_PI_OVER_TWO_POW_53 = 2.0 * np.pi / _TWO_POW_53
_jit = numba.njit(cache=True, nogil=True)


@_jit
def _mix(x):
    """The SplitMix64 finaliser of one uint64 (the equation of ``mix64``)."""
    x = x + _GAMMA
    x = (x ^ (x >> _S30)) * _MUL1
    x = (x ^ (x >> _S27)) * _MUL2
    return x ^ (x >> _S31)


@_jit
def _mix_array(a):
    out = np.empty_like(a)
    for i in range(a.shape[0]):
        out[i] = _mix(a[i])
    return out


@_jit
def _floor_cell(coordinate_m, cell_m):
    """``floor(X / s)`` as a signed 64-bit integer reinterpreted as uint64; non-finite X gives 0."""
    q = np.floor(coordinate_m / cell_m)
    if not np.isfinite(q):
        q = 0.0
    return _U64(np.int64(q))


@_jit
def place_hash_of(x_m: float, y_m: float, cell_m: float, seed_term: np.uint64) -> np.uint64:
    """``mix(mix(floor(X/s) xor seed_term) xor floor(Y/s))`` of one point (``place_hash``'s
    equation; ``seed_term = k * 0x632be59bd9b4e019``)."""
    return _mix(_mix(_floor_cell(x_m, cell_m) ^ seed_term) ^ _floor_cell(y_m, cell_m))


@_jit
def _place_hashes(x_m, y_m, cell_m, seed_term):
    out = np.empty(x_m.shape[0], np.uint64)
    for i in range(x_m.shape[0]):
        out[i] = place_hash_of(x_m[i], y_m[i], cell_m, seed_term)
    return out


@_jit
def roughness_hash_of(scan: np.uint64, beam: np.uint64, sub_ray: np.uint64, seed_term: np.uint64) -> np.uint64:
    """``mix(((scan << 24) | (beam << 3) | sub_ray) xor seed_term)`` of one key (``roughness_normal``'s
    hash; ``seed_term = mix((seed + 2) * 0x632be59bd9b4e019)``)."""
    return _mix(((scan << _S24) | (beam << _S3) | sub_ray) ^ seed_term)


@_jit
def _roughness_hashes(scan, beam, sub_ray, seed_term):
    out = np.empty(beam.shape[0], np.uint64)
    for i in range(beam.shape[0]):
        out[i] = roughness_hash_of(scan[i], beam[i], sub_ray[i], seed_term)
    return out


def place_seed_term(seed: int) -> np.uint64:
    """``k * 0x632be59bd9b4e019`` modulo 2^64: the seed term of ``place_hash`` for the key ``k``."""
    return _U64((int(seed) * PLACE_SEED_MUL) & MASK64)


def roughness_seed_term(seed: int) -> np.uint64:
    """``mix((seed + 2) * 0x632be59bd9b4e019)``: the seed term of the roughness hash."""
    return _U64(_mix(place_seed_term(int(seed) + ROUGHNESS_SEED_OFFSET)))


@_jit
def _hash_uniforms(h):
    """``U(h)`` and ``2 pi U(mix(h))`` of each hash: the radius and angle uniforms of ``hash_normal``."""
    n = h.shape[0]
    u = np.empty(n)
    angle = np.empty(n)
    for i in range(n):
        u[i] = (np.float64(h[i] >> _S11) + 0.5) * _INV_TWO_POW_53
        angle[i] = (np.float64(_mix(h[i]) >> _S11) + 0.5) * _TWO_PI_OVER_TWO_POW_53
    return u, angle


@_jit
def pcg32_step(state: np.uint64, inc: np.uint64) -> tuple[np.uint32, np.uint64]:
    """One PCG32 (XSH RR) output of ``state`` (uint64) and the next state: the generator's
    equation, which ``Pcg32`` and the compiled passes that draw (``clutter``) call."""
    xorshifted = (((state >> _S18) ^ state) >> _S27) & _MASK32_U
    rot = state >> _S59
    output = np.uint32(((xorshifted >> rot) | (xorshifted << ((_U32 - rot) & _S31))) & _MASK32_U)
    return output, state * _PCG_MULT + inc


@_jit
def uniform_of_u32(x: np.uint32) -> float:
    """``U = (x + 0.5) / 2^32`` in (0, 1) of one 32-bit output."""
    return (np.float64(x) + 0.5) / _TWO_POW_32


@_jit
def _pcg32_outputs(state, inc, n):
    """``n`` PCG32 outputs from ``state`` and the state after them."""
    out = np.empty(n, np.uint32)
    for i in range(n):
        out[i], state = pcg32_step(state, inc)
    return out, state


@_jit
def _uniforms(u32):
    out = np.empty(u32.shape[0])
    for i in range(u32.shape[0]):
        out[i] = uniform_of_u32(u32[i])
    return out


def _as_u64_array(x: np.ndarray | int) -> np.ndarray:
    a = np.asarray(x)
    if a.dtype == np.uint64:
        return a
    if a.dtype.kind == "i":
        return a.astype(np.int64).view(np.uint64)
    if a.dtype.kind == "u":
        return a.astype(np.uint64)
    raise TypeError(f"mix64 takes integers, got dtype {a.dtype}")


def mix64(x: np.ndarray | int) -> np.ndarray | int:
    """SplitMix64 finaliser ``mix(x)`` (AcresLidarPhysics::Mix64), wrapping 64-bit arithmetic.

    ``x += 0x9e3779b97f4a7c15; x = (x ^ x >> 30) * 0xbf58476d1ce4e5b9;
    x = (x ^ x >> 27) * 0x94d049bb133111eb; mix = x ^ x >> 31``.

    Parameters
    ----------
    x : int or (...) integer array
        A Python int is taken modulo 2^64 (negative ints as two's complement) and gives an int.
        Signed arrays are reinterpreted bit for bit as uint64.

    Returns
    -------
    int in [0, 2^64), or (...) uint64 array of the same shape.
    """
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return int(_mix(_U64(int(x) & MASK64)))
    a = _as_u64_array(x)
    return _mix_array(np.ascontiguousarray(a).reshape(-1)).reshape(a.shape)


def uniform_from_hash(h: np.ndarray | int) -> np.ndarray | float:
    """``U(h) = ((h >> 11) + 0.5) / 2^53``: a uniform number in (0, 1] from a 64-bit hash.

    Parameters
    ----------
    h : int or (...) uint64 array

    Returns
    -------
    float, or (...) float64. The value is in (0, 1); only ``h >> 11 = 2^53 - 1`` rounds to 1.0
    in double precision, as it does in C++.
    """
    if isinstance(h, (int, np.integer)) and not isinstance(h, bool):
        return (float((int(h) & MASK64) >> 11) + 0.5) / _TWO_POW_53
    a = _as_u64_array(h)
    return ((a >> _U64(11)).astype(np.float64) + 0.5) / _TWO_POW_53


def hash_normal(h: np.ndarray | int) -> np.ndarray | float:
    """Standard normal number of a hash: ``z = sqrt(-2 ln U(h)) cos(2 pi U(mix(h)))``.

    The construction of PlaceNormal, applied to any 64-bit key ``h`` (the roughness normal of a
    scan, beam and sub-ray uses it too). The uniforms come from a compiled integer pass, the
    logarithm and cosine from numpy's vectorised loops.

    Parameters
    ----------
    h : int or (...) uint64 array

    Returns
    -------
    float, or (...) float64; always finite (``U`` is never 0).
    """
    if isinstance(h, (int, np.integer)) and not isinstance(h, bool):
        return float(_hash_normals(np.array([int(h) & MASK64], dtype=np.uint64))[0])
    return _hash_normals(_as_u64_array(h))


def _hash_normals(a: np.ndarray) -> np.ndarray:
    """``hash_normal`` of a uint64 array (same shape)."""
    radius, angle = _hash_uniforms(np.ascontiguousarray(a).reshape(-1))
    np.log(radius, out=radius)
    radius *= -2.0
    np.sqrt(radius, out=radius)
    np.cos(angle, out=angle)
    radius *= angle
    return radius.reshape(a.shape)


def place_hash(x_m: np.ndarray | float, y_m: np.ndarray | float, cell_m: float, seed: int) -> np.ndarray:
    """``h = mix(mix(floor(X/s) xor (k * 0x632be59bd9b4e019)) xor floor(Y/s))``.

    Parameters
    ----------
    x_m, y_m : (...) float64 or float
        World coordinates of the point, m (broadcast together).
    cell_m : float
        Cell size ``s``, m (> 0).
    seed : int
        ``k``; the product ``k * 0x632be59bd9b4e019`` wraps modulo 2^64.

    Returns
    -------
    (...) uint64 (0-d for scalar inputs).
    """
    seed_term = place_seed_term(seed)
    x, y = np.broadcast_arrays(np.asarray(x_m, dtype=np.float64), np.asarray(y_m, dtype=np.float64))
    shape = x.shape
    h = _place_hashes(
        np.ascontiguousarray(x).reshape(-1), np.ascontiguousarray(y).reshape(-1), float(cell_m), seed_term
    )
    return h.reshape(shape)


def place_normal(x_m: np.ndarray | float, y_m: np.ndarray | float, cell_m: float, seed: int) -> np.ndarray | float:
    """PlaceNormal: the fixed standard normal number of the cell of size ``s`` holding (X, Y).

    ``h = mix(mix(floor(X/s) xor (k * 0x632be59bd9b4e019)) xor floor(Y/s))``,
    ``z = sqrt(-2 ln U(h)) cos(2 pi U(mix(h)))``, with ``floor(X/s)`` taken as a signed 64-bit
    integer and reinterpreted as uint64 for the xor.

    Parameters
    ----------
    x_m, y_m : (...) float64 or float
        World coordinates, m.
    cell_m : float
        Cell size ``s``, m: 0.25 for the micro-slope, 0.1 for the albedo texture.
    seed : int
        ``k``: the seed for the micro-slope, seed + 1 for the albedo texture.

    Returns
    -------
    float for scalar inputs, else (...) float64.
    """
    h = place_hash(x_m, y_m, cell_m, seed)
    if h.ndim != 1 or h.size < 2:
        return _hash_normals(h)
    # Neighbouring points (the sub-rays of a beam, the columns of a ring) often share a cell:
    # form the normal once per run of equal hashes (the same numbers, fewer logarithms).
    new_run = np.r_[True, h[1:] != h[:-1]]
    starts = np.flatnonzero(new_run)
    if starts.size > 0.8 * h.size:
        return _hash_normals(h)
    return _hash_normals(h[starts])[np.cumsum(new_run) - 1]


ROUGHNESS_SEED_OFFSET = 2


def roughness_normal(
    seed: int, scan_index: int | np.ndarray, beam: np.ndarray | int, sub_ray: np.ndarray | int
) -> np.ndarray:
    """The roughness normal ``z`` of a scan, beam and sub-ray, from a hash (no generator).

    ``key = (scan << 24) | (beam << 3) | sub_ray`` (a beam is a cell ``c N_r + r`` < 2^21, a
    sub-ray < 8, so keys of different triples differ), ``h = mix(key xor mix((seed + 2) *
    0x632be59bd9b4e019))`` and ``z = hash_normal(h)``. The seed term ``seed + 2`` keeps it apart
    from the micro-slope (seed) and albedo (seed + 1) cells.

    Parameters
    ----------
    seed : int
    scan_index : int or (n,) int, >= 0
    beam : (n,) int or int, 0 <= beam < 2^21
    sub_ray : (n,) int or int, 0 <= sub_ray < 8

    Returns
    -------
    (n,) float64 (broadcast shape of the inputs).
    """
    return keyed_normal(int(roughness_seed_term(seed)), scan_index, beam, sub_ray)


def keyed_normal(
    seed_term: int, scan_index: int | np.ndarray, beam: np.ndarray | int, slot: np.ndarray | int
) -> np.ndarray:
    """The normal number of a (scan, beam, slot) key under ``seed_term``, from a hash (no generator).

    ``h = mix(((scan << 24) | (beam << 3) | slot) xor seed_term)`` and ``z = hash_normal(h)``: the
    construction of ``roughness_normal``, whose ``seed_term`` is ``mix((seed + 2) *
    0x632be59bd9b4e019)``; other users pass their own term (``mechanical``).

    Parameters
    ----------
    seed_term : int in [0, 2^64)
    scan_index : int or (n,) int, >= 0
    beam : (n,) int or int, 0 <= beam < 2^21
    slot : (n,) int or int, 0 <= slot < 8

    Returns
    -------
    (n,) float64 (broadcast shape of the inputs).
    """
    term = _U64(int(seed_term) & MASK64)
    scan = _as_u64_array(np.asarray(scan_index, dtype=np.int64))
    b = _as_u64_array(np.asarray(beam, dtype=np.int64))
    j = _as_u64_array(np.asarray(slot, dtype=np.int64))
    scan, b, j = (np.ascontiguousarray(a).reshape(-1) for a in np.broadcast_arrays(np.atleast_1d(scan), b, j))
    shape = np.broadcast_shapes(np.shape(np.atleast_1d(scan_index)), np.shape(beam), np.shape(slot))
    return _hash_normals(_roughness_hashes(scan, b, j, term)).reshape(shape)


def normals_from_u32(u32: np.ndarray) -> np.ndarray:
    """Box-Muller normals from pairs of 32-bit outputs: ``(2n,) uint32 -> (n,) float64``.

    ``z_i = sqrt(-2 ln U_a) cos(2 pi U_b)`` with ``U_a = (u32[2i] + 0.5) / 2^32`` and
    ``U_b = (u32[2i + 1] + 0.5) / 2^32``.
    """
    u = uniforms_from_u32(u32)
    return np.sqrt(-2.0 * np.log(u[0::2])) * np.cos(2.0 * np.pi * u[1::2])


def normal_pairs_from_u32(u32: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both Box-Muller normals of each pair of 32-bit outputs: ``(2n,) uint32 -> 2 x (n,) float64``.

    With ``U_a = (u32[2i] + 0.5) / 2^32``, ``U_b = (u32[2i + 1] + 0.5) / 2^32`` and
    ``r = sqrt(-2 ln U_a)``: ``first_i = r cos(2 pi U_b)`` and ``second_i = r sin(2 pi U_b)``,
    two independent standard normals (the first equals ``normals_from_u32``). The sine is taken
    as ``+-sqrt(1 - cos^2)`` (sign + for ``U_b < 1/2``), which saves a second trigonometric pass
    and equals ``sin`` to a few units of rounding.
    """
    u = uniforms_from_u32(u32)
    u_b = np.ascontiguousarray(u[1::2])
    # numpy's vectorised log and cos; the rest in one compiled pass.
    return _box_muller_pairs(np.log(u[0::2]), u_b, np.cos(2.0 * np.pi * u_b))


@_jit
def _box_muller_pairs(log_u_a, u_b, cos_b):
    """``r cos`` and ``r sin`` with ``r = sqrt(-2 ln U_a)``; the sine is ``sqrt(1 - cos^2)``, its
    sign + for ``U_b < 1/2`` (equal to ``sin(2 pi U_b)`` to rounding)."""
    n = log_u_a.shape[0]
    first = np.empty(n)
    second = np.empty(n)
    for i in range(n):
        radius = np.sqrt(-2.0 * log_u_a[i])
        cosine = cos_b[i]
        sine = np.sqrt(max(0.0, 1.0 - cosine * cosine))
        if not u_b[i] < 0.5:
            sine = -sine
        first[i] = radius * cosine
        second[i] = radius * sine
    return first, second


def uniforms_from_u32(u32: np.ndarray) -> np.ndarray:
    """``U = (x + 0.5) / 2^32`` in (0, 1) for each 32-bit output; (n,) -> (n,) float64."""
    a = np.asarray(u32)
    return _uniforms(np.ascontiguousarray(a, dtype=np.uint32).reshape(-1)).reshape(a.shape)


class Pcg32:
    """O'Neill's PCG32 (pcg32_random_r: 64-bit LCG state, XSH RR output).

    ``Pcg32(initstate, initseq)`` seeds as ``pcg32_srandom_r``: ``inc = (initseq << 1) | 1``,
    ``state = 0``, step, ``state += initstate``, step. Each output is computed from the state
    before the step ``state = state * 6364136223846793005 + inc``.

    The output function is written once (``_pcg32_outputs``, a compiled loop over the LCG
    steps); ``next_u32`` and ``next_u32_array`` both call it.

    Attributes
    ----------
    state : int
        Current 64-bit state.
    inc : int
        Odd 64-bit increment selecting the sequence.
    """

    def __init__(self, initstate: int, initseq: int) -> None:
        self.inc = ((int(initseq) << 1) | 1) & MASK64
        self.state = 0
        self._step()
        self.state = (self.state + int(initstate)) & MASK64
        self._step()

    def _step(self) -> None:
        self.state = (self.state * PCG32_MULT + self.inc) & MASK64

    def copy(self) -> Pcg32:
        """An independent generator in the same state."""
        other = Pcg32.__new__(Pcg32)
        other.inc = self.inc
        other.state = self.state
        return other

    def next_u32(self) -> int:
        """The next 32-bit output, as an int in [0, 2^32)."""
        return int(self.next_u32_array(1)[0])

    def _jump(self, steps: int) -> tuple[int, int]:
        """Multiplier and increment of ``steps`` LCG steps (O'Neill's pcg_advance_lcg_64)."""
        acc_mult, acc_plus = 1, 0
        cur_mult, cur_plus = PCG32_MULT, self.inc
        delta = steps & MASK64
        while delta > 0:
            if delta & 1:
                acc_mult = (acc_mult * cur_mult) & MASK64
                acc_plus = (acc_plus * cur_mult + cur_plus) & MASK64
            cur_plus = ((cur_mult + 1) * cur_plus) & MASK64
            cur_mult = (cur_mult * cur_mult) & MASK64
            delta >>= 1
        return acc_mult, acc_plus

    def advance(self, steps: int) -> None:
        """Skip ``steps`` outputs (``steps`` modulo 2^64) in O(log steps)."""
        mult, plus = self._jump(steps)
        self.state = (self.state * mult + plus) & MASK64

    def next_u32_array(self, n: int) -> np.ndarray:
        """The next ``n`` outputs as an (n,) uint32 array, advancing the state by ``n``."""
        n = int(n)
        if n < 0:
            raise ValueError(f"cannot draw a negative count of numbers: {n}")
        if n == 0:
            return np.zeros(0, dtype=np.uint32)
        out, state = _pcg32_outputs(_U64(self.state), _U64(self.inc), n)
        self.state = int(state)
        return out

    def next_normal_array(self, n: int) -> np.ndarray:
        """``n`` standard normals from ``2 n`` outputs (Box-Muller, cosine branch; see module)."""
        return normals_from_u32(self.next_u32_array(2 * int(n)))

    def next_normal_pairs(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """``n`` pairs of standard normals from ``2 n`` outputs (both Box-Muller branches).

        Pair ``i`` uses outputs ``2i`` and ``2i + 1``: ``(r cos(2 pi U_b), r sin(2 pi U_b))``.
        """
        return normal_pairs_from_u32(self.next_u32_array(2 * int(n)))

    def next_uniform_array(self, n: int) -> np.ndarray:
        """``n`` uniforms ``(x + 0.5) / 2^32`` in (0, 1), one output each."""
        return uniforms_from_u32(self.next_u32_array(n))


class NoiseStreams:
    """The two generators of a run; they persist across its scans.

    Attributes
    ----------
    seed : int
        The run's seed (also the key of the ground hashes: seed and seed + 1).
    noise : Pcg32
        LiDAR noise: state ``seed + 2018``, sequence 3 (n1 and n2 of each echo).
    rain : Pcg32
        Rain drops: state ``seed + 4036``, sequence 5 (drop counts and energies of clutter slabs).
    pairs_used_last : int
        Noise pairs the last ``noise_pairs`` took (what the next scan will probably take).

    The noise pairs are a function of the stream's position alone, so they can be formed before
    the scan that takes them is traced (``draw_ahead``); ``noise_pairs`` then takes them without
    forming them again. Either way the numbers are the stream's own (``Pcg32.next_normal_pairs``).
    """

    def __init__(self, seed: int) -> None:
        self.seed = int(seed)
        self.noise = Pcg32((self.seed + NOISE_STATE_OFFSET) & MASK64, NOISE_SEQUENCE)
        self.rain = Pcg32((self.seed + RAIN_STATE_OFFSET) & MASK64, RAIN_SEQUENCE)
        self.pairs_used_last = 0
        self._ahead: tuple[int, np.ndarray, np.ndarray] | None = None  # (state, n1, n2) formed ahead

    def copy(self) -> NoiseStreams:
        """Independent streams in the same states (the same seed)."""
        other = NoiseStreams.__new__(NoiseStreams)
        other.seed = self.seed
        other.noise = self.noise.copy()
        other.rain = self.rain.copy()
        other.pairs_used_last = self.pairs_used_last
        other._ahead = self._ahead
        return other

    def _pairs_ahead(self) -> tuple[np.ndarray, np.ndarray]:
        ahead = self._ahead
        if ahead is None or ahead[0] != self.noise.state:
            return np.zeros(0), np.zeros(0)
        return ahead[1], ahead[2]

    @property
    def pairs_ahead(self) -> int:
        """Noise pairs formed ahead at the stream's position (``draw_ahead``)."""
        return int(self._pairs_ahead()[0].size)

    def draw_ahead(self, n: int, split: bool = True) -> int:
        """Form at least the next ``n`` noise pairs without moving the stream; returns how many
        are held. ``split``: a large draw is shared between the cores (``cores.map_parts``);
        False forms it in the calling thread alone (a draw that itself runs in the pool)."""
        n1, n2 = self._pairs_ahead()
        have = n1.size
        if n > have:

            def part(lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:  # pairs have + lo .. have + hi - 1
                generator = self.noise.copy()
                generator.advance(2 * (have + lo))  # O(log n) jump: the parts can be formed side by side
                return generator.next_normal_pairs(hi - lo)

            more = int(n) - have
            parts = map_parts(part, split_bounds(more, MIN_PAIRS_PER_PART) if split else np.array([0, more]))
            more1, more2 = (np.concatenate([p[k] for p in parts]) if len(parts) > 1 else parts[0][k] for k in (0, 1))
            n1, n2 = (np.concatenate([n1, more1]), np.concatenate([n2, more2])) if have else (more1, more2)
            self._ahead = (self.noise.state, n1, n2)
        return int(n1.size)

    def noise_pairs(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """The next ``n`` pairs ``(n1, n2)`` of the noise stream, as ``noise.next_normal_pairs(n)``
        gives them (from the pairs formed ahead where there are); the stream advances by ``2 n``."""
        n = int(n)
        self.draw_ahead(n)
        n1, n2 = self._pairs_ahead()
        self.noise.advance(2 * n)
        self._ahead = (self.noise.state, n1[n:], n2[n:])
        self.pairs_used_last = int(n)
        return n1[:n], n2[:n]
