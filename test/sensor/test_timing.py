"""Column firing offsets for both spin directions (spec "Firing Time of a Column")."""

import math

import numpy as np
import pytest

from acres_lidar_ros.sensor.emitters import column_azimuths_rad
from acres_lidar_ros.sensor.timing import column_time_offset

T = 0.1


def test_cw_sweep_from_zero_polaris():
    alpha = column_azimuths_rad(1800, "cw")  # -0.2 c deg
    dt = column_time_offset(alpha, 0.0, "cw", T)
    # phi_c = (0 - (-0.2 c deg)) mod 360 = 0.2 c deg -> dt = c / 1800 T - T
    np.testing.assert_allclose(dt, np.arange(1800) / 1800 * T - T, atol=1e-15)
    assert dt[0] == -T and dt.max() < 0


def test_ccw_spin_start_180():
    alpha = column_azimuths_rad(8, "ccw")  # 0, 45, ..., 315 deg
    dt = column_time_offset(alpha, math.pi, "ccw", T)
    # phi = (alpha - 180) mod 360: 180, 225, 270, 315, 0, 45, 90, 135 deg
    expected = np.array([180, 225, 270, 315, 0, 45, 90, 135]) / 360 * T - T
    np.testing.assert_allclose(dt, expected, atol=1e-15)
    assert dt.argmin() == 4  # the column at the start azimuth fires first


def test_cw_spin_over_a_ccw_layout():
    alpha = column_azimuths_rad(4, "ccw")  # 0, 90, 180, 270 deg
    dt = column_time_offset(alpha, math.radians(90), "cw", T)
    # phi = (90 - alpha) mod 360: 90, 0, 270, 180
    np.testing.assert_allclose(dt, np.array([90, 0, 270, 180]) / 360 * T - T, atol=1e-15)


@pytest.mark.parametrize("spin", ["cw", "ccw"])
def test_offsets_stay_in_minus_T_to_zero(spin):
    alpha = np.random.default_rng(1).uniform(-10, 10, 10000)
    dt = column_time_offset(alpha, 1.234, spin, T)
    assert (dt >= -T).all() and (dt < 0).all()


def test_bad_spin_direction_is_named():
    with pytest.raises(ValueError, match="spin_direction 'up'"):
        column_time_offset(0.0, 0.0, "up", T)
