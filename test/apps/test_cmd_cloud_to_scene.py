"""``acres-lidar cloud-to-scene`` (scene/cloud_surface.py): a point-cloud map becomes a ground grid
and object columns; the scene it writes is hit where the cloud's surfaces were."""

from __future__ import annotations

import json

import numpy as np
import open3d as o3d
import pytest

from acres_lidar_ros.apps import cli
from acres_lidar_ros.errors import SceneError
from acres_lidar_ros.scene.cloud_surface import cloud_surface
from acres_lidar_ros.scene.scene_file import load_scene
from acres_lidar_ros.tracing.trace import Tracer


def write_cloud(path, points):
    cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(np.asarray(points, float)))
    assert o3d.io.write_point_cloud(str(path), cloud)


def sloped_yard():
    """Ground z = 0.05 x sampled every 0.25 m over 20 m x 20 m, and a 2 m cube of points on it
    (its top at 2 m above the ground at x = 5 to 7)."""
    g = np.arange(0.0, 20.0, 0.25) + 0.125
    x, y = np.meshgrid(g, g)
    ground = np.c_[x.ravel(), y.ravel(), 0.05 * x.ravel()]
    s = np.arange(5.0, 7.0, 0.1) + 0.05
    cx, cy = np.meshgrid(s, s)
    top = np.c_[cx.ravel(), cy.ravel(), 0.05 * 5.0 + 2.0 + 0 * cx.ravel()]
    return np.vstack([ground, top])


def test_a_cloud_becomes_a_ground_and_columns_that_trace_where_it_was(tmp_path, capsys):
    write_cloud(tmp_path / "map.pcd", sloped_yard())
    out = tmp_path / "scene"
    code = cli.main(["cloud-to-scene", "--cloud", str(tmp_path / "map.pcd"), "--cell", "0.5", "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    report = json.loads((out / "coverage.json").read_text())
    assert report["cells"] == 40 * 40 and report["coverage"] == 1.0 and report["filled_cells"] == 0
    assert report["object_points"] == 400 and report["object_columns"] == 16
    scene = load_scene(out / "scene.json")
    tracer = Tracer(scene)
    down = np.array([[0.0, 0.0, -1.0]])
    # Ground: the lowest point of each 0.5 m cell (x = 0.125 + k 0.5 ... : 0.05 x of the cell's
    # lowest point) at the cell centre; the traced ground between centres is that grid.
    lowest_x = 10.125  # the cell from 10 to 10.5 m holds points at x = 10.125 and 10.375
    assert float(tracer.cast_bare(np.array([[10.25, 3.25, 10.0]]), down)[0]) == pytest.approx(
        10 - 0.05 * lowest_x, abs=1e-4
    )
    # The cube's columns: their top at its points' height, 2.25 m.
    assert float(tracer.cast_bare(np.array([[6.25, 6.25, 10.0]]), down)[0]) == pytest.approx(10 - 2.25, abs=1e-4)
    side = tracer.cast_bare(np.array([[0.0, 6.25, 1.5]]), np.array([[1.0, 0.0, 0.0]]))
    assert float(side[0]) == pytest.approx(5.0, abs=1e-4)  # the columns' west face at x = 5 m


def test_columns_are_closed_and_wound_outwards():
    surface = cloud_surface(sloped_yard(), 0.5, 0.3, "cloud")
    v, t = surface.columns_mesh()
    a, b, c = (v[t[:, k]] for k in range(3))
    volume = np.einsum("ij,ij->i", a, np.cross(b, c)).sum() / 6.0
    heights = surface.column_top_m - surface.ground_m
    assert volume == pytest.approx(0.25 * np.nansum(heights), rel=1e-9)


def test_a_cloud_that_cannot_make_a_ground_is_refused_with_the_route(tmp_path):
    pole = np.c_[np.zeros(50), np.zeros(50), np.linspace(0, 5, 50)]
    sparse = np.vstack([pole, [[30.0, 30.0, 0.0]]])
    with pytest.raises(SceneError, match=r"this cloud cannot make a ground; give a larger cell, or mesh the cloud"):
        cloud_surface(sparse, 0.5, 0.3, "cloud")
    (tmp_path / "empty.ply").write_text(
        "ply\nformat ascii 1.0\nelement vertex 0\nproperty float x\nproperty float y\nproperty float z\nend_header\n"
    )
    with pytest.raises(SceneError, match=r"has no finite points"):
        from acres_lidar_ros.scene.cloud_surface import read_cloud

        read_cloud(tmp_path / "empty.ply")


def test_a_las_map_written_by_laspy_becomes_a_scene(tmp_path, capsys):
    laspy = pytest.importorskip("laspy", reason="LAS/LAZ maps need the [clouds] extra (laspy)")
    points = sloped_yard()
    header = laspy.LasHeader(point_format=3, version="1.2")
    header.offsets = [0.0, 0.0, 0.0]
    header.scales = [1e-5, 1e-5, 1e-5]  # the yard's coordinates are whole multiples of 10 um
    las = laspy.LasData(header)
    las.x, las.y, las.z = points[:, 0], points[:, 1], points[:, 2]
    las.write(str(tmp_path / "map.las"))
    np.testing.assert_allclose(np.c_[laspy.read(str(tmp_path / "map.las")).xyz], points, atol=1e-9)
    out = tmp_path / "scene"
    code = cli.main(["cloud-to-scene", "--cloud", str(tmp_path / "map.las"), "--cell", "0.5", "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    report = json.loads((out / "coverage.json").read_text())
    assert report["cells"] == 40 * 40 and report["object_points"] == 400 and report["object_columns"] == 16
    tracer = Tracer(load_scene(out / "scene.json"))
    down = np.array([[0.0, 0.0, -1.0]])
    # The same surfaces as from the PCD: ground 0.05 x of the cell's lowest point, the cube's top at 2.25 m.
    assert float(tracer.cast_bare(np.array([[10.25, 3.25, 10.0]]), down)[0]) == pytest.approx(
        10 - 0.05 * 10.125, abs=1e-4
    )
    assert float(tracer.cast_bare(np.array([[6.25, 6.25, 10.0]]), down)[0]) == pytest.approx(10 - 2.25, abs=1e-4)


def test_a_file_that_is_not_las_is_refused_naming_it(tmp_path):
    pytest.importorskip("laspy", reason="LAS/LAZ maps need the [clouds] extra (laspy)")
    from acres_lidar_ros.scene.cloud_surface import read_cloud

    (tmp_path / "map.las").write_bytes(b"not a LAS file at all" * 20)
    with pytest.raises(SceneError, match=r"map\.las does not read as LAS"):
        read_cloud(tmp_path / "map.las")
