"""ACRES Core's LiDAR (``scan.core_scan``): ranges from geometry, the spec's range equation with the
divergence in the plane of incidence per hit, crowns passed at their transmission, no crops or
ground cover, boxes, the body, determinism and noise off by default."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from acres_lidar_ros.body.self_returns import SelfReturnTable
from acres_lidar_ros.config.material_table import MATERIAL_ID
from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.scan.core_cast import (
    LIDAR_NO_RETURN,
    LIDAR_SELF,
    LIDAR_TERRAIN,
    LIDAR_VEHICLE_BOX,
    CoreCaster,
)
from acres_lidar_ros.scan.core_scan import CoreLidar, CoreOptions
from acres_lidar_ros.scene.boxes import VehicleBox
from acres_lidar_ros.scene.builder import SceneBuilder
from acres_lidar_ros.scene.grids import TerrainGrid

HEIGHT_M = 2.0


def level_config(**changes):
    """The Polaris sensor mounted level, ``HEIGHT_M`` above base_footprint."""
    cfg = load_sensor_config("polaris")
    return dataclasses.replace(cfg, rpy_rad=np.zeros(3), position_flu_m=np.array([0.0, 0.0, HEIGHT_M]), **changes)


def flat_builder(half_m: float = 100.0) -> SceneBuilder:
    n = int(2 * half_m / 4.0) + 1
    return SceneBuilder(TerrainGrid([-half_m, -half_m], 4.0, np.zeros((n, n))))


@pytest.fixture(scope="module")
def flat_scan():
    cfg = level_config()
    lidar = CoreLidar(cfg, flat_builder().build())
    return cfg, lidar, lidar.trace_beams(np.eye(4)), lidar.scan(np.eye(4))


def expected_signal(cfg, material, range_m, cos_theta, divergence_rad, ring):
    """The spec's backscatter (Minnaert + lobe), echo stretch and range equation, written out."""
    m, rad = cfg.materials, cfg.radiometry
    theta = np.arccos(np.clip(cos_theta, 0.0, 1.0))
    width = m.specular_width_rad[material]
    lobe = m.specular[material] * np.exp(-((theta / width) ** 2)) if width > 0 else 0.0
    rho_bs = m.reflectivity[material] * np.maximum(cos_theta, 1e-4) ** m.incidence_exponent[material] + lobe
    spread = range_m * np.tan(theta) * divergence_rad
    g = cfg.pulse_length_m / np.sqrt(cfg.pulse_length_m**2 + spread**2)
    r10 = rad.ring_range_at_10pct_m[ring]
    overlap = 1.0 - np.exp(-((range_m / rad.overlap_range_m) ** 2))
    return rad.signal_at_10pct_counts * (rho_bs / 0.1) * (r10 / range_m) ** 2 * overlap * g


def test_ground_plane_ranges_and_signal_follow_the_geometry(flat_scan):
    cfg, lidar, beams, out = flat_scan
    ring = np.tile(np.arange(cfg.rings), cfg.columns)
    elevation = cfg.elevations_rad[ring]
    down = elevation < np.deg2rad(-1.0)
    # A level sensor HEIGHT_M above a flat ground: R = h / sin(-elevation) from the lens centre.
    expected_r = HEIGHT_M / np.sin(-elevation[down])
    np.testing.assert_allclose(beams.hits.range_m[down], expected_r, rtol=1e-5)
    assert np.all(beams.hits.code[down] == LIDAR_TERRAIN)
    assert np.all(beams.hits.material[down] == MATERIAL_ID["grass"])
    # The ground's normal is the up axis: the plane of incidence holds k, so beta_p = beta_v.
    np.testing.assert_allclose(beams.divergence_rad[down], cfg.beam_divergence_v_rad, rtol=1e-12)
    s = expected_signal(
        cfg, MATERIAL_ID["grass"], expected_r, np.sin(-elevation[down]), cfg.beam_divergence_v_rad, ring[down]
    )
    np.testing.assert_allclose(beams.signal_counts[down], s, rtol=1e-6)
    np.testing.assert_array_equal(beams.measured_counts, beams.signal_counts)  # noise off by default
    # Output: detected exactly where S >= S_T within range, at the exact range; z of the point is -h.
    rad = cfg.radiometry
    z_p = 1.2815515655446004  # Phi(z_p) = 0.9, the shipped p_spec
    assert rad.detection_probability_at_spec == 0.9
    threshold = rad.signal_at_10pct_counts - z_p * np.sqrt(rad.signal_at_10pct_counts + rad.ambient_counts)
    keep = (s >= threshold) & (expected_r >= cfg.min_range_m) & (expected_r <= cfg.range_m)
    got = out.range_m[down]
    np.testing.assert_array_equal(np.isfinite(got), keep)
    np.testing.assert_allclose(got[keep], expected_r[keep], rtol=1e-6)
    np.testing.assert_allclose(out.points[down, 2][keep], -HEIGHT_M, atol=1e-5)
    assert np.all(out.material[down][keep] == LIDAR_TERRAIN)
    assert np.all(out.material[~np.isfinite(out.range_m)] == LIDAR_NO_RETURN)
    assert np.all(np.isnan(out.points[~np.isfinite(out.range_m), :3]))
    assert out.returns == int(np.isfinite(out.range_m).sum()) > 0
    # Intensity: the byte of rho_rep = rho_bs (S' = S): round(100 rho) below 1.
    m = cfg.materials
    g = MATERIAL_ID["grass"]
    rho = m.reflectivity[g] * np.sin(-elevation[down][keep]) ** m.incidence_exponent[g]
    if m.specular[g] == 0:
        np.testing.assert_array_equal(out.points[down, 3][keep], np.floor(100 * rho + 0.5))


def test_a_wall_seen_level_uses_the_horizontal_divergence():
    """A vertical wall met by a beam in a horizontal plane of incidence: cos psi = 0, beta_p = beta."""
    b = flat_builder()
    b.add_box([20.0, 0.0], [1.0, 40.0, 10.0], "building", yaw_rad=0.0)
    cfg = level_config()
    lidar = CoreLidar(cfg, b.build())
    beams = lidar.trace_beams(np.eye(4))
    hits = beams.hits
    d = lidar._directions
    wall = (hits.code == MATERIAL_ID["building"]) & (np.abs(hits.normal_world[:, 0] + 1.0) < 1e-6)
    assert wall.sum() > 100
    # The face at x = 19.5 (normal -x): range from the lens origin along d.
    o = lidar._origins + [0.0, 0.0, HEIGHT_M]
    np.testing.assert_allclose(hits.range_m[wall], (19.5 - o[wall, 0]) / d[wall, 0], rtol=1e-5)
    n = np.array([-1.0, 0.0, 0.0])
    k = np.array([0.0, 0.0, 1.0])
    dw = d[wall]
    n_perp = n - (dw @ n)[:, None] * dw
    k_perp = k - (dw @ k)[:, None] * dw
    cos_psi = np.abs(np.sum(n_perp * k_perp, 1)) / (np.linalg.norm(n_perp, axis=1) * np.linalg.norm(k_perp, axis=1))
    beta_p = np.hypot(cfg.beam_divergence_v_rad * cos_psi, cfg.beam_divergence_rad * np.sqrt(1 - cos_psi**2))
    np.testing.assert_allclose(beams.divergence_rad[wall], beta_p, rtol=1e-9, atol=1e-15)
    ring = np.tile(np.arange(cfg.rings), cfg.columns)[wall]
    cos_theta = np.abs(dw[:, 0])
    s = expected_signal(cfg, MATERIAL_ID["building"], hits.range_m[wall], cos_theta, beta_p, ring)
    np.testing.assert_allclose(beams.signal_counts[wall], s, rtol=1e-6)
    level = np.abs(dw[:, 2]) < 1e-3
    assert level.any()
    np.testing.assert_allclose(beams.divergence_rad[wall][level], cfg.beam_divergence_rad, rtol=1e-3)


def crown_rays(n, target, origin=(0.0, 0.0, 14.0), spread_m=0.5, seed=1):
    rng = np.random.default_rng(seed)
    aim = np.asarray(target, float) + rng.uniform(-spread_m, spread_m, (n, 3))
    d = aim - origin
    return np.broadcast_to(origin, (n, 3)).copy(), d / np.linalg.norm(d, axis=1, keepdims=True)


def test_a_crown_passes_beams_at_its_transmission_and_two_crowns_at_its_square():
    cfg = level_config()
    tau = cfg.materials.transmission[MATERIAL_ID["tree_foliage"]]
    assert 0.05 < tau < 0.95
    b = flat_builder()
    b.add_tree([30.0, 0.0], 20.0)  # crown sphere r 6.6 m about z = 12.4 m
    b.add_tree([60.0, 0.0], 20.0)
    caster = CoreCaster(b.build(), cfg.materials.transmission, cfg.pond_threshold_m)
    n = 6000
    o, d = crown_rays(n, [30.0, 0.0, 14.0])
    keys = np.arange(n, dtype=np.uint64) * np.uint64(7919) + np.uint64(12345)
    hits = caster.cast(o, d, 200.0, keys)
    foliage = MATERIAL_ID["tree_foliage"]
    stopped_first = hits.code == foliage
    first_crown = np.abs(hits.range_m - 30.0) < 8.0
    passed_first = ~(stopped_first & first_crown)
    sd = np.sqrt(tau * (1 - tau) / n)
    assert abs(passed_first.mean() - tau) < 4 * sd
    past_both = ~stopped_first  # passed both crowns: the beam ends beyond them
    sd2 = np.sqrt(tau**2 * (1 - tau**2) / n)
    assert abs(past_both.mean() - tau**2) < 4 * sd2
    # Deterministic per BeamKey; solid with foliage off.
    again = caster.cast(o, d, 200.0, keys)
    np.testing.assert_array_equal(again.range_m, hits.range_m)
    solid = caster.cast(o, d, 200.0, keys, foliage=False)
    assert np.all(solid.code == foliage) and np.all(solid.range_m < 37.0)


def test_no_ground_cover_or_crops_and_boxes_end_the_beam():
    b = flat_builder()
    b.add_ground_cover([5.0, 0.0], [4.0, 4.0, 0.5])
    b.add_crop_field([8.0, -4.0], (2, 2), "corn", 2.0, 1.0)
    caster = CoreCaster(b.build(), level_config().materials.transmission, 0.02)
    o = np.array([[0.0, 0.0, 2.0]])
    d = np.array([[5.0, 0.0, -2.0]]) / np.hypot(5.0, 2.0)
    hits = caster.cast(o, d, 100.0, np.array([1], np.uint64))
    assert hits.code[0] == LIDAR_TERRAIN  # through the cover's dome to the ground
    np.testing.assert_allclose(hits.range_m[0], np.hypot(5.0, 2.0), rtol=1e-5)
    box = VehicleBox(np.array([3.0, 0.0, 1.0]), np.array([0.0, 0.0, 0.0, 1.0]), np.array([0.5, 1.0, 1.0]), 1)
    boxed = caster.cast(o, d, 100.0, np.array([1], np.uint64), boxes=[box])
    # The ray z = 2 - 0.4 x meets the box's top face z = 2 at x = 0 (outside it), its near face x = 2.5 at z = 1.
    assert boxed.code[0] == LIDAR_VEHICLE_BOX
    np.testing.assert_allclose(boxed.range_m[0], 2.5 * np.hypot(5.0, 2.0) / 5.0, rtol=1e-12)
    np.testing.assert_allclose(boxed.normal_world[0], [-1.0, 0.0, 0.0], atol=1e-12)
    assert boxed.material[0] == MATERIAL_ID["vehicle"]


def test_scans_are_bit_identical_and_noise_is_off_by_default_and_seeded_when_on():
    b = flat_builder()
    b.add_tree([12.0, 3.0], 10.0)
    cfg = level_config()
    lidar = CoreLidar(cfg, b.build())
    assert CoreOptions().noise is False
    a, a2 = lidar.scan(np.eye(4), index=3), lidar.scan(np.eye(4), index=3)
    for f in ("range_m", "points", "material"):
        assert getattr(a, f).tobytes() == getattr(a2, f).tobytes()
    noisy = lidar.scan(np.eye(4), index=3, options=CoreOptions(noise=True, seed=5))
    noisy2 = lidar.scan(np.eye(4), index=3, options=CoreOptions(noise=True, seed=5))
    other = lidar.scan(np.eye(4), index=3, options=CoreOptions(noise=True, seed=6))
    assert noisy.range_m.tobytes() == noisy2.range_m.tobytes()
    both = np.isfinite(a.range_m) & np.isfinite(noisy.range_m) & np.isfinite(other.range_m)
    dr = (noisy.range_m - a.range_m)[both]
    assert dr.std() > 0  # noise moves the ranges
    assert 0.3 * cfg.std_m < np.median(np.abs(dr)) < 3 * cfg.std_m + 0.05
    assert not np.array_equal(noisy.range_m[both], other.range_m[both])
    # The crown decisions follow the BeamKey, which holds the scan number.
    crown = MATERIAL_ID["tree_foliage"]
    c0 = lidar.scan(np.eye(4), index=0).material == crown
    c1 = lidar.scan(np.eye(4), index=1).material == crown
    assert c0.any() and not np.array_equal(c0, c1)


def test_the_body_replaces_cells_by_its_table_and_cast_ray_checks_its_input():
    cfg = level_config()
    cells = cfg.columns * cfg.rings
    p_self = np.zeros(cells)
    p_block = np.zeros(cells)
    p_self[: cfg.rings] = 1.0  # column 0: always the body at 0.8 m
    p_block[cfg.rings : 2 * cfg.rings] = 1.0  # column 1: always blocked
    table = SelfReturnTable(cfg.columns, cfg.rings, p_self, np.full(cells, 0.8), np.full(cells, 40.0), p_block)
    lidar = CoreLidar(cfg, flat_builder().build(), self_table=table)
    out = lidar.scan(np.eye(4))
    assert np.all(out.material[: cfg.rings] == LIDAR_SELF)
    np.testing.assert_allclose(out.range_m[: cfg.rings], 0.8, rtol=1e-6)
    assert np.all(out.points[: cfg.rings, 3] == 40.0)
    assert np.all(out.material[cfg.rings : 2 * cfg.rings] == LIDAR_NO_RETURN)
    off = lidar.scan(np.eye(4), options=CoreOptions(self_returns=False))
    assert not np.any(off.material == LIDAR_SELF)
    ray = lidar.cast_ray([0.0, 0.0, 2.0], [0.0, 0.0, -1.0], 10.0, 7)
    assert ray.hit and ray.material == LIDAR_TERRAIN
    np.testing.assert_allclose(ray.range_m, 2.0, atol=1e-6)
    np.testing.assert_allclose(ray.normal_world, [0.0, 0.0, 1.0], atol=1e-6)
    assert not lidar.cast_ray([0.0, 0.0, 2.0], [0.0, 0.0, -1.0], 1.0, 7).hit
    with pytest.raises(ConfigError, match="direction"):
        lidar.cast_ray([0.0, 0.0, 2.0], [0.0, 0.0, 0.0], 10.0, 7)
    with pytest.raises(ConfigError, match="noise"):
        CoreOptions(noise=1)  # type: ignore[arg-type]


def test_core_scanner_gives_the_core_scan_as_a_scan():
    from acres_lidar_ros.config.material_table import CLASS_ID
    from acres_lidar_ros.scan.core_scanner import CoreScanner
    from acres_lidar_ros.scan.scan_types import ScanOptions
    from acres_lidar_ros.sensor.poses import PoseHistory

    b = flat_builder()
    b.add_tree([12.0, 3.0], 10.0)
    scene = b.build()
    cfg = level_config(model="core")
    scanner = CoreScanner(cfg, scene, options=ScanOptions(seed=4))
    poses = PoseHistory.from_arrays(np.array([0.0, 1.0]), np.zeros((2, 3)), np.tile([0.0, 0.0, 0.0, 1.0], (2, 1)))
    scan = scanner.scan(poses, 100_000_000)
    direct = CoreLidar(cfg, scene).scan(np.eye(4), index=0, options=CoreOptions(seed=4))
    assert scan.returns.range_m.shape == (cfg.columns * cfg.rings, 1)
    np.testing.assert_array_equal(scan.returns.range_m[:, 0], direct.range_exact_m)
    np.testing.assert_array_equal(scan.returns.valid[:, 0], np.isfinite(direct.range_m))
    np.testing.assert_allclose(scan.points_sensor[:, 0, :], direct.points[:, :3], atol=1e-4)
    ground = direct.material == LIDAR_TERRAIN
    assert np.all(scan.returns.class_id[ground, 0] == CLASS_ID["ground"])
    crown = direct.material == MATERIAL_ID["tree_foliage"]
    assert crown.any() and np.all(scan.returns.class_id[crown, 0] == CLASS_ID["tree"])
    np.testing.assert_array_equal(scan.returns.intensity[:, 0], direct.points[:, 3].astype(np.uint8))
    assert not scan.time_offset_s.any()  # every beam from the stamp pose
    assert scanner.scan(poses, 200_000_000).index == 1
    # The node's loop traces a sweep: nothing ahead of the stamp, the whole core scan at its finish.
    sweep = scanner.start_sweep(300_000_000, index=5)
    assert sweep.trace_covered(poses) == 0 and not sweep.partial and sweep.ready_slices() == []
    finished = sweep.finish(poses)
    again = CoreScanner(cfg, scene, options=ScanOptions(seed=4)).scan(poses, 300_000_000, index=5)
    assert finished.index == 5 and sweep.done
    np.testing.assert_array_equal(finished.returns.range_m, again.returns.range_m)
    assert not scanner.motion_on  # the loop needs the pose at the stamp only
    with pytest.raises(ConfigError, match="rain_mm_per_h"):
        scanner.set_options(rain_mm_per_h=2.0)
    with pytest.raises(ConfigError, match="truth"):
        CoreScanner(cfg, scene, options=ScanOptions(truth=True))


def test_the_core_model_meets_the_scene_at_the_odom_in_scene_offset():
    """``--odom-in-scene`` with ``--model core``: a ray in odom meets the scene where the odom
    frame's pose in the scene puts it; vehicle boxes stay in odom; a scan at the odom origin is the
    scan without the offset at the offset's pose."""
    from acres_lidar_ros.config.material_table import CLASS_ID
    from acres_lidar_ros.scan.core_scanner import CoreScanner
    from acres_lidar_ros.scan.scan_types import ScanOptions
    from acres_lidar_ros.sensor.poses import PoseHistory
    from acres_lidar_ros.tracing.scene_frame import odom_in_scene_transform
    from acres_lidar_ros.tracing.trace import Tracer

    b = flat_builder()
    b.add_box([30.0, 10.0], [2.0, 2.0, 4.0], "building")  # its west face at scene x = 29
    scene = b.build()
    # The odom origin at scene (25, 10, 0.5), its x axis along the scene's +y (yaw 90 deg).
    T_scene_odom = odom_in_scene_transform([25.0, 10.0, 0.5, 0.0, 0.0, 90.0], "odom_in_scene")
    cfg = level_config(model="core")
    lidar = CoreLidar(cfg, scene, T_scene_odom=T_scene_odom)
    # Along odom -y from odom (0, 0, 1.5): in the scene from (25, 10, 2) along +x: the face 4 m away.
    west = lidar.cast_ray(np.array([0.0, 0.0, 1.5]), np.array([0.0, -1.0, 0.0]), 100.0, 1)
    assert west.hit and west.range_m == pytest.approx(4.0, abs=1e-6)
    np.testing.assert_allclose(west.normal_world, [0.0, 1.0, 0.0], atol=1e-6)  # the face's -x normal, in odom
    down = lidar.cast_ray(np.array([0.0, 0.0, 3.0]), np.array([0.0, 0.0, -1.0]), 100.0, 1)
    assert down.range_m == pytest.approx(3.5, abs=1e-6) and down.material == LIDAR_TERRAIN  # scene z 3.5 over z 0
    plain = CoreLidar(cfg, scene).cast_ray(np.array([0.0, 0.0, 1.5]), np.array([0.0, -1.0, 0.0]), 100.0, 1)
    assert not plain.hit  # no building along odom -y without the offset
    box = VehicleBox(np.array([0.0, -2.0, 1.5]), np.array([0.0, 0.0, 0.0, 1.0]), np.array([2.0, 1.0, 1.0]), 3)
    boxed = lidar.cast_ray(np.array([0.0, 0.0, 1.5]), np.array([0.0, -1.0, 0.0]), 100.0, 1, boxes=[box])
    assert boxed.material == LIDAR_VEHICLE_BOX and boxed.range_m == pytest.approx(1.0, abs=1e-9)
    # The CLI's path: the CoreScanner takes the tracer's offset.
    scanner = CoreScanner(cfg, options=ScanOptions(seed=2), tracer=Tracer(scene, T_scene_odom=T_scene_odom))
    poses = PoseHistory.from_arrays(np.array([0.0, 1.0]), np.zeros((2, 3)), np.tile([0.0, 0.0, 0.0, 1.0], (2, 1)))
    moved = scanner.scan(poses, 0).returns
    there = CoreLidar(cfg, scene).scan(T_scene_odom, index=0, options=CoreOptions(seed=2))
    np.testing.assert_array_equal(moved.valid[:, 0], np.isfinite(there.range_m))
    np.testing.assert_allclose(moved.range_m[:, 0], there.range_exact_m, atol=1e-6, equal_nan=True)
    building = np.isfinite(there.range_m) & (there.material == MATERIAL_ID["building"])
    assert building.sum() > 100
    assert np.all(moved.class_id[building, 0] == CLASS_ID["building"])
