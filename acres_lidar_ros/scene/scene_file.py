"""Loading scenes from JSON scene files (format: docs/scene_format.md).

Every error is a ``SceneError`` whose message names the file, the key (as a JSON path such as
``objects[3].class``), the value and what is allowed.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from acres_lidar_ros.config.materials import CLASS_NAMES, COVER_MATERIAL_NAMES, MATERIAL_ID, MATERIAL_NAMES
from acres_lidar_ros.errors import SceneError
from acres_lidar_ros.scene.builder import SceneBuilder
from acres_lidar_ros.scene.grids import CellGrid, TerrainGrid
from acres_lidar_ros.scene.model import CROP_CLASS_NAMES, Scene

FORMAT_NAME = "acres_lidar_scene"
FORMAT_VERSION = 1

_COMMON = {"type", "name", "class", "material"}
_OBJECT_KEYS: dict[str, set[str]] = {
    "mesh": _COMMON | {"path", "base_xy_m", "base_z_m", "yaw_deg", "scale", "closed"},
    "box": _COMMON | {"base_xy_m", "base_z_m", "size_m", "yaw_deg", "roof_height_m"},
    "cylinder": _COMMON | {"base_xy_m", "base_z_m", "radius_m", "height_m", "cone_height_m", "segments"},
    "tree": {"type", "name", "base_xy_m", "base_z_m", "height_m", "trunk_radius_m", "crown_material", "trunk_material"},
    "shrub": {"type", "name", "material", "base_xy_m", "base_z_m", "height_m"},
    "crop_field": _COMMON | {"corner_xy_m", "patches", "crop_height_m", "growth", "yaw_deg", "cell_state"},
    "mud_clod": {"type", "name", "material", "base_xy_m", "size_m", "yaw_deg"},
    "ground_cover": {"type", "name", "material", "base_xy_m", "size_m", "yaw_deg"},
}
_TOP_KEYS = {"format", "version", "terrain", "cover", "polygons", "water", "polygon_raster_cell_m", "objects"}


class _Reader:
    """Typed access to the JSON values of one scene file, with errors that name the key."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.base_dir = path.parent

    def fail(self, key: str, value: Any, allowed: str) -> SceneError:
        return SceneError(f"{self.path}: {key} = {value!r}: {allowed}")

    def table(self, value: Any, key: str, allowed_keys: set[str]) -> dict:
        if not isinstance(value, dict):
            raise self.fail(key, value, "must be a JSON object")
        unknown = sorted(set(value) - allowed_keys)
        if unknown:
            raise SceneError(
                f"{self.path}: {key}: unknown key {unknown[0]!r}; allowed: {', '.join(sorted(allowed_keys))}"
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
        low: float = -math.inf,
        low_open: bool = False,
    ) -> float:
        if name in table:
            value = table[name]
        elif default is not None:
            value = default
        else:
            raise SceneError(f"{self.path}: {key}.{name} is missing")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self.fail(f"{key}.{name}", value, "must be a finite number")
        if value < low or (low_open and value == low):
            raise self.fail(f"{key}.{name}", value, f"must be {'>' if low_open else '>='} {low}")
        return float(value)

    def optional_number(self, table: dict, name: str, key: str, low: float = -math.inf) -> float | None:
        return None if name not in table else self.number(table, name, key, low=low)

    def vector(self, table: dict, name: str, key: str, size: int, positive: bool = False) -> np.ndarray:
        value = self.required(table, name, key)
        ok = (
            isinstance(value, list)
            and len(value) == size
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value)
        )
        if not ok or (positive and min(value) <= 0):
            raise self.fail(
                f"{key}.{name}", value, f"must be a list of {size} finite numbers{' > 0' if positive else ''}"
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
        if value not in allowed:
            raise self.fail(f"{key}.{name}", value, f"allowed: {', '.join(allowed)}")
        return value

    def array(self, value: Any, key: str, dtype) -> np.ndarray:
        """A 2-D array given inline (nested lists) or as a path of a .npy file relative to the scene file."""
        if isinstance(value, str):
            file = self.base_dir / value
            if not file.is_file():
                raise SceneError(f"{self.path}: {key} = {value!r}: file {file} does not exist")
            try:
                array = np.load(file, allow_pickle=False)
            except (OSError, ValueError) as err:
                raise SceneError(f"{self.path}: {key} = {value!r}: cannot read {file} as .npy: {err}") from err
        else:
            try:
                array = np.array(value)
            except ValueError as err:
                raise self.fail(key, "...", "must be a rectangular 2-D list or a .npy path") from err
        if array.ndim != 2:
            raise SceneError(f"{self.path}: {key} has shape {array.shape}: must be a 2-D grid (list of rows or .npy)")
        if dtype is not str:
            if array.dtype.kind not in "iuf":
                raise SceneError(f"{self.path}: {key} has values of type {array.dtype}: must be numbers")
            array = array.astype(dtype)
        return array

    def grid_geometry(self, table: dict, key: str) -> tuple[np.ndarray, float]:
        return self.vector(table, "origin_xy_m", key, 2), self.number(table, "cell_m", key, low=0.0, low_open=True)


def load_scene(path: str | Path) -> Scene:
    """Scene of a JSON scene file (docs/scene_format.md).

    Raises
    ------
    SceneError
        When the file is missing or malformed; the message names the file, key, value and the
        allowed values.
    """
    path = Path(path)
    if not path.is_file():
        raise SceneError(f"{path}: scene file does not exist")
    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise SceneError(f"{path}: not a readable JSON file: {err}") from err
    r = _Reader(path)
    doc = r.table(doc, "(top level)", _TOP_KEYS)
    if doc.get("format", FORMAT_NAME) != FORMAT_NAME:
        raise r.fail("format", doc["format"], f"must be {FORMAT_NAME!r}")
    if doc.get("version", FORMAT_VERSION) != FORMAT_VERSION:
        raise r.fail("version", doc["version"], f"must be {FORMAT_VERSION}")

    t = r.table(r.required(doc, "terrain", "(top level)"), "terrain", {"origin_xy_m", "cell_m", "height_m"})
    origin, cell = r.grid_geometry(t, "terrain")
    heights = r.array(r.required(t, "height_m", "terrain"), "terrain.height_m", np.float64)
    try:
        terrain = TerrainGrid(origin, cell, heights)
    except SceneError as err:
        raise SceneError(f"{path}: {err}") from err

    cover = None
    if "cover" in doc:
        c = r.table(doc["cover"], "cover", {"origin_xy_m", "cell_m", "material"})
        c_origin, c_cell = r.grid_geometry(c, "cover")
        raw = r.required(c, "material", "cover")
        if isinstance(raw, str):
            values = r.array(raw, "cover.material", np.int64)
            bad = ~np.isin(values, [MATERIAL_ID[n] for n in COVER_MATERIAL_NAMES])
            if bad.any():
                i, j = np.argwhere(bad)[0]
                raise r.fail(
                    f"cover.material[{i}][{j}]",
                    int(values[i, j]),
                    "allowed material numbers: " + ", ".join(f"{MATERIAL_ID[n]} ({n})" for n in COVER_MATERIAL_NAMES),
                )
        else:
            names = r.array(raw, "cover.material", str)
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
    for k, p in enumerate(raw_polygons):
        key = f"polygons[{k}]"
        p = r.table(p, key, {"name", "material", "vertices_xy_m"})
        material = r.name_of(p, "material", key, COVER_MATERIAL_NAMES)
        if material is None:
            raise SceneError(f"{path}: {key}.material is missing")
        v = r.required(p, "vertices_xy_m", key)
        try:
            vertices = np.array(v, float)
        except (TypeError, ValueError) as err:
            raise r.fail(f"{key}.vertices_xy_m", v, "must be a list of [x, y] pairs") from err
        if vertices.ndim != 2 or vertices.shape[1] != 2 or len(vertices) < 3 or not np.all(np.isfinite(vertices)):
            raise r.fail(f"{key}.vertices_xy_m", v, "must be 3 or more finite [x, y] pairs")
        polygons.append((vertices, material))

    pond = wet = None
    if "water" in doc:
        w = r.table(doc["water"], "water", {"origin_xy_m", "cell_m", "pond_depth_m", "soil_wetness"})
        w_origin, w_cell = r.grid_geometry(w, "water")
        if "pond_depth_m" in w:
            pond = CellGrid(w_origin, w_cell, r.array(w["pond_depth_m"], "water.pond_depth_m", np.float64))
        if "soil_wetness" in w:
            wet = CellGrid(w_origin, w_cell, r.array(w["soil_wetness"], "water.soil_wetness", np.float64))

    raster_cell = r.number(doc, "polygon_raster_cell_m", "(top level)", default=0.25, low=0.0, low_open=True)
    try:
        builder = SceneBuilder(terrain, cover, polygons, pond, wet, raster_cell)
    except SceneError as err:
        raise SceneError(f"{path}: {err}") from err

    objects = doc.get("objects", [])
    if not isinstance(objects, list):
        raise r.fail("objects", objects, "must be a list of objects")
    for k, obj in enumerate(objects):
        _add_object(r, builder, obj, f"objects[{k}]")
    return builder.build()


def _add_object(r: _Reader, b: SceneBuilder, obj: Any, key: str) -> None:
    if not isinstance(obj, dict):
        raise r.fail(key, obj, "must be a JSON object")
    kind = obj.get("type")
    if kind not in _OBJECT_KEYS:
        raise r.fail(f"{key}.type", kind, f"allowed: {', '.join(_OBJECT_KEYS)}")
    obj = r.table(obj, key, _OBJECT_KEYS[kind])
    name = obj.get("name")
    if name is not None and not isinstance(name, str):
        raise r.fail(f"{key}.name", name, "must be a string")
    material = r.name_of(obj, "material", key, MATERIAL_NAMES)
    yaw = math.radians(r.number(obj, "yaw_deg", key, default=0.0))
    cls = ""  # the class of a mesh, box, cylinder or crop field (trees and the rest have their own)
    if kind in ("mesh", "box", "cylinder", "crop_field"):
        named = r.name_of(obj, "class", key, CLASS_NAMES)
        if named is None:
            raise SceneError(f"{r.path}: {key}.class is missing; allowed: {', '.join(CLASS_NAMES)}")
        cls = named
    try:
        if kind == "mesh":
            _add_mesh(r, b, obj, key, cls, material, yaw, name)
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
            )
        elif kind == "cylinder":
            segments = obj.get("segments", 16)
            if isinstance(segments, bool) or not isinstance(segments, int) or segments < 3:
                raise r.fail(f"{key}.segments", segments, "must be an integer >= 3")
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
            state = None
            if "cell_state" in obj:
                state = r.array(obj["cell_state"], f"{key}.cell_state", np.int64)
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


def _add_mesh(r: _Reader, b: SceneBuilder, obj: dict, key: str, cls: str, material, yaw: float, name) -> None:
    import open3d as o3d

    rel = r.required(obj, "path", key)
    if not isinstance(rel, str):
        raise r.fail(f"{key}.path", rel, "must be a path relative to the scene file")
    file = r.base_dir / rel
    if not file.is_file():
        raise SceneError(f"{r.path}: {key}.path = {rel!r}: mesh file {file} does not exist")
    mesh = o3d.io.read_triangle_mesh(file)
    vertices = np.asarray(mesh.vertices, float)
    triangles = np.asarray(mesh.triangles, np.int64)
    if len(triangles) == 0:
        raise SceneError(f"{r.path}: {key}.path = {rel!r}: {file} has no triangles (formats: ply, obj, stl, off, gltf)")
    scale = r.number(obj, "scale", key, default=1.0, low=0.0, low_open=True)
    base_xy = r.vector(obj, "base_xy_m", key, 2)
    base_z = r.optional_number(obj, "base_z_m", key)
    z0 = float(b.terrain.height_at(base_xy[0], base_xy[1])) if base_z is None else base_z
    c, s = math.cos(yaw), math.sin(yaw)
    rot = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    world = (scale * vertices) @ rot.T + np.array([base_xy[0], base_xy[1], z0])
    closed = obj.get("closed", False)
    if not isinstance(closed, bool):
        raise r.fail(f"{key}.closed", closed, "must be true or false")
    b.add_mesh(world, triangles, cls, material, closed, name)
