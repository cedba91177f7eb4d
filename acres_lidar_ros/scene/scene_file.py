"""Loading scenes from JSON scene files (format: docs/scene_format.md).

Every error is a ``SceneError`` whose message names the file, the key (as a JSON path such as
``objects[3].class``), the value and what is allowed.
"""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

import numpy as np

from acres_lidar_ros.config.input_files import (
    MAX_SCENE_FILE_BYTES,
    load_json_file,
    read_regular_file,
)
from acres_lidar_ros.config.material_table import CLASS_NAMES, COVER_MATERIAL_NAMES, MATERIAL_ID, MATERIAL_NAMES
from acres_lidar_ros.errors import SceneError
from acres_lidar_ros.scene import scene_limits
from acres_lidar_ros.scene.builder import SceneBuilder
from acres_lidar_ros.scene.dem import read_dem
from acres_lidar_ros.scene.grids import CellGrid, TerrainGrid
from acres_lidar_ros.scene.mesh_files import add_material_parts, mesh_suffix_error, read_mesh_file, read_mesh_parts
from acres_lidar_ros.scene.object_pose import ORIENTATION_KEYS, read_mesh_placement, read_orientation
from acres_lidar_ros.scene.scene_model import CROP_CELLS, CROP_CLASS_NAMES, Scene
from acres_lidar_ros.scene.sdf_heightmap import sdf_heightmap_terrain
from acres_lidar_ros.scene.sdf_world import SDF_WORLD_KEYS, add_sdf_world
from acres_lidar_ros.scene.terrain_step import coarsen_terrain

FORMAT_NAME = "acres_lidar_scene"
FORMAT_VERSION = 1

_COMMON = {"type", "name", "class", "material"}
_TURNS = set(ORIENTATION_KEYS)
_OBJECT_KEYS: dict[str, set[str]] = {
    "mesh": _COMMON | _TURNS | {"path", "base_xy_m", "base_z_m", "scale", "up_axis", "closed", "materials"},
    "box": _COMMON | _TURNS | {"base_xy_m", "base_z_m", "size_m", "roof_height_m"},
    "cylinder": _COMMON | _TURNS | {"base_xy_m", "base_z_m", "radius_m", "height_m", "cone_height_m", "segments"},
    "tree": {"type", "name", "base_xy_m", "base_z_m", "height_m", "trunk_radius_m", "crown_material", "trunk_material"},
    "shrub": {"type", "name", "material", "base_xy_m", "base_z_m", "height_m"},
    "crop_field": _COMMON | {"corner_xy_m", "patches", "crop_height_m", "growth", "yaw_deg", "cell_state"},
    "mud_clod": {"type", "name", "material", "base_xy_m", "size_m", "yaw_deg"},
    "ground_cover": {"type", "name", "material", "base_xy_m", "size_m", "yaw_deg"},
    "sdf_world": SDF_WORLD_KEYS,
}
_TERRAIN_KEYS = {
    "origin_xy_m",
    "cell_m",
    "height_m",
    "dem",
    "height_offset_m",
    "node_step",
    "sdf_heightmap",
    "model_path",
    "skip",
}
_TOP_KEYS = {"format", "version", "terrain", "cover", "polygons", "water", "polygon_raster_cell_m", "objects"}


class _Reader:
    """Typed access to the JSON values of one scene file, with errors that name the key."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.base_dir = path.parent
        self.sdf_heightmap_file: Path | None = None  # terrain.sdf_heightmap's world, resolved

    def fail(self, key: str, value: Any, allowed: str) -> SceneError:
        return SceneError(f"{self.path}: {key} = {_short(value)}: {allowed}")

    def table(self, value: Any, key: str, allowed_keys: set[str], of: str = "") -> dict:
        if not isinstance(value, dict):
            raise self.fail(key, value, "must be a JSON object")
        unknown = sorted(set(value) - allowed_keys)
        if unknown:
            raise SceneError(
                f"{self.path}: {key}: unknown key {unknown[0]!r}{of}; allowed: {', '.join(sorted(allowed_keys))}"
            )
        return value

    def required(self, table: dict, name: str, key: str) -> Any:
        if name not in table:
            raise SceneError(f"{self.path}: {key}.{name} is missing")
        return table[name]

    def number(
        self,
        table: dict,
        name: str,
        key: str,
        default: float | None = None,
        low: float = -scene_limits.MAX_SCENE_NUMBER,
        low_open: bool = False,
        high: float = scene_limits.MAX_SCENE_NUMBER,
    ) -> float:
        if name in table:
            value = table[name]
        elif default is not None:
            value = default
        else:
            raise SceneError(f"{self.path}: {key}.{name} is missing")
        allowed = f"must be a number {'>' if low_open else '>='} {low:g} and <= {high:g}"
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(f"{key}.{name}", value, allowed)
        # Compared before any conversion: a huge integer or NaN is refused, never an OverflowError.
        if not (low <= value <= high) or (low_open and value == low):
            raise self.fail(f"{key}.{name}", value, allowed)
        return float(value)

    def optional_number(
        self, table: dict, name: str, key: str, low: float = -scene_limits.MAX_SCENE_NUMBER
    ) -> float | None:
        return None if name not in table else self.number(table, name, key, low=low)

    def vector(self, table: dict, name: str, key: str, size: int, positive: bool = False) -> np.ndarray:
        value = self.required(table, name, key)
        top = scene_limits.MAX_SCENE_NUMBER
        ok = (
            isinstance(value, list)
            and len(value) == size
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) and -top <= v <= top for v in value)
        )
        if not ok or (positive and min(value) <= 0):
            raise self.fail(
                f"{key}.{name}",
                value,
                f"must be a list of {size} numbers {'> 0' if positive else f'>= {-top:g}'} and <= {top:g}",
            )
        return np.array(value, float)

    def name_of(
        self, table: dict, name: str, key: str, allowed: tuple[str, ...], default: str | None = None
    ) -> str | None:
        if name not in table:
            if default is None:
                return None
            return default
        value = table[name]
        if not isinstance(value, str) or value not in allowed:
            raise self.fail(f"{key}.{name}", value, f"allowed: {', '.join(allowed)}")
        return value

    def array(self, value: Any, key: str, kind: str) -> np.ndarray:
        """A 2-D grid given inline (nested lists) or as a path of a .npy file relative to the scene
        file. ``kind``: ``float`` (finite, |v| <= MAX_SCENE_NUMBER), ``int`` (integral values, never
        truncated) or ``str`` (names). At most ``MAX_GRID_CELLS`` values, checked before reading."""
        if isinstance(value, str):
            array = self._npy(value, key)
        elif isinstance(value, list):
            try:
                array = np.array(value)
            except (ValueError, TypeError) as err:
                raise self.fail(key, value, "must be a rectangular 2-D list of rows or a .npy path") from err
        else:
            raise self.fail(key, value, "must be a 2-D list of rows or the path of a .npy file")
        if array.ndim != 2 or array.size == 0:
            raise SceneError(
                f"{self.path}: {key} has shape {array.shape}: must be a non-empty 2-D grid (list of rows or .npy)"
            )
        if array.size > scene_limits.MAX_GRID_CELLS:
            raise SceneError(
                f"{self.path}: {key} has {array.size} values: the limit is {scene_limits.MAX_GRID_CELLS} (4096 x 4096)"
            )
        if kind == "str":
            if array.dtype.kind != "U":
                raise SceneError(f"{self.path}: {key} has values of type {array.dtype}: must be material names")
            return array
        if array.dtype.kind not in "iuf":
            raise SceneError(f"{self.path}: {key} has values of type {array.dtype}: must be numbers")
        if kind == "float":
            with np.errstate(invalid="ignore", over="ignore"):  # NaN and huge values are refused just below
                values = array.astype(np.float64)
            bad = ~(np.abs(values) <= scene_limits.MAX_SCENE_NUMBER)
            what = (
                f"must be finite numbers from {-scene_limits.MAX_SCENE_NUMBER:g} to {scene_limits.MAX_SCENE_NUMBER:g}"
            )
        else:
            values = array
            bad = np.zeros(array.shape, bool)
            if array.dtype.kind == "f":
                bad = ~np.isfinite(array) | (np.abs(array) > 255)
                bad[~bad] = array[~bad] != np.round(array[~bad])
            elif array.dtype.kind in "iu":
                bad = (array < 0) | (array > 255)
            what = "must be whole numbers from 0 to 255 (never rounded)"
        if bad.any():
            i, j = np.argwhere(bad)[0]
            raise self.fail(f"{key}[{i}][{j}]", array[i, j].item(), what)
        return values.astype(np.int64) if kind == "int" else values

    def _npy(self, value: str, key: str) -> np.ndarray:
        file = self.base_dir / value
        if not file.exists():
            raise SceneError(f"{self.path}: {key} = {value!r}: file {file} does not exist")
        what = f"{self.path}: {key} = {value!r}: .npy file"
        data = read_regular_file(file, what, scene_limits.MAX_NPY_FILE_BYTES, SceneError)
        buffer = io.BytesIO(data)
        try:  # the header first: shape and type are checked before the values are allocated
            version = np.lib.format.read_magic(buffer)
            if version not in ((1, 0), (2, 0)):
                raise ValueError(f".npy format version {version[0]}.{version[1]}: expected 1.0 or 2.0")
            read_header = (
                np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            )
            shape, _fortran, dtype = read_header(buffer)
            if len(shape) == 2 and shape[0] * shape[1] > scene_limits.MAX_GRID_CELLS:
                raise SceneError(
                    f"{self.path}: {key} = {value!r}: {file} has shape {shape}: the limit is "
                    f"{scene_limits.MAX_GRID_CELLS} values (4096 x 4096)"
                )
            if dtype.hasobject:
                raise SceneError(f"{self.path}: {key} = {value!r}: {file} holds Python objects: must be numbers")
            buffer.seek(0)
            return np.load(buffer, allow_pickle=False)
        except SceneError:
            raise
        except Exception as err:  # numpy's header parser raises many types (ValueError, TokenError, ...)
            raise SceneError(
                f"{self.path}: {key} = {value!r}: cannot read {file} as .npy: {type(err).__name__}: {err}"
            ) from err

    def grid_geometry(self, table: dict, key: str) -> tuple[np.ndarray, float]:
        return self.vector(table, "origin_xy_m", key, 2), self.number(table, "cell_m", key, low=scene_limits.MIN_CELL_M)


def load_scene(path: str | Path) -> Scene:
    """Scene of a JSON scene file (docs/scene_format.md).

    Raises
    ------
    SceneError
        When the file is missing or malformed; the message names the file, key, value and the
        allowed values.
    """
    path = Path(path)
    if not path.exists():
        raise SceneError(f"{path}: scene file does not exist")
    doc = load_json_file(path, "scene file", MAX_SCENE_FILE_BYTES, SceneError)
    r = _Reader(path)
    try:
        return _load(r, doc)
    except SceneError as err:
        if str(err).startswith(str(path)) or str(err).startswith(f"scene file {str(path)!r}"):
            raise
        raise SceneError(f"{path}: {err}") from err


def _load(r: _Reader, doc: Any) -> Scene:
    path = r.path
    doc = r.table(doc, "(top level)", _TOP_KEYS)
    if doc.get("format", FORMAT_NAME) != FORMAT_NAME:
        raise r.fail("format", doc["format"], f"must be {FORMAT_NAME!r}")
    version = doc.get("version", FORMAT_VERSION)
    if type(version) is not int or version != FORMAT_VERSION:  # not True, not 1.0
        raise r.fail("version", version, f"must be {FORMAT_VERSION} (an integer, not true or {FORMAT_VERSION}.0)")

    t = r.table(r.required(doc, "terrain", "(top level)"), "terrain", _TERRAIN_KEYS)
    if "sdf_heightmap" in t:
        terrain = sdf_heightmap_terrain(r, t)
    elif {"model_path", "skip"} & set(t):
        raise SceneError(f"{path}: terrain.model_path and terrain.skip apply to terrain.sdf_heightmap only")
    elif "dem" in t:
        terrain = _dem_terrain(r, t)
    else:
        if "height_offset_m" in t:
            raise SceneError(f"{path}: terrain.height_offset_m applies to terrain.dem only")
        origin, cell = r.grid_geometry(t, "terrain")
        heights = r.array(r.required(t, "height_m", "terrain"), "terrain.height_m", "float")
        terrain = TerrainGrid(origin, cell, heights)
    terrain = coarsen_terrain(r, t, terrain)

    cover = None
    if "cover" in doc:
        c = r.table(doc["cover"], "cover", {"origin_xy_m", "cell_m", "material"})
        c_origin, c_cell = r.grid_geometry(c, "cover")
        raw = r.required(c, "material", "cover")
        if isinstance(raw, str):
            values = r.array(raw, "cover.material", "int")
            bad = ~np.isin(values, [MATERIAL_ID[n] for n in COVER_MATERIAL_NAMES])
            if bad.any():
                i, j = np.argwhere(bad)[0]
                raise r.fail(
                    f"cover.material[{i}][{j}]",
                    int(values[i, j]),
                    "allowed material numbers: " + ", ".join(f"{MATERIAL_ID[n]} ({n})" for n in COVER_MATERIAL_NAMES),
                )
        else:
            names = r.array(raw, "cover.material", "str")
            bad = ~np.isin(names, COVER_MATERIAL_NAMES)
            if bad.any():
                i, j = np.argwhere(bad)[0]
                raise r.fail(
                    f"cover.material[{i}][{j}]", str(names[i, j]), f"allowed: {', '.join(COVER_MATERIAL_NAMES)}"
                )
            values = np.vectorize(MATERIAL_ID.__getitem__, otypes=[np.int64])(names)
        cover = CellGrid(c_origin, c_cell, values.astype(np.uint8))

    polygons = []
    raw_polygons = doc.get("polygons", [])
    if not isinstance(raw_polygons, list):
        raise r.fail("polygons", raw_polygons, "must be a list of polygons")
    top = scene_limits.MAX_SCENE_NUMBER
    for k, p in enumerate(raw_polygons):
        key = f"polygons[{k}]"
        p = r.table(p, key, {"name", "material", "vertices_xy_m"})
        if "name" in p and not isinstance(p["name"], str):
            raise r.fail(f"{key}.name", p["name"], "must be a string")
        material = r.name_of(p, "material", key, COVER_MATERIAL_NAMES)
        if material is None:
            raise SceneError(f"{path}: {key}.material is missing")
        v = r.required(p, "vertices_xy_m", key)
        allowed = f"must be 3 or more [x, y] pairs of numbers from {-top:g} to {top:g}"
        try:
            vertices = np.array(v, float)
        except (TypeError, ValueError, OverflowError) as err:
            raise r.fail(f"{key}.vertices_xy_m", v, allowed) from err
        if vertices.ndim != 2 or vertices.shape[1] != 2 or len(vertices) < 3 or not np.all(np.abs(vertices) <= top):
            raise r.fail(f"{key}.vertices_xy_m", v, allowed)
        polygons.append((vertices, material))

    pond = wet = None
    if "water" in doc:
        w = r.table(doc["water"], "water", {"origin_xy_m", "cell_m", "pond_depth_m", "soil_wetness"})
        w_origin, w_cell = r.grid_geometry(w, "water")
        if "pond_depth_m" in w:
            pond = CellGrid(w_origin, w_cell, r.array(w["pond_depth_m"], "water.pond_depth_m", "float"))
        if "soil_wetness" in w:
            wet = CellGrid(w_origin, w_cell, r.array(w["soil_wetness"], "water.soil_wetness", "float"))

    raster_cell = r.number(doc, "polygon_raster_cell_m", "(top level)", default=0.25, low=scene_limits.MIN_CELL_M)
    _check_raster(r, polygons, raster_cell)
    builder = SceneBuilder(terrain, cover, polygons, pond, wet, raster_cell)
    _check_triangles(r, builder, "terrain.height_m")

    objects = doc.get("objects", [])
    if not isinstance(objects, list):
        raise r.fail("objects", objects, "must be a list of objects")
    budget = {"crop_patches": 0}
    for k, obj in enumerate(objects):
        _add_object(r, builder, obj, f"objects[{k}]", budget)
        _check_triangles(r, builder, f"objects[{k}]")
    return builder.build()


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:40]}...({len(text)} characters)"


def _check_raster(r: _Reader, polygons: list[tuple[np.ndarray, str]], cell_m: float) -> None:
    """The polygon raster's cells and vertex-cell tests, before any is allocated (in float: no overflow)."""
    if not polygons:
        return
    all_xy = np.vstack([v for v, _ in polygons])
    span = (all_xy.max(axis=0) - np.floor(all_xy.min(axis=0) / cell_m) * cell_m) / cell_m + 2.0
    cells = float(span[0]) * float(span[1])
    if cells > scene_limits.MAX_RASTER_CELLS:
        raise SceneError(
            f"{r.path}: polygon_raster_cell_m = {cell_m!r}: the polygons span {cells:.3g} raster cells: the limit is "
            f"{scene_limits.MAX_RASTER_CELLS}; give a larger polygon_raster_cell_m"
        )
    work = 0.0
    for k, (vertices, _material) in enumerate(polygons):
        extent = (vertices.max(axis=0) - vertices.min(axis=0)) / cell_m + 2.0
        work += len(vertices) * float(extent[0]) * float(extent[1])
        if work > scene_limits.MAX_POLYGON_WORK:
            raise SceneError(
                f"{r.path}: polygons[{k}].vertices_xy_m: the polygons need {work:.3g} vertex-cell tests at "
                f"polygon_raster_cell_m = {cell_m!r}: the limit is {scene_limits.MAX_POLYGON_WORK}; use fewer vertices "
                "or a larger raster cell"
            )


def _dem_terrain(r: _Reader, t: dict) -> TerrainGrid:
    """``terrain.dem``: a GeoTIFF or ``.npy`` raster (``scene.dem``) instead of ``height_m``."""
    if "height_m" in t:
        raise SceneError(f"{r.path}: terrain has height_m and dem; give one of them")
    rel = t["dem"]
    if not isinstance(rel, str):
        raise r.fail("terrain.dem", rel, "must be the path of a .tif, .tiff or .npy file relative to the scene file")
    origin = r.vector(t, "origin_xy_m", "terrain", 2) if "origin_xy_m" in t else None
    cell = r.number(t, "cell_m", "terrain", low=scene_limits.MIN_CELL_M) if "cell_m" in t else None
    offset = r.number(t, "height_offset_m", "terrain", default=0.0)
    try:
        raster = read_dem(r.base_dir / rel, origin, cell, offset)
    except SceneError as err:
        raise SceneError(f"{r.path}: terrain.dem = {rel!r}: {err}") from err
    return TerrainGrid(raster.origin_xy_m, raster.cell_m, raster.height_m)


def _check_triangles(r: _Reader, builder: SceneBuilder, key: str) -> None:
    count = sum(len(part.triangles) for part in builder._parts)
    if count > scene_limits.MAX_SCENE_TRIANGLES:
        raise SceneError(
            f"{r.path}: {key}: the scene reaches {count} triangles: the limit is {scene_limits.MAX_SCENE_TRIANGLES}"
        )


def _add_object(r: _Reader, b: SceneBuilder, obj: Any, key: str, budget: dict[str, int]) -> None:
    if not isinstance(obj, dict):
        raise r.fail(key, obj, "must be a JSON object")
    kind = obj.get("type")
    if not isinstance(kind, str) or kind not in _OBJECT_KEYS:
        raise r.fail(f"{key}.type", kind, f"allowed: {', '.join(_OBJECT_KEYS)}")
    obj = r.table(obj, key, _OBJECT_KEYS[kind], f" for type {kind!r}")
    if kind == "sdf_world":
        return add_sdf_world(r, b, obj, key)
    name = obj.get("name")
    if "name" in obj and not isinstance(name, str):
        raise r.fail(f"{key}.name", name, "must be a string")
    material = r.name_of(obj, "material", key, MATERIAL_NAMES)
    yaw, rotation = 0.0, None  # rotation: a 3-D turn of a box or cylinder (rpy_deg, quaternion_xyzw)
    if kind in ("box", "cylinder"):
        yaw, rotation = read_orientation(r, obj, key)
    elif kind != "mesh":
        yaw = math.radians(r.number(obj, "yaw_deg", key, default=0.0))
    cls = ""  # the class of a mesh, box, cylinder or crop field (trees and the rest have their own)
    if kind in ("mesh", "box", "cylinder", "crop_field"):
        named = r.name_of(obj, "class", key, CLASS_NAMES)
        if named is None:
            raise SceneError(f"{r.path}: {key}.class is missing; allowed: {', '.join(CLASS_NAMES)}")
        cls = named
    try:
        if kind == "mesh":
            _add_mesh(r, b, obj, key, cls, material, name)
        elif kind == "box":
            b.add_box(
                r.vector(obj, "base_xy_m", key, 2),
                r.vector(obj, "size_m", key, 3, positive=True),
                cls,
                yaw,
                material,
                r.number(obj, "roof_height_m", key, default=0.0, low=0.0),
                r.optional_number(obj, "base_z_m", key),
                name,
                rotation,
            )
        elif kind == "cylinder":
            segments = obj.get("segments", 16)
            if (
                isinstance(segments, bool)
                or not isinstance(segments, int)
                or not 3 <= segments <= scene_limits.MAX_CYLINDER_SEGMENTS
            ):
                raise r.fail(
                    f"{key}.segments", segments, f"must be an integer from 3 to {scene_limits.MAX_CYLINDER_SEGMENTS}"
                )
            b.add_cylinder(
                r.vector(obj, "base_xy_m", key, 2),
                r.number(obj, "radius_m", key, low=0.0, low_open=True),
                r.number(obj, "height_m", key, low=0.0, low_open=True),
                cls,
                material,
                segments,
                r.number(obj, "cone_height_m", key, default=0.0, low=0.0),
                r.optional_number(obj, "base_z_m", key),
                name,
                yaw,
                rotation,
            )
        elif kind == "tree":
            b.add_tree(
                r.vector(obj, "base_xy_m", key, 2),
                r.number(obj, "height_m", key, low=0.0, low_open=True),
                r.optional_number(obj, "trunk_radius_m", key),
                r.name_of(obj, "crown_material", key, MATERIAL_NAMES),
                r.name_of(obj, "trunk_material", key, MATERIAL_NAMES),
                r.optional_number(obj, "base_z_m", key),
                name,
            )
        elif kind == "shrub":
            b.add_shrub(
                r.vector(obj, "base_xy_m", key, 2),
                r.number(obj, "height_m", key, low=0.0, low_open=True),
                material,
                r.optional_number(obj, "base_z_m", key),
                name,
            )
        elif kind == "crop_field":
            if cls not in CROP_CLASS_NAMES:
                raise r.fail(f"{key}.class", cls, f"allowed for crop_field: {', '.join(CROP_CLASS_NAMES)}")
            patches = r.required(obj, "patches", key)
            if not (
                isinstance(patches, list)
                and len(patches) == 2
                and all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in patches)
            ):
                raise r.fail(f"{key}.patches", patches, "must be [nx, ny], integers >= 1")
            budget["crop_patches"] += patches[0] * patches[1]
            if budget["crop_patches"] > scene_limits.MAX_CROP_PATCHES:
                raise r.fail(
                    f"{key}.patches",
                    patches,
                    f"the crop fields reach {budget['crop_patches']} patches: the limit is {scene_limits.MAX_CROP_PATCHES}",
                )
            state = None
            if "cell_state" in obj:
                state = r.array(obj["cell_state"], f"{key}.cell_state", "int")
                shape = (CROP_CELLS * patches[1], CROP_CELLS * patches[0])
                if state.shape != shape or not np.isin(state, (0, 1, 2)).all():
                    raise SceneError(
                        f"{r.path}: {key}.cell_state has shape {state.shape}: must be {shape} (4 x patches "
                        f"{patches} [nx, ny], rows along y) of 0 (standing), 1 (crushed), 2 (harvested)"
                    )
            growth = r.number(obj, "growth", key, low=0.0)
            if growth > 1.0:
                raise r.fail(f"{key}.growth", growth, "must be from 0 to 1")
            b.add_crop_field(
                r.vector(obj, "corner_xy_m", key, 2),
                tuple(patches),
                cls,
                r.number(obj, "crop_height_m", key, low=0.0, low_open=True),
                growth,
                yaw,
                state,
                material,
                name,
            )
        elif kind == "mud_clod":
            b.add_mud_clod(
                r.vector(obj, "base_xy_m", key, 2), r.vector(obj, "size_m", key, 3, positive=True), yaw, material, name
            )
        elif kind == "ground_cover":
            b.add_ground_cover(
                r.vector(obj, "base_xy_m", key, 2), r.vector(obj, "size_m", key, 3, positive=True), yaw, material, name
            )
    except SceneError as err:
        message = str(err)
        if message.startswith(str(r.path)):
            raise
        raise SceneError(f"{r.path}: {key}: {message}") from err


def _add_mesh(r: _Reader, b: SceneBuilder, obj: dict, key: str, cls: str, material, name) -> None:
    rel = r.required(obj, "path", key)
    if not isinstance(rel, str) or not rel or "\0" in rel:
        raise r.fail(f"{key}.path", rel, "must be a path relative to the scene file")
    file = r.base_dir / rel
    if file.suffix.lower() not in scene_limits.MESH_SUFFIXES:
        raise r.fail(f"{key}.path", rel, mesh_suffix_error(file.suffix))
    if "materials" in obj:
        vertices, triangles, part, names = read_mesh_parts(file, f"{r.path}: {key}.path = {rel!r}")
    else:
        vertices, triangles = read_mesh_file(file, f"{r.path}: {key}.path = {rel!r}")
    placement = read_mesh_placement(r, obj, key)
    base_xy = r.vector(obj, "base_xy_m", key, 2)
    base_z = r.optional_number(obj, "base_z_m", key)
    z0 = float(b.terrain.height_at(base_xy[0], base_xy[1])) if base_z is None else base_z
    world = placement.apply(vertices, np.array([base_xy[0], base_xy[1], z0]))
    if not np.all(np.abs(world) <= scene_limits.MAX_SCENE_NUMBER):
        raise SceneError(
            f"{r.path}: {key}.path = {rel!r}: {file} has vertices that are not finite or, with "
            f"{placement.describe()} and base_xy_m = {base_xy.tolist()} (base_z {z0:g} m), beyond "
            f"{scene_limits.MAX_SCENE_NUMBER:g} m"
        )
    closed = obj.get("closed", False)
    if not isinstance(closed, bool):
        raise r.fail(f"{key}.closed", closed, "must be true or false")
    if "materials" in obj:
        add_material_parts(r, b, obj, key, (world, triangles, part, names), (cls, material, closed, name))
    else:
        b.add_mesh(world, triangles, cls, material, closed, name)
