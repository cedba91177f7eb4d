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

import numpy as np

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

_U64 = np.uint64
_TWO_POW_53 = float(1 << 53)
_TWO_POW_32 = float(1 << 32)


def _mix64_int(x: int) -> int:
    x = (x + SPLITMIX_GAMMA) & MASK64
    x = ((x ^ (x >> 30)) * SPLITMIX_MUL1) & MASK64
    x = ((x ^ (x >> 27)) * SPLITMIX_MUL2) & MASK64
    return x ^ (x >> 31)


def _mix64_array(x: np.ndarray, overwrite: bool = False) -> np.ndarray:
    """mix of a 1-d uint64 array; ``overwrite`` lets it work in place in ``x`` (fewer temporaries)."""
    # Arrays (not numpy scalars) wrap silently on overflow, which is the uint64 arithmetic we want.
    x = np.add(x, _U64(SPLITMIX_GAMMA), out=x if overwrite else None)
    t = x >> _U64(30)
    x ^= t
    x *= _U64(SPLITMIX_MUL1)
    np.right_shift(x, _U64(27), out=t)
    x ^= t
    x *= _U64(SPLITMIX_MUL2)
    np.right_shift(x, _U64(31), out=t)
    x ^= t
    return x


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
        return _mix64_int(int(x) & MASK64)
    a = _as_u64_array(x)
    return _mix64_array(a.reshape(-1)).reshape(a.shape)


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
    scan, beam and sub-ray uses it too).

    Parameters
    ----------
    h : int or (...) uint64 array

    Returns
    -------
    float, or (...) float64; always finite (``U`` is never 0).
    """
    if isinstance(h, (int, np.integer)) and not isinstance(h, bool):
        return float(hash_normal(np.array([int(h) & MASK64], dtype=np.uint64))[0])
    a = _as_u64_array(h)
    shape = a.shape
    a = a.reshape(-1)
    radius = (a >> _U64(11)).astype(np.float64)
    radius += 0.5
    radius *= 1.0 / _TWO_POW_53  # exact: a power of two
    np.log(radius, out=radius)
    radius *= -2.0
    np.sqrt(radius, out=radius)
    m = _mix64_array(a)
    angle = (m >> _U64(11)).astype(np.float64)
    angle += 0.5
    angle *= 2.0 * np.pi / _TWO_POW_53
    np.cos(angle, out=angle)
    radius *= angle
    return radius.reshape(shape)


def _floor_cell(coordinate_m: np.ndarray, cell_m: float) -> np.ndarray:
    """``floor(X / s)`` as signed 64-bit, reinterpreted as uint64; non-finite X gives cell 0."""
    q = np.floor(np.asarray(coordinate_m, dtype=np.float64) / cell_m)
    q = np.where(np.isfinite(q), q, 0.0)
    return q.astype(np.int64).view(np.uint64)


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
    seed_term = _U64((int(seed) * PLACE_SEED_MUL) & MASK64)
    cx = np.atleast_1d(_floor_cell(x_m, cell_m))
    cy = np.atleast_1d(_floor_cell(y_m, cell_m))
    cx, cy = np.broadcast_arrays(cx, cy)
    h = cx ^ seed_term
    h = _mix64_array(h.reshape(-1), overwrite=True)
    h ^= cy.reshape(-1)
    h = _mix64_array(h, overwrite=True)
    shape = np.broadcast_shapes(np.shape(x_m), np.shape(y_m))
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
    return hash_normal(place_hash(x_m, y_m, cell_m, seed))


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
    seed_term = _U64(_mix64_int(((int(seed) + ROUGHNESS_SEED_OFFSET) * PLACE_SEED_MUL) & MASK64))
    scan = np.atleast_1d(_as_u64_array(np.asarray(scan_index, dtype=np.int64)))
    b = np.atleast_1d(_as_u64_array(np.asarray(beam, dtype=np.int64)))
    j = np.atleast_1d(_as_u64_array(np.asarray(sub_ray, dtype=np.int64)))
    scan, b, j = np.broadcast_arrays(scan, b, j)
    key = (scan << _U64(24)) | (b << _U64(3)) | j
    key ^= seed_term
    return hash_normal(_mix64_array(key.reshape(-1), overwrite=True).reshape(key.shape))


def _pcg32_output(old_state: np.ndarray) -> np.ndarray:
    """XSH RR output of PCG32 from the state before the step; (n,) uint64 -> (n,) uint32."""
    xorshifted = (((old_state >> _U64(18)) ^ old_state) >> _U64(27)).astype(np.uint32)
    rot = (old_state >> _U64(59)).astype(np.uint32)
    return (xorshifted >> rot) | (xorshifted << ((np.uint32(32) - rot) & np.uint32(31)))


def normals_from_u32(u32: np.ndarray) -> np.ndarray:
    """Box-Muller normals from pairs of 32-bit outputs: ``(2n,) uint32 -> (n,) float64``.

    ``z_i = sqrt(-2 ln U_a) cos(2 pi U_b)`` with ``U_a = (u32[2i] + 0.5) / 2^32`` and
    ``U_b = (u32[2i + 1] + 0.5) / 2^32``.
    """
    u = (np.asarray(u32, dtype=np.float64) + 0.5) / _TWO_POW_32
    return np.sqrt(-2.0 * np.log(u[0::2])) * np.cos(2.0 * np.pi * u[1::2])


def normal_pairs_from_u32(u32: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both Box-Muller normals of each pair of 32-bit outputs: ``(2n,) uint32 -> 2 x (n,) float64``.

    With ``U_a = (u32[2i] + 0.5) / 2^32``, ``U_b = (u32[2i + 1] + 0.5) / 2^32`` and
    ``r = sqrt(-2 ln U_a)``: ``first_i = r cos(2 pi U_b)`` and ``second_i = r sin(2 pi U_b)``,
    two independent standard normals (the first equals ``normals_from_u32``). The sine is taken
    as ``+-sqrt(1 - cos^2)`` (sign + for ``U_b < 1/2``), which saves a second trigonometric pass
    and equals ``sin`` to a few units of rounding.
    """
    u = (np.asarray(u32, dtype=np.float64) + 0.5) / _TWO_POW_32
    radius = np.sqrt(-2.0 * np.log(u[0::2]))
    u_b = u[1::2]
    cosine = np.cos(2.0 * np.pi * u_b)
    # sin(2 pi U_b) from the cosine: its sign is + for U_b < 1/2; equal to sin to rounding.
    sine = np.sqrt(np.maximum(0.0, 1.0 - cosine * cosine))
    sine = np.where(u_b < 0.5, sine, -sine)
    return radius * cosine, radius * sine


def uniforms_from_u32(u32: np.ndarray) -> np.ndarray:
    """``U = (x + 0.5) / 2^32`` in (0, 1) for each 32-bit output; (n,) -> (n,) float64."""
    return (np.asarray(u32, dtype=np.float64) + 0.5) / _TWO_POW_32


class Pcg32:
    """O'Neill's PCG32 (pcg32_random_r: 64-bit LCG state, XSH RR output).

    ``Pcg32(initstate, initseq)`` seeds as ``pcg32_srandom_r``: ``inc = (initseq << 1) | 1``,
    ``state = 0``, step, ``state += initstate``, step. Each output is computed from the state
    before the step ``state = state * 6364136223846793005 + inc``.

    ``next_u32_array(n)`` jumps the LCG ahead with cached tables of ``a^i`` and
    ``c (a^i - 1) / (a - 1)`` (mod 2^64), so ``n`` draws cost a few numpy operations; the result
    is bit-identical to ``n`` calls of ``next_u32``.

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
        self._mult_table = np.ones(1, dtype=np.uint64)  # a^i, i = 0 .. len-1
        self._add_table = np.zeros(1, dtype=np.uint64)  # c (a^i - 1) / (a - 1)

    def _step(self) -> None:
        self.state = (self.state * PCG32_MULT + self.inc) & MASK64

    def copy(self) -> Pcg32:
        """An independent generator in the same state."""
        other = Pcg32.__new__(Pcg32)
        other.inc = self.inc
        other.state = self.state
        other._mult_table = self._mult_table
        other._add_table = self._add_table
        return other

    def next_u32(self) -> int:
        """The next 32-bit output, as an int in [0, 2^32)."""
        old = self.state
        self._step()
        xorshifted = (((old >> 18) ^ old) >> 27) & MASK32
        rot = old >> 59
        return ((xorshifted >> rot) | (xorshifted << ((-rot) & 31))) & MASK32

    def _ensure_tables(self, n: int) -> None:
        if len(self._mult_table) >= n:
            return
        mult, add = self._mult_table, self._add_table
        a, c = _U64(PCG32_MULT), _U64(self.inc)
        while len(mult) < n:
            # With m entries (0 .. m-1 steps), the jump of m steps is the last entry plus one step;
            # then m + i steps = i steps followed by m steps: A_m A_i, A_m C_i + C_m.
            a_m = mult[-1:] * a
            c_m = add[-1:] * a + c
            mult = np.concatenate([mult, mult * a_m])
            add = np.concatenate([add, add * a_m + c_m])
        self._mult_table, self._add_table = mult, add

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
        self._ensure_tables(n)
        states = self._mult_table[:n] * _U64(self.state) + self._add_table[:n]
        self.advance(n)
        return _pcg32_output(states)

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

    def draw_ahead(self, n: int) -> int:
        """Form at least the next ``n`` noise pairs without moving the stream; returns how many
        are held."""
        n1, n2 = self._pairs_ahead()
        have = n1.size
        if n > have:
            generator = self.noise.copy()
            generator.advance(2 * have)
            more1, more2 = generator.next_normal_pairs(int(n) - have)
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
