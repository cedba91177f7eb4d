"""Object poses of the scene file (docs/scene_format.md, "Object poses"): ``rpy_deg``,
``quaternion_xyzw``, a mesh's ``up_axis`` and non-uniform ``scale``, checked by where a beam
meets the placed object (its range to 1 mm)."""

from __future__ import annotations

import json
import math

import numpy as np
import open3d as o3d
import pytest

from acres_lidar_ros.errors import SceneError
from acres_lidar_ros.scene import shapes
from acres_lidar_ros.scene.object_pose import rotation_rpy
from acres_lidar_ros.scene.scene_file import load_scene
from acres_lidar_ros.tracing.trace import Tracer

FLAT = {"origin_xy_m": [-50.0, -50.0], "cell_m": 100.0, "height_m": [[0.0, 0.0], [0.0, 0.0]]}


def write_scene(tmp_path, objects, name="scene.json"):
    path = tmp_path / name
    path.write_text(json.dumps({"terrain": FLAT, "objects": objects}))
    return path


def beam_range_m(scene, origin, direction) -> float:
    d = np.asarray(direction, float)
    d = d / np.linalg.norm(d)
    return float(Tracer(scene).cast_bare(np.array([origin], float), np.array([d]))[0])


def write_mesh(path, vertices, triangles):
    mesh = o3d.geometry.TriangleMesh(
        o3d.utility.Vector3dVector(np.asarray(vertices, float)),
        o3d.utility.Vector3iVector(np.asarray(triangles, np.int32)),
    )
    assert o3d.io.write_triangle_mesh(str(path), mesh)


def y_up_pole(tmp_path, suffix):
    """A 0.2 m x 0.2 m x 3 m pole stored Y-up, as Blender exports glTF and (by default) OBJ: the
    file's (x, y, z) is the scene's (x, z, -y)."""
    v, t = shapes.box(np.array([0.2, 0.2, 3.0]))
    path = tmp_path / f"pole{suffix}"
    write_mesh(path, np.c_[v[:, 0], v[:, 2], -v[:, 1]], t)
    return path.name


@pytest.mark.parametrize("suffix", [".gltf", ".obj"])
def test_a_y_up_pole_stands_where_geometry_says(tmp_path, suffix):
    name = y_up_pole(tmp_path, suffix)
    pole = {"type": "mesh", "path": name, "class": "other", "base_xy_m": [10.0, 0.0]}
    upright = load_scene(write_scene(tmp_path, [{**pole, "up_axis": "y"}]))
    # A level beam at 1.5 m meets the pole's near face, 0.1 m before its axis at x = 10 m.
    assert beam_range_m(upright, [0, 0, 1.5], [1, 0, 0]) == pytest.approx(9.9, abs=1e-3)
    # From above, the top face is 3 m up.
    assert beam_range_m(upright, [10, 0, 10], [0, 0, -1]) == pytest.approx(7.0, abs=1e-3)
    # Read as Z-up (the default), the same file lies on the ground along +y: the beam misses it.
    lying = load_scene(write_scene(tmp_path, [pole]))
    assert beam_range_m(lying, [0, 0, 1.5], [1, 0, 0]) == math.inf
    ys = lying.vertices_m[np.unique(lying.triangles[lying.triangle_instance == 1])][:, 1]
    assert ys.min() == pytest.approx(0.0) and ys.max() == pytest.approx(3.0)


PITCH_UP = {"rpy_deg": [0.0, -90.0, 0.0]}
PITCH_UP_Q = {"quaternion_xyzw": [0.0, -math.sin(math.pi / 4), 0.0, math.cos(math.pi / 4)]}


@pytest.mark.parametrize("turn", [PITCH_UP, PITCH_UP_Q], ids=["rpy_deg", "quaternion_xyzw"])
def test_a_box_pitched_upright(tmp_path, turn):
    # A 4 x 0.2 x 0.2 box along x, its base centre at (10, 0, 2): pitching -90 deg about y takes
    # its x to +z (z from 2 - 2 to 2 + 2) and its z (0 to 0.2) to -x (x from 9.8 to 10).
    box = {"type": "box", "class": "other", "base_xy_m": [10.0, 0.0], "base_z_m": 2.0, "size_m": [4, 0.2, 0.2]}
    scene = load_scene(write_scene(tmp_path, [{**box, **turn}]))
    assert beam_range_m(scene, [0, 0, 1.0], [1, 0, 0]) == pytest.approx(9.8, abs=1e-3)
    assert beam_range_m(scene, [9.9, 0, 10], [0, 0, -1]) == pytest.approx(6.0, abs=1e-3)
    # Unturned, the box lies along x at z 2 to 2.2: the beam at 1 m passes under it.
    assert beam_range_m(load_scene(write_scene(tmp_path, [box])), [0, 0, 1.0], [1, 0, 0]) == math.inf


def test_a_cylinder_rolled_onto_its_side(tmp_path):
    # Radius 0.5 m, 6 m long, rolled 90 deg about x: its axis runs from (0, 20, 1) along -y
    # (Rx(90) takes +z to -y). A beam down at y = 17 meets its top at z = 1.5; with 64 segments the
    # flat facet at the top is within r (1 - cos(pi / 64)) = 0.6 mm of the circle.
    cylinder = {
        "type": "cylinder",
        "class": "other",
        "base_xy_m": [0.0, 20.0],
        "base_z_m": 1.0,
        "radius_m": 0.5,
        "height_m": 6.0,
        "segments": 64,
        "rpy_deg": [90.0, 0.0, 0.0],
    }
    scene = load_scene(write_scene(tmp_path, [cylinder]))
    assert beam_range_m(scene, [0, 17, 10], [0, 0, -1]) == pytest.approx(8.5, abs=1e-3)
    assert beam_range_m(scene, [0, 0, 1.0], [0, 1, 0]) == pytest.approx(14.0, abs=1e-3)  # its end cap at y = 14


def test_non_uniform_scale_and_rpy_of_a_mesh(tmp_path):
    v, t = shapes.box(np.array([1.0, 1.0, 1.0]))
    write_mesh(tmp_path / "cube.ply", v, t)
    mesh = {
        "type": "mesh",
        "path": "cube.ply",
        "class": "building",
        "base_xy_m": [0.0, 10.0],
        "scale": [2.0, 4.0, 3.0],
        "rpy_deg": [0.0, 0.0, 90.0],
    }
    scene = load_scene(write_scene(tmp_path, [mesh]))
    # Scaled to 2 x 4 x 3 then turned 90 deg: 4 m along x, 2 m along y, 3 m tall.
    assert beam_range_m(scene, [0, 0, 1.0], [0, 1, 0]) == pytest.approx(9.0, abs=1e-3)
    assert beam_range_m(scene, [-10, 10, 1.0], [1, 0, 0]) == pytest.approx(8.0, abs=1e-3)
    assert beam_range_m(scene, [0, 10, 10], [0, 0, -1]) == pytest.approx(7.0, abs=1e-3)


def test_rotation_rpy_is_the_fixed_axis_product():
    # Rz(yaw) Ry(pitch) Rx(roll) on the axes, written from the definitions.
    r = rotation_rpy(math.radians(90), 0.0, 0.0)
    np.testing.assert_allclose(r @ [0, 0, 1], [0, -1, 0], atol=1e-15)
    r = rotation_rpy(0.0, math.radians(90), 0.0)
    np.testing.assert_allclose(r @ [1, 0, 0], [0, 0, -1], atol=1e-15)
    r = rotation_rpy(math.radians(90), 0.0, math.radians(90))  # roll first, then yaw
    np.testing.assert_allclose(r @ [0, 1, 0], [0, 0, 1], atol=1e-15)
    np.testing.assert_allclose(r @ [0, 0, 1], [1, 0, 0], atol=1e-15)


@pytest.mark.parametrize(
    "edit, match",
    [
        ({"yaw_deg": 10, "rpy_deg": [0, 0, 10]}, r"objects\[0\]: yaw_deg and rpy_deg are both given; give one of"),
        ({"rpy_deg": [0, 90]}, r"objects\[0\].rpy_deg = \[0, 90\]: must be a list of 3 numbers"),
        (
            {"quaternion_xyzw": [0, 0, 0, 2]},
            r"objects\[0\].quaternion_xyzw = \[0, 0, 0, 2\]: has norm 2: must be a unit",
        ),
        ({"up_axis": "x"}, r"objects\[0\].up_axis = 'x': allowed: z, y"),
        ({"scale": [1, 0, 1]}, r"objects\[0\].scale = \[1, 0, 1\]: must be a list of 3 numbers > 0"),
        ({"scale": -1}, r"objects\[0\].scale = -1: must be a number > 0"),
    ],
)
def test_bad_poses_name_the_key_and_what_is_allowed(tmp_path, edit, match):
    v, t = shapes.box(np.array([1.0, 1.0, 1.0]))
    write_mesh(tmp_path / "cube.ply", v, t)
    path = write_scene(tmp_path, [{"type": "mesh", "path": "cube.ply", "class": "other", "base_xy_m": [0, 0], **edit}])
    with pytest.raises(SceneError, match=match) as info:
        load_scene(path)
    assert str(path) in str(info.value)


def test_up_axis_is_for_meshes_only(tmp_path):
    box = {"type": "box", "class": "other", "base_xy_m": [0, 0], "size_m": [1, 1, 1], "up_axis": "y"}
    with pytest.raises(SceneError, match=r"objects\[0\]: unknown key 'up_axis' for type 'box'"):
        load_scene(write_scene(tmp_path, [box]))
