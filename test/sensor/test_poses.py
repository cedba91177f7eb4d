"""Pose history: linear position, slerp rotation, hold the first pose, validation."""

import math

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from acres_lidar_ros.errors import ConfigError, PoseError
from acres_lidar_ros.sensor.poses import PoseHistory, with_still_start


def yaw_quat(deg):
    h = math.radians(deg) / 2
    return [0.0, 0.0, math.sin(h), math.cos(h)]


def test_slerp_against_known_rotations():
    h = PoseHistory.from_arrays([0.0, 2.0], [[0, 0, 0], [4, -2, 1]], [yaw_quat(0), yaw_quat(120)])
    positions, R = h.interpolate([0.5, 1.0, 1.5])
    np.testing.assert_allclose(positions, [[1, -0.5, 0.25], [2, -1, 0.5], [3, -1.5, 0.75]])
    for Ri, yaw in zip(R, (30, 60, 90)):
        c, s = math.cos(math.radians(yaw)), math.sin(math.radians(yaw))
        np.testing.assert_allclose(Ri, [[c, -s, 0], [s, c, 0], [0, 0, 1]], atol=1e-12)


def test_slerp_about_a_tilted_axis_keeps_the_axis():
    axis = np.array([1.0, 2.0, 2.0]) / 3.0
    q1 = np.append(axis * math.sin(0.5), math.cos(0.5))  # 1 rad about axis
    h = PoseHistory.from_arrays([0.0, 1.0], [[0, 0, 0]] * 2, [[0, 0, 0, 1], q1])
    _, R = h.interpolate([0.25])
    rotvec = Rotation.from_matrix(R[0]).as_rotvec()
    np.testing.assert_allclose(rotvec, 0.25 * axis, atol=1e-12)


def test_hold_first_pose_before_history_and_last_after():
    h = PoseHistory.from_arrays([1.0, 2.0], [[1, 0, 0], [2, 0, 0]], [yaw_quat(0), yaw_quat(90)])
    positions, R = h.interpolate([0.0, 3.0])
    np.testing.assert_allclose(positions, [[1, 0, 0], [2, 0, 0]])
    np.testing.assert_allclose(R[0], np.eye(3), atol=1e-15)
    positions, _ = h.interpolate([3.0], extrapolate=True)
    np.testing.assert_allclose(positions, [[3, 0, 0]])


def test_append_trims_to_max_age_but_keeps_a_bracketing_sample():
    h = PoseHistory(max_age_s=0.1)
    for i in range(20):
        h.append(i * 0.02, [i, 0, 0], yaw_quat(0))
    assert h.start_s <= 0.38 - 0.1 and h.end_s == pytest.approx(0.38)
    assert len(h) <= 7


@pytest.mark.parametrize(
    "times, positions, quats, message",
    [
        ([0, 1], [[0, 0, np.nan], [0, 0, 0]], [yaw_quat(0)] * 2, r"sample 0 \(t = 0\.0\) is not finite"),
        ([0, 1], [[0, 0, 0]] * 2, [[0, 0, 0, 1], [0, 0, 0, 2]], r"sample 1 .* norm 2 .* expected a unit quaternion"),
        ([0, 1, 1], [[0, 0, 0]] * 3, [yaw_quat(0)] * 3, r"time 1\.0 at sample 2 is not after 1\.0"),
    ],
)
def test_bad_poses_are_rejected_with_the_sample(times, positions, quats, message):
    with pytest.raises(PoseError, match=message):
        PoseHistory.from_arrays(np.array(times, float), positions, quats)


def test_append_rejects_going_back():
    h = PoseHistory()
    h.append(1.0, [0, 0, 0], yaw_quat(0))
    with pytest.raises(PoseError, match=r"time 0\.5 at sample 1 is not after 1\.0"):
        h.append(0.5, [0, 0, 0], yaw_quat(0))
    with pytest.raises(PoseError, match="empty"):
        PoseHistory().interpolate([0.0])


def test_slerp_matches_scipy_on_a_random_history():
    from scipy.spatial.transform import Slerp

    rng = np.random.default_rng(4)
    times = np.cumsum(rng.uniform(0.005, 0.03, 40))
    quats = Rotation.random(40, random_state=5).as_quat()
    h = PoseHistory.from_arrays(times, rng.normal(size=(40, 3)), quats)
    query = np.sort(rng.uniform(times[0], times[-1], 2000))
    _, R = h.interpolate(query)
    reference = Slerp(times, Rotation.from_quat(quats))(query).as_matrix()
    np.testing.assert_allclose(R, reference, atol=1e-12)


def test_sweep_coverage_tells_start_end_and_gaps_apart():
    from acres_lidar_ros.sensor.poses import MAX_POSE_GAP_S, sweep_coverage

    t = np.array([1.0, 1.02, 1.04, 1.06, 1.08, 1.10, 3.0, 3.02])
    assert sweep_coverage(t, 1.0, 1.1) == "covered"  # both ends exactly on samples
    assert sweep_coverage(t, 0.99, 1.1) == "before_first_pose"
    assert sweep_coverage(np.empty(0), 0.0, 0.1) == "before_first_pose"
    assert sweep_coverage(t, 2.95, 3.05) == "after_last_pose"
    assert sweep_coverage(t, 2.95, 3.05, need_end=False) == "gap"  # 1.10 -> 3.0 brackets its start
    assert sweep_coverage(t, 2.92, 3.02) == "gap"
    assert sweep_coverage(t, 1.05, 1.05) == "covered"  # without motion distortion: the stamp only
    assert sweep_coverage(np.array([0.0, MAX_POSE_GAP_S]), 0.0, MAX_POSE_GAP_S) == "covered"  # at the limit
    assert sweep_coverage(np.array([0.0, MAX_POSE_GAP_S + 1e-6]), 0.0, 0.1) == "gap"


def test_a_still_start_waits_at_the_first_pose_then_drives_the_same_poses_later():
    times = 5.0 + 0.01 * np.arange(50)  # a 100 Hz drive from t = 5 s, moving and turning
    positions = np.stack([times**2, np.sin(times), 0.1 * times], axis=1)
    quats = [yaw_quat(10.0 * t) for t in times]
    drive = PoseHistory.from_arrays(times, positions, quats)
    still = with_still_start(drive, 0.255)
    assert still.start_s == 5.0 and still.end_s == pytest.approx(times[-1] + 0.255)
    assert np.diff(still.times_s).max() <= 0.01 + 1e-12  # sampled at least as finely as the drive
    p_wait, R_wait = still.interpolate([5.0, 5.1, 5.2, 5.255])
    np.testing.assert_allclose(p_wait, [positions[0]] * 4, atol=1e-12)
    np.testing.assert_allclose(R_wait, [Rotation.from_quat(quats[0]).as_matrix()] * 4, atol=1e-12)
    t = np.array([5.003, 5.1, 5.37, times[-1]])
    p_late, R_late = still.interpolate(t + 0.255)
    p_then, R_then = drive.interpolate(t)
    np.testing.assert_allclose(p_late, p_then, atol=1e-9)
    np.testing.assert_allclose(R_late, R_then, atol=1e-9)
    np.testing.assert_array_equal(with_still_start(drive, 0.0).times_s, times)


@pytest.mark.parametrize("bad", [-1.0, float("nan"), 601.0])
def test_a_bad_still_start_is_refused_with_its_value(bad):
    drive = PoseHistory.from_arrays([0.0, 1.0], [[0, 0, 0]] * 2, [[0, 0, 0, 1]] * 2)
    with pytest.raises(ConfigError, match=r"--still-start .*expected seconds >= 0 and <= 600"):
        with_still_start(drive, bad)
