"""End to end through the Scanner: geometry on a flat plane, per-column firing poses, determinism."""

import math

import numpy as np
import pytest

from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.scan.scan_types import ScanOptions
from acres_lidar_ros.scan.scanner import Scanner
from acres_lidar_ros.scene.builder import SceneBuilder
from acres_lidar_ros.scene.grids import TerrainGrid
from acres_lidar_ros.scene.instances import VEHICLE_INSTANCE_BASE
from acres_lidar_ros.sensor.pattern import mount_rotation
from acres_lidar_ros.sensor.poses import PoseHistory
from acres_lidar_ros.sensor.timing import column_time_offset

PLANE_HALF_M = 400.0


@pytest.fixture(scope="module")
def plane_tracer():
    from acres_lidar_ros.tracing.trace import Tracer

    terrain = TerrainGrid(np.array([-PLANE_HALF_M, -PLANE_HALF_M]), 2 * PLANE_HALF_M, np.zeros((2, 2)))
    return Tracer(SceneBuilder(terrain).build())


@pytest.fixture(scope="module")
def polaris():
    return load_sensor_config("polaris")


def at_rest(position_m, yaw_deg=0.0):
    h = math.radians(yaw_deg) / 2
    return PoseHistory.from_arrays(np.zeros(1), np.array([position_m], float), [[0, 0, math.sin(h), math.cos(h)]])


def expected_plane_ranges(config, base_xyz, yaw_deg=0.0):
    """Range of every beam to the plane z = 0 from the spec's equations, written out here.

    d = (cos e cos a, cos e sin a, sin e), a = alpha_c + delta_r, o = l (cos alpha_c, sin alpha_c, 0);
    world = Rz(yaw) (M x + t_mount) + base; the plane is hit at R = -o_w.z / d_w.z for d_w.z < 0.
    """
    columns = config.columns
    alpha_c = -2 * np.pi * np.arange(columns) / columns  # cw layout
    a = alpha_c[:, None] + config.azimuth_offsets_rad[None, :]
    e = np.broadcast_to(config.elevations_rad[None, :], a.shape)
    d = np.stack([np.cos(e) * np.cos(a), np.cos(e) * np.sin(a), np.sin(e)], -1)
    o = config.lens_center_m * np.stack([np.cos(alpha_c), np.sin(alpha_c), np.zeros(columns)], -1)
    yaw = math.radians(yaw_deg)
    Rz = np.array([[math.cos(yaw), -math.sin(yaw), 0], [math.sin(yaw), math.cos(yaw), 0], [0, 0, 1]])
    R = Rz @ mount_rotation(config.rpy_rad)
    d_w = d @ R.T
    o_w = o @ R.T + Rz @ config.position_flu_m + np.asarray(base_xyz)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = -o_w[:, None, 2] / d_w[..., 2]
    return np.where(d_w[..., 2] < 0, r, np.inf), d, o


def test_flat_plane_ranges_match_the_spec_geometry(polaris, plane_tracer):
    scanner = Scanner(polaris, tracer=plane_tracer, options=ScanOptions(radiometry=False, self_returns=False))
    scan = scanner.scan(at_rest([3.0, -2.0, 0.0], yaw_deg=30.0), stamp_ns=10**9)
    expected, _, _ = expected_plane_ranges(polaris, [3.0, -2.0, 0.0], yaw_deg=30.0)
    expected = expected.reshape(-1)
    in_window = (expected >= polaris.min_range_m) & (expected <= polaris.range_m)
    got = scan.returns.range_m[:, 0]
    assert scan.returns.valid[:, 0].sum() == in_window.sum() > 20000
    np.testing.assert_allclose(got[in_window], expected[in_window], rtol=2e-6, atol=2e-5)
    assert np.isnan(got[~in_window]).all()


def test_ring_elevation_and_column_azimuth_recovered_from_points(polaris, plane_tracer):
    scanner = Scanner(polaris, tracer=plane_tracer, options=ScanOptions(radiometry=False, self_returns=False))
    scan = scanner.scan(at_rest([0.0, 0.0, 0.0]), stamp_ns=10**9)
    points = scan.points_sensor[:, 0].reshape(polaris.columns, polaris.rings, 3)
    _, _, lens = expected_plane_ranges(polaris, [0, 0, 0])
    v = points - lens[:, None, :]  # p - o = R d
    valid = np.isfinite(v[..., 0])
    elevation_deg = np.rad2deg(np.arcsin(v[..., 2] / np.linalg.norm(v, axis=-1)))
    table_deg = np.rad2deg(polaris.elevations_rad)
    for r in range(polaris.rings):
        if valid[:, r].any():
            np.testing.assert_allclose(elevation_deg[valid[:, r], r], table_deg[r], atol=1e-4)
    azimuth_deg = np.rad2deg(np.arctan2(v[..., 1], v[..., 0]))
    expected_deg = -0.2 * np.arange(polaris.columns)[:, None] + np.rad2deg(polaris.azimuth_offsets_rad)[None, :]
    wrapped = (azimuth_deg - expected_deg + 180.0) % 360.0 - 180.0
    np.testing.assert_allclose(wrapped[valid], 0.0, atol=1e-4)


def test_each_column_is_traced_from_its_own_firing_pose(polaris, plane_tracer):
    """The vehicle climbs at 2 m/s: a column's ground range follows its own firing time."""
    scanner = Scanner(polaris, tracer=plane_tracer, options=ScanOptions(radiometry=False, self_returns=False))
    times = np.array([0.0, 1.0])
    poses = PoseHistory.from_arrays(times, [[0, 0, 1.0], [0, 0, 3.0]], [[0, 0, 0, 1]] * 2)
    stamp_s = 0.5
    scan = scanner.scan(poses, stamp_ns=int(stamp_s * 1e9))
    dt = np.arange(polaris.columns) / polaris.columns * 0.1 - 0.1  # cw from 0 deg: phi_c = 0.2 c deg
    np.testing.assert_allclose(scan.time_offset_s, dt, atol=1e-12)
    height = 1.0 + 2.0 * (stamp_s + dt)
    got = scan.returns.range_m[:, 0].reshape(polaris.columns, polaris.rings)
    for c in (0, 600, 1799):
        expected, _, _ = expected_plane_ranges(polaris, [0, 0, height[c]])
        ring = 31  # the steepest ring always sees the ground
        assert got[c, ring] == pytest.approx(expected[c, ring], abs=2e-5)
    # Without motion distortion every column uses the stamp pose.
    still = Scanner(
        polaris, tracer=plane_tracer, options=ScanOptions(radiometry=False, self_returns=False, motion_distortion=False)
    )
    flat = still.scan(poses, stamp_ns=int(stamp_s * 1e9))
    assert (flat.time_offset_s == 0).all()
    expected, _, _ = expected_plane_ranges(polaris, [0, 0, 1.0 + 2.0 * stamp_s])
    assert flat.returns.range_m[:, 0].reshape(polaris.columns, polaris.rings)[5, 31] == pytest.approx(
        expected[5, 31], abs=2e-5
    )


def test_ccw_spin_timing_in_the_scan(polaris, plane_tracer):
    config = polaris.with_overrides({"spin_direction": "ccw", "scan_start_azimuth_deg": 90.0})
    scanner = Scanner(config, tracer=plane_tracer, options=ScanOptions(radiometry=False, self_returns=False))
    alpha = -2 * np.pi * np.arange(config.columns) / config.columns
    np.testing.assert_allclose(scanner.time_offsets_s(), column_time_offset(alpha, math.pi / 2, "ccw", 0.1))
    # phi = (alpha_c - 90 deg) mod 360: column 0 (alpha 0) turned 270 deg, fires at 0.75 T - T.
    assert scanner.time_offsets_s()[0] == pytest.approx(-0.025)


def test_same_seed_scene_and_poses_give_bit_identical_scans(polaris, plane_tracer):
    poses = PoseHistory.from_arrays(np.array([0.0, 1.0]), [[0, 0, 0], [5, 1, 0]], [[0, 0, 0, 1]] * 2)
    scans = []
    for _ in range(2):
        scanner = Scanner(polaris, tracer=plane_tracer, options=ScanOptions(seed=11, self_returns=False))
        scans.append([scanner.scan(poses, stamp_ns=int(t * 1e9)) for t in (0.3, 0.4)])
    for a, b in zip(*scans):
        for name in ("range_m", "valid", "intensity", "signal", "reflectivity", "return_flags", "class_id"):
            assert np.array_equal(getattr(a.returns, name), getattr(b.returns, name), equal_nan=True), name
        assert np.array_equal(a.points_sensor, b.points_sensor, equal_nan=True)
    # A different seed changes the noise.
    other = Scanner(polaris, tracer=plane_tracer, options=ScanOptions(seed=12, self_returns=False))
    c = other.scan(poses, stamp_ns=int(0.3e9))
    assert not np.array_equal(c.returns.range_m, scans[0][0].returns.range_m, equal_nan=True)


RETURNS_FIELDS = (
    "range_m",
    "valid",
    "reflectivity",
    "signal",
    "intensity",
    "class_id",
    "material_id",
    "instance",
    "return_flags",
)


@pytest.fixture(scope="module")
def farm_tour():
    from acres_lidar_ros.scene.farm_v1 import build_default_farm
    from acres_lidar_ros.scene.tour import default_tour
    from acres_lidar_ros.tracing.trace import Tracer

    scene = build_default_farm()
    return Tracer(scene), default_tour(scene)


def _assert_same_returns(got, expected):
    for name in RETURNS_FIELDS:
        a, b = getattr(got, name), getattr(expected, name)
        assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), name


@pytest.mark.parametrize("sensor", ["polaris", "default"])  # 1 and 7 sub-rays
@pytest.mark.parametrize("weather", [{}, {"rain_mm_per_h": 5.0, "visibility_m": 500.0}], ids=["clear", "rain"])
def test_a_sweep_traced_in_blocks_as_odometry_arrives_equals_one_scan(farm_tour, sensor, weather):
    """The node traces columns, and runs the radiometry that draws nothing, as their poses
    arrive; the scan must be bit for bit the whole scan's hits prepared as one block."""
    from acres_lidar_ros.radiometry.detection import finish_returns
    from acres_lidar_ros.radiometry.echoes import prepare_block
    from acres_lidar_ros.radiometry.noise import NoiseStreams

    config = load_sensor_config(sensor)
    tracer, (times, positions, quaternions) = farm_tour
    stamp_s = times[0] + 3.0
    stamp_ns = int(round(stamp_s * 1e9))
    window = (times > stamp_s - 0.15) & (times <= stamp_s + 0.05)
    t, p, q = times[window], positions[window], quaternions[window]
    options = ScanOptions(seed=5, noise=True, self_returns=False, **weather)
    full = Scanner(config, tracer=tracer, options=options).scan(PoseHistory.from_arrays(t, p, q), stamp_ns=stamp_ns)
    scanner = Scanner(config, tracer=tracer, options=options)
    sweep = scanner.start_sweep(stamp_ns)
    history = PoseHistory()
    traced = 0
    for i in range(len(t)):  # odometry arrives sample by sample
        history.append(t[i], p[i], q[i])
        traced += sweep.trace_covered(history)
    assert 0 < traced == config.columns and sweep.done
    assert len(sweep._blocks) > 2 and all(block.beams is not None for block in sweep._blocks)  # block by block
    chunked = sweep.finish(history)
    np.testing.assert_array_equal(chunked.T_world_sensor, full.T_world_sensor)

    # The reference: the whole scan's hits as one block.
    origins, directions = scanner.pattern.rays_world(full.T_world_sensor)
    hits = tracer.trace(
        origins,
        directions,
        max_range_m=config.range_m,
        max_hits=config.max_hits_per_sub_ray,
        continue_step_m=config.continue_step_m,
        pond_threshold_m=config.pond_threshold_m,
    )
    streams = NoiseStreams(5)
    cells = np.arange(config.columns * config.rings)
    block = prepare_block(
        hits, origins, directions, scanner.pattern.sub_ray_weights, scanner.model, 5, sweep.index, cells
    )
    one_shot, _ = finish_returns([block], scanner.model, streams, sweep.index)
    _assert_same_returns(chunked.returns, one_shot)
    _assert_same_returns(full.returns, one_shot)
    assert (scanner.streams.noise.state, scanner.streams.rain.state) == (streams.noise.state, streams.rain.state)


def test_a_sweep_whose_options_change_midway_forms_the_returns_from_its_hits(polaris, farm_tour):
    """A block prepared with the old options is not used: the scan is the one the new options give."""
    tracer, (times, positions, quaternions) = farm_tour
    stamp_s = times[0] + 3.0
    stamp_ns = int(round(stamp_s * 1e9))
    poses = PoseHistory.from_arrays(times, positions, quaternions)
    scanner = Scanner(polaris, tracer=tracer, options=ScanOptions(seed=5))
    sweep = scanner.start_sweep(stamp_ns)
    sweep.trace_columns(poses, np.arange(100))
    scanner.set_options(noise=False)
    changed = sweep.finish(poses)
    expected = Scanner(polaris, tracer=tracer, options=ScanOptions(seed=5, noise=False)).scan(poses, stamp_ns)
    _assert_same_returns(changed.returns, expected.returns)


def test_planar_pattern_sees_a_wall_at_its_level(polaris):
    """ACRES Core's planar scan: 360 level beams from the Helios position, no lens, no radiometry."""
    from acres_lidar_ros.scene.builder import SceneBuilder
    from acres_lidar_ros.scene.grids import TerrainGrid
    from acres_lidar_ros.sensor.pattern import planar_config
    from acres_lidar_ros.tracing.trace import Tracer

    builder = SceneBuilder(TerrainGrid(np.array([-100.0, -100.0]), 200.0, np.zeros((2, 2))))
    builder.add_box([12.5, 0.0], [1.0, 40.0, 5.0], "building")  # wall face at x = 12 m, 2.039 m level inside it
    planar = planar_config(polaris)
    scanner = Scanner(planar, tracer=Tracer(builder.build()), options=ScanOptions(radiometry=False, self_returns=False))
    scan = scanner.scan(at_rest([0.0, 0.0, 0.0]), stamp_ns=10**9)
    range_m = scan.returns.range_m[:, 0]
    assert scan.returns.valid.shape == (360, 1)
    # Beam at azimuth a (ccw, deg) from x = 2.5 m meets x = 12 m at (12 - 2.5) / cos a, up to 30 m.
    a = np.deg2rad(np.arange(360.0))
    expected = np.where(np.cos(a) > 0, 9.5 / np.cos(a), np.inf)
    hit = (expected <= 30.0) & (np.abs(9.5 * np.tan(a)) < 20.0)  # the wall spans y = -20 .. 20 m
    np.testing.assert_allclose(range_m[hit], expected[hit], rtol=1e-5)
    assert np.isnan(range_m[~hit]).all()  # level beams never meet the flat ground within 30 m
    assert (scan.returns.class_id[hit, 0] == 3).all()


def test_vehicle_boxes_appear_at_their_pose_with_class_vehicle(polaris, plane_tracer):
    from acres_lidar_ros.scene.boxes import VehicleBox

    yaw = math.radians(20.0)
    box = VehicleBox(
        centre_m=np.array([15.0, 0.0, 1.0]),
        quaternion_xyzw=np.array([0, 0, math.sin(yaw / 2), math.cos(yaw / 2)]),
        half_extents_m=np.array([2.0, 1.0, 1.0]),
        object_id=77,
    )
    scanner = Scanner(polaris, tracer=plane_tracer, options=ScanOptions(radiometry=False, self_returns=False))
    scan = scanner.scan(at_rest([0.0, 0.0, 0.0]), stamp_ns=10**9, boxes=[box])
    on_box = scan.returns.valid[:, 0] & (scan.returns.class_id[:, 0] == 12)
    assert on_box.sum() > 50
    assert (scan.returns.instance[on_box, 0] == VEHICLE_INSTANCE_BASE + 77).all() and (
        scan.returns.material_id[on_box, 0] == 14
    ).all()
    world = np.einsum(
        "cij,cj->ci",
        scan.T_world_sensor[scan.cell_column[on_box]],
        np.c_[scan.points_sensor[on_box, 0], np.ones(on_box.sum())],
    )[:, :3]
    local = (world - box.centre_m) @ np.array(
        [[math.cos(yaw), -math.sin(yaw), 0], [math.sin(yaw), math.cos(yaw), 0], [0, 0, 1]]
    )
    # Every box point lies on the box surface: inside the extents and on one face.
    assert (np.abs(local) <= box.half_extents_m + 1e-4).all()
    assert (np.abs(np.abs(local) - box.half_extents_m).min(axis=1) < 1e-4).all()


def test_no_scene_point_is_nearer_than_the_body_where_the_body_always_returns(polaris):
    """With the body on, cells the table marks as always body carry only the body."""
    from acres_lidar_ros.body.self_returns import load_self_table
    from acres_lidar_ros.scene.farm_v1 import build_default_farm
    from acres_lidar_ros.scene.tour import default_tour

    table = load_self_table(polaris.self_returns, polaris.columns, polaris.rings)
    always = table.p_self >= 1.0
    assert always.sum() > 1000
    scene = build_default_farm()
    tour = PoseHistory.from_arrays(*default_tour(scene))
    scanner = Scanner(polaris, scene, ScanOptions(seed=1), self_table=table)
    scan = scanner.scan(tour, stamp_ns=int((tour.start_s + 2.0) * 1e9))
    returns = scan.returns
    assert (returns.class_id[always, 0] == 12).all() and (returns.valid[always].sum(axis=1) == 1).all()
    nearest_body_m = table.range_m[table.p_self > 0].min()
    scene_points = returns.valid & (returns.class_id != 12)
    assert (returns.range_m[scene_points] >= nearest_body_m).all()
    # About the spec's share of body points in a Polaris scan (~15,900 of ~34,500).
    body_points = int((returns.valid & (returns.class_id == 12)).sum())
    assert 14500 < body_points < 17500


def test_a_sweep_with_the_body_equals_one_scan_with_the_body(polaris, farm_tour):
    """The body's part is decided while the sweep runs; the scan is the one-shot scan."""
    from acres_lidar_ros.body.self_returns import apply_self_returns, sensor_self_table

    tracer, (times, positions, quaternions) = farm_tour
    table = sensor_self_table(polaris)
    stamp_ns = int(round((times[0] + 2.0) * 1e9))
    poses = PoseHistory.from_arrays(times, positions, quaternions)
    with_body = ScanOptions(seed=3)
    sweep_scanner = Scanner(polaris, tracer=tracer, options=with_body, self_table=table)
    sweep = sweep_scanner.start_sweep(stamp_ns)
    assert sweep.plan.self_decision is not None  # decided when the sweep starts, before the stamp
    early = PoseHistory.from_arrays(
        times[times <= stamp_ns * 1e-9 - 0.05],
        positions[times <= stamp_ns * 1e-9 - 0.05],
        quaternions[times <= stamp_ns * 1e-9 - 0.05],
    )
    assert 0 < sweep.trace_covered(early) < polaris.columns
    chunked = sweep.finish(poses)
    without = Scanner(polaris, tracer=tracer, options=ScanOptions(seed=3, self_returns=False)).scan(poses, stamp_ns)
    reference = apply_self_returns(
        table, without.returns, scan_index=0, seed=3, std_m=polaris.std_m, noise_on=True
    ).returns
    _assert_same_returns(chunked.returns, reference)
    one_shot = Scanner(polaris, tracer=tracer, options=with_body, self_table=table).scan(poses, stamp_ns)
    _assert_same_returns(chunked.returns, one_shot.returns)


@pytest.mark.parametrize("weather", [{}, {"rain_mm_per_h": 5.0, "visibility_m": 500.0}], ids=["clear", "rain"])
def test_echoes_the_body_replaces_draw_their_noise_but_are_not_formed(polaris, farm_tour, weather):
    """The body's cells are emptied by the merge, so their echoes' signals are not formed; their
    noise pairs (and slabs' rain numbers) are still taken, so every other beam keeps its draws."""
    from acres_lidar_ros.body.self_returns import apply_self_returns, decide_self_returns, sensor_self_table

    tracer, (times, positions, quaternions) = farm_tour
    table = sensor_self_table(polaris)
    assert table is not None
    stamp_ns = int(round((times[0] + 2.0) * 1e9))
    poses = PoseHistory.from_arrays(times, positions, quaternions)
    with_body = Scanner(polaris, tracer=tracer, options=ScanOptions(seed=3, **weather), self_table=table)
    without = Scanner(polaris, tracer=tracer, options=ScanOptions(seed=3, self_returns=False, **weather))
    (scan, echoes), (plain, all_echoes) = with_body.scan_echoes(poses, stamp_ns), without.scan_echoes(poses, stamp_ns)
    reference = apply_self_returns(table, plain.returns, scan_index=0, seed=3, std_m=polaris.std_m).returns
    _assert_same_returns(scan.returns, reference)
    streams = (with_body.streams.noise.state, with_body.streams.rain.state)
    assert streams == (without.streams.noise.state, without.streams.rain.state)
    assert echoes is not None and all_echoes is not None
    np.testing.assert_array_equal(echoes.cell, all_echoes.cell)  # the same echoes, the same draws
    replaced = np.isin(echoes.cell, decide_self_returns(table, 0, 3, polaris.std_m).replaced_cells)
    assert replaced.sum() > 1000 and not echoes.detected[replaced].any()
    assert np.isnan(echoes.signal_counts[replaced]).all() and np.isnan(echoes.measured_counts[replaced]).all()
    np.testing.assert_array_equal(echoes.measured_counts[~replaced], all_echoes.measured_counts[~replaced])
    np.testing.assert_array_equal(echoes.detected[~replaced], all_echoes.detected[~replaced])


def test_warm_up_leaves_the_scanners_streams_and_numbers_alone(polaris, plane_tracer):
    poses = at_rest([0.0, 0.0, 0.0])
    warmed = Scanner(polaris, tracer=plane_tracer, options=ScanOptions(seed=4, self_returns=False))
    assert warmed.warm_up() > 0
    fresh = Scanner(polaris, tracer=plane_tracer, options=ScanOptions(seed=4, self_returns=False))
    a, b = warmed.scan(poses, stamp_ns=10**9), fresh.scan(poses, stamp_ns=10**9)
    assert a.index == b.index == 0
    _assert_same_returns(a.returns, b.returns)


def test_the_scanner_applies_the_table_it_is_given_while_self_returns_is_on(polaris, plane_tracer):
    """The caller loads the table (``sensor_self_table``); ``self_returns`` turns it on and off."""
    from acres_lidar_ros.body.self_returns import apply_self_returns, sensor_self_table

    table = sensor_self_table(polaris)
    poses = at_rest([0.0, 0.0, 0.0])
    bare = Scanner(polaris, tracer=plane_tracer, options=ScanOptions(seed=6, radiometry=False)).scan(
        poses, stamp_ns=10**9, index=0
    )
    scanner = Scanner(polaris, tracer=plane_tracer, options=ScanOptions(seed=6, radiometry=False), self_table=table)
    assert scanner.self_table is table
    body = scanner.scan(poses, stamp_ns=10**9, index=0)
    expected = apply_self_returns(table, bare.returns, scan_index=0, seed=6, std_m=polaris.std_m).returns
    _assert_same_returns(body.returns, expected)
    scanner.set_options(self_returns=False)
    _assert_same_returns(scanner.scan(poses, stamp_ns=10**9, index=0).returns, bare.returns)
    scanner.set_options(self_returns=True)
    _assert_same_returns(scanner.scan(poses, stamp_ns=10**9, index=0).returns, expected)


def test_a_self_table_of_another_sensor_size_is_refused(polaris, plane_tracer):
    from acres_lidar_ros.body.self_returns import SelfReturnTable, sensor_self_table

    small = SelfReturnTable.from_planes(np.zeros((4, 8)), 4, 2)
    with pytest.raises(ConfigError, match=r"self_table .* is for 4 columns x 2 rings; the sensor has 1800 x 32"):
        Scanner(polaris, tracer=plane_tracer, self_table=small)
    assert sensor_self_table(polaris.with_overrides({"self_returns": None})) is None


def test_a_scan_carries_its_own_timings(polaris, plane_tracer):
    """``Scanner.scan`` returns what each stage took on the scan itself, not on the scanner; the
    timings are no part of the scan's value (not compared)."""
    import dataclasses

    from acres_lidar_ros.scan.scan_types import Scan

    at_rest = PoseHistory.from_arrays(np.zeros(1), np.zeros((1, 3)), np.array([[0.0, 0.0, 0.0, 1.0]]))
    scanner = Scanner(polaris, tracer=plane_tracer, options=ScanOptions(seed=1))
    scan = scanner.scan(at_rest, 10**9)
    assert set(scan.timings_ms) == {"rays_ms", "trace_ms", "returns_ms", "points_ms"}
    assert all(value >= 0.0 for value in scan.timings_ms.values())
    assert not hasattr(scanner, "timings_ms")
    assert not next(f for f in dataclasses.fields(Scan) if f.name == "timings_ms").compare
