"""Dynamic boxes: validation and the analytic ray/OBB test."""

from __future__ import annotations

import numpy as np
import pytest

from acres_lidar_ros.errors import SceneError
from acres_lidar_ros.scene.boxes import VehicleBox, rotation_from_quaternion_xyzw, trace_boxes
from acres_lidar_ros.scene.instances import NO_INSTANCE, VEHICLE_INSTANCE_BASE


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(half_extents_m=[1.0, 0.0, 1.0]), r"half_extents_m = \[1.0, 0.0, 1.0\]: must be 3 finite numbers > 0"),
        (dict(half_extents_m=[1.0, -2.0, 1.0]), r"half_extents_m .*> 0"),
        (
            dict(quaternion_xyzw=[0.0, 0.0, 0.0, 2.0]),
            r"quaternion_xyzw = \[0.0, 0.0, 0.0, 2.0\]: must be 4 finite numbers of norm 1",
        ),
        (dict(quaternion_xyzw=[0.0, 0.0, 1.0]), r"quaternion_xyzw .*4 finite numbers"),
        (dict(centre_m=[0.0, float("nan"), 0.0]), r"centre_m = \[0.0, nan, 0.0\]: must be 3 finite numbers"),
        (dict(object_id=2**40), r"object_id = 1099511627776: must be an integer 0 to 2147483631"),
        (dict(object_id=-1), r"object_id = -1: must be an integer 0 to 2147483631"),
    ],
)
def test_invalid_boxes_are_scene_errors(kwargs, match):
    args = dict(
        centre_m=[0.0, 0.0, 0.0], quaternion_xyzw=[0.0, 0.0, 0.0, 1.0], half_extents_m=[1.0, 1.0, 1.0], object_id=3
    )
    args.update(kwargs)
    with pytest.raises(SceneError, match=match):
        VehicleBox(**args)


def test_quaternion_rotation_turns_x_into_y_for_a_quarter_turn_about_z():
    r = rotation_from_quaternion_xyzw([0.0, 0.0, np.sin(np.pi / 4), np.cos(np.pi / 4)])
    np.testing.assert_allclose(r @ [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], atol=1e-15)
    np.testing.assert_allclose(r.T @ r, np.eye(3), atol=1e-15)


def test_rotated_box_faces_at_their_distance_with_exact_cosine():
    rng = np.random.default_rng(0)
    q = rng.normal(size=4)
    q /= np.linalg.norm(q)
    half = np.array([2.0, 0.9, 0.7])
    box = VehicleBox([10.0, -3.0, 1.0], q, half, object_id=9)
    r = box.rotation
    # From 5 m outside each face centre straight at it, and tilted by 30 degrees at that point.
    origins, dirs, want_t, want_cos = [], [], [], []
    for axis in range(3):
        for sign in (-1.0, 1.0):
            normal = sign * r[:, axis]
            face_point = box.centre_m + half[axis] * normal
            tangent = r[:, (axis + 1) % 3]
            for angle in (0.0, np.pi / 6):
                d = -np.cos(angle) * normal + np.sin(angle) * tangent
                origins.append(face_point - 5.0 * d)
                dirs.append(d)
                want_t.append(5.0)
                want_cos.append(np.cos(angle))
    t, cos, oid = trace_boxes(np.array(origins), np.array(dirs), [box], 0.005)
    np.testing.assert_allclose(t, want_t, atol=1e-12)
    np.testing.assert_allclose(cos, want_cos, atol=1e-12)
    assert np.all(oid == VEHICLE_INSTANCE_BASE + 9)


def test_rays_missing_or_behind_and_from_inside():
    box = VehicleBox([0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0], object_id=1)
    o = np.array([[5.0, 0.0, 0.0], [5.0, 3.0, 0.0], [5.0, 0.0, 0.0], [0.5, 0.0, 0.0], [5.0, 1.0, 0.0]])
    d = np.array([[-1.0, 0, 0], [-1.0, 0, 0], [1.0, 0, 0], [1.0, 0, 0], [-1.0, 0, 0]])
    t, cos, oid = trace_boxes(o, d, [box], 0.005)
    # Hit at 4; parallel and outside the y slab; box behind; from inside: the far face at 0.5;
    # along the face plane y = 1 (touching the edge counts as a hit at x = 1).
    np.testing.assert_allclose(t[:4], [4.0, np.inf, np.inf, 0.5])
    v = VEHICLE_INSTANCE_BASE
    assert oid.tolist()[:4] == [v + 1, NO_INSTANCE, NO_INSTANCE, v + 1]
    assert t[4] == 4.0


def test_nearest_of_several_boxes_wins():
    a = VehicleBox([10.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0], object_id=1)
    b = VehicleBox([5.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0], [0.5, 1.0, 1.0], object_id=2)
    t, _, oid = trace_boxes(np.zeros((1, 3)), np.array([[1.0, 0.0, 0.0]]), [a, b], 0.005)
    assert (t[0], oid[0]) == (4.5, VEHICLE_INSTANCE_BASE + 2)
