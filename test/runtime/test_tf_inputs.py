"""The ROS-free halves of the TF mount and the vehicle markers."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from acres_lidar_ros.errors import PoseError
from acres_lidar_ros.runtime.tf_inputs import boxes_from_markers, mount_overrides


def quat_yaw(yaw_rad: float) -> np.ndarray:
    return Rotation.from_euler("z", yaw_rad).as_quat()


def test_mount_overrides_only_when_tf_differs_and_round_trips_rpy():
    rpy = np.radians([-1.518, 5.317, 0.0])
    q = Rotation.from_euler("xyz", rpy).as_quat()
    assert mount_overrides([2.5, 0, 2.039], q, [2.5, 0, 2.039], rpy) is None
    q2 = Rotation.from_euler("xyz", np.radians([1.0, -2.0, 3.0])).as_quat()
    out = mount_overrides([2.0, 0.1, 1.9], q2, [2.5, 0, 2.039], rpy)
    assert out["position_flu_m"] == pytest.approx([2.0, 0.1, 1.9])
    assert out["rpy_deg"] == pytest.approx([1.0, -2.0, 3.0])
    with pytest.raises(PoseError):
        mount_overrides([math.nan, 0, 0], q, [0, 0, 0], rpy)


def marker(mid, frame="map", kind=1, action=0, xyz=(0, 0, 0), q=(0, 0, 0, 1), scale=(4, 2, 1.5)):
    v = lambda x, y, z: SimpleNamespace(x=x, y=y, z=z)  # noqa: E731
    return SimpleNamespace(
        type=kind,
        action=action,
        id=mid,
        ns="vehicles",
        header=SimpleNamespace(frame_id=frame),
        pose=SimpleNamespace(position=v(*xyz), orientation=SimpleNamespace(x=q[0], y=q[1], z=q[2], w=q[3])),
        scale=v(*scale),
    )


def test_cube_markers_become_world_boxes():
    q90 = quat_yaw(math.pi / 2)
    world_from = {"map": ([10.0, 0.0, 0.0], q90)}
    markers = [
        marker(1, xyz=(1.0, 0.0, 0.75), q=quat_yaw(0.0)),
        marker(2, kind=2),  # a sphere: ignored
        marker(3, action=2),  # DELETE: ignored
        marker(4, frame="base_link"),  # no TF
        marker(5, q=(0, 0, 0, 0)),  # invalid orientation
    ]
    boxes, events = boxes_from_markers(markers, world_from.get)
    assert [b.object_id for b in boxes] == [1]
    (box,) = boxes
    assert box.centre_m == pytest.approx([10.0, 1.0, 0.75])  # (1, 0) turned 90 deg, then shifted
    assert box.half_extents_m == pytest.approx([2.0, 1.0, 0.75])
    assert Rotation.from_quat(box.quaternion_xyzw).as_euler("xyz")[2] == pytest.approx(math.pi / 2)
    assert [e.kind for e in events] == ["box_no_tf", "box_invalid"]


def test_markers_from_rosbags_message_classes():
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS2_JAZZY)
    t = ts.types
    Marker = t["visualization_msgs/msg/Marker"]
    assert (Marker.CUBE, Marker.ADD) == (1, 0)  # the constants boxes_from_markers relies on

    def make_marker(mid, kind, xyz):
        return Marker(
            header=t["std_msgs/msg/Header"](stamp=t["builtin_interfaces/msg/Time"](sec=1, nanosec=0), frame_id="odom"),
            ns="vehicles",
            id=mid,
            type=kind,
            action=Marker.ADD,
            pose=t["geometry_msgs/msg/Pose"](
                position=t["geometry_msgs/msg/Point"](x=xyz[0], y=xyz[1], z=xyz[2]),
                orientation=t["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0),
            ),
            scale=t["geometry_msgs/msg/Vector3"](x=4.6, y=1.9, z=2.0),
            color=t["std_msgs/msg/ColorRGBA"](r=1.0, g=0.0, b=0.0, a=1.0),
            lifetime=t["builtin_interfaces/msg/Duration"](sec=0, nanosec=0),
            frame_locked=False,
            points=[],
            colors=[],
            texture_resource="",
            texture=t["sensor_msgs/msg/CompressedImage"](
                header=t["std_msgs/msg/Header"](stamp=t["builtin_interfaces/msg/Time"](sec=0, nanosec=0), frame_id=""),
                format="",
                data=np.zeros(0, np.uint8),
            ),
            uv_coordinates=[],
            text="",
            mesh_resource="",
            mesh_file=t["visualization_msgs/msg/MeshFile"](filename="", data=np.zeros(0, np.uint8)),
            mesh_use_embedded_materials=False,
        )

    markers = [make_marker(7, Marker.CUBE, (5.0, -2.0, 1.0)), make_marker(8, Marker.SPHERE, (0.0, 0.0, 0.0))]
    identity = ([0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0])
    boxes, events = boxes_from_markers(markers, lambda frame: identity if frame == "odom" else None)
    assert events == [] and [b.object_id for b in boxes] == [7]
    assert boxes[0].centre_m == pytest.approx([5.0, -2.0, 1.0])
    assert boxes[0].half_extents_m == pytest.approx([2.3, 0.95, 1.0])
