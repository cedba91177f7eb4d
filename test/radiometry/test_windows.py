"""Windows and limits: the valid azimuth window, range regions, the range
offset and the separation near limit, against geometry worked out here."""

import math

import numpy as np
import pytest

from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.radiometry.windows import (
    WINDOW_AZIMUTH,
    WINDOW_NEAR,
    WINDOW_SEPARATION,
    CellWindows,
    azimuth_inside,
    separation_blocked,
)
from acres_lidar_ros.scan.scan_types import ScanOptions
from acres_lidar_ros.scan.scanner import Scanner
from acres_lidar_ros.scene.builder import SceneBuilder
from acres_lidar_ros.scene.grids import TerrainGrid
from acres_lidar_ros.sensor.poses import PoseHistory

HEIGHT_M = 1.9
NO_RADIOMETRY = ScanOptions(radiometry=False, self_returns=False)
CLEAN = ScanOptions(noise=False, weather=False, self_returns=False)


def deg(*angles):
    return np.radians(np.array(angles, dtype=float))


@pytest.mark.parametrize(
    "start, end, inside, outside",
    [
        (0, 360, [0, 90, 359.9], []),  # the default: the whole turn
        (0, 90, [0, 45, 89.9], [90, 180, 359.9]),  # half-open: the start is in, the end is out
        (350, 20, [350, 355, 0, 10, 19.9], [20, 180, 349.9]),  # start > end wraps through 360
        (270, 90, [270, 0, 89], [90, 180, 269]),
        (90, 90, [], [0, 89.9, 90, 90.1, 270]),  # start == end: empty
        (360, 0, [], [0, 180, 359.9]),  # the same empty window written the other way round
        (0, 0, [], [0, 180]),
    ],
)
def test_azimuth_window_edges(start, end, inside, outside):
    assert azimuth_inside(deg(*inside), math.radians(start), math.radians(end)).all()
    assert not azimuth_inside(deg(*outside), math.radians(start), math.radians(end)).any()


def test_azimuth_window_takes_angles_of_any_turn():
    # -10 deg and 710 deg are the firing angles 350 and 350.
    assert azimuth_inside(deg(-10, 710), math.radians(340), math.radians(355)).all()


# -- end to end on a flat plane ---------------------------------------------------------------


@pytest.fixture(scope="module")
def plane_tracer():
    from acres_lidar_ros.tracing.trace import Tracer

    terrain = TerrainGrid(np.array([-100.0, -100.0]), 200.0, np.zeros((2, 2)))
    return Tracer(SceneBuilder(terrain).build())


def ring_sensor(**lidar):
    """36 columns 10 deg apart (ccw), one ring 30 deg down at 1.9 m: every beam meets the plane at
    1.9 / sin 30 = 3.8 m."""
    base = {
        "columns": 36,
        "elevations_deg": [-30.0],
        "azimuth_offsets_deg": [0.0],
        "azimuth_order": "ccw",
        "lens_center_m": 0.0,
        "rpy_deg": [0.0, 0.0, 0.0],
        "position_flu_m": [0.0, 0.0, HEIGHT_M],
        "sub_rays": 1,
        "motion_distortion": False,
        "self_returns": None,
        "scan_start_azimuth_deg": 0.0,  # the sweep starts forward: firing angles from forward
    }
    return load_sensor_config("default").with_overrides({**base, **lidar})


AT_REST = PoseHistory.from_arrays(np.zeros(1), np.zeros((1, 3)), np.array([[0.0, 0.0, 0.0, 1.0]]))


def valid_columns(config, tracer, options=NO_RADIOMETRY):
    scan = Scanner(config, tracer=tracer, options=options).scan(AT_REST, 1_000_000_000)
    return sorted(np.flatnonzero(scan.returns.valid.any(axis=1)).tolist()), scan


def columns_in(firing_start, firing_end, offset_deg=0.0, sweep_start_deg=0.0):
    """The columns whose firing angle (alpha_s - 10 c - offset) mod 360 lies in [start, end)."""
    angle = np.mod(sweep_start_deg - (10.0 * np.arange(36) + offset_deg), 360.0)
    return sorted(np.flatnonzero((angle >= firing_start) & (angle < firing_end)).tolist())


@pytest.mark.parametrize("options", [NO_RADIOMETRY, CLEAN], ids=["nearest_hit", "radiometry"])
def test_the_window_is_measured_on_the_firing_angle_clockwise(plane_tracer, options):
    assert valid_columns(ring_sensor(), plane_tracer, options)[0] == list(range(36))
    # The attribute list: with no offset, a window from 0 to 90 deg delivers azimuths from -90 to 0 deg.
    got, scan = valid_columns(
        ring_sensor(valid_start_azimuth_deg=0.0, valid_end_azimuth_deg=90.0), plane_tracer, options
    )
    assert got == [0, *range(28, 36)] == columns_in(0, 90)
    points = scan.points_sensor[scan.returns.valid]
    azimuth = np.degrees(np.arctan2(points[:, 1], points[:, 0]))
    assert azimuth.min() > -90.0 - 1e-9 and azimuth.max() < 1e-9
    np.testing.assert_allclose(scan.returns.range_m[scan.returns.valid], 2 * HEIGHT_M, atol=0.05)


def test_the_window_wraps_and_an_empty_window_drops_everything(plane_tracer):
    got, _ = valid_columns(ring_sensor(valid_start_azimuth_deg=350.0, valid_end_azimuth_deg=20.0), plane_tracer)
    assert got == [0, 1, 35]  # firing angles 0, 350, 10
    got, _ = valid_columns(ring_sensor(valid_start_azimuth_deg=200.0, valid_end_azimuth_deg=100.0), plane_tracer)
    assert got == sorted(set(range(36)) - set(columns_in(100, 200)))
    got, _ = valid_columns(ring_sensor(valid_start_azimuth_deg=90.0, valid_end_azimuth_deg=90.0), plane_tracer)
    assert got == []


def test_the_window_includes_the_ring_offset_and_is_measured_before_the_start_offset(plane_tracer):
    # The firing angle is the tick (column) plus the emitter's (ring's) azimuth: -(10 c + 5).
    config = ring_sensor(valid_start_azimuth_deg=0.0, valid_end_azimuth_deg=90.0, azimuth_offsets_deg=[5.0])
    assert valid_columns(config, plane_tracer)[0] == columns_in(0, 90, offset_deg=5.0) == list(range(27, 36))
    # The attribute list's start azimuth offset is our sweep start alpha_s (docs/sensors.md): the window is
    # measured before it, clockwise from where the sweep starts. From alpha_s = 90 deg (left), the
    # window 0 .. 90 holds the columns at 90, 80, ... 10 deg.
    later = ring_sensor(valid_start_azimuth_deg=0.0, valid_end_azimuth_deg=90.0, scan_start_azimuth_deg=90.0)
    assert valid_columns(later, plane_tracer)[0] == columns_in(0, 90, sweep_start_deg=90.0) == list(range(1, 10))


def test_dropped_echoes_keep_their_reason_and_draw_their_noise(plane_tracer):
    config = ring_sensor(valid_start_azimuth_deg=0.0, valid_end_azimuth_deg=90.0)
    windowed = Scanner(config, tracer=plane_tracer, options=ScanOptions(self_returns=False))
    full = Scanner(ring_sensor(), tracer=plane_tracer, options=ScanOptions(self_returns=False))
    (a, echoes), (b, full_echoes) = windowed.scan_echoes(AT_REST, 10**9), full.scan_echoes(AT_REST, 10**9)
    assert echoes is not None and full_echoes is not None
    np.testing.assert_array_equal(echoes.cell, full_echoes.cell)  # same echoes, same draws
    assert windowed.streams.noise.state == full.streams.noise.state
    out = ~np.isin(echoes.cell, columns_in(0, 90))
    assert (echoes.outside_window[out] == WINDOW_AZIMUTH).all() and (echoes.outside_window[~out] == 0).all()
    inside = np.isin(np.arange(36), columns_in(0, 90))
    np.testing.assert_array_equal(a.returns.range_m[inside], b.returns.range_m[inside])  # bit for bit


# -- range regions ---------------------------------------------------------------------------


def two_ring_sensor(**lidar):
    # Rings 30 and 10 deg down: the plane at 3.8 m and at 1.9 / sin 10 = 10.94 m.
    return ring_sensor(
        elevations_deg=[-30.0, -10.0],
        azimuth_offsets_deg=[0.0, 0.0],
        **lidar,
    )


@pytest.mark.parametrize("options", [NO_RADIOMETRY, CLEAN], ids=["nearest_hit", "radiometry"])
def test_each_emitter_takes_its_range_region_instead_of_the_band(plane_tracer, options):
    near_m, far_m = HEIGHT_M / math.sin(math.radians(30)), HEIGHT_M / math.sin(math.radians(10))
    # min_range_m 5 would drop the 3.8 m ring: the regions replace the band.
    config = two_ring_sensor(min_range_m=5.0, range_count=2, ranges_min_m=[1.0, 8.0], ranges_max_m=[5.0, 20.0])
    for ids, valid_rings in (((0, 1), [True, True]), ((1, 0), [False, False]), ((0, 0), [True, False])):
        cell_range_id = np.tile(np.asarray(ids, np.int64), 36)  # each ring's emitter range_id
        scanner = Scanner(config, tracer=plane_tracer, options=options, cell_range_id=cell_range_id)
        scan = scanner.scan(AT_REST, 10**9)
        valid = scan.returns.valid.any(axis=1).reshape(36, 2)
        assert (valid == valid_rings).all(), ids
    ranges = scan.returns.range_m[:, 0].reshape(36, 2)
    np.testing.assert_allclose(ranges[:, 0], near_m, atol=0.05)
    assert far_m > 8.0
    with pytest.raises(ConfigError, match=r"cell_range_id of shape \(3,\): expected one range id per beam, \(72,\)"):
        Scanner(config, tracer=plane_tracer, options=options, cell_range_id=np.zeros(3, np.int64))


def test_region_far_limits_stop_at_range_m_and_ids_are_checked(plane_tracer):
    config = two_ring_sensor(range_m=40.0, range_count=1, ranges_min_m=[0.5], ranges_max_m=[100.0])
    windows = CellWindows.build(config, np.zeros(4), np.zeros(4, np.int64))
    assert windows.far_m.tolist() == [40.0] * 4 and windows.near_m.tolist() == [0.5] * 4
    with pytest.raises(ConfigError, match=r"range_id = 1 \(beam 2\) is not below lidar.range_count = 1"):
        CellWindows.build(config, np.zeros(4), np.array([0, 0, 1, 0]))
    with pytest.raises(ConfigError, match=r"range_id = 1 \(beam 0\) is not below lidar.range_count = 0 \(0 counts"):
        CellWindows.build(ring_sensor(), np.zeros(1), np.array([1]))


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            {"range_count": 2, "ranges_min_m": [1.0], "ranges_max_m": [2.0]},
            r"ranges_min_m has 1 values but lidar\.range_count = 2",
        ),
        ({"ranges_min_m": [1.0, 2.0], "ranges_max_m": [3.0, 4.0]}, r"range_count = 0 \(0 counts as 1\): expected 1"),
        ({"ranges_min_m": [1.0]}, r"ranges_min_m is given but lidar\.ranges_max_m is not"),
        (
            {"ranges_min_m": [3.0], "ranges_max_m": [3.0]},
            r"ranges_min_m\[0\] = 3\.0 is not below lidar\.ranges_max_m\[0\]",
        ),
        ({"range_offset_m": 60.0}, r"range_offset_m = 60\.0 is not below lidar\.range_m = 60\.0"),
        ({"ranges_min_m": [1.0] * 65}, r"ranges_min_m = .*: expected a list of at most 64 values"),
    ],
)
def test_bad_windows_are_refused_naming_the_keys(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_sensor_config("default").with_overrides(overrides)


def test_empty_region_arrays_mean_none_and_range_count_alone_keeps_the_band():
    config = load_sensor_config("default").with_overrides({"range_count": 3, "ranges_min_m": [], "ranges_max_m": []})
    assert not config.windows.has_regions and config.windows.regions == 3


# -- range offset ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def wall_tracer():
    """Two walls across the +x axis: faces at x = 2 m and x = 6 m (each 0.5 m thick)."""
    from acres_lidar_ros.tracing.trace import Tracer

    builder = SceneBuilder(TerrainGrid(np.array([-100.0, -100.0]), 200.0, np.zeros((2, 2))))
    builder.add_box([2.25, 0.0], [0.5, 40.0, 10.0], "building")
    builder.add_box([6.25, 0.0], [0.5, 40.0, 10.0], "building")
    return Tracer(builder.build())


def level_sensor(**lidar):
    return ring_sensor(elevations_deg=[0.0], min_range_m=0.3, **lidar)


@pytest.mark.parametrize("options", [NO_RADIOMETRY, CLEAN], ids=["nearest_hit", "radiometry"])
def test_the_range_offset_hides_what_is_inside_it_and_ranges_stay_from_the_emitter(wall_tracer, options):
    forward = 0  # column 0 looks along +x: the wall faces are 2 m and 6 m away
    for offset_m, expected_m in ((0.0, 2.0), (1.5, 2.0), (3.0, 6.0), (7.0, None)):
        scan = Scanner(level_sensor(range_offset_m=offset_m), tracer=wall_tracer, options=options).scan(AT_REST, 10**9)
        if expected_m is None:
            assert not scan.returns.valid[forward].any()
        else:
            assert scan.returns.range_m[forward, 0] == pytest.approx(expected_m, abs=0.03)
            assert scan.points_sensor[forward, 0, 0] == pytest.approx(expected_m, abs=0.03)


# -- the separation near limit ---------------------------------------------------------------


def test_separation_blocked_looks_at_each_beams_first_seen_echo():
    cell = np.array([0, 0, 1, 1, 2, 3, 3])
    range_m = np.array([0.5, 5.0, 0.5, 5.0, 2.0, 0.2, 0.9])
    seen = np.array([True, True, False, True, True, True, True])
    # beam 0: first seen at 0.5 < 0.75 -> both dropped; beam 1: the 0.5 m echo is not seen, 5 m is
    # first; beam 2: 2 m; beam 3: 0.2 m -> dropped with its 0.9 m echo.
    assert separation_blocked(cell, range_m, seen, 0.75).tolist() == [True, True, False, False, False, True, True]


@pytest.mark.parametrize("options", [NO_RADIOMETRY, CLEAN], ids=["nearest_hit", "radiometry"])
def test_the_separation_is_a_second_near_limit_when_asked(options):
    from acres_lidar_ros.tracing.trace import Tracer

    builder = SceneBuilder(TerrainGrid(np.array([-100.0, -100.0]), 200.0, np.zeros((2, 2))))
    builder.add_box([0.85, 0.0], [0.5, 40.0, 10.0], "building")  # a face 0.6 m ahead
    tracer = Tracer(builder.build())
    config = level_sensor(min_return_separation_m=0.75)
    scan = Scanner(config, tracer=tracer, options=options).scan(AT_REST, 10**9)
    assert scan.returns.range_m[0, 0] == pytest.approx(0.6, abs=0.03)  # off (the spec): min_range_m alone
    scanner = Scanner(config.with_overrides({"separation_near_limit": True}), tracer=tracer, options=options)
    scan, echoes = scanner.scan_echoes(AT_REST, 10**9)
    assert not scan.returns.valid[0].any()
    if options.radiometry:
        assert echoes is not None
        first = np.flatnonzero(echoes.cell == 0)[0]
        assert echoes.outside_window[first] == WINDOW_SEPARATION
    assert scanner.windows.separation_m == 0.75


def test_near_and_far_reasons_follow_the_band():
    config = ring_sensor(min_range_m=1.0, range_m=50.0)
    windows = CellWindows.build(config, np.zeros(2), np.zeros(2, np.int64))
    reason = windows.outside(np.array([0, 0, 1]), np.array([0.5, 10.0, 60.0]), np.ones(3, bool))
    assert reason.tolist() == [WINDOW_NEAR, 0, 2]


def test_nothing_farther_along_a_firing_is_reported_behind_a_near_first_echo():
    # The attribute list: a first return nearer than the separation is dropped, and so is everything farther
    # along that firing: a shrub 0.6 m ahead passes half the light to a wall 6 m ahead.
    from acres_lidar_ros.tracing.trace import Tracer

    builder = SceneBuilder(TerrainGrid(np.array([-100.0, -100.0]), 200.0, np.zeros((2, 2))))
    builder.add_box([0.85, 0.0], [0.5, 40.0, 10.0], "shrub")
    builder.add_box([6.25, 0.0], [0.5, 40.0, 10.0], "building")
    tracer = Tracer(builder.build())
    config = level_sensor(min_return_separation_m=0.75, return_mode="dual_first_last")
    scan = Scanner(config, tracer=tracer, options=CLEAN).scan(AT_REST, 10**9)
    np.testing.assert_allclose(scan.returns.range_m[0], [0.6, 6.0], atol=0.03)
    scan = Scanner(config.with_overrides({"separation_near_limit": True}), tracer=tracer, options=CLEAN).scan(
        AT_REST, 10**9
    )
    assert not scan.returns.valid[0].any()
