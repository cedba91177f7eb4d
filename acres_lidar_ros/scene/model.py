"""The scene the tracer sees: triangle meshes with labels, crop patches and the ground maps.

World frame: x east, y north, z up, metres. ``Scene`` is immutable; build one with
``SceneBuilder`` (the scene file loader and the built-in farm both do).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np
from numpy.typing import ArrayLike

from acres_lidar_ros.config.materials import (
    CLASS_ID,
    CLASS_NAMES,
    COVER_MATERIAL_NAMES,
    IS_FOLIAGE_CLASS,
    MATERIAL_ID,
    MATERIAL_NAMES,
    MATERIAL_OF_CLASS,
)
from acres_lidar_ros.errors import SceneError
from acres_lidar_ros.scene import shapes
from acres_lidar_ros.scene.grids import NO_POLYGON, CellGrid, TerrainGrid, rasterise_polygons

# Spec "CPU Path": tree crown and shrub proxies, crop boxes.
CROWN_RADIUS_PER_HEIGHT = 0.33
CROWN_CENTRE_PER_HEIGHT = 0.62
SHRUB_RADIUS_PER_HEIGHT = 0.5
SHRUB_CENTRE_PER_HEIGHT = 0.5
CROP_PATCH_SIZE_M = np.array([1.52, 1.0])  # along the patch's local x and y
CROP_CELLS = 4  # cells along each side of a patch
CROP_STANDING, CROP_CRUSHED, CROP_HARVESTED = 0, 1, 2
CROP_CELL_HEIGHT_FRACTION = np.array([1.0, 0.12, 0.03])  # of h_max, by cell state
CROP_CLASS_NAMES = ("corn", "soybean", "potato")
# Spec "Ground", rule 4: depth of pond water that makes non-soil ground fully wet.
WETNESS_DEPTH_M = 0.002

_GRASS = MATERIAL_ID["grass"]
_SOIL = MATERIAL_ID["soil"]
_WATER = MATERIAL_ID["water"]
COVER_MATERIAL_IDS = np.array([MATERIAL_ID[n] for n in COVER_MATERIAL_NAMES], np.uint8)


def crop_box_height_m(crop_height_m: float, growth: float) -> float:
    """``h_max = h_crop (0.03 + 0.97 G)`` of the spec, m."""
    return float(crop_height_m) * (0.03 + 0.97 * float(growth))


def class_number(name: str, what: str = "class") -> int:
    """Class number of ``name``; ``SceneError`` naming ``what`` and the allowed names otherwise."""
    if name not in CLASS_ID:
        raise SceneError(f"{what} = {name!r}: unknown class; allowed: {', '.join(CLASS_NAMES)}")
    return CLASS_ID[name]


def material_number(name: str, what: str = "material", allowed: tuple[str, ...] = MATERIAL_NAMES) -> int:
    """Material number of ``name``; ``SceneError`` naming ``what`` and the allowed names otherwise."""
    if name not in allowed:
        raise SceneError(f"{what} = {name!r}: unknown material; allowed: {', '.join(allowed)}")
    return MATERIAL_ID[name]


@dataclass(frozen=True)
class CropPatches:
    """Crop boxes of the spec: ``p`` patches of 1.52 m x 1.0 m with 4 x 4 cells.

    Attributes
    ----------
    centre_xy_m : (p, 2) float64
        World (x, y) of each patch centre.
    yaw_rad : (p,) float64
        Rotation of the patch's local x axis (the 1.52 m side) from world x, counter-clockwise.
    cell_base_z_m : (p, 4, 4) float64
        World height of the bottom of cell ``[iy, ix]`` (local y index, local x index): the
        ground at the cell centre, m. A step point below it is under the ground, not in the crop.
    cell_top_z_m : (p, 4, 4) float64
        World height of the top of cell ``[iy, ix]``, m.
    class_id, material_id : (p,) uint8
    object_id : (p,) int32
    """

    centre_xy_m: np.ndarray
    yaw_rad: np.ndarray
    cell_base_z_m: np.ndarray
    cell_top_z_m: np.ndarray
    class_id: np.ndarray
    material_id: np.ndarray
    object_id: np.ndarray

    @classmethod
    def empty(cls) -> CropPatches:
        return cls(
            np.zeros((0, 2)),
            np.zeros(0),
            np.zeros((0, CROP_CELLS, CROP_CELLS)),
            np.zeros((0, CROP_CELLS, CROP_CELLS)),
            np.zeros(0, np.uint8),
            np.zeros(0, np.uint8),
            np.zeros(0, np.int32),
        )

    def __len__(self) -> int:
        return len(self.yaw_rad)

    def box_mesh(self, shrink_m: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """Boxes of the patches: ``(vertices_m (8 p, 3) float64, triangles (12 p, 3) int64)``.

        Triangle ``12 k ... 12 k + 11`` belong to patch ``k``. ``shrink_m`` moves the four side
        faces inwards, so neighbouring patches share no face.
        """
        p = len(self)
        size = np.array([CROP_PATCH_SIZE_M[0] - 2 * shrink_m, CROP_PATCH_SIZE_M[1] - 2 * shrink_m, 1.0])
        unit_v, unit_t = shapes.box(size)
        top = self.cell_top_z_m.reshape(p, -1).max(axis=1)
        base = self.cell_base_z_m.reshape(p, -1).min(axis=1)
        c, s = np.cos(self.yaw_rad), np.sin(self.yaw_rad)
        x = self.centre_xy_m[:, None, 0] + c[:, None] * unit_v[:, 0] - s[:, None] * unit_v[:, 1]
        y = self.centre_xy_m[:, None, 1] + s[:, None] * unit_v[:, 0] + c[:, None] * unit_v[:, 1]
        z = base[:, None] + unit_v[:, 2] * (top - base)[:, None]
        vertices = np.stack([x, y, z], axis=-1).reshape(-1, 3)
        triangles = (unit_t[None] + 8 * np.arange(p)[:, None, None]).reshape(-1, 3)
        return vertices, triangles


@dataclass(frozen=True)
class Scene:
    """Static scene: one triangle soup with per-triangle labels, crop patches and ground maps.

    Attributes
    ----------
    vertices_m : (v, 3) float64
        World vertices.
    triangles : (t, 3) int64
        Vertex indices.
    triangle_class : (t,) uint8
        Class number of each triangle (``materials.CLASS_NAMES``).
    triangle_material : (t,) int16
        Material number of each triangle; -1 for ground, resolved per hit by the ground rules.
    triangle_object : (t,) int32
        Object id (instance label) of each triangle; the terrain is object 0.
    triangle_closed : (t,) bool
        True for triangles of a closed foliage proxy (crown, shrub, ground cover): a ray that
        leaves the proxy through it (direction along its outward normal) does not hit it.
    terrain : TerrainGrid
    cover : CellGrid of uint8 material numbers (the 4 m cover grid), grass outside.
    polygons : tuple of (vertices_xy_m (p, 2) float64, material number)
        Surface polygons (roads, yards, grass lanes, verges) in painting order.
    polygon_raster : CellGrid of uint8
        The polygons rasterised (``NO_POLYGON`` where none).
    pond_depth : CellGrid of float64
        Water depth of the water model, m (0 outside).
    soil_wetness : CellGrid of float64
        Wetness of soil in [0, 1] of the water model (0 outside).
    crops : CropPatches
    object_names : tuple of str
        Name of object id ``i``.
    """

    vertices_m: np.ndarray
    triangles: np.ndarray
    triangle_class: np.ndarray
    triangle_material: np.ndarray
    triangle_object: np.ndarray
    triangle_closed: np.ndarray
    terrain: TerrainGrid
    cover: CellGrid
    polygons: tuple
    polygon_raster: CellGrid
    pond_depth: CellGrid
    soil_wetness: CellGrid
    crops: CropPatches
    object_names: tuple[str, ...]

    # --- geometry -------------------------------------------------------------------------
    @property
    def triangle_count(self) -> int:
        return int(len(self.triangles))

    @property
    def extent_xy_m(self) -> np.ndarray:
        """(2, 2) float64 ``[[x_min, y_min], [x_max, y_max]]`` of the terrain."""
        return self.terrain.extent_xy_m

    def height_at(self, x_m: ArrayLike, y_m: ArrayLike) -> np.ndarray:
        """Ground height at world ``(x, y)``, m (the traced terrain surface; see ``TerrainGrid``)."""
        return self.terrain.height_at(x_m, y_m)

    # --- ground rules (spec "Ground") -------------------------------------------------------
    def pond_depth_at(self, x_m: np.ndarray, y_m: np.ndarray) -> np.ndarray:
        """Water depth ``d_pond`` of the water model at ``(x, y)``, m (float64)."""
        return self.pond_depth.value_at(x_m, y_m)

    def ground_properties(
        self, x_m: np.ndarray, y_m: np.ndarray, pond_threshold_m: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Material, wetness and pond depth of ground at world ``(x, y)`` by the 4 ground rules.

        1. The 4 m cover grid gives grass, asphalt, concrete, gravel or soil.
        2. A surface polygon gives its material where it covers the point; without a polygon
           the material stays grass (grass cover) or becomes soil (any other cover).
        3. More than ``pond_threshold_m`` of water makes the material water.
        4. Soil takes the wetness of the water model; other ground
           ``w = clamp(d_pond / 0.002 m, 0, 1)``.

        Parameters
        ----------
        x_m, y_m : array_like float64, broadcastable
        pond_threshold_m : float
            ``lidar.pond_threshold_m``.

        Returns
        -------
        material_id : uint8, wetness : float64, pond_depth_m : float64 — of the broadcast shape.
        """
        x_m, y_m = np.broadcast_arrays(np.asarray(x_m, float), np.asarray(y_m, float))
        shape = x_m.shape
        x_m, y_m = x_m.ravel(), y_m.ravel()
        cover = self.cover.value_at(x_m, y_m)
        polygon = self.polygon_raster.value_at(x_m, y_m)
        material = np.where(polygon != NO_POLYGON, polygon, np.where(cover == _GRASS, _GRASS, _SOIL))
        water_index = self.pond_depth.flat_index(x_m, y_m)
        depth_m = self.pond_depth.values_at_index(water_index)
        if not self.soil_wetness.same_cells(self.pond_depth):
            water_index = self.soil_wetness.flat_index(x_m, y_m)
        soil_w = self.soil_wetness.values_at_index(water_index)
        material[depth_m > pond_threshold_m] = _WATER
        wetness = np.where(material == _SOIL, soil_w, depth_m * (1.0 / WETNESS_DEPTH_M))
        np.clip(wetness, 0.0, 1.0, out=wetness)
        return material.astype(np.uint8).reshape(shape), wetness.reshape(shape), depth_m.reshape(shape)

    def ground_material_at(self, x_m: np.ndarray, y_m: np.ndarray, pond_threshold_m: float) -> np.ndarray:
        """Material number (uint8) of ground at ``(x, y)`` (see ``ground_properties``)."""
        return self.ground_properties(x_m, y_m, pond_threshold_m)[0]

    def wetness_at(self, x_m: np.ndarray, y_m: np.ndarray, pond_threshold_m: float) -> np.ndarray:
        """Wetness ``w`` (float64 in [0, 1]) of ground at ``(x, y)`` (see ``ground_properties``)."""
        return self.ground_properties(x_m, y_m, pond_threshold_m)[1]

    # --- bookkeeping ----------------------------------------------------------------------
    def classes_present(self) -> set[str]:
        """Names of the classes of the triangles and crop patches."""
        ids = set(np.unique(self.triangle_class).tolist()) | set(np.unique(self.crops.class_id).tolist())
        return {CLASS_NAMES[i] for i in ids}

    def digest(self) -> str:
        """SHA-256 hex digest of every array of the scene (equal digests: equal scenes)."""
        h = hashlib.sha256()
        arrays = [
            self.vertices_m,
            self.triangles,
            self.triangle_class,
            self.triangle_material,
            self.triangle_object,
            self.triangle_closed,
            self.terrain.origin_xy_m,
            self.terrain.height_m,
            self.cover.origin_xy_m,
            self.cover.values,
            self.polygon_raster.origin_xy_m,
            self.polygon_raster.values,
            self.pond_depth.origin_xy_m,
            self.pond_depth.values,
            self.soil_wetness.origin_xy_m,
            self.soil_wetness.values,
            self.crops.centre_xy_m,
            self.crops.yaw_rad,
            self.crops.cell_base_z_m,
            self.crops.cell_top_z_m,
            self.crops.class_id,
            self.crops.material_id,
            self.crops.object_id,
        ]
        for a in arrays:
            a = np.ascontiguousarray(a)
            h.update(str((a.dtype.str, a.shape)).encode())
            h.update(a.tobytes())
        h.update(
            repr(
                (
                    self.terrain.cell_m,
                    self.cover.cell_m,
                    self.polygon_raster.cell_m,
                    self.pond_depth.cell_m,
                    self.soil_wetness.cell_m,
                    self.object_names,
                )
            ).encode()
        )
        for vertices, material in self.polygons:
            h.update(np.ascontiguousarray(vertices, np.float64).tobytes() + bytes([material]))
        return h.hexdigest()


@dataclass
class _Part:
    vertices_m: np.ndarray
    triangles: np.ndarray
    class_id: int
    material_id: int
    object_id: int
    closed: bool


MaterialArg: TypeAlias = str | int | None
"""A material by name or number; None: the class's own material."""


class SceneBuilder:
    """Collects meshes, proxies and crop fields over a terrain and builds a ``Scene``.

    Parameters
    ----------
    terrain : TerrainGrid
    cover : CellGrid of uint8 material numbers (cover materials only), or None for all grass.
    polygons : sequence of (vertices_xy_m (p, 2), material name or number)
    pond_depth, soil_wetness : CellGrid of float64, or None for none.
    polygon_raster_cell_m : float
        Cell of the polygon raster, m.

    Each ``add_*`` returns the object id of the new object (1, 2, ...; the terrain is 0).
    Shapes stand on the ground at their base ``(x, y)`` unless ``base_z_m`` is given.
    """

    def __init__(
        self,
        terrain: TerrainGrid,
        cover: CellGrid | None = None,
        polygons: Iterable[tuple[ArrayLike, str | int]] = (),
        pond_depth: CellGrid | None = None,
        soil_wetness: CellGrid | None = None,
        polygon_raster_cell_m: float = 0.25,
    ) -> None:
        self.terrain = terrain
        if cover is None:
            cover = CellGrid(terrain.origin_xy_m, 4.0, np.full((1, 1), _GRASS, np.uint8), fill=_GRASS)
        cover_values = np.asarray(cover.values)
        bad = ~np.isin(cover_values, COVER_MATERIAL_IDS)
        if bad.any():
            i, j = np.argwhere(bad)[0]
            raise SceneError(
                f"cover[{i}][{j}] = {int(cover_values[i, j])!r}: not a cover material number; allowed: "
                + ", ".join(f"{MATERIAL_ID[n]} ({n})" for n in COVER_MATERIAL_NAMES)
            )
        self.cover = CellGrid(cover.origin_xy_m, cover.cell_m, cover_values.astype(np.uint8), fill=_GRASS)
        self.polygons: list[tuple[np.ndarray, int]] = []
        for k, (vertices, material) in enumerate(polygons):
            self.add_polygon(vertices, material, what=f"polygons[{k}]")
        empty = CellGrid(terrain.origin_xy_m, 1.0, np.zeros((1, 1)), fill=0.0)
        self.pond_depth = empty if pond_depth is None else self._float_grid(pond_depth, "pond_depth_m")
        self.soil_wetness = empty if soil_wetness is None else self._float_grid(soil_wetness, "soil_wetness", 1.0)
        if not (np.isfinite(polygon_raster_cell_m) and polygon_raster_cell_m > 0):
            raise SceneError(f"polygon_raster_cell_m = {polygon_raster_cell_m!r}: must be a number > 0")
        self.polygon_raster_cell_m = float(polygon_raster_cell_m)
        tv, tt = terrain.mesh()
        self._parts: list[_Part] = [_Part(tv, tt, CLASS_ID["ground"], -1, 0, False)]
        self._names: list[str] = ["terrain"]
        self._crops: list[dict] = []

    @staticmethod
    def _float_grid(grid: CellGrid, what: str, upper: float = np.inf) -> CellGrid:
        values = np.asarray(grid.values, float)
        good = np.isfinite(values) & (values >= 0) & (values <= upper)
        if not good.all():
            i, j = np.argwhere(~good)[0]
            allowed = "a finite number >= 0" if upper == np.inf else f"a number from 0 to {upper}"
            raise SceneError(f"{what}[{i}][{j}] = {float(values[i, j])!r}: must be {allowed}")
        return CellGrid(grid.origin_xy_m, grid.cell_m, values, fill=0.0)

    # --- helpers --------------------------------------------------------------------------
    def _new_object(self, name: str | None, kind: str) -> int:
        oid = len(self._names)
        self._names.append(name if name else f"{kind}_{oid}")
        return oid

    def _material(self, class_id: int, material: str | int | None) -> int:
        if material is None:
            return int(MATERIAL_OF_CLASS[class_id])
        if isinstance(material, str):
            return material_number(material)
        if not 0 <= int(material) < len(MATERIAL_NAMES):
            raise SceneError(f"material = {material!r}: must be a material number 0 to {len(MATERIAL_NAMES) - 1}")
        return int(material)

    def _base(self, base_xy_m, base_z_m) -> np.ndarray:
        x, y = (float(v) for v in base_xy_m)
        z = float(self.terrain.height_at(x, y)) if base_z_m is None else float(base_z_m)
        return np.array([x, y, z])

    def _add(self, vertices, triangles, class_id, material, oid, closed=False, yaw_rad=0.0, base=None):
        v = np.asarray(vertices, float) @ shapes.rotation_z(yaw_rad).T
        if base is not None:
            v = v + base
        self._parts.append(_Part(v, np.asarray(triangles, np.int64), class_id, material, oid, closed))

    # --- public API -----------------------------------------------------------------------
    def add_polygon(self, vertices_xy_m: ArrayLike, material: str | int, what: str = "polygon") -> None:
        """Add a surface polygon (painted over earlier ones) of a cover material."""
        v = np.asarray(vertices_xy_m, float)
        if v.ndim != 2 or v.shape[1] != 2 or len(v) < 3 or not np.all(np.isfinite(v)):
            raise SceneError(f"{what}.vertices_xy_m has shape {v.shape}: must be 3 or more finite [x, y] pairs")
        mid = (
            material_number(material, f"{what}.material", COVER_MATERIAL_NAMES)
            if isinstance(material, str)
            else int(material)
        )
        if mid not in COVER_MATERIAL_IDS:
            raise SceneError(f"{what}.material = {material!r}: allowed: {', '.join(COVER_MATERIAL_NAMES)}")
        self.polygons.append((v, mid))

    def add_mesh(
        self,
        vertices_m: ArrayLike,
        triangles: ArrayLike,
        class_name: str,
        material: MaterialArg = None,
        closed: bool = False,
        name: str | None = None,
    ) -> int:
        """Add a triangle mesh given in world coordinates.

        ``closed`` marks a closed, outward-wound foliage mesh whose exits are not hits.
        """
        cid = class_number(class_name)
        v = np.asarray(vertices_m, float)
        t = np.asarray(triangles)
        if v.ndim != 2 or v.shape[1] != 3 or not np.all(np.isfinite(v)):
            raise SceneError(
                f"mesh {name!r}: vertices have shape {v.shape} or non-finite values: must be (v, 3) finite"
            )
        if t.ndim != 2 or t.shape[1] != 3 or len(t) == 0 or t.min() < 0 or t.max() >= len(v):
            raise SceneError(
                f"mesh {name!r}: triangles have shape {t.shape}: must be (t >= 1, 3) indices below {len(v)}"
            )
        oid = self._new_object(name, class_name)
        self._add(v, t, cid, self._material(cid, material), oid, closed and bool(IS_FOLIAGE_CLASS[cid]))
        return oid

    def add_box(
        self,
        base_xy_m: ArrayLike,
        size_m: ArrayLike,
        class_name: str,
        yaw_rad: float = 0.0,
        material: MaterialArg = None,
        roof_height_m: float = 0.0,
        base_z_m: float | None = None,
        name: str | None = None,
    ) -> int:
        """Box of ``size_m`` (lx, ly, lz) standing on its base, with an optional gable roof (ridge along x)."""
        cid = class_number(class_name)
        size = np.asarray(size_m, float)
        if size.shape != (3,) or not np.all(size > 0):
            raise SceneError(f"box {name!r}: size_m = {size.tolist()!r}: must be 3 numbers > 0")
        base = self._base(base_xy_m, base_z_m)
        oid = self._new_object(name, class_name)
        mat = self._material(cid, material)
        v, t = shapes.box(size)
        self._add(v, t, cid, mat, oid, bool(IS_FOLIAGE_CLASS[cid]), yaw_rad, base)
        if roof_height_m > 0:
            v, t = shapes.gable_roof(size[:2], roof_height_m)
            self._add(v + [0, 0, size[2]], t, cid, mat, oid, False, yaw_rad, base)
        return oid

    def add_cylinder(
        self,
        base_xy_m: ArrayLike,
        radius_m: float,
        height_m: float,
        class_name: str,
        material: MaterialArg = None,
        segments: int = 16,
        cone_height_m: float = 0.0,
        base_z_m: float | None = None,
        name: str | None = None,
    ) -> int:
        """Upright closed cylinder with an optional cone roof."""
        cid = class_number(class_name)
        if not (radius_m > 0 and height_m > 0 and cone_height_m >= 0 and segments >= 3):
            raise SceneError(
                f"cylinder {name!r}: radius_m = {radius_m!r}, height_m = {height_m!r}, cone_height_m = "
                f"{cone_height_m!r}, segments = {segments!r}: need radius, height > 0, cone >= 0, segments >= 3"
            )
        oid = self._new_object(name, class_name)
        v, t = shapes.cylinder(radius_m, height_m, int(segments), cone_height_m)
        self._add(
            v,
            t,
            cid,
            self._material(cid, material),
            oid,
            bool(IS_FOLIAGE_CLASS[cid]),
            0.0,
            self._base(base_xy_m, base_z_m),
        )
        return oid

    def add_tree(
        self,
        base_xy_m: ArrayLike,
        height_m: float,
        trunk_radius_m: float | None = None,
        crown_material: MaterialArg = None,
        trunk_material: MaterialArg = None,
        base_z_m: float | None = None,
        name: str | None = None,
    ) -> int:
        """Tree of height H: trunk cylinder (tree_trunk) to 0.62 H, crown sphere (tree) r 0.33 H at 0.62 H."""
        if not height_m > 0:
            raise SceneError(f"tree {name!r}: height_m = {height_m!r}: must be > 0")
        r_trunk = 0.025 * height_m if trunk_radius_m is None else float(trunk_radius_m)
        if not 0 < r_trunk < CROWN_RADIUS_PER_HEIGHT * height_m:
            raise SceneError(f"tree {name!r}: trunk_radius_m = {r_trunk!r}: must be > 0 and below the crown radius")
        base = self._base(base_xy_m, base_z_m)
        oid = self._new_object(name, "tree")
        trunk, crown = CLASS_ID["tree_trunk"], CLASS_ID["tree"]
        v, t = shapes.cylinder(r_trunk, CROWN_CENTRE_PER_HEIGHT * height_m, 8)
        self._add(v, t, trunk, self._material(trunk, trunk_material), oid, False, 0.0, base)
        v, t = shapes.sphere(CROWN_RADIUS_PER_HEIGHT * height_m, 2)
        self._add(
            v + [0, 0, CROWN_CENTRE_PER_HEIGHT * height_m],
            t,
            crown,
            self._material(crown, crown_material),
            oid,
            True,
            0.0,
            base,
        )
        return oid

    def add_shrub(
        self,
        base_xy_m: ArrayLike,
        height_m: float,
        material: MaterialArg = None,
        base_z_m: float | None = None,
        name: str | None = None,
    ) -> int:
        """Shrub of height H: sphere proxy of radius 0.5 H at 0.5 H (class shrub)."""
        if not height_m > 0:
            raise SceneError(f"shrub {name!r}: height_m = {height_m!r}: must be > 0")
        cid = CLASS_ID["shrub"]
        oid = self._new_object(name, "shrub")
        v, t = shapes.sphere(SHRUB_RADIUS_PER_HEIGHT * height_m, 1)
        self._add(
            v + [0, 0, SHRUB_CENTRE_PER_HEIGHT * height_m],
            t,
            cid,
            self._material(cid, material),
            oid,
            True,
            0.0,
            self._base(base_xy_m, base_z_m),
        )
        return oid

    def add_mud_clod(
        self,
        base_xy_m: ArrayLike,
        size_m: ArrayLike,
        yaw_rad: float = 0.0,
        material: MaterialArg = None,
        name: str | None = None,
    ) -> int:
        """Mud clod (class mud_clod, solid, wetness 1): half-buried ellipsoid of extent ``size_m``.

        ``size_m`` (3,) = (length, width, height above the ground).
        """
        size = np.asarray(size_m, float)
        if size.shape != (3,) or not np.all(size > 0):
            raise SceneError(f"mud_clod {name!r}: size_m = {size.tolist()!r}: must be 3 numbers > 0")
        cid = CLASS_ID["mud_clod"]
        oid = self._new_object(name, "mud_clod")
        v, t = shapes.ellipsoid(np.array([size[0] / 2, size[1] / 2, size[2]]), 1)
        self._add(v, t, cid, self._material(cid, material), oid, False, yaw_rad, self._base(base_xy_m, None))
        return oid

    def add_ground_cover(
        self,
        base_xy_m: ArrayLike,
        size_m: ArrayLike,
        yaw_rad: float = 0.0,
        material: MaterialArg = None,
        name: str | None = None,
    ) -> int:
        """Low ground cover (class ground_cover, foliage): half-buried ellipsoid dome of extent ``size_m``."""
        size = np.asarray(size_m, float)
        if size.shape != (3,) or not np.all(size > 0):
            raise SceneError(f"ground_cover {name!r}: size_m = {size.tolist()!r}: must be 3 numbers > 0")
        cid = CLASS_ID["ground_cover"]
        oid = self._new_object(name, "ground_cover")
        v, t = shapes.ellipsoid(np.array([size[0] / 2, size[1] / 2, size[2]]), 1)
        self._add(v, t, cid, self._material(cid, material), oid, True, yaw_rad, self._base(base_xy_m, None))
        return oid

    def add_crop_field(
        self,
        corner_xy_m: ArrayLike,
        patches_xy: tuple[int, int],
        class_name: str,
        crop_height_m: float,
        growth: float,
        yaw_rad: float = 0.0,
        cell_state: ArrayLike | None = None,
        material: MaterialArg = None,
        name: str | None = None,
    ) -> int:
        """Field of ``nx x ny`` crop patches from ``corner_xy_m`` along the rotated local x and y.

        Parameters
        ----------
        corner_xy_m : (2,) world corner of patch [0, 0]
        patches_xy : (nx, ny) patches along local x (1.52 m each) and y (1.0 m each)
        class_name : corn, soybean or potato
        crop_height_m, growth : ``h_crop`` (m) and ``G`` in [0, 1]
        cell_state : (4 ny, 4 nx) int array or None
            0 standing, 1 crushed (12 %), 2 harvested (3 %) for each cell; None all standing.
        """
        if class_name not in CROP_CLASS_NAMES:
            raise SceneError(f"crop_field {name!r}: class = {class_name!r}: allowed: {', '.join(CROP_CLASS_NAMES)}")
        nx, ny = (int(v) for v in patches_xy)
        if nx < 1 or ny < 1:
            raise SceneError(f"crop_field {name!r}: patches = {[nx, ny]!r}: must be 2 integers >= 1")
        if not (crop_height_m > 0 and 0 <= growth <= 1):
            raise SceneError(
                f"crop_field {name!r}: crop_height_m = {crop_height_m!r}, growth = {growth!r}: need height > 0, growth 0 to 1"
            )
        state = np.zeros((CROP_CELLS * ny, CROP_CELLS * nx), np.int64) if cell_state is None else np.asarray(cell_state)
        if state.shape != (CROP_CELLS * ny, CROP_CELLS * nx) or not np.isin(state, [0, 1, 2]).all():
            raise SceneError(
                f"crop_field {name!r}: cell_state has shape {state.shape}: must be ({CROP_CELLS * ny}, "
                f"{CROP_CELLS * nx}) of 0 (standing), 1 (crushed), 2 (harvested)"
            )
        cid = class_number(class_name)
        oid = self._new_object(name, class_name)
        self._crops.append(
            dict(
                corner=np.asarray(corner_xy_m, float),
                n=(nx, ny),
                yaw=float(yaw_rad),
                h_max=crop_box_height_m(crop_height_m, growth),
                state=state.astype(np.int64),
                class_id=cid,
                material=self._material(cid, material),
                oid=oid,
            )
        )
        return oid

    def _build_crops(self) -> CropPatches:
        if not self._crops:
            return CropPatches.empty()
        parts = []
        for f in self._crops:
            nx, ny = f["n"]
            c, s = np.cos(f["yaw"]), np.sin(f["yaw"])
            ix, iy = (index.ravel() for index in np.meshgrid(np.arange(nx), np.arange(ny)))
            local = np.stack([(ix + 0.5) * CROP_PATCH_SIZE_M[0], (iy + 0.5) * CROP_PATCH_SIZE_M[1]], 1)
            centre = f["corner"] + local @ np.array([[c, s], [-s, c]])
            # Cell centres in the patch frame: x (k + 0.5) 0.38 - 0.76, y (k + 0.5) 0.25 - 0.5.
            cell = (np.arange(CROP_CELLS) + 0.5) / CROP_CELLS - 0.5
            cx, cy = np.meshgrid(cell * CROP_PATCH_SIZE_M[0], cell * CROP_PATCH_SIZE_M[1])
            wx = centre[:, 0, None, None] + c * cx - s * cy
            wy = centre[:, 1, None, None] + s * cx + c * cy
            state = (
                f["state"]
                .reshape(ny, CROP_CELLS, nx, CROP_CELLS)
                .transpose(0, 2, 1, 3)
                .reshape(-1, CROP_CELLS, CROP_CELLS)
            )
            base = self.terrain.height_at(wx, wy)
            top = base + f["h_max"] * CROP_CELL_HEIGHT_FRACTION[state]
            p = len(centre)
            parts.append(
                (
                    centre,
                    np.full(p, f["yaw"]),
                    base,
                    top,
                    np.full(p, f["class_id"], np.uint8),
                    np.full(p, f["material"], np.uint8),
                    np.full(p, f["oid"], np.int32),
                )
            )
        return CropPatches(*(np.concatenate(arrays) for arrays in zip(*parts)))

    def build(self) -> Scene:
        """The finished, immutable ``Scene``."""
        offsets = np.cumsum([0] + [len(p.vertices_m) for p in self._parts])
        counts = [len(p.triangles) for p in self._parts]
        vertices = np.concatenate([p.vertices_m for p in self._parts])
        triangles = np.concatenate([p.triangles + o for p, o in zip(self._parts, offsets)])
        scene = Scene(
            vertices_m=vertices,
            triangles=triangles,
            triangle_class=np.repeat([p.class_id for p in self._parts], counts).astype(np.uint8),
            triangle_material=np.repeat([p.material_id for p in self._parts], counts).astype(np.int16),
            triangle_object=np.repeat([p.object_id for p in self._parts], counts).astype(np.int32),
            triangle_closed=np.repeat([p.closed for p in self._parts], counts).astype(bool),
            terrain=self.terrain,
            cover=self.cover,
            polygons=tuple(self.polygons),
            polygon_raster=rasterise_polygons(self.polygons, self.polygon_raster_cell_m),
            pond_depth=self.pond_depth,
            soil_wetness=self.soil_wetness,
            crops=self._build_crops(),
            object_names=tuple(self._names),
        )
        for a in (
            scene.vertices_m,
            scene.triangles,
            scene.triangle_class,
            scene.triangle_material,
            scene.triangle_object,
            scene.triangle_closed,
        ):
            a.setflags(write=False)
        return scene
