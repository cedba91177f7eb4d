"""PointCloud2: fields derived from the dtypes, organised geometry, and the round trip."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rosbags.typesys import Stores, get_typestore
from test_outputs_synthetic import STAMP_NS, make_scan

from acres_lidar_ros.errors import OutputError
from acres_lidar_ros.outputs import layouts, point_types
from acres_lidar_ros.outputs.pointcloud2 import (
    decode_pointcloud2,
    point_fields,
    pointcloud2_message,
    qos_profile_dict,
)

TYPESTORE = get_typestore(Stores.ROS2_JAZZY)


def test_point_fields_of_xyzi_and_xyzirt_match_rslidar_sdk():
    assert point_fields(point_types.XYZI) == [("x", 0, 7, 1), ("y", 4, 7, 1), ("z", 8, 7, 1), ("intensity", 12, 7, 1)]
    assert point_fields(point_types.XYZIRT)[4:] == [("ring", 16, 4, 1), ("timestamp", 18, 8, 1)]


def test_point_fields_covers_every_code_and_sub_arrays():
    dtype = np.dtype(
        [("a", "i1"), ("b", "u1"), ("c", "<i2"), ("d", "<u2"), ("e", "<i4"), ("f", "<u4"),
         ("g", "<f4"), ("h", "<f8"), ("v", "<f4", (3,))]
    )  # fmt: skip
    fields = point_fields(dtype)
    assert [code for _, _, code, _ in fields] == [1, 2, 3, 4, 5, 6, 7, 8, 7]
    assert fields[-1] == ("v", 1 + 1 + 2 + 2 + 4 + 4 + 4 + 8, 7, 3)


@pytest.mark.parametrize("bad", [np.dtype([("x", ">f4")]), np.dtype([("x", "<i8")]), np.dtype("<f4")])
def test_point_fields_rejects_what_pointcloud2_cannot_say(bad):
    with pytest.raises(OutputError):
        point_fields(bad)


@pytest.mark.parametrize("point_type", ["XYZI", "XYZIRT"])
def test_message_is_organised_columns_by_rings(point_type):
    scan = make_scan(seed=6, columns=9, rings=4)
    cloud = layouts.organised_cloud(scan, point_type)
    msg = pointcloud2_message(cloud, "lidar", STAMP_NS, TYPESTORE)
    step = {"XYZI": 16, "XYZIRT": 26}[point_type]
    assert (msg.height, msg.width, msg.point_step, msg.row_step) == (9, 4, step, 4 * step)
    assert msg.is_bigendian is False and msg.is_dense is False
    assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == (1_700_000_123, 456_789_012)
    assert msg.header.frame_id == "lidar"
    assert len(msg.data) == 9 * 4 * step
    # Row c of the data is column c: the x of cell (c, r) sits at c * row_step + r * point_step.
    data = np.asarray(msg.data, np.uint8).tobytes()
    c, r = 5, 3
    x = np.frombuffer(data, "<f4", count=1, offset=c * msg.row_step + r * msg.point_step)[0]
    beam = c * scan.rings + r
    slot = scan.returns.primary_index()[beam]
    expected = scan.points_sensor[beam, slot, 0] if scan.returns.valid[beam].any() else np.nan
    np.testing.assert_equal(np.float32(x), np.float32(expected))


@pytest.mark.parametrize("point_type", sorted(point_types.POINT_TYPES))
def test_round_trip_through_cdr(point_type):
    cloud = layouts.point_cloud(make_scan(seed=7), point_type)
    msg = pointcloud2_message(cloud, "lidar", STAMP_NS, TYPESTORE)
    raw = TYPESTORE.serialize_cdr(msg, "sensor_msgs/msg/PointCloud2")
    back = decode_pointcloud2(TYPESTORE.deserialize_cdr(raw, "sensor_msgs/msg/PointCloud2"))
    assert back.shape == cloud.shape
    assert back.tobytes() == cloud.tobytes()
    for name in cloud.dtype.names:
        np.testing.assert_array_equal(back[name], cloud[name])


def test_decoder_reads_padded_rows_and_big_endian_from_others():
    """A cloud another driver wrote: big-endian, 2 bytes of row padding."""
    field = TYPESTORE.types["sensor_msgs/msg/PointField"]
    values = np.array([[1.5, -2.0, 3.25], [4.0, 5.5, -6.0]], ">f4")  # 2 rows x 3 points, field v
    rows = [values[i].tobytes() + b"\xee\xee" for i in range(2)]
    msg = TYPESTORE.types["sensor_msgs/msg/PointCloud2"](
        header=TYPESTORE.types["std_msgs/msg/Header"](
            stamp=TYPESTORE.types["builtin_interfaces/msg/Time"](sec=1, nanosec=2), frame_id="f"
        ),
        height=2, width=3, fields=[field(name="v", offset=0, datatype=7, count=1)], is_bigendian=True,
        point_step=4, row_step=14, data=np.frombuffer(b"".join(rows), np.uint8), is_dense=True,
    )  # fmt: skip
    np.testing.assert_array_equal(decode_pointcloud2(msg)["v"], values.astype("<f4"))


def test_decoder_rejects_short_data():
    msg = pointcloud2_message(layouts.organised_cloud(make_scan(), "XYZI"), "lidar", 0, TYPESTORE)
    short = type(msg)(**{**{k: getattr(msg, k) for k in msg.__dataclass_fields__ if k != "__msgtype__"},
                         "data": msg.data[:-1]})  # fmt: skip
    with pytest.raises(OutputError, match="data bytes"):
        decode_pointcloud2(short)


def test_stamp_outside_builtin_time_is_refused():
    with pytest.raises(OutputError, match="stamp_ns -1"):
        pointcloud2_message(layouts.organised_cloud(make_scan(), "XYZI"), "lidar", -1, TYPESTORE)


def test_cloud_must_be_organised():
    with pytest.raises(OutputError, match="columns, rings"):
        pointcloud2_message(np.zeros(5, point_types.XYZI), "lidar", 0, TYPESTORE)


def test_qos_profile_is_rslidar_sdks():
    assert qos_profile_dict() == {
        "reliability": "reliable",
        "durability": "volatile",
        "history": "keep_last",
        "depth": 100,
    }


SCALARS = ["i1", "u1", "<i2", "<u2", "<i4", "<u4", "<f4", "<f8"]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.sampled_from(SCALARS), min_size=1, max_size=6),
    st.integers(1, 4),
    st.integers(1, 5),
    st.integers(0, 2**32 - 1),
)
def test_any_packed_layout_round_trips(scalars, height, width, seed):
    dtype = np.dtype([(f"f{i}", s) for i, s in enumerate(scalars)])
    raw = np.random.default_rng(seed).integers(0, 256, size=height * width * dtype.itemsize, dtype=np.uint8)
    cloud = raw.view(dtype).reshape(height, width)
    msg = pointcloud2_message(cloud, "lidar", 5, TYPESTORE)
    back = decode_pointcloud2(TYPESTORE.deserialize_cdr(TYPESTORE.serialize_cdr(msg, msg.__msgtype__), msg.__msgtype__))
    assert back.tobytes() == cloud.tobytes()
    assert [back.dtype.fields[n][1] for n in back.dtype.names] == [dtype.fields[n][1] for n in dtype.names]
