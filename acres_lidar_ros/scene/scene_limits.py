"""The documented limits of a scene file (docs/scene_format.md, "Limits").

``load_scene`` checks each size against these before it allocates what the size asks for, so a
scene file can neither exhaust memory nor keep the loader busy for hours; each refusal is a
``SceneError`` naming the file, the key, the value and the limit. The built-in farm (layout v2)
uses about 1.23 million triangles, 6,119 crop patches and a polygon raster of 0.6 million cells.
"""

from __future__ import annotations

#: Largest |value| of a coordinate, length, height, angle or other number, m (or deg): far
#: beyond any farm, and small enough that the float32 geometry of the trace keeps its sense.
MAX_SCENE_NUMBER = 1e6
#: Smallest cell of a grid or of the polygon raster, m.
MIN_CELL_M = 1e-3
#: Most values of one grid (terrain nodes, cover, water, cell_state): 4096 x 4096.
MAX_GRID_CELLS = 1 << 24
#: Most cells of the polygon raster (the polygons' bounding box over polygon_raster_cell_m).
MAX_RASTER_CELLS = 1 << 25
#: Most vertex-cell tests of the polygon raster: the sum over polygons of vertices x cells of
#: the polygon's bounding box (about 10 s of work at the limit).
MAX_POLYGON_WORK = 1 << 31
#: Most segments of one cylinder.
MAX_CYLINDER_SEGMENTS = 1024
#: Most crop patches of all crop fields together (4 x 4 cells each).
MAX_CROP_PATCHES = 1_000_000
#: Most triangles of the whole scene, terrain and meshes included.
MAX_SCENE_TRIANGLES = 10_000_000
#: Largest mesh file and ``.npy`` file, bytes.
MAX_MESH_FILE_BYTES = 256 << 20
MAX_NPY_FILE_BYTES = (8 * MAX_GRID_CELLS) + (1 << 16)
#: Mesh formats by file name suffix: those ``open3d.io.read_triangle_mesh`` reads, and COLLADA
#: (pycollada, scene/mesh_files.py).
MESH_SUFFIXES = (".ply", ".obj", ".stl", ".off", ".gltf", ".glb", ".dae")


def markdown() -> str:
    """The "Limits" table of docs/scene_format.md (a test keeps the two in step)."""
    from acres_lidar_ros.config.input_files import MAX_BOX_TRACKS_FILE_BYTES, MAX_JSON_DEPTH, MAX_SCENE_FILE_BYTES

    rows = [
        ("scene file", f"a regular UTF-8 file of at most {MAX_SCENE_FILE_BYTES >> 20} MiB"),
        ("box-track file", f"a regular UTF-8 file of at most {MAX_BOX_TRACKS_FILE_BYTES >> 20} MiB"),
        ("nesting of objects and lists", f"{MAX_JSON_DEPTH} levels"),
        ("integers", "within int64; NaN and Infinity are no numbers"),
        ("each key", "once per object; null is never a value"),
        ("numbers (coordinates, lengths, angles)", f"|value| <= {MAX_SCENE_NUMBER:g}"),
        ("box-track times t_s", "|t_s| <= 1e9 s"),
        ("cell_m, polygon_raster_cell_m", f">= {MIN_CELL_M:g} m"),
        ("values of one grid", f"{MAX_GRID_CELLS} (4096 x 4096)"),
        ("integer grids (cover numbers, cell_state)", "whole numbers (a float file may hold 2.0, never 2.7)"),
        (".npy file", f"a regular file of at most {MAX_NPY_FILE_BYTES >> 20} MiB, format 1.0 or 2.0, no objects"),
        ("polygon raster", f"{MAX_RASTER_CELLS} cells over the polygons' bounding box"),
        ("polygon work", f"{MAX_POLYGON_WORK} vertex-cell tests (vertices x bounding-box cells, summed)"),
        ("cylinder segments", f"3 to {MAX_CYLINDER_SEGMENTS}"),
        ("crop patches", f"{MAX_CROP_PATCHES} over all crop fields"),
        ("triangles", f"{MAX_SCENE_TRIANGLES} in the scene, terrain and meshes included"),
        ("mesh file", f"a regular file of at most {MAX_MESH_FILE_BYTES >> 20} MiB ending {', '.join(MESH_SUFFIXES)}"),
    ]
    return "\n".join(["| what | limit |", "| --- | --- |"] + [f"| {what} | {limit} |" for what, limit in rows])
