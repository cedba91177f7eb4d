"""rosbag2 MCAP bags: read back with rosbags and with mcap + mcap_ros2 (an independent decoder)."""

from __future__ import annotations

import numpy as np
import pytest
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory
from rosbags.rosbag2 import Reader
from rosbags.typesys import Stores, get_typestore
from test_outputs_synthetic import STAMP_NS, make_scan

from acres_lidar_ros.errors import ConfigError, OutputError, PoseError
from acres_lidar_ros.outputs import layouts
from acres_lidar_ros.outputs.bag import BagWriter
from acres_lidar_ros.outputs.pointcloud2 import decode_pointcloud2

TYPESTORE = get_typestore(Stores.ROS2_JAZZY)
MOUNT_POSITION_M = (2.5, 0.0, 2.039)
MOUNT_QUATERNION_XYZW = (-0.013126, 0.046399, 0.000610, 0.998837)  # roll -1.518, pitch 5.317 deg
BASE_POSES = [  # stamp_ns, position, quaternion, linear, angular
    (STAMP_NS - 50_000_000, (10.0, -3.0, 0.0), (0.0, 0.0, 0.1986693, 0.9800666), (2.0, 0.0, 0.0), (0.0, 0.0, 0.5)),
    (STAMP_NS, (10.1, -2.98, 0.0), (0.0, 0.0, 0.2229666, 0.9748254), (2.1, 0.1, 0.0), (0.0, 0.0, 0.4)),
]


def _unit(q):
    q = np.asarray(q, np.float64)
    return q / np.linalg.norm(q)


def _write_drive(bag, scan):
    bag.write_static_mount(BASE_POSES[0][0], MOUNT_POSITION_M, _unit(MOUNT_QUATERNION_XYZW))
    for stamp_ns, position, quaternion, linear, angular in BASE_POSES:
        bag.write_clock(stamp_ns)
        bag.write_base_pose(stamp_ns, position, _unit(quaternion), linear, angular)
    bag.write_scan(scan)


def _read_rosbags(path):
    with Reader(path) as reader:
        qos = {c.topic: c.ext.offered_qos_profiles for c in reader.connections}
        messages = [(c.topic, t, TYPESTORE.deserialize_cdr(raw, c.msgtype)) for c, t, raw in reader.messages()]
    return messages, qos


def _read_mcap(path):
    (mcap_file,) = path.glob("*.mcap")
    with open(mcap_file, "rb") as handle:
        reader = make_reader(handle, decoder_factories=[DecoderFactory()])
        return [(ch.topic, m.log_time, decoded) for _, ch, m, decoded in reader.iter_decoded_messages()]


def _check_messages(messages, scan, point_type):
    by_topic = {}
    for topic, log_time, msg in messages:
        by_topic.setdefault(topic, []).append((log_time, msg))
    assert {t: len(v) for t, v in by_topic.items()} == {
        "/tf_static": 1, "/clock": 2, "/tf": 2, "/odom": 2, "/lidar/points": 1,
    }  # fmt: skip

    (_, static), = by_topic["/tf_static"]  # fmt: skip
    (mount,) = static.transforms
    assert (mount.header.frame_id, mount.child_frame_id) == ("base_footprint", "lidar")
    t, q = mount.transform.translation, mount.transform.rotation
    np.testing.assert_allclose([t.x, t.y, t.z], MOUNT_POSITION_M)
    np.testing.assert_allclose([q.x, q.y, q.z, q.w], _unit(MOUNT_QUATERNION_XYZW))

    for (stamp_ns, position, quaternion, linear, angular), (t_tf, tf), (t_odom, odom), (t_clock, clock) in zip(
        BASE_POSES, by_topic["/tf"], by_topic["/odom"], by_topic["/clock"]
    ):
        assert t_tf == t_odom == t_clock == stamp_ns
        assert clock.clock.sec * 10**9 + clock.clock.nanosec == stamp_ns
        (base,) = tf.transforms
        assert (base.header.frame_id, base.child_frame_id) == ("odom", "base_footprint")
        assert base.header.stamp.sec * 10**9 + base.header.stamp.nanosec == stamp_ns
        tr, ro = base.transform.translation, base.transform.rotation
        np.testing.assert_allclose([tr.x, tr.y, tr.z], position)
        np.testing.assert_allclose([ro.x, ro.y, ro.z, ro.w], _unit(quaternion))
        assert (odom.header.frame_id, odom.child_frame_id) == ("odom", "base_footprint")
        p, o = odom.pose.pose.position, odom.pose.pose.orientation
        np.testing.assert_allclose([p.x, p.y, p.z, o.x, o.y, o.z, o.w], [*position, *_unit(quaternion)])
        lin, ang = odom.twist.twist.linear, odom.twist.twist.angular
        np.testing.assert_allclose([lin.x, lin.y, lin.z, ang.x, ang.y, ang.z], [*linear, *angular])

    (t_cloud, cloud_msg), = by_topic["/lidar/points"]  # fmt: skip
    step = {"XYZI": 16, "XYZIRT": 26}[point_type]
    assert t_cloud == STAMP_NS
    assert cloud_msg.header.frame_id == "lidar"
    assert (cloud_msg.header.stamp.sec, cloud_msg.header.stamp.nanosec) == divmod(STAMP_NS, 10**9)
    assert (cloud_msg.height, cloud_msg.width) == (scan.columns, scan.rings)
    assert (cloud_msg.point_step, cloud_msg.row_step) == (step, scan.rings * step)
    assert not cloud_msg.is_bigendian and not cloud_msg.is_dense
    fields = [(f.name, f.offset, f.datatype, f.count) for f in cloud_msg.fields]
    expected_fields = [("x", 0, 7, 1), ("y", 4, 7, 1), ("z", 8, 7, 1), ("intensity", 12, 7, 1)]
    if point_type == "XYZIRT":
        expected_fields += [("ring", 16, 4, 1), ("timestamp", 18, 8, 1)]
    assert fields == expected_fields
    assert bytes(cloud_msg.data) == layouts.organised_cloud(scan, point_type).tobytes()
    # ... and the values, from the scan's arrays: x of every beam's primary return.
    decoded = decode_pointcloud2(cloud_msg)
    rv = scan.returns
    strongest = rv.valid & ((rv.return_flags & 2) != 0)
    slot = np.where(strongest.any(axis=1), strongest.argmax(axis=1), 0)
    x = np.where(rv.valid.any(axis=1), scan.points_sensor[np.arange(len(slot)), slot, 0], np.nan)
    np.testing.assert_allclose(decoded["x"].reshape(-1), x, rtol=1e-6)


@pytest.mark.parametrize("point_type", ["XYZI", "XYZIRT"])  # the other profiles: test_outputs_profiles
def test_round_trip_with_rosbags_and_mcap(tmp_path, point_type):
    scan = make_scan(seed=20)
    path = tmp_path / "drive"
    with BagWriter(path, point_type) as bag:
        _write_drive(bag, scan)
    messages, qos = _read_rosbags(path)
    _check_messages(messages, scan, point_type)
    _check_messages(_read_mcap(path), scan, point_type)
    static_qos = qos["/tf_static"][0]
    assert (static_qos.durability.name, static_qos.reliability.name, static_qos.depth) == (
        "TRANSIENT_LOCAL",
        "RELIABLE",
        1,
    )
    for topic in ("/tf", "/odom", "/clock", "/lidar/points"):
        assert (qos[topic][0].durability.name, qos[topic][0].reliability.name) == ("VOLATILE", "RELIABLE")
    assert qos["/lidar/points"][0].depth == 100


def test_rosbag2_itself_reads_the_bag(tmp_path):
    """rosbag2 (rosbag2_py and its MCAP storage plugin, in a full ROS 2 install) opens the bag, parses
    its metadata and QoS, and every message deserializes with rclpy's own type support."""
    rosbag2_py = pytest.importorskip(
        "rosbag2_py",
        reason="no rosbag2_py (not among the PyPI wheels): runs in a ROS 2 Jazzy install (README, 'Run it, test it')",
    )
    from rclpy.serialization import deserialize_message
    from rosidl_runtime_py.utilities import get_message

    scan = make_scan(seed=24)
    path = tmp_path / "drive"
    with BagWriter(path, "XYZIRT") as bag:
        _write_drive(bag, scan)
    reader = rosbag2_py.SequentialReader()
    reader.open(
        rosbag2_py.StorageOptions(uri=str(path), storage_id="mcap"),
        rosbag2_py.ConverterOptions(input_serialization_format="cdr", output_serialization_format="cdr"),
    )
    types = {t.name: t.type for t in reader.get_all_topics_and_types()}
    assert types == {
        "/tf_static": "tf2_msgs/msg/TFMessage", "/tf": "tf2_msgs/msg/TFMessage", "/odom": "nav_msgs/msg/Odometry",
        "/clock": "rosgraph_msgs/msg/Clock", "/lidar/points": "sensor_msgs/msg/PointCloud2",
    }  # fmt: skip
    messages = []
    while reader.has_next():
        topic, data, log_time_ns = reader.read_next()
        messages.append((topic, log_time_ns, deserialize_message(data, get_message(types[topic]))))
    _check_messages(messages, scan, "XYZIRT")


def test_refuses_an_existing_path(tmp_path):
    path = tmp_path / "drive"
    path.mkdir()
    with pytest.raises(OutputError, match="drive.*exists"):
        with BagWriter(path):
            pass
    assert list(path.iterdir()) == []


@pytest.mark.parametrize("error", [RuntimeError("tracer crashed"), KeyboardInterrupt()])
def test_exception_inside_the_block_leaves_a_readable_bag(tmp_path, error):
    scan = make_scan(seed=21)
    path = tmp_path / "drive"
    with pytest.raises(type(error)):
        with BagWriter(path) as bag:
            _write_drive(bag, scan)
            raise error
    assert (path / "metadata.yaml").is_file()
    messages, _ = _read_rosbags(path)
    _check_messages(messages, scan, "XYZI")
    _check_messages(_read_mcap(path), scan, "XYZI")


def test_cloud_of_another_point_type_is_refused(tmp_path):
    with BagWriter(tmp_path / "drive", "XYZIRT") as bag:
        with pytest.raises(OutputError, match="XYZIRT"):
            bag.write_cloud(STAMP_NS, layouts.organised_cloud(make_scan(), "XYZI"))


def test_unknown_point_type(tmp_path):
    with pytest.raises(ConfigError, match="XYZRGB"):
        BagWriter(tmp_path / "drive", "XYZRGB")
    assert not (tmp_path / "drive").exists()


@pytest.mark.parametrize(
    ("quaternion", "match"), [((0, 0, 0, 2), "norm 2"), ((0, 0, np.nan, 1), "finite"), ((0, 0, 1), "4 finite")]
)
def test_bad_poses_are_refused_with_the_value(tmp_path, quaternion, match):
    with BagWriter(tmp_path / "drive") as bag:
        with pytest.raises(PoseError, match=match):
            bag.write_base_pose(0, (0, 0, 0), quaternion, (0, 0, 0), (0, 0, 0))
        with pytest.raises(PoseError, match="position_m"):
            bag.write_static_mount(0, (0, np.inf, 0), (0, 0, 0, 1))


def test_write_after_close_is_refused(tmp_path):
    bag = BagWriter(tmp_path / "drive").open()
    bag.close()
    bag.close()  # twice is fine
    with pytest.raises(OutputError, match="not open"):
        bag.write_clock(0)


def test_flush_on_a_rosbags_without_the_storage_writer_it_needs_names_the_versions(tmp_path, monkeypatch):
    from importlib.metadata import version

    bag = BagWriter(tmp_path / "drive").open()
    try:
        bag.write_clock(0)
        bag.flush()  # the rosbags of setup.py's range has what flush uses
        storage = bag._writer.storage
        monkeypatch.delattr(type(storage), "close_chunk")  # as a rosbags that renamed it would be
        with pytest.raises(
            OutputError, match=rf"rosbags {version('rosbags')}'s MCAP writer has no 'close_chunk'.*>= 0.11, < 0.12"
        ):
            bag.flush()
    finally:
        monkeypatch.undo()
        bag.close()


def test_cloud_log_time_can_be_its_release_time(tmp_path):
    scan = make_scan(seed=22)
    release_ns = STAMP_NS + 12_000_000
    with BagWriter(tmp_path / "drive") as bag:
        bag.write_scan(scan, log_time_ns=release_ns)
    for _, log_time, msg in _read_mcap(tmp_path / "drive"):
        assert log_time == release_ns
        assert msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec == STAMP_NS


def test_clouds_go_on_the_sensors_topic(tmp_path):
    """A shipped sensor's bag carries its clouds on its driver's topic (lidar.topic)."""
    with BagWriter(tmp_path / "drive", "velodyne", lidar_frame="velodyne", cloud_topic="/velodyne_points") as bag:
        _write_drive(bag, make_scan(seed=23))
    messages, qos = _read_rosbags(tmp_path / "drive")
    counts = {}
    for topic, _, msg in messages:
        counts[topic] = counts.get(topic, 0) + 1
        if topic == "/velodyne_points":
            assert msg.header.frame_id == "velodyne"
    assert counts == {"/tf_static": 1, "/clock": 2, "/tf": 2, "/odom": 2, "/velodyne_points": 1}
    assert bag.message_counts["/velodyne_points"] == 1


def test_a_cloud_topic_of_another_stream_is_refused(tmp_path):
    with pytest.raises(OutputError, match=r"cloud topic '/odom' is one of the bag's other topics"):
        BagWriter(tmp_path / "drive", cloud_topic="/odom")
    assert not (tmp_path / "drive").exists()
