"""Scheduling and pose ingestion of the node, without ROS: simulated clocks and message streams."""

from __future__ import annotations

import math

import numpy as np
import pytest

from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.runtime.diagnostics import diagnostic_status
from acres_lidar_ros.runtime.events import LogThrottle
from acres_lidar_ros.runtime.pose_tracker import PoseTracker
from acres_lidar_ros.runtime.scheduler import ScanScheduler

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


def test_timeout_extrapolates_and_warns_for_each_scan():
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
    assert "extrapolate" in kinds(second)  # each extrapolated scan is an event (the log throttle counts them)
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
    level, _, values = diagnostic_status(dict(s.diagnostics(1.0)), None)
    assert level != "OK" and dict(values)["scans_skipped_time_jump"] == str(10_000 - 1)


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


# -- odometry faults through the scheduler ---------------------------------------------------


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


# -- stamps on the physics step (spec "Scan Stamp") --------------------------------------------------


def test_at_7_hz_stamps_fall_on_the_first_physics_step_at_or_after_k_t():
    # The spec's own figures: due at 0, T, 2T, 3T; stamped at 0, 0.15, 0.29167, 0.43333 s.
    clock = ManualClock()
    s = ScanScheduler(1 / 7, 0.012, clock, max_in_work=8)
    ends = []
    for ms in range(440):
        clock.now_ns = ms * MS + MS // 2 if ms else 0
        ends += [j.sweep_end_ns for j in s.poll(pose_end_ns=clock.now_ns).start]
    assert [round(e * 1e-9, 5) for e in ends] == [0.0, 0.15, 0.29167, 0.43333]
    assert ends == [round(n * 1e9 / 120) for n in (0, 18, 35, 52)]  # steps of 1/120 s
    assert s.next_wakeup_ns() == round(69 * 1e9 / 120)  # 4 T = 0.5714 s -> step 69 (0.575 s)


def test_unstepped_due_times_are_the_plain_multiples_of_the_period():
    clock = ManualClock(150 * MS)
    s = ScanScheduler(1 / 7, 0.012, clock, stepped=False)
    s.poll(pose_end_ns=None)
    assert s.next_wakeup_ns() == round(2e9 / 7)
