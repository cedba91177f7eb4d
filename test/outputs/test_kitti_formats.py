"""The KITTI files against their published definitions: the object devkit's readme (label_2),
semantic-kitti-api's label layout, and pykitti (a reader this project did not write)."""

from __future__ import annotations

import numpy as np
import pytest

pykitti_utils = pytest.importorskip("pykitti.utils", reason="pykitti (the test extra) reads the KITTI files")

from acres_lidar_ros.outputs import kitti_formats as kf  # noqa: E402


def test_a_box_ahead_is_the_devkit_line():
    # A car 10 m ahead of the LiDAR, heading forward: 4 m long, 2 m wide, 1.6 m high.
    line = kf.object_line("Car", np.array([10.0, 0.0, 0.0]), np.array([4.0, 2.0, 1.6]), 0.0)
    # Camera (x right, y down, z forward): the bottom centre is at (0, 0.8, 10); facing the camera's
    # z axis is rotation_y = -pi/2; on the z axis alpha = rotation_y. The 2D box: f = 720 px,
    # centre (621, 187.5): x = +-1 m and y = +-0.8 m at the near face, z = 8 m.
    left, right = 621 - 720 / 8, 621 + 720 / 8
    top, bottom = 187.5 - 720 * 0.8 / 8, 187.5 + 720 * 0.8 / 8
    expected = f"Car 0.00 3 -1.57 {left:.2f} {top:.2f} {right:.2f} {bottom:.2f} 1.60 2.00 4.00 0.00 0.80 10.00 -1.57"
    assert line == expected
    values = line.split()
    assert len(values) == 15 and values[2] == "3"  # the devkit reads "%s %lf %d %lf ..." of 15 values


def test_a_box_facing_the_cameras_x_axis_has_rotation_y_zero_and_alpha_by_its_bearing():
    # Heading -90 deg in the LiDAR frame (towards -y, the camera's +x), 20 m ahead and 20 m left.
    line = kf.object_line("Car", np.array([20.0, 20.0, 0.8]), np.array([4.0, 2.0, 1.6]), -np.pi / 2).split()
    x_cam, z_cam = -20.0, 20.0
    assert float(line[14]) == 0.0
    assert line[3] == f"{0.0 - np.arctan2(x_cam, z_cam):.2f}"  # alpha = rotation_y - atan2(x, z)
    assert line[11:14] == ["-20.00", "0.00", "20.00"]


def test_a_box_behind_has_the_devkits_invalid_2d_box():
    line = kf.object_line("Car", np.array([-10.0, 0.0, 0.0]), np.array([4.0, 2.0, 1.6]), 0.0).split()
    assert line[1] == "1.00" and line[4:8] == ["-1.00"] * 4


def test_labels_are_semantic_low_and_instance_high_uint32():
    blob = kf.label_bytes(np.array([72, 20], np.uint16), np.array([0, 5], np.uint16))
    assert blob == (72).to_bytes(4, "little") + ((5 << 16) | 20).to_bytes(4, "little")


def test_velodyne_points_read_back_with_pykitti(tmp_path):
    xyz = np.array([[1.5, -2.0, 0.25], [100.0, 3.0, -1.0]])
    path = tmp_path / "000000.bin"
    path.write_bytes(kf.velodyne_bytes(xyz, np.array([0.5, 1.0], np.float32)))
    scan = pykitti_utils.load_velo_scan(str(path))
    np.testing.assert_array_equal(scan, np.array([[1.5, -2.0, 0.25, 0.5], [100.0, 3.0, -1.0, 1.0]], np.float32))


def test_the_lidar_frame_label_is_openpcdets_custom_line():
    line = kf.lidar_box_line("Car", np.array([1.5, 1.46, 0.1]), np.array([5.12, 1.85, 4.13]), 1.56)
    assert line == "1.5000 1.4600 0.1000 5.1200 1.8500 4.1300 1.5600 Car"


def test_every_class_has_a_semantic_kitti_label():
    from acres_lidar_ros.config.material_table import CLASS_NAMES

    labels = kf.semantic_labels(CLASS_NAMES)
    assert set(labels.tolist()) <= set(kf.SEMANTIC_KITTI_LABELS)
    assert labels[CLASS_NAMES.index("building")] == 50 and labels[CLASS_NAMES.index("tree_trunk")] == 71
