"""Triangle meshes read from files: the scene file's ``mesh`` objects and an SDF world's meshes.

``read_mesh_file`` reads ply, obj, stl, off, gltf and glb with ``open3d.io.read_triangle_mesh``
(all sub-meshes merged, in the file's own axes) and COLLADA ``.dae`` (Gazebo's usual mesh format)
with the optional ``pycollada`` (``pip install 'acres_lidar_ros[sdf]'``): every geometry instance
of the file's scene with its node transforms, scaled by the file's ``<unit meter>``. Refusals are
``SceneError``s naming the file and what is allowed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from acres_lidar_ros.config.input_files import check_regular_file
from acres_lidar_ros.errors import SceneError
from acres_lidar_ros.scene import scene_limits

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
