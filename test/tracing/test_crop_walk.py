"""crop_walk: the neighbour table of the crop patches, and grazing walks across a wide field
(many steps from patch to patch without a cast) against the spec's literal step walk."""

from __future__ import annotations

import numpy as np
import pytest
from test_trace import GROUND_Z_M, flat_builder, literal_crop_walk, unit

from acres_lidar_ros.config.material_table import CLASS_ID
from acres_lidar_ros.scene.scene_model import CROP_PATCH_SIZE_M
from acres_lidar_ros.tracing.crop_walk import crop_links
from acres_lidar_ros.tracing.trace import Tracer


def links(scene):
    c = scene.crops
    return crop_links(c.centre_xy_m, c.yaw_rad, c.instance, CROP_PATCH_SIZE_M, c.cell_base_z_m, c.cell_top_z_m, 0.0)


def test_links_are_the_field_lattice_neighbours_and_box_heights():
    b = flat_builder()
    nx, ny = 3, 4
    b.add_crop_field([-2.0, -1.5], (nx, ny), "corn", 2.0, 0.6, yaw_rad=0.4)
    b.add_crop_field([20.0, 20.0], (2, 1), "potato", 0.6, 1.0)
    scene = b.build()
    neighbour, lo_z, hi_z = links(scene)
    ix, iy = np.meshgrid(np.arange(nx), np.arange(ny))
    ix, iy = ix.ravel(), iy.ravel()  # the builder's patch order: iy major

    def index(jx, jy, ok):
        return np.where(ok, jy * nx + jx, -1)

    want = np.column_stack(
        [
            index(ix - 1, iy, ix > 0),
            index(ix + 1, iy, ix < nx - 1),
            index(ix, iy - 1, iy > 0),
            index(ix, iy + 1, iy < ny - 1),
        ]
    )
    np.testing.assert_array_equal(neighbour[: nx * ny], want)
    np.testing.assert_array_equal(neighbour[nx * ny :], [[-1, nx * ny + 1, -1, -1], [nx * ny, -1, -1, -1]])
    h_max = 2.0 * (0.03 + 0.97 * 0.6)
    np.testing.assert_allclose(lo_z, GROUND_Z_M)
    np.testing.assert_allclose(hi_z[: nx * ny], GROUND_Z_M + h_max)


def test_fields_that_come_near_each_other_have_no_links():
    b = flat_builder()
    b.add_crop_field([0.0, 0.0], (3, 3), "corn", 2.0, 0.6)
    b.add_crop_field([3 * CROP_PATCH_SIZE_M[0] + 0.005, 0.0], (2, 2), "soybean", 1.0, 0.6)  # 5 mm apart
    b.add_crop_field([30.0, 0.0], (2, 2), "potato", 0.6, 0.6)
    neighbour, _, _ = links(b.build())
    assert (neighbour[:13] == -1).all()
    assert (neighbour[13:] >= 0).sum() == 8  # the lone field keeps its 4 x 2 links


@pytest.mark.parametrize("yaw_rad", [0.0, 0.3])
def test_grazing_walks_across_a_wide_field_equal_the_literal_step_walk(yaw_rad):
    b = flat_builder(half_m=40.0)
    rng = np.random.default_rng(8)
    nx, ny = 12, 16
    state = np.where(rng.random((4 * ny, 4 * nx)) < 0.85, 2, rng.integers(0, 2, (4 * ny, 4 * nx)))  # mostly low
    b.add_crop_field([-9.0, -8.0], (nx, ny), "soybean", 1.0, 0.5, yaw_rad=yaw_rad, cell_state=state)
    scene = b.build()
    tracer = Tracer(scene)
    n = 120
    azimuth = rng.uniform(0, 2 * np.pi, n)
    origin = np.column_stack([-25 * np.cos(azimuth), -25 * np.sin(azimuth), np.full(n, GROUND_Z_M + 0.6)])
    target = np.column_stack([rng.uniform(-14, 14, n), rng.uniform(-14, 14, n), np.full(n, GROUND_Z_M)])
    d = unit(target - origin)  # 1 to 3 deg down: long walks, low over the crop; some land beyond it
    hits = tracer.trace(origin, d, 100.0, 1, 0.25, 0.003)
    ground_t = (GROUND_Z_M - origin[:, 2]) / d[:, 2]
    n_crop = 0
    for i in range(n):
        want = literal_crop_walk(scene, origin[i], d[i], ground_t[i])
        if np.isfinite(want):
            n_crop += 1
            assert hits.class_id[i, 0] == CLASS_ID["soybean"], i
            assert hits.range_m[i, 0] == pytest.approx(want, abs=1e-9), i
        else:
            assert hits.class_id[i, 0] == CLASS_ID["ground"], i
    assert 0.3 * n < n_crop < n
