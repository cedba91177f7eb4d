"""Reading recordings: bags of three formats, four cloud layouts, three pose sources, and bad input.

The recordings are a drive over flat ground (``recording_support``): every return of a scan,
moved into the world with the pose the reader gives its column, must lie on the plane z = 0.
"""

from __future__ import annotations

import numpy as np
import pytest
from recording_support import dense_xyzi_cloud, ground_drive, write_ros1, write_rosbag2, xyzirt_cloud

from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.errors import RecordingError
from acres_lidar_ros.outputs.tum import write_tum
from acres_lidar_ros.recordings.recorded_scans import read_recording


@pytest.fixture(scope="module")
def config():
    return load_sensor_config("polaris").with_overrides({"frame_id": "rslidar"})


@pytest.fixture(scope="module")
def drive(config):
    return ground_drive(config)


def world_z(scan) -> np.ndarray:
    """z of every return in the world, moved with the pose of its column."""
    cells = scan.cells
    p = cells.points_sensor.reshape(cells.columns, cells.rings, 3)
    T = scan.T_world_sensor
    world = np.einsum("cij,crj->cri", T[:, :3, :3], p) + T[:, None, :3, 3]
    return world[..., 2][np.isfinite(p[..., 0])]


def check_cells(recording, drive, exact: bool = True) -> None:
    assert [s.stamp_ns for s in recording.scans] == drive.stamps_ns
    for scan, truth in zip(recording.scans, drive.points_sensor, strict=True):
        valid = np.isfinite(truth[:, 0])
        np.testing.assert_array_equal(scan.cells.valid, valid)
        np.testing.assert_allclose(scan.cells.points_sensor[valid], truth[valid], atol=2e-5 * 60)
        z = world_z(scan)
        assert z.size == valid.sum() > 10_000
        np.testing.assert_allclose(z, 0.0, atol=5e-3 if not exact else 2e-3)


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_rosbag2_xyzirt_from_odom(tmp_path, config, drive, storage):
    clouds = [xyzirt_cloud(config, drive, k) for k in range(len(drive.stamps_ns))]
    bag = write_rosbag2(tmp_path / "bag", config, drive, clouds, storage=storage)
    recording = read_recording([bag], config)
    assert recording.layout == "columns_by_rings" and recording.topic == "/rslidar_points"
    assert recording.pose_source == "odom /odom" and recording.dropped == []
    np.testing.assert_allclose(recording.T_base_sensor, drive.T_base_sensor, atol=1e-12)
    for scan, t_col in zip(recording.scans, drive.column_time_s, strict=True):
        np.testing.assert_allclose(scan.column_time_s, t_col, atol=1e-9)
    check_cells(recording, drive)


def test_send_by_rows_and_poses_from_tf_and_tum(tmp_path, config, drive):
    """ros_send_by_rows (height = rings) gives the same cells; /tf and a TUM file the same poses."""
    clouds = [np.ascontiguousarray(xyzirt_cloud(config, drive, k).T) for k in range(len(drive.stamps_ns))]
    bag = write_rosbag2(tmp_path / "bag", config, drive, clouds)
    tum = tmp_path / "poses.tum"
    write_tum(tum, drive.times_s, drive.positions_m, drive.quaternions_xyzw)
    by_odom = read_recording([bag], config)
    assert by_odom.layout == "rings_by_columns"
    check_cells(by_odom, drive)
    for poses in ("tf", str(tum)):
        other = read_recording([bag], config, poses=poses)
        for a, b in zip(by_odom.scans, other.scans, strict=True):
            np.testing.assert_allclose(a.T_world_sensor, b.T_world_sensor, atol=1e-6)


def test_ros1_dense_xyzi_without_ring_recovers_beams(tmp_path, config, drive):
    """A ROS 1 bag of dense XYZI clouds: each point's beam from its direction, one stray point unassigned."""
    clouds = [dense_xyzi_cloud(config, drive, k) for k in range(len(drive.stamps_ns))]
    stray = np.zeros((1, 1), clouds[0].dtype)
    stray["x"], stray["y"], stray["z"] = 10.0, 0.0, 10.0 * np.tan(np.deg2rad(-7.3))  # between two rings
    clouds[0] = np.concatenate([clouds[0], stray], axis=1)
    bag = write_ros1(tmp_path / "drive.bag", config, drive, clouds)
    recording = read_recording([bag], config)
    assert recording.layout == "dense"
    assert recording.unassigned == 1 and recording.merged == 0
    total = sum(int(np.isfinite(p[:, 0]).sum()) for p in drive.points_sensor)
    assert recording.points_in == total + 1
    assert recording.unassigned_share == pytest.approx(1 / (total + 1))
    check_cells(recording, drive, exact=False)


def test_missing_topic_lists_topics(tmp_path, config, drive):
    bag = write_rosbag2(tmp_path / "bag", config, drive, [xyzirt_cloud(config, drive, 0)] * 3)
    with pytest.raises(
        RecordingError, match=r"no cloud topic '/lidar/points'.*/rslidar_points \(sensor_msgs/msg/PointCloud2, 3\)"
    ):
        read_recording([bag], config, topic="/lidar/points")
    with pytest.raises(RecordingError, match=r"/odom.* expected sensor_msgs/msg/PointCloud2"):
        read_recording([bag], config, topic="/odom")


def test_scans_no_pose_covers_are_named(tmp_path, config):
    """Poses end at 0.35 s: the scan stamped 0.4 s is left out and named; poses ending at 0.15 s cover none."""
    short = ground_drive(config, end_s=0.35)
    bag = write_rosbag2(tmp_path / "bag", config, short, [xyzirt_cloud(config, short, k) for k in range(3)])
    recording = read_recording([bag], config)
    assert [s.stamp_ns for s in recording.scans] == short.stamps_ns[:2]
    assert len(recording.dropped) == 1 and "scan 2 (stamp 0.400000 s" in recording.dropped[0]
    assert "after last pose" in recording.dropped[0]
    none = ground_drive(config, end_s=0.05)
    bag2 = write_rosbag2(tmp_path / "bag2", config, none, [xyzirt_cloud(config, none, k) for k in range(3)])
    with pytest.raises(RecordingError, match=r"no scan of topic /rslidar_points is covered.*scan 0 \(stamp 0.200000 s"):
        read_recording([bag2], config)


def test_frame_that_does_not_match(tmp_path, config, drive):
    bag = write_rosbag2(tmp_path / "bag", config, drive, [xyzirt_cloud(config, drive, 0)] * 3, frame="velodyne")
    with pytest.raises(RecordingError, match=r"frame 'velodyne' is not the sensors file's lidar.frame_id 'rslidar'"):
        read_recording([bag], config, mount="sensors")
    with pytest.raises(RecordingError, match=r"frame 'lidar' is in no transform.*base_footprint -> rslidar"):
        _read_with_frame(write_rosbag2(tmp_path / "bag2", config, drive, [xyzirt_cloud(config, drive, 0)] * 3), "lidar")


def _read_with_frame(bag, frame):
    from acres_lidar_ros.recordings.bag_source import BagSource
    from acres_lidar_ros.recordings.recorded_poses import tf_chain

    with BagSource([bag]) as source:
        tf_chain(source.transforms(["/tf", "/tf_static"]), frame)


def test_truncated_bag_names_file_and_offset(tmp_path, config, drive):
    bag = write_rosbag2(tmp_path / "bag", config, drive, [xyzirt_cloud(config, drive, k) for k in range(3)])
    mcap = next(bag.glob("*.mcap"))
    size = mcap.stat().st_size
    with mcap.open("r+b") as f:
        f.truncate(size // 2)
    before = mcap.read_bytes()
    with pytest.raises(
        RecordingError, match=rf"cannot read bag {mcap} \({size // 2} bytes; readable records end at byte \d+\)"
    ):
        read_recording([bag], config)
    assert mcap.read_bytes() == before


def test_not_a_bag(tmp_path, config):
    with pytest.raises(RecordingError, match=r"does not exist"):
        read_recording([tmp_path / "missing"], config)
    with pytest.raises(RecordingError, match=r"a directory without metadata.yaml"):
        read_recording([tmp_path], config)
