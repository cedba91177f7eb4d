"""Top view of a scan as a small RGB image (spec: ``lidar/scan_<time>.png``, 384 x 384 px).

The view looks down the sensor's z axis: forward (+x) is up, left (+y) is left, the sensor is in
the centre. Every return is drawn as one pixel coloured by its class or by its height; where
several returns fall in one pixel the highest is shown. Grey circles mark the ranges. On request a
legend of the colours and a scale bar are drawn over it (``preview_overlay``); ``scan`` and ``record``
draw both.
"""

from __future__ import annotations

import functools
import os
import struct
import zlib
from pathlib import Path

import numba
import numpy as np

from acres_lidar_ros.config.material_table import CLASS_NAMES
from acres_lidar_ros.errors import ConfigError, OutputError
from acres_lidar_ros.outputs.files import atomic_write
from acres_lidar_ros.outputs.preview_overlay import draw_legend, draw_scale_bar
from acres_lidar_ros.scan.scan_types import Scan

BACKGROUND_RGB = np.array([16, 16, 20], np.uint8)
RANGE_RING_RGB = np.array([64, 64, 72], np.uint8)
SENSOR_RGB = np.array([255, 255, 255], np.uint8)

# Colour of each class number (CLASS_NAMES order).
CLASS_RGB = np.array(
    [
        [160, 160, 160],  # other
        [150, 110, 70],  # ground
        [110, 70, 40],  # tree_trunk
        [220, 60, 60],  # building
        [200, 200, 230],  # silo
        [40, 160, 60],  # tree
        [110, 200, 90],  # shrub
        [240, 220, 60],  # corn
        [170, 230, 40],  # soybean
        [120, 90, 60],  # mud_clod
        [80, 190, 140],  # ground_cover
        [200, 150, 220],  # potato
        [60, 140, 240],  # vehicle
        [120, 220, 255],  # precipitation
        [255, 120, 200],  # person
        [230, 150, 60],  # animal
        [250, 250, 250],  # pole
        [190, 140, 100],  # fence
        [90, 110, 250],  # implement
        [70, 70, 90],  # wheel
    ],
    np.uint8,
)

# Height colour map anchors, low to high (a blue-green-yellow-red ramp).
_HEIGHT_ANCHORS_RGB = np.array(
    [[40, 60, 200], [40, 190, 200], [70, 200, 70], [240, 220, 50], [230, 50, 40]], np.float64
)

COLOUR_MODES = ("class", "height")


def height_colours(z_m: np.ndarray, z_min_m: float, z_max_m: float) -> np.ndarray:
    """(n, 3) uint8 colours of heights ``z_m`` (n,), clipped to ``[z_min_m, z_max_m]``."""
    t = np.clip((np.asarray(z_m, np.float64) - z_min_m) / (z_max_m - z_min_m), 0.0, 1.0)
    position = t * (len(_HEIGHT_ANCHORS_RGB) - 1)
    low = np.minimum(np.floor(position).astype(np.int64), len(_HEIGHT_ANCHORS_RGB) - 2)
    frac = (position - low)[:, None]
    rgb = (1.0 - frac) * _HEIGHT_ANCHORS_RGB[low] + frac * _HEIGHT_ANCHORS_RGB[low + 1]
    return np.rint(rgb).astype(np.uint8)


def render_top_view(
    scan: Scan,
    size_px: int = 384,
    half_width_m: float = 40.0,
    colour_by: str = "class",
    ring_spacing_m: float = 10.0,
    z_min_m: float = -3.0,
    z_max_m: float = 3.0,
    legend: bool = False,
    scale_bar: bool = False,
) -> np.ndarray:
    """Render the scan's returns seen from above in the sensor frame.

    Parameters
    ----------
    scan : Scan
    size_px : int
        Image width and height, px.
    half_width_m : float
        Distance from the centre to the image edge, m.
    colour_by : {"class", "height"}
        Class colours (``CLASS_RGB``) or a ramp of z from ``z_min_m`` (blue) to ``z_max_m`` (red).
    ring_spacing_m : float
        Spacing of the range circles, m (0: none).
    legend : bool
        Draw the legend: the classes of the scan's returns in class order, or five heights from
        ``z_max_m`` down to ``z_min_m``.
    scale_bar : bool
        Draw the scale bar (``preview_overlay.scale_bar_length_m``).

    Returns
    -------
    (size_px, size_px, 3) uint8 RGB image; row 0 is the top (forward), column 0 the left.
    """
    if int(size_px) != size_px or size_px < 8:
        raise ConfigError(f"size_px {size_px!r} must be an integer >= 8")
    if not half_width_m > 0 or not ring_spacing_m >= 0 or not z_max_m > z_min_m:
        raise ConfigError(
            f"half_width_m {half_width_m!r} must be > 0, ring_spacing_m {ring_spacing_m!r} >= 0 and "
            f"z_max_m {z_max_m!r} > z_min_m {z_min_m!r}"
        )
    if colour_by not in COLOUR_MODES:
        raise ConfigError(f"colour_by {colour_by!r} is not a colour mode; allowed: {', '.join(COLOUR_MODES)}")
    size_px = int(size_px)
    metres_per_px = 2.0 * half_width_m / size_px
    image = _background(size_px, float(half_width_m), float(ring_spacing_m)).copy()

    valid = np.asarray(scan.returns.valid, dtype=bool)
    if colour_by == "class":
        _draw_classes(
            image.reshape(-1, 3),
            np.asarray(scan.points_sensor, dtype=np.float64),
            valid,
            np.asarray(scan.returns.class_id),
            CLASS_RGB,
            float(half_width_m),
            metres_per_px,
            size_px,
        )
    else:
        points = np.asarray(scan.points_sensor)[valid]
        row = np.floor((half_width_m - points[:, 0]) / metres_per_px)
        col = np.floor((half_width_m - points[:, 1]) / metres_per_px)
        inside = np.isfinite(points).all(axis=1) & (row >= 0) & (row < size_px) & (col >= 0) & (col < size_px)
        colours = height_colours(points[:, 2], z_min_m, z_max_m)
        pixel = row[inside].astype(np.int64) * size_px + col[inside].astype(np.int64)
        _draw_highest(image.reshape(-1, 3), pixel, points[inside, 2], np.ascontiguousarray(colours[inside]))

    centre = size_px // 2
    image[centre - 1 : centre + 1, centre - 1 : centre + 1] = SENSOR_RGB
    if legend:
        draw_legend(image, legend_entries(scan, colour_by, z_min_m, z_max_m))
    if scale_bar:
        draw_scale_bar(image, float(half_width_m))
    return image


def legend_entries(scan: Scan, colour_by: str, z_min_m: float, z_max_m: float) -> list[tuple[str, np.ndarray]]:
    """(name, rgb) of each legend line: the classes of the scan's returns in class order, or five
    heights evenly from ``z_max_m`` down to ``z_min_m`` (``"+3.0 M"``)."""
    if colour_by == "class":
        present = np.unique(np.asarray(scan.returns.class_id)[np.asarray(scan.returns.valid, dtype=bool)])
        last = len(CLASS_RGB) - 1
        return [(CLASS_NAMES[c] if c <= last else "other", CLASS_RGB[min(int(c), last)]) for c in present]
    heights_m = np.linspace(z_max_m, z_min_m, 5)
    return [(f"{z:+.1f} M", rgb) for z, rgb in zip(heights_m, height_colours(heights_m, z_min_m, z_max_m), strict=True)]


@functools.lru_cache(maxsize=4)
def _background(size_px: int, half_width_m: float, ring_spacing_m: float) -> np.ndarray:
    """The empty view with its range circles (drawn once per geometry, then copied)."""
    metres_per_px = 2.0 * half_width_m / size_px
    image = np.empty((size_px, size_px, 3), np.uint8)
    image[:] = BACKGROUND_RGB
    centre_m = (np.arange(size_px) + 0.5) * metres_per_px - half_width_m
    if ring_spacing_m > 0:
        distance_m = np.hypot(centre_m[:, None], centre_m[None, :])
        to_ring_m = np.abs(distance_m - ring_spacing_m * np.round(distance_m / ring_spacing_m))
        image[(to_ring_m < 0.5 * metres_per_px) & (distance_m > 0.5 * ring_spacing_m)] = RANGE_RING_RGB
    image.flags.writeable = False
    return image


@numba.njit(cache=True, nogil=True)
def _draw_classes(pixels_rgb, points_sensor, valid, class_id, class_rgb, half_width_m, metres_per_px, size_px):
    """Project every valid return and colour each pixel by the class of its highest point, in
    one pass (the class view of every recorded scan)."""
    n, slots = valid.shape
    highest = np.full(pixels_rgb.shape[0], -np.inf)
    last_class = class_rgb.shape[0] - 1
    for i in range(n):
        for j in range(slots):
            if not valid[i, j]:
                continue
            x, y, z = points_sensor[i, j, 0], points_sensor[i, j, 1], points_sensor[i, j, 2]
            if not (np.isfinite(x) and np.isfinite(y) and np.isfinite(z)):
                continue
            row = np.floor((half_width_m - x) / metres_per_px)
            col = np.floor((half_width_m - y) / metres_per_px)
            if row < 0 or row >= size_px or col < 0 or col >= size_px:
                continue
            p = int(row) * size_px + int(col)
            if z > highest[p]:
                highest[p] = z
                c = min(int(class_id[i, j]), last_class)
                pixels_rgb[p, 0] = class_rgb[c, 0]
                pixels_rgb[p, 1] = class_rgb[c, 1]
                pixels_rgb[p, 2] = class_rgb[c, 2]


@numba.njit(cache=True, nogil=True)
def _draw_highest(pixels_rgb, pixel, z_m, colours):
    """Colour each pixel with its highest point (a z-buffer; the first point wins a tie)."""
    highest = np.full(pixels_rgb.shape[0], -np.inf)
    for i in range(pixel.size):
        p = pixel[i]
        if z_m[i] > highest[p]:
            highest[p] = z_m[i]
            pixels_rgb[p, 0] = colours[i, 0]
            pixels_rgb[p, 1] = colours[i, 1]
            pixels_rgb[p, 2] = colours[i, 2]


def encode_png(image: np.ndarray) -> bytes:
    """PNG bytes of an (h, w, 3) uint8 RGB image: 8-bit truecolour, no filter, zlib level 1.

    Written with the standard library (a PNG is a signature and three CRC-checked chunks):
    Pillow's encoder took 4 to 7 ms for a 384 x 384 preview at any level, this takes under 2 ms,
    which matters because every scan of a recording writes one. The tests read the files back
    with Pillow.
    """
    image = np.asarray(image)
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        raise OutputError(f"a PNG preview needs an (h, w, 3) uint8 image, got {image.shape} {image.dtype}")
    height, width, _ = image.shape
    rows = np.zeros((height, 1 + 3 * width), np.uint8)  # each row starts with filter type 0
    rows[:, 1:] = image.reshape(height, 3 * width)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8 bits, RGB, deflate, no filter, no interlace
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows.tobytes(), 1))
        + chunk(b"IEND", b"")
    )


def write_png(path: str | os.PathLike[str], image: np.ndarray) -> Path:
    """Write an (h, w, 3) uint8 RGB image to a new PNG file (atomic, no overwrite)."""
    return atomic_write(path, encode_png(image))
