"""The output keys (the attribute list's "Output shaping and cadence") against geometry worked out here:
motion compensation, spherical fields, world and custom frames, dense clouds, partial slices and
instant mode, through ``outputs.shaping`` and ``layouts.point_cloud`` on real scans of a plane."""

from __future__ import annotations

import math

import numpy as np
import pytest

from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.errors import ConfigError, OutputError
from acres_lidar_ros.outputs.layouts import all_returns, organised_cloud, point_cloud
from acres_lidar_ros.outputs.point_types import POINT_TYPES, PROFILES, SPHERICAL_POINT_TYPES
from acres_lidar_ros.outputs.pointcloud2 import cloud_is_dense
from acres_lidar_ros.outputs.shaping import shape_scan, shaped_outputs, slice_scan
from acres_lidar_ros.scan.scan_types import ScanOptions
from acres_lidar_ros.scan.scanner import Scanner
from acres_lidar_ros.scene.builder import SceneBuilder
from acres_lidar_ros.scene.grids import TerrainGrid
from acres_lidar_ros.sensor.poses import PoseHistory

S = 1_000_000_000  # ns


@pytest.fixture(scope="module")
def plane_tracer():
    from acres_lidar_ros.tracing.trace import Tracer

    return Tracer(SceneBuilder(TerrainGrid(np.array([-400.0, -400.0]), 800.0, np.zeros((2, 2)))).build())


@pytest.fixture(scope="module")
def polaris():
    return load_sensor_config("polaris")


def Rx(a):
    c, s = math.cos(a), math.sin(a)
    return np.array([[1, 0, 0], [0, c, -s], [0, s, c]])


def Ry(a):
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])


def Rz(a):
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])


def quat_z(yaw):
    return [0.0, 0.0, math.sin(yaw / 2), math.cos(yaw / 2)]


def rising(v_up_m_s, t0_s=0.0, t1_s=3.0, roll_rate=0.0):
    """base_footprint rising at ``v_up_m_s`` from z = 0 at t = 0 (rolling at ``roll_rate`` rad/s),
    sampled every 10 ms."""
    t = np.arange(t0_s, t1_s + 1e-9, 0.01)
    z = v_up_m_s * t
    half = roll_rate * t / 2
    q = np.stack([np.sin(half), np.zeros_like(t), np.zeros_like(t), np.cos(half)], axis=1)
    return PoseHistory.from_arrays(t, np.stack([np.zeros_like(t), np.zeros_like(t), z], axis=1), q)


def at_rest(position_m, yaw_rad=0.0):
    return PoseHistory.from_arrays(np.zeros(1), np.array([position_m], float), np.array([quat_z(yaw_rad)]))


def outputs_of(config, **keys):
    return config.with_overrides(keys).outputs


def shaped(scanner, scan, poses, **keys):
    config = scanner.config
    return shape_scan(scan, outputs_of(config, **keys), poses, scanner.pattern.T_base_sensor, period_s=config.period_s)


def first_points(shaped_scan):
    """(cells, 3) the first slot of each beam, and where it is valid."""
    return shaped_scan.points[:, 0], shaped_scan.returns.valid[:, 0]


# -- motion compensation --------------------------------------------------------------------------


def test_two_scans_from_a_rising_sensor_agree_in_the_world_only_with_compensation(polaris, plane_tracer):
    """The plane is z = 0 in the world. A sensor rising at 10 m/s: with compensation each point is
    where it was hit, on the plane within the range noise, in both scans; without it the point
    carries the rise between its firing and the stamp, ``v |dt|`` up, as the motion predicts."""
    v = 10.0
    poses = rising(v)
    scanner = Scanner(polaris, tracer=plane_tracer, options=ScanOptions(self_returns=False, seed=4))
    noise_m = 5 * max(polaris.std_m, polaris.radiometry.range_std_low_snr_m)
    means = []
    for stamp_ns in (S, S + 100_000_000):
        scan = scanner.scan(poses, stamp_ns)
        comp = shaped(scanner, scan, poses, output_frame="world", motion_compensation=True)
        raw = shaped(scanner, scan, poses, output_frame="world", motion_compensation=False)
        p, ok = first_points(comp)
        q, _ = first_points(raw)
        assert ok.sum() > 10000
        assert np.abs(p[ok, 2]).max() < noise_m  # on the plane, within the range noise
        means.append(p[ok, 2].mean())
        rise_m = v * -comp.time_offset_s[ok]  # |dt| of each point: what the motion predicts
        assert rise_m.max() > 0.9  # the sweep's 100 ms at 10 m/s
        np.testing.assert_allclose(q[ok, 2], rise_m, atol=noise_m)
        np.testing.assert_allclose(q[ok, 2] - p[ok, 2], rise_m, atol=1e-9)  # the same hit, moved
        np.testing.assert_allclose(q[ok, :2], p[ok, :2], atol=1e-9)  # a vertical motion moves z only
        assert comp.frame_id == "odom" and raw.frame_id == "odom"
    assert abs(means[0] - means[1]) < 0.01  # the two scans agree


def test_compensated_points_lie_on_the_plane_under_rotation_too(polaris, plane_tracer):
    """Rising and rolling at 1 rad/s, no radiometry: every compensated point is on z = 0 to the
    tracer's precision, in the world and, moved back by the stamp pose, in the sensor frame at the stamp;
    the uncompensated ones are not."""
    poses = rising(3.0, roll_rate=1.0)
    scanner = Scanner(polaris, tracer=plane_tracer, options=ScanOptions(self_returns=False, radiometry=False))
    scan = scanner.scan(poses, S)
    world = shaped(scanner, scan, poses, output_frame="world", motion_compensation=True)
    p, ok = first_points(world)
    assert np.abs(p[ok, 2]).max() < 2e-5  # Embree's float32 hits
    raw, _ = first_points(shaped(scanner, scan, poses, output_frame="world"))
    assert np.abs(raw[ok, 2]).max() > 0.05
    # The sensor frame at the stamp: T_ws(S)^-1 of the world points, from the pose written out here.
    T_ws = poses.transforms(np.array([S * 1e-9]))[0] @ scanner.pattern.T_base_sensor
    in_sensor, _ = first_points(shaped(scanner, scan, poses, motion_compensation=True))
    back = in_sensor[ok] @ T_ws[:3, :3].T + T_ws[:3, 3]
    np.testing.assert_allclose(back, p[ok], atol=1e-6)
    # Off, in the sensor frame: the points as traced.
    as_traced = shaped(scanner, scan, poses)
    np.testing.assert_array_equal(as_traced.points, scan.points_sensor)
    assert as_traced.frame_id == polaris.frame_id


def test_compensation_uses_each_cells_own_time_offset(polaris, plane_tracer):
    """A scan whose emitters fire at their own times (``Scan.fire_time_s``): a cell that fires
    10 ms after its tick rises 10 ms less of 10 m/s than one of the same hit at the tick."""
    poses = rising(10.0)
    scanner = Scanner(polaris, tracer=plane_tracer, options=ScanOptions(self_returns=False, noise=False))
    scan = scanner.scan(poses, S)
    from dataclasses import replace

    fire_time_s = np.zeros(scan.columns * scan.rings)
    fire_time_s[::2] = 0.01  # every other emitter fires 10 ms after its tick
    moved = replace(scan, fire_time_s=fire_time_s)
    a, ok = first_points(shaped(scanner, scan, poses, output_frame="world", motion_compensation=True))
    b, _ = first_points(shaped(scanner, moved, poses, output_frame="world", motion_compensation=True))
    diff = b[:, 2] - a[:, 2]
    np.testing.assert_allclose(diff[::2][ok[::2]], 0.1, atol=1e-9)
    np.testing.assert_allclose(diff[1::2][ok[1::2]], 0.0, atol=1e-12)


# -- frames and coordinates ------------------------------------------------------------------------


def test_world_and_custom_frames_against_transforms_written_out(polaris, plane_tracer):
    base, yaw = np.array([3.0, -2.0, 0.5]), 0.4
    poses = at_rest(base, yaw)
    scanner = Scanner(polaris, tracer=plane_tracer, options=ScanOptions(self_returns=False, radiometry=False))
    scan = scanner.scan(poses, S)
    p_sensor, ok = scan.points_sensor[:, 0], scan.returns.valid[:, 0]
    roll, pitch, mount_yaw = polaris.rpy_rad
    R_mount = Rz(mount_yaw) @ Ry(pitch) @ Rx(roll)
    expected_world = (p_sensor[ok] @ R_mount.T + polaris.position_flu_m) @ Rz(yaw).T + base
    world, _ = first_points(shaped(scanner, scan, poses, output_frame="world"))
    np.testing.assert_allclose(world[ok], expected_world, atol=1e-9)
    np.testing.assert_allclose(world[ok, 2], 0.0, atol=1e-5)  # the plane
    xyz_rpy = [10.0, 5.0, -1.0, 0.1, -0.2, 2.0]
    custom = shaped(scanner, scan, poses, output_frame="custom", custom_frame_xyz_rpy=xyz_rpy, custom_frame_id="map")
    R_c = Rz(xyz_rpy[5]) @ Ry(xyz_rpy[4]) @ Rx(xyz_rpy[3])
    expected_custom = (expected_world - xyz_rpy[:3]) @ R_c  # R_c^T (p - t), row vectors
    np.testing.assert_allclose(custom.points[ok, 0], expected_custom, atol=1e-9)
    assert custom.frame_id == "map"
    assert np.isnan(custom.points[~ok, 0]).all()


def test_spherical_fields_are_the_geometry_of_the_cartesian_point(polaris, plane_tracer):
    scanner = Scanner(polaris, tracer=plane_tracer, options=ScanOptions(self_returns=False))
    poses = at_rest([0.0, 0.0, 0.0])
    scan = scanner.scan(poses, S)
    for point_type in SPHERICAL_POINT_TYPES:
        cart = point_cloud(shaped(scanner, scan, poses, output_frame="world"), point_type).reshape(-1)
        sph = point_cloud(shaped(scanner, scan, poses, output_frame="world", coordinates="spherical"), point_type)
        sph = sph.reshape(-1)
        assert sph.dtype == SPHERICAL_POINT_TYPES[point_type]
        assert sph.dtype.names[:3] == ("azimuth", "elevation", "range")
        assert [sph.dtype.fields[n][1] for n in ("azimuth", "elevation", "range")] == [0, 4, 8]
        ok = np.isfinite(cart["x"])
        x, y, z = (cart[n][ok].astype(np.float64) for n in "xyz")
        r = np.sqrt(x * x + y * y + z * z)
        np.testing.assert_allclose(sph["range"][ok], r, rtol=1e-6)
        np.testing.assert_allclose(sph["azimuth"][ok], np.arctan2(y, x), atol=2e-6)
        np.testing.assert_allclose(sph["elevation"][ok], np.arcsin(z / r), atol=2e-6)
        for name in sph.dtype.names[3:]:
            np.testing.assert_array_equal(sph[name], cart[name])
        assert np.isnan(sph["range"][~ok]).all()


def test_spherical_is_refused_for_the_layouts_without_it():
    assert set(SPHERICAL_POINT_TYPES) == {"XYZI", "XYZIRT", "XYZIRT_labels", "velodyne", "hesai"}
    for point_type in ("ouster", "nebula"):
        assert PROFILES[point_type].spherical is None
        with pytest.raises(ConfigError, match=rf"lidar\.coordinates = 'spherical' with point_type '{point_type}'"):
            PROFILES[point_type].dtype_in("spherical")
    assert PROFILES["ouster"].dtype_in() == POINT_TYPES["ouster"]
    for point_type, dtype in SPHERICAL_POINT_TYPES.items():
        assert PROFILES[point_type].spherical == PROFILES[point_type].dtype_in("spherical") == dtype
    with pytest.raises(ConfigError, match=r"lidar\.coordinates = 'polar': expected one of cartesian, spherical"):
        PROFILES["XYZI"].dtype_in("polar")


def test_ply_records_follow_the_frame_and_the_coordinates(polaris, plane_tracer):
    scanner = Scanner(polaris, tracer=plane_tracer, options=ScanOptions(self_returns=False))
    poses = at_rest([1.0, 2.0, 0.0])
    scan = scanner.scan(poses, S)
    world = all_returns(shaped(scanner, scan, poses, output_frame="world"))
    np.testing.assert_allclose(world["z"], 0.0, atol=0.2)  # on the plane (noise)
    sph = all_returns(shaped(scanner, scan, poses, coordinates="spherical"))
    plain = all_returns(scan)
    x, y, z = (plain[n].astype(np.float64) for n in "xyz")
    np.testing.assert_allclose(sph["range"], np.sqrt(x * x + y * y + z * z), rtol=1e-6)
    np.testing.assert_array_equal(sph["column"], plain["column"])


# -- dense and organised -------------------------------------------------------------------------


@pytest.mark.parametrize("point_type", ["XYZI", "XYZIRT", "ouster"])
def test_dense_clouds_keep_the_returns_only(polaris, plane_tracer, point_type):
    scanner = Scanner(polaris, tracer=plane_tracer, options=ScanOptions(self_returns=False))
    poses = at_rest([0.0, 0.0, 0.0])
    scan = scanner.scan(poses, S)
    organised = point_cloud(shaped(scanner, scan, poses), point_type)
    dense = point_cloud(shaped(scanner, scan, poses, include_invalid_points=False), point_type)
    lit = int(scan.returns.valid.any(axis=1).sum())  # beams with a (primary) return
    assert organised.size == polaris.columns * polaris.rings and not cloud_is_dense(organised)
    assert dense.shape == (1, lit) and cloud_is_dense(dense)
    assert not np.isnan(dense["x"]).any()
    flat = organised.reshape(-1)
    np.testing.assert_array_equal(dense[0], flat[np.isfinite(flat["x"])])  # the grid's order


# -- partial output -------------------------------------------------------------------------------


def test_partial_slices_cover_the_scan_once_and_concatenate_to_it(polaris, plane_tracer):
    poses = rising(1.0)
    scanner = Scanner(polaris, tracer=plane_tracer, options=ScanOptions(self_returns=False))
    scan = scanner.scan(poses, S)
    whole = shaped(scanner, scan, poses)
    T_ns = round(polaris.period_s * 1e9)
    assert (whole.start_ns, whole.end_ns) == (S - T_ns, S)
    slices = slice_scan(whole, 7, polaris.period_s)
    assert [s.slice_index for s in slices] == list(range(7)) and all(s.slice_count == 7 for s in slices)
    columns = np.concatenate([s.column_ids for s in slices])
    assert np.array_equal(np.sort(columns), np.arange(polaris.columns))  # each column once
    for k, part in enumerate(slices):  # its columns fire inside its share of the sweep
        assert (part.start_ns, part.end_ns) == (S - T_ns + k * T_ns // 7, S - T_ns + (k + 1) * T_ns // 7)
        fired_ns = S + np.rint(part.time_offset_s * 1e9)
        assert (fired_ns >= part.start_ns).all() and (fired_ns < part.end_ns).all()
        assert np.all(np.diff(part.time_offset_s.reshape(part.columns, -1)[:, 0]) >= 0)  # firing order
    for point_type in ("XYZIRT", "velodyne", "ouster"):
        full = point_cloud(whole, point_type, whole.start_ns)
        parts = [point_cloud(s, point_type, whole.start_ns) for s in slices]
        if point_type == "ouster":  # rings x columns: the slices are blocks of columns
            same_records(np.concatenate(parts, axis=1), full[:, columns])
        elif point_type == "XYZIRT":  # columns x rings: blocks of rows
            same_records(np.concatenate(parts, axis=0), full[columns])
        else:  # dense: the returns of each column together, columns in the slices' order
            joined = np.concatenate([p.reshape(-1) for p in parts])
            column_of_point = np.repeat(
                np.arange(polaris.columns), scan.returns.valid.reshape(polaris.columns, -1).sum(1)
            )
            order = np.concatenate([np.flatnonzero(column_of_point == c) for c in columns])
            same_records(joined, full.reshape(-1)[order])


def same_records(a, b):
    """Field by field (numpy neither copies the padding bytes of a structured array nor keeps
    them through ``np.concatenate``)."""
    assert a.shape == b.shape and a.dtype.names == b.dtype.names
    for name in a.dtype.names:
        np.testing.assert_array_equal(a[name], b[name])


def test_slices_of_an_instant_scan_are_one_at_the_stamp(polaris, plane_tracer):
    config = polaris.with_overrides({"instant": True, "partial_output": True, "partial_slices": 5})
    scanner = Scanner(config, tracer=plane_tracer, options=ScanOptions(self_returns=False))
    poses = rising(1.0)
    scan = scanner.scan(poses, S)
    (only,) = shaped_outputs(
        scan, config.outputs, poses, scanner.pattern.T_base_sensor, world_frame_id="odom", period_s=config.period_s
    )
    assert (only.start_ns, only.end_ns, only.slice_index) == (S, S, 4) and only.columns == config.columns


def test_a_bad_slice_count_is_refused(polaris, plane_tracer):
    scanner = Scanner(polaris, tracer=plane_tracer, options=ScanOptions(self_returns=False))
    scan = scanner.scan(at_rest([0, 0, 0]), S)
    with pytest.raises(OutputError, match="partial_slices = 0"):
        slice_scan(shaped(scanner, scan, at_rest([0, 0, 0])), 0, polaris.period_s)
    with pytest.raises(ConfigError, match=r"lidar\.partial_slices = 0 is out of range"):
        polaris.with_overrides({"partial_slices": 0})


# -- instant mode --------------------------------------------------------------------------------


def test_instant_mode_traces_every_point_at_the_stamp_pose(polaris, plane_tracer):
    poses = rising(10.0, roll_rate=0.5)
    config = polaris.with_overrides({"instant": True})
    scanner = Scanner(config, tracer=plane_tracer, options=ScanOptions(self_returns=False, radiometry=False))
    scan = scanner.scan(poses, S)
    T_stamp = poses.transforms(np.array([S * 1e-9]))[0] @ scanner.pattern.T_base_sensor
    assert np.array_equal(scan.time_offset_s, np.zeros(config.columns))
    np.testing.assert_array_equal(scan.T_world_sensor, np.broadcast_to(T_stamp, scan.T_world_sensor.shape))
    world = shaped(scanner, scan, poses, output_frame="world", instant=True)
    compensated = shaped(scanner, scan, poses, output_frame="world", instant=True, motion_compensation=True)
    p, ok = first_points(world)
    np.testing.assert_allclose(p[ok], compensated.points[ok, 0], atol=1e-9)  # one pose: nothing to compensate
    assert np.abs(p[ok, 2]).max() < 2e-5  # the plane, seen from one pose
    assert world.start_ns == world.end_ns == S  # zero capture time: every profile stamps S
    ouster = point_cloud(world, "ouster")
    assert (ouster["t"] == 0).all()
    # The same scan from the same poses with motion distortion has points elsewhere.
    moving = Scanner(polaris, tracer=plane_tracer, options=ScanOptions(self_returns=False, radiometry=False))
    assert not np.allclose(moving.scan(poses, S).points_sensor, scan.points_sensor, equal_nan=True)


def test_organised_cloud_of_a_shaped_scan_keeps_its_timestamps(polaris, plane_tracer):
    scanner = Scanner(polaris, tracer=plane_tracer, options=ScanOptions(self_returns=False))
    poses = rising(1.0)
    scan = scanner.scan(poses, S)
    cloud = organised_cloud(shaped(scanner, scan, poses, output_frame="world"), "XYZIRT")
    expected = S * 1e-9 + scan.time_offset_s
    np.testing.assert_array_equal(cloud["timestamp"], np.broadcast_to(expected[:, None], cloud.shape))


def test_compensation_of_an_emitter_pattern_with_its_own_fire_times(tmp_path, plane_tracer):
    """Two emitters per 90 deg tick, the second firing 20 ms after the first (the attribute list fire
    times), rising at 10 m/s over the plane: compensated, every point is on z = 0; without, each
    is up by 10 m/s times its own |dt|, which differs between the two emitters of one tick."""
    import json

    emitters = {
        "rot_pattern_firing_res_deg": 90.0,
        "states": [
            {
                "azimuth_deg": [0.0, 5.0],
                "elevation_deg": [-30.0, -60.0],
                "fire_time_ns": [0, 20_000_000],
                "channel_id": [3, 9],
            }
        ],
    }
    lidar = {"position_flu_m": [0.0, 0.0, 0.0], "rpy_deg": [0.0, 0.0, 0.0], "sub_rays": 1, "hz": 10.0}
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"lidar": {**lidar, "emitters": emitters}}))
    config = load_sensor_config(path)
    scanner = Scanner(config, tracer=plane_tracer, options=ScanOptions(radiometry=False, self_returns=False))
    t = np.arange(0.0, 2.0 + 1e-9, 0.01)
    poses = PoseHistory.from_arrays(
        t, np.stack([np.zeros_like(t), np.zeros_like(t), 2.0 + 10.0 * t], 1), np.tile([0.0, 0, 0, 1], (t.size, 1))
    )
    scan = scanner.scan(poses, S)
    comp = shaped(scanner, scan, poses, output_frame="world", motion_compensation=True)
    raw = shaped(scanner, scan, poses, output_frame="world")
    p, ok = first_points(comp)
    q, _ = first_points(raw)
    assert ok.all() and ok.size == 8  # 4 ticks x 2 emitters, all on the plane
    np.testing.assert_allclose(p[:, 2], 0.0, atol=2e-5)
    dt = comp.time_offset_s
    assert np.ptp(dt.reshape(4, 2), axis=1).min() == pytest.approx(0.02)  # the emitters' own times
    np.testing.assert_allclose(q[:, 2], 10.0 * -dt, atol=2e-5)
