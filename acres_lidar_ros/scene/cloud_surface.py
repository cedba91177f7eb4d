"""Point-cloud maps to surfaces (``acres-lidar cloud-to-scene``, docs/scene_format.md, "Point-cloud
maps").

The method, on a grid of ``cell_m`` cells over the cloud's x-y extent:

1. **Ground:** each cell's ground is its lowest point (a map's ground is what lies under
   everything else). Cells without a point take the ground of the nearest cell with one; the
   coverage report counts them. Fewer than ``MIN_GROUND_COVERAGE`` of the cells with a point is
   refused: such a cloud (a single object, a scan from one place) cannot make a ground.
2. **Objects:** points more than ``min_height_m`` above their cell's ground are objects; each cell
   with such points becomes a column (a closed box over the cell) from the ground to its highest
   point. This keeps every object's outline and height to a cell and needs no normals; walls,
   trunks and poles are solid, overhangs are filled down to the ground.

A cloud is read from PCD or PLY (Open3D) or LAS/LAZ (the optional ``laspy``); a file without
points is refused with the route.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import ndimage

from acres_lidar_ros.config.input_files import check_regular_file
from acres_lidar_ros.errors import SceneError
from acres_lidar_ros.scene import scene_limits

CLOUD_SUFFIXES = (".pcd", ".ply", ".las", ".laz")
MAX_CLOUD_FILE_BYTES = 4 << 30
#: Least fraction of the grid's cells with a point for a ground to be made.
MIN_GROUND_COVERAGE = 0.2


def read_cloud(path: str | os.PathLike[str]) -> np.ndarray:
    """(n, 3) float64 points of a PCD, PLY, LAS or LAZ file."""
    file = Path(path)
    suffix = file.suffix.lower()
    if suffix not in CLOUD_SUFFIXES:
        raise SceneError(f"point cloud {file}: allowed suffixes {', '.join(CLOUD_SUFFIXES)}")
    if not file.exists():
        raise SceneError(f"point cloud {file} does not exist")
    check_regular_file(file, "point cloud", MAX_CLOUD_FILE_BYTES, SceneError)
    if suffix in (".las", ".laz"):
        try:
            import laspy
        except ImportError as err:
            raise SceneError(
                f"point cloud {file}: LAS/LAZ needs the optional laspy reader: pip install 'acres_lidar_ros[clouds]' (and lazrs for .laz)"
            ) from err
        try:
            las = laspy.read(str(file))
        except Exception as err:  # laspy raises its own and the decompressor's errors
            raise SceneError(f"point cloud {file} does not read as LAS: {type(err).__name__}: {err}") from err
        points = np.stack([np.asarray(las.x), np.asarray(las.y), np.asarray(las.z)], axis=1).astype(np.float64)
    else:
        import open3d as o3d

        points = np.asarray(o3d.io.read_point_cloud(file).points, np.float64)
    points = points[np.isfinite(points).all(axis=1)]
    if len(points) == 0:
        raise SceneError(f"point cloud {file} has no finite points: nothing to make a surface of")
    return points


@dataclass(frozen=True)
class CloudSurface:
    """The ground grid and the object columns of a cloud (module docstring).

    Attributes
    ----------
    origin_xy_m : (2,) float64, the south-west node (the centre of cell [0, 0])
    cell_m : float
    ground_m : (ny, nx) float64, the ground at each cell (row i along y)
    covered : (ny, nx) bool, cells with a point of the cloud
    column_top_m : (ny, nx) float64, the top of each object column, NaN where none
    points : int, points read; object_points : int, points in the columns
    """

    origin_xy_m: np.ndarray
    cell_m: float
    ground_m: np.ndarray
    covered: np.ndarray
    column_top_m: np.ndarray
    points: int
    object_points: int

    def report(self) -> dict:
        """The coverage report: cells, covered and filled cells, object points and columns."""
        cells = int(self.covered.size)
        return {
            "cells": cells,
            "cell_m": self.cell_m,
            "covered_cells": int(self.covered.sum()),
            "coverage": round(float(self.covered.mean()), 4),
            "filled_cells": cells - int(self.covered.sum()),
            "points": self.points,
            "object_points": self.object_points,
            "object_columns": int(np.isfinite(self.column_top_m).sum()),
        }

    def columns_mesh(self) -> tuple[np.ndarray, np.ndarray]:
        """(vertices (8 k, 3), triangles (12 k, 3)) of the k object columns, closed boxes wound outwards."""
        rows, cols = np.nonzero(np.isfinite(self.column_top_m))
        half = self.cell_m / 2
        x = self.origin_xy_m[0] + cols * self.cell_m
        y = self.origin_xy_m[1] + rows * self.cell_m
        low, high = self.ground_m[rows, cols], self.column_top_m[rows, cols]
        corners = []
        for z in (low, high):
            for sy in (-1, 1):
                for sx in (-1, 1):
                    corners.append(np.stack([x + sx * half, y + sy * half, z], axis=1))
        vertices = np.stack(corners, axis=1).reshape(-1, 3)  # corner index 4 z + 2 y + x, as shapes.box
        quads = [(0, 2, 3, 1), (4, 5, 7, 6), (0, 1, 5, 4), (2, 6, 7, 3), (0, 4, 6, 2), (1, 3, 7, 5)]
        box = np.array([t for q in quads for t in ((q[0], q[1], q[2]), (q[0], q[2], q[3]))], np.int64)
        triangles = (box[None, :, :] + 8 * np.arange(len(rows))[:, None, None]).reshape(-1, 3)
        return vertices, triangles


def cloud_surface(points_m: np.ndarray, cell_m: float, min_height_m: float, what: str) -> CloudSurface:
    """The ground and object columns of ``points_m`` (n, 3) (module docstring)."""
    p = np.asarray(points_m, float)
    if not (np.isfinite(cell_m) and cell_m >= scene_limits.MIN_CELL_M):
        raise SceneError(f"{what}: cell {cell_m!r}: must be a number >= {scene_limits.MIN_CELL_M:g} m")
    low = np.floor(p[:, :2].min(axis=0) / cell_m) * cell_m
    shape_f = np.floor((p[:, :2].max(axis=0) - low) / cell_m) + 1
    if float(shape_f[0]) * float(shape_f[1]) > scene_limits.MAX_GRID_CELLS or (shape_f < 2).any():
        raise SceneError(
            f"{what}: {int(shape_f[1])} x {int(shape_f[0])} cells of {cell_m:g} m: need 2 x 2 to "
            f"{scene_limits.MAX_GRID_CELLS} (4096 x 4096) cells; give another cell size or crop the cloud"
        )
    nx, ny = int(shape_f[0]), int(shape_f[1])
    j = np.minimum(((p[:, 0] - low[0]) / cell_m).astype(np.int64), nx - 1)
    i = np.minimum(((p[:, 1] - low[1]) / cell_m).astype(np.int64), ny - 1)
    flat = i * nx + j
    ground = np.full(ny * nx, np.inf)
    np.minimum.at(ground, flat, p[:, 2])
    covered = np.isfinite(ground).reshape(ny, nx)
    if covered.mean() < MIN_GROUND_COVERAGE:
        raise SceneError(
            f"{what}: only {covered.mean():.1%} of the {ny} x {nx} cells of {cell_m:g} m hold a point (at least "
            f"{MIN_GROUND_COVERAGE:.0%} needed): this cloud cannot make a ground; give a larger cell, or mesh the "
            "cloud (e.g. Open3D's ball pivoting or Poisson) and place the mesh over a terrain of your own"
        )
    nearest = ndimage.distance_transform_edt(~covered, return_distances=False, return_indices=True)
    ground_grid = ground.reshape(ny, nx)[nearest[0], nearest[1]]
    above = p[:, 2] - ground_grid.ravel()[flat] > min_height_m
    top = np.full(ny * nx, -np.inf)
    np.maximum.at(top, flat[above], p[above, 2])
    top_grid = np.where(np.isfinite(top), top, np.nan).reshape(ny, nx)
    origin = low + cell_m / 2
    return CloudSurface(origin, float(cell_m), ground_grid, covered, top_grid, len(p), int(above.sum()))
