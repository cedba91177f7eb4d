"""Partial output (the attribute list's ``partialOutputs``): each slice of a sweep finished on its own, the
noise and rain streams taken slice by slice in time order (docs/outputs.md "Partial output").

The expectations come from the spec's text: the pairs ``(n1, n2)`` of the PCG32 stream (state
seed + 2018, sequence 3) are taken echo by echo in range order, beams in ring-major sequence
within each slice, slices in time order; ``R_meas = R_e + sigma_R n2`` with the spec's
``sigma_R``. With one slice this is the spec's order.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.outputs.shaping import shape_scan, shape_slice, slice_scan
from acres_lidar_ros.radiometry.noise import NOISE_SEQUENCE, NOISE_STATE_OFFSET, Pcg32
from acres_lidar_ros.scan.scan_types import ScanOptions
from acres_lidar_ros.scan.scanner import Scanner
from acres_lidar_ros.scene.builder import SceneBuilder
from acres_lidar_ros.scene.grids import TerrainGrid
from acres_lidar_ros.sensor.poses import PoseHistory
from acres_lidar_ros.sensor.timing import column_slices

SEED = 3


@pytest.fixture(scope="module")
def plane_tracer():
    from acres_lidar_ros.tracing.trace import Tracer

    return Tracer(SceneBuilder(TerrainGrid(np.array([-400.0, -400.0]), 800.0, np.zeros((2, 2)))).build())


@pytest.fixture(scope="module")
def polaris():
    return load_sensor_config("polaris")


def moving():
    """Driving along x at 2 m/s (every column from its own pose)."""
    return PoseHistory.from_arrays(
        np.array([-1.0, 1.0]), np.array([[-2.0, 0.0, 0.0], [2.0, 0.0, 0.0]]), [[0, 0, 0, 1], [0, 0, 0, 1]]
    )


def partial(config, slices, on=True):
    return config.with_overrides({"partial_output": on, "partial_slices": slices})


def scans(config, tracer, n=2, rain_mm_per_h=0.0):
    scanner = Scanner(
        config, tracer=tracer, options=ScanOptions(seed=SEED, self_returns=False, rain_mm_per_h=rain_mm_per_h)
    )
    out = []
    for i in range(n):
        out.append(scanner.scan_echoes(moving(), int(0.1e9 * (i + 1))))
    return out


def same_scan(a, b):
    for field in dataclasses.fields(a.returns):
        assert np.array_equal(getattr(a.returns, field.name), getattr(b.returns, field.name), equal_nan=True), (
            field.name
        )
    assert np.array_equal(a.points_sensor, b.points_sensor, equal_nan=True)


@pytest.mark.parametrize("rain_mm_per_h", [0.0, 25.0])
def test_one_slice_is_the_whole_scan_bit_for_bit(polaris, plane_tracer, rain_mm_per_h):
    """partial_slices = 1 draws in the spec's order: the scans (noise and rain clutter) are the
    full-scan mode's, bit for bit, and the stream goes on alike into the next scan."""
    whole = scans(polaris, plane_tracer, rain_mm_per_h=rain_mm_per_h)
    one = scans(partial(polaris, 1), plane_tracer, rain_mm_per_h=rain_mm_per_h)
    for (a, _), (b, _) in zip(whole, one):
        same_scan(a, b)


@pytest.mark.parametrize("rain_mm_per_h", [0.0, 25.0])
def test_partial_scans_are_the_same_run_to_run(polaris, plane_tracer, rain_mm_per_h):
    config = partial(polaris, 10)
    for (a, _), (b, _) in zip(
        scans(config, plane_tracer, rain_mm_per_h=rain_mm_per_h),
        scans(config, plane_tracer, rain_mm_per_h=rain_mm_per_h),
    ):
        same_scan(a, b)


def sigma_r(config, signal):
    """The spec's range sigma of an echo of mean signal ``S``, written out here."""
    rad = config.radiometry
    snr = signal / np.sqrt(signal + rad.ambient_counts)
    snr_spec = rad.signal_at_10pct_counts / math.sqrt(rad.signal_at_10pct_counts + rad.ambient_counts)
    return np.sqrt(config.std_m**2 + (rad.range_std_low_snr_m * snr_spec / np.maximum(snr, 1e-3)) ** 2)


@pytest.mark.parametrize("slices", [1, 10])
def test_the_noise_pairs_are_taken_slice_by_slice_in_ring_major_order(polaris, plane_tracer, slices):
    """The range noise of each single-echo beam, ``n2 = (R_meas - R_e) / sigma_R``, is the
    stream's pair at the place the docs give: the echoes of the earlier slices first, then the
    slice's beams in ring-major sequence (ring, then column), each beam's echoes in range order."""
    config = partial(polaris, slices)
    ((scan, echoes),) = scans(config, plane_tracer, n=1)
    rings, columns = config.rings, config.columns
    per_cell = np.bincount(echoes.cell, minlength=columns * rings)
    first_offset_s = scan.time_offset_s
    slice_of_column = np.empty(columns, np.int64)
    for position, (_, cols) in enumerate(column_slices(first_offset_s, slices, config.period_s)):
        slice_of_column[cols] = position
    cell = np.arange(columns * rings)
    ring, column = cell % rings, cell // rings
    order = np.lexsort((column, ring, slice_of_column[column]))  # draw order of the beams
    first_place = np.empty(cell.size, np.int64)
    first_place[order] = np.concatenate([[0], np.cumsum(per_cell[order])[:-1]])
    n1, n2 = Pcg32(SEED + NOISE_STATE_OFFSET, NOISE_SEQUENCE).next_normal_pairs(int(per_cell.sum()))
    single = np.flatnonzero((per_cell == 1) & scan.returns.valid[:, 0])
    echo_of = np.searchsorted(echoes.cell, single)
    recovered = (scan.returns.range_m[single, 0] - echoes.range_m[echo_of]) / sigma_r(
        config, echoes.signal_counts[echo_of]
    )
    assert single.size > 20_000
    np.testing.assert_allclose(recovered, n2[first_place[single]], atol=1e-6)
    if slices > 1:  # not the whole scan's ring-major order
        ring_major = np.lexsort((column, ring))
        assert not np.array_equal(order, ring_major)


def test_partial_range_noise_follows_the_spec_sigma(polaris, plane_tracer):
    """A flat ground: the normalised range errors of partial output's returns have mean 0 and
    standard deviation 1 (the spec's sigma_R), over two scans."""
    z = []
    for scan, echoes in scans(partial(polaris, 10), plane_tracer):
        per_cell = np.bincount(echoes.cell, minlength=scan.columns * scan.rings)
        single = np.flatnonzero((per_cell == 1) & scan.returns.valid[:, 0])
        e = np.searchsorted(echoes.cell, single)
        z.append((scan.returns.range_m[single, 0] - echoes.range_m[e]) / sigma_r(polaris, echoes.signal_counts[e]))
    z = np.concatenate(z)
    assert z.size > 40_000
    assert abs(z.mean()) < 4 / math.sqrt(z.size) and abs(z.std() - 1.0) < 0.02


def test_each_slice_shaped_alone_is_the_slice_of_the_whole_scan(polaris, plane_tracer):
    """``shape_slice`` (the node's, one slice as soon as it is final) equals the same slice cut
    from the whole shaped scan, in the world frame with motion compensation."""
    config = partial(polaris, 7).with_overrides({"output_frame": "world", "motion_compensation": True})
    ((scan, _),) = scans(config, plane_tracer, n=1)
    scanner = Scanner(config, tracer=plane_tracer)
    T = scanner.pattern.T_base_sensor
    kw = dict(world_frame_id="odom", period_s=config.period_s)
    cut = slice_scan(shape_scan(scan, config.outputs, moving(), T, **kw), 7, config.period_s)
    slices = column_slices(scan.time_offset_s, 7, config.period_s)
    assert [k for k, _ in slices] == [s.slice_index for s in cut] == list(range(7))
    assert np.array_equal(np.concatenate([c for _, c in slices]), np.argsort(scan.time_offset_s, kind="stable"))
    for (k, columns), expected in zip(slices, cut):
        alone = shape_slice(scan, k, 7, columns, config.outputs, moving(), T, **kw)
        assert (alone.start_ns, alone.end_ns, alone.slice_index) == (expected.start_ns, expected.end_ns, k)
        assert np.array_equal(alone.column_ids, expected.column_ids)
        assert np.array_equal(alone.points, expected.points, equal_nan=True)
        assert np.array_equal(alone.time_offset_s, expected.time_offset_s)
        assert np.array_equal(alone.returns.range_m, expected.returns.range_m, equal_nan=True)


def one_scan(config, tracer, **options):
    scanner = Scanner(config, tracer=tracer, options=ScanOptions(seed=SEED, **options))
    return scanner.scan(moving(), int(0.1e9))


def test_without_radiometry_the_slices_make_the_whole_scan(polaris, plane_tracer):
    """Nothing is drawn without radiometry: slice by slice or whole, the same scan."""
    same_scan(
        one_scan(polaris, plane_tracer, radiometry=False), one_scan(partial(polaris, 9), plane_tracer, radiometry=False)
    )


def test_the_truth_of_a_partial_scan_covers_the_whole_scan(polaris, plane_tracer):
    """With the truth on the truth is per scan (beside the last slice): with one slice it is the
    full-scan mode's, field for field; with ten it gives every cell a reason, and a returned
    cell is one with a return."""
    whole = one_scan(polaris, plane_tracer, truth=True)
    one = one_scan(partial(polaris, 1), plane_tracer, truth=True)
    same_scan(whole, one)
    for field in dataclasses.fields(whole.truth):
        a, b = getattr(whole.truth, field.name), getattr(one.truth, field.name)
        assert (a is None and b is None) or np.array_equal(a, b, equal_nan=True), field.name
    ten = one_scan(partial(polaris, 10), plane_tracer, truth=True)
    assert ten.truth.reason.shape == (polaris.columns * polaris.rings,)
    returned = ten.truth.reason == 0
    assert np.array_equal(returned, ten.returns.valid.any(axis=1))
