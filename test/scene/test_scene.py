"""Scene data: terrain, ground rules, shapes, builder validation and the scene file format."""

from __future__ import annotations

import json

import numpy as np
import open3d as o3d
import pytest

from acres_lidar_ros.config.material_table import CLASS_ID, MATERIAL_ID
from acres_lidar_ros.errors import SceneError
from acres_lidar_ros.scene import shapes
from acres_lidar_ros.scene.builder import SceneBuilder
from acres_lidar_ros.scene.grids import CellGrid, TerrainGrid, points_in_polygon
from acres_lidar_ros.scene.scene_file import load_scene

GRASS, SOIL, ASPHALT, CONCRETE, GRAVEL, WATER = (
    MATERIAL_ID[m] for m in ("grass", "soil", "asphalt", "concrete", "gravel", "water")
)


# --- terrain and grids ------------------------------------------------------------------------
def test_height_at_is_exact_on_a_plane_and_clamps_outside():
    a, b, c = 0.03, -0.02, 4.0
    xs = np.arange(5) * 2.0 - 3.0
    gx, gy = np.meshgrid(xs, np.arange(4) * 2.0 + 1.0)
    terrain = TerrainGrid([-3.0, 1.0], 2.0, a * gx + b * gy + c)
    rng = np.random.default_rng(0)
    x, y = rng.uniform(-3, 5, 100), rng.uniform(1, 7, 100)
    np.testing.assert_allclose(terrain.height_at(x, y), a * x + b * y + c, atol=1e-12)
    np.testing.assert_allclose(terrain.height_at(-50.0, 1.0), a * -3.0 + b * 1.0 + c)


def test_height_at_matches_the_mesh_triangles():
    rng = np.random.default_rng(1)
    terrain = TerrainGrid([0.0, 0.0], 1.0, rng.normal(size=(3, 3)))
    v, t = terrain.mesh()
    # Vertical rays down onto every triangle at random barycentric points.
    w = rng.dirichlet([1, 1, 1], size=len(t))
    p = np.einsum("tk,tkd->td", w, v[t])
    np.testing.assert_allclose(terrain.height_at(p[:, 0], p[:, 1]), p[:, 2], atol=1e-12)
    normal = np.cross(v[t[:, 1]] - v[t[:, 0]], v[t[:, 2]] - v[t[:, 0]])
    assert np.all(normal[:, 2] > 0)  # wound upwards


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(height_m=np.zeros((1, 5))), r"shape \(1, 5\): must be a 2-D grid of at least 2 x 2"),
        (dict(height_m=np.array([[0.0, 1.0], [np.nan, 0.0]])), r"height_m\[1\]\[0\] = nan: heights must be finite"),
        (dict(cell_m=0.0), r"terrain.cell_m = 0.0: must be a finite number > 0"),
        (dict(cell_m=-2.0), r"terrain.cell_m = -2.0"),
    ],
)
def test_degenerate_terrain_is_refused(kwargs, match):
    args = dict(origin_xy_m=[0.0, 0.0], cell_m=1.0, height_m=np.zeros((3, 3)))
    args.update(kwargs)
    with pytest.raises(SceneError, match=match):
        TerrainGrid(**args)


def test_cell_grid_lookup_and_fill():
    grid = CellGrid([10.0, 20.0], 2.0, np.arange(6).reshape(2, 3), fill=-1)
    x = np.array([10.0, 11.9, 12.0, 15.9, 16.0, 9.99, 13.0])
    y = np.array([20.0, 20.0, 21.0, 23.9, 20.0, 20.0, 24.0])
    assert grid.value_at(x, y).tolist() == [0, 0, 1, 5, -1, -1, -1]


def test_points_in_polygon_for_a_concave_polygon():
    ell = np.array([[0, 0], [4, 0], [4, 1], [1, 1], [1, 3], [0, 3]], float)
    x = np.array([0.5, 3.5, 2.0, 0.5, 2.0, -0.1])
    y = np.array([0.5, 0.5, 2.0, 2.5, 0.99, 1.0])
    assert points_in_polygon(x, y, ell).tolist() == [True, True, False, True, True, False]


# --- ground rules -----------------------------------------------------------------------------
def ground_scene():
    terrain = TerrainGrid([0.0, 0.0], 4.0, np.zeros((9, 9)))
    cover = np.full((8, 8), GRASS, np.uint8)
    cover[:, 4:] = SOIL
    cover[0, 0] = ASPHALT  # hard cover without a polygon becomes soil
    polygons = [
        (np.array([[8.0, 0.0], [24.0, 0.0], [24.0, 4.0], [8.0, 4.0]]), "gravel"),
        (np.array([[12.0, 0.0], [16.0, 0.0], [16.0, 8.0], [12.0, 8.0]]), "concrete"),
    ]  # painted over
    pond = np.zeros((16, 16))
    pond[8:, 8:] = 0.001  # x, y >= 16: a film of 1 mm
    pond[12:, 12:] = 0.004  # x, y >= 24: 4 mm
    wet = np.full((16, 16), 0.7)
    return SceneBuilder(
        terrain,
        CellGrid([0.0, 0.0], 4.0, cover),
        polygons,
        CellGrid([0.0, 0.0], 2.0, pond),
        CellGrid([0.0, 0.0], 2.0, wet),
    ).build()


def test_the_four_ground_rules():
    scene = ground_scene()
    x = np.array([5.0, 1.0, 9.0, 13.0, 13.0, 20.0, 6.0, 20.0, 26.0, 26.0, 100.0])
    y = np.array([5.0, 1.0, 1.0, 1.0, 6.0, 10.0, 20.0, 20.0, 26.0, 26.0, 100.0])
    material, wetness, depth = scene.ground_properties(x, y, 0.003)
    want = [GRASS, SOIL, GRAVEL, CONCRETE, CONCRETE, SOIL, GRASS, SOIL, WATER, WATER, GRASS]
    assert material.tolist() == want
    np.testing.assert_allclose(depth, [0, 0, 0, 0, 0, 0, 0, 0.001, 0.004, 0.004, 0])
    # Soil: the water model's wetness; other ground: clamp(d / 2 mm, 0, 1).
    np.testing.assert_allclose(wetness, [0, 0.7, 0, 0, 0, 0.7, 0, 0.7, 1.0, 1.0, 0])
    assert scene.ground_material_at(x, y, 0.003).tolist() == want
    np.testing.assert_allclose(scene.wetness_at(x, y, 0.003), wetness)
    np.testing.assert_allclose(scene.pond_depth_at(x, y), depth)


def test_pond_threshold_is_a_parameter_and_thin_water_wets_grass():
    scene = ground_scene()
    # At (20, 20) with 1 mm of water: soil under the default threshold, water under 0.5 mm.
    assert scene.ground_material_at(20.0, 20.0, 0.003) == SOIL
    assert scene.ground_material_at(20.0, 20.0, 0.0005) == WATER
    assert scene.wetness_at(20.0, 20.0, 0.0005) == pytest.approx(0.5)  # 1 mm / 2 mm
    assert scene.ground_material_at(26.0, 26.0, 0.005) == SOIL


# --- shapes and builder -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "mesh, volume",
    [
        (shapes.box([1.0, 2.0, 3.0]), 6.0),
        (shapes.cylinder(1.0, 2.0, 64), np.pi * 2.0),
        (shapes.sphere(2.0, 2), 4 / 3 * np.pi * 8),
        (shapes.gable_roof([4.0, 3.0], 1.0), 6.0),
        # A cone of revolution (radius 1, height 3) and a lathed cylinder (radius 1, z 0 to 2)
        (shapes.lathe(np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 3.0]]), 64), np.pi * 3.0 / 3.0),
        (shapes.lathe(np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 2.0], [0.0, 2.0]]), 64), np.pi * 2.0),
    ],
)
def test_closed_shapes_are_wound_outwards(mesh, volume):
    v, t = mesh
    a, b, c = (v[t[:, k]] for k in range(3))
    signed = np.einsum("ij,ij->i", a, np.cross(b, c)).sum() / 6.0  # divergence theorem: > 0 outwards
    assert signed == pytest.approx(volume, rel=0.04)


def test_builder_labels_every_triangle():
    b = SceneBuilder(TerrainGrid([-10.0, -10.0], 5.0, np.zeros((5, 5))))
    tree = b.add_tree([0.0, 0.0], 8.0)
    silo = b.add_cylinder([5.0, 5.0], 2.0, 6.0, "silo", material="concrete")
    scene = b.build()
    tri = scene.triangle_instance
    assert set(scene.triangle_class[tri == tree].tolist()) == {CLASS_ID["tree_trunk"], CLASS_ID["tree"]}
    assert set(scene.triangle_material[tri == silo].tolist()) == {MATERIAL_ID["concrete"]}
    assert set(scene.triangle_material[tri == 0].tolist()) == {-1}  # ground: resolved per hit
    assert scene.triangle_closed[(tri == tree) & (scene.triangle_class == CLASS_ID["tree"])].all()
    assert not scene.triangle_closed[scene.triangle_class == CLASS_ID["tree_trunk"]].any()
    assert scene.object_names[tree] == "tree_1"


@pytest.mark.parametrize(
    "call, match",
    [
        (
            lambda b: b.add_box([0, 0], [1, 1, 1], "tractor"),
            r"class = 'tractor': unknown class; allowed: other, ground",
        ),
        (lambda b: b.add_box([0, 0], [1, 1, 1], "building", material="glass"), r"material = 'glass': unknown material"),
        (lambda b: b.add_box([0, 0], [1, 0, 1], "building"), r"size_m = \[1.0, 0.0, 1.0\]: must be 3 numbers > 0"),
        (
            lambda b: b.add_crop_field([0, 0], (2, 2), "wheat", 1.0, 0.5),
            r"class = 'wheat': allowed: corn, soybean, potato",
        ),
        (lambda b: b.add_crop_field([0, 0], (1, 1), "corn", 1.0, 1.5), r"growth = 1.5"),
        (lambda b: b.add_crop_field([0, 0], (1, 1), "corn", 1.0, 0.5, cell_state=np.full((4, 4), 3)), r"cell_state"),
        (
            lambda b: b.add_polygon([[0, 0], [1, 0], [1, 1]], "water"),
            r"material = 'water': unknown material; allowed: grass",
        ),
    ],
)
def test_builder_errors_name_the_value_and_what_is_allowed(call, match):
    b = SceneBuilder(TerrainGrid([0.0, 0.0], 1.0, np.zeros((3, 3))))
    with pytest.raises(SceneError, match=match):
        call(b)


# --- scene file -------------------------------------------------------------------------------
def write_scene(tmp_path, doc, name="scene.json"):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def base_doc():
    return {
        "format": "acres_lidar_scene",
        "version": 1,
        "terrain": {"origin_xy_m": [-20.0, -20.0], "cell_m": 10.0, "height_m": "terrain.npy"},
        "cover": {"origin_xy_m": [-20.0, -20.0], "cell_m": 4.0, "material": [["grass", "soil"], ["gravel", "grass"]]},
        "polygons": [
            {"name": "road", "material": "asphalt", "vertices_xy_m": [[-20, -1], [20, -1], [20, 1], [-20, 1]]}
        ],
        "water": {
            "origin_xy_m": [-20.0, -20.0],
            "cell_m": 2.0,
            "pond_depth_m": [[0.5, 0.0]],
            "soil_wetness": [[0.2, 0.9]],
        },
        "objects": [
            {
                "type": "mesh",
                "path": "hut.ply",
                "class": "building",
                "base_xy_m": [5.0, 5.0],
                "yaw_deg": 90,
                "scale": 2.0,
            },
            {"type": "box", "class": "other", "material": "metal_bin", "base_xy_m": [0, 8], "size_m": [1, 1, 1]},
            {
                "type": "cylinder",
                "class": "silo",
                "base_xy_m": [-8, 8],
                "radius_m": 2,
                "height_m": 5,
                "cone_height_m": 1,
            },
            {"type": "tree", "base_xy_m": [8, -8], "height_m": 9},
            {"type": "shrub", "base_xy_m": [-8, -8], "height_m": 2},
            {
                "type": "crop_field",
                "class": "potato",
                "corner_xy_m": [-15, -15],
                "patches": [2, 1],
                "crop_height_m": 0.6,
                "growth": 0.5,
                "cell_state": [[0] * 8] * 3 + [[1] * 8],
            },
            {"type": "mud_clod", "base_xy_m": [0, -5], "size_m": [0.5, 0.4, 0.1]},
            {"type": "ground_cover", "base_xy_m": [0, -10], "size_m": [3, 2, 0.3], "yaw_deg": 30},
        ],
    }


@pytest.fixture()
def scene_dir(tmp_path):
    np.save(tmp_path / "terrain.npy", np.arange(25, dtype=float).reshape(5, 5) * 0.01)
    hut_v, hut_t = shapes.box([2.0, 1.0, 1.0])
    mesh = o3d.geometry.TriangleMesh(
        o3d.utility.Vector3dVector(hut_v), o3d.utility.Vector3iVector(hut_t.astype(np.int32))
    )
    o3d.io.write_triangle_mesh(str(tmp_path / "hut.ply"), mesh)
    return tmp_path


def test_load_scene_reads_every_object_type(scene_dir):
    scene = load_scene(write_scene(scene_dir, base_doc()))
    assert scene.classes_present() == {
        "ground",
        "building",
        "other",
        "silo",
        "tree_trunk",
        "tree",
        "shrub",
        "potato",
        "mud_clod",
        "ground_cover",
    }
    assert scene.terrain.height_m[1, 2] == pytest.approx(0.07)
    hut = scene.triangle_instance == 1
    hut_v = scene.vertices_m[np.unique(scene.triangles[hut])]
    # A 2 x 1 x 1 box scaled by 2 and turned 90 degrees: 2 m along x, 4 m along y, on the ground.
    np.testing.assert_allclose(np.ptp(hut_v, axis=0), [2.0, 4.0, 2.0], atol=1e-12)
    assert hut_v[:, 2].min() == pytest.approx(float(scene.height_at(5.0, 5.0)))
    assert set(scene.triangle_material[scene.triangle_instance == 2].tolist()) == {MATERIAL_ID["metal_bin"]}
    assert len(scene.crops) == 2 and scene.crops.class_id.tolist() == [CLASS_ID["potato"]] * 2
    h_max = 0.6 * (0.03 + 0.97 * 0.5)
    np.testing.assert_allclose(scene.crops.cell_top_z_m[0, 3] - scene.crops.cell_base_z_m[0, 3], 0.12 * h_max)
    assert scene.ground_material_at(0.0, 0.0, 0.003) == ASPHALT
    assert scene.ground_material_at(-19.0, -19.0, 0.003) == WATER
    assert scene.ground_material_at(-17.0, -19.0, 0.003) == GRASS
    assert scene.wetness_at(-13.0, -19.0, 0.003) == 0.0  # outside the water grid
    assert scene.ground_material_at(-13.0, -19.0, 0.003) == SOIL


@pytest.mark.parametrize(
    "edit, match",
    [
        (
            lambda d: d["objects"][0].update(path="missing.ply"),
            r"objects\[0\].path = 'missing.ply': mesh file .*missing.ply does not exist",
        ),
        (
            lambda d: d["objects"][1].update({"class": "tractor"}),
            r"objects\[1\].class = 'tractor': allowed: other, ground",
        ),
        (lambda d: d["objects"][1].update(material="glass"), r"objects\[1\].material = 'glass': allowed: other, soil"),
        (
            lambda d: d["objects"][1].update(colour="red"),
            r"objects\[1\]: unknown key 'colour' for type 'box'; allowed: base_xy_m",
        ),
        (lambda d: d["objects"][2].update(type="cone"), r"objects\[2\].type = 'cone': allowed: mesh, box"),
        (
            lambda d: d["objects"][3].update(height_m=-1),
            r"objects\[3\].height_m = -1: must be a number > 0 and <= 1e\+06",
        ),
        (
            lambda d: d["objects"][5].update({"class": "tree"}),
            r"objects\[5\].class = 'tree': allowed for crop_field: corn",
        ),
        (lambda d: d["objects"][5].update(patches=[0, 2]), r"objects\[5\].patches = \[0, 2\]: must be \[nx, ny\]"),
        (lambda d: d["objects"][1].pop("class"), r"objects\[1\].class is missing"),
        (
            lambda d: d["terrain"].update(height_m=[[0.0, 1.0]]),
            r"terrain.height_m has shape \(1, 2\): must be a 2-D grid of at least 2 x 2",
        ),
        (lambda d: d["terrain"].update(height_m=[[0.0, 1.0], [2.0, None]]), r"terrain.height_m.*must be numbers"),
        (lambda d: d["terrain"].update(cell_m=0), r"terrain.cell_m = 0: must be a number >= 0.001 and <= 1e\+06"),
        (
            lambda d: d["terrain"].update(height_m="nope.npy"),
            r"terrain.height_m = 'nope.npy': file .*nope.npy does not exist",
        ),
        (lambda d: d.pop("terrain"), r"terrain is missing"),
        (
            lambda d: d["cover"].update(material=[["grass", "lava"]]),
            r"cover.material\[0\]\[1\] = 'lava': allowed: grass, asphalt",
        ),
        (lambda d: d["polygons"][0].update(material="water"), r"polygons\[0\].material = 'water': allowed: grass"),
        (lambda d: d["polygons"][0].update(vertices_xy_m=[[0, 0], [1, 1]]), r"polygons\[0\].vertices_xy_m .*3 or more"),
        (
            lambda d: d["water"].update(soil_wetness=[[0.2, 1.5]]),
            r"soil_wetness\[0\]\[1\] = 1.5: must be a number from 0 to 1",
        ),
        (lambda d: d.update(version=2), r"version = 2: must be 1"),
    ],
)
def test_scene_file_errors_name_the_key_value_and_allowed(scene_dir, edit, match):
    doc = base_doc()
    edit(doc)
    path = write_scene(scene_dir, doc)
    with pytest.raises(SceneError, match=match) as info:
        load_scene(path)
    assert str(path) in str(info.value)


def test_missing_and_malformed_scene_files(tmp_path):
    with pytest.raises(SceneError, match=r"nothing.json: scene file does not exist"):
        load_scene(tmp_path / "nothing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{ not json")
    with pytest.raises(SceneError, match=r"bad.json' is not valid JSON"):
        load_scene(bad)


def test_empty_mesh_file_is_refused(scene_dir):
    (scene_dir / "empty.ply").write_text("ply\nformat ascii 1.0\nelement vertex 0\nelement face 0\nend_header\n")
    doc = base_doc()
    doc["objects"] = [{"type": "mesh", "path": "empty.ply", "class": "building", "base_xy_m": [0, 0]}]
    with pytest.raises(SceneError, match=r"objects\[0\].path = 'empty.ply': .*has no triangles"):
        load_scene(write_scene(scene_dir, doc))
