"""``SceneBuilder``: meshes, proxies and crop fields over a terrain, collected into a ``Scene``."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np
from numpy.typing import ArrayLike

from acres_lidar_ros.config.material_table import (
    CLASS_ID,
    COVER_MATERIAL_NAMES,
    IS_FOLIAGE_CLASS,
    MATERIAL_ID,
    MATERIAL_NAMES,
    MATERIAL_OF_CLASS,
)
from acres_lidar_ros.errors import SceneError
from acres_lidar_ros.scene import shapes
from acres_lidar_ros.scene.grids import CellGrid, TerrainGrid, rasterise_polygons
from acres_lidar_ros.scene.instances import MAX_SCENE_OBJECTS, OBJECT_TYPE_ID
from acres_lidar_ros.scene.scene_model import (
    COVER_MATERIAL_IDS,
    CROP_CELL_HEIGHT_FRACTION,
    CROP_CELLS,
    CROP_CLASS_NAMES,
    CROP_PATCH_SIZE_M,
    CROWN_CENTRE_PER_HEIGHT,
    CROWN_RADIUS_PER_HEIGHT,
    SHRUB_CENTRE_PER_HEIGHT,
    SHRUB_RADIUS_PER_HEIGHT,
    CropPatches,
    Scene,
    class_number,
    crop_box_height_m,
    material_number,
)

_GRASS = MATERIAL_ID["grass"]


@dataclass
class _Part:
    vertices_m: np.ndarray
    triangles: np.ndarray
    class_id: int
    material_id: int
    instance: int
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

    Each ``add_*`` returns the object id (instance label, ``scene.instances``) of the new object
    (1, 2, ... in the order they are added; the terrain is 0).
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
        self._object_class: list[int] = [CLASS_ID["ground"]]
        self._object_type: list[int] = [OBJECT_TYPE_ID["terrain"]]
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
    def _new_object(self, name: str | None, kind: str, object_type: str, class_id: int) -> int:
        """A new object id; ``kind`` names it when ``name`` is empty, ``object_type`` is its
        ``instances.OBJECT_TYPES`` entry and ``class_id`` its class."""
        oid = len(self._names)
        if oid >= MAX_SCENE_OBJECTS:
            raise SceneError(f"object {name!r}: a scene holds at most {MAX_SCENE_OBJECTS} objects")
        self._names.append(name if name else f"{kind}_{oid}")
        self._object_class.append(int(class_id))
        self._object_type.append(OBJECT_TYPE_ID[object_type])
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

    def _add(self, vertices, triangles, class_id, material, oid, closed=False, yaw_rad=0.0, base=None, rotation=None):
        turn = shapes.rotation_z(yaw_rad) if rotation is None else np.asarray(rotation, float)
        v = np.asarray(vertices, float) @ turn.T
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
        oid = self._new_object(name, class_name, "mesh", cid)
        self._add(v, t, cid, self._material(cid, material), oid, closed and bool(IS_FOLIAGE_CLASS[cid]))
        return oid

    def add_mesh_parts(
        self,
        vertices_m: ArrayLike,
        triangles: ArrayLike,
        part_of_triangle: ArrayLike,
        part_materials: list[MaterialArg],
        class_name: str,
        closed: bool = False,
        name: str | None = None,
    ) -> int:
        """Add one mesh object whose triangles take the material of their part:
        ``part_materials[part_of_triangle[k]]`` for triangle k (None: the class's material)."""
        cid = class_number(class_name)
        v = np.asarray(vertices_m, float)
        t = np.asarray(triangles, np.int64)
        part = np.asarray(part_of_triangle, np.int64)
        if part.shape != (len(t),) or (len(t) and (part.min() < 0 or part.max() >= len(part_materials))):
            raise SceneError(
                f"mesh {name!r}: part_of_triangle must give each triangle a part below {len(part_materials)}"
            )
        oid = self.add_mesh(v, t, class_name, None, closed, name)  # checks the arrays, makes the object
        whole = self._parts.pop()
        for k, material in enumerate(part_materials):
            mine = whole.triangles[part == k]
            if len(mine):  # each part keeps only its own vertices
                used, local = np.unique(mine, return_inverse=True)
                self._parts.append(
                    _Part(
                        whole.vertices_m[used],
                        local.reshape(mine.shape),
                        cid,
                        self._material(cid, material),
                        oid,
                        whole.closed,
                    )
                )
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
        rotation: np.ndarray | None = None,
    ) -> int:
        """Box of ``size_m`` (lx, ly, lz) standing on its base, with an optional gable roof (ridge along x).

        ``rotation`` (3, 3), when given, turns the box about its base centre instead of ``yaw_rad``."""
        cid = class_number(class_name)
        size = np.asarray(size_m, float)
        if size.shape != (3,) or not np.all(size > 0):
            raise SceneError(f"box {name!r}: size_m = {size.tolist()!r}: must be 3 numbers > 0")
        base = self._base(base_xy_m, base_z_m)
        oid = self._new_object(name, class_name, "box", cid)
        mat = self._material(cid, material)
        v, t = shapes.box(size)
        self._add(v, t, cid, mat, oid, bool(IS_FOLIAGE_CLASS[cid]), yaw_rad, base, rotation)
        if roof_height_m > 0:
            v, t = shapes.gable_roof(size[:2], roof_height_m)
            self._add(v + [0, 0, size[2]], t, cid, mat, oid, False, yaw_rad, base, rotation)
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
        yaw_rad: float = 0.0,
        rotation: np.ndarray | None = None,
    ) -> int:
        """Closed cylinder with an optional cone roof, upright unless ``rotation`` (3, 3) turns it
        about its base centre."""
        cid = class_number(class_name)
        if not (radius_m > 0 and height_m > 0 and cone_height_m >= 0 and segments >= 3):
            raise SceneError(
                f"cylinder {name!r}: radius_m = {radius_m!r}, height_m = {height_m!r}, cone_height_m = "
                f"{cone_height_m!r}, segments = {segments!r}: need radius, height > 0, cone >= 0, segments >= 3"
            )
        oid = self._new_object(name, class_name, "cylinder", cid)
        v, t = shapes.cylinder(radius_m, height_m, int(segments), cone_height_m)
        self._add(
            v,
            t,
            cid,
            self._material(cid, material),
            oid,
            bool(IS_FOLIAGE_CLASS[cid]),
            yaw_rad,
            self._base(base_xy_m, base_z_m),
            rotation,
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
        trunk, crown = CLASS_ID["tree_trunk"], CLASS_ID["tree"]
        oid = self._new_object(name, "tree", "tree", crown)
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
        oid = self._new_object(name, "shrub", "shrub", cid)
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
        return self._add_dome("mud_clod", False, base_xy_m, size_m, yaw_rad, material, name)

    def add_ground_cover(
        self,
        base_xy_m: ArrayLike,
        size_m: ArrayLike,
        yaw_rad: float = 0.0,
        material: MaterialArg = None,
        name: str | None = None,
    ) -> int:
        """Low ground cover (class ground_cover, foliage): half-buried ellipsoid dome of extent ``size_m``."""
        return self._add_dome("ground_cover", True, base_xy_m, size_m, yaw_rad, material, name)

    def _add_dome(
        self,
        class_name: str,
        foliage: bool,
        base_xy_m: ArrayLike,
        size_m: ArrayLike,
        yaw_rad: float,
        material: MaterialArg,
        name: str | None,
    ) -> int:
        """A half-buried ellipsoid of extent ``size_m`` (length, width, height above the ground)."""
        size = np.asarray(size_m, float)
        if size.shape != (3,) or not np.all(size > 0):
            raise SceneError(f"{class_name} {name!r}: size_m = {size.tolist()!r}: must be 3 numbers > 0")
        cid = CLASS_ID[class_name]
        oid = self._new_object(name, class_name, class_name, cid)
        v, t = shapes.ellipsoid(np.array([size[0] / 2, size[1] / 2, size[2]]), 1)
        self._add(v, t, cid, self._material(cid, material), oid, foliage, yaw_rad, self._base(base_xy_m, None))
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
        oid = self._new_object(name, class_name, "crop_field", cid)
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
                    np.full(p, f["oid"], np.uint32),
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
            triangle_instance=np.repeat([p.instance for p in self._parts], counts).astype(np.uint32),
            triangle_closed=np.repeat([p.closed for p in self._parts], counts).astype(bool),
            terrain=self.terrain,
            cover=self.cover,
            polygons=tuple(self.polygons),
            polygon_raster=rasterise_polygons(self.polygons, self.polygon_raster_cell_m),
            pond_depth=self.pond_depth,
            soil_wetness=self.soil_wetness,
            crops=self._build_crops(),
            object_names=tuple(self._names),
            object_class=np.array(self._object_class, np.uint8),
            object_type=np.array(self._object_type, np.uint8),
        )
        for a in (
            scene.vertices_m,
            scene.triangles,
            scene.triangle_class,
            scene.triangle_material,
            scene.triangle_instance,
            scene.triangle_closed,
            scene.object_class,
            scene.object_type,
        ):
            a.setflags(write=False)
        return scene
