"""A Gazebo ``<heightmap>`` as the scene's terrain grid (docs/scene_format.md, "Gazebo heightmaps").

The scene file's ``"terrain": {"sdf_heightmap": "world.sdf"}`` reads the one ``<heightmap>`` visual
of an SDF world (``sdf_world.read_sdf_world`` collects it with its world pose) and makes the
``TerrainGrid`` Gazebo makes of it (gz-common's ``ImageHeightmap``/``Dem`` and gz-rendering's
``OgreHeightmap``, read at their sources):

* ``<uri>``: a ``.png``, ``.jpg`` or ``.jpeg`` grayscale image (gz-common's
  ``isSupportedImageHeightmapFileExtension``; 8 or 16 bits, the first channel of an RGB(A) one), or
  a GeoTIFF DEM (``.tif``, ``.tiff``; ``dem.read_dem_nodes``). It is square with a side of 2^n + 1
  nodes, as Ogre's terrain needs (Gazebo resamples other DEMs; here they are refused).
* ``<size>`` x y z (an image's default 1 1 1; a DEM's (N - 1) times its pixel spacing and its
  height range): the N x N nodes span x and y evenly, centred on ``<pos>`` in the visual's frame;
  row 0 of the raster is the +y (north) edge. An image's node height is ``z v / v_max`` with ``v``
  the pixel over its type's largest value and ``v_max`` that of the brightest pixel (its first
  channel; ``Image::MaxColor``), so the brightest pixel stands ``z`` above ``<pos>``; a DEM's is
  ``e_min + (e - e_min) z / (e_max - e_min)`` above it (the elevations as they are by default).
* ``<sampling>`` s: (N - 1) s + 1 nodes a side, bilinear between the raster's (``FillHeights``).
* The model, link and visual poses move it; a turn is refused (the terrain grid is axis-aligned),
  and so are unequal x and y sizes (its cells are square). Textures and blends are not read: the
  ground's materials are the scene file's ``cover``.

Gazebo's ogre2 renderer drops the last row and column of a 2^n + 1 raster (its terrain is 2^n a
side); the collision shape and Gazebo classic keep them, as this grid does.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from acres_lidar_ros.config.input_files import check_regular_file
from acres_lidar_ros.errors import SceneError
from acres_lidar_ros.scene import scene_limits
from acres_lidar_ros.scene.dem import MAX_DEM_FILE_BYTES, MAX_DEM_NODES, read_dem_nodes
from acres_lidar_ros.scene.grids import TerrainGrid
from acres_lidar_ros.scene.sdf_world import SdfHeightmap, model_search_path, read_sdf_world, sdf_reader

if TYPE_CHECKING:
    from acres_lidar_ros.scene.scene_file import _Reader

#: Raster files a heightmap's ``<uri>`` may name: Gazebo's image suffixes, and GeoTIFF DEMs.
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
DEM_SUFFIXES = (".tif", ".tiff")
#: Largest ``<sampling>``; the nodes after it stay within the DEM node limit (4096 x 4096).
MAX_SAMPLING = 16
#: Largest turn of a heightmap's world pose taken as none (rotation matrix entries).
TURN_TOLERANCE = 1e-9


def sdf_heightmap_terrain(r: _Reader, t: dict) -> TerrainGrid:
    """The scene file's ``terrain.sdf_heightmap`` (with ``terrain.model_path`` and ``terrain.skip``, as
    an ``sdf_world``'s): the terrain grid of the one ``<heightmap>`` of that SDF world (module docstring)."""
    given = sorted(set(t) & {"height_m", "dem", "origin_xy_m", "cell_m", "height_offset_m"})
    if given:
        raise SceneError(
            f"{r.path}: terrain.sdf_heightmap places the ground itself (its <size> and <pos>): leave out "
            f"terrain.{given[0]}"
        )
    rel = t["sdf_heightmap"]
    if not isinstance(rel, str) or not rel or "\0" in rel:
        raise r.fail("terrain.sdf_heightmap", rel, "must be the path of an SDF world file relative to the scene file")
    folders: Any = t.get("model_path", [])
    if not isinstance(folders, list) or not all(isinstance(f, str) and f for f in folders):
        raise r.fail("terrain.model_path", folders, "must be a list of folders relative to the scene file")
    skip: Any = t.get("skip", [])
    if not isinstance(skip, list) or not all(isinstance(f, str) and f for f in skip):
        raise r.fail("terrain.skip", skip, "must be a list of model or link names")
    file = r.base_dir / rel
    search = model_search_path([r.base_dir / f for f in folders] + [file.parent])
    found: list[SdfHeightmap] = []
    try:
        read_sdf_world(file, search, frozenset(skip), found)
        if len(found) != 1:
            places = "; ".join(h.where for h in found[:4])
            raise SceneError(
                f"{file} has {len(found)} <heightmap> visuals{': ' + places if places else ''}; the terrain is "
                "one heightmap: give a world with one"
            )
        terrain = heightmap_grid(found[0], sdf_reader(search, frozenset(), None).resource)
    except SceneError as err:
        raise SceneError(f"{r.path}: terrain.sdf_heightmap = {rel!r}: {err}") from err
    r.sdf_heightmap_file = file.resolve()
    return terrain


def heightmap_grid(heightmap: SdfHeightmap, resolve: Callable[[str, Path, str], Path]) -> TerrainGrid:
    """The ``TerrainGrid`` of one ``<heightmap>``; ``resolve(uri, sdf_file, where)`` finds its file."""
    element, where = heightmap.element, heightmap.where
    uri = _text(element, "uri", where)
    if uri is None:
        raise SceneError(f"{where}: has no <uri>")
    path = resolve(uri, heightmap.file, where)
    suffix = path.suffix.lower()
    if suffix not in IMAGE_SUFFIXES + DEM_SUFFIXES:
        raise SceneError(
            f"{where} <uri> = {uri!r}: a heightmap here is an image ({', '.join(IMAGE_SUFFIXES)}) or a GeoTIFF DEM "
            f"({', '.join(DEM_SUFFIXES)}); convert it (e.g. gdal_translate -of GTiff)"
        )
    if not path.is_file():
        raise SceneError(f"{where} <uri> = {uri!r}: {path} does not exist or is not a file")
    size = _vector(element, "size", where) if element.find("size") is not None else None
    pos = _vector(element, "pos", where) if element.find("pos") is not None else np.zeros(3)
    sampling = _sampling(element, where)
    top = 0.0
    if suffix in IMAGE_SUFFIXES:
        (raster, top), spacing = _image_units(path, where), None
    else:
        try:
            raster, spacing = read_dem_nodes(path)
        except SceneError as err:
            raise SceneError(f"{where} <uri> = {uri!r}: {err}") from err
    side = _check_side(raster, path, where, "resample it, e.g. gdalwarp -ts 513 513")
    if size is None:
        if suffix in IMAGE_SUFFIXES:
            size = np.ones(3)
        elif spacing is None:
            raise SceneError(f"{where}: the DEM {path} has no georeferencing: give the heightmap's <size>")
        else:
            size = np.array([(side - 1) * spacing, (side - 1) * spacing, float(raster.max() - raster.min())])
    if not (size[0] > 0 and size[1] > 0 and size[2] >= 0):
        raise SceneError(f"{where} <size> = {size.tolist()}: x and y must be > 0 and z >= 0")
    if not math.isclose(size[0], size[1], rel_tol=1e-9):
        raise SceneError(
            f"{where} <size> = {size.tolist()}: x and y differ; the terrain grid has square cells: give equal x and y"
        )
    if suffix in IMAGE_SUFFIXES:  # an all-black image is flat at <pos>
        heights = size[2] * (raster / top if top > 0 else raster)
    else:
        low, span = float(raster.min()), float(raster.max() - raster.min())
        heights = raster if span == 0 else low + (raster - low) * (size[2] / span)
    heights = _sampled(heights, sampling)
    nodes = len(heights)
    if nodes * nodes > MAX_DEM_NODES:
        raise SceneError(
            f"{where}: {side} x {side} nodes at <sampling> {sampling} are {nodes} x {nodes}: the limit is "
            f"{MAX_DEM_NODES} nodes (4096 x 4096); lower the sampling"
        )
    T = heightmap.T_world_visual
    if not np.allclose(T[:3, :3], np.eye(3), atol=TURN_TOLERANCE, rtol=0.0):
        raise SceneError(
            f"{where}: its model, link or visual pose turns it; the terrain grid is axis-aligned: place the "
            "heightmap with translations only"
        )
    centre = T[:3, :3] @ pos + T[:3, 3]
    origin = centre[:2] - size[:2] / 2.0
    height_m = heights[::-1] + centre[2]  # raster row 0 is the north edge; the grid's row 0 the south
    top_m = scene_limits.MAX_SCENE_NUMBER
    if not (np.all(np.abs(origin) + size[:2] <= top_m) and np.all(np.abs(height_m) <= top_m)):
        raise SceneError(f"{where}: the heightmap reaches beyond {top_m:g} m of the scene origin: move it nearer")
    return TerrainGrid(origin, float(size[0]) / (nodes - 1), height_m)


def _image_units(path: Path, where: str) -> tuple[np.ndarray, float]:
    """The image's first channel over its type's largest value (``v``), and that of its brightest
    pixel (``v_max``: the pixel of the largest R + G + B, ``Image::MaxColor``; a gray image's largest)."""
    import open3d as o3d

    check_regular_file(path, "heightmap image", MAX_DEM_FILE_BYTES, SceneError)
    with path.open("rb") as f:
        head = f.read(24)
    if head[:8] == b"\x89PNG\r\n\x1a\n":  # the side from the header, before the pixels are read
        width, height = int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
        if width * height > 4 * MAX_DEM_NODES:
            raise SceneError(f"{where}: the image {path} is {width} x {height}: the limit is 4097 x 4097")
    pixels = np.asarray(o3d.io.read_image(path))
    if pixels.ndim not in (2, 3) or pixels.dtype not in (np.uint8, np.uint16):
        raise SceneError(
            f"{where}: {path} does not read as an 8- or 16-bit image (shape {pixels.shape}, {pixels.dtype}): "
            "save it as an 8- or 16-bit grayscale PNG"
        )
    full = float(np.iinfo(pixels.dtype).max)
    units = (pixels if pixels.ndim == 2 else pixels[..., 0]).astype(np.float64) / full
    if pixels.ndim == 3 and pixels.shape[2] >= 3:
        total = pixels[..., :3].astype(np.int64).sum(axis=2)
        return units, float(units.ravel()[int(np.argmax(total))])
    return units, float(units.max())


def _check_side(raster: np.ndarray, path: Path, where: str, how: str) -> int:
    rows, cols = raster.shape[:2]
    if rows != cols or rows < 3 or (rows - 1) & (rows - 2):
        raise SceneError(
            f"{where}: {path} is {cols} x {rows}; a Gazebo heightmap is square with 2^n + 1 nodes a side "
            f"(3, 5, 9, ..., 513, 1025, 2049, 4097): {how}"
        )
    return rows


def _sampled(heights: np.ndarray, s: int) -> np.ndarray:
    """(N - 1) s + 1 nodes a side, bilinear between the raster's nodes (gz-common's ``FillHeights``)."""
    if s == 1:
        return heights
    n = len(heights)
    f = np.arange((n - 1) * s + 1) / s
    lo = np.floor(f).astype(np.int64)
    hi = np.minimum(lo + (f > lo), n - 1)
    w = f - lo
    rows = heights[lo] + (heights[hi] - heights[lo]) * w[:, None]
    return rows[:, lo] + (rows[:, hi] - rows[:, lo]) * w[None, :]


def _text(element: ElementTree.Element, tag: str, where: str) -> str | None:
    child = element.find(tag)
    if child is None:
        return None
    value = (child.text or "").strip()
    if not value:
        raise SceneError(f"{where}: <{tag}> is empty")
    return value


def _vector(element: ElementTree.Element, tag: str, where: str) -> np.ndarray:
    text = _text(element, tag, where) or ""
    try:
        values = np.array([float(v) for v in text.split()])
    except ValueError:
        values = np.array([])
    if len(values) != 3 or not np.isfinite(values).all():
        raise SceneError(f"{where} <{tag}> = {text[:60]!r}: must be 3 finite numbers")
    return values


def _sampling(element: ElementTree.Element, where: str) -> int:
    text = _text(element, "sampling", where)
    if text is None:
        return 1
    if not text.isdigit() or not 1 <= int(text) <= MAX_SAMPLING:
        raise SceneError(f"{where} <sampling> = {text[:20]!r}: must be an integer from 1 to {MAX_SAMPLING}")
    return int(text)
