"""The labelled outputs: the XYZIRT_labels profile's dtype and fields, the PLY
with instance labels, their round trips, the episode's instance table and ``labels``' choice of
profile. The layout's field table is written by hand from docs/outputs.md."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import plyfile
import pytest
from test_outputs_synthetic import make_scan

from acres_lidar_ros.apps.labels_cli import run_point_type
from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.outputs import layouts
from acres_lidar_ros.outputs.pcd import encode_pcd, read_pcd
from acres_lidar_ros.outputs.ply import read_ply, write_ply
from acres_lidar_ros.outputs.point_types import (
    PLY_POINT,
    PLY_POINT_LABELS,
    PROFILES,
    XYZIRT_LABELS,
    labelled_point_type,
)
from acres_lidar_ros.outputs.pointcloud2 import decode_pointcloud2, point_fields
from acres_lidar_ros.outputs.records import episode_dict
from acres_lidar_ros.scene.builder import SceneBuilder
from acres_lidar_ros.scene.grids import TerrainGrid
from acres_lidar_ros.scene.instances import instance_table

# (name, offset, numpy type) of docs/outputs.md's XYZIRT_labels: packed, 31 bytes.
LABELLED_FIELDS = [
    ("x", 0, "<f4"), ("y", 4, "<f4"), ("z", 8, "<f4"), ("intensity", 12, "<f4"), ("ring", 16, "<u2"),
    ("timestamp", 18, "<f8"), ("class", 26, "u1"), ("instance", 27, "<u4"),
]  # fmt: skip


def test_the_labelled_profile_is_one_packed_dtype_with_class_and_instance():
    assert PROFILES["XYZIRT_labels"].dtype_in("cartesian") == XYZIRT_LABELS
    got = [(name, XYZIRT_LABELS.fields[name][1], XYZIRT_LABELS.fields[name][0].str) for name in XYZIRT_LABELS.names]
    assert got == [(n, o, np.dtype(t).str) for n, o, t in LABELLED_FIELDS]
    assert XYZIRT_LABELS.itemsize == 31
    # PointField datatypes of sensor_msgs/PointField.msg: UINT8 2, UINT16 4, UINT32 6, FLOAT32 7, FLOAT64 8.
    fields = [(name, offset, datatype) for name, offset, datatype, _count in point_fields(XYZIRT_LABELS)]
    codes = {"<f4": 7, "<u2": 4, "<f8": 8, "u1": 2, "<u4": 6}
    assert fields == [(n, o, codes[t]) for n, o, t in LABELLED_FIELDS]
    # The PLY record: the spec's 31 bytes, then instance.
    assert PLY_POINT.itemsize == 31 and PLY_POINT_LABELS.itemsize == 35
    assert PLY_POINT_LABELS.names == (*PLY_POINT.names, "instance")
    assert PLY_POINT_LABELS.fields["instance"][1] == 31 and PLY_POINT_LABELS["instance"] == np.dtype("<u4")


def test_the_labelled_cloud_carries_class_and_instance_of_the_primary_return():
    scan = make_scan(seed=21)
    cloud = layouts.point_cloud(scan, "XYZIRT_labels")
    plain = layouts.point_cloud(scan, "XYZIRT")
    assert cloud.shape == (scan.columns, scan.rings)
    for name in plain.dtype.names:  # XYZIRT's fields are XYZIRT's values
        np.testing.assert_array_equal(cloud[name], plain[name], err_msg=name)
    rv = scan.returns
    beams = np.arange(scan.columns * scan.rings)
    slot = rv.primary_index()
    has = rv.valid[beams, slot]
    assert has.any() and (~has).any()
    np.testing.assert_array_equal(cloud["instance"].reshape(-1)[has], rv.instance[beams, slot][has])
    np.testing.assert_array_equal(cloud["class"].reshape(-1)[has], rv.class_id[beams, slot][has])
    assert (cloud["instance"].reshape(-1)[~has] == 2**32 - 1).all() and (cloud["class"].reshape(-1)[~has] == 0).all()
    assert cloud["instance"].max() >= 2**31  # high ids survive the packing
    # Emitters that fire at their own times: each cell's timestamp is its own, as in XYZIRT.
    fire_time_s = np.linspace(0.0, 1e-4, scan.columns * scan.rings)
    timed = dataclasses.replace(scan, fire_time_s=fire_time_s)
    stamps = layouts.point_cloud(timed, "XYZIRT_labels")["timestamp"]
    np.testing.assert_array_equal(stamps, layouts.point_cloud(timed, "XYZIRT")["timestamp"])
    expected = scan.stamp_ns * 1e-9 + np.repeat(scan.time_offset_s, scan.rings) + fire_time_s
    np.testing.assert_allclose(stamps.reshape(-1), expected, rtol=0, atol=1e-6)  # float64 at 1.7e9 s


def test_the_labelled_cloud_round_trips_through_pointcloud2_and_pcd(tmp_path):
    from acres_lidar_ros.outputs.pcd import write_pcd
    from acres_lidar_ros.outputs.pointcloud2 import default_typestore, pointcloud2_message

    scan = make_scan(seed=22)
    cloud = layouts.point_cloud(scan, "XYZIRT_labels")
    typestore = default_typestore()
    msg = pointcloud2_message(cloud, "lidar", scan.stamp_ns, typestore)
    raw = typestore.serialize_cdr(msg, "sensor_msgs/msg/PointCloud2")
    back = decode_pointcloud2(typestore.deserialize_cdr(raw, "sensor_msgs/msg/PointCloud2"))
    assert back.dtype == XYZIRT_LABELS and back.tobytes() == cloud.tobytes()
    assert (msg.point_step, msg.height, msg.width) == (31, scan.columns, scan.rings)
    header = encode_pcd(cloud).split(b"DATA binary\n")[0].decode()
    assert "FIELDS x y z intensity ring timestamp class instance\n" in header
    assert "SIZE 4 4 4 4 2 8 1 4\nTYPE F F F F U F U U\n" in header
    pcd = read_pcd(write_pcd(tmp_path / "scan.pcd", scan, cloud))
    np.testing.assert_array_equal(pcd["instance"].reshape(cloud.shape), cloud["instance"])


def test_the_ply_stays_31_bytes_and_with_labels_adds_the_instance(tmp_path):
    scan = make_scan(seed=23)
    n = int(scan.returns.valid.sum())
    beam, slot = np.nonzero(scan.returns.valid)
    plain = write_ply(tmp_path / "plain.ply", scan)
    labelled = write_ply(tmp_path / "labelled.ply", scan, labels=True)
    assert plyfile.PlyData.read(str(plain))["vertex"].data.dtype.itemsize == 31
    vertex = plyfile.PlyData.read(str(labelled))["vertex"]
    assert vertex.data.dtype.itemsize == 35 and vertex.data.dtype.names[-1] == "instance"
    assert len(vertex.data) == n
    np.testing.assert_array_equal(vertex["instance"], scan.returns.instance[beam, slot])
    header = labelled.read_bytes().split(b"end_header\n")[0].decode()
    assert header.splitlines()[-1] == "property uint instance"
    ours = read_ply(labelled)
    assert ours.dtype == PLY_POINT_LABELS
    np.testing.assert_array_equal(ours["instance"], scan.returns.instance[beam, slot])
    for name in PLY_POINT.names:  # the spec's fields are unchanged
        np.testing.assert_array_equal(ours[name], read_ply(plain)[name], err_msg=name)


def test_labels_select_the_labelled_profile_for_the_rslidar_layouts_only():
    labelled = PROFILES["XYZIRT_labels"]
    assert labelled_point_type(PROFILES["XYZI"], True) is labelled_point_type(PROFILES["XYZIRT"], True) is labelled
    assert labelled_point_type(labelled, False) is labelled_point_type(labelled, True) is labelled
    assert labelled_point_type(PROFILES["XYZI"], False) is PROFILES["XYZI"]
    assert labelled_point_type(PROFILES["ouster"], False) is PROFILES["ouster"]
    for other in ("velodyne", "ouster", "nebula", "hesai"):
        with pytest.raises(ConfigError, match=rf"--point-type '{other}' with labels: .*allowed with labels: XYZI"):
            labelled_point_type(PROFILES[other], True, "--point-type")


def test_a_run_resolves_its_point_type_name_once_into_the_published_profile():
    assert run_point_type("XYZI", True) is run_point_type("XYZIRT_labels", False) is PROFILES["XYZIRT_labels"]
    assert run_point_type("velodyne", False) is PROFILES["velodyne"]
    with pytest.raises(ConfigError, match=r"--point-type 'nebula' with labels: .*allowed with labels: XYZI"):
        run_point_type("nebula", True)
    with pytest.raises(ConfigError, match="point_type 'XYZRGB' is not a point type; allowed: XYZI, XYZIRT"):
        run_point_type("XYZRGB", True)


def test_the_episode_carries_the_instance_table_as_plain_json():
    b = SceneBuilder(TerrainGrid([-20.0, -20.0], 4.0, np.zeros((11, 11))))
    b.add_tree([0.0, 0.0], 6.0, name="oak")
    b.add_box([5.0, 5.0], [2.0, 2.0, 2.0], "building")
    table = instance_table(b.build(), [3], body=True)
    episode = json.loads(json.dumps(episode_dict(scans=1, instances=table)))
    assert episode["instances"] == {
        "columns": ["instance", "name", "class", "type"],
        "rows": [
            [0, "terrain", "ground", "terrain"],
            [1, "oak", "tree", "tree"],
            [2, "building_2", "building", "box"],
            [2**31 + 3, "vehicle_3", "vehicle", "vehicle_box"],
            [2**32 - 2, "body", "vehicle", "body"],
        ],
    }
    assert "instances" not in episode_dict(scans=1)
