"""Scene files, their .npy and mesh files, and box tracks a fuzzer found wrong."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from acres_lidar_ros.errors import SceneError
from acres_lidar_ros.scene import scene_limits
from acres_lidar_ros.scene.box_tracks import load_box_tracks
from acres_lidar_ros.scene.scene_file import load_scene


def doc(**top):
    base = {"terrain": {"origin_xy_m": [0, 0], "cell_m": 10.0, "height_m": [[0, 0], [0, 0]]}}
    base.update(top)
    return base


def write(tmp_path, data, name="scene.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


def box(**keys):
    return {"type": "box", "class": "building", "base_xy_m": [5, 5], "size_m": [2, 2, 2], **keys}


def refused(tmp_path, data, match):
    with pytest.raises(SceneError, match=match) as info:
        load_scene(write(tmp_path, data))
    assert str(tmp_path / "scene.json") in str(info.value)  # every message names the file
    return info.value


def test_a_raster_cell_too_small_for_the_polygons_is_refused_before_allocating(tmp_path):
    polygon = {"material": "asphalt", "vertices_xy_m": [[0, 0], [200, 0], [200, 200]]}
    refused(
        tmp_path,
        doc(polygons=[polygon], polygon_raster_cell_m=0.01),
        r"polygon_raster_cell_m = 0.01: the polygons span 4(\.\d+)?e\+08 raster cells: the limit is 33554432",
    )
    refused(tmp_path, doc(polygons=[polygon], polygon_raster_cell_m=1e-300), r"polygon_raster_cell_m = 1e-300: must be")
    refused(tmp_path, doc(polygons=[polygon], polygon_raster_cell_m=1e-4), r"polygon_raster_cell_m = 0.0001: must be")


def test_polygon_work_is_limited(tmp_path):
    ring = np.linspace(0, 2 * np.pi, 2000, endpoint=False)
    vertices = np.stack([500 + 500 * np.cos(ring), 500 + 500 * np.sin(ring)], 1).tolist()
    polygons = [{"material": "gravel", "vertices_xy_m": vertices}] * 10
    refused(
        tmp_path,
        doc(polygons=polygons, polygon_raster_cell_m=0.25),
        r"polygons\[\d\]\.vertices_xy_m: the polygons need",
    )


def test_grid_cells_smaller_than_the_limit_are_refused(tmp_path):
    refused(tmp_path, doc(terrain={"origin_xy_m": [0, 0], "cell_m": 1e-300, "height_m": [[0, 0], [0, 0]]}), r"cell_m")


@pytest.mark.parametrize("segments", [2, 20_000_000, 16.5, True, "16"])
def test_cylinder_segments_are_bounded(tmp_path, segments):
    cylinder = {"type": "cylinder", "class": "silo", "base_xy_m": [0, 0], "radius_m": 1, "height_m": 2}
    refused(
        tmp_path,
        doc(objects=[{**cylinder, "segments": segments}]),
        rf"objects\[0\]\.segments = .*: must be an integer from 3 to {scene_limits.MAX_CYLINDER_SEGMENTS}",
    )


def test_crop_patches_are_bounded_over_all_fields(tmp_path):
    field = {"type": "crop_field", "class": "corn", "corner_xy_m": [0, 0], "crop_height_m": 2, "growth": 1}
    refused(
        tmp_path,
        doc(objects=[{**field, "patches": [100000, 100000]}]),
        r"objects\[0\]\.patches = \[100000, 100000\]: the crop fields reach 10000000000 patches: the limit is 1000000",
    )
    refused(
        tmp_path,
        doc(objects=[{**field, "patches": [1000, 600]}, {**field, "patches": [1000, 600]}]),
        r"objects\[1\]\.patches = .*the crop fields reach 1200000 patches",
    )


def test_the_scene_triangle_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(scene_limits, "MAX_SCENE_TRIANGLES", 100)  # terrain 2, each box 12
    refused(
        tmp_path,
        doc(objects=[box() for _ in range(10)]),
        r"objects\[8\]: the scene reaches 110 triangles: the limit is 100",
    )


@pytest.mark.parametrize("kind", [["box"], {"box": 1}, 3, None])
def test_an_unhashable_or_odd_type_is_refused(tmp_path, kind):
    refused(tmp_path, doc(objects=[{**box(), "type": kind}]), r"objects\[0\]\.type = .*: allowed: mesh, box")


@pytest.mark.parametrize(
    "key, value",
    [
        ("roof_height_m", 1e39),
        ("roof_height_m", 10**400),
        ("yaw_deg", 1e300),
        ("base_z_m", -1e7),
        ("size_m", [1e39, 1, 1]),
        ("base_xy_m", [0, 10**30]),
    ],
)
def test_values_beyond_the_scene_limit_are_refused(tmp_path, key, value):
    refused(tmp_path, doc(objects=[box(**{key: value})]), rf"objects\[0\]\.{key} = .*1e\+06")


def test_heights_beyond_the_limit_are_refused_in_grids(tmp_path):
    data = doc()
    data["terrain"]["height_m"] = [[0, 0], [0, 1e39]]
    refused(tmp_path, data, r"terrain\.height_m\[1\]\[1\] = 1e\+39: must be finite numbers from -1e\+06 to 1e\+06")


def test_no_silent_truncation_of_integer_grids(tmp_path):
    field = {"type": "crop_field", "class": "corn", "corner_xy_m": [0, 0], "crop_height_m": 2, "growth": 1}
    state = [[0] * 4 for _ in range(4)]
    state[2][3] = 0.9
    refused(
        tmp_path,
        doc(objects=[{**field, "patches": [1, 1], "cell_state": state}]),
        r"objects\[0\]\.cell_state\[2\]\[3\] = 0\.9: must be whole numbers from 0 to 255 \(never rounded\)",
    )
    np.save(tmp_path / "cover.npy", np.array([[2.0, 2.7], [2.0, 2.0]]))
    refused(
        tmp_path,
        doc(cover={"origin_xy_m": [0, 0], "cell_m": 4, "material": "cover.npy"}),
        r"cover\.material\[0\]\[1\] = 2\.7: must be whole numbers",
    )
    np.save(tmp_path / "cover.npy", np.array([[2.0, 4.0], [5.0, 3.0]]))  # whole numbers in a float file: fine
    scene = load_scene(write(tmp_path, doc(cover={"origin_xy_m": [0, 0], "cell_m": 4, "material": "cover.npy"})))
    assert scene.cover.values.dtype == np.uint8
    np.testing.assert_array_equal(scene.cover.values, [[2, 4], [5, 3]])  # the file's numbers, row i = y


@pytest.mark.parametrize("version", [True, 1.0, "1", 2, None])
def test_version_must_be_the_integer_one(tmp_path, version):
    refused(tmp_path, doc(version=version), r"version = .*: must be 1 \(an integer, not true or 1\.0\)")


def test_npy_files_are_checked_before_their_values_are_read(tmp_path):
    os.mkfifo(tmp_path / "pipe.npy")
    refused(
        tmp_path,
        doc(terrain={"origin_xy_m": [0, 0], "cell_m": 1, "height_m": "pipe.npy"}),
        r"terrain\.height_m = 'pipe.npy': \.npy file .* is a FIFO",
    )
    header = np.lib.format
    with open(tmp_path / "huge.npy", "wb") as f:  # a header that claims 10^10 values, and no data
        header.write_array_header_1_0(f, {"descr": "<f8", "fortran_order": False, "shape": (100000, 100000)})
    refused(
        tmp_path,
        doc(terrain={"origin_xy_m": [0, 0], "cell_m": 1, "height_m": "huge.npy"}),
        r"huge.npy has shape \(100000, 100000\): the limit is 16777216 values",
    )
    np.save(tmp_path / "objects.npy", np.array([[None, 1]], dtype=object), allow_pickle=True)
    refused(
        tmp_path,
        doc(terrain={"origin_xy_m": [0, 0], "cell_m": 1, "height_m": "objects.npy"}),
        r"objects.npy holds Python objects: must be numbers",
    )
    (tmp_path / "text.npy").write_text("not an npy file")
    refused(
        tmp_path,
        doc(terrain={"origin_xy_m": [0, 0], "cell_m": 1, "height_m": "text.npy"}),
        r"cannot read .*text.npy as \.npy",
    )
    np.save(tmp_path / "bools.npy", np.ones((2, 2), bool))
    refused(
        tmp_path,
        doc(terrain={"origin_xy_m": [0, 0], "cell_m": 1, "height_m": "bools.npy"}),
        r"terrain\.height_m has values of type bool: must be numbers",
    )


def test_mesh_files_must_be_regular_mesh_files(tmp_path):
    os.mkfifo(tmp_path / "pipe.ply")
    mesh = {"type": "mesh", "class": "building", "base_xy_m": [0, 0]}
    refused(
        tmp_path, doc(objects=[{**mesh, "path": "pipe.ply"}]), r"objects\[0\]\.path = 'pipe.ply': mesh file .* FIFO"
    )
    refused(tmp_path, doc(objects=[{**mesh, "path": "scene.json"}]), r"must be a mesh file ending \.ply, \.obj")
    refused(tmp_path, doc(objects=[{**mesh, "path": ""}]), r"objects\[0\]\.path = '': must be a path")


def test_inline_grids_of_the_wrong_kind(tmp_path):
    for value, match in [
        ([[0, 0], [0]], r"must be a rectangular 2-D list"),
        ([[0, "a"], [0, 0]], r"has values of type <U"),
        ([[0, None], [0, 0]], r"has values of type object"),
        ([[]], r"has shape \(1, 0\): must be a non-empty 2-D grid"),
        (7, r"terrain\.height_m = 7: must be a 2-D list"),
    ]:
        refused(tmp_path, doc(terrain={"origin_xy_m": [0, 0], "cell_m": 1, "height_m": value}), match)
    refused(
        tmp_path,
        doc(cover={"origin_xy_m": [0, 0], "cell_m": 4, "material": [[1, 2]]}),
        r"cover\.material has values of type int64: must be material names",
    )


def test_a_scene_file_of_bad_bytes_or_depth(tmp_path):
    path = tmp_path / "scene.json"
    path.write_bytes(b'{"terrain": "\xc3"}')
    with pytest.raises(SceneError, match=r"byte 0xc3 at offset 13 is not UTF-8"):
        load_scene(path)
    path.write_text('{"objects": ' + "[" * 3000 + "]" * 3000 + "}")
    with pytest.raises(SceneError, match=r"nest 3001 levels deep"):
        load_scene(path)
    with pytest.raises(SceneError, match=r"'/dev/zero' is a character device"):
        load_scene("/dev/zero")


def track(**extra):
    sample = {"t_s": 0.0, "centre_m": [0, 0, 0], "quaternion_xyzw": [0, 0, 0, 1], "half_extents_m": [1, 1, 1]}
    return {"tracks": [{"object_id": 1, "samples": [{**sample, **extra.pop("sample", {})}], **extra}]}


@pytest.mark.parametrize(
    "data, match",
    [
        (track(colour="red"), r"tracks\[0\]\.colour: unknown key; allowed: object_id, samples"),
        (track(sample={"speed": 1}), r"samples\[0\]: unknown key 'speed'; expected exactly t_s"),
        (track(sample={"t_s": 10**400}), r"samples\[0\]\.t_s = \[1000.*: expected 1 finite numbers from -1e\+09"),
        (track(sample={"centre_m": [0, 0, 1e39]}), r"centre_m = \[0, 0, 1e\+39\]: expected 3 finite numbers"),
        (track(sample={"half_extents_m": [1, 1, "1"]}), r"half_extents_m = \[1, 1, '1'\]: expected 3 finite"),
        ({"tracks": [7]}, r"tracks\[0\] = 7: expected an object with object_id and samples"),
        ({"tracks": [{"object_id": 1, "samples": [[]]}]}, r"samples\[0\] = \[\]: expected an object with t_s"),
        (
            {"tracks": [{"object_id": 10**30, "samples": []}]},
            r"object_id = 1000.*: expected an integer 0 to 2147483631",
        ),
        ({"tracks": [{"object_id": 1.0, "samples": []}]}, r"object_id = 1\.0: expected an integer 0 to 2147483631"),
    ],
)
def test_box_tracks_refuse_unknown_keys_and_odd_values(tmp_path, data, match):
    path = tmp_path / "tracks.json"
    path.write_text(json.dumps(data))
    with pytest.raises(SceneError, match=match):
        load_box_tracks(path)


def test_box_tracks_of_bad_bytes_depth_or_kind(tmp_path):
    path = tmp_path / "tracks.json"
    path.write_bytes(b'{"tracks": ["\xff"]}')
    with pytest.raises(SceneError, match=r"box tracks .* byte 0xff at offset 13 is not UTF-8"):
        load_box_tracks(path)
    path.write_text('{"tracks": ' + "[" * 1200 + "]" * 1200 + "}")
    with pytest.raises(SceneError, match=r"nest 1201 levels deep"):
        load_box_tracks(path)
    with pytest.raises(SceneError, match=r"box tracks '/dev/zero' is a character device"):
        load_box_tracks("/dev/zero")


def test_the_scene_format_states_the_limits(repo_root):
    docs = (repo_root / "docs" / "scene_format.md").read_text()
    block = docs.split("<!-- scene-limits-start -->\n", 1)[1].split("\n<!-- scene-limits-end -->", 1)[0]
    assert block == scene_limits.markdown()


def test_corrupt_and_non_finite_mesh_files_are_refused(tmp_path):
    mesh = {"type": "mesh", "class": "building", "base_xy_m": [0, 0]}
    (tmp_path / "junk.ply").write_bytes(b"ply\nformat binary_little_endian 1.0\n\xff\x00\x13garbage")
    refused(
        tmp_path, doc(objects=[{**mesh, "path": "junk.ply"}]), r"objects\[0\]\.path = 'junk.ply': .*has no triangles"
    )
    (tmp_path / "nan.obj").write_text("v 0 0 0\nv 1 0 0\nv nan 1 0\nf 1 2 3\n")
    refused(tmp_path, doc(objects=[{**mesh, "path": "nan.obj"}]), r"nan.obj has vertices that are not finite")
    (tmp_path / "far.obj").write_text("v 0 0 0\nv 1 0 0\nv 0 1e7 0\nf 1 2 3\n")
    refused(tmp_path, doc(objects=[{**mesh, "path": "far.obj"}]), r"far.obj has vertices .* beyond 1e\+06 m")
