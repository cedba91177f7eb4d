"""A mesh object's ``materials`` map (docs/scene_format.md, "Mesh materials"): the sub-meshes of
an OBJ (by ``usemtl``) and a glTF (by primitive) keep their materials, mapped to ours and to
classes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from acres_lidar_ros.config.material_table import CLASS_ID, MATERIAL_ID
from acres_lidar_ros.errors import SceneError
from acres_lidar_ros.scene.scene_file import load_scene

FLAT = {"origin_xy_m": [-50.0, -50.0], "cell_m": 100.0, "height_m": [[0.0, 0.0], [0.0, 0.0]]}

HUT_OBJ = """mtllib hut.mtl
o hut
v 0 0 0
v 1 0 0
v 1 1 0
v 0 1 0
v 0 0 1
v 1 0 1
v 1 1 1
v 0 1 1
usemtl Wall_Brick
f 1 2 3 4
usemtl Roof_Metal
f 5 6 7
f 5 7 8
"""
HUT_MTL = "newmtl Wall_Brick\nKd 0.8 0.2 0.2\nnewmtl Roof_Metal\nKd 0.5 0.5 0.5\n"


def write_scene(tmp_path, mesh):
    path = tmp_path / "scene.json"
    path.write_text(json.dumps({"terrain": FLAT, "objects": [mesh]}))
    return path


@pytest.fixture()
def hut(tmp_path):
    (tmp_path / "hut.obj").write_text(HUT_OBJ)
    (tmp_path / "hut.mtl").write_text(HUT_MTL)
    return {"type": "mesh", "path": "hut.obj", "class": "building", "base_xy_m": [0, 0], "name": "hut"}


def materials_by_height(scene, oid):
    mine = scene.triangle_instance == oid
    z = scene.vertices_m[scene.triangles[mine]][:, :, 2].mean(axis=1)
    return {float(h): set(scene.triangle_material[mine][z == h].tolist()) for h in np.unique(z)}


def test_obj_sub_meshes_keep_their_materials(tmp_path, hut):
    scene = load_scene(write_scene(tmp_path, {**hut, "materials": {"Roof_Metal": "metal_bin"}}))
    # The quad at z = 0 is Wall_Brick (not in the map: the class's material), the two roof
    # triangles at z = 1 are Roof_Metal -> metal_bin; one object.
    assert materials_by_height(scene, 1) == {0.0: {MATERIAL_ID["building"]}, 1.0: {MATERIAL_ID["metal_bin"]}}
    assert scene.object_names == ("terrain", "hut") and int(scene.triangle_count) == 2 + 4


def test_a_material_entry_may_give_a_class_too(tmp_path, hut):
    mapping = {"Roof_Metal": {"class": "silo"}, "Wall_Brick": "concrete"}
    scene = load_scene(write_scene(tmp_path, {**hut, "materials": mapping}))
    names = scene.object_names
    assert sorted(names[1:]) == ["hut/building", "hut/silo"]
    silo, walls = (
        scene.triangle_instance == names.index("hut/silo"),
        scene.triangle_instance == names.index("hut/building"),
    )
    assert set(scene.triangle_class[silo].tolist()) == {CLASS_ID["silo"]}
    assert set(scene.triangle_material[silo].tolist()) == {MATERIAL_ID["metal_bin"]}  # the class's material
    assert set(scene.triangle_material[walls].tolist()) == {MATERIAL_ID["concrete"]}


def test_gltf_primitives_keep_their_materials_and_node_transforms(tmp_path):
    trimesh = pytest.importorskip("trimesh", reason="trimesh (the [meshes] extra) is not installed")
    body = trimesh.creation.box([1.0, 1.0, 1.0])
    body.visual = trimesh.visual.TextureVisuals(material=trimesh.visual.material.PBRMaterial(name="Body_Paint"))
    tyre = trimesh.creation.cylinder(radius=0.5, height=0.3)
    tyre.visual = trimesh.visual.TextureVisuals(material=trimesh.visual.material.PBRMaterial(name="Tyre"))
    car = trimesh.Scene()
    car.add_geometry(body, node_name="body", geom_name="body")
    car.add_geometry(
        tyre, node_name="wheel", geom_name="wheel", transform=trimesh.transformations.translation_matrix([2, 0, 0])
    )
    car.export(str(tmp_path / "car.glb"))
    mesh = {"type": "mesh", "path": "car.glb", "class": "vehicle", "base_xy_m": [10, 0], "base_z_m": 1.0}
    scene = load_scene(write_scene(tmp_path, {**mesh, "name": "car", "materials": {"Tyre": {"class": "wheel"}}}))
    names = scene.object_names
    wheel = scene.triangle_instance == names.index("car/wheel")
    v = scene.vertices_m[np.unique(scene.triangles[wheel])]
    # The wheel's node moves it 2 m along x: centred at (12, 0, 1), radius 0.5, 0.3 m thick.
    np.testing.assert_allclose(v.min(axis=0), [11.5, -0.5, 0.85], atol=1e-6)
    np.testing.assert_allclose(v.max(axis=0), [12.5, 0.5, 1.15], atol=1e-6)
    assert set(scene.triangle_class[wheel].tolist()) == {CLASS_ID["wheel"]}
    assert set(scene.triangle_material[wheel].tolist()) == {MATERIAL_ID["vehicle"]}
    body_v = scene.vertices_m[np.unique(scene.triangles[scene.triangle_instance == names.index("car/vehicle")])]
    np.testing.assert_allclose(body_v.min(axis=0), [9.5, -0.5, 0.5], atol=1e-6)


def test_bad_material_maps_name_the_file_materials(tmp_path, hut):
    with pytest.raises(
        SceneError, match=r"objects\[0\].materials = 'Roof': is no material of 'hut.obj'; its materials: "
    ):
        load_scene(write_scene(tmp_path, {**hut, "materials": {"Roof": "metal_bin"}}))
    with pytest.raises(SceneError, match=r"objects\[0\].materials.Roof_Metal.material = 'tin': allowed: other, soil"):
        load_scene(write_scene(tmp_path, {**hut, "materials": {"Roof_Metal": "tin"}}))
    with pytest.raises(SceneError, match=r"objects\[0\].materials.Roof_Metal: unknown key 'colour'"):
        load_scene(write_scene(tmp_path, {**hut, "materials": {"Roof_Metal": {"colour": "red"}}}))
