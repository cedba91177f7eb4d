"""Hashes and PCG32 streams against published reference values and plain-Python references."""

from __future__ import annotations

import math

import numpy as np
import pytest

from acres_lidar_ros.radiometry.noise import (
    MASK64,
    NoiseStreams,
    Pcg32,
    hash_normal,
    mix64,
    normal_pairs_from_u32,
    normals_from_u32,
    place_hash,
    place_normal,
    roughness_normal,
    uniform_from_hash,
)

# ---------------------------------------------------------------------------------------------
# Plain-Python references, written from the published algorithms, independent of the module.
# ---------------------------------------------------------------------------------------------


def splitmix64_sequence(seed: int, count: int) -> list[int]:
    """Vigna's splitmix64.c next(): state += gamma, then the finaliser."""
    state = seed
    out = []
    for _ in range(count):
        state = (state + 0x9E3779B97F4A7C15) & MASK64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        out.append(z ^ (z >> 31))
    return out


class ReferencePcg32:
    """O'Neill's pcg_basic.c: pcg32_srandom_r and pcg32_random_r, line by line."""

    def __init__(self, initstate: int, initseq: int) -> None:
        self.state = 0
        self.inc = ((initseq << 1) | 1) & MASK64
        self.next()
        self.state = (self.state + initstate) & MASK64
        self.next()

    def next(self) -> int:
        old = self.state
        self.state = (old * 6364136223846793005 + self.inc) & MASK64
        xorshifted = (((old >> 18) ^ old) >> 27) & 0xFFFFFFFF
        rot = old >> 59
        return ((xorshifted >> rot) | (xorshifted << ((-rot) & 31))) & 0xFFFFFFFF


def reference_place_normal(x: float, y: float, s: float, k: int) -> float:
    """The spec's PlaceNormal with Python ints: floor(X/s) as signed 64-bit, two's complement."""

    def mix(v: int) -> int:
        return splitmix64_sequence(v, 1)[0]  # splitmix64 next() from state v is mix(v)

    def u(h: int) -> float:
        return ((h >> 11) + 0.5) / 2.0**53

    cx = math.floor(x / s) & MASK64
    cy = math.floor(y / s) & MASK64
    h = mix(mix(cx ^ ((k * 0x632BE59BD9B4E019) & MASK64)) ^ cy)
    return math.sqrt(-2.0 * math.log(u(h))) * math.cos(2.0 * math.pi * u(mix(h)))


# ---------------------------------------------------------------------------------------------
# SplitMix64
# ---------------------------------------------------------------------------------------------


def test_splitmix64_published_outputs_for_seed_1234567():
    # splitmix64.c from seed 1234567 prints these first outputs; output i is mix(seed + i * gamma)
    # because the spec's mix adds gamma first.
    published = [6457827717110365317, 3203168211198807973, 9817491932198370423]
    reference = splitmix64_sequence(1234567, 5)
    assert reference[:3] == published
    ours = [mix64((1234567 + i * 0x9E3779B97F4A7C15) & MASK64) for i in range(5)]
    assert ours == reference


def test_mix64_array_matches_int_and_keeps_shape():
    values = [0, 1, 2**63, MASK64, 1234567, 0xDEADBEEFCAFEBABE]
    arr = np.array(values, dtype=np.uint64).reshape(2, 3)
    mixed = mix64(arr)
    assert mixed.shape == (2, 3) and mixed.dtype == np.uint64
    assert [int(v) for v in mixed.ravel()] == [mix64(v) for v in values]


def test_mix64_reads_signed_values_as_twos_complement():
    assert int(mix64(np.array([-1], dtype=np.int64))[0]) == mix64(MASK64) == mix64(-1)


def test_uniform_from_hash_ends_and_middle():
    assert uniform_from_hash(0) == 0.5 / 2.0**53
    # (2^53 - 1) + 0.5 is not a double; it rounds to 2^53, so U = 1.0 exactly (as in C++).
    assert uniform_from_hash(MASK64) == 1.0
    assert uniform_from_hash(1 << 63) == ((1 << 52) + 0.5) / 2.0**53
    arr = uniform_from_hash(np.array([0, 1 << 63], dtype=np.uint64))
    assert arr.tolist() == [0.5 / 2.0**53, ((1 << 52) + 0.5) / 2.0**53]


# ---------------------------------------------------------------------------------------------
# PlaceNormal and the roughness hash
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "x, y, cell, seed",
    [(1.3, -2.7, 0.25, 7), (-0.1, -0.1, 0.1, 0), (1234.56, 789.01, 0.25, 2**40 + 3), (-5e3, 4e3, 0.1, -9)],
)
def test_place_normal_matches_reference(x, y, cell, seed):
    expected = reference_place_normal(x, y, cell, seed)
    assert place_normal(x, y, cell, seed) == pytest.approx(expected, abs=1e-15)
    arr = place_normal(np.array([x, x]), np.array([y, y]), cell, seed)
    assert arr.shape == (2,) and np.all(arr == arr[0])
    assert arr[0] == pytest.approx(expected, abs=1e-15)


def test_place_normal_is_constant_within_a_cell_and_changes_between_cells():
    # 0.26 and 0.49 are both in cell floor(x / 0.25) = 1; 0.51 is in cell 2.
    a = place_normal(0.26, 0.1, 0.25, 3)
    assert place_normal(0.49, 0.2, 0.25, 3) == a
    assert place_normal(0.51, 0.1, 0.25, 3) != a
    # The seed k changes the field (micro-slope uses seed, albedo seed + 1).
    assert place_normal(0.26, 0.1, 0.25, 4) != a


def test_place_normal_is_standard_normal_over_many_cells():
    rng = np.random.default_rng(0)
    n = 200_000
    z = place_normal(rng.uniform(-1e3, 1e3, n), rng.uniform(-1e3, 1e3, n), 0.1, 11)
    # Standard errors: mean 1/sqrt(n) = 0.0022, std about 0.0016; tolerances are over 4 sigma.
    assert abs(z.mean()) < 0.01
    assert abs(z.std() - 1.0) < 0.008


def test_place_hash_shape_follows_broadcast():
    h = place_hash(np.zeros((2, 3)), 0.0, 0.25, 1)
    assert h.shape == (2, 3) and h.dtype == np.uint64


def test_hash_normal_construction():
    h = 0x0123456789ABCDEF
    u1 = ((h >> 11) + 0.5) / 2.0**53
    u2 = ((mix64(h) >> 11) + 0.5) / 2.0**53
    assert hash_normal(h) == pytest.approx(math.sqrt(-2 * math.log(u1)) * math.cos(2 * math.pi * u2), abs=1e-15)


def py_mix(x: int) -> int:
    """``mix(x)`` in plain Python: the first output of the published splitmix64.c from state x
    (the state step adds the gamma, then the finaliser)."""
    return splitmix64_sequence(x, 1)[0]


@pytest.mark.parametrize("seed", [0, 1, 5, 9, 2**40 + 3])  # seed terms both below and above 2^63
def test_roughness_normal_is_a_documented_hash_of_scan_beam_subray(seed):
    scan, beam, j = 12, 3456, 2
    key = (scan << 24) | (beam << 3) | j
    h = py_mix(key ^ py_mix(((seed + 2) * 0x632BE59BD9B4E019) & MASK64))
    z = roughness_normal(seed, scan, np.array([beam]), np.array([j]))
    assert z.shape == (1,)
    assert z[0] == pytest.approx(hash_normal(h), abs=1e-15)
    # A new number for each scan, beam and sub-ray.
    others = [
        roughness_normal(seed, scan + 1, np.array([beam]), np.array([j]))[0],
        roughness_normal(seed, scan, np.array([beam + 1]), np.array([j]))[0],
        roughness_normal(seed, scan, np.array([beam]), np.array([j + 1]))[0],
        roughness_normal(seed + 1, scan, np.array([beam]), np.array([j]))[0],
    ]
    assert all(o != z[0] for o in others)
    # Standard normal over many beams (standard errors 0.0022 and 0.0016).
    many = roughness_normal(seed, scan, np.arange(200_000) // 7, np.arange(200_000) % 7)
    assert abs(many.mean()) < 0.01 and abs(many.std() - 1.0) < 0.008


# ---------------------------------------------------------------------------------------------
# PCG32
# ---------------------------------------------------------------------------------------------


def test_pcg32_reference_sequence_of_pcg32_demo():
    # pcg32-demo (pcg-c-basic) seeds with initstate 42, initseq 54 and prints these first.
    published = [0xA15C02B7, 0x7B47F409, 0xBA1D3330, 0x83D2F293, 0xBFA4784B, 0xCBED606E]
    ref = ReferencePcg32(42, 54)
    assert [ref.next() for _ in range(6)] == published
    gen = Pcg32(42, 54)
    assert [gen.next_u32() for _ in range(6)] == published


def test_pcg32_array_draws_equal_the_scalar_sequence_across_chunk_sizes():
    ref = ReferencePcg32(0xDEADBEEF, 17)
    expected = [ref.next() for _ in range(2000)]
    gen = Pcg32(0xDEADBEEF, 17)
    got: list[int] = []
    for chunk in (1, 7, 0, 300, 5, 1187, 500):
        arr = gen.next_u32_array(chunk)
        assert arr.dtype == np.uint32 and arr.shape == (chunk,)
        got.extend(int(v) for v in arr)
    assert got == expected
    assert gen.state == ref.state


def test_pcg32_advance_skips_and_wraps_the_period():
    gen = Pcg32(42, 54)
    ref = ReferencePcg32(42, 54)
    for _ in range(1000):
        ref.next()
    gen.advance(1000)
    assert gen.next_u32() == ref.next()
    # The LCG has period 2^64: advancing by 2^64 - 1 after one step returns to the start.
    start = Pcg32(42, 54)
    first = start.copy().next_u32()
    start.next_u32()
    start.advance((1 << 64) - 1)
    assert start.next_u32() == first


def test_pcg32_copy_is_independent():
    a = Pcg32(1, 2)
    b = a.copy()
    assert a.next_u32() == b.next_u32()
    a.next_u32()
    assert a.state != b.state


def test_normals_from_u32_box_muller_by_hand():
    x_a, x_b = 2**31, 2**30
    u_a = (x_a + 0.5) / 2**32
    u_b = (x_b + 0.5) / 2**32  # about 1/4: cos about 0, sin about 1
    r = math.sqrt(-2.0 * math.log(u_a))
    z = normals_from_u32(np.array([x_a, x_b], dtype=np.uint32))
    assert z.shape == (1,)
    assert z[0] == pytest.approx(r * math.cos(2 * math.pi * u_b), abs=1e-15)
    first, second = normal_pairs_from_u32(np.array([x_a, x_b], dtype=np.uint32))
    assert first[0] == z[0]
    assert second[0] == pytest.approx(r * math.sin(2 * math.pi * u_b), abs=1e-12)
    # The sine's sign follows U_b: 3/4 of a turn gives sin = -1.
    _, low = normal_pairs_from_u32(np.array([x_a, 3 * 2**30], dtype=np.uint32))
    assert low[0] == pytest.approx(-r, rel=1e-9)


def test_normal_pairs_are_independent_standard_normals():
    n1, n2 = Pcg32(9, 3).next_normal_pairs(200_000)
    # Standard errors about 0.0022 (mean), 0.0016 (std), 0.0022 (correlation); 4 sigma and more.
    for z in (n1, n2):
        assert abs(z.mean()) < 0.01
        assert abs(z.std() - 1.0) < 0.008
    assert abs(np.corrcoef(n1, n2)[0, 1]) < 0.01
    # Tail check: P(z > 1.2816) = 0.1 for a standard normal; sd of the estimate 0.00067.
    assert abs(np.mean(n1 > 1.2815515655446004) - 0.1) < 0.003


def test_pcg32_rejects_negative_counts():
    with pytest.raises(ValueError, match="negative"):
        Pcg32(1, 1).next_u32_array(-1)


def test_noise_streams_use_the_spec_states_and_sequences():
    streams = NoiseStreams(100)
    noise_ref = ReferencePcg32(100 + 2018, 3)
    rain_ref = ReferencePcg32(100 + 4036, 5)
    assert [int(v) for v in streams.noise.next_u32_array(4)] == [noise_ref.next() for _ in range(4)]
    assert [int(v) for v in streams.rain.next_u32_array(4)] == [rain_ref.next() for _ in range(4)]
    copy = streams.copy()
    assert copy.seed == 100
    assert copy.noise.next_u32() == streams.noise.next_u32()
