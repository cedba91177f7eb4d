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


def _png_pixels(tmp_path, image, name="annotated.png"):
    """The image as a PNG reader (Pillow) reads it back from the file the preview writes."""
    with Image.open(write_png(tmp_path / name, image)) as png:
        return np.asarray(png.convert("RGB"))


@pytest.mark.parametrize(
    ("range_m", "bar_m"),
    # A quarter of the view's width (2 range), rounded down to 1, 2 or 5 times a power of ten.
    [(40.0, 20.0), (150.0, 50.0), (12.0, 5.0), (1.5, 0.5)],
)
def test_scale_bar_is_as_long_as_its_metres_at_the_image_scale(tmp_path, range_m, bar_m):
    scan = _scan_with_points([(1e3, 0.0, 0.0)], ["other"])  # its one point is outside the view
    pixels = _png_pixels(tmp_path, render_top_view(scan, SIZE_PX, range_m, ring_spacing_m=0, scale_bar=True))
    bar_px = round(bar_m / (2 * range_m / SIZE_PX))
    bar_row = SIZE_PX - 4 - 1  # the bar's lowest row, 4 px above the bottom edge, from the left margin (4 px)
    white = np.all(pixels[bar_row] == 255, axis=1)
    assert white[4 : 4 + bar_px].all() and not white[4 + bar_px :].any() and not white[:4].any()
    # Its label stands above it: ink above the bar, within the bar's first columns.
    above = pixels[bar_row - 3 - 12 : bar_row - 3, 4:40]
    assert np.any(np.all(above == 235, axis=2))


def test_class_legend_lists_the_scan_classes_in_class_order(tmp_path):
    scan = _scan_with_points([(20.3, 0.1, 0.0), (0.1, 20.3, 0.0), (-15.2, -7.7, 0.0)], ["vehicle", "tree", "building"])
    pixels = _png_pixels(tmp_path, render_top_view(scan, SIZE_PX, HALF_WIDTH_M, legend=True))
    # Entry i's 8 px swatch starts 4 px from the top-left corner, 12 px below entry i - 1.
    for i, name in enumerate(["building", "tree", "vehicle"]):
        swatch = pixels[4 + 12 * i : 4 + 12 * i + 8, 4:12]
        assert np.all(swatch == CLASS_RGB[CLASS_ID[name]]), name
        label = pixels[4 + 12 * i - 1 : 4 + 12 * i + 9, 16:80]
        assert np.any(np.all(label == 235, axis=2)), name  # its name is written beside it
    fourth = pixels[4 + 36 : 4 + 36 + 8, 4:12].reshape(-1, 3)
    assert not any(np.all(fourth == rgb, axis=1).any() for rgb in CLASS_RGB)
    # The points themselves are still drawn where they are.
    np.testing.assert_array_equal(pixels[_pixel(20.3, 0.1)], CLASS_RGB[CLASS_ID["vehicle"]])


def test_height_legend_shows_five_heights_from_the_top_of_the_ramp(tmp_path):
    scan = _scan_with_points([(10.0, 0.0, 1.0)], ["other"])
    pixels = _png_pixels(tmp_path, render_top_view(scan, colour_by="height", z_min_m=-3.0, z_max_m=3.0, legend=True))
    # The ramp's five anchors, blue at -3 m, cyan, green at 0 m, yellow, red at +3 m, are 1.5 m
    # apart, so the legend's heights +3, +1.5, 0, -1.5 and -3 m show them exactly, top first.
    red_to_blue = [[230, 50, 40], [240, 220, 50], [70, 200, 70], [40, 190, 200], [40, 60, 200]]
    for i, rgb in enumerate(red_to_blue):
        np.testing.assert_array_equal(pixels[4 + 12 * i + 4, 8], rgb)


def test_the_preview_range_default_matches_the_cli_default():
    from acres_lidar_ros.apps.output_flags import PREVIEW_RANGE_M as CLI_DEFAULT
    from acres_lidar_ros.outputs.scan_files import PREVIEW_RANGE_M

    assert CLI_DEFAULT == PREVIEW_RANGE_M == HALF_WIDTH_M
