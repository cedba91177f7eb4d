"""Conformance of every point_type profile with the layout its consumers read.

The tables below are written by hand from the consumers' own sources (docs/outputs.md names the
repository, file and commit of each), not from ``outputs.point_types``: field names, PointField
datatype codes, byte offsets, point_step, the cloud's shape, ``is_dense`` and what a beam without
a return becomes. Each profile's cloud of a synthetic scan is then checked value by value against
the scan's arrays, and read back after a CDR round trip (rosbags typestore) three ways: the
project's decoder, a reader that does what ``sensor_msgs_py.point_cloud2.read_points`` does
(ros2/common_interfaces), and the consumer's compiled struct (each field at its table offset).
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest
from rosbags.highlevel import AnyReader
from test_outputs_synthetic import PERIOD_S, STAMP_NS, make_scan

from acres_lidar_ros.errors import ConfigError, OutputError
from acres_lidar_ros.outputs import layouts, point_types
from acres_lidar_ros.outputs.bag import BagWriter
from acres_lidar_ros.outputs.pcd import encode_pcd
from acres_lidar_ros.outputs.pointcloud2 import decode_pointcloud2, default_typestore, pointcloud2_message

TYPESTORE = default_typestore()
# sensor_msgs/msg/PointField datatype codes (PointField.msg).
U8, U16, U32, F32, F64 = 2, 4, 6, 7, 8
_NUMPY_OF_CODE = {U8: "u1", U16: "<u2", U32: "<u4", F32: "<f4", F64: "<f8"}

# (name, offset, datatype), point_step, shape, is_dense of a scan with beams without a return.
TABLES = {
    # rslidar_sdk src/source/source_pointcloud_ros.hpp: addPointField one after the other.
    "XYZI": {
        "fields": [("x", 0, F32), ("y", 4, F32), ("z", 8, F32), ("intensity", 12, F32)],
        "point_step": 16,
        "shape": "columns_by_rings",
        "is_dense": False,
    },
    "XYZIRT": {
        "fields": [
            ("x", 0, F32), ("y", 4, F32), ("z", 8, F32), ("intensity", 12, F32),
            ("ring", 16, U16), ("timestamp", 18, F64),
        ],
        "point_step": 26,
        "shape": "columns_by_rings",
        "is_dense": False,
    },
    # Our labelled profile (docs/outputs.md, "Instance labels"): XYZIRT, then class and instance.
    "XYZIRT_labels": {
        "fields": [
            ("x", 0, F32), ("y", 4, F32), ("z", 8, F32), ("intensity", 12, F32),
            ("ring", 16, U16), ("timestamp", 18, F64), ("class", 26, U8), ("instance", 27, U32),
        ],
        "point_step": 31,
        "shape": "columns_by_rings",
        "is_dense": False,
    },
    # velodyne_pointcloud src/lib/pointcloudXYZIRT.cpp (organize_cloud false): packed, dense.
    "velodyne": {
        "fields": [
            ("x", 0, F32), ("y", 4, F32), ("z", 8, F32), ("intensity", 12, F32),
            ("ring", 16, U16), ("time", 18, F32),
        ],
        "point_step": 22,
        "shape": "dense",
        "is_dense": True,
    },
    # ouster-ros include/ouster_ros/os_point.h through pcl::toROSMsg: PCL_ADD_POINT4D (16 bytes),
    # then intensity, t, reflectivity, ring, ambient, (2 bytes padding) range; EIGEN_ALIGN16 -> 48.
    "ouster": {
        "fields": [
            ("x", 0, F32), ("y", 4, F32), ("z", 8, F32), ("intensity", 16, F32), ("t", 20, U32),
            ("reflectivity", 24, U16), ("ring", 26, U16), ("ambient", 28, U16), ("range", 32, U32),
        ],
        "point_step": 48,
        "shape": "rings_by_columns",
        "is_dense": False,
    },
    # nebula nebula_core_common/point_types.hpp PointXYZIRCAEDT (alignas 16, no PCL padding).
    "nebula": {
        "fields": [
            ("x", 0, F32), ("y", 4, F32), ("z", 8, F32), ("intensity", 12, U8), ("return_type", 13, U8),
            ("channel", 14, U16), ("azimuth", 16, F32), ("elevation", 20, F32), ("distance", 24, F32),
            ("time_stamp", 28, U32),
        ],
        "point_step": 32,
        "shape": "dense",
        "is_dense": True,
    },
    # HesaiLidar_ROS_2.0 src/manager/source_driver_ros2.hpp ToRosMsg: addPointField one after the
    # other (packed), height 1, width = points (the driver writes is_dense false whatever the points;
    # ours says true: no point is NaN).
    "hesai": {
        "fields": [
            ("x", 0, F32), ("y", 4, F32), ("z", 8, F32), ("intensity", 12, F32),
            ("ring", 16, U16), ("timestamp", 18, F64),
        ],
        "point_step": 26,
        "shape": "dense",
        "is_dense": True,
    },
}  # fmt: skip

# nebula_common.hpp ReturnType (0 UNKNOWN, 1 LAST, 2 FIRST, 3 STRONGEST, 6 IDENTICAL,
# 8 SECONDSTRONGEST, 9 FIRST_STRONGEST, 10 LAST_STRONGEST) of a point by its return_flags (1 first,
# 2 strongest, 4 last, 8 second strongest): one role gives its type, first and strongest or last
# and strongest nebula's combined type, an echo that is both first and last IDENTICAL.
NEBULA_RETURN_TYPE_OF_FLAGS = {0: 0, 1: 2, 2: 3, 3: 9, 4: 1, 5: 6, 6: 10, 7: 6, 8: 8, 9: 8, 12: 8, 13: 6}

FIRST_POINT_NS = STAMP_NS - int(PERIOD_S * 1e9)  # the synthetic sweep starts one period early


def _primary_slot(flags_row, valid_row):
    for slot in range(len(valid_row)):
        if valid_row[slot] and flags_row[slot] & 2:
            return slot
    return 0


def _expected_shape(scan, table, n_points):
    return {
        "columns_by_rings": (scan.columns, scan.rings),
        "rings_by_columns": (scan.rings, scan.columns),
        "dense": (1, n_points),
    }[table["shape"]]


def _message(cloud, stamp_ns):
    msg = pointcloud2_message(cloud, "lidar", stamp_ns, TYPESTORE)
    raw = TYPESTORE.serialize_cdr(msg, "sensor_msgs/msg/PointCloud2")
    return TYPESTORE.deserialize_cdr(raw, "sensor_msgs/msg/PointCloud2")


def read_points_like_sensor_msgs_py(msg, skip_nans=False):
    """sensor_msgs_py.point_cloud2.read_points: a dtype of the fields at their offsets with
    itemsize point_step over the whole buffer; skip_nans drops points with a NaN field unless
    the cloud says is_dense."""
    dtype = np.dtype(
        {
            "names": [f.name for f in msg.fields],
            "formats": [_NUMPY_OF_CODE[f.datatype] for f in msg.fields],
            "offsets": [f.offset for f in msg.fields],
            "itemsize": msg.point_step,
        }
    )
    points = np.ndarray(shape=(msg.width * msg.height,), dtype=dtype, buffer=np.asarray(msg.data, np.uint8))
    if skip_nans and not msg.is_dense:
        keep = np.ones(len(points), bool)
        for name in dtype.names:
            keep &= ~np.isnan(points[name].astype(np.float64))
        points = points[keep]
    return points


def read_struct_field(msg, name, offset, code):
    """A field as a consumer's compiled struct reads it: at the table's offset, point_step apart."""
    data = np.asarray(msg.data, np.uint8)
    return np.ndarray(
        shape=(msg.height, msg.width),
        dtype=_NUMPY_OF_CODE[code],
        buffer=data,
        offset=offset,
        strides=(msg.row_step, msg.point_step),
    )


def _expected_points(scan, point_type, header_ns):
    """{field: (height, width) array} computed per beam from the scan's arrays."""
    rv = scan.returns
    rings, columns = scan.rings, scan.columns
    column_ns = [scan.stamp_ns + round(scan.time_offset_s[c] * 1e9) - header_ns for c in range(columns)]
    if point_type in ("velodyne", "nebula", "hesai"):
        rows = []
        for beam in range(columns * rings):
            c, r = divmod(beam, rings)
            for s in range(rv.valid.shape[1]):
                if not rv.valid[beam, s]:
                    continue
                x, y, z = scan.points_sensor[beam, s]
                d = float(np.sqrt(x * x + y * y + z * z))
                row = {"x": x, "y": y, "z": z, "ring": scan.ring_rank[r], "intensity": rv.intensity[beam, s]}
                if point_type == "velodyne":
                    row["time"] = column_ns[c] * 1e-9
                elif point_type == "hesai":
                    row["ring"] = r  # the channel index: the ring index of a rings x columns pattern
                    row["timestamp"] = STAMP_NS * 1e-9 + scan.time_offset_s[c]
                else:
                    row.update(
                        channel=scan.ring_rank[r],
                        return_type=NEBULA_RETURN_TYPE_OF_FLAGS[int(rv.return_flags[beam, s])],
                        distance=d,
                        azimuth=math.atan2(-y, x) % (2 * math.pi),  # clockwise from +x, as the Helios spins
                        elevation=math.asin(z / d),
                        time_stamp=column_ns[c],
                    )
                    del row["ring"]
                rows.append(row)
        return {k: np.array([row[k] for row in rows], np.float64)[None, :] for k in rows[0]}
    if point_type == "ouster":
        out = {
            k: np.zeros((rings, columns)) for k in ("x", "y", "z", "intensity", "t", "reflectivity", "ring", "range")
        }
        for beam in range(columns * rings):
            c, r = divmod(beam, rings)
            u = rings - 1 - int(scan.ring_rank[r])  # ouster_ros row u: 0 = the top beam
            s = _primary_slot(rv.return_flags[beam], rv.valid[beam])
            ok = rv.valid[beam, s]
            for axis, name in enumerate("xyz"):
                out[name][u, c] = scan.points_sensor[beam, s, axis] if ok else np.nan
            out["intensity"][u, c] = rv.signal[beam, s] if ok else 0
            out["reflectivity"][u, c] = rv.intensity[beam, s] if ok else 0
            out["range"][u, c] = round(rv.range_m[beam, s] * 1000) if ok else 0
            out["t"][u, c] = column_ns[c]
            out["ring"][u, c] = u
        out["ambient"] = np.zeros((rings, columns))
        return out
    out = {k: np.zeros((columns, rings)) for k in ("x", "y", "z", "intensity", "ring", "timestamp", "class")}
    out["instance"] = np.zeros((columns, rings), np.int64)
    for beam in range(columns * rings):
        c, r = divmod(beam, rings)
        s = _primary_slot(rv.return_flags[beam], rv.valid[beam])
        ok = rv.valid[beam, s]
        for axis, name in enumerate("xyz"):
            out[name][c, r] = scan.points_sensor[beam, s, axis] if ok else np.nan
        out["intensity"][c, r] = rv.intensity[beam, s] if ok else 0
        out["ring"][c, r] = scan.ring_rank[r]
        out["timestamp"][c, r] = STAMP_NS * 1e-9 + scan.time_offset_s[c]
        out["class"][c, r] = rv.class_id[beam, s] if ok else 0
        out["instance"][c, r] = int(rv.instance[beam, s]) if ok else 2**32 - 1  # no return: no instance
    if point_type == "XYZIRT_labels":
        return out
    if point_type == "XYZIRT":
        return {k: out[k] for k in ("x", "y", "z", "intensity", "ring", "timestamp")}
    return {k: out[k] for k in ("x", "y", "z", "intensity")}


@pytest.mark.parametrize("point_type", sorted(TABLES))
def test_profile_conforms_to_its_consumers_layout(point_type):
    table = TABLES[point_type]
    scan = make_scan(seed=11)
    header_ns = FIRST_POINT_NS if point_type in ("velodyne", "ouster", "nebula", "hesai") else STAMP_NS
    assert layouts.default_stamp_ns(scan, point_types.PROFILES[point_type]) == header_ns
    cloud = layouts.point_cloud(scan, point_type)
    msg = _message(cloud, header_ns)

    # The layout: names, types, offsets, point_step, row_step, height and width, is_dense.
    assert [(f.name, f.offset, f.datatype, f.count) for f in msg.fields] == [(*f, 1) for f in table["fields"]]
    n_returns = int(scan.returns.valid.sum())
    assert (msg.height, msg.width) == _expected_shape(scan, table, n_returns)
    assert (msg.point_step, msg.row_step) == (table["point_step"], msg.width * table["point_step"])
    assert len(msg.data) == msg.height * msg.row_step
    assert msg.is_bigendian is False and msg.is_dense is table["is_dense"]
    assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == divmod(header_ns, 10**9)

    # The values, from the scan's arrays, read through the consumer's struct offsets.
    expected = _expected_points(scan, point_type, header_ns)
    assert set(expected) == {name for name, _, _ in table["fields"]}
    for name, offset, code in table["fields"]:
        got = read_struct_field(msg, name, offset, code).astype(np.float64)
        tolerance = 1e-6 if code in (F32, F64) else 0
        np.testing.assert_allclose(got, expected[name], rtol=tolerance, atol=tolerance, err_msg=name)

    # No returns: NaN cells in organised layouts, dropped in dense ones.
    beams_with_return = int(scan.returns.valid.any(axis=1).sum())
    nan_cells = int(np.isnan(read_struct_field(msg, "x", 0, F32)).sum())
    if table["shape"] == "dense":
        assert nan_cells == 0 and msg.width == n_returns
    else:
        assert nan_cells == scan.columns * scan.rings - beams_with_return > 0

    # Round trips: the project's decoder and sensor_msgs_py's read_points.
    decoded = decode_pointcloud2(msg)
    assert decoded.shape == cloud.shape and decoded.tobytes() == cloud.tobytes()
    points = read_points_like_sensor_msgs_py(msg)
    assert points.shape == (cloud.size,)
    for name in points.dtype.names:
        np.testing.assert_array_equal(points[name], cloud[name].reshape(-1))
    finite = read_points_like_sensor_msgs_py(msg, skip_nans=True)
    assert len(finite) == (n_returns if table["shape"] == "dense" else beams_with_return)


def test_velodyne_time_counts_seconds_from_the_first_point():
    scan = make_scan(seed=12)
    cloud = layouts.point_cloud(scan, "velodyne")
    # Column 3 fires first (dt = -T), so its points have time 0; all are in [0, T).
    assert cloud["time"].min() == 0.0 and cloud["time"].max() < PERIOD_S
    assert np.all(cloud["time"] >= 0)


def test_ouster_rows_are_rings_from_the_top_beam():
    scan = make_scan(seed=13)
    cloud = layouts.point_cloud(scan, "ouster")
    top_ring = int(np.argmax(scan.ring_rank))  # highest elevation
    np.testing.assert_array_equal(cloud["ring"], np.arange(scan.rings)[:, None].repeat(scan.columns, axis=1))
    beam = np.arange(scan.columns) * scan.rings + top_ring
    slots = scan.returns.primary_index()[beam]
    has = scan.returns.valid[beam, slots]
    np.testing.assert_allclose(cloud["x"][0][has], scan.points_sensor[beam, slots, 0][has], rtol=1e-6)


def test_nebula_points_follow_its_spherical_convention():
    """nebula's RoboSense decoder: x = d cos(el) cos(az), y = -d cos(el) sin(az), z = d sin(el)."""
    cloud = layouts.point_cloud(make_scan(seed=14), "nebula")[0]
    d, az, el = (cloud[k].astype(np.float64) for k in ("distance", "azimuth", "elevation"))
    np.testing.assert_allclose(cloud["x"], d * np.cos(el) * np.cos(az), atol=1e-4)
    np.testing.assert_allclose(cloud["y"], -d * np.cos(el) * np.sin(az), atol=1e-4)
    np.testing.assert_allclose(cloud["z"], d * np.sin(el), atol=1e-4)
    assert np.all((az >= 0) & (az < 2 * np.pi)) and np.all(np.abs(el) <= np.pi / 2)


@pytest.mark.parametrize(("flags", "nebula_type"), sorted(NEBULA_RETURN_TYPE_OF_FLAGS.items()))
def test_nebula_return_type_of_each_role(flags, nebula_type):
    scan = make_scan(seed=15)
    flag_values = scan.returns.return_flags.copy()
    flag_values[scan.returns.valid] = flags
    scan = dataclasses.replace(scan, returns=dataclasses.replace(scan.returns, return_flags=flag_values))
    assert set(layouts.point_cloud(scan, "nebula")["return_type"].ravel()) == {nebula_type}


@pytest.mark.parametrize("point_type", ["ouster", "nebula"])
def test_unsigned_times_refuse_a_stamp_after_the_first_point(point_type):
    with pytest.raises(
        OutputError, match=rf"point_type {point_type}: column 3 fires 100000000 ns before the header stamp {STAMP_NS}"
    ):
        layouts.point_cloud(make_scan(seed=16), point_type, STAMP_NS)


def test_velodyne_times_may_be_negative_from_a_later_stamp():
    cloud = layouts.point_cloud(make_scan(seed=16), "velodyne", STAMP_NS)
    assert -PERIOD_S <= cloud["time"].min() < 0 and cloud["time"].max() < 0


@pytest.mark.parametrize(
    ("point_type", "ts_first_point", "sweep_start"),
    [("XYZI", False, False), ("XYZIRT", True, True), ("XYZIRT_labels", False, False), ("velodyne", False, True),
     ("ouster", False, True), ("nebula", True, True), ("hesai", False, True)],
)  # fmt: skip
def test_header_stamp_convention(point_type, ts_first_point, sweep_start):
    profile = point_types.PROFILES[point_type]
    assert profile.stamps_sweep_start(ts_first_point) is sweep_start
    expected = STAMP_NS - 100_000_000 if sweep_start else STAMP_NS
    assert profile.header_stamp_ns(STAMP_NS, 0.1, ts_first_point) == expected


@pytest.mark.parametrize("point_type", ["velodyne", "ouster", "nebula", "hesai"])
def test_bag_writes_each_profile_at_its_stamp(tmp_path, point_type):
    scan = make_scan(seed=17)
    with BagWriter(tmp_path / "bag", point_type) as bag:
        bag.write_scan(scan)
    with AnyReader([tmp_path / "bag"]) as reader:
        (connection,) = [c for c in reader.connections if c.topic == "/lidar/points"]
        ((_, log_time, raw),) = list(reader.messages(connections=[connection]))
        msg = reader.deserialize(raw, connection.msgtype)
    assert log_time == FIRST_POINT_NS == msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec
    assert decode_pointcloud2(msg).tobytes() == layouts.point_cloud(scan, point_type).tobytes()
    assert msg.is_dense is TABLES[point_type]["is_dense"]


@pytest.mark.parametrize("point_type", sorted(TABLES))
def test_pcd_of_each_profile_names_its_fields(point_type):
    cloud = layouts.point_cloud(make_scan(seed=18), point_type)
    header = encode_pcd(cloud).split(b"DATA binary\n")[0].decode()
    assert f"FIELDS {' '.join(name for name, _, _ in TABLES[point_type]['fields'])}\n" in header
    assert f"WIDTH {cloud.shape[1]}\nHEIGHT {cloud.shape[0]}\n" in header


@pytest.mark.parametrize("bad", ["XYZRGB", "Velodyne", "", None, 3])
def test_unknown_point_type_lists_the_profiles(bad):
    with pytest.raises(ConfigError, match=r"allowed: XYZI, XYZIRT, XYZIRT_labels, velodyne, ouster, nebula, hesai$"):
        point_types.point_profile(bad)


@pytest.mark.parametrize("point_type", sorted(TABLES))
def test_a_profile_passes_through_where_its_name_is_resolved(tmp_path, point_type):
    """``point_cloud`` and ``BagWriter`` take the profile itself as they take its name: the same
    profile, the same bytes (and ``organised_cloud`` for rslidar_sdk's)."""
    profile = point_types.PROFILES[point_type]
    assert point_types.point_profile(point_type) is point_types.point_profile(profile) is profile
    scan = make_scan(seed=19)
    by_name = layouts.point_cloud(scan, point_type)
    by_profile = layouts.point_cloud(scan, profile)
    assert by_profile.dtype == by_name.dtype == profile.dtype and by_profile.shape == by_name.shape
    assert by_profile.tobytes() == by_name.tobytes()
    later_ns = STAMP_NS + 10**9  # a given stamp too (velodyne's times go negative, the others' need none)
    if point_type in ("XYZI", "XYZIRT", "XYZIRT_labels", "velodyne", "hesai"):
        assert (
            layouts.point_cloud(scan, profile, later_ns).tobytes()
            == layouts.point_cloud(scan, point_type, later_ns).tobytes()
        )
    if point_type in ("XYZI", "XYZIRT", "XYZIRT_labels"):
        assert layouts.organised_cloud(scan, profile).tobytes() == layouts.organised_cloud(scan, point_type).tobytes()
    for name, given in (("name", point_type), ("profile", profile)):
        with BagWriter(tmp_path / name, given) as bag:
            assert bag.profile is profile
            bag.write_scan(scan)
    clouds = []
    for name in ("name", "profile"):
        with AnyReader([tmp_path / name]) as reader:
            (connection,) = [c for c in reader.connections if c.topic == "/lidar/points"]
            ((_, _, raw),) = list(reader.messages(connections=[connection]))
            clouds.append(bytes(reader.deserialize(raw, connection.msgtype).data))
    assert clouds[0] == clouds[1] == by_name.tobytes()


def test_a_profile_that_is_none_of_the_profiles_is_refused_naming_them():
    """A ``PointProfile`` built by hand (here ``XYZI`` with another dtype) is no profile the
    layouts can fill: the ``ConfigError`` of an unknown name, not a wrong cloud."""
    odd = dataclasses.replace(point_types.PROFILES["XYZI"], dtype=point_types.XYZIRT)
    for fill in (layouts.point_cloud, layouts.organised_cloud):
        with pytest.raises(ConfigError, match=r"is not a point type; allowed: XYZI, XYZIRT, XYZIRT_labels, velodyne"):
            fill(make_scan(), odd)


# Ouster's published lidar-range-to-XYZ (ouster-sdk ``ouster_core/src/xyzlut.cpp`` ``make_xyz_lut``;
# the OS1 user manual's "Lidar Range to XYZ"): for pixel i of measurement m of W,
#   x = (r - n) cos(theta_e + theta_a) cos(phi) + n cos(theta_e)
#   y = (r - n) sin(theta_e + theta_a) cos(phi) + n sin(theta_e)
#   z = (r - n) sin(phi)
# theta_e = 2 pi (1 - m / W), theta_a = -2 pi azimuth_i / 360, phi = 2 pi altitude_i / 360, r the
# packet's range, from the lidar origin, and n = lidar_origin_to_beam_origin_mm. The gen-1 OS1-64
# defaults (ouster-sdk ``sensor_info.cpp``: GEN1_AZIMUTH_ANGLES, default_lidar_origin_to_beam_origin):
OS1_BEAM_AZIMUTH_DEG = np.tile([3.164, 1.055, -1.055, -3.164], 16)
OS1_BEAM_ORIGIN_M = 0.015806


def _ouster_xyz(range_m, altitude_deg, width):
    """(rings, width, 3) points of Ouster's formula for a (rings, width) range image (m)."""
    theta_e = 2 * np.pi * (1 - np.arange(width) / width)[None, :]
    theta_a = -np.radians(OS1_BEAM_AZIMUTH_DEG)[:, None]
    phi = np.radians(np.asarray(altitude_deg))[:, None]
    n, r = OS1_BEAM_ORIGIN_M, range_m
    return np.stack(
        [
            (r - n) * np.cos(theta_e + theta_a) * np.cos(phi) + n * np.cos(theta_e),
            (r - n) * np.sin(theta_e + theta_a) * np.cos(phi) + n * np.sin(theta_e),
            (r - n) * np.sin(phi),
        ],
        axis=-1,
    )


def test_ouster_range_is_ouster_ros_range_from_the_lidar_origin(plane_tracer):
    """ouster_ros publishes the packet's range, which counts from the lidar origin: Ouster's
    formula applied to our cloud's ``range`` (and the OS1's beam angles) gives the cloud's own
    points, within the 1 mm step; a range from the beam origin would miss them by n = 15.8 mm."""
    from acres_lidar_ros.config.sensors import load_sensor_config
    from acres_lidar_ros.outputs.shaping import as_shaped, slice_scan
    from acres_lidar_ros.scan.scan_types import ScanOptions
    from acres_lidar_ros.scan.scanner import Scanner
    from acres_lidar_ros.sensor.poses import PoseHistory

    config = load_sensor_config("os1_64").with_overrides({"sub_rays": 1, "position_flu_m": [0.0, 0.0, 1.9]})
    poses = PoseHistory.from_arrays(np.array([0.0, 10.0]), np.zeros((2, 3)), np.tile([0.0, 0.0, 0.0, 1.0], (2, 1)))
    scan = Scanner(config, tracer=plane_tracer, options=ScanOptions(seed=3)).scan(poses, STAMP_NS)
    cloud = layouts.point_cloud(scan, "ouster")
    has = cloud["range"] > 0
    assert 10_000 < has.sum() < has.size  # the ground, and the sky above it
    sensors_file = json.loads((Path(__file__).resolve().parents[2] / "config" / "sensors_os1_64.json").read_text())
    altitude_deg = sensors_file["lidar"]["emitters"]["states"][0]["elevation_deg"]  # Ouster's, pixel i = row i
    expected = _ouster_xyz(cloud["range"] * 1e-3, altitude_deg, cloud.shape[1])
    ours = np.stack([cloud[k] for k in "xyz"], axis=-1).astype(np.float64)
    error_m = np.linalg.norm(expected - ours, axis=-1)[has]
    assert error_m.max() <= 0.0005 + 1e-5  # half the 1 mm step, plus float32 x, y, z at 60 m
    assert np.isnan(ours[~has]).all()
    # A slice of the scan carries the same ranges as its columns of the whole cloud.
    part = slice_scan(as_shaped(scan), 4, config.period_s)[2]
    np.testing.assert_array_equal(layouts.point_cloud(part, "ouster")["range"], cloud["range"][:, part.column_ids])
