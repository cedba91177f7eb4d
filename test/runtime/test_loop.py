"""NodeLoop, the node's logic without ROS: a manual clock, work inline, a real Scanner on a plane."""

from __future__ import annotations

import numpy as np
import pytest
from loop_support import IDENTITY, MS, ManualClock

from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.runtime.events import LogThrottle
from acres_lidar_ros.runtime.loop import InlineExecutor, LoopOutput, NodeLoop
from acres_lidar_ros.scan.scan_types import ScanOptions
from acres_lidar_ros.scan.scanner import Scanner


def make_loop(tracer, clock, config=None, **kw):
    config = config or load_sensor_config("polaris")
    scanner = Scanner(config, tracer=tracer, options=ScanOptions(self_returns=False, seed=3))
    emitted: list[LoopOutput] = []
    loop = NodeLoop(
        scanner,
        clock,
        lambda scan, job: (scan.stamp_ns, scan.index, int(scan.returns.valid.sum())),
        emitted.append,
        executor=InlineExecutor(),
        throttle=LogThrottle(5.0, clock),
        **kw,
    )
    return loop, emitted


def feed(loop, clock, stamps_ms, latency_ms=1):
    """Odometry at rest at the origin, each sample arriving ``latency_ms`` after its stamp."""
    out = LoopOutput()
    for ms in stamps_ms:
        clock.now_ns = (ms + latency_ms) * MS
        out.extend(loop.on_pose(ms * MS, (0.0, 0.0, 0.0), IDENTITY, "odom", "base_footprint"))
    return out


def published(emitted, out=None):
    jobs = [j for o in emitted for j in o.publish] + (out.publish if out else [])
    return [message for j in jobs for message in j.result]  # a whole scan is one slice


def test_the_pose_at_the_stamp_starts_the_scan_and_it_goes_out_at_stamp_plus_delay(plane_tracer):
    clock = ManualClock(890 * MS)
    loop, emitted = make_loop(plane_tracer, clock)
    assert loop.tick().publish == []
    feed(loop, clock, range(900, 1000, 20))
    clock.now_ns = 1_000 * MS
    loop.tick()
    assert loop.scheduler.in_work == 1 and loop.scheduler.jobs()[0].state == "waiting_pose"
    feed(loop, clock, [1000])  # covers the sweep 900..1000 ms: the finish runs (inline) at once
    (job,) = loop.scheduler.jobs()
    assert job.state == "ready" and published(emitted) == []
    clock.now_ns = 1_011 * MS
    assert loop.tick().publish == []
    clock.now_ns = 1_012 * MS
    (cloud,) = published(emitted, loop.tick())
    assert cloud[:2] == (1_000 * MS, 1) and cloud[2] > 0  # the plane is in view
    # Scan 0, due at 900 ms, had no pose before its sweep (800 .. 900 ms): skipped, not held.
    assert loop.scheduler.counts["skipped_pose_start"] == 1 and loop.scheduler.counts["published"] == 1
    assert loop.next_wakeup_ns() == 1_100 * MS


def test_rejected_odometry_is_returned_as_events_and_counted_by_reason(plane_tracer):
    clock = ManualClock(1_000 * MS)
    loop, _ = make_loop(plane_tracer, clock)
    out = LoopOutput()
    out.extend(loop.on_pose(980 * MS, (np.nan, 0.0, 0.0), IDENTITY, "odom", "base_footprint"))
    out.extend(loop.on_pose(980 * MS, (0.0, 0.0, 0.0), IDENTITY, "map", "base_footprint"))
    out.extend(loop.on_pose(980 * MS, (0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 2.0), "odom", "base_footprint"))
    assert [e.kind for e in out.events] == ["invalid", "wrong_frame", "invalid"]
    assert loop.tracker.counts["invalid"] == 2 and loop.tracker.counts["wrong_frame"] == 1
    values = dict(loop.diagnostics()[2])
    assert values["pose_rejected_invalid"] == "2" and values["pose_rejected_wrong_frame"] == "1"


def test_to_log_throttles_repeated_kinds_but_not_debug_lines(plane_tracer):
    clock = ManualClock(1_000 * MS)
    loop, _ = make_loop(plane_tracer, clock)
    events = feed(loop, clock, [980]).events + loop.on_pose(960 * MS, (0, 0, 0), IDENTITY).events
    events += loop.on_pose(940 * MS, (0, 0, 0), IDENTITY).events + loop.on_pose(980 * MS, (0, 0, 0), IDENTITY).events
    assert [e.kind for e in events] == ["out_of_order", "out_of_order", "duplicate"]
    assert [e.kind for e in loop.to_log(events)] == ["out_of_order", "duplicate"]


def test_a_disabled_lidar_and_a_clock_at_zero_open_no_scan(plane_tracer):
    clock = ManualClock(0)
    loop, _ = make_loop(plane_tracer, clock)
    loop.tick()
    assert loop.scheduler.counts["due"] == 0  # sim time before the first /clock
    off = load_sensor_config("polaris").with_overrides({"enabled": False})
    clock.now_ns = 1_000 * MS
    loop, _ = make_loop(plane_tracer, clock, config=off)
    feed(loop, clock, [980, 1000])
    assert loop.scheduler.counts["due"] == 0


def test_pretraces_cover_the_running_sweep_before_its_stamp(plane_tracer):
    clock = ManualClock(1_001 * MS)
    loop, _ = make_loop(plane_tracer, clock)
    loop.tick()
    assert loop.scheduler.upcoming() == (1_100 * MS, 0)
    feed(loop, clock, range(1000, 1081, 20))
    sweep = loop.sweeps._sweeps[1_100 * MS]
    assert 0.7 * sweep.traced.size < sweep.traced.sum() < sweep.traced.size  # traced up to the 1080 ms pose
    off, _ = make_loop(plane_tracer, ManualClock(1_001 * MS), pretrace=False)
    off.tick()
    feed(off, off.clock, range(1000, 1081, 20))
    assert off.sweeps._sweeps == {}


def test_rebuild_keeps_the_scanner_for_runtime_keys_and_replaces_it_otherwise(plane_tracer):
    clock = ManualClock(1_000 * MS)
    loop, _ = make_loop(plane_tracer, clock)
    first = loop.scanner
    loop.rebuild({"return_mode": "last"})
    assert loop.scanner is first and loop.config.return_mode == "last"
    loop.rebuild({"position_flu_m": [2.0, 0.0, 2.0]})  # the mount: rebuilt on the same scanner
    assert loop.scanner is first and loop.scanner.tracer is first.tracer
    assert list(loop.config.position_flu_m) == [2.0, 0.0, 2.0]
    loop.set_options(rain_mm_per_h=4.0)
    assert loop.scanner.options.rain_mm_per_h == 4.0


def test_a_new_mount_drops_the_self_table_made_for_the_old_one_and_says_so(plane_tracer):
    # A table holds the body as seen from one mount. Every cell of this one is a certain body
    # return at 1 m, so with it each beam returns at 1 m; once TF (or a parameter) moves the
    # mount, the table would put the body in the wrong place: the scans leave it out instead.
    from acres_lidar_ros.body.self_returns import SelfReturnTable

    config = load_sensor_config("polaris")
    cells = config.columns * config.rings
    table = SelfReturnTable(
        config.columns, config.rings, np.ones(cells), np.ones(cells), np.full(cells, 50.0), np.zeros(cells)
    )
    clock = ManualClock(1_000 * MS)
    emitted: list[LoopOutput] = []
    scanner = Scanner(config, tracer=plane_tracer, options=ScanOptions(seed=3), self_table=table)
    loop = NodeLoop(
        scanner,
        clock,
        lambda scan, job: scan,
        emitted.append,
        executor=InlineExecutor(),
        throttle=LogThrottle(5.0, clock),
    )
    loop.rebuild({"return_mode": "last"})  # the same mount: the table stays, nothing said
    assert loop.scanner.self_table is table and not [e for o in emitted for e in o.events]
    with pytest.raises(ConfigError):  # a refused update keeps the table with the rest
        loop.rebuild({"position_flu_m": [2.0, 0.0, 2.0], "hz": 20.0})
    assert loop.scanner.self_table is table
    loop.rebuild({"position_flu_m": [2.0, 0.0, 2.0]})
    assert loop.scanner.self_table is None
    (event,) = [e for o in emitted for e in o.events]
    assert (event.level, event.kind) == ("warn", "self_table_dropped")
    assert "[2.0, 0.0, 2.0]" in event.message and "acres-lidar self-table" in event.message
    out = feed(loop, clock, range(1000, 1141, 20))
    (scan,) = [m for o in [*emitted, out] for j in o.publish for m in j.result]
    valid = scan.returns.valid
    assert valid.any() and not np.isclose(scan.returns.range_m[valid], 1.0, atol=0.05).any()


def test_the_loop_defaults_are_the_node_parameters_defaults():
    # The bench drives the loop with its defaults; the node passes its parameters: the same values.
    import inspect

    from acres_lidar_ros.ros.params import NODE_PARAM

    defaults = inspect.signature(NodeLoop).parameters
    for name in ("ts_first_point", "pose_timeout_s", "max_extrapolation_s", "odom_frame", "base_frame"):
        assert defaults[name].default == NODE_PARAM[name].default, name


def test_a_sweep_across_an_odometry_gap_is_skipped_and_counted_then_scans_resume(plane_tracer):
    # 50 Hz odometry, then nothing from 1.0 to 3.0 s: the first scan after the gap would be
    # interpolated across 2 s (0.3 m off on a 20 m circle at 5 m/s). It is skipped and counted;
    # the next one, whose sweep the new poses cover, is published.
    clock = ManualClock(890 * MS)
    loop, emitted = make_loop(plane_tracer, clock, pose_timeout_s=0.05, max_extrapolation_s=0.0)
    out = loop.tick()
    out.extend(feed(loop, clock, range(900, 1001, 20)))
    out.extend(feed(loop, clock, range(3000, 3201, 20)))
    clock.now_ns = 3_250 * MS
    out.extend(loop.tick())
    c = loop.scheduler.counts
    assert c["skipped_pose_gap"] == 1  # due at 3.0 s: its sweep 2.9 .. 3.0 s spans 1.0 .. 3.0 s
    assert c["skipped_pose_start"] == 1  # due at 0.9 s, before the first pose
    assert [cloud[0] for cloud in published(emitted, out)] == [1_000 * MS, 3_100 * MS, 3_200 * MS]
    values = dict(loop.diagnostics()[2])
    assert values["scans_skipped_pose_gap"] == "1" and values["scans_skipped_pose_start"] == "1"
    assert loop.diagnostics()[0] == "OK"  # nothing new since the previous report


def test_model_core_through_the_loop_needs_the_stamp_pose_only_and_publishes_core_scans(plane_tracer):
    from acres_lidar_ros.scan.core_scanner import CoreScanner, model_scanner
    from acres_lidar_ros.sensor.poses import PoseHistory

    config = load_sensor_config("polaris").with_overrides({"model": "core", "columns": 360})
    options = ScanOptions(self_returns=False, seed=3)
    scanner = model_scanner(config, options=options, tracer=plane_tracer)
    assert isinstance(scanner, CoreScanner)
    clock = ManualClock(890 * MS)
    emitted: list[LoopOutput] = []
    loop = NodeLoop(scanner, clock, lambda scan, job: scan, emitted.append, executor=InlineExecutor())
    loop.tick()
    feed(loop, clock, [900])  # the pose at scan 0's stamp: enough for a core scan (no motion distortion)
    clock.now_ns = 912 * MS
    (scan,) = published(emitted, loop.tick())
    assert scan.index == 0 and scan.stamp_ns == 900 * MS and loop.scheduler.counts["skipped_pose_start"] == 0
    at_rest = PoseHistory.from_arrays(np.array([0.9]), np.zeros((1, 3)), np.array([IDENTITY]))
    direct = CoreScanner(config, options=options, tracer=plane_tracer).scan(at_rest, 900 * MS, index=0)
    np.testing.assert_array_equal(scan.returns.range_m, direct.returns.range_m)
    assert scan.returns.valid.sum() > 360 * 16  # the plane below the mount is in view
    with pytest.raises(ConfigError, match="rain_mm_per_h"):
        loop.set_options(rain_mm_per_h=4.0)  # ACRES Core's LiDAR has no rain
