"""The self-table generator against geometry and the spec's equations; the shipped Polaris table.

Expected values come from the geometry of a wall, a floor and an edge in front of a level sensor
and from the spec's backscatter, range equation, detection threshold and intensity byte, written
out here with ``math`` rather than through physics.py.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from urdf_support import urdf_with

from acres_lidar_ros.body.self_returns import load_self_table
from acres_lidar_ros.body.self_table_gen import (
    BODY_RETURN_MAX_M,
    GRAZING_FULL_DEG,
    GRAZING_NONE_DEG,
    generate_self_table,
)
from acres_lidar_ros.config.sensors import load_sensor_config

# Spec "Self-Return Mask": the measured Polaris table.
SPEC_CELLS_WITH_RETURN = 20711
SPEC_CELLS_BLOCKING = 11522
SPEC_BODY_POINTS_PER_SCAN = 15900
SPEC_RANGE_M = (0.26, 1.58)


def level_sensor(columns: int, elevations_deg: list[float], divergence_mrad: float = 0.0, **more):
    """The default sensor, level at (0, 0, 1), no lens offset, columns counter-clockwise."""
    overrides = {
        "columns": columns,
        "elevations_deg": elevations_deg,
        "azimuth_offsets_deg": [0.0] * len(elevations_deg),
        "azimuth_order": "ccw",
        "lens_center_m": 0.0,
        "position_flu_m": [0.0, 0.0, 1.0],
        "rpy_deg": [0.0, 0.0, 0.0],
        "beam_divergence_mrad": divergence_mrad,
        **more,
    }
    return load_sensor_config("default").with_overrides(overrides)


def spec_backscatter(theta_rad: float) -> float:
    """Default vehicle material: rho 0.3, k 1, specular 0.5 with width 8 deg."""
    return 0.3 * max(math.cos(theta_rad), 1e-4) + 0.5 * math.exp(-((theta_rad / math.radians(8.0)) ** 2))


def spec_detection_probability(rho_e: float, range_m: float, r10_m: float = 60.0) -> float:
    signal = 100.0 * (rho_e / 0.1) * (r10_m / range_m) ** 2 * (1.0 - math.exp(-((range_m / 1.0) ** 2)))
    threshold = 85.961306  # the spec's S_T for S10 = 100, B = 20, p = 0.9
    return 0.5 * (1.0 + math.erf((signal - threshold) / math.sqrt(signal + 20.0) / math.sqrt(2.0)))


def ramp(theta_deg: float) -> float:
    return min(1.0, max(0.0, (GRAZING_NONE_DEG - theta_deg) / (GRAZING_NONE_DEG - GRAZING_FULL_DEG)))


def generate(tmp_path, urdf_text, config, name="t", body_return_max_m=math.inf):
    """The generator on a one-box URDF; no limit on the body's return range unless one is given."""
    urdf = tmp_path / f"{name}.urdf"
    urdf.write_text(urdf_text)
    return generate_self_table(urdf, config, body_return_max_m=body_return_max_m)


def test_a_wall_gives_the_cells_ranges_and_intensities_of_geometry(tmp_path):
    # Wall: the face x = 2 m, y in [-1, 1], z in [0, 2]; the sensor is at z = 1 looking along x.
    elevations = [-60.0, -20.0, 0.0, 20.0, 45.0]
    config = level_sensor(36, elevations)
    table, stats = generate(tmp_path, urdf_with((2.1, 0.0, 1.0), (0.2, 2.0, 2.0)), config)
    p_self = table.p_self.reshape(36, 5)
    expected_cells = set()
    for c in range(36):
        alpha = math.radians(10.0 * c)
        for r, eps_deg in enumerate(elevations):
            eps = math.radians(eps_deg)
            if math.cos(alpha) <= 0:
                continue
            y, z = 2.0 * math.tan(alpha), 1.0 + 2.0 * math.tan(eps) / math.cos(alpha)
            if abs(y) > 1.0 or not 0.0 <= z <= 2.0:
                continue
            expected_cells.add((c, r))
            range_m = 2.0 / (math.cos(eps) * math.cos(alpha))
            theta = math.acos(math.cos(eps) * math.cos(alpha))
            rho = spec_backscatter(theta)
            p = ramp(math.degrees(theta)) * spec_detection_probability(rho, range_m)
            i = c * 5 + r
            assert table.p_self[i] == pytest.approx(p, abs=1e-6)
            assert table.p_self[i] + table.p_block[i] == pytest.approx(1.0, abs=1e-6)
            assert table.range_m[i] == pytest.approx(range_m, abs=1e-5)
            assert table.intensity[i] == math.floor(100.0 * rho + 0.5)
    # Columns 0, 1, 2, 34, 35 (|alpha| <= atan 0.5) and rings -20, 0, 20 deg: 15 cells.
    assert expected_cells == {(c, r) for c in (0, 1, 2, 34, 35) for r in (1, 2, 3)}
    got = {(int(c), int(r)) for c, r in zip(*np.nonzero(p_self > 0))}
    assert got == expected_cells
    np.testing.assert_array_equal(table.p_block, 0.0)  # every incidence is below the ramp
    assert stats["cells_with_return"] == 15
    assert stats["expected_body_points_per_scan"] == pytest.approx(table.p_self.sum(), abs=0.05)
    assert stats["return_range_min_m"] == pytest.approx(2.0, abs=1e-4)
    assert stats["return_range_max_m"] == pytest.approx(2.0 / (math.cos(math.radians(20)) ** 2), abs=1e-4)


def test_body_hits_beyond_the_return_limit_block_without_a_return(tmp_path):
    # The wall above with a 2.1 m limit: a cell returns where 2 / (cos eps cos alpha) <= 2.1 m and
    # is stopped without a return beyond it (the body's, never the scene's).
    elevations = [-60.0, -20.0, 0.0, 20.0, 45.0]
    config = level_sensor(36, elevations)
    text = urdf_with((2.1, 0.0, 1.0), (0.2, 2.0, 2.0))
    unlimited, _ = generate(tmp_path, text, config, "wall")
    table, stats = generate(tmp_path, text, config, "wall", body_return_max_m=2.1)
    on_body = unlimited.p_self + unlimited.p_block > 0
    near, far = np.zeros(36 * 5, bool), np.zeros(36 * 5, bool)
    for c, r in zip(*np.nonzero(on_body.reshape(36, 5))):
        range_m = 2.0 / (math.cos(math.radians(elevations[r])) * math.cos(math.radians(10.0 * c)))
        (near if range_m <= 2.1 else far)[c * 5 + r] = True
    # Columns 0, +-10 deg at 0 deg elevation are nearer; the other 12 wall cells farther.
    assert near.sum() == 3 and far.sum() == 12
    np.testing.assert_array_equal(table.p_self[near], unlimited.p_self[near])
    np.testing.assert_array_equal(table.range_m[near], unlimited.range_m[near])
    np.testing.assert_array_equal(table.p_self[far], 0.0)
    np.testing.assert_allclose(table.p_block[far], 1.0, atol=1e-6)
    assert stats["body_return_max_m"] == 2.1 and stats["return_range_max_m"] <= 2.1
    assert stats["cells_with_return"] == 3 and stats["cells_blocking"] == 12


def test_grazing_hits_on_a_floor_follow_the_ramp_and_the_blind_zone_blocks(tmp_path):
    # Floor top at z = 0, the sensor 1 m above it: ring eps hits at R = 1 / sin|eps|, theta = 90 - |eps|.
    elevations = [-30.0, -10.0, -5.0, -3.0]
    config = level_sensor(4, elevations)
    table, _ = generate(tmp_path, urdf_with((0.0, 0.0, -0.05), (60.0, 60.0, 0.1)), config, "floor")
    for r, eps_deg in enumerate(elevations):
        theta_deg = 90.0 - abs(eps_deg)
        range_m = 1.0 / math.sin(math.radians(abs(eps_deg)))
        rho = spec_backscatter(math.radians(theta_deg))
        p = ramp(theta_deg) * spec_detection_probability(rho, range_m)
        cells = np.arange(4) * 4 + r
        np.testing.assert_allclose(table.p_self[cells], p, atol=1e-6)
        np.testing.assert_allclose(table.p_block[cells], 1.0 - p, atol=1e-6)
        if p > 0:
            np.testing.assert_allclose(table.range_m[cells], range_m, rtol=1e-6)
    assert (table.p_block[3::4] == 1.0).all() and (table.p_self[3::4] == 0.0).all()  # 87 deg: no return

    # A plate 0.3 m under a 0.5 m blind zone: every beam that meets it is blocked, none returns.
    blind = level_sensor(4, [-90.0 + 1e-9, -60.0], min_range_m=0.5)
    table, stats = generate(tmp_path, urdf_with((0.0, 0.0, 0.65), (2.0, 2.0, 0.1)), blind, "blind")
    np.testing.assert_array_equal(table.p_self, 0.0)
    np.testing.assert_array_equal(table.p_block, 1.0)
    np.testing.assert_array_equal(table.range_m, 0.0)
    assert stats["cells_with_return"] == 0 and stats["cells_blocking"] == 8
    assert stats["nearest_body_range_m"] == pytest.approx(0.3, abs=1e-4)


def test_an_edge_through_the_beam_takes_the_energy_of_the_sub_rays_beyond_it(tmp_path):
    # beta = 20 mrad: sub-rays at 0.35 beta (cos k pi/3, sin k pi/3) in the (u, v) basis with
    # u = d x z = (0, -1, 0), v = d x u = (0, 0, -1) for d = x. A wall from y = 3 mm covers sub-rays
    # k = 2, 3, 4 (y = 0.35 beta R {0.5, 1, 0.5} > 3 mm at R = 2 m), not the centre: 3 x 0.125.
    beta = 0.020
    config = level_sensor(4, [0.0], divergence_mrad=beta * 1e3)
    table, _ = generate(tmp_path, urdf_with((2.1, 0.5015, 1.0), (0.2, 0.997, 2.0)), config, "edge")
    offset = 0.35 * beta
    range_m = 2.0 * math.sqrt(1.0 + offset**2)  # along each of the three sub-rays
    theta = math.acos(1.0 / math.sqrt(1.0 + offset**2))
    rho_e = 0.375 * spec_backscatter(theta)
    assert table.p_self[0] == pytest.approx(0.375 * spec_detection_probability(rho_e, range_m), abs=1e-6)
    assert table.p_block[0] == pytest.approx(0.0, abs=1e-6)
    assert table.range_m[0] == pytest.approx(range_m, abs=1e-5)
    assert table.intensity[0] == math.floor(100.0 * rho_e + 0.5)
    np.testing.assert_array_equal(table.p_self[1:], 0.0)


def test_the_generator_is_deterministic(tmp_path):
    config = level_sensor(90, [-40.0, -20.0, -10.0, 0.0], divergence_mrad=3.0)
    text = urdf_with((1.5, 0.4, 0.3), (1.0, 1.5, 0.6))
    a, stats_a = generate(tmp_path, text, config, "a")
    b, stats_b = generate(tmp_path, text, config, "b")
    assert a.to_bytes() == b.to_bytes()
    assert {k: v for k, v in stats_a.items() if k != "urdf"} == {k: v for k, v in stats_b.items() if k != "urdf"}
    assert stats_a["cells_with_return"] > 0


def test_the_shipped_polaris_table_is_what_the_generator_makes_from_the_shipped_urdf(repo_root):
    """The command's files are these bytes (``test_cli``); the generator itself writes nothing."""
    table, stats = generate_self_table(repo_root / "urdf" / "polaris.urdf", "polaris")
    assert table.to_bytes() == (repo_root / "config" / "polaris_lidar_self.f32").read_bytes()
    committed = json.loads((repo_root / "config" / "polaris_lidar_self.json").read_text())
    assert committed.pop("table") == "polaris_lidar_self.f32"
    assert stats == committed


def test_the_shipped_table_is_close_to_the_measured_one(repo_root):
    stats = json.loads((repo_root / "config" / "polaris_lidar_self.json").read_text())
    table = load_self_table(repo_root / "config" / "polaris_lidar_self.f32", 1800, 32)
    assert stats["cells_with_return"] == int((table.p_self > 0).sum())
    assert stats["cells_blocking"] == int((table.p_block > 0).sum())
    assert stats["expected_body_points_per_scan"] == pytest.approx(table.p_self.sum(), abs=0.05)
    assert stats["cells_with_return"] == pytest.approx(SPEC_CELLS_WITH_RETURN, rel=0.05)
    assert stats["cells_blocking"] == pytest.approx(SPEC_CELLS_BLOCKING, rel=0.05)
    assert stats["expected_body_points_per_scan"] == pytest.approx(SPEC_BODY_POINTS_PER_SCAN, rel=0.05)
    assert stats["return_range_min_m"] == pytest.approx(SPEC_RANGE_M[0], abs=0.005)
    # Every body return at or below the spec's 1.58 m (float32 ranges), none lost to the limit by more.
    assert BODY_RETURN_MAX_M == SPEC_RANGE_M[1] == stats["body_return_max_m"]
    assert table.range_m[table.p_self > 0].max() <= np.float32(SPEC_RANGE_M[1])
    assert SPEC_RANGE_M[1] - 0.005 <= stats["return_range_max_m"] <= SPEC_RANGE_M[1]
    # docs/self_returns.md: only the 15 rings at -12.9 deg and below see the body, each of them;
    # the 17 rings above never do.
    elevations = np.rad2deg(load_sensor_config("polaris").elevations_rad)
    per_ring = np.array(stats["cells_with_return_per_ring"])
    low = elevations <= -12.9 + 1e-6
    assert low.sum() == 15 and (~low).sum() == 17
    assert (per_ring[~low] == 0).all(), per_ring[~low]
    assert (per_ring[low] > 0).all(), per_ring[low]
