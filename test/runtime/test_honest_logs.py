"""Nothing passes without a word: every skipped or late scan is an event, the log throttle counts
what it holds back, and pose jumps beyond the speed or acceleration limit are reported and counted.

NodeLoop with an injected clock, work inline, a real Scanner on a plane (as test_loop.py).
"""

from __future__ import annotations

import re

from loop_support import IDENTITY, MS, ManualClock

from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.runtime.events import Event, LogThrottle
from acres_lidar_ros.runtime.loop import InlineExecutor, LoopOutput, NodeLoop
from acres_lidar_ros.runtime.pose_tracker import GroundWatch
from acres_lidar_ros.scan.scan_types import ScanOptions
from acres_lidar_ros.scan.scanner import Scanner
from acres_lidar_ros.tracing.scene_frame import odom_in_scene_transform


def make_loop(tracer, clock, period_s=5.0, **kw):
    config = load_sensor_config("polaris").with_overrides({"columns": 180})  # a cheap trace
    scanner = Scanner(config, tracer=tracer, options=ScanOptions(self_returns=False, seed=3))
    emitted: list[LoopOutput] = []
    loop = NodeLoop(
        scanner,
        clock,
        lambda scan, job: (scan.stamp_ns, scan.index),
        emitted.append,
        executor=InlineExecutor(),
        throttle=LogThrottle(period_s, clock),
        **kw,
    )
    return loop, emitted


def stamp_of(job):
    """The stamp ``pack`` gave a published scan (the loop publishes a list of slices: one here)."""
    result = job.result[0] if isinstance(job.result, list) else job.result
    return result[0]


def drive(loop, clock, samples):
    """``samples``: (stamp_ms, arrival_ms, x_m); each arrives at max(its arrival, the previous one's)
    (a late stream that catches up comes as a burst), with a tick every 10 ms between them."""
    events: list[Event] = []
    drive.published = []  # the stamps of the scans published, in order
    now_ms = 0
    for stamp_ms, arrival_ms, x_m in samples:
        while now_ms + 10 < arrival_ms:
            now_ms += 10
            clock.now_ns = now_ms * MS
            out = loop.tick()
            events += out.events
            drive.published += [stamp_of(job) for job in out.publish]
        now_ms = max(now_ms, arrival_ms)
        clock.now_ns = now_ms * MS
        out = loop.on_pose(stamp_ms * MS, (x_m, 0.0, 0.0), IDENTITY, "odom", "base_footprint")
        events += out.events
        drive.published += [stamp_of(job) for job in out.publish]
    return events


def test_the_throttle_passes_one_line_per_period_and_counts_the_rest():
    clock = ManualClock(10_000 * MS)
    throttle = LogThrottle(5.0, clock)
    skip = [Event("warn", "no_pose", f"scan {i} skipped", i) for i in range(10)]
    assert [e.message for e in throttle.filter(skip[:1])] == ["scan 0 skipped"]
    clock.now_ns += 1_000 * MS
    assert throttle.filter(skip[1:4]) == []  # held back, counted
    clock.now_ns += 4_500 * MS  # 5.5 s after the first line: the next line carries the count
    (line,) = throttle.filter(skip[4:5])
    assert line.message == "scan 4 skipped [3 more 'no_pose' in the 5.5 s since the last]"
    clock.now_ns += 100 * MS
    assert throttle.filter(skip[5:9]) == []
    clock.now_ns += 4_800 * MS  # the period since the last line has not passed: nothing yet
    assert throttle.filter([]) == []
    clock.now_ns += 200 * MS  # it has: a closing line with the count and the last message
    (closing,) = throttle.filter([])
    assert closing.message == "4 more 'no_pose' in the last 5.1 s; the last: scan 8 skipped"
    assert closing.level == "warn" and closing.scan_index == 8
    assert throttle.filter([]) == [] and throttle.suppressed == {}
    # Debug lines always pass; kinds are throttled apart; ``due(force=True)`` empties it at shutdown.
    debug = Event("debug", "duplicate", "dup")
    assert throttle.filter([debug, debug]) == [debug, debug]
    assert [e.kind for e in throttle.filter([Event("warn", "late", "a"), Event("warn", "late", "b")])] == ["late"]
    assert [e.message for e in throttle.due(force=True)] == ["1 more 'late' in the last 0.0 s; the last: b"]


def test_odometry_200_ms_late_for_a_second_skips_scans_and_the_log_accounts_for_each(plane_tracer):
    clock = ManualClock(0)
    loop, emitted = make_loop(plane_tracer, clock, period_s=5.0)
    samples = []
    for stamp_ms in range(0, 4000, 20):
        latency_ms = 200 if 1000 <= stamp_ms < 2000 else 1  # beyond pose_timeout_s + max_extrapolation_s
        samples.append((stamp_ms, stamp_ms + latency_ms, 0.0))
    events = drive(loop, clock, samples)
    events += [e for out in emitted for e in out.events]
    counts = loop.scheduler.counts
    # Scans due 1.0 .. 2.0 s: the late stream catches up at 2.18 s, after the 2.0 s scan was given up (2.05 s).
    assert counts["skipped_no_pose"] == 11
    # Every skipped scan is an event, and the log lines (one per 5 s, with counts) account for all.
    assert sum(e.kind == "no_pose" for e in events) == counts["skipped_no_pose"]
    lines = loop.to_log(events, final=True)
    no_pose = [e for e in lines if e.kind == "no_pose"]
    assert len(no_pose) == 2  # the first skip, then at shutdown the closing line with the rest
    first, closing = no_pose
    assert "skipped: no pose" in first.message
    rest = int(re.match(r"(\d+) more 'no_pose'", closing.message).group(1))
    assert 1 + rest == counts["skipped_no_pose"]
    diagnostics = dict(loop.diagnostics()[2])
    assert diagnostics["scans_skipped_no_pose"] == str(counts["skipped_no_pose"])


def test_late_scans_are_warnings_that_carry_their_count(plane_tracer):
    clock = ManualClock(0)
    loop, emitted = make_loop(plane_tracer, clock)
    events = drive(loop, clock, [(ms, ms + 40, 0.0) for ms in range(0, 1000, 20)])  # ready after stamp + 12 ms
    events += [e for out in emitted for e in out.events]
    late = [e for e in events if e.kind == "late"]
    assert late and all(e.level == "warn" for e in late)
    assert len(late) == loop.scheduler.counts["late"]
    assert late[-1].message.endswith(f"(scans_late = {loop.scheduler.counts['late']})")


def test_a_10_m_teleport_is_reported_counted_and_not_interpolated_across(plane_tracer):
    clock = ManualClock(0)
    loop, emitted = make_loop(plane_tracer, clock)
    samples = [(ms, ms + 1, 0.0 if ms < 1500 else 10.0) for ms in range(0, 2500, 20)]
    events = drive(loop, clock, samples)
    (jump,) = [e for e in events if e.kind == "jump"]
    assert jump.level == "warn" and "at 1.500 s is 10.000 m from the previous one 20.0 ms before" in jump.message
    assert "500.0 m/s > max_pose_speed_mps 50" in jump.message
    assert loop.tracker.counts["jump"] == 1
    published = drive.published + [stamp_of(job) for out in emitted for job in out.publish]
    # The history restarts at the jump's pose (1.5 s): the sweep 1.4 .. 1.5 s starts before it and is
    # skipped; the sweep 1.5 .. 1.6 s lies wholly after it. No scan is traced across the jump.
    assert 1_500 * MS not in published and {1_400 * MS, 1_600 * MS} <= set(published)
    assert loop.scheduler.counts["skipped_pose_start"] == 1  # the jump (the first scan, 0.1 s, has the pose at 0)
    values = dict(loop.diagnostics()[2])
    assert values["pose_jumps"] == "1"


def test_with_the_speed_check_off_the_jump_is_kept_as_before(plane_tracer):
    clock = ManualClock(0)
    loop, emitted = make_loop(plane_tracer, clock, max_pose_speed_mps=0.0, max_pose_acceleration_mps2=0.0)
    samples = [(ms, ms + 1, 0.0 if ms < 1500 else 10.0) for ms in range(0, 2500, 20)]
    events = drive(loop, clock, samples)
    assert not [e for e in events if e.kind in ("jump", "acceleration")]
    published = drive.published + [stamp_of(job) for out in emitted for job in out.publish]
    assert 1_500 * MS in published  # interpolated across the jump: what the check is for


def test_a_sudden_change_of_velocity_is_reported_and_kept(plane_tracer):
    clock = ManualClock(0)
    loop, _ = make_loop(plane_tracer, clock)
    # At rest, then 3 m/s from 1.0 s on: the velocity changes by 3 m/s over one 20 ms segment,
    # 150 m/s^2 > 50 m/s^2.
    samples = [(ms, ms + 1, max(0.0, (ms - 1000) * 3e-3)) for ms in range(0, 1500, 20)]
    events = drive(loop, clock, samples)
    (acc,) = [e for e in events if e.kind == "acceleration"]
    assert "at 1.020 s" in acc.message and "150.0 m/s^2 > max_pose_acceleration_mps2 50" in acc.message
    assert loop.tracker.counts["acceleration"] == 1 and loop.tracker.counts["jump"] == 0
    assert loop.tracker.counts["accepted"] + 1 == len(samples)  # kept
    assert dict(loop.diagnostics()[2])["pose_accelerations"] == "1"
    # Smooth enough for a higher limit: no event.
    clock2 = ManualClock(0)
    loop2, _ = make_loop(plane_tracer, clock2, max_pose_acceleration_mps2=200.0)
    assert not [e for e in drive(loop2, clock2, samples) if e.kind == "acceleration"]


def test_a_pose_under_the_ground_or_high_above_it_is_warned_with_the_terrain_height_and_counted(plane_tracer):
    """The ground is the plane z = 0 (the fixture's scene), so a base_footprint at z = -0.5 m is
    0.5 m under it and one at z = +3 m is 3 m over it (the CLI's limits: 0.05 m below, 2 m above,
    ``scene.drives``). With the odom frame 1 m below the scene's origin (``odom_in_scene``) a pose
    at z = 0.5 m of odom is 0.5 m under the ground too."""
    clock = ManualClock(0)
    loop, _ = make_loop(plane_tracer, clock, ground=GroundWatch(plane_tracer.scene))
    z_of = lambda ms: -0.5 if ms < 600 else 3.0 if ms < 1200 else 0.0  # noqa: E731
    events = []
    for ms in range(0, 1500, 20):
        clock.now_ns = (ms + 1) * MS
        events += loop.on_pose(ms * MS, (0.0, 0.0, z_of(ms)), IDENTITY, "odom", "base_footprint").events
    lines = loop.to_log(events, final=True)
    below = [e for e in lines if e.kind == "below_terrain"]
    above = [e for e in lines if e.kind == "above_terrain"]
    # 30 poses under the ground, 30 over it: one line each at once, the rest in the closing line.
    assert len(below) == 2 and len(above) == 2
    assert below[0].level == "warn" and "more than 0.05 m below the terrain" in below[0].message
    assert (
        "base_footprint z = -0.500 m at (x, y) = (0.00, 0.00) where the terrain is at z = 0.000 m" in below[0].message
    )
    assert below[1].message.startswith("29 more 'below_terrain'")
    assert "more than 2 m above the terrain" in above[0].message and "(+3.000 m)" in above[0].message
    assert above[1].message.startswith("29 more 'above_terrain'")
    values = dict(loop.diagnostics()[2])
    assert (values["pose_below_terrain"], values["pose_above_terrain"]) == ("30", "30")
    assert loop.tracker.counts["accepted"] + loop.tracker.counts["jump"] == 75  # kept (the two steps of z are jumps)
    odom_low = GroundWatch(plane_tracer.scene, odom_in_scene_transform("0 0 -1 0 0 0", "odom_in_scene"))
    (event,) = odom_low.check(0, (0.0, 0.0, 0.5))
    assert "base_footprint z = -0.500 m" in event.message and "terrain is at z = 0.000 m" in event.message
    assert not odom_low.check(0, (0.0, 0.0, 1.0))
