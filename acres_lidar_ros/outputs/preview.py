"""Top view of a scan as a small RGB image (spec: ``lidar/scan_<time>.png``, 384 x 384 px).

The view looks down the sensor's z axis: forward (+x) is up, left (+y) is left, the sensor is in
the centre. Every return is drawn as one pixel coloured by its class or by its height; where
several returns fall in one pixel the highest is shown. Grey circles mark the ranges.
"""

from __future__ import annotations

import functools
import io
import os
from pathlib import Path

import numpy as np

from acres_lidar_ros.errors import ConfigError, OutputError
from acres_lidar_ros.outputs.files import atomic_write
from acres_lidar_ros.scan import Scan

try:  # Pillow is needed only to write PNG files.
    from PIL import Image as _PilImage

    _PIL_ERROR: ImportError | None = None
except ImportError as error:  # pragma: no cover - depends on the environment
    _PilImage = None
    _PIL_ERROR = error

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
    ],
    np.uint8,
)

# Height colour map anchors, low to high (a blue-green-yellow-red ramp).
_HEIGHT_ANCHORS_RGB = np.array([[40, 60, 200], [40, 190, 200], [70, 200, 70], [240, 220, 50], [230, 50, 40]], np.float64)

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
    points = np.asarray(scan.points_sensor)[valid]
    row = np.floor((half_width_m - points[:, 0]) / metres_per_px)
    col = np.floor((half_width_m - points[:, 1]) / metres_per_px)
    inside = np.isfinite(points).all(axis=1) & (row >= 0) & (row < size_px) & (col >= 0) & (col < size_px)
    if colour_by == "class":
        class_id = np.asarray(scan.returns.class_id)[valid].astype(np.int64)
        colours = CLASS_RGB[np.clip(class_id, 0, len(CLASS_RGB) - 1)]
    else:
        colours = height_colours(points[:, 2], z_min_m, z_max_m)
    pixel = row[inside].astype(np.int64) * size_px + col[inside].astype(np.int64)
    # One int64 sort key: pixel, then height in mm (the last of each pixel is the highest point;
    # points within a millimetre of each other keep their order).
    z_mm = np.clip(np.rint(points[inside, 2] * 1000.0), -(2**30), 2**30 - 1).astype(np.int64) + 2**30
    order = np.argsort((pixel << 31) | z_mm, kind="stable")
    pixel_sorted = pixel[order]
    last = np.ones(len(order), bool)
    last[:-1] = pixel_sorted[1:] != pixel_sorted[:-1]
    image.reshape(-1, 3)[pixel_sorted[last]] = colours[inside][order[last]]

    centre = size_px // 2
    image[centre - 1 : centre + 1, centre - 1 : centre + 1] = SENSOR_RGB
    return image


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


def encode_png(image: np.ndarray) -> bytes:
    """PNG bytes of an (h, w, 3) uint8 RGB image."""
    if _PilImage is None:
        raise OutputError(f"writing PNG needs Pillow: {_PIL_ERROR}") from _PIL_ERROR
    image = np.asarray(image)
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        raise OutputError(f"a PNG preview needs an (h, w, 3) uint8 image, got {image.shape} {image.dtype}")
    buffer = io.BytesIO()
    # Fast zlib level: a preview per scan must not slow a recording (level 1: ~1 ms, 6: ~8 ms).
    _PilImage.fromarray(np.ascontiguousarray(image)).save(buffer, format="PNG", compress_level=1)
    return buffer.getvalue()


def write_png(path: str | os.PathLike[str], image: np.ndarray) -> Path:
    """Write an (h, w, 3) uint8 RGB image to a new PNG file (atomic, no overwrite)."""
    return atomic_write(path, encode_png(image))
