"""Regular 2-D grids of the ground: terrain heights, cover, water, polygon rasters.

World frame: x east, y north, z up, metres. A grid's row index follows y and its column
index follows x: ``values[i, j]``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from acres_lidar_ros.errors import SceneError


def _check_origin_cell(what: str, origin_xy_m: np.ndarray, cell_m: float) -> None:
    if origin_xy_m.shape != (2,) or not np.all(np.isfinite(origin_xy_m)):
        raise SceneError(f"{what}.origin_xy_m = {origin_xy_m.tolist()!r}: must be 2 finite numbers")
    if not (np.isfinite(cell_m) and cell_m > 0.0):
        raise SceneError(f"{what}.cell_m = {cell_m!r}: must be a finite number > 0")


@dataclass(frozen=True)
class TerrainGrid:
    """Ground heights at the nodes of a regular grid.

    Attributes
    ----------
    origin_xy_m : (2,) float64
        World (x, y) of node ``[0, 0]``.
    cell_m : float
        Node spacing, m.
    height_m : (ny, nx) float64
        Height of node ``[i, j]`` at ``(x0 + j cell, y0 + i cell)``; ``ny, nx >= 2``.

    The surface is two triangles per cell, split along the diagonal from node ``[i, j]`` to
    ``[i + 1, j + 1]``; ``height_at`` interpolates on the same triangles, so it is the height
    of the traced ground exactly.
    """

    origin_xy_m: np.ndarray
    cell_m: float
    height_m: np.ndarray

    def __post_init__(self) -> None:
        origin = np.asarray(self.origin_xy_m, float)
        object.__setattr__(self, "origin_xy_m", origin)
        _check_origin_cell("terrain", origin, float(self.cell_m))
        h = np.asarray(self.height_m, float)
        if h.ndim != 2 or h.shape[0] < 2 or h.shape[1] < 2:
            raise SceneError(f"terrain.height_m has shape {h.shape}: must be a 2-D grid of at least 2 x 2 nodes")
        if not np.all(np.isfinite(h)):
            bad = np.argwhere(~np.isfinite(h))[0]
            raise SceneError(
                f"terrain.height_m[{bad[0]}][{bad[1]}] = {float(h[tuple(bad)])!r}: heights must be finite numbers"
            )
        object.__setattr__(self, "height_m", h)

    @property
    def shape(self) -> tuple[int, int]:
        return self.height_m.shape

    @property
    def extent_xy_m(self) -> np.ndarray:
        """(2, 2) float64: ``[[x_min, y_min], [x_max, y_max]]`` of the grid."""
        ny, nx = self.height_m.shape
        return np.array([self.origin_xy_m, self.origin_xy_m + self.cell_m * np.array([nx - 1, ny - 1])])

    def height_at(self, x_m: ArrayLike, y_m: ArrayLike) -> np.ndarray:
        """Ground height at world ``(x, y)``, m; points outside take the height of the edge.

        Parameters
        ----------
        x_m, y_m : array_like float64, broadcastable

        Returns
        -------
        float64 array of the broadcast shape.
        """
        x_m, y_m = np.broadcast_arrays(np.asarray(x_m, float), np.asarray(y_m, float))
        ny, nx = self.height_m.shape
        u = np.clip((x_m - self.origin_xy_m[0]) / self.cell_m, 0.0, nx - 1)
        v = np.clip((y_m - self.origin_xy_m[1]) / self.cell_m, 0.0, ny - 1)
        j = np.minimum(np.floor(u).astype(np.int64), nx - 2)
        i = np.minimum(np.floor(v).astype(np.int64), ny - 2)
        fx = u - j
        fy = v - i
        h = self.height_m
        h00, h01, h10, h11 = h[i, j], h[i, j + 1], h[i + 1, j], h[i + 1, j + 1]
        lower = fx >= fy  # triangle (0,0) (1,0) (1,1)
        return np.where(
            lower,
            h00 + fx * (h01 - h00) + fy * (h11 - h01),
            h00 + fy * (h10 - h00) + fx * (h11 - h10),
        )

    def mesh(self) -> tuple[np.ndarray, np.ndarray]:
        """``(vertices_m (ny nx, 3) float64, triangles (2 (ny-1)(nx-1), 3) int64)``, normals up."""
        ny, nx = self.height_m.shape
        xs = self.origin_xy_m[0] + self.cell_m * np.arange(nx)
        ys = self.origin_xy_m[1] + self.cell_m * np.arange(ny)
        gx, gy = np.meshgrid(xs, ys)
        vertices = np.column_stack([gx.ravel(), gy.ravel(), self.height_m.ravel()])
        node = np.arange(ny * nx).reshape(ny, nx)
        n00, n01 = node[:-1, :-1].ravel(), node[:-1, 1:].ravel()
        n10, n11 = node[1:, :-1].ravel(), node[1:, 1:].ravel()
        tris = np.concatenate([np.stack([n00, n01, n11], 1), np.stack([n00, n11, n10], 1)])
        return vertices, tris.astype(np.int64)


@dataclass(frozen=True)
class CellGrid:
    """Values on the cells of a regular grid.

    Attributes
    ----------
    origin_xy_m : (2,) float64
        World (x, y) of the lower-left corner of cell ``[0, 0]``.
    cell_m : float
        Cell size, m.
    values : (ny, nx) array
        Value of cell ``[i, j]``, which covers ``[x0 + j cell, x0 + (j + 1) cell)`` and the same in y.
    fill : scalar
        Value outside the grid.
    """

    origin_xy_m: np.ndarray
    cell_m: float
    values: np.ndarray
    fill: float | int = 0
    _padded_flat: np.ndarray = field(init=False, repr=False, compare=False)
    """The values with a border of ``fill``, flattened (set in ``__post_init__``)."""

    def __post_init__(self) -> None:
        origin = np.asarray(self.origin_xy_m, float)
        object.__setattr__(self, "origin_xy_m", origin)
        _check_origin_cell("grid", origin, float(self.cell_m))
        values = np.asarray(self.values)
        if values.ndim != 2 or values.size == 0:
            raise SceneError(f"grid values have shape {values.shape}: must be a non-empty 2-D grid")
        object.__setattr__(self, "values", values)
        # The values with a border of ``fill``: an index clipped to the border reads ``fill``.
        padded = np.pad(values, 1, constant_values=np.asarray(self.fill, values.dtype))
        object.__setattr__(self, "_padded_flat", padded.ravel())

    def same_cells(self, other: CellGrid) -> bool:
        """True when ``other`` has the same origin, cell size and shape (so the same indices)."""
        return (
            self.values.shape == other.values.shape
            and float(self.cell_m) == float(other.cell_m)
            and bool(np.all(self.origin_xy_m == other.origin_xy_m))
        )

    def flat_index(self, x_m: np.ndarray, y_m: np.ndarray) -> np.ndarray:
        """Index into the padded grid of the cell of each point (for ``values_at_index``).

        x_m, y_m : (m,) float64. Returns (m,) int64.
        """
        ny, nx = self.values.shape
        inv = 1.0 / self.cell_m
        j = np.floor(x_m * inv - self.origin_xy_m[0] * inv)
        i = np.floor(y_m * inv - self.origin_xy_m[1] * inv)
        np.clip(j, -1.0, nx, out=j)
        np.clip(i, -1.0, ny, out=i)
        i += 1.0
        i *= nx + 2
        i += j
        i += 1.0
        return i.astype(np.int64)

    def lookup_table(self) -> tuple[np.ndarray, np.ndarray]:
        """The padded values and the numbers ``flat_index`` computes with, for compiled lookups.

        Returns
        -------
        padded : ((ny + 2) (nx + 2),) values with a border of ``fill`` (read-only)
        params : (5,) float64 ``(1 / cell_m, x0 / cell_m, y0 / cell_m, nx, ny)``, the origin
            divided as ``flat_index`` does (``x0 * (1 / cell_m)``).
        """
        ny, nx = self.values.shape
        inv = 1.0 / self.cell_m
        padded = self._padded_flat.view()
        padded.setflags(write=False)
        return padded, np.array([inv, self.origin_xy_m[0] * inv, self.origin_xy_m[1] * inv, nx, ny], np.float64)

    def values_at_index(self, flat_index: np.ndarray) -> np.ndarray:
        """Values at indices of ``flat_index`` (``fill`` outside the grid)."""
        return self._padded_flat[flat_index]

    def value_at(self, x_m: np.ndarray, y_m: np.ndarray) -> np.ndarray:
        """Value of the cell that holds world ``(x, y)``; ``fill`` outside the grid.

        Returns an array of ``values.dtype`` with the broadcast shape of ``x_m`` and ``y_m``.
        """
        x_m, y_m = np.broadcast_arrays(np.asarray(x_m, float), np.asarray(y_m, float))
        flat = self.flat_index(x_m.ravel(), y_m.ravel())
        return self._padded_flat[flat].reshape(x_m.shape)


def points_in_polygon(x_m: np.ndarray, y_m: np.ndarray, polygon_xy_m: np.ndarray) -> np.ndarray:
    """Even-odd test of points against one simple polygon.

    Parameters
    ----------
    x_m, y_m : (n,) float64
    polygon_xy_m : (p, 3 or more) float64 vertices, closed implicitly.

    Returns
    -------
    (n,) bool: True inside.
    """
    inside = np.zeros(np.shape(x_m), bool)
    px, py = polygon_xy_m[:, 0], polygon_xy_m[:, 1]
    qx, qy = np.roll(px, -1), np.roll(py, -1)
    for ax, ay, bx, by in zip(px, py, qx, qy):
        crosses = (ay > y_m) != (by > y_m)
        if not crosses.any():
            continue
        x_cross = ax + (y_m - ay) * (bx - ax) / np.where(by != ay, by - ay, 1.0)
        inside ^= crosses & (x_m < x_cross)
    return inside


NO_POLYGON = 255


def rasterise_polygons(polygons: list[tuple[np.ndarray, int]], cell_m: float) -> CellGrid:
    """Raster of polygon materials: later polygons paint over earlier ones.

    Parameters
    ----------
    polygons : list of ``(vertices_xy_m (p, 2) float64, material_id int)``
    cell_m : float
        Raster cell size, m; a cell takes the polygon that contains its centre.

    Returns
    -------
    CellGrid of uint8 material ids, ``NO_POLYGON`` (255) where no polygon covers the cell.
    """
    if not polygons:
        return CellGrid(np.zeros(2), cell_m, np.full((1, 1), NO_POLYGON, np.uint8), fill=NO_POLYGON)
    all_xy = np.vstack([p for p, _ in polygons])
    lo = np.floor(all_xy.min(axis=0) / cell_m) * cell_m
    hi = all_xy.max(axis=0)
    nx, ny = (np.ceil((hi - lo) / cell_m).astype(np.int64) + 1).tolist()
    raster = np.full((ny, nx), NO_POLYGON, np.uint8)
    for vertices, material_id in polygons:
        j0, i0 = np.floor((vertices.min(axis=0) - lo) / cell_m).astype(np.int64)
        j1, i1 = np.ceil((vertices.max(axis=0) - lo) / cell_m).astype(np.int64)
        j1, i1 = min(j1, nx), min(i1, ny)
        cx = lo[0] + cell_m * (np.arange(j0, j1) + 0.5)
        cy = lo[1] + cell_m * (np.arange(i0, i1) + 0.5)
        gx, gy = np.meshgrid(cx, cy)
        inside = points_in_polygon(gx.ravel(), gy.ravel(), vertices).reshape(gx.shape)
        block = raster[i0:i1, j0:j1]
        block[inside] = material_id
    return CellGrid(lo, cell_m, raster, fill=NO_POLYGON)
