"""Beam geometry against the spec's equations, written out independently here."""

import math

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.sensor.pattern import (
    BeamPattern,
    elevation_rank,
    mount_rotation,
    planar_config,
    sub_ray_directions,
    sub_ray_pattern,
)


@pytest.fixture(scope="module")
def polaris():
    return load_sensor_config("polaris")


def test_column_azimuth_and_ring_offset(polaris):
    p = BeamPattern.from_config(polaris)
    d = p.directions_sensor
    for c, r in ((0, 0), (1, 1), (450, 7), (900, 20), (1799, 31)):
        alpha = math.radians(-0.2 * c) + polaris.azimuth_offsets_rad[r]  # cw: -360 c / 1800 deg
        e = polaris.elevations_rad[r]
        expected = [math.cos(e) * math.cos(alpha), math.cos(e) * math.sin(alpha), math.sin(e)]
        np.testing.assert_allclose(d[c, r], expected, atol=1e-15)
    # The lens is on the block azimuth, without the ring offset: every ring of a column shares it.
    c = 300
    block = math.radians(-0.2 * c)
    assert p.lens_origins_sensor.shape == (1800, 32, 3)
    for r in (0, 17, 31):
        np.testing.assert_allclose(
            p.lens_origins_sensor[c, r], [0.035 * math.cos(block), 0.035 * math.sin(block), 0], atol=1e-15
        )


def test_ccw_column_zero_points_forward():
    c = load_sensor_config("default")
    p = BeamPattern.from_config(c.with_overrides({"azimuth_order": "ccw"}))
    assert p.column_azimuth_rad[0] == 0
    assert math.isclose(p.column_azimuth_rad[45], 2 * math.pi * 45 / 180)
    p_cw = BeamPattern.from_config(c.with_overrides({"azimuth_order": "cw"}))
    assert math.isclose(p_cw.column_azimuth_rad[45], -2 * math.pi * 45 / 180)


def test_mount_rotation_is_rz_ry_rx_fixed_axes():
    rpy = np.deg2rad([-1.518, 5.317, 12.0])
    expected = Rotation.from_euler("xyz", rpy).as_matrix()  # extrinsic x, then y, then z = Rz Ry Rx
    np.testing.assert_allclose(mount_rotation(rpy), expected, atol=1e-15)
    # A pure pitch tilts forward down for a positive pitch (FLU, right hand about y).
    down = mount_rotation(np.deg2rad([0, 10, 0])) @ [1, 0, 0]
    assert down[2] < 0


def test_seven_sub_rays_offsets_weights_and_angles():
    beta = 3e-3
    offsets, weights = sub_ray_pattern(7, beta)
    assert weights.tolist() == [0.25] + [0.125] * 6 and math.isclose(weights.sum(), 1.0)
    d = np.array([math.cos(0.1), 0.0, math.sin(0.1)])
    sub = sub_ray_directions(d, offsets)
    assert sub.shape == (7, 3)
    np.testing.assert_allclose(np.linalg.norm(sub, axis=1), 1.0)
    np.testing.assert_allclose(sub[0], d)
    # Each outer sub-ray is atan(0.35 beta) away from the centre.
    angles = np.arccos(np.clip(sub[1:] @ d, -1, 1))
    np.testing.assert_allclose(angles, math.atan(0.35 * beta), rtol=1e-6)
    # Basis: u = d x up / |d x up| (horizontal), v = d x u; sub-ray 1 is offset along +u.
    u = np.cross(d, [0, 0, 1])
    u /= np.linalg.norm(u)
    expected = d + 0.35 * beta * u
    np.testing.assert_allclose(sub[1], expected / np.linalg.norm(expected))


def test_steep_beam_uses_the_forward_axis():
    offsets, _ = sub_ray_pattern(7, 0.01)
    d = np.array([0.0, 0.3, -math.sqrt(1 - 0.09)])  # |d_z| > 0.9
    u = np.cross(d, [1.0, 0, 0])
    u /= np.linalg.norm(u)
    expected = d + offsets[1, 0] * u
    np.testing.assert_allclose(sub_ray_directions(d, offsets)[1], expected / np.linalg.norm(expected))


def test_one_sub_ray_or_zero_divergence_is_the_beam():
    for n, beta in ((1, 3e-3), (7, 0.0)):
        offsets, weights = sub_ray_pattern(n, beta)
        assert offsets.shape == (1, 2) and weights.tolist() == [1.0]


def test_elevation_rank_of_polaris_is_zero_at_the_lowest(polaris):
    rank = elevation_rank(polaris.elevations_rad)
    assert rank[31] == 0 and rank[0] == 31
    # Rings 16..23 are not monotonic: rank follows the elevation, not the index.
    order = np.argsort(np.rad2deg(polaris.elevations_rad))
    assert (rank[order] == np.arange(32)).all()


def test_planar_pattern_is_level_ccw_without_lens(polaris):
    planar = planar_config(polaris)
    p = BeamPattern.from_config(planar)
    assert (p.columns, p.rings) == (360, 1)
    assert planar.range_m == 30 and planar.lens_center_m == 0
    np.testing.assert_allclose(p.R_base_sensor, np.eye(3))
    np.testing.assert_allclose(p.t_base_sensor_m, polaris.position_flu_m)
    np.testing.assert_allclose(p.directions_sensor[90, 0], [0, 1, 0], atol=1e-15)  # 90 deg ccw: left
    assert (p.directions_sensor[:, 0, 2] == 0).all()
