"""Scheduling and pose ingestion of the node, without ROS: simulated clocks and message streams."""

from __future__ import annotations

import math
import time
from types import SimpleNamespace

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from acres_lidar_ros.errors import ConfigError, PoseError
from acres_lidar_ros.runtime.scheduler import (
    LogThrottle,
    PoseTracker,
    ScanScheduler,
    boxes_from_markers,
    diagnostic_status,
    mount_overrides,
    odometry_stream,
    simulate_schedule,
)
from acres_lidar_ros.sensor.poses import PoseHistory

MS = 1_000_000
T_MS = 100  # 10 Hz
DELAY_MS = 12  # the Polaris


class ManualClock:
    def __init__(self, now_ns: int = 0) -> None:
        self.now_ns = now_ns

    def __call__(self) -> int:
        return self.now_ns

    def set_ms(self, ms: float) -> None:
        self.now_ns = int(round(ms * MS))


def make(clock: ManualClock, **kw) -> ScanScheduler:
    kw.setdefault("pose_timeout_s", 0.05)
    kw.setdefault("max_extrapolation_s", 0.1)
    return ScanScheduler(T_MS / 1e3, DELAY_MS / 1e3, clock, **kw)


def kinds(result) -> list[str]:
    return [e.kind for e in result.events]


# -- due times, stamps, release ---------------------------------------------------------------


def test_due_times_stamp_and_release_at_end_of_sweep():
    clock = ManualClock()
    s = make(clock)
    first = s.poll(pose_end_ns=0)
    assert [(j.index, j.sweep_end_ns, j.stamp_ns, j.release_ns) for j in first.start] == [(0, 0, 0, 12 * MS)]
    clock.set_ms(99.9)
    assert s.poll(pose_end_ns=99 * MS).start == []  # next due at exactly T
    clock.set_ms(100)
    (job,) = s.poll(pose_end_ns=100 * MS).start
    assert (job.index, job.sweep_end_ns, job.stamp_ns, job.release_ns) == (1, 100 * MS, 100 * MS, 112 * MS)
    assert s.counts["due"] == 2


def test_ts_first_point_stamps_the_first_column_and_keeps_the_release():
    clock = ManualClock()
    clock.set_ms(200)
    s = make(clock, ts_first_point=True)
    (job,) = s.poll(pose_end_ns=200 * MS).start
    assert job.sweep_end_ns == 200 * MS
    assert job.stamp_ns == 100 * MS  # dt_c of the first column is -T
    assert job.release_ns == 212 * MS


def test_first_due_time_is_the_next_multiple_of_the_period():
    clock = ManualClock()
    clock.set_ms(1234.5)
    s = make(clock)
    assert s.poll(pose_end_ns=1234 * MS).start == []
    assert s.next_wakeup_ns() == 1300 * MS
    clock.set_ms(1300)
    (job,) = s.poll(pose_end_ns=1300 * MS).start
    assert job.sweep_end_ns == 1300 * MS


def test_on_time_scan_is_published_exactly_at_release():
    clock = ManualClock()
    s = make(clock)
    (job,) = s.poll(pose_end_ns=0).start
    clock.set_ms(5)
    assert s.trace_done(job, "cloud", trace_wall_s=0.004).publish == []
    assert s.next_wakeup_ns() == 12 * MS
    clock.set_ms(11.999)
    assert s.poll(pose_end_ns=10 * MS).publish == []
    clock.set_ms(12)
    (out,) = s.poll(pose_end_ns=10 * MS).publish
    assert out is job and out.result == "cloud"
    assert out.published_ns - out.stamp_ns == DELAY_MS * MS
    assert not out.late and s.counts["published"] == 1 and s.counts["late"] == 0


def test_scan_finishing_after_release_is_published_at_once_and_counted_late():
    clock = ManualClock()
    s = make(clock)
    (job,) = s.poll(pose_end_ns=0).start
    clock.set_ms(30)
    done = s.trace_done(job, "cloud", trace_wall_s=0.03)
    assert done.publish == [job]
    assert job.late and job.published_ns == 30 * MS
    assert s.counts == {**s.counts, "published": 1, "late": 1}


def test_third_scan_due_while_two_are_open_is_dropped_busy():
    clock = ManualClock()
    s = make(clock)
    a = s.poll(pose_end_ns=0).start[0]
    clock.set_ms(100)
    b = s.poll(pose_end_ns=100 * MS).start[0]
    clock.set_ms(200)
    third = s.poll(pose_end_ns=200 * MS)
    assert third.start == [] and kinds(third) == ["dropped_busy"]
    assert s.counts["dropped_busy"] == 1 and s.in_work == 2
    # Once one finishes, the next due scan is opened again.
    done = s.trace_done(a, "a").publish + s.trace_done(b, "b").publish
    assert [j.index for j in done] == [0, 1] and s.in_work == 0
    clock.set_ms(300)
    result = s.poll(pose_end_ns=300 * MS)
    assert [(j.index, j.sweep_end_ns) for j in result.start] == [(2, 300 * MS)]


def test_scans_are_released_in_order_and_a_held_back_scan_is_late():
    clock = ManualClock()
    s = make(clock)
    a = s.poll(pose_end_ns=0).start[0]
    clock.set_ms(100)
    b = s.poll(pose_end_ns=100 * MS).start[0]
    clock.set_ms(105)
    assert s.trace_done(b, "b").publish == []  # b is ready but a is still tracing
    clock.set_ms(112)
    assert s.poll(pose_end_ns=110 * MS).publish == []
    clock.set_ms(150)
    out = s.trace_done(a, "a").publish
    assert [j.index for j in out] == [0, 1]
    assert a.late and b.late  # b was held past its release by a
    assert s.counts["late"] == 2


def test_failed_trace_is_counted_and_does_not_block_later_scans():
    clock = ManualClock()
    s = make(clock)
    a = s.poll(pose_end_ns=0).start[0]
    clock.set_ms(100)
    b = s.poll(pose_end_ns=100 * MS).start[0]
    s.trace_done(b, "b")
    clock.set_ms(113)
    failed = s.trace_failed(a, "RuntimeError: boom")
    assert kinds(failed) == ["trace_failed"] and "boom" in failed.events[0].message
    assert [j.index for j in failed.publish] == [1] and not b.late
    assert s.counts["failed"] == 1


# -- waiting for the pose -------------------------------------------------------------------------


def test_trace_waits_for_a_pose_at_or_after_the_end_of_the_sweep():
    clock = ManualClock()
    clock.set_ms(100)
    s = make(clock)
    assert s.poll(pose_end_ns=99 * MS).start == []  # the newest pose is before the sweep end
    clock.set_ms(104)
    assert s.poll(pose_end_ns=99 * MS).start == []
    clock.set_ms(105)
    (job,) = s.poll(pose_end_ns=100 * MS).start  # exactly at the stamp covers
    assert not job.extrapolated and job.started_ns == 105 * MS


def test_timeout_extrapolates_and_warns_once_per_outage():
    clock = ManualClock()
    clock.set_ms(100)
    s = make(clock)
    s.poll(pose_end_ns=80 * MS)
    clock.set_ms(149)
    assert s.poll(pose_end_ns=80 * MS).start == []
    clock.set_ms(150)
    first = s.poll(pose_end_ns=80 * MS)
    assert [j.extrapolated for j in first.start] == [True] and kinds(first) == ["extrapolate"]
    s.trace_done(first.start[0], "x")
    clock.set_ms(250)
    second = s.poll(pose_end_ns=180 * MS)
    assert [j.extrapolated for j in second.start] == [True]
    assert "extrapolate" not in kinds(second)  # warned once
    s.trace_done(second.start[0], "x")
    clock.set_ms(300)
    recovered = s.poll(pose_end_ns=300 * MS)
    assert [j.extrapolated for j in recovered.start] == [False] and "pose_recovered" in kinds(recovered)
    s.trace_done(recovered.start[0], "x")
    clock.set_ms(450)
    again = s.poll(pose_end_ns=330 * MS)
    assert "extrapolate" in kinds(again)  # a new outage warns again
    assert s.counts["extrapolated"] == 3


def test_no_cloud_without_a_pose_it_had():
    clock = ManualClock()
    s = make(clock)
    for ms in range(0, 1000, 10):
        clock.set_ms(ms)
        result = s.poll(pose_end_ns=None)
        assert result.start == []
    assert s.counts["skipped_no_pose"] == 10  # due at 0..900 ms, each given up 50 ms later
    assert s.counts["published"] == 0
    # Odometry that stopped long ago is not extrapolated either (beyond max_extrapolation_s).
    clock.set_ms(2000)
    s2 = make(clock)
    s2.poll(pose_end_ns=1800 * MS)
    clock.set_ms(2050)
    result = s2.poll(pose_end_ns=1800 * MS)
    assert result.start == [] and kinds(result) == ["no_pose"]


def test_clock_jump_back_abandons_scans_and_restarts_due_times():
    clock = ManualClock()
    clock.set_ms(5000)
    s = make(clock)
    job = s.poll(pose_end_ns=5000 * MS).start[0]
    clock.set_ms(20)
    result = s.poll(pose_end_ns=5000 * MS)
    assert kinds(result)[0] == "clock_jump_back" and "1 scan(s) in work abandoned" in result.events[0].message
    assert s.counts["abandoned"] == 1
    assert s.trace_done(job, "old").publish == []  # a result of before the jump is never published
    assert s.next_wakeup_ns() == 100 * MS


def test_clock_jump_forward_skips_the_scans_of_the_gap():
    clock = ManualClock()
    s = make(clock)
    s.poll(pose_end_ns=None)
    clock.set_ms(1_000_050)
    result = s.poll(pose_end_ns=None)
    assert "clock_jump_forward" in kinds(result)
    assert s.counts["skipped_time_jump"] == 10_000 - 1  # due times 100 ms ... 999 900 ms
    assert s.counts["due"] == 2  # 0 and 1 000 000 ms, the newest due time
    assert s.counts["skipped_no_pose"] == 2 and s.in_work == 0


def test_stop_opens_no_more_scans():
    clock = ManualClock()
    s = make(clock)
    s.stop()
    clock.set_ms(500)
    assert s.poll(pose_end_ns=500 * MS).start == [] and s.counts["due"] == 0
    assert s.next_wakeup_ns() is None


def test_diagnostics_trace_time_and_real_time_factor():
    clock = ManualClock()
    s = make(clock)
    a = s.poll(pose_end_ns=0).start[0]
    s.trace_done(a, "a", trace_wall_s=0.02)
    clock.set_ms(100)
    b = s.poll(pose_end_ns=100 * MS).start[0]
    s.trace_done(b, "b", trace_wall_s=0.06)
    d = s.diagnostics()
    assert d["trace_ms"] == pytest.approx(40.0)
    assert d["real_time_factor"] == pytest.approx(0.1 / 0.04)
    assert d["published"] == 1  # a at 100 ms; b waits for 112 ms
    clock.set_ms(1200)
    assert math.isnan(s.diagnostics()["trace_ms"])  # nothing finished in the last second


@pytest.mark.parametrize(
    "kw, match",
    [({"period_s": 0.0}, "period_s"), ({"delay_s": -1.0}, "delay_s"), ({"max_in_work": 0}, "max_in_work")],
)
def test_bad_scheduler_arguments_name_the_argument(kw, match):
    args = {"period_s": 0.1, "delay_s": 0.012, "clock": ManualClock(), **kw}
    with pytest.raises(ConfigError, match=match):
        ScanScheduler(**args)


# -- pose ingestion ---------------------------------------------------------------------------


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


def test_streams_with_jitter_gaps_nan_duplicates_and_reordering_through_the_scheduler():
    """Odometry at 50 Hz with arrival jitter, a 400 ms gap, NaN samples, duplicates and swapped
    messages; a trace that finishes 5 ms after it starts. Every published scan was traced from a
    history that reached its sweep end, or was extrapolated by at most max_extrapolation_s."""
    rng = np.random.default_rng(7)
    clock = ManualClock()
    s = make(clock)
    tracker = PoseTracker(0.1)
    messages = []
    for k in range(150):  # 3 s
        stamp = k * 20 * MS
        if 1000 * MS <= stamp < 1400 * MS:
            continue  # gap
        pos = [float(k), 0.0, 0.0] if k % 37 else [math.nan, 0.0, 0.0]
        arrival = stamp + int(rng.uniform(0.5, 6.0) * MS)
        messages.append((arrival, stamp, pos))
        if k % 29 == 0:
            messages.append((arrival + MS, stamp, pos))  # duplicate
    messages.sort()
    # Swap two neighbours' arrivals: the older one arrives second.
    messages[60], messages[61] = (messages[61][0], *messages[60][1:]), (messages[60][0], *messages[61][1:])
    messages.sort()
    tracing = []  # (finish_ns, job, snapshot end)
    published = []
    i = 0
    for now in range(0, 3000 * MS, MS):
        clock.now_ns = now
        while i < len(messages) and messages[i][0] <= now:
            _, stamp, pos = messages[i]
            tracker.add(stamp, pos, [0, 0, 0, 1], "odom", "base_footprint")
            i += 1
        for finish, job, end in [t for t in tracing if t[0] <= now]:
            tracing.remove((finish, job, end))
            published += s.trace_done(job, end).publish
        result = s.poll(tracker.newest_ns)
        published += result.publish
        for job in result.start:
            snap = tracker.snapshot(job.sweep_end_ns, extrapolate=job.extrapolated)
            tracing.append((now + 5 * MS, job, snap.end_s))
    nan_messages = sum(1 for m in messages if math.isnan(m[2][0]))
    assert nan_messages >= 3 and tracker.counts["invalid"] == nan_messages
    assert tracker.counts["duplicate"] == sum(1 for k in range(150) if k % 29 == 0 and not 50 <= k < 70 and k % 37)
    assert tracker.counts["out_of_order"] == 1
    # The gap 1000-1400 ms: the scan at 1000 ms extrapolates 20 ms from the sample at 980 ms;
    # those at 1100, 1200 and 1300 ms are more than 100 ms from it and are skipped.
    assert s.counts["extrapolated"] == 1 and s.counts["skipped_no_pose"] == 3
    for job in published:
        assert job.result >= job.sweep_end_ns * 1e-9 - 1e-9  # the history reached the sweep end
        if job.extrapolated:
            assert job.started_ns >= job.sweep_end_ns + 50 * MS
        assert job.late == (job.finished_ns > job.release_ns)
    # The scan at 0 ms waits for the sample at 20 ms (the one at 0 ms is NaN): late; the rest of
    # the covered scans get their sample within 6 ms and trace in 5 ms: on time.
    assert sum(not j.late for j in published) >= 24
    c = s.counts
    assert c["due"] == c["published"] + c["dropped_busy"] + c["skipped_no_pose"] + s.in_work


# -- mount and boxes ------------------------------------------------------------------------------


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


# -- the simulated run (small, fast; the 600-scan figures come from run_schedule_benchmark) ------


def constant_velocity_history() -> PoseHistory:
    t = np.linspace(0.0, 10.0, 11)
    return PoseHistory.from_arrays(
        t, np.column_stack([t, np.zeros(11), np.zeros(11)]), np.tile([0, 0, 0, 1.0], (11, 1))
    )


def test_odometry_stream_samples_the_trajectory_and_loops():
    stream = odometry_stream(constant_velocity_history(), 0, 12_000 * MS, rate_hz=50, latency_s=0.002)
    assert len(stream) == 601
    assert stream[1].stamp_ns == 20 * MS and stream[1].arrival_ns == 22 * MS
    assert stream[100].position_m[0] == pytest.approx(2.0)
    assert stream[550].position_m[0] == pytest.approx(1.0)  # 11 s -> 1 s into the 10 s trajectory


def test_simulated_run_with_a_fast_trace_publishes_every_scan_on_time():
    stream = odometry_stream(constant_velocity_history(), -40 * MS, 400 * MS, rate_hz=200, latency_s=0.0005)
    traced = []

    def trace(poses, job):
        traced.append((job.index, poses.end_s))
        return job.index

    out = simulate_schedule(trace, stream, 12, period_s=0.025, delay_s=0.012, start_ns=-10 * MS)
    c = out["counts"]
    assert c["due"] == 12 and c["dropped_busy"] == 0
    assert c["published"] + c["late"] >= 12  # every scan published (late ones are counted twice)
    assert c["published"] == 12
    on_time = out["publish_minus_stamp_ms"]["on_time"]
    assert on_time["n"] >= 10  # a scheduler hiccup on a loaded machine may make one or two late
    assert on_time["min"] >= 12.0 and on_time["median"] < 14.0
    assert sorted(i for i, _ in traced) == list(range(12))


def test_simulated_run_with_a_slow_trace_drops_busy_scans():
    stream = odometry_stream(constant_velocity_history(), -40 * MS, 400 * MS, rate_hz=200, latency_s=0.0005)

    def trace(poses, job):
        time.sleep(0.045)
        return job.index

    out = simulate_schedule(trace, stream, 12, period_s=0.02, delay_s=0.005, start_ns=-10 * MS)
    c = out["counts"]
    assert c["dropped_busy"] >= 3 and c["late"] >= 1
    assert c["due"] == c["published"] + c["dropped_busy"] + c["skipped_no_pose"] + c["failed"]
    late = out["publish_minus_stamp_ms"]["late"]
    assert late["min"] > 5.0


def test_simulated_run_counts_failed_traces():
    stream = odometry_stream(constant_velocity_history(), -40 * MS, 300 * MS, rate_hz=200, latency_s=0.0005)

    def trace(poses, job):
        if job.index == 1:
            raise RuntimeError("tracer lost")
        return job.index

    out = simulate_schedule(trace, stream, 5, period_s=0.025, delay_s=0.005, start_ns=-10 * MS)
    assert out["counts"]["failed"] == 1 and out["counts"]["published"] == 4
    assert out["events"]["trace_failed"] == 1


# -- logging and diagnostics helpers -------------------------------------------------------------


def test_log_throttle_lets_one_line_per_kind_and_period_through():
    clock = ManualClock()
    throttle = LogThrottle(5.0, clock)
    assert throttle.allow("no_pose") and throttle.allow("late")
    clock.set_ms(4999)
    assert not throttle.allow("no_pose")
    clock.set_ms(5000)
    assert throttle.allow("no_pose")
    assert throttle.suppressed == {"no_pose": 1}


def test_diagnostic_status_levels_and_values():
    clock = ManualClock()
    s = make(clock)
    first = s.diagnostics()
    level, message, values = diagnostic_status(first, None)
    assert level == "OK" and dict(values)["scans_published"] == "0" and dict(values)["trace_ms"] == "nan"
    a = s.poll(pose_end_ns=0).start[0]
    clock.set_ms(50)
    s.trace_done(a, "a", trace_wall_s=0.05)  # late
    level, message, values = diagnostic_status(s.diagnostics(), first)
    assert level == "WARN" and message.startswith("1 published, 1 late, 0 dropped (busy)")
    v = dict(values)
    assert (v["scans_published"], v["scans_late"], v["trace_ms"], v["real_time_factor"]) == ("1", "1", "50.0", "2.00")
    second = s.diagnostics()
    clock.set_ms(100)
    b = s.poll(pose_end_ns=100 * MS).start[0]
    s.trace_failed(b, "boom")
    assert diagnostic_status(s.diagnostics(), second)[0] == "ERROR"
    third = s.diagnostics()
    clock.set_ms(200)
    assert s.poll(pose_end_ns=200 * MS).start
    assert diagnostic_status(s.diagnostics(), third)[0] == "OK"  # due and in work: not an error


def test_sweep_tracer_traces_columns_as_poses_arrive_and_finishes_the_same_scan():
    import numpy as np

    from acres_lidar_ros.config.sensors import load_sensor_config
    from acres_lidar_ros.runtime.scheduler import ScanJob, SweepTracer
    from acres_lidar_ros.scan import Scanner, ScanOptions
    from acres_lidar_ros.scene import SceneBuilder, TerrainGrid
    from acres_lidar_ros.tracing.trace import Tracer

    config = load_sensor_config("polaris")
    tracer = Tracer(SceneBuilder(TerrainGrid(np.array([-300.0, -300.0]), 600.0, np.zeros((2, 2)))).build())
    options = ScanOptions(self_returns=False, seed=2)
    job = ScanJob(index=0, sweep_end_ns=10**9, stamp_ns=10**9, release_ns=10**9 + 12 * 10**6, opened_ns=9 * 10**8)
    times = np.arange(0.88, 1.0201, 0.02)
    positions = np.stack([3.0 * times, np.zeros_like(times), np.zeros_like(times)], axis=1)
    quats = np.tile([0.0, 0.0, 0.0, 1.0], (len(times), 1))
    sweeps = SweepTracer(Scanner(config, tracer=tracer, options=options))
    history = PoseHistory()
    counts = []
    for t, p, q in zip(times[:-1], positions[:-1], quats[:-1]):  # all but the sample after the stamp
        history.append(t, p, q)
        counts.append(sweeps.pretrace(job, history))
    assert sum(counts) > 0.7 * config.columns  # most of the sweep traced before its end
    history.append(times[-1], positions[-1], quats[-1])
    scan = sweeps.finish(job, history)
    reference = Scanner(config, tracer=tracer, options=options).scan(history, 10**9, index=0)
    assert np.array_equal(scan.returns.range_m, reference.returns.range_m, equal_nan=True)
    assert sweeps.pretrace(job, history) == 0  # a finished job traces nothing more
    # A sweep started for a predicted index that the job did not get is traced again.
    later = ScanJob(index=2, sweep_end_ns=11 * 10**8, stamp_ns=11 * 10**8, release_ns=0, opened_ns=0)
    assert sweeps.pretrace_upcoming(later.sweep_end_ns, 1, history) > 0
    again = sweeps.finish(later, history)
    fresh = Scanner(config, tracer=tracer, options=options)
    fresh.scan(history, 10**9, index=0)
    assert np.array_equal(
        again.returns.range_m, fresh.scan(history, later.sweep_end_ns, index=2).returns.range_m, equal_nan=True
    )
    sweeps.pretrace_upcoming(2 * 10**9, 3, history)
    # A trace in work holds the lock: discard does not wait for it (the poll that calls it also
    # publishes) and forgets nothing; once the lock is free it does.
    with sweeps.lock:
        assert sweeps.discard(keep_after_ns=3 * 10**9) is False
    assert 2 * 10**9 in sweeps._sweeps
    assert sweeps.discard(keep_after_ns=3 * 10**9) is True
    assert sweeps._sweeps == {}


class _FakeSweep:
    """Stands in for scan.Sweep: records the poses each pretrace saw."""

    def __init__(self, end_ns, index, log, block):
        self.index, self.boxes, self.end_ns, self.log, self.block = index, (), end_ns, log, block

    def trace_covered(self, poses, min_columns=1):
        self.log.append((self.end_ns, poses))
        self.block.wait(5.0)
        return 7

    def finish(self, poses, extrapolate=False):
        self.log.append((self.end_ns, "finish"))
        return "scan"


def _fake_tracer(block=None):
    import threading

    from acres_lidar_ros.runtime.scheduler import SweepTracer

    log = []
    block = block or threading.Event()
    scanner = SimpleNamespace(
        config=SimpleNamespace(columns=1800),
        start_sweep=lambda end_ns, boxes=(), index=0: _FakeSweep(end_ns, index, log, block),
    )
    return SweepTracer(scanner), log, block


def test_pretrace_requests_merge_and_one_drain_runs_them_oldest_sweep_first():
    tracer, log, block = _fake_tracer()
    block.set()
    assert tracer.request_pretrace(200, 2, "poses A") is True  # the caller submits a drain
    assert tracer.request_pretrace(100, 1, "poses B") is False  # one drain is enough
    assert tracer.request_pretrace(200, 2, "poses C") is False  # replaces "poses A"
    assert tracer.drain_pretraces() == 14
    assert log == [(100, "poses B"), (200, "poses C")]
    assert tracer.request_pretrace(300, 3, "poses D") is True  # the drain ended: a new one is needed


def test_a_waiting_finish_goes_before_the_next_requested_pretrace():
    import threading

    from acres_lidar_ros.runtime.scheduler import ScanJob

    tracer, log, block = _fake_tracer()
    tracer.request_pretrace(100, 1, "first")
    tracer.request_pretrace(200, 2, "second")
    drain = threading.Thread(target=tracer.drain_pretraces)
    drain.start()
    while not log:  # the first pretrace runs (and holds the lock) until block is set
        time.sleep(0.001)
    job = ScanJob(index=1, sweep_end_ns=100, stamp_ns=100, release_ns=0, opened_ns=0)
    finisher = threading.Thread(target=tracer.finish, args=(job, "poses"))
    finisher.start()
    while tracer._finishing == 0:
        time.sleep(0.001)
    block.set()
    finisher.join(5.0)
    drain.join(5.0)
    assert [entry[1] for entry in log] == ["first", "finish", "second"]
