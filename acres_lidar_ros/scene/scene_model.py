"""The scene the tracer sees: triangle meshes with labels, crop patches and the ground maps.

World frame: x east, y north, z up, metres. ``Scene`` is immutable; build one with
``SceneBuilder`` (the scene file loader and the built-in farm both do).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from acres_lidar_ros.config.material_table import (
    CLASS_ID,
    CLASS_NAMES,
    COVER_MATERIAL_NAMES,
    MATERIAL_ID,
    MATERIAL_NAMES,
)
from acres_lidar_ros.errors import SceneError
from acres_lidar_ros.scene import shapes
from acres_lidar_ros.scene.grids import NO_POLYGON, CellGrid, TerrainGrid

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
    instance : (p,) uint32
        Instance label of each patch: the id of its crop field (``scene.instances``).
    """

    centre_xy_m: np.ndarray
    yaw_rad: np.ndarray
    cell_base_z_m: np.ndarray
    cell_top_z_m: np.ndarray
    class_id: np.ndarray
    material_id: np.ndarray
    instance: np.ndarray

    @classmethod
    def empty(cls) -> CropPatches:
        return cls(
            np.zeros((0, 2)),
            np.zeros(0),
            np.zeros((0, CROP_CELLS, CROP_CELLS)),
            np.zeros((0, CROP_CELLS, CROP_CELLS)),
            np.zeros(0, np.uint8),
            np.zeros(0, np.uint8),
            np.zeros(0, np.uint32),
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
    triangle_instance : (t,) uint32
        Instance label (object id) of each triangle; the terrain is object 0 (``scene.instances``).
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
    object_class : (o,) uint8
        Class of object ``i`` (a tree is ``tree``; its trunk's triangles are ``tree_trunk``).
    object_type : (o,) uint8
        What made object ``i``: an index in ``instances.OBJECT_TYPES``.
    """

    vertices_m: np.ndarray
    triangles: np.ndarray
    triangle_class: np.ndarray
    triangle_material: np.ndarray
    triangle_instance: np.ndarray
    triangle_closed: np.ndarray
    terrain: TerrainGrid
    cover: CellGrid
    polygons: tuple
    polygon_raster: CellGrid
    pond_depth: CellGrid
    soil_wetness: CellGrid
    crops: CropPatches
    object_names: tuple[str, ...]
    object_class: np.ndarray
    object_type: np.ndarray

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
            self.triangle_instance,
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
            self.crops.instance,
            self.object_class,
            self.object_type,
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
