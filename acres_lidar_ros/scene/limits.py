"""The documented limits of a scene file (docs/scene_format.md, "Limits").

``load_scene`` checks each size against these before it allocates what the size asks for, so a
scene file can neither exhaust memory nor keep the loader busy for hours; each refusal is a
``SceneError`` naming the file, the key, the value and the limit. The built-in farm uses about
170,000 triangles, 2,660 crop patches and a polygon raster of 4.6 million cells.
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
#: Mesh formats ``open3d.io.read_triangle_mesh`` reads, by file name suffix.
MESH_SUFFIXES = (".ply", ".obj", ".stl", ".off", ".gltf", ".glb")
