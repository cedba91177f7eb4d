"""The scene file's ground raster: a GeoTIFF DEM (tifffile) or a .npy, and its bad inputs.

The DEMs are written here: known slopes, so heights and a traced range follow from geometry
(the plane z = z0 + g y under a ray), and node positions from the GeoTIFF georeferencing rules
(PixelIsArea: nodes at pixel centres; PixelIsPoint: at the tie point).
"""

from __future__ import annotations

import json
import math
import sys

import numpy as np
import pytest

from acres_lidar_ros.errors import SceneError
from acres_lidar_ros.scene import dem
from acres_lidar_ros.scene.scene_file import load_scene
from acres_lidar_ros.tracing.trace import Tracer

REASON = "tifffile (the [dem] extra) is not installed"

# GeoKeys: GTModelType 1024, GTRasterType 1025, ProjectedCSType 3072, ProjLinearUnits 3076.
PROJECTED_UTM33 = [(1024, 1), (1025, 1), (3072, 32633), (3076, 9001)]


def geo_keys(entries):
    values = [1, 1, 0, len(entries)]
    for key, value in entries:
        values += [key, 0, 1, value]
    return values


def write_geotiff(path, raster, top_left_xy=(-20.0, 20.0), cell=1.0, keys=PROJECTED_UTM33, extra=(), **kwargs):
    """A single-band GeoTIFF: raster row 0 is the north edge, (x, y) of its top-left corner."""
    tifffile = pytest.importorskip("tifffile", reason=REASON)
    tags = [
        (33550, "d", 3, (cell, cell, 0.0), True),
        (33922, "d", 6, (0.0, 0.0, 0.0, top_left_xy[0], top_left_xy[1], 0.0), True),
        (34735, "H", len(geo_keys(keys)), geo_keys(keys), True),
        *extra,
    ]
    tifffile.imwrite(path, raster, extratags=tags, **kwargs)
    return path


def scene_file(tmp_path, terrain):
    path = tmp_path / "scene.json"
    path.write_text(json.dumps({"format": "acres_lidar_scene", "version": 1, "terrain": terrain}))
    return path


def slope_north(rows=41, cols=41, z0=2.0, grade=0.1, top_y=20.0, cell=1.0, half=0.5, dtype=np.float32):
    """Raster (row 0 north) of z = z0 + grade * y at the nodes y = top_y - (row + half) cell."""
    y = top_y - (np.arange(rows) + half) * cell
    return np.repeat((z0 + grade * y)[:, None], cols, axis=1).astype(dtype)


def test_geotiff_slope_heights_and_a_traced_range(tmp_path):
    write_geotiff(tmp_path / "slope.tif", slope_north())
    scene = load_scene(scene_file(tmp_path, {"dem": "slope.tif"}))
    # PixelIsArea: node [0][0] at the south-west pixel's centre, (-20 + 0.5, 20 - 40.5).
    np.testing.assert_allclose(scene.terrain.origin_xy_m, [-19.5, -20.5])
    assert scene.terrain.cell_m == 1.0 and scene.terrain.shape == (41, 41)
    x, y = np.array([0.0, 3.3, -7.25, 12.0]), np.array([0.0, -4.4, 9.1, -15.0])
    np.testing.assert_allclose(scene.height_at(x, y), 2.0 + 0.1 * y, atol=1e-5)
    # A ray from (0, 0, 10) tilted north by theta meets z = 2 + 0.1 y at t = 8 / (cos + 0.1 sin).
    theta = math.radians(30.0)
    direction = np.array([[0.0, math.sin(theta), -math.cos(theta)]])
    t_hit = Tracer(scene).cast_bare(np.array([[0.0, 0.0, 10.0]]), direction)
    assert float(t_hit[0]) == pytest.approx(8.0 / (math.cos(theta) + 0.1 * math.sin(theta)), abs=1e-4)


def test_geotiff_pixel_is_point_and_placed_by_origin_and_offset(tmp_path):
    keys = [(1024, 1), (1025, 2), (3076, 9001)]  # PixelIsPoint: the tie point is a node
    raster = slope_north(rows=11, cols=6, half=0.0, dtype=np.int16, z0=300, grade=1.0, top_y=10.0)
    write_geotiff(tmp_path / "p.tif", raster, top_left_xy=(500_000.0, 10.0), keys=keys)
    scene = load_scene(scene_file(tmp_path, {"dem": "p.tif", "origin_xy_m": [5, -5], "height_offset_m": -300}))
    np.testing.assert_allclose(scene.terrain.origin_xy_m, [5.0, -5.0])
    # The south node row (y = 0 in the raster's CRS) is at scene y = -5, height 300 - 300 = 0.
    np.testing.assert_allclose(scene.terrain.height_m[:, 0], np.arange(11, dtype=float))
    raw = dem.read_dem(tmp_path / "p.tif")
    np.testing.assert_allclose(raw.georeferenced_origin_xy_m, [500_000.0, 0.0])


def test_geotiff_gdal_scale_offset_and_model_transformation(tmp_path):
    tifffile = pytest.importorskip("tifffile", reason=REASON)
    raster = np.array([[150, 151, 152], [140, 141, 142]], np.uint16)  # decimetres
    metadata = (
        '<GDALMetadata><Item name="SCALE" sample="0" role="scale">0.1</Item>'
        '<Item name="OFFSET" sample="0" role="offset">-10</Item></GDALMetadata>'
    )
    m = [2.0, 0, 0, 100.0, 0, -2.0, 0, 50.0, 0, 0, 0, 0, 0, 0, 0, 1]  # 2 m, top-left corner (100, 50)
    tags = [(34264, "d", 16, m, True), (34735, "H", 8, geo_keys([(1024, 1)]), True), (42112, "s", 0, metadata, True)]
    tifffile.imwrite(tmp_path / "t.tif", raster, extratags=tags)
    got = dem.read_dem(tmp_path / "t.tif")
    np.testing.assert_allclose(got.origin_xy_m, [101.0, 47.0])  # centre of the south-west pixel
    assert got.cell_m == 2.0
    np.testing.assert_allclose(got.height_m, [[4.0, 4.1, 4.2], [5.0, 5.1, 5.2]])


def test_npy_raster_rows_run_north_to_south(tmp_path):
    ys = np.array([4.0, 2.0, 0.0])  # raster row 0 is the north edge
    xs = np.array([0.0, 2.0, 4.0, 6.0])
    np.save(tmp_path / "g.npy", (0.05 * ys[:, None] + 0.02 * xs[None, :]).astype(np.float64))
    scene = load_scene(scene_file(tmp_path, {"dem": "g.npy", "origin_xy_m": [0, 0], "cell_m": 2}))
    x, y = np.array([1.0, 5.5, 3.0]), np.array([0.5, 3.0, 1.7])
    np.testing.assert_allclose(scene.height_at(x, y), 0.05 * y + 0.02 * x, atol=1e-12)


def test_deflate_compressed_geotiff_reads(tmp_path):
    write_geotiff(tmp_path / "z.tif", slope_north(rows=5, cols=5), compression="zlib")
    assert dem.read_dem(tmp_path / "z.tif").height_m.shape == (5, 5)


@pytest.mark.parametrize(
    ("raster", "match"),
    [
        (np.zeros((4, 4), np.uint8), "values of type uint8; allowed: float32, float64, int16, uint16, int32, uint32"),
        (np.zeros((4, 4), np.complex64), "values of type complex64; allowed: float32"),
        (np.zeros((4, 4), bool), "values of type bool; allowed"),
        (np.zeros((4, 4, 2), np.float32), r"shape \(4, 4, 2\): a DEM is one band"),
        (np.zeros((1, 9), np.float32), "1 x 9: a DEM needs at least 2 x 2 nodes"),
        (np.where(np.eye(4) > 0, np.nan, 1.0), r"4 NaN or infinite cells, the first at row 0, column 0 \(row 0 = north\)"),
    ],
)  # fmt: skip
def test_bad_npy_rasters_are_named(tmp_path, raster, match):
    np.save(tmp_path / "bad.npy", raster)
    path = scene_file(tmp_path, {"dem": "bad.npy", "origin_xy_m": [0, 0], "cell_m": 1})
    with pytest.raises(SceneError, match=match) as info:
        load_scene(path)
    assert str(path) in str(info.value) and "bad.npy" in str(info.value) and "terrain.dem" in str(info.value)


def test_too_large_raster_is_refused_before_it_is_read(tmp_path):
    big = np.lib.format.open_memmap(tmp_path / "big.npy", mode="w+", dtype=np.float32, shape=(4097, 4096))
    del big  # a sparse file: refused from its header
    with pytest.raises(SceneError, match=r"4097 x 4096 = 16781312 nodes; the limit is 16777216 \(4096 x 4096\)"):
        dem.read_dem(tmp_path / "big.npy", np.zeros(2), 1.0)


def test_too_large_geotiff_is_refused_before_it_is_decompressed(tmp_path):
    write_geotiff(tmp_path / "big.tif", np.zeros((4100, 4100), np.float32), compression="zlib")
    with pytest.raises(SceneError, match=r"4100 x 4100 = 16810000 nodes; the limit is 16777216"):
        dem.read_dem(tmp_path / "big.tif")


def test_geotiff_nodata_and_rgb_are_refused(tmp_path):
    raster = slope_north(rows=6, cols=6)
    raster[2, 3] = -9999
    write_geotiff(tmp_path / "hole.tif", raster, extra=[(42113, "s", 0, "-9999", True)])
    with pytest.raises(SceneError, match=r"1 NaN, infinite or no-data \(-9999\) cells, the first at row 2, column 3"):
        dem.read_dem(tmp_path / "hole.tif")
    write_geotiff(tmp_path / "rgb.tif", np.zeros((6, 6, 3), np.uint8), photometric="rgb")
    with pytest.raises(SceneError, match="has 3 bands"):
        dem.read_dem(tmp_path / "rgb.tif")


@pytest.mark.parametrize(
    ("keys", "extra_scale", "match"),
    [
        ([(1024, 2)], None, "a geographic CRS .*allowed: a projected CRS in metres"),
        ([(1024, 1), (3076, 9002)], None, "linear units are EPSG unit 9002; allowed: metres"),
        ([(1024, 1), (4099, 9003)], None, "vertical units are EPSG unit 9003; allowed: metres"),
        (PROJECTED_UTM33, (1.0, 2.0, 0.0), "pixels of 1 x 2 m; allowed: square pixels"),
    ],
)
def test_georeferencing_the_loader_does_not_take(tmp_path, keys, extra_scale, match):
    tifffile = pytest.importorskip("tifffile", reason=REASON)
    scale = extra_scale or (1.0, 1.0, 0.0)
    tags = [
        (33550, "d", 3, scale, True),
        (33922, "d", 6, (0, 0, 0, 0.0, 10.0, 0), True),
        (34735, "H", len(geo_keys(keys)), geo_keys(keys), True),
    ]
    tifffile.imwrite(tmp_path / "g.tif", slope_north(rows=4, cols=4), extratags=tags)
    with pytest.raises(SceneError, match=match):
        dem.read_dem(tmp_path / "g.tif")


def test_rotated_transformation_is_refused(tmp_path):
    tifffile = pytest.importorskip("tifffile", reason=REASON)
    m = [1.0, 0.2, 0, 0, 0.2, -1.0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]
    tifffile.imwrite(tmp_path / "r.tif", slope_north(rows=4, cols=4), extratags=[(34264, "d", 16, m, True)])
    with pytest.raises(SceneError, match="rotated, sheared or not north-up"):
        dem.read_dem(tmp_path / "r.tif")


def test_plain_tiff_needs_origin_and_cell(tmp_path):
    tifffile = pytest.importorskip("tifffile", reason=REASON)
    tifffile.imwrite(tmp_path / "plain.tif", slope_north(rows=4, cols=4))
    with pytest.raises(SceneError, match="no GeoTIFF georeferencing .*give terrain.origin_xy_m and cell_m"):
        dem.read_dem(tmp_path / "plain.tif")
    got = dem.read_dem(tmp_path / "plain.tif", np.array([1.0, 2.0]), 0.5)
    assert got.cell_m == 0.5 and got.georeferenced_origin_xy_m is None


@pytest.mark.parametrize(
    ("terrain", "match"),
    [
        ({"dem": "slope.tif", "cell_m": 2}, "node spacing is 1 m .*leave terrain.cell_m out"),
        ({"dem": "slope.tif", "height_m": [[0, 0], [0, 0]]}, "terrain has height_m and dem; give one of them"),
        ({"dem": "slope.png"}, "allowed suffixes: .tif, .tiff, .npy"),
        ({"dem": "missing.tif"}, "missing.tif' cannot be read"),
        ({"dem": 7}, "terrain.dem = 7: must be the path of a .tif, .tiff or .npy file"),
        ({"dem": "g.npy"}, "a .npy raster has no georeferencing: give terrain.origin_xy_m and cell_m"),
        ({"origin_xy_m": [0, 0], "cell_m": 1, "height_m": [[0, 0], [0, 0]], "height_offset_m": 1},
         "height_offset_m applies to terrain.dem only"),
        ({"dem": "slope.tif", "origin_xy_m": [999_999, 0]}, "nodes reach x, y = .*allowed within 1e\\+06 m"),
    ],
)  # fmt: skip
def test_bad_dem_keys_are_named(tmp_path, terrain, match):
    write_geotiff(tmp_path / "slope.tif", slope_north(rows=4, cols=4))
    (tmp_path / "slope.png").write_bytes(b"\x89PNG")
    np.save(tmp_path / "g.npy", np.zeros((3, 3)))
    with pytest.raises(SceneError, match=match):
        load_scene(scene_file(tmp_path, terrain))


def test_without_tifffile_the_error_says_how_to_install_it(tmp_path, monkeypatch):
    write_geotiff(tmp_path / "slope.tif", slope_north(rows=4, cols=4))
    monkeypatch.setitem(sys.modules, "tifffile", None)  # import tifffile now raises ImportError
    with pytest.raises(SceneError, match=r"needs the tifffile package: pip install 'acres_lidar_ros\[dem\]'") as info:
        load_scene(scene_file(tmp_path, {"dem": "slope.tif"}))
    assert isinstance(info.value.__cause__.__cause__, ImportError)  # the import error is kept


def test_a_dem_over_the_triangle_limit_names_its_key_and_the_step_that_fits(tmp_path, monkeypatch):
    from acres_lidar_ros.scene import scene_limits

    monkeypatch.setattr(scene_limits, "MAX_SCENE_TRIANGLES", 5000)  # 101 x 101 nodes: 20,000 triangles
    np.save(tmp_path / "big.npy", np.zeros((101, 101)))
    terrain = {"dem": "big.npy", "origin_xy_m": [0, 0], "cell_m": 1.0}
    with pytest.raises(SceneError) as info:
        load_scene(scene_file(tmp_path, terrain))
    message = str(info.value)
    assert "terrain.dem = 'big.npy': 101 x 101 nodes (node_step 1) make 20000 ground triangles" in message
    assert "the scene limit is 5000; give terrain.node_step: 2 (51 x 51 nodes at 2 m)" in message
    assert "or crop it to at most about 51 x 51 nodes around your drive (e.g. gdal_translate -srcwin" in message
    assert load_scene(scene_file(tmp_path, {**terrain, "node_step": 2})).triangle_count == 5000


def test_node_step_keeps_every_kth_node_for_the_traced_ground(tmp_path):
    # A ridge of 1 m on every odd column (x = 1, 3, ...): with node_step 2 only the even nodes
    # stay, so the traced ground and height_at are the flat z = 0 at k = 2 times the spacing.
    raster = np.zeros((21, 21))
    raster[:, 1::2] = 1.0
    np.save(tmp_path / "ridges.npy", raster)
    terrain = {"dem": "ridges.npy", "origin_xy_m": [0, 0], "cell_m": 1.0}
    fine = load_scene(scene_file(tmp_path, terrain))
    coarse = load_scene(scene_file(tmp_path, {**terrain, "node_step": 2}))
    assert float(fine.height_at(1.0, 5.0)) == 1.0 and float(coarse.height_at(1.0, 5.0)) == 0.0
    assert coarse.terrain.cell_m == 2.0 and coarse.terrain.height_m.shape == (11, 11)
    assert coarse.triangle_count == 2 * 10 * 10
    np.testing.assert_array_equal(coarse.terrain.extent_xy_m, [[0, 0], [20, 20]])
    down = Tracer(coarse).cast_bare(np.array([[1.0, 5.0, 10.0]]), np.array([[0.0, 0.0, -1.0]]))
    assert float(down[0]) == pytest.approx(10.0, abs=1e-4)
    for step, match in [(0, "must be an integer from 1 to 64"), (True, "must be an integer"), (30, "keep 1 x 1")]:
        with pytest.raises(SceneError, match=match):
            load_scene(scene_file(tmp_path, {**terrain, "node_step": step}))
