"""Gazebo SDF worlds in a scene file (docs/scene_format.md, "Gazebo worlds"): small worlds written
here, each shape placed by nested poses and includes, checked by where a beam meets it (its
range to 1 mm), and bad worlds refused with the element named."""

from __future__ import annotations

import json
import math

import numpy as np
import open3d as o3d
import pytest

from acres_lidar_ros.config.material_table import CLASS_ID, MATERIAL_ID
from acres_lidar_ros.errors import SceneError
from acres_lidar_ros.scene import shapes
from acres_lidar_ros.scene.scene_file import load_scene
from acres_lidar_ros.tracing.trace import Tracer

FLAT = {"origin_xy_m": [-50.0, -50.0], "cell_m": 100.0, "height_m": [[0.0, 0.0], [0.0, 0.0]]}


def beam_range_m(scene, origin, direction) -> float:
    d = np.asarray(direction, float)
    return float(Tracer(scene).cast_bare(np.array([origin], float), np.array([d / np.linalg.norm(d)]))[0])


def write_scene(tmp_path, **sdf_object):
    path = tmp_path / "scene.json"
    path.write_text(
        json.dumps({"terrain": FLAT, "objects": [{"type": "sdf_world", "path": "world.sdf", **sdf_object}]})
    )
    return path


def write_world(tmp_path, body, version="1.9"):
    (tmp_path / "world.sdf").write_text(
        f'<?xml version="1.0" ?>\n<sdf version="{version}">\n<world name="w">\n{body}\n</world>\n</sdf>\n'
    )


def visual(name, geometry, pose=""):
    pose_xml = f"<pose>{pose}</pose>" if pose else ""
    return f'<visual name="{name}">{pose_xml}<geometry>{geometry}</geometry></visual>'


BOX = "<box><size>1 1 1</size></box>"


def test_nested_poses_of_model_link_and_visual(tmp_path):
    # Model at (10, 0) turned 90 deg; its link 2 m along the model's +y, i.e. the world's -x:
    # the link at (8, 0). The visual 0.5 m up: a unit box centred at (8, 0, 0.5).
    write_world(
        tmp_path,
        f"""<gz:policies><no_default_gui_plugins>true</no_default_gui_plugins></gz:policies>
        <model name="crate"><static>true</static><pose>10 0 0 0 0 1.5707963267948966</pose>
          <link name="body"><pose>0 2 0 0 0 0</pose>{visual("v", BOX, "0 0 0.5 0 0 0")}</link>
        </model>""",
    )
    scene = load_scene(write_scene(tmp_path))
    assert beam_range_m(scene, [0, 0, 0.5], [1, 0, 0]) == pytest.approx(7.5, abs=1e-3)
    assert beam_range_m(scene, [8, 0, 10], [0, 0, -1]) == pytest.approx(9.0, abs=1e-3)
    assert scene.object_names[1] == "crate::body"


def test_each_geometry_kind_stands_where_geometry_says(tmp_path):
    cylinder = "<cylinder><radius>0.5</radius><length>6</length></cylinder>"
    write_world(
        tmp_path,
        f"""<model name="shapes">
          <link name="lying">{visual("c", cylinder, "0 20 1 1.5707963267948966 0 0")}</link>
          <link name="ball">{visual("s", "<sphere><radius>0.5</radius></sphere>", "-10 0 2 0 0 0")}</link>
          <link name="egg">{visual("e", "<ellipsoid><radii>0.2 0.3 1.5</radii></ellipsoid>", "0 -10 3 0 0 0")}</link>
          <link name="pill">{visual("c", "<capsule><radius>0.2</radius><length>0.6</length></capsule>", "-20 0 0.5 0 0 0")}</link>
          <link name="cone">{visual("c", "<cone><radius>0.5</radius><length>1</length></cone>", "-20 10 0.5 0 0 0")}</link>
          <link name="deck">{visual("p", "<plane><normal>0 0 1</normal><size>4 4</size></plane>", "20 20 2 0 0 0")}</link>
          <link name="wall">{visual("w", "<plane><normal>-1 0 0</normal><size>4 4</size></plane>", "30 0 1 0 0 0")}</link>
        </model>""",
    )
    scene = load_scene(write_scene(tmp_path))
    # Cylinder rolled onto its side along y, axis at z = 1: its top at 1.5 (a 64-gon's flat within 1 mm).
    assert beam_range_m(scene, [0, 17, 10], [0, 0, -1]) == pytest.approx(8.5, abs=1e-3)
    assert beam_range_m(scene, [0, 0, 1.0], [0, 1, 0]) == pytest.approx(17.0, abs=1e-3)  # its end at y = 17
    # Sphere and ellipsoid have a vertex at each pole: their tops at 2.5 and 4.5 m.
    assert beam_range_m(scene, [-10, 0, 10], [0, 0, -1]) == pytest.approx(7.5, abs=1e-3)
    assert beam_range_m(scene, [0, -10, 10], [0, 0, -1]) == pytest.approx(5.5, abs=1e-3)
    # Capsule (as gz-sim's shapes.sdf): top of its upper half sphere at 0.5 + 0.3 + 0.2 m, its side
    # 0.2 m from its axis; the cone's tip at 0.5 + 0.5 m, its base 0.5 m round at the ground.
    assert beam_range_m(scene, [-20, 0, 10], [0, 0, -1]) == pytest.approx(9.0, abs=1e-3)
    assert beam_range_m(scene, [-30, 0, 0.5], [1, 0, 0]) == pytest.approx(9.8, abs=1e-3)
    assert beam_range_m(scene, [-20, 10, 10], [0, 0, -1]) == pytest.approx(9.0, abs=1e-3)
    assert beam_range_m(scene, [-30, 10, 0.001], [1, 0, 0]) == pytest.approx(9.5, abs=1e-3)
    assert beam_range_m(scene, [20, 20, 10], [0, 0, -1]) == pytest.approx(8.0, abs=1e-3)  # the deck at z = 2
    assert beam_range_m(scene, [0, 0, 1.0], [1, 0, 0]) == pytest.approx(30.0, abs=1e-3)  # the wall at x = 30
    assert beam_range_m(scene, [0, 0, 3.5], [1, 0, 0]) == math.inf  # the wall ends 2 m above its centre


def write_pole_model(folder, name="pole"):
    """A model folder as Gazebo's: model.config naming model.sdf, a mesh under meshes/."""
    (folder / name / "meshes").mkdir(parents=True)
    v, t = shapes.box(np.array([0.2, 0.2, 3.0]))
    mesh = o3d.geometry.TriangleMesh(o3d.utility.Vector3dVector(v), o3d.utility.Vector3iVector(t.astype(np.int32)))
    assert o3d.io.write_triangle_mesh(str(folder / name / "meshes" / "pole.obj"), mesh)
    (folder / name / "model.config").write_text(
        f"<?xml version='1.0'?><model><name>{name}</name><sdf version='1.6'>model.sdf</sdf></model>"
    )
    (folder / name / "model.sdf").write_text(
        f"""<?xml version='1.0'?><sdf version='1.6'><model name='{name}'><pose>0 0 5 0 0 0</pose>
        <link name='post'>{visual("mesh", f"<mesh><uri>model://{name}/meshes/pole.obj</uri><scale>1 1 2</scale></mesh>")}</link>
        </model></sdf>"""
    )


@pytest.mark.parametrize("through", ["model_path", "GZ_SIM_RESOURCE_PATH", "GAZEBO_MODEL_PATH"])
def test_includes_resolve_model_uris_and_take_the_include_pose(tmp_path, monkeypatch, through):
    write_pole_model(tmp_path / "models")
    for variable in ("GZ_SIM_RESOURCE_PATH", "GAZEBO_MODEL_PATH"):
        monkeypatch.delenv(variable, raising=False)
    extra = {}
    if through == "model_path":
        extra = {"model_path": ["models"]}
    else:
        monkeypatch.setenv(through, f"/nonexistent:{tmp_path / 'models'}")
    # Two includes of one model: the include's pose replaces the model's (z 5), its name the model's.
    write_world(
        tmp_path,
        """<include><uri>model://pole</uri><name>pole_a</name><pose>10 0 0 0 0 0</pose></include>
        <model name="fence"><pose>0 10 0 0 0 0</pose>
          <include><uri>model://pole</uri><name>pole_b</name><pose>5 0 0 0 0 0</pose></include>
        </model>""",
    )
    scene = load_scene(write_scene(tmp_path, classes={"pole_a": "tree_trunk"}, **extra))
    # The mesh scaled 2 in z: 6 m tall, on the ground at (10, 0) and at (5, 10) (nested in fence).
    assert beam_range_m(scene, [0, 0, 5.0], [1, 0, 0]) == pytest.approx(9.9, abs=1e-3)
    assert beam_range_m(scene, [10, 0, 10], [0, 0, -1]) == pytest.approx(4.0, abs=1e-3)
    assert beam_range_m(scene, [5, 0, 1.0], [0, 1, 0]) == pytest.approx(9.9, abs=1e-3)
    assert scene.object_names[1:] == ("pole_a::post", "fence::pole_b::post")
    classes = [int(scene.object_class[k]) for k in (1, 2)]
    assert classes == [CLASS_ID["tree_trunk"], CLASS_ID["other"]]


def test_class_and_material_maps_by_link_or_model_name(tmp_path):
    write_world(
        tmp_path,
        f"""<model name="barn"><link name="walls">{visual("v", BOX, "0 5 0.5 0 0 0")}</link>
        <link name="roof">{visual("v", BOX, "0 5 1.5 0 0 0")}</link></model>
        <model name="tank"><link name="link">{visual("v", BOX, "0 -5 0.5 0 0 0")}</link></model>""",
    )
    scene = load_scene(
        write_scene(
            tmp_path,
            classes={"barn": "building", "tank": "silo"},
            materials={"barn::roof": "metal_bin", "walls": "concrete"},
            material="vehicle",
        )
    )
    by_name = dict(zip(scene.object_names, range(len(scene.object_names))))
    material = {n: set(scene.triangle_material[scene.triangle_instance == i].tolist()) for n, i in by_name.items()}
    assert material["barn::walls"] == {MATERIAL_ID["concrete"]} and material["barn::roof"] == {MATERIAL_ID["metal_bin"]}
    assert material["tank::link"] == {MATERIAL_ID["vehicle"]}  # the default material
    assert int(scene.object_class[by_name["tank::link"]]) == CLASS_ID["silo"]
    with pytest.raises(SceneError, match=r"objects\[0\].classes = 'bran': names no model or link of .*world.sdf"):
        load_scene(write_scene(tmp_path, classes={"bran": "building"}))
    with pytest.raises(SceneError, match=r"objects\[0\].classes.barn = 'barn': allowed: other, ground"):
        load_scene(write_scene(tmp_path, classes={"barn": "barn"}))


@pytest.mark.parametrize(
    "body, match",
    [
        (
            f'<model name="m"><link name="l">{visual("v", "<torus/>")}</link></model>',
            r"model 'm' link 'l' visual 'v': <geometry> holds <torus>: allowed one of box, cylinder, sphere, "
            r"ellipsoid, capsule, cone, plane, mesh; or name the model or link in the sdf_world's skip list",
        ),
        (
            f'<model name="m"><link name="l">{visual("v", "<heightmap><uri>h.png</uri></heightmap>")}</link></model>',
            r"<heightmap>: a heightmap is the ground: give this world as the scene file's terrain.sdf_heightmap",
        ),
        (
            f'<model name="m"><link name="l">{visual("v", "<box><size>1 -1 1</size></box>")}</link></model>',
            r"visual 'v' <box> <size> = '1 -1 1': must be 3 finite numbers > 0",
        ),
        (
            f'<model name="m"><pose>1 2 3</pose><link name="l">{visual("v", BOX)}</link></model>',
            r"model 'm' <pose> = '1 2 3': must be 6 finite numbers",
        ),
        (
            f'<model name="m"><link name="l"><pose relative_to="m2">0 0 0 0 0 0</pose>{visual("v", BOX)}</link></model>',
            r"link 'l': <pose relative_to='m2'>: frames other than the parent's are not read",
        ),
        (
            "<include><uri>model://nothing_here</uri></include>",
            r"<include> in the world: 'model://nothing_here': no folder 'nothing_here' in the model path",
        ),
        (
            "<include><uri>https://fuel.gazebosim.org/1.0/OpenRobotics/models/Oak tree</uri></include>",
            r"only model://, file:// and relative paths are read \(nothing is downloaded\)",
        ),
        (
            f'<model name="m"><link name="l">{visual("v", "<mesh><uri>cloud.pcd</uri></mesh>")}</link></model>',
            r"a point cloud is no surface: mesh it first",
        ),
        ('<model name="m"><link name="l"></link></model>', r"has no link with a <visual>"),
        ("<model name='m'><link name='l'>", r"world.sdf: does not parse as XML"),
    ],
)
def test_bad_worlds_name_the_file_and_element(tmp_path, monkeypatch, body, match):
    for variable in ("GZ_SIM_RESOURCE_PATH", "GAZEBO_MODEL_PATH"):
        monkeypatch.delenv(variable, raising=False)
    write_world(tmp_path, body)
    path = write_scene(tmp_path)
    with pytest.raises(SceneError, match=match) as info:
        load_scene(path)
    assert str(path) in str(info.value) and "objects[0].path = 'world.sdf'" in str(info.value)


def test_skip_leaves_a_model_or_link_out(tmp_path):
    write_world(
        tmp_path,
        f"""<model name="ground_plane"><link name="l">{visual("p", "<plane><size>100 100</size></plane>")}</link></model>
        <model name="odd"><link name="l">{visual("v", "<polyline><height>1</height></polyline>")}</link></model>
        <model name="crate"><link name="l">{visual("v", BOX, "5 0 0.5 0 0 0")}</link></model>""",
    )
    scene = load_scene(write_scene(tmp_path, skip=["ground_plane", "odd"]))
    assert scene.object_names[1:] == ("crate::l",)
    assert beam_range_m(scene, [0, 0, 0.5], [1, 0, 0]) == pytest.approx(4.5, abs=1e-3)


def write_collada_box(path, size_units, translate_units, unit_m):
    """A COLLADA box written with pycollada: its node moves it by ``translate_units``, and the file's
    ``<unit meter>`` is ``unit_m``."""
    collada = pytest.importorskip("collada", reason="pycollada (the [sdf] extra) is not installed")
    from collada import asset, geometry, scene, source

    v, t = shapes.box(np.asarray(size_units, float))
    mesh = collada.Collada()
    mesh.assetInfo.unitmeter = unit_m
    mesh.assetInfo.unitname = "unit"
    vert = source.FloatSource("verts", v.astype(np.float32).ravel(), ("X", "Y", "Z"))
    geom = geometry.Geometry(mesh, "box", "box", [vert])
    inputs = source.InputList()
    inputs.addInput(0, "VERTEX", "#verts")
    geom.primitives.append(geom.createTriangleSet(t.astype(np.int32).ravel(), inputs, "none"))
    mesh.geometries.append(geom)
    node = scene.Node(
        "n", children=[scene.GeometryNode(geom, [])], transforms=[scene.TranslateTransform(*translate_units)]
    )
    mesh.scenes.append(scene.Scene("s", [node]))
    mesh.scene = mesh.scenes[0]
    assert isinstance(mesh.assetInfo, asset.Asset)
    mesh.write(str(path))


def test_collada_meshes_take_their_node_transforms_and_unit(tmp_path):
    # A 100 x 100 x 300 cm box moved 500 cm along x in its file (unit 0.01 m): 1 x 1 x 3 m at x = 5.
    write_collada_box(tmp_path / "crate.dae", [100, 100, 300], [500, 0, 0], 0.01)
    write_world(
        tmp_path,
        f'<model name="m"><pose>0 4 0 0 0 0</pose><link name="l">{visual("v", "<mesh><uri>crate.dae</uri></mesh>")}</link></model>',
    )
    scene = load_scene(write_scene(tmp_path))
    assert beam_range_m(scene, [0, 4, 1.0], [1, 0, 0]) == pytest.approx(4.5, abs=1e-3)
    assert beam_range_m(scene, [5, 4, 10], [0, 0, -1]) == pytest.approx(7.0, abs=1e-3)


def test_a_skipped_include_is_not_looked_for_and_file_uris_resolve_as_gazebo_classic(tmp_path, monkeypatch):
    # Gazebo classic's worlds include model://sun (a light) and name media as file://media/...,
    # relative to GAZEBO_RESOURCE_PATH.
    for variable in ("GZ_SIM_RESOURCE_PATH", "GAZEBO_MODEL_PATH"):
        monkeypatch.delenv(variable, raising=False)
    media = tmp_path / "share" / "media" / "meshes"
    media.mkdir(parents=True)
    v, t = shapes.box(np.array([1.0, 1.0, 2.0]))
    mesh = o3d.geometry.TriangleMesh(o3d.utility.Vector3dVector(v), o3d.utility.Vector3iVector(t.astype(np.int32)))
    mesh.compute_triangle_normals()
    assert o3d.io.write_triangle_mesh(str(media / "post.stl"), mesh)
    monkeypatch.setenv("GAZEBO_RESOURCE_PATH", f"/nonexistent:{tmp_path / 'share'}")
    write_world(
        tmp_path,
        f"""<include><uri>model://sun</uri></include>
        <model name="post"><pose>6 0 0 0 0 0</pose>
          <link name="l">{visual("v", "<mesh><uri>file://media/meshes/post.stl</uri></mesh>")}</link></model>""",
    )
    scene = load_scene(write_scene(tmp_path, skip=["sun"]))
    assert beam_range_m(scene, [0, 0, 1.0], [1, 0, 0]) == pytest.approx(5.5, abs=1e-3)  # its -x face at x = 5.5
    with pytest.raises(SceneError, match=r"'model://sun': no folder 'sun' in the model path"):
        load_scene(write_scene(tmp_path))
