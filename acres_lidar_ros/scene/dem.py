"""Ground rasters for a scene's terrain: a GeoTIFF DEM or a ``.npy`` raster (docs/scene_format.md).

``read_dem(path, ...)`` returns a ``DemRaster`` in the terrain grid's convention (row ``i`` is
``y``, south first; node ``[0][0]`` is the south-west node) from a raster in the raster
convention (row 0 is the north edge, as GeoTIFF stores it and as GDAL and rasterio read it).

* GeoTIFF (``.tif``, ``.tiff``), read with the optional ``tifffile`` package (``pip install
  'acres_lidar_ros[dem]'``): one band of ``ALLOWED_DTYPES``; the node spacing and position come
  from its GeoTIFF tags (ModelPixelScale and ModelTiepoint, or an axis-aligned
  ModelTransformation; PixelIsArea puts a node at each pixel's centre, PixelIsPoint at its
  tie point), unless the scene gives ``origin_xy_m`` (and, for a TIFF without georeferencing,
  ``cell_m``). A geographic (degrees) or non-metre CRS, a rotated or non-square grid are
  refused. GDAL's band scale and offset (GDAL_METADATA) are applied; GDAL_NODATA cells are
  refused.
* ``.npy``: a 2-D array of ``ALLOWED_DTYPES``; ``origin_xy_m`` and ``cell_m`` are required.

Every refusal is a ``SceneError`` that names the file and what is allowed. Shape and type are
checked before the values are read, so an oversized raster is refused without being loaded.
"""

from __future__ import annotations

import math
import os
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from acres_lidar_ros.config.input_files import check_regular_file
from acres_lidar_ros.errors import SceneError
from acres_lidar_ros.scene import scene_limits

#: Raster value types a DEM may have (GDAL's Int16/UInt16/Int32/UInt32/Float32/Float64).
ALLOWED_DTYPES = ("float32", "float64", "int16", "uint16", "int32", "uint32")
#: Most nodes of one DEM (4096 x 4096), as any grid of a scene file.
MAX_DEM_NODES = scene_limits.MAX_GRID_CELLS
#: Largest DEM file, bytes (an uncompressed float64 raster at the node limit, plus headers).
MAX_DEM_FILE_BYTES = 8 * MAX_DEM_NODES + (1 << 20)
#: Largest |coordinate| of a node and |height|, m, as any number of a scene file.
MAX_DEM_COORDINATE_M = scene_limits.MAX_SCENE_NUMBER
DEM_SUFFIXES = (".tif", ".tiff", ".npy")

# TIFF tags (GeoTIFF 1.1, GDAL).
_MODEL_PIXEL_SCALE, _MODEL_TIEPOINT, _MODEL_TRANSFORMATION = 33550, 33922, 34264
_GEO_KEY_DIRECTORY, _GDAL_METADATA, _GDAL_NODATA = 34735, 42112, 42113
# GeoKeys and their values.
_GT_MODEL_TYPE, _GT_RASTER_TYPE, _PROJ_LINEAR_UNITS, _VERTICAL_UNITS = 1024, 1025, 3076, 4099
_MODEL_TYPE_GEOGRAPHIC, _RASTER_PIXEL_IS_POINT, _LINEAR_METRE = 2, 2, 9001


@dataclass(frozen=True)
class DemRaster:
    """A DEM as terrain nodes.

    Attributes
    ----------
    origin_xy_m : (2,) float64
        Scene (x, y) of node ``[0][0]``, the south-west node.
    cell_m : float
        Node spacing, m.
    height_m : (ny, nx) float64
        Height of node ``[i][j]`` at ``(x0 + j cell, y0 + i cell)``, m.
    georeferenced_origin_xy_m : (2,) float64 or None
        Where the GeoTIFF's own georeferencing puts node ``[0][0]`` (None for a ``.npy`` or a
        TIFF without it).
    """

    origin_xy_m: np.ndarray
    cell_m: float
    height_m: np.ndarray
    georeferenced_origin_xy_m: np.ndarray | None = None


def read_dem(
    path: str | os.PathLike[str],
    origin_xy_m: np.ndarray | None = None,
    cell_m: float | None = None,
    height_offset_m: float = 0.0,
) -> DemRaster:
    """Terrain nodes of a GeoTIFF or ``.npy`` DEM.

    Parameters
    ----------
    path : path of a ``.tif``, ``.tiff`` or ``.npy`` file
    origin_xy_m : (2,) float, optional
        Scene (x, y) of the south-west node; default the GeoTIFF's georeferencing (required for
        a ``.npy`` and a TIFF without georeferencing).
    cell_m : float, optional
        Node spacing, m: only for a ``.npy`` or a TIFF without georeferencing (required there).
    height_offset_m : float
        Added to every height (e.g. minus the elevation of the scene origin).

    Raises
    ------
    SceneError
        The file is missing, not a regular file, too large, of another type, of a value type
        not in ``ALLOWED_DTYPES``, has NaN or no-data cells, or georeferencing this loader does
        not take; the message names the file and what is allowed.
    """
    file = Path(path)
    suffix = file.suffix.lower()
    if suffix not in DEM_SUFFIXES:
        raise SceneError(
            f"DEM {file}: a DEM is a GeoTIFF or a .npy raster; allowed suffixes: {', '.join(DEM_SUFFIXES)}"
        )
    check_regular_file(file, "DEM", MAX_DEM_FILE_BYTES, SceneError)
    if suffix == ".npy":
        if origin_xy_m is None or cell_m is None:
            raise SceneError(f"DEM {file}: a .npy raster has no georeferencing: give terrain.origin_xy_m and cell_m")
        raster, georef = _read_npy(file), None
    else:
        raster, georef = _read_geotiff(file)
        if georef is not None and cell_m is not None:
            raise SceneError(
                f"DEM {file}: its node spacing is {georef[1]:g} m (ModelPixelScale); leave terrain.cell_m out"
            )
        if georef is None and (origin_xy_m is None or cell_m is None):
            raise SceneError(
                f"DEM {file}: the TIFF has no GeoTIFF georeferencing (ModelPixelScale and ModelTiepoint, or "
                "ModelTransformation): give terrain.origin_xy_m and cell_m"
            )
    heights = raster[::-1].astype(np.float64) + float(height_offset_m)  # row 0 = the south edge
    if georef is not None:
        georef_origin, spacing = georef
    else:
        georef_origin, spacing = None, float(cell_m)  # type: ignore[arg-type]
    origin = np.asarray(origin_xy_m if origin_xy_m is not None else georef_origin, dtype=np.float64)
    far = np.abs(origin) + (np.array(heights.shape[::-1]) - 1) * spacing
    if not (np.all(far <= MAX_DEM_COORDINATE_M) and np.all(np.abs(heights) <= MAX_DEM_COORDINATE_M)):
        raise SceneError(
            f"DEM {file}: its nodes reach x, y = {far.tolist()} m and heights "
            f"{float(heights.min()):g} to {float(heights.max()):g} m; allowed within {MAX_DEM_COORDINATE_M:g} m: "
            "place it near the scene origin with terrain.origin_xy_m (and height_offset_m)"
        )
    return DemRaster(origin, spacing, heights, georef_origin)


def read_dem_nodes(path: str | os.PathLike[str]) -> tuple[np.ndarray, float | None]:
    """The raster of a GeoTIFF or ``.npy`` DEM as stored (row 0 = the north edge), float64, and its
    node spacing from the GeoTIFF's georeferencing (None without it); the checks of ``read_dem``."""
    file = Path(path)
    if file.suffix.lower() not in DEM_SUFFIXES:
        raise SceneError(f"DEM {file}: allowed suffixes: {', '.join(DEM_SUFFIXES)}")
    check_regular_file(file, "DEM", MAX_DEM_FILE_BYTES, SceneError)
    if file.suffix.lower() == ".npy":
        return _read_npy(file).astype(np.float64), None
    raster, georef = _read_geotiff(file)
    return np.asarray(raster, np.float64), None if georef is None else georef[1]


def _check_shape_and_type(file: Path, shape: tuple[int, ...], dtype: np.dtype | None, what: str) -> None:
    if dtype is None:
        raise SceneError(
            f"DEM {file}: {what} has a sample format numpy cannot hold; allowed: {', '.join(ALLOWED_DTYPES)}"
        )
    if len(shape) != 2:
        raise SceneError(f"DEM {file}: {what} has shape {shape}: a DEM is one band, a 2-D raster")
    rows, cols = shape
    if rows < 2 or cols < 2:
        raise SceneError(f"DEM {file}: {what} is {rows} x {cols}: a DEM needs at least 2 x 2 nodes")
    if rows * cols > MAX_DEM_NODES:
        raise SceneError(
            f"DEM {file}: {rows} x {cols} = {rows * cols} nodes; the limit is {MAX_DEM_NODES} (4096 x 4096): "
            "crop or resample it (e.g. gdal_translate -srcwin or -tr)"
        )
    if np.dtype(dtype).name not in ALLOWED_DTYPES:
        raise SceneError(f"DEM {file}: values of type {np.dtype(dtype).name}; allowed: {', '.join(ALLOWED_DTYPES)}")


def _check_values(file: Path, raster: np.ndarray, nodata: float | None = None) -> None:
    bad = ~np.isfinite(raster) if raster.dtype.kind == "f" else np.zeros(raster.shape, bool)
    if nodata is not None:
        bad |= raster == nodata
    if bad.any():
        row, col = (int(v) for v in np.argwhere(bad)[0])
        what = "NaN or infinite" if nodata is None else f"NaN, infinite or no-data ({nodata:g})"
        raise SceneError(
            f"DEM {file}: {int(bad.sum())} {what} cells, the first at row {row}, column {col} (row 0 = north): "
            "every node needs a finite height; fill the gaps (e.g. gdal_fillnodata) or crop the DEM"
        )


def _read_npy(file: Path) -> np.ndarray:
    try:  # memory-mapped: shape and type are known before any value is read
        mapped = np.load(file, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError, EOFError) as err:
        raise SceneError(f"DEM {file}: cannot read it as .npy: {err}") from err
    if not isinstance(mapped, np.ndarray):
        raise SceneError(f"DEM {file}: holds no single array (.npz archives are not DEMs)")
    _check_shape_and_type(file, mapped.shape, mapped.dtype, "the array")
    raster = np.array(mapped)
    del mapped
    _check_values(file, raster)
    return raster


def _read_geotiff(file: Path) -> tuple[np.ndarray, tuple[np.ndarray, float] | None]:
    try:
        import tifffile
    except ImportError as err:
        raise SceneError(
            f"DEM {file}: reading a GeoTIFF needs the tifffile package: pip install 'acres_lidar_ros[dem]' "
            "(or give the DEM as a .npy raster)"
        ) from err
    try:
        with tifffile.TiffFile(file) as tif:
            page = tif.pages[0]
            if not isinstance(page, tifffile.TiffPage):
                raise SceneError(f"DEM {file}: its first image has no TIFF page of its own")
            if page.samplesperpixel != 1:
                raise SceneError(f"DEM {file}: has {page.samplesperpixel} bands (samples per pixel); a DEM has one")
            _check_shape_and_type(file, tuple(page.shape), page.dtype, "the first image")
            tags = {tag.code: tag.value for tag in page.tags.values()}
            raster = page.asarray()
    except SceneError:
        raise
    except Exception as err:  # tifffile raises TiffFileError, ValueError (codecs), OSError, ...
        raise SceneError(f"DEM {file}: cannot read it as a TIFF: {err}") from err
    nodata = _nodata(file, tags.get(_GDAL_NODATA))
    _check_values(file, raster, nodata)
    scale, offset = _band_scale_offset(tags.get(_GDAL_METADATA))
    values = raster.astype(np.float64) * scale + offset if (scale, offset) != (1.0, 0.0) else raster
    return values, _georeference(file, tags, raster.shape)


def _nodata(file: Path, value: Any) -> float | None:
    if value is None:
        return None
    try:
        return float(str(value).strip().strip("\x00"))
    except ValueError as err:
        raise SceneError(f"DEM {file}: GDAL_NODATA {value!r} is not a number") from err


def _band_scale_offset(metadata: Any) -> tuple[float, float]:
    """GDAL's band scale and offset from its GDAL_METADATA XML (1 and 0 without them)."""
    scale, offset = 1.0, 0.0
    if not metadata:
        return scale, offset
    try:
        root = ElementTree.fromstring(str(metadata).strip("\x00"))
    except ElementTree.ParseError:
        return scale, offset
    for item in root.iter("Item"):
        role = item.get("role")
        if role in ("scale", "offset") and item.get("sample", "0") == "0" and item.text:
            if role == "scale":
                scale = float(item.text)
            else:
                offset = float(item.text)
    return scale, offset


def _geo_keys(file: Path, directory: Any) -> dict[int, int]:
    """Short-valued GeoKeys of a GeoKeyDirectoryTag: {key: value}."""
    if directory is None:
        return {}
    values = [int(v) for v in np.asarray(directory).reshape(-1)]
    if len(values) < 4:
        raise SceneError(f"DEM {file}: its GeoKeyDirectoryTag has {len(values)} values; a directory has 4 or more")
    keys = {}
    for k in range(values[3]):
        key, location, _count, value = values[4 + 4 * k : 8 + 4 * k]
        if location == 0:  # the value is in the entry itself
            keys[key] = value
    return keys


def _georeference(file: Path, tags: dict[int, Any], shape: tuple[int, ...]) -> tuple[np.ndarray, float] | None:
    """(scene (x, y) of the south-west node, node spacing) of a GeoTIFF, None without georeferencing."""
    keys = _geo_keys(file, tags.get(_GEO_KEY_DIRECTORY))
    if keys.get(_GT_MODEL_TYPE) == _MODEL_TYPE_GEOGRAPHIC:
        raise SceneError(
            f"DEM {file}: a geographic CRS (latitude and longitude in degrees); allowed: a projected CRS in "
            "metres: reproject it, e.g. gdalwarp -t_srs EPSG:32633 (your UTM zone)"
        )
    for key, what in ((_PROJ_LINEAR_UNITS, "linear"), (_VERTICAL_UNITS, "vertical")):
        if key in keys and keys[key] != _LINEAR_METRE:
            raise SceneError(
                f"DEM {file}: {what} units are EPSG unit {keys[key]}; allowed: metres (EPSG 9001): reproject "
                "or rescale it (gdalwarp -t_srs, gdal_translate -scale)"
            )
    half = 0.0 if keys.get(_GT_RASTER_TYPE) == _RASTER_PIXEL_IS_POINT else 0.5  # PixelIsArea: pixel centres
    rows = shape[0]
    if _MODEL_TRANSFORMATION in tags:
        m = np.asarray(tags[_MODEL_TRANSFORMATION], dtype=np.float64).reshape(4, 4)
        sx, rot_x, x_col0 = m[0, 0], m[0, 1], m[0, 3]
        rot_y, sy_neg, y_row0 = m[1, 0], m[1, 1], m[1, 3]
        if rot_x != 0 or rot_y != 0 or sx <= 0 or sy_neg >= 0:
            raise SceneError(
                f"DEM {file}: its ModelTransformation is rotated, sheared or not north-up; allowed: an "
                "axis-aligned north-up grid (gdalwarp it)"
            )
        sy = -sy_neg
        # model (x, y) of raster point (col, row) = (x_col0 + col sx, y_row0 - row sy)
        x0, y_top, i_tie, j_tie = x_col0, y_row0, 0.0, 0.0
    elif _MODEL_PIXEL_SCALE in tags and _MODEL_TIEPOINT in tags:
        scale = np.asarray(tags[_MODEL_PIXEL_SCALE], dtype=np.float64).reshape(-1)
        tie = np.asarray(tags[_MODEL_TIEPOINT], dtype=np.float64).reshape(-1)
        if scale.size < 2 or tie.size < 6:
            raise SceneError(f"DEM {file}: ModelPixelScale or ModelTiepoint has too few values")
        if tie.size > 6:
            raise SceneError(f"DEM {file}: {tie.size // 6} tie points; allowed: one, with ModelPixelScale")
        sx, sy = scale[0], scale[1]
        i_tie, j_tie, x0, y_top = tie[0], tie[1], tie[3], tie[4]
        if not (sx > 0 and sy > 0):
            raise SceneError(f"DEM {file}: ModelPixelScale {scale.tolist()}; allowed: positive x and y scales")
    elif _MODEL_PIXEL_SCALE in tags or _MODEL_TIEPOINT in tags:
        raise SceneError(f"DEM {file}: has only one of ModelPixelScale and ModelTiepoint; georeferencing needs both")
    else:
        return None
    if not math.isclose(sx, sy, rel_tol=1e-9):
        raise SceneError(f"DEM {file}: pixels of {sx:g} x {sy:g} m; allowed: square pixels (resample it, gdalwarp -tr)")
    # The south-west node: raster row rows - 1, column 0.
    x_sw = x0 + (half - i_tie) * sx
    y_sw = y_top - (rows - 1 + half - j_tie) * sy
    return np.array([x_sw, y_sw]), float(sx)
