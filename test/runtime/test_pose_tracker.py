"""Pose ingestion of the node: odometry samples into a pose history, with the reasons for refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from acres_lidar_ros.errors import PoseError
from acres_lidar_ros.runtime.pose_tracker import PoseTracker

MS = 1_000_000


def quat_yaw(yaw_rad: float) -> np.ndarray:
    return Rotation.from_euler("z", yaw_rad).as_quat()


def test_jittered_50hz_stream_fills_a_history_of_one_period_plus_margin():
    rng = np.random.default_rng(4)
    tracker = PoseTracker(period_s=0.1, margin_s=0.1)
    stamps = (np.arange(100) * 20 + rng.uniform(-3, 3, 100)).round(3) * MS
    for s in stamps:
        t = s * 1e-9
        assert tracker.add(int(s), [2.0 * t, 0.0, 0.0], quat_yaw(0.5 * t), "odom", "base_footprint").accepted
    times = tracker.history.times_s
    assert tracker.newest_ns == int(stamps[-1])
    # Samples older than newest - (T + margin) are gone, except the one just before that limit.
    assert times[1] >= times[-1] - 0.2 and times[0] < times[-1] - 0.2 + 0.03
    t = np.array([times[-1] - 0.05])
    p, R = tracker.history.interpolate(t)
    assert p[0, 0] == pytest.approx(2.0 * t[0], abs=1e-9)  # linear motion is exact
    assert Rotation.from_matrix(R[0]).as_euler("xyz")[2] == pytest.approx(0.5 * t[0], abs=1e-9)


@pytest.mark.parametrize(
    "position, quaternion, match",
    [
        ([math.nan, 0, 0], [0, 0, 0, 1], "finite"),
        ([0, 0, 0], [0, 0, math.nan, 1], "finite"),
        ([0, 0, 0], [0, 0, 0, 2], "norm 2"),
        ([0, 0, 0], [0, 0, 0, 0], "norm 0"),
    ],
)
def test_nan_and_non_unit_samples_are_rejected_with_a_warning(position, quaternion, match):
    tracker = PoseTracker(0.1)
    tracker.add(0, [0, 0, 0], [0, 0, 0, 1])
    result = tracker.add(20 * MS, position, quaternion)
    assert not result.accepted and result.kind == "invalid" and result.level == "warn"
    assert match in result.message
    assert len(tracker.history) == 1 and tracker.newest_ns == 0


def test_wrong_frame_is_rejected_and_the_message_names_the_parameters():
    tracker = PoseTracker(0.1, odom_frame="odom", base_frame="base_footprint")
    result = tracker.add(0, [0, 0, 0], [0, 0, 0, 1], "map", "base_footprint")
    assert result.kind == "wrong_frame" and "'map'" in result.message and "odom_frame" in result.message
    result = tracker.add(0, [0, 0, 0], [0, 0, 0, 1], "odom", "base_link")
    assert result.kind == "wrong_frame" and "'base_link'" in result.message
    assert tracker.newest_ns is None


def test_duplicate_stamps_are_ignored_and_older_samples_dropped():
    tracker = PoseTracker(0.1)
    tracker.add(100 * MS, [1, 0, 0], [0, 0, 0, 1])
    dup = tracker.add(100 * MS, [5, 0, 0], [0, 0, 0, 1])
    assert dup.kind == "duplicate" and not dup.accepted and dup.level == "debug"
    old = tracker.add(80 * MS, [0, 0, 0], [0, 0, 0, 1])
    assert old.kind == "out_of_order" and "20.0 ms older" in old.message
    p, _ = tracker.history.interpolate(np.array([0.1]))
    assert p[0, 0] == 1.0  # the duplicate did not replace the first sample
    assert tracker.counts["duplicate"] == 1 and tracker.counts["out_of_order"] == 1


def test_time_jump_backwards_clears_the_history_and_says_so():
    tracker = PoseTracker(0.1, jump_back_s=1.0)
    for k in range(50):
        tracker.add((100_000 + 20 * k) * MS, [k, 0, 0], [0, 0, 0, 1])
    result = tracker.add(20 * MS, [0, 0, 0], [0, 0, 0, 1])  # the bag loops
    assert result.accepted and result.kind == "time_jump" and "history cleared" in result.message
    assert len(tracker.history) == 1 and tracker.newest_ns == 20 * MS


def test_snapshot_is_a_copy_and_extrapolates_at_constant_velocity():
    tracker = PoseTracker(0.1)
    for k in range(6):
        t = 0.02 * k
        tracker.add(int(round(t * 1e9)), [3.0 * t, 1.0, 0.0], quat_yaw(0.1))
    snap = tracker.snapshot(160 * MS, extrapolate=True)
    p, R = snap.interpolate(np.array([0.16]))
    assert p[0] == pytest.approx([0.48, 1.0, 0.0])
    assert Rotation.from_matrix(R[0]).as_euler("xyz")[2] == pytest.approx(0.1)
    tracker.add(int(0.12e9), [9.0, 9.0, 9.0], [0, 0, 0, 1])
    assert snap.interpolate(np.array([0.1]))[0][0] == pytest.approx([0.3, 1.0, 0.0])
    with pytest.raises(PoseError, match="empty"):
        PoseTracker(0.1).snapshot(0)
