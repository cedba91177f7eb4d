"""Top-view preview: where points land, which colour wins, and the PNG round trip."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image
from test_outputs_synthetic import make_scan

from acres_lidar_ros.config.material_table import CLASS_ID, CLASS_NAMES
from acres_lidar_ros.errors import ConfigError, OutputError
from acres_lidar_ros.outputs.preview import (
    BACKGROUND_RGB,
    CLASS_RGB,
    RANGE_RING_RGB,
    render_top_view,
    write_png,
)

SIZE_PX = 384
HALF_WIDTH_M = 40.0
M_PER_PX = 2 * HALF_WIDTH_M / SIZE_PX


def _scan_with_points(points_sensor, class_names):
    """A scan whose first beams carry the given single returns; every other beam is empty."""
    scan = make_scan(seed=40)
    n, slots = scan.returns.valid.shape
    points = np.full((n, slots, 3), np.nan)
    valid = np.zeros((n, slots), bool)
    class_id = np.zeros((n, slots), np.uint8)
    k = len(points_sensor)
    points[:k, 0] = points_sensor
    valid[:k, 0] = True
    class_id[:k, 0] = [CLASS_ID[name] for name in class_names]
    returns = type(scan.returns)(**{**scan.returns.__dict__, "valid": valid, "class_id": class_id})
    return type(scan)(**{**scan.__dict__, "points_sensor": points, "returns": returns})


def _pixel(x_m, y_m):
    """Row and column of a sensor-frame point: forward up, left to the left."""
    return int(np.floor((HALF_WIDTH_M - x_m) / M_PER_PX)), int(np.floor((HALF_WIDTH_M - y_m) / M_PER_PX))


def test_class_table_has_a_colour_per_class():
    assert CLASS_RGB.shape == (len(CLASS_NAMES), 3)
    assert len({tuple(c) for c in CLASS_RGB}) == len(CLASS_NAMES)


def test_points_land_forward_up_and_left_left_in_class_colours():
    scan = _scan_with_points([(20.3, 0.1, 0.0), (0.1, 20.3, 0.0), (-15.2, -7.7, 0.0)], ["building", "tree", "vehicle"])
    image = render_top_view(scan, SIZE_PX, HALF_WIDTH_M, "class")
    assert image.shape == (SIZE_PX, SIZE_PX, 3) and image.dtype == np.uint8
    forward, left, behind_right = _pixel(20.3, 0.1), _pixel(0.1, 20.3), _pixel(-15.2, -7.7)
    assert forward[0] < SIZE_PX // 2 and left[1] < SIZE_PX // 2 and behind_right[0] > SIZE_PX // 2
    np.testing.assert_array_equal(image[forward], CLASS_RGB[CLASS_ID["building"]])
    np.testing.assert_array_equal(image[left], CLASS_RGB[CLASS_ID["tree"]])
    np.testing.assert_array_equal(image[behind_right], CLASS_RGB[CLASS_ID["vehicle"]])
    drawn = np.any(image != BACKGROUND_RGB, axis=2) & np.any(image != RANGE_RING_RGB, axis=2)
    assert drawn.sum() == 3 + 4  # three points and the 2 x 2 sensor mark


@pytest.mark.parametrize("order", [(0, 1), (1, 0)])
def test_highest_point_of_a_pixel_wins(order):
    points = [(5.01, 5.01, -1.0), (5.02, 5.02, 2.0)]
    names = ["ground", "tree"]
    scan = _scan_with_points([points[i] for i in order], [names[i] for i in order])
    image = render_top_view(scan, SIZE_PX, HALF_WIDTH_M, "class")
    np.testing.assert_array_equal(image[_pixel(5.01, 5.01)], CLASS_RGB[CLASS_ID["tree"]])


def test_height_colours_run_from_blue_to_red_and_clip():
    scan = _scan_with_points([(10.0, 0.0, -9.0), (0.0, 10.0, 9.0)], ["other", "other"])
    image = render_top_view(scan, SIZE_PX, HALF_WIDTH_M, "height", z_min_m=-3.0, z_max_m=3.0)
    low, high = image[_pixel(10.0, 0.0)].astype(int), image[_pixel(0.0, 10.0)].astype(int)
    assert low[2] > low[0] and high[0] > high[2]


def test_range_rings_and_points_outside_the_view():
    scan = _scan_with_points([(100.0, 0.0, 0.0), (0.0, -41.0, 0.0)], ["other", "other"])
    image = render_top_view(scan, SIZE_PX, HALF_WIDTH_M, ring_spacing_m=10.0)
    # Ahead of the sensor, the pixel whose centre is nearest to 10 m is on the first circle.
    col = SIZE_PX // 2
    x_m = HALF_WIDTH_M - (np.arange(SIZE_PX) + 0.5) * M_PER_PX
    y_m = HALF_WIDTH_M - (col + 0.5) * M_PER_PX
    row = int(np.argmin(np.where(x_m > 0, np.abs(np.hypot(x_m, y_m) - 10.0), np.inf)))
    np.testing.assert_array_equal(image[row, col], RANGE_RING_RGB)
    np.testing.assert_array_equal(image[row + 3, col], BACKGROUND_RGB)
    # Nothing else but circles, background and the sensor mark: both points are outside the view.
    other = np.any(image != BACKGROUND_RGB, axis=2) & np.any(image != RANGE_RING_RGB, axis=2)
    assert other.sum() == 4
    assert not np.any(np.all(render_top_view(scan, SIZE_PX, HALF_WIDTH_M, ring_spacing_m=0) == RANGE_RING_RGB, axis=2))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"size_px": 4}, "size_px"), ({"colour_by": "rainbow"}, "class, height"), ({"half_width_m": 0}, "half_width_m")],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        render_top_view(make_scan(), **kwargs)


def test_png_round_trip_and_no_overwrite(tmp_path):
    image = render_top_view(make_scan(seed=41), colour_by="height")
    path = write_png(tmp_path / "scan.png", image)
    with Image.open(path) as png:
        assert png.mode == "RGB" and png.size == (SIZE_PX, SIZE_PX)
        np.testing.assert_array_equal(np.asarray(png), image)
    with pytest.raises(OutputError, match="scan.png"):
        write_png(path, image)
    with pytest.raises(OutputError, match="uint8"):
        write_png(tmp_path / "float.png", image.astype(np.float32))
