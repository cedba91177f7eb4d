"""trace_kernel: the compiled helpers repeat numpy's arithmetic bit for bit (min/max NaN rules,
float32 rays, the float32 normal dot product, the ground grid index), and a trace reuses its
work arrays without carrying anything over."""

from __future__ import annotations

import threading

import numpy as np
from numba import njit

from acres_lidar_ros.scene.builder import SceneBuilder
from acres_lidar_ros.scene.grids import CellGrid, TerrainGrid
from acres_lidar_ros.tracing import trace_kernel as kernel
from acres_lidar_ros.tracing.trace import Tracer


@njit(cache=True)
def _apply_minmax(a, b, out):
    for i in range(len(a)):
        out[0, i] = kernel._maximum(a[i], b[i])
        out[1, i] = kernel._minimum(a[i], b[i])
        out[2, i] = kernel._fmin(a[i], b[i])
        out[3, i] = kernel._fmax(a[i], b[i])


@njit(cache=True)
def _rays(ol, d, start, rays):
    for g in range(len(ol)):
        kernel._write_ray(rays, g, ol, d, g, start[g])


@njit(cache=True)
def _dots(normals, d, out):
    for g in range(len(d)):
        out[g] = kernel._dot32(normals, g, d, g)


@njit(cache=True)
def _cells(x, y, p, out):
    for i in range(len(x)):
        out[i] = kernel._cell(x[i], y[i], p[0], p[1], p[2], p[3], p[4])


def test_min_max_follow_numpy_nan_rules():
    values = np.array([1.0, -2.0, np.inf, -np.inf, np.nan, 0.5])
    a, b = (v.ravel() for v in np.meshgrid(values, values))
    out = np.empty((4, len(a)))
    _apply_minmax(a, b, out)
    for got, want in zip(out, (np.maximum(a, b), np.minimum(a, b), np.fmin(a, b), np.fmax(a, b))):
        np.testing.assert_array_equal(got, want)


def test_rays_and_normal_dot_equal_the_numpy_float32_formulas():
    rng = np.random.default_rng(0)
    n = 20_000
    ol = rng.uniform(-600, 600, (n, 3))
    d = rng.normal(size=(n, 3))
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    start = rng.uniform(0, 200, n)
    rays = np.empty((n, 6), np.float32)
    _rays(ol, d, start, rays)
    want = np.empty((n, 6), np.float32)
    np.multiply(d, start[:, None], out=want[:, :3], casting="same_kind")
    np.add(want[:, :3], ol, out=want[:, :3], casting="same_kind")
    want[:, 3:] = d
    np.testing.assert_array_equal(rays, want)
    normals = rng.normal(size=(n, 3)).astype(np.float32)
    dots = np.empty(n, np.float32)
    _dots(normals, d, dots)
    np.testing.assert_array_equal(dots, np.einsum("ij,ij->i", normals, d.astype(np.float32)))


def test_cell_index_equals_cell_grid_flat_index_inside_outside_and_on_edges():
    grid = CellGrid([-10.3, 7.1], 0.37, np.arange(35).reshape(5, 7), fill=-1)
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.uniform(-12, -6, 500), -10.3 + 0.37 * np.arange(8)])
    y = np.concatenate([rng.uniform(6, 10, 500), 7.1 + 0.37 * np.arange(8)])
    padded, params = grid.lookup_table()
    got = np.empty(len(x), np.int64)
    _cells(x, y, params, got)
    np.testing.assert_array_equal(got, grid.flat_index(x, y))
    np.testing.assert_array_equal(padded[got], grid.value_at(x, y))
    assert not padded.flags.writeable


def _scene():
    n = 31
    b = SceneBuilder(TerrainGrid([-60.0, -60.0], 4.0, np.zeros((n, n))))
    b.add_tree([5.0, 0.0], 8.0)
    b.add_crop_field([-6.0, -6.0], (4, 6), "corn", 2.0, 0.8)
    return b.build()


def test_reused_work_arrays_carry_nothing_between_calls_or_threads():
    tracer = Tracer(_scene())
    rng = np.random.default_rng(2)
    d = rng.normal(size=(3000, 3)) - [0, 0, 0.5]
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    o = np.tile([0.0, 0.0, 2.0], (3000, 1))
    args = (80.0, 4, 0.25, 0.003)
    alone = Tracer(tracer.scene).trace(o[:500], d[:500], *args)
    tracer.trace(o, d, 60.0, 8, 0.1, 0.003, foliage_solid=True)  # a bigger, different call first
    again = tracer.trace(o[:500], d[:500], *args)
    results = []
    thread = threading.Thread(target=lambda: results.append(tracer.trace(o[:500], d[:500], *args)))
    thread.start()
    thread.join()
    for other in (again, results[0]):
        for field in alone.__dataclass_fields__:
            np.testing.assert_array_equal(getattr(other, field), getattr(alone, field), err_msg=field)
    assert (alone.class_id == 7).any() and (alone.class_id == 5).any()  # corn and tree were traced
