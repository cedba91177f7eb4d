"""The self-return table's file format, its refusals, and the spec's three-way rule per scan.

The hash numbers are recomputed here with a plain-Python SplitMix64, independent of noise.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from acres_lidar_ros.body.self_returns import (
    SELF_HASH_DOMAIN,
    SelfReturnTable,
    apply_self_returns,
    expected_size_bytes,
    load_self_table,
)
from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.outputs.files import atomic_write
from acres_lidar_ros.radiometry.returns import Returns
from acres_lidar_ros.scene.instances import BODY_INSTANCE, NO_INSTANCE

M64 = (1 << 64) - 1


def splitmix_mix(x: int) -> int:
    """SplitMix64 finaliser as the spec writes it, in plain Python integers."""
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def uniform(h: int) -> float:
    return ((h >> 11) + 0.5) / 2.0**53


def cell_hash(scan: int, seed: int, cell: int) -> int:
    return splitmix_mix(splitmix_mix(splitmix_mix(seed ^ SELF_HASH_DOMAIN) ^ scan) ^ cell)


def cell_normal(h: int) -> float:
    g = splitmix_mix(h)
    return math.sqrt(-2.0 * math.log(uniform(g))) * math.cos(2.0 * math.pi * uniform(splitmix_mix(g)))


def test_plain_splitmix_matches_the_published_first_output():
    # SplitMix64 seeded with 0 gives 0xE220A8397B1DCDAF first (Steele, Lea and Flood 2014).
    assert splitmix_mix(0) == 0xE220A8397B1DCDAF


def scene_returns(n: int, slots: int = 2) -> Returns:
    """Every cell has ``slots`` scene returns at 10 m and 20 m, class ground."""
    ranges = np.tile(10.0 * np.arange(1, slots + 1), (n, 1))
    return Returns(
        range_m=ranges,
        valid=np.ones((n, slots), bool),
        reflectivity=np.full((n, slots), 0.2),
        signal=np.full((n, slots), 500, np.uint16),
        intensity=np.full((n, slots), 20, np.uint8),
        class_id=np.full((n, slots), 1, np.uint8),
        material_id=np.full((n, slots), 2, np.uint8),
        instance=np.full((n, slots), NO_INSTANCE, np.uint32),
        return_flags=np.tile(np.array([1, 6], np.uint8)[:slots], (n, 1)),
    )


def table_of(p_self, range_m, intensity, p_block, columns, rings) -> SelfReturnTable:
    planes = np.array([p_self, range_m, intensity, p_block], dtype=np.float64)
    return SelfReturnTable.from_planes(planes, columns, rings)


def test_three_way_rule_with_hash_values_computed_independently():
    columns, rings, seed, scan = 5, 4, 1234, 17
    n = columns * rings
    u = np.array([uniform(cell_hash(scan, seed, i)) for i in range(n)])
    # Cells 0-6 get a body return (p_self just above u), 7-13 are blocked (p_self just below u,
    # p_self + p_block above u), 14-19 see the scene (p_self + p_block just below u).
    kind = np.array([0] * 7 + [1] * 7 + [2] * 6)
    p_self = np.where(kind == 0, np.minimum(u + 1e-3, 1.0), np.maximum(u - 1e-3, 0.0))
    p_self = np.where(kind == 2, np.maximum(u - 2e-3, 0.0) / 2, p_self)
    p_block = np.where(kind == 1, np.minimum(2e-3, 1.0 - p_self), 0.0)
    p_block = np.where(kind == 2, np.maximum(u - 2e-3, 0.0) / 2, p_block)
    ranges = 0.3 + 0.05 * np.arange(n)
    table = table_of(p_self, ranges, np.full(n, 10.0), p_block, columns, rings)
    std_m = 0.01
    out = apply_self_returns(table, scene_returns(n), scan_index=scan, seed=seed, std_m=std_m)

    np.testing.assert_array_equal(out.body, kind == 0)
    np.testing.assert_array_equal(out.blocked, kind == 1)
    r = out.returns
    for i in range(n):
        if kind[i] == 0:
            expected = max(0.2, float(np.float32(ranges[i])) + std_m * cell_normal(cell_hash(scan, seed, i)))
            assert r.range_m[i, 0] == pytest.approx(expected, abs=1e-12)
            assert r.valid[i].tolist() == [True, False]
            assert (r.class_id[i, 0], r.material_id[i, 0], r.intensity[i, 0]) == (12, 14, 10)
            assert r.instance[i, 0] == BODY_INSTANCE
            assert r.return_flags[i, 0] == 7
            assert r.reflectivity[i, 0] == pytest.approx(0.10)
            assert np.isnan(r.range_m[i, 1])
        elif kind[i] == 1:
            assert not r.valid[i].any()
            assert np.isnan(r.range_m[i]).all()
        else:
            assert r.valid[i].all()
            np.testing.assert_array_equal(r.range_m[i], [10.0, 20.0])
            assert r.class_id[i].tolist() == [1, 1]


def test_noise_off_gives_the_table_range_and_the_minimum_is_0_2_m():
    table = table_of([1.0, 1.0], [0.75, 0.05], [30, 30], [0.0, 0.0], 1, 2)
    out = apply_self_returns(table, scene_returns(2), scan_index=0, seed=0, std_m=0.5, noise_on=False)
    np.testing.assert_array_equal(out.returns.range_m[:, 0], [0.75, 0.2])


def test_range_noise_has_sigma_0_over_many_scans():
    n = 64
    table = table_of(np.ones(n), np.full(n, 1.0), np.full(n, 10), np.zeros(n), 16, 4)
    ranges = np.concatenate(
        [
            apply_self_returns(table, scene_returns(n), scan_index=k, seed=3, std_m=0.02).returns.range_m[:, 0]
            for k in range(200)
        ]
    )
    # 12 800 hash normals: mean within 4 standard errors of 1 m, std within 5 % of 0.02 m.
    assert abs(ranges.mean() - 1.0) < 4 * 0.02 / math.sqrt(len(ranges))
    assert ranges.std() == pytest.approx(0.02, rel=0.05)


def test_frequencies_follow_the_table_over_scans():
    n = 40
    p_self = np.linspace(0.0, 0.6, n)
    p_block = np.full(n, 0.3)
    table = table_of(p_self, np.full(n, 1.0), np.full(n, 10), p_block, 10, 4)
    scans = 2000
    body = np.zeros(n)
    blocked = np.zeros(n)
    for k in range(scans):
        out = apply_self_returns(table, scene_returns(n), scan_index=k, seed=99, std_m=0.0)
        body += out.body
        blocked += out.blocked
    tolerance = 4.5 * np.sqrt(0.25 / scans)
    assert np.all(np.abs(body / scans - p_self) < tolerance)
    assert np.all(np.abs(blocked / scans - p_block) < tolerance)


def test_always_body_cells_never_show_the_scene_and_empty_cells_are_untouched():
    n = 8
    table = table_of([1, 1, 1, 1, 0, 0, 0, 0], [0.5] * 8, [10] * 8, [0, 0, 0, 0, 0, 0, 0, 0], 2, 4)
    for k in range(50):
        out = apply_self_returns(table, scene_returns(n), scan_index=k, seed=5, std_m=0.0022)
        assert out.body[:4].all() and not out.body[4:].any() and not out.blocked.any()
        assert (out.returns.range_m[:4, 0] < 1.6).all()
        np.testing.assert_array_equal(out.returns.range_m[4:], scene_returns(n).range_m[4:])


def test_the_seed_and_the_scan_change_the_decisions_and_the_inputs_stay_unchanged():
    n = 400
    table = table_of(np.full(n, 0.5), np.full(n, 1.0), np.full(n, 10), np.zeros(n), 100, 4)
    scene = scene_returns(n)
    before = scene.range_m.copy()
    a = apply_self_returns(table, scene, scan_index=1, seed=1, std_m=0.0).body
    b = apply_self_returns(table, scene, scan_index=2, seed=1, std_m=0.0).body
    c = apply_self_returns(table, scene, scan_index=1, seed=2, std_m=0.0).body
    again = apply_self_returns(table, scene, scan_index=1, seed=1, std_m=0.0).body
    np.testing.assert_array_equal(a, again)
    assert (a != b).sum() > 100 and (a != c).sum() > 100
    np.testing.assert_array_equal(scene.range_m, before)


def test_merging_in_place_gives_the_copy_and_changes_only_its_input():
    # The scanner merges into the fresh returns of its scan (copy=False); the result must equal
    # the copying merge, which leaves its input alone.
    from acres_lidar_ros.body.self_returns import decide_self_returns, merge_self_returns

    n = 400
    table = table_of(np.full(n, 0.4), np.full(n, 1.5), np.full(n, 30), np.full(n, 0.3), 100, 4)
    decision = decide_self_returns(table, scan_index=3, seed=7, std_m=0.01)
    scene = scene_returns(n)
    copied = merge_self_returns(table, scene, decision)
    np.testing.assert_array_equal(scene.range_m, scene_returns(n).range_m)  # input untouched
    own = scene_returns(n)
    merged = merge_self_returns(table, own, decision, copy=False)
    assert merged.range_m is own.range_m  # the same arrays, changed
    for name in Returns.__dataclass_fields__:
        np.testing.assert_array_equal(getattr(merged, name), getattr(copied, name), err_msg=name)
    assert decision.body_cells.size > 50 and decision.replaced_cells.size > decision.body_cells.size


def test_points_of_body_returns_are_range_times_direction_plus_lens():
    columns, rings = 2, 2
    table = table_of([1, 0, 0, 0], [0.5, 0, 0, 0], [10, 0, 0, 0], [0, 1, 0, 0], columns, rings)
    directions = np.array([[[1.0, 0, 0], [0, 1.0, 0]], [[0, 0, -1.0], [0, -1.0, 0]]])
    lens = np.array([[0.035, 0, 0], [0, 0.035, 0]])
    scene = scene_returns(4)
    points = np.full((4, 2, 3), 7.0)
    out = apply_self_returns(
        table,
        scene,
        0,
        0,
        std_m=0.0,
        noise_on=False,
        points_sensor=points,
        directions_sensor=directions,
        lens_origins_sensor=lens,
    )
    np.testing.assert_allclose(out.points_sensor[0, 0], [0.535, 0.0, 0.0])
    assert np.isnan(out.points_sensor[0, 1]).all() and np.isnan(out.points_sensor[1]).all()
    np.testing.assert_array_equal(out.points_sensor[2:], points[2:])


def test_a_table_for_another_sensor_is_refused():
    table = table_of(np.zeros(8), np.zeros(8), np.zeros(8), np.zeros(8), 2, 4)
    with pytest.raises(ConfigError, match="8 cells .*the scan has 12"):
        apply_self_returns(table, scene_returns(12), 0, 0, 0.0)


# --- file format -------------------------------------------------------------------------------


def write_planes(path, planes) -> None:
    np.asarray(planes, dtype="<f4").tofile(path)


def test_round_trip_is_little_endian_planes_in_cell_order(tmp_path):
    columns, rings = 3, 2
    n = columns * rings
    table = table_of(np.linspace(0, 0.5, n), np.arange(n) * 0.1 + 0.3, np.arange(n), np.full(n, 0.25), columns, rings)
    path = atomic_write(tmp_path / "t.f32", table.to_bytes())
    data = path.read_bytes()
    assert len(data) == expected_size_bytes(columns, rings) == 4 * 4 * n
    # Plane 1 (range), cell c N_r + r = 2 * 2 + 1 = 5, little-endian float32 at byte 4 (n + 5).
    offset = 4 * (n + 5)
    assert data[offset : offset + 4] == np.float32(0.8).astype("<f4").tobytes()
    back = load_self_table(path, columns, rings)
    np.testing.assert_array_equal(back.planes(), table.planes())


def test_wrong_size_names_the_file_and_both_sizes(tmp_path):
    path = tmp_path / "short.f32"
    write_planes(path, np.zeros(4 * 1800 * 32 - 1))
    with pytest.raises(ConfigError) as info:
        load_self_table(path, 1800, 32)
    message = str(info.value)
    assert str(path) in message and "921596 bytes" in message and "expected 921600 bytes" in message


@pytest.mark.parametrize(
    ("plane", "cell", "value", "text"),
    [
        (0, 5, np.nan, "p_self = nan"),
        (1, 6, np.nan, "range_m = nan"),
        (0, 3, 1.5, "p_self = 1.5: expected a probability in \\[0, 1\\]"),
        (3, 2, -0.25, "p_block = -0.25: expected a probability in \\[0, 1\\]"),
        (1, 6, -1.0, "range = -1 m"),
        (2, 4, 300.0, "intensity = 300: expected a byte"),
    ],
)
def test_bad_values_name_the_file_and_the_first_bad_cell(tmp_path, plane, cell, value, text):
    columns, rings = 4, 2
    planes = np.zeros((4, columns * rings))
    planes[plane, cell] = value
    planes[plane, cell + 1] = value  # a second bad cell: the message names the first
    path = tmp_path / "bad.f32"
    write_planes(path, planes)
    with pytest.raises(ConfigError, match=text) as info:
        load_self_table(path, columns, rings)
    assert str(path) in str(info.value)
    assert f"cell {cell} (column {cell // rings}, ring {cell % rings})" in str(info.value)


def test_p_self_plus_p_block_above_one_is_refused(tmp_path):
    planes = np.zeros((4, 8))
    planes[0, 6], planes[3, 6] = 0.75, 0.5
    path = tmp_path / "sum.f32"
    write_planes(path, planes)
    with pytest.raises(ConfigError, match=r"cell 6 \(column 3, ring 0\): p_self \+ p_block = 0.75 \+ 0.5 = 1.25"):
        load_self_table(path, 4, 2)


def test_a_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot be read"):
        load_self_table(tmp_path / "none.f32", 4, 2)
