"""The numba backend of process_beams against the numpy reference, and its building blocks.

The two backends must give the same returns: the discrete fields (valid, class, material,
object, flags, signal counts, intensity bytes) exactly, and the float fields (range,
reflectivity) to a few ulps. The float differences come from the math library: the compiled
passes take cos, exp, expm1 of slabs, acos of specular lobes and the powers from the C library
(numpy from its SIMD loops), form ``hypot(a, b)`` as ``sqrt(a^2 + b^2)`` and the roughness
``c^1.5`` as ``c sqrt(c)``; an ulp there goes through the products, sums and divisions of the
range equation: the bounds are ``MAX_ULPS`` (in clear air, ``CLEAR_MAX_ULPS``). On these tests
and the full Polaris and 7-sub-ray farm scans no discrete field differs (no signal or detection
flip at a rounding edge), so none is allowed.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.radiometry import beam_kernel
from acres_lidar_ros.radiometry.beam_model import (
    BACKENDS,
    RETURN_MODES,
    BeamModelOptions,
    BeamModelParams,
    process_beams,
)
from acres_lidar_ros.radiometry.noise import NoiseStreams, Pcg32, hash_normal, mix64, place_normal, roughness_normal
from acres_lidar_ros.tracing.hits import Hits

pytest.importorskip("numba")

EXACT_FIELDS = ("valid", "signal", "intensity", "class_id", "material_id", "object_id", "return_flags")
MAX_ULPS = {"range_m": 8, "reflectivity": 256}
CLEAR_MAX_ULPS = {"range_m": 4, "reflectivity": 16}
"""Clear air, seen on these tests and the full farm scans: 2 and 4."""
"""Largest difference of the float fields, in ulps of the value (seen on these tests: 3 and 63).
The reflectivity is ``rho_e S' / S_c`` with ``S' = S + sqrt(S + B) n1``: where ``n1 < 0`` the
sum cancels, and an ulp of ``S`` becomes ``S / S'`` ulps of ``S'`` (up to tens of ulps)."""
FLOAT_FIELDS = tuple(MAX_ULPS)
RAIN = dict(rain_mm_per_h=10.0, visibility_m=2000.0)


# ---------------------------------------------------------------------------------------------
# Scans of the built-in farm: hits from the tracer, as the Scanner makes them
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def farm():
    from acres_lidar_ros.scene import build_default_farm, default_tour
    from acres_lidar_ros.sensor.poses import PoseHistory

    scene = build_default_farm()
    times, positions, quaternions = default_tour(scene)
    poses = PoseHistory.from_arrays(times, positions, quaternions, where="built-in tour")
    return scene, poses, float(times[0])


def _scan_inputs(farm, sensor: str, overrides: dict, foliage_solid: bool, at_s: float):
    from acres_lidar_ros.config.sensors import load_sensor_config
    from acres_lidar_ros.scan import Scanner, ScanOptions

    scene, poses, t0 = farm
    config = load_sensor_config(sensor).with_overrides(overrides)
    scanner = Scanner(config, scene, ScanOptions(radiometry=False, self_returns=False))
    stamp_ns = int(round((t0 + at_s) * 1e9))
    origins, directions = scanner.rays_world(scanner.firing_poses(poses, stamp_ns))
    hits = scanner.tracer.trace(
        origins,
        directions,
        max_range_m=config.range_m,
        max_hits=config.max_hits_per_sub_ray,
        continue_step_m=config.continue_step_m,
        pond_threshold_m=config.pond_threshold_m,
        foliage_solid=foliage_solid,
    )
    return hits, origins, directions, scanner.pattern.sub_ray_weights, BeamModelParams.from_config(config)


# Polaris (1 sub-ray, L = 1 m) cut to 240 columns, and the default sensor (7 sub-rays, L = 0).
SENSORS = {
    "polaris_1_sub_ray": ("polaris", {"columns": 240}),
    "default_7_sub_rays": ("default", {}),
}


@pytest.fixture(scope="module")
def scans(farm):
    """(sensor, foliage_solid) -> hits, origins, directions, weights, params, at a farmyard pose
    with buildings, crops, trees, the pond and ground of every cover."""
    out = {}
    for name, (sensor, overrides) in SENSORS.items():
        for solid in (False, True):
            out[name, solid] = _scan_inputs(farm, sensor, overrides, solid, at_s=20.0)
    return out


def _run(
    inputs, backend: str, options: BeamModelOptions, streams: NoiseStreams, scan_index: int = 0, mode: str | None = None
):
    hits, origins, directions, weights, params = inputs
    if mode is not None:
        params = replace(params, return_mode=mode)
    return process_beams(hits, origins, directions, weights, params, options, streams, scan_index, backend=backend)


def ulps_apart(a: np.ndarray, b: np.ndarray) -> float:
    """Largest distance in units of the last place between finite entries (NaNs must match)."""
    assert np.array_equal(np.isnan(a), np.isnan(b))
    finite = np.isfinite(a)
    if not finite.any():
        return 0.0
    x, y = a[finite], b[finite]
    return float(np.max(np.abs(x - y) / np.spacing(np.maximum(np.abs(x), np.abs(y)))))


def assert_same_returns(reference, compiled) -> None:
    for name in EXACT_FIELDS:
        np.testing.assert_array_equal(getattr(compiled, name), getattr(reference, name), err_msg=name)
        assert getattr(compiled, name).dtype == getattr(reference, name).dtype, name
    for name in FLOAT_FIELDS:
        assert ulps_apart(getattr(reference, name), getattr(compiled, name)) <= MAX_ULPS[name], name


# ---------------------------------------------------------------------------------------------
# The two backends on the farm
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("sensor", sorted(SENSORS))
@pytest.mark.parametrize("mode", sorted(RETURN_MODES))
@pytest.mark.parametrize("weather", [False, True], ids=["clear", "rain_fog"])
@pytest.mark.parametrize("noise", [True, False], ids=["noise", "no_noise"])
@pytest.mark.parametrize("foliage_solid", [False, True], ids=["foliage", "solid_foliage"])
def test_backends_agree_on_the_farm(scans, sensor, mode, weather, noise, foliage_solid):
    inputs = scans[sensor, foliage_solid]
    options = BeamModelOptions(noise=noise, weather=weather, foliage_solid=foliage_solid, **RAIN)
    streams = {backend: NoiseStreams(11) for backend in BACKENDS}
    out = {backend: _run(inputs, backend, options, streams[backend], scan_index=4, mode=mode) for backend in BACKENDS}
    assert out["numpy"].valid.sum() > 100  # a real scan, not an empty one
    assert_same_returns(out["numpy"], out["numba"])
    assert streams["numba"].noise.state == streams["numpy"].noise.state != NoiseStreams(11).noise.state
    assert streams["numba"].rain.state == streams["numpy"].rain.state
    if weather:
        assert streams["numpy"].rain.state != NoiseStreams(11).rain.state  # rain drops were drawn
        assert (out["numba"].class_id[out["numba"].valid] == 13).any()  # precipitation echoes


@pytest.mark.parametrize("sensor", sorted(SENSORS))
@pytest.mark.parametrize("foliage_solid", [False, True], ids=["foliage", "solid_foliage"])
def test_backends_agree_to_an_ulp_or_two_in_clear_air(scans, sensor, foliage_solid):
    # Without clutter the float fields differ only by the math library's last bits.
    inputs = scans[sensor, foliage_solid]
    options = BeamModelOptions(noise=True, weather=False, foliage_solid=foliage_solid)
    out = {backend: _run(inputs, backend, options, NoiseStreams(12), scan_index=2) for backend in BACKENDS}
    for name in EXACT_FIELDS:
        np.testing.assert_array_equal(getattr(out["numba"], name), getattr(out["numpy"], name), err_msg=name)
    for name in FLOAT_FIELDS:
        assert ulps_apart(getattr(out["numpy"], name), getattr(out["numba"], name)) <= CLEAR_MAX_ULPS[name], name


@pytest.mark.parametrize("chunk", [256, 1000])
def test_the_chunking_of_the_beams_changes_no_bit(scans, monkeypatch, chunk):
    # The passes work in chunks of beams (on all cores when PARALLEL_PASSES is set); each chunk
    # lists its own ground normals and jumps the noise stream to its first echo, so any
    # chunking gives the same bits and leaves the streams in the same state.
    inputs = scans["default_7_sub_rays", False]
    options = BeamModelOptions(noise=True, **RAIN)
    base_streams, chunked_streams = NoiseStreams(13), NoiseStreams(13)
    base = _run(inputs, "numba", options, base_streams, scan_index=3)
    monkeypatch.setattr(beam_kernel, "_CHUNK_BEAMS", chunk)
    monkeypatch.setattr(beam_kernel, "_MIN_CHUNK_BEAMS", 1)
    chunked = _run(inputs, "numba", options, chunked_streams, scan_index=3)
    for name in vars(base):
        np.testing.assert_array_equal(getattr(chunked, name), getattr(base, name), err_msg=name)
    assert chunked_streams.noise.state == base_streams.noise.state
    assert chunked_streams.rain.state == base_streams.rain.state


def test_fog_without_rain_and_fog_thick_enough_to_keep_slabs(scans):
    # Visibility 150 m: fog clutter strong enough to pass the skip rule, no rain stream draws.
    inputs = scans["polaris_1_sub_ray", False]
    options = BeamModelOptions(noise=True, rain_mm_per_h=0.0, visibility_m=150.0)
    streams = {backend: NoiseStreams(3) for backend in BACKENDS}
    out = {backend: _run(inputs, backend, options, streams[backend]) for backend in BACKENDS}
    assert (out["numpy"].class_id[out["numpy"].valid] == 13).sum() > 50
    assert_same_returns(out["numpy"], out["numba"])
    assert streams["numba"].rain.state == streams["numpy"].rain.state == NoiseStreams(3).rain.state


def test_the_streams_continue_across_scans_alike(scans):
    inputs = scans["default_7_sub_rays", False]
    options = BeamModelOptions(noise=True, **RAIN)
    streams = {backend: NoiseStreams(5) for backend in BACKENDS}
    for scan_index in range(3):
        out = {backend: _run(inputs, backend, options, streams[backend], scan_index) for backend in BACKENDS}
        assert_same_returns(out["numpy"], out["numba"])
        assert streams["numba"].noise.state == streams["numpy"].noise.state
        assert streams["numba"].rain.state == streams["numpy"].rain.state
    # Mixed: a scan on each backend in turn continues the same run.
    mixed, reference = NoiseStreams(6), NoiseStreams(6)
    for scan_index, backend in enumerate(["numba", "numpy", "numba"]):
        got = _run(inputs, backend, options, mixed, scan_index)
        want = _run(inputs, "numpy", options, reference, scan_index)
        assert_same_returns(want, got)
    assert mixed.noise.state == reference.noise.state and mixed.rain.state == reference.rain.state


def test_same_inputs_give_bit_identical_returns_and_inputs_are_not_changed(scans):
    hits, origins, directions, weights, params = scans["default_7_sub_rays", False]
    before = {name: getattr(hits, name).copy() for name in vars(hits)}
    rays_before = (origins.copy(), directions.copy())
    options = BeamModelOptions(noise=True, **RAIN)
    a = _run(scans["default_7_sub_rays", False], "numba", options, NoiseStreams(8), 2)
    b = _run(scans["default_7_sub_rays", False], "numba", options, NoiseStreams(8), 2)
    for name in vars(a):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    for name, value in before.items():
        np.testing.assert_array_equal(getattr(hits, name), value)
    np.testing.assert_array_equal(origins, rays_before[0])
    np.testing.assert_array_equal(directions, rays_before[1])


def test_the_default_backend_is_numba_and_unknown_backends_are_refused(scans, monkeypatch):
    hits, origins, directions, weights, params = scans["polaris_1_sub_ray", False]
    calls = []
    real = beam_kernel.process_beams_compiled
    monkeypatch.setattr(beam_kernel, "process_beams_compiled", lambda *a: calls.append(1) or real(*a))
    process_beams(hits, origins, directions, weights, params, BeamModelOptions(), NoiseStreams(0), 0)
    assert calls == [1]
    with pytest.raises(ConfigError, match="backend = 'cuda'"):
        process_beams(
            hits, origins, directions, weights, params, BeamModelOptions(), NoiseStreams(0), 0, backend="cuda"
        )


def test_a_missing_numba_is_raised_only_when_the_backend_is_used(scans, monkeypatch):
    inputs = scans["polaris_1_sub_ray", False]
    missing = ImportError("No module named 'numba'")
    monkeypatch.setattr(beam_kernel, "NUMBA_IMPORT_ERROR", missing)
    with pytest.raises(ImportError, match="backend='numpy'") as raised:
        _run(inputs, "numba", BeamModelOptions(), NoiseStreams(0))
    assert raised.value.__cause__ is missing
    assert _run(inputs, "numpy", BeamModelOptions(), NoiseStreams(0)).valid.any()


# ---------------------------------------------------------------------------------------------
# Small constructed cases: edges of the model, refusals
# ---------------------------------------------------------------------------------------------


def _params(columns: int, rings: int = 1, **changes) -> BeamModelParams:
    from acres_lidar_ros.config.sensors import load_sensor_config

    base = BeamModelParams.from_config(load_sensor_config("polaris"))
    return replace(base, columns=columns, rings=rings, ring_range_at_10pct_m=np.full(rings, 60.0), **changes)


def _synthetic_hits(rng: np.random.Generator, rows: int, k: int) -> Hits:
    """Random hits, range-sorted per row with a valid prefix: ground, walls and foliage."""
    hits = Hits.empty(rows, k)
    count = rng.integers(0, k + 1, rows)
    classes = np.array([1, 1, 3, 4, 5, 7, 8, 9, 12, 2, 0])
    materials = {1: [1, 2, 3, 4, 5, 6], 3: [12], 4: [13], 5: [9], 7: [7], 8: [8], 9: [15], 12: [14], 2: [10], 0: [0]}
    for row in range(rows):
        r = np.sort(rng.uniform(0.1, 120.0, count[row]))
        for j in range(count[row]):
            c = int(rng.choice(classes))
            hits.range_m[row, j] = r[j]
            hits.valid[row, j] = True
            hits.class_id[row, j] = c
            hits.material_id[row, j] = rng.choice(materials[c])
            hits.cos_incidence[row, j] = rng.uniform(-1.0, 1.0)
            hits.object_id[row, j] = rng.integers(-1, 50)
            hits.wetness[row, j] = rng.uniform(0.0, 1.0) if c == 1 else 0.0
    return hits


@pytest.mark.parametrize("mode", sorted(RETURN_MODES))
def test_backends_agree_on_random_hits_with_close_echoes(mode):
    # Ranges packed within a few separations so echoes merge, and the same range twice on some
    # beams (the tie rule of the sort), 3 sub-rays, 3 rings.
    rng = np.random.default_rng(17)
    columns, rings, sub = 40, 3, 3
    hits = _synthetic_hits(rng, columns * rings * sub, 4)
    hits.range_m[hits.valid] = np.round(hits.range_m[hits.valid] / 20.0, 1) + 1.0
    for row in range(hits.shape[0]):
        n = int(hits.valid[row].sum())
        hits.range_m[row, :n] = np.sort(hits.range_m[row, :n])
    params = _params(columns, rings, return_mode=mode, min_return_separation_m=0.5)
    origins = rng.uniform(-50, 50, (hits.shape[0], 3))
    directions = rng.normal(size=(hits.shape[0], 3))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    weights = np.array([0.5, 0.3, 0.2])
    for options in (
        BeamModelOptions(noise=True, weather=False),
        BeamModelOptions(noise=True, rain_mm_per_h=40.0, visibility_m=300.0),
    ):
        out = {}
        streams = {}
        for backend in BACKENDS:
            streams[backend] = NoiseStreams(21)
            out[backend] = process_beams(
                hits, origins, directions, weights, params, options, streams[backend], 9, backend=backend
            )
        assert out["numpy"].valid.sum() > 20
        assert_same_returns(out["numpy"], out["numba"])
        assert streams["numba"].noise.state == streams["numpy"].noise.state
        assert streams["numba"].rain.state == streams["numpy"].rain.state


def test_no_light_draws_nothing_in_either_backend():
    params = _params(4)
    hits = Hits.empty(4, 2)
    origins, directions = np.zeros((4, 3)), np.tile([1.0, 0.0, 0.0], (4, 1))
    for backend in BACKENDS:
        streams = NoiseStreams(1)
        out = process_beams(
            hits, origins, directions, np.ones(1), params, BeamModelOptions(weather=False), streams, 0, backend=backend
        )
        assert not out.valid.any() and np.isnan(out.range_m).all() and (out.object_id == -1).all()
        assert streams.noise.state == NoiseStreams(1).noise.state


@pytest.mark.parametrize("bad", [-1.0, math.inf, math.nan])
def test_a_bad_range_is_refused_alike_and_nothing_is_drawn(bad):
    params = _params(2)
    hits = _synthetic_hits(np.random.default_rng(0), 2, 2)
    hits.valid[:, 0] = True
    hits.class_id[:, 0] = 3
    hits.material_id[:, 0] = 12
    hits.range_m[1, 0] = bad
    origins, directions = np.zeros((2, 3)), np.tile([1.0, 0.0, 0.0], (2, 1))
    for backend in BACKENDS:
        streams = NoiseStreams(4)
        with pytest.raises(ValueError, match="finite range_m >= 0"):
            process_beams(
                hits, origins, directions, np.ones(1), params, BeamModelOptions(**RAIN), streams, 0, backend=backend
            )
        assert streams.noise.state == NoiseStreams(4).noise.state
        assert streams.rain.state == NoiseStreams(4).rain.state


def test_a_material_outside_the_table_is_refused():
    params = _params(1)
    hits = _synthetic_hits(np.random.default_rng(0), 1, 1)
    hits.valid[0, 0] = True
    hits.material_id[0, 0] = 200
    with pytest.raises(IndexError, match="material_id"):
        process_beams(
            hits,
            np.zeros((1, 3)),
            np.tile([1.0, 0.0, 0.0], (1, 1)),
            np.ones(1),
            params,
            BeamModelOptions(),
            NoiseStreams(0),
            0,
        )


# ---------------------------------------------------------------------------------------------
# Building blocks against noise.py and numpy
# ---------------------------------------------------------------------------------------------

EDGE_U64 = [0, 1, 2**32 - 1, 2**32, 2**63 - 1, 2**63, 2**64 - 1, 0x9E3779B97F4A7C15, 12345678901234567]


def test_mix64_and_hash_normal_match_noise_py():
    rng = np.random.default_rng(1)
    keys = np.concatenate(
        [
            np.array(EDGE_U64, dtype=np.uint64),
            rng.integers(0, 2**63, 500, dtype=np.uint64) * np.uint64(2) + np.uint64(1),
        ]
    )
    expected_mix = mix64(keys)
    expected_normal = hash_normal(keys)
    for i, key in enumerate(keys):
        assert beam_kernel._mix64(key) == expected_mix[i]
        assert abs(beam_kernel._hash_normal(np.uint64(key)) - expected_normal[i]) <= 4 * np.spacing(
            max(1.0, abs(expected_normal[i]))
        )


@pytest.mark.filterwarnings("ignore:invalid value encountered in cast")  # noise.py's cast of 4e19 cells
def test_place_normal_matches_noise_py_on_both_sides_of_zero():
    rng = np.random.default_rng(2)
    x = np.concatenate([rng.uniform(-300, 300, 300), [0.0, -0.0, -1e-12, 0.1, -0.1, 0.25, -0.25, 1e19, np.inf, np.nan]])
    y = rng.uniform(-300, 300, x.size)
    for cell, seed in ((0.25, 0), (0.1, 1), (0.25, -7)):
        term = np.uint64((seed * 0x632BE59BD9B4E019) % 2**64)
        expected = place_normal(x, y, cell, seed)
        got = np.array([beam_kernel._place_normal(a, b, cell, term) for a, b in zip(x, y)])
        np.testing.assert_allclose(got, expected, rtol=0, atol=4e-15)


def test_roughness_key_matches_noise_py():
    # The kernel builds the key as (scan << 24) | (beam << 3) | sub_ray, xor the mixed seed term.
    seed, scan, beams, subs = 9, 5, np.array([0, 1, 57599, 2**21 - 1]), np.array([0, 7, 3, 6])
    term = np.uint64(mix64(((seed + 2) * 0x632BE59BD9B4E019) % 2**64))
    expected = roughness_normal(seed, scan, beams, subs)
    for b, j, want in zip(beams, subs, expected):
        key = (np.uint64(scan) << np.uint64(24)) | (np.uint64(b) << np.uint64(3)) | np.uint64(j)
        h = np.uint64(beam_kernel._mix64(key ^ term))  # numba hands uint64 back as a Python int
        assert abs(beam_kernel._hash_normal(h) - want) <= 4e-15


def test_pcg32_steps_and_jumps_match_the_python_generator():
    reference = Pcg32(2018 + 77, 3)
    state, inc = np.uint64(reference.state), np.uint64(reference.inc)
    for _ in range(1000):
        output, state = beam_kernel._pcg32_next(state, inc)
        state = np.uint64(state)  # numba hands uint64 back as a Python int
        assert int(output) == reference.next_u32()
        assert int(state) == reference.state
    for steps in (0, 1, 7, 1000, 123456789, 2**40 + 3):
        jumped = reference.copy()
        jumped.advance(steps)
        assert int(beam_kernel._pcg32_advance(np.uint64(reference.state), inc, steps)) == jumped.state


def test_pairwise_sum_is_numpys_reduceat_order():
    # Values of very different sizes, so any other order of the additions gives other bits.
    rng = np.random.default_rng(3)
    values = rng.uniform(0, 1, 5000) * 10.0 ** rng.integers(-8, 9, 5000)
    lengths = list(range(1, 40)) + [127, 128, 129, 130, 255, 256, 257, 300, 1000]
    starts = np.cumsum([0] + lengths[:-1])
    values = values[: sum(lengths)]  # reduceat's last segment runs to the end
    expected = np.add.reduceat(values, starts)
    for start, n, want in zip(starts, lengths, expected):
        got = values[start] + beam_kernel._pairwise_sum(values, start + 1, n - 1)
        assert got == want, (n, got, want)


def test_intensity_byte_and_signal_counts_match_physics():
    from acres_lidar_ros.radiometry.physics import intensity_byte, signal_counts

    rho = np.array([-1.0, 0.0, 1e-9, 0.004999, 0.005, 0.5, 0.995, 1.0, 1.0 + 1e-12, 2.0, 63.9, 64.0, 1e6, np.nan])
    assert [beam_kernel._intensity_byte(r) for r in rho] == intensity_byte(rho).tolist()
    for r, ov, alpha in ((0.0, 1.0, 0.0), (1e-9, 1.0, 0.0), (5.0, 0.0, 0.0), (30.0, 1.5, 0.002), (0.0, 0.0, 0.01)):
        want = float(signal_counts(0.3, r, 0.8, 100.0, 60.0, ov, alpha))
        got = beam_kernel._signal_counts(0.3, r, 0.8, 100.0, 60.0, ov, alpha)
        assert got == pytest.approx(want, rel=4e-16 * MAX_ULPS["range_m"])


# ---------------------------------------------------------------------------------------------
# prepare_echoes per block of beams + finish_echoes = one process_beams
# ---------------------------------------------------------------------------------------------


def _prepared_blocks(inputs, options, seed, scan_index, column_blocks, near_block=None):
    from acres_lidar_ros.radiometry.beam_model import scan_atmosphere

    hits, origins, directions, weights, params = inputs
    rings, n_sub = params.rings, weights.size
    atm = scan_atmosphere(params, options)
    blocks = []
    for columns in column_blocks:
        cells = (np.sort(columns)[:, None] * rings + np.arange(rings)).reshape(-1)
        rows = (cells[:, None] * n_sub + np.arange(n_sub)).reshape(-1)
        block_hits = Hits(**{name: getattr(hits, name)[rows] for name in Hits.__dataclass_fields__})
        blocks.append(
            beam_kernel.prepare_echoes(
                block_hits, origins[rows], directions[rows], weights, params, options, atm, seed, scan_index, cells
            )
        )
    return blocks, atm


@pytest.mark.parametrize("sensor", sorted(SENSORS))
@pytest.mark.parametrize("weather", [{}, RAIN, {"visibility_m": 300.0}], ids=["clear", "rain", "fog"])
def test_blocks_prepared_in_any_split_and_order_finish_to_the_one_shot_bits(scans, sensor, weather):
    hits, origins, directions, weights, params = scans[sensor, False]
    # One block with ranges beyond the sensor's range (as roughness can give): its sort span is
    # larger than the others', whose echoes must then be formed again with it.
    near = np.arange(params.columns) % 5 == 1
    rows = np.repeat(np.repeat(near, params.rings), weights.size)
    range_m = hits.range_m.copy()
    range_m[rows] *= 3.0
    inputs = (replace(hits, range_m=range_m), origins, directions, weights, params)
    options = BeamModelOptions(noise=True, **weather)
    reference_streams = NoiseStreams(9)
    reference = _run(inputs, "numba", options, reference_streams, scan_index=6)
    order = np.random.default_rng(3).permutation(params.columns)
    column_blocks = [np.flatnonzero(near)] + np.array_split(order[~near[order]], 4)[::-1]
    blocks, atm = _prepared_blocks(inputs, options, 9, 6, column_blocks)
    assert blocks[0].span > min(block.span for block in blocks)
    streams = NoiseStreams(9)
    got = beam_kernel.finish_echoes(blocks, params, options, atm, streams)
    for name in EXACT_FIELDS + FLOAT_FIELDS:
        a, b = getattr(got, name), getattr(reference, name)
        assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), name
    assert (streams.noise.state, streams.rain.state) == (reference_streams.noise.state, reference_streams.rain.state)


def test_finish_refuses_blocks_that_miss_or_repeat_a_cell_and_draws_nothing(scans):
    inputs = scans["polaris_1_sub_ray", False]
    params = inputs[4]
    options = BeamModelOptions()
    columns = np.arange(params.columns)
    for column_blocks in ([columns[:-1]], [columns, columns[:1]]):
        blocks, atm = _prepared_blocks(inputs, options, 1, 0, column_blocks)
        streams = NoiseStreams(1)
        with pytest.raises(ValueError, match="each of the"):
            beam_kernel.finish_echoes(blocks, params, options, atm, streams)
        assert streams.noise.state == NoiseStreams(1).noise.state


def test_noise_draws_are_the_streams_own_pairs_however_they_are_formed():
    # The pairs formed ahead must be exactly Pcg32.next_normal_pairs of the same stream, when
    # formed in one go, extended, and carried over to a later position.
    from acres_lidar_ros.radiometry.beam_kernel import NoiseDraws

    stream = NoiseStreams(5).noise
    whole = NoiseDraws(stream.state, stream.inc)
    whole.extend(900)
    n1, n2 = stream.copy().next_normal_pairs(900)
    np.testing.assert_array_equal(whole.n1, n1)
    np.testing.assert_array_equal(whole.n2, n2)
    grown = NoiseDraws(stream.state, stream.inc)
    grown.extend(250)
    grown.extend(900)
    np.testing.assert_array_equal(grown.n1, n1)
    later = grown.advanced(400)
    later.extend(1000)  # 500 carried over, 500 new
    after = stream.copy()
    after.next_u32_array(800)
    m1, m2 = after.next_normal_pairs(1000)
    np.testing.assert_array_equal(later.n1, m1)
    np.testing.assert_array_equal(later.n2, m2)
    check = stream.copy()
    check.next_u32_array(800)
    assert later.state == check.state


def test_prefetched_noise_draws_change_no_number(scans):
    # finish_echoes with pairs formed ahead (and more than it needs) gives the very returns and
    # stream state of one without them.
    from acres_lidar_ros.radiometry.beam_kernel import prefetch_noise_draws

    inputs = scans["polaris_1_sub_ray", False]
    options = BeamModelOptions(noise=True, weather=False, foliage_solid=False)
    plain, ahead = NoiseStreams(3), NoiseStreams(3)
    first = _run(inputs, "numba", options, plain, scan_index=0)
    held = prefetch_noise_draws(ahead, 240 * 32)
    assert held == 240 * 32
    second = _run(inputs, "numba", options, ahead, scan_index=0)
    assert_same_returns(first, second)
    np.testing.assert_array_equal(first.range_m, second.range_m)
    assert plain.noise.state == ahead.noise.state
    # The next prefetch sizes itself from the pairs the scan used and keeps the rest.
    used = ahead.noise_draws.used_last
    assert 0 < used < 240 * 32
    assert prefetch_noise_draws(ahead, 240 * 32) == used + used // 4 + 1024
