"""Triangle meshes read from files: the scene file's ``mesh`` objects and an SDF world's meshes.

``read_mesh_file`` reads ply, obj, stl, off, gltf and glb with ``open3d.io.read_triangle_mesh``
(all sub-meshes merged, in the file's own axes) and COLLADA ``.dae`` (Gazebo's usual mesh format)
with the optional ``pycollada`` (``pip install 'acres_lidar_ros[sdf]'``): every geometry instance
of the file's scene with its node transforms, scaled by the file's ``<unit meter>``. Refusals are
``SceneError``s naming the file and what is allowed.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from acres_lidar_ros.config.input_files import check_regular_file
from acres_lidar_ros.errors import SceneError
from acres_lidar_ros.scene import scene_limits

if TYPE_CHECKING:
    from acres_lidar_ros.scene.builder import SceneBuilder
    from acres_lidar_ros.scene.scene_file import _Reader

#: Point-cloud formats: refused with the way to a surface.
POINT_CLOUD_SUFFIXES = (".pcd", ".las", ".laz", ".xyz", ".pts")
POINT_CLOUD_ROUTE = (
    "a point cloud is no surface: mesh it first (e.g. Open3D's create_from_point_cloud_ball_pivoting or "
    "_poisson, or CloudCompare) and give the mesh here, or grid its ground into a DEM for terrain.dem"
)


def mesh_suffix_error(suffix: str) -> str:
    """What is allowed instead of a file ending ``suffix``."""
    text = f"must be a mesh file ending {', '.join(scene_limits.MESH_SUFFIXES)}"
    return f"{text}; {POINT_CLOUD_ROUTE}" if suffix.lower() in POINT_CLOUD_SUFFIXES else text


def read_mesh_file(file: Path, what: str) -> tuple[np.ndarray, np.ndarray]:
    """(vertices (v, 3) float64, triangles (t, 3) int64) of a mesh file, as stored.

    ``what`` starts every message (e.g. the scene file and key). Refused: a missing or irregular
    file, one over ``MAX_MESH_FILE_BYTES``, another suffix, no triangles, more than the scene's
    triangle limit, or non-finite vertices.
    """
    suffix = file.suffix.lower()
    if suffix not in scene_limits.MESH_SUFFIXES:
        raise SceneError(f"{what}: {file}: {mesh_suffix_error(suffix)}")
    if not file.exists():
        raise SceneError(f"{what}: mesh file {file} does not exist")
    check_regular_file(file, f"{what}: mesh file", scene_limits.MAX_MESH_FILE_BYTES, SceneError)
    if suffix == ".dae":
        vertices, triangles = _read_collada(file, what)
    else:
        import open3d as o3d

        mesh = o3d.io.read_triangle_mesh(file)
        vertices = np.asarray(mesh.vertices, float)
        triangles = np.asarray(mesh.triangles, np.int64)
    if len(triangles) > scene_limits.MAX_SCENE_TRIANGLES:
        raise SceneError(
            f"{what}: {file} has {len(triangles)} triangles: the scene limit is {scene_limits.MAX_SCENE_TRIANGLES}"
        )
    if len(triangles) == 0:
        points = f" ({len(vertices)} points and no faces: {POINT_CLOUD_ROUTE})" if len(vertices) else ""
        raise SceneError(f"{what}: {file} has no triangles (formats: ply, obj, stl, off, gltf, glb, dae){points}")
    if not np.isfinite(vertices).all():
        raise SceneError(f"{what}: {file} has vertices that are not finite")
    return vertices, triangles


def _read_collada(file: Path, what: str) -> tuple[np.ndarray, np.ndarray]:
    try:
        import collada
    except ImportError as err:
        raise SceneError(
            f"{what}: {file}: COLLADA (.dae) meshes need the optional pycollada reader: pip install "
            "'acres_lidar_ros[sdf]', or convert the mesh to .glb or .obj (e.g. with Blender or assimp export)"
        ) from err
    try:
        document = collada.Collada(
            str(file), ignore=[collada.common.DaeUnsupportedError, collada.common.DaeBrokenRefError]
        )
    except Exception as err:  # pycollada raises its own errors and the XML parser's
        raise SceneError(f"{what}: {file} does not read as COLLADA: {type(err).__name__}: {err}") from err
    if document.scene is None:
        raise SceneError(f"{what}: {file} has no <scene>: nothing to place")
    unit = getattr(document.assetInfo, "unitmeter", None) or 1.0
    vertices: list[np.ndarray] = []
    triangles: list[np.ndarray] = []
    count = 0
    for geometry in document.scene.objects("geometry"):
        for primitive in geometry.primitives():
            if isinstance(primitive, (collada.polylist.BoundPolylist, collada.polygons.BoundPolygons)):
                primitive = primitive.triangleset()
            elif not isinstance(primitive, collada.triangleset.BoundTriangleSet):
                continue  # lines hold no surface
            index = getattr(primitive, "vertex_index", None)
            if index is None or primitive.vertex is None or len(index) == 0:
                continue
            index = np.asarray(index, np.int64).reshape(-1, 3)
            vertices.append(np.asarray(primitive.vertex, float) * float(unit))
            triangles.append(index + count)
            count += len(vertices[-1])
            if sum(len(t) for t in triangles) > scene_limits.MAX_SCENE_TRIANGLES:
                break
    if not vertices:
        return np.zeros((0, 3)), np.zeros((0, 3), np.int64)
    return np.concatenate(vertices), np.concatenate(triangles)


def read_mesh_parts(file: Path, what: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[str, ...]]:
    """A mesh file's sub-meshes with their material names, read with the optional ``trimesh``
    (``pip install 'acres_lidar_ros[meshes]'``): glTF/GLB primitives with their node transforms,
    OBJ faces by ``usemtl``, COLLADA geometries (with pycollada).

    Returns
    -------
    vertices (v, 3) float64, triangles (t, 3) int64, the material index of each triangle (t,)
    int64, and the material names ("" for a sub-mesh without one), in the file's own axes.
    """
    suffix = file.suffix.lower()
    if suffix not in scene_limits.MESH_SUFFIXES:
        raise SceneError(f"{what}: {file}: {mesh_suffix_error(suffix)}")
    if not file.exists():
        raise SceneError(f"{what}: mesh file {file} does not exist")
    check_regular_file(file, f"{what}: mesh file", scene_limits.MAX_MESH_FILE_BYTES, SceneError)
    try:
        import trimesh
    except ImportError as err:
        raise SceneError(
            f"{what}: a mesh's materials map needs the optional trimesh reader: pip install 'acres_lidar_ros[meshes]'"
        ) from err
    try:
        scene: Any = trimesh.load(str(file), force="scene", group_material=True)
    except Exception as err:  # trimesh raises many types for broken files
        raise SceneError(f"{what}: {file} does not read as a mesh: {type(err).__name__}: {err}") from err
    names: list[str] = []
    vertices, triangles, material = [], [], []
    count = 0
    for node in scene.graph.nodes_geometry:
        transform, geometry_name = scene.graph[node]
        mesh = scene.geometry[geometry_name]
        faces = getattr(mesh, "faces", None)
        if faces is None or len(faces) == 0:
            continue  # a point cloud or a path holds no surface
        found = getattr(getattr(mesh.visual, "material", None), "name", None) or ""
        if found not in names:
            names.append(found)
        v = np.asarray(mesh.vertices, float) @ np.asarray(transform)[:3, :3].T + np.asarray(transform)[:3, 3]
        vertices.append(v)
        triangles.append(np.asarray(faces, np.int64) + count)
        material.append(np.full(len(faces), names.index(found), np.int64))
        count += len(v)
    if not triangles:
        raise SceneError(f"{what}: {file} has no triangles (formats: ply, obj, stl, off, gltf, glb, dae)")
    t = np.concatenate(triangles)
    if len(t) > scene_limits.MAX_SCENE_TRIANGLES:
        raise SceneError(
            f"{what}: {file} has {len(t)} triangles: the scene limit is {scene_limits.MAX_SCENE_TRIANGLES}"
        )
    return np.concatenate(vertices), t, np.concatenate(material), tuple(names)


def add_material_parts(r: _Reader, b: SceneBuilder, obj: dict, key: str, mesh: tuple, defaults: tuple) -> None:
    """A mesh object's ``materials`` map (docs/scene_format.md, "Mesh materials"): the file's
    material names -> a material name, or ``{"material": ..., "class": ...}``; the object's
    ``class`` and ``material`` for the rest. One object per class (named ``name/class`` when the
    map gives more than one), each triangle with its part's material."""
    from acres_lidar_ros.config.material_table import CLASS_NAMES, MATERIAL_NAMES

    world, triangles, part, names = mesh
    cls, material, closed, name = defaults
    table = obj["materials"]
    if not isinstance(table, dict) or not table:
        raise r.fail(f"{key}.materials", table, "must be an object of the file's material names -> material names")
    unknown = sorted(set(table) - set(names))
    if unknown:
        listed = ", ".join(repr(n) for n in names)
        raise r.fail(f"{key}.materials", unknown[0], f"is no material of {obj['path']!r}; its materials: {listed}")
    chosen: list[tuple[str, str | None]] = []
    for n in names:
        entry = table.get(n, {})
        if isinstance(entry, str):
            entry = {"material": entry}
        entry = r.table(entry, f"{key}.materials.{n}", {"material", "class"})
        chosen.append(
            (
                r.name_of(entry, "class", f"{key}.materials.{n}", CLASS_NAMES, default=cls) or cls,
                r.name_of(entry, "material", f"{key}.materials.{n}", MATERIAL_NAMES) or material,
            )
        )
    classes = sorted({c for c, _ in chosen}, key=[c for c, _ in chosen].index)
    for c in classes:
        parts = [k for k, (ck, _) in enumerate(chosen) if ck == c]
        mine = np.isin(part, parts)
        remap = np.full(len(names), -1, np.int64)
        remap[parts] = np.arange(len(parts))
        label = name if len(classes) == 1 else f"{name or 'mesh'}/{c}"
        b.add_mesh_parts(world, triangles[mine], remap[part[mine]], [chosen[k][1] for k in parts], c, closed, label)
