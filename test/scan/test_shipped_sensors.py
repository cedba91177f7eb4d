"""The shipped sensors: each one's emitter directions and firing times against
values worked out by hand from its source (docs/sensors.md names them), and its driver identity.

The expectations are the vendors' own formulas, written here independently of the tables of
``scripts/make_shipped_sensors.py``: the VLP-16 manual's firing-time equation and vertical-angle
pattern, VeloView's HDL-32E timing, the ouster-sdk point equation, rs_driver's Helios channel
times, Hesai's firetime rule and a few pixels read off the FT120's angle-correction file.
Times are from the scan stamp: the first firing of a sweep is one period before it.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from acres_lidar_ros.config.sensors import NAMED_SENSORS, load_sensor_config
from acres_lidar_ros.config.share_paths import config_dir
from acres_lidar_ros.outputs.point_types import PROFILES
from acres_lidar_ros.sensor.emitters import FiringPattern

SHIPPED = ("helios5515", "vlp16", "hdl32e", "os1_64", "pandar_xt32", "ft120")
HZ = 10.0
T = 1.0 / HZ
OMEGA_DEG_PER_US = 360.0 * HZ * 1e-6  # the head's turn per microsecond at 10 Hz


def _pattern(name: str) -> tuple[FiringPattern, object]:
    config = load_sensor_config(name)
    pattern = FiringPattern.from_config(config)
    return pattern, pattern.cells()


def _flu_deg(azimuth_rad: np.ndarray) -> np.ndarray:
    """FLU azimuth in degrees, wrapped to (-180, 180]."""
    deg = np.degrees(azimuth_rad)
    return (deg + 180.0) % 360.0 - 180.0


def _wrap(deg: np.ndarray) -> np.ndarray:
    return (np.asarray(deg) + 180.0) % 360.0 - 180.0


def _time_from_stamp_s(pattern: FiringPattern, cells, tick: int, emitter: int) -> float:
    return float(pattern.tick_time_offset_s[tick] + cells.fire_time_s[tick, emitter])


@pytest.mark.parametrize("name", SHIPPED)
def test_each_shipped_sensor_is_named_and_names_its_drivers_identity(name):
    assert NAMED_SENSORS[name] == f"sensors_{name}.json"
    config = load_sensor_config(name)
    assert config.point_type in PROFILES
    raw = json.loads((config_dir() / f"sensors_{name}.json").read_text())
    assert raw["extends"] == "sensors.json"


@pytest.mark.parametrize(
    "name, frame, topic, point_type",
    [
        ("helios5515", "rslidar", "/rslidar_points", "XYZI"),  # rslidar_sdk config.yaml, CMake POINT_TYPE
        ("vlp16", "velodyne", "/velodyne_points", "velodyne"),  # velodyne_driver frame_id, transform node topic
        ("hdl32e", "velodyne", "/velodyne_points", "velodyne"),
        ("os1_64", "os_lidar", "/ouster/points", "ouster"),  # ouster-ros: ns ouster, point_cloud_frame os_lidar
        ("pandar_xt32", "hesai_lidar", "/lidar_points", "hesai"),  # HesaiLidar_ROS_2.0 config.yaml
        ("ft120", "hesai_lidar", "/lidar_points", "hesai"),
    ],
)
def test_driver_defaults(name, frame, topic, point_type):
    config = load_sensor_config(name)
    assert (config.frame_id, config.topic, config.point_type) == (frame, topic, point_type)


def test_vlp16_firing_times_and_directions_follow_the_manual():
    """VLP-16 User Manual p. 62: TimeOffset = 55.296 us x sequence + 2.304 us x laser; lasers of
    a sequence alternate -15, +1, -13, +3, ... +15 deg; the head turns clockwise between firings."""
    pattern, cells = _pattern("vlp16")
    assert pattern.emitters == 16
    for m in (0, 1, 17, 904, pattern.ticks - 1):
        for k in range(16):
            t_us = 55.296 * m + 2.304 * k
            assert _time_from_stamp_s(pattern, cells, m, k) == pytest.approx(-T + t_us * 1e-6, abs=1e-9)
            assert _flu_deg(cells.azimuth_rad[m, k]) == pytest.approx(_wrap(-OMEGA_DEG_PER_US * t_us), abs=1e-5)
            elevation = k if k % 2 else k - 15
            assert math.degrees(cells.elevation_rad[m, k]) == pytest.approx(elevation, abs=1e-9)
            assert int(cells.channel_id[m, k]) == k


def test_vlp16_rays_pass_through_the_drivers_points():
    """velodyne_pointcloud places a return of range d at (d cos v - o sin v, d sin v + o cos v) in
    the beam's vertical plane, o the laser's vertical correction (manual: 11.2, -0.7, ... mm)."""
    correction_mm = [11.2, -0.7, 9.7, -2.2, 8.1, -3.7, 6.6, -5.1, 5.1, -6.6, 3.7, -8.1, 2.2, -9.7, 0.7, -11.2]
    pattern, cells = _pattern("vlp16")
    tick = 0
    for k, o_mm in enumerate(correction_mm):
        v = cells.elevation_rad[tick, k]
        a = cells.azimuth_rad[tick, k]
        o = o_mm / 1000.0
        origin = cells.origin_sensor_m[tick, k]
        direction = np.array([math.cos(v) * math.cos(a), math.cos(v) * math.sin(a), math.sin(v)])
        for d in (1.0, 25.0):
            radial, z = d * math.cos(v) - o * math.sin(v), d * math.sin(v) + o * math.cos(v)
            point = np.array([radial * math.cos(a), radial * math.sin(a), z])
            off_ray = np.cross(point - origin, direction)
            assert np.linalg.norm(off_ray) < 1e-7  # the file's offsets are rounded to 0.1 um


def test_hdl32e_firing_times_and_directions():
    """VeloView HDL32AdjustTimeStamp: 46.08 us x block + 1.152 us x laser; the 32 lasers are 4/3 deg
    apart from -30.67 to +10.67 deg, even lasers the lower 16, odd lasers the upper 16 (laser 15 at 0)."""
    pattern, cells = _pattern("hdl32e")
    assert pattern.emitters == 32
    for m in (0, 1, 1085, pattern.ticks - 1):
        for k in range(32):
            t_us = 46.08 * m + 1.152 * k
            assert _time_from_stamp_s(pattern, cells, m, k) == pytest.approx(-T + t_us * 1e-6, abs=1e-9)
            assert _flu_deg(cells.azimuth_rad[m, k]) == pytest.approx(_wrap(-OMEGA_DEG_PER_US * t_us), abs=1e-5)
            rank = k // 2 if k % 2 == 0 else 16 + k // 2
            elevation = 4.0 / 3.0 * (rank - 23)
            assert math.degrees(cells.elevation_rad[m, k]) == pytest.approx(elevation, abs=0.0035)


def test_os1_64_beams_follow_the_ouster_point_equation():
    """ouster-sdk: x = (r - n) cos(theta_e + theta_a) cos(phi) + n cos(theta_e), y likewise with
    sin, z = (r - n) sin(phi); theta_e = 2 pi (1 - m / 1024), theta_a = -azimuth angle, n = 15.806 mm;
    the altitudes fall evenly from 16.611 deg to -16.611 deg, the azimuths repeat 3.164, 1.055, ..."""
    pattern, cells = _pattern("os1_64")
    assert (pattern.ticks, pattern.emitters) == (1024, 64)
    n = 0.015806
    for m in (0, 1, 255, 512, 1023):
        theta_e = 2.0 * math.pi * (1.0 - m / 1024.0)
        for i in (0, 1, 2, 3, 31, 32, 63):
            beam_az = [3.164, 1.055, -1.055, -3.164][i % 4]
            phi = math.radians(16.611 - i * 2 * 16.611 / 63)
            theta = theta_e - math.radians(beam_az)
            assert _flu_deg(cells.azimuth_rad[m, i]) == pytest.approx(_wrap(math.degrees(theta)), abs=1e-6)
            assert cells.elevation_rad[m, i] == pytest.approx(phi, abs=math.radians(7e-4))  # 3 decimals
            r = 7.0
            phi = cells.elevation_rad[m, i]  # the table's altitude, checked above to 7e-4 deg
            point = np.array(
                [
                    (r - n) * math.cos(theta) * math.cos(phi) + n * math.cos(theta_e),
                    (r - n) * math.sin(theta) * math.cos(phi) + n * math.sin(theta_e),
                    (r - n) * math.sin(phi),
                ]
            )
            v, a = cells.elevation_rad[m, i], cells.azimuth_rad[m, i]
            traced = cells.origin_sensor_m[m, i] + (r - n) * np.array(
                [math.cos(v) * math.cos(a), math.cos(v) * math.sin(a), math.sin(v)]
            )
            assert np.abs(traced - point).max() < 1e-5
            # all 64 pixels of a column are measured together, a column every 1/1024 of a turn
            assert _time_from_stamp_s(pattern, cells, m, i) == pytest.approx(-T + m * T / 1024, abs=1e-12)


def test_helios5515_channels_fire_at_the_drivers_offsets():
    """rs_driver's Helios decoder: channel i of a block fires 1.73 i us after it, and its azimuth
    advances by that fraction of the 55.56 us block's 0.2 deg; blocks are 0.2 deg apart."""
    polaris = json.loads((config_dir() / "sensors_polaris.json").read_text())["lidar"]
    pattern, cells = _pattern("helios5515")
    assert (pattern.ticks, pattern.emitters) == (1800, 32)
    for k in (0, 1, 899, 1799):
        for i in range(32):
            t_us = k * T / 1800 * 1e6 + 1.73 * i
            assert _time_from_stamp_s(pattern, cells, k, i) == pytest.approx(-T + t_us * 1e-6, abs=1e-9)
            expected = -0.2 * k + polaris["azimuth_offsets_deg"][i] - 0.2 * (1.73 * i) / 55.56
            assert _flu_deg(cells.azimuth_rad[k, i]) == pytest.approx(_wrap(expected), abs=2e-4)
            assert math.degrees(cells.elevation_rad[k, i]) == pytest.approx(polaris["elevations_deg"][i], abs=1e-9)
    # the lens centre RX = 0.03498 m lies along the block azimuth
    alpha = pattern.tick_azimuth_rad[450]
    assert cells.origin_sensor_m[450, 7] == pytest.approx([0.03498 * math.cos(alpha), 0.03498 * math.sin(alpha), 0.0])


def test_pandar_xt32_follows_the_sdk_firetimes():
    """HesaiLidar_SDK_2.0: channel c of block j fires 6 + 1.512 (c - 1) us after the block, 50 us
    apart, at Hesai azimuth 0.18 j + firetime x 3600 deg/s (clockwise from the frame's +y, so FLU
    azimuth = 90 deg - Hesai azimuth); elevations 15 deg down to -16 deg."""
    pattern, cells = _pattern("pandar_xt32")
    assert (pattern.ticks, pattern.emitters) == (2000, 32)
    first_us = 6.0
    for j in (0, 1, 1000, 1999):
        for c in range(1, 33):
            fire_us = 6.0 + 1.512 * (c - 1)
            t_us = 50.0 * j + fire_us - first_us  # from the sweep's first firing
            assert _time_from_stamp_s(pattern, cells, j, c - 1) == pytest.approx(-T + t_us * 1e-6, abs=1e-9)
            hesai_az = 0.18 * j + fire_us * OMEGA_DEG_PER_US
            assert _flu_deg(cells.azimuth_rad[j, c - 1]) == pytest.approx(_wrap(90.0 - hesai_az), abs=1e-5)
            assert math.degrees(cells.elevation_rad[j, c - 1]) == pytest.approx(16 - c, abs=1e-9)


def test_ft120_is_one_flash_of_the_correction_files_pixels():
    """Pixels read off Hesai's FT120C1X angle-correction file (column, row: Hesai azimuth, elevation
    in deg); all fire in one solid-state tick at the sweep's start; a line per column."""
    pattern, cells = _pattern("ft120")
    assert pattern.scan_type == "solid_state"
    assert (pattern.ticks, pattern.emitters) == (1, 160 * 120)
    for (column, row), (hesai_az, elevation) in {
        (0, 0): (14.88, -35.95),
        (80, 60): (89.89, -0.16),
        (159, 119): (156.75, 34.48),
        (0, 119): (16.1, 35.34),
        (159, 0): (157.87, -35.13),
        (37, 101): (53.8, 29.25),
    }.items():
        e = column * 120 + row
        assert _flu_deg(cells.azimuth_rad[0, e]) == pytest.approx(90.0 - hesai_az, abs=1e-9)
        assert math.degrees(cells.elevation_rad[0, e]) == pytest.approx(elevation, abs=1e-9)
        assert int(cells.bank[0, e]) == column and int(cells.channel_id[0, e]) == row  # the driver's channel
        assert _time_from_stamp_s(pattern, cells, 0, e) == pytest.approx(-T, abs=1e-12)


def test_pandar_xt32_cloud_in_its_drivers_layout():
    """The XT32 over the plane z = 0 in HesaiLidar_ROS_2.0's layout: a dense cloud whose ring is
    the channel index (0 = the +15 deg beam, which never reaches the ground) and whose timestamp
    is each point's own firing time: 50 us per block plus 1.512 us per channel."""
    from acres_lidar_ros.outputs.layouts import point_cloud
    from acres_lidar_ros.scan.scan_types import ScanOptions
    from acres_lidar_ros.scan.scanner import Scanner
    from acres_lidar_ros.scene.builder import SceneBuilder
    from acres_lidar_ros.scene.grids import TerrainGrid
    from acres_lidar_ros.sensor.poses import PoseHistory
    from acres_lidar_ros.tracing.trace import Tracer

    ground = Tracer(SceneBuilder(TerrainGrid(np.array([-200.0, -200.0]), 400.0, np.zeros((2, 2)))).build())
    config = load_sensor_config("pandar_xt32").with_overrides({"sub_rays": 1})
    stamp_ns = 1_000_000_000
    t = np.array([0.0, 2.0])
    poses = PoseHistory.from_arrays(t, np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]), np.tile([0, 0, 0, 1.0], (2, 1)))
    scan = Scanner(config, tracer=ground, options=ScanOptions(radiometry=False, self_returns=False)).scan(
        poses, stamp_ns
    )
    cloud = point_cloud(scan, "hesai")
    assert cloud.shape[0] == 1 and cloud.shape[1] == int(scan.returns.valid.sum()) > 0
    ring = cloud["ring"][0].astype(int)
    assert ring.min() == 17  # channel 18 (-2 deg) is the highest to reach the ground from 1.9 m
    assert ring.max() == 31
    assert np.all(cloud["z"][0] == pytest.approx(-1.9, abs=1e-3))
    start_s = stamp_ns * 1e-9 - T
    block = np.rint((cloud["timestamp"][0] - start_s - 1.512e-6 * ring) / 50e-6)
    assert np.abs(cloud["timestamp"][0] - (start_s + 50e-6 * block + 1.512e-6 * ring)).max() < 1e-8
