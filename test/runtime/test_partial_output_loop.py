"""Partial output through the ROS-free NodeLoop with a simulated clock (manual, inline work): each
slice leaves at its own end + delay_s while the sweep still runs, the slices cover the scan once
and in order, and put together they are the scan ``Scanner.scan`` (the recorder) makes."""

from __future__ import annotations

import numpy as np
import pytest
from loop_support import IDENTITY, MS, ManualClock

from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.outputs.shaping import shape_scan, slice_scan
from acres_lidar_ros.runtime.events import LogThrottle
from acres_lidar_ros.runtime.loop import InlineExecutor, LoopOutput, NodeLoop, SliceOut
from acres_lidar_ros.runtime.scheduler import ScanJob
from acres_lidar_ros.scan.scan_types import ScanOptions
from acres_lidar_ros.scan.scanner import Scanner
from acres_lidar_ros.sensor.poses import PoseHistory

SLICES = 4
DELAY_MS = 12  # the Polaris's delay_s


def pack(shaped, job):
    return {
        "frame_id": shaped.frame_id,
        "span": (shaped.start_ns, shaped.end_ns),
        "slice": (shaped.slice_index, shaped.slice_count),
        "columns": shaped.column_ids.copy(),
        "range_m": shaped.returns.range_m.copy(),
        "points": shaped.points.copy(),
        "stamp_ns": shaped.stamp_ns,
    }


def config_of(**overrides):
    return load_sensor_config("polaris").with_overrides({"partial_output": True, "partial_slices": SLICES, **overrides})


def make_loop(tracer, clock, config):
    scanner = Scanner(config, tracer=tracer, options=ScanOptions(self_returns=False, seed=3))
    emitted: list[LoopOutput] = []
    loop = NodeLoop(scanner, clock, pack, emitted.append, executor=InlineExecutor(), throttle=LogThrottle(5.0, clock))
    return loop, emitted


def x_at(t_s):
    return 2.0 * t_s


def drive(loop, clock, emitted, from_ms, until_ms, odom_every_ms=5, during=None):
    """A tick every millisecond of the simulated clock, odometry (x = 2 m/s t) every
    ``odom_every_ms`` arriving when it is stamped; ``during(ms)`` runs before each tick."""
    for ms in range(from_ms, until_ms + 1):
        clock.now_ns = ms * MS
        if during is not None:
            during(ms)
        if ms % odom_every_ms == 0:
            emitted.append(loop.on_pose(ms * MS, (x_at(ms * 1e-3), 0.0, 0.0), IDENTITY, "odom", "base_footprint"))
        emitted.append(loop.tick())


def publications(emitted):
    """(published_ns, entry, parts) of every entry published, in order."""
    out = []
    for o in emitted:
        for entry in o.publish:
            out.append((entry.published_ns, entry, entry.result))
    return out


def test_each_slice_leaves_at_its_end_plus_delay_before_the_sweep_ends(plane_tracer):
    """The scan stamped 1.0 s sweeps 0.9 .. 1.0 s in four 25 ms slices: slices 0, 1 and 2 are
    published at 0.937, 0.962 and 0.987 s (their ends + 12 ms), before the sweep ends, while
    the last columns are still to fire; the last slice leaves with the scan at 1.012 s."""
    config = config_of()
    clock = ManualClock(880 * MS)
    loop, emitted = make_loop(plane_tracer, clock, config)
    drive(loop, clock, emitted, 880, 1_020)
    pubs = [(t, e, parts) for t, e, parts in publications(emitted) if parts[0]["stamp_ns"] == 1_000 * MS]
    early = [(t, e) for t, e, _ in pubs if isinstance(e, SliceOut)]
    assert [e.slice_index for _, e in early] == [0, 1, 2]
    for t, e in early:
        end_ms = 900 + 25 * (e.slice_index + 1)
        assert t == e.release_ns == (end_ms + DELAY_MS) * MS < 1_000 * MS
    (t_last, job, last_parts) = pubs[-1]
    assert isinstance(job, ScanJob) and t_last == job.release_ns == (1_000 + DELAY_MS) * MS
    assert [p["slice"] for p in last_parts] == [(3, SLICES)]
    parts = [p for _, _, ps in pubs for p in ps]
    assert [p["slice"] for p in parts] == [(k, SLICES) for k in range(SLICES)]
    assert [p["span"] for p in parts] == [((900 + 25 * k) * MS, (925 + 25 * k) * MS) for k in range(SLICES)]
    columns = np.concatenate([p["columns"] for p in parts])
    assert np.array_equal(np.sort(columns), np.arange(config.columns))  # every column once
    # Each slice's columns all fire inside its span (their first firing time).
    scanner = Scanner(config, tracer=plane_tracer)
    offsets_ms = 1_000 + scanner.time_offsets_s() * 1e3
    for p in parts:
        start_ns, end_ns = p["span"]
        assert np.all(offsets_ms[p["columns"]] * MS >= start_ns - 1) and np.all(offsets_ms[p["columns"]] * MS < end_ns)


def test_the_slices_put_together_are_the_recorded_scan(plane_tracer):
    """What the node publishes, slice by slice while the sweep runs, is the scan ``Scanner.scan``
    traces from the same poses (what ``acres-lidar record`` writes), cut into the same slices:
    the same columns, ranges and points, bit for bit, for two scans in a row (the noise stream
    runs on across them)."""
    config = config_of(output_frame="world", motion_compensation=True)
    clock = ManualClock(880 * MS)
    loop, emitted = make_loop(plane_tracer, clock, config)
    drive(loop, clock, emitted, 880, 1_120)
    by_stamp: dict[int, list] = {}
    index_of: dict[int, int] = {}
    for _, entry, parts in publications(emitted):
        for p in parts:
            by_stamp.setdefault(p["stamp_ns"], []).append(p)
            index_of[p["stamp_ns"]] = entry.index
    assert sorted(by_stamp) == [1_000 * MS, 1_100 * MS]
    assert index_of[1_000 * MS] == 1  # the scan due at 0.9 s sweeps before the first pose: skipped
    ms = np.arange(880, 1_121, 5)
    times = ms * MS / 1e9  # as the tracker keeps the ns stamps
    history = PoseHistory.from_arrays(times, np.stack([x_at(ms * 1e-3), 0 * ms, 0 * ms], -1), [IDENTITY] * ms.size)
    recorder = Scanner(config, tracer=plane_tracer, options=ScanOptions(self_returns=False, seed=3))
    T = recorder.pattern.T_base_sensor
    for stamp_ns in sorted(by_stamp):
        scan = recorder.scan(history, stamp_ns, index=index_of[stamp_ns])
        shaped = shape_scan(scan, config.outputs, history, T, world_frame_id="odom", period_s=config.period_s)
        expected = slice_scan(shaped, SLICES, config.period_s)
        got = by_stamp[stamp_ns]
        assert [p["slice"][0] for p in got] == [s.slice_index for s in expected]
        for p, s in zip(got, expected):
            assert np.array_equal(p["columns"], s.column_ids)
            assert np.array_equal(p["range_m"], s.returns.range_m, equal_nan=True)
            assert np.array_equal(p["points"], s.points, equal_nan=True)


def test_partial_runs_are_the_same_run_to_run(plane_tracer):
    def run():
        clock = ManualClock(880 * MS)
        loop, emitted = make_loop(plane_tracer, clock, config_of())
        drive(loop, clock, emitted, 880, 1_120)
        return [(t, p["slice"], p["range_m"]) for t, _, parts in publications(emitted) for p in parts]

    a, b = run(), run()
    assert len(a) == len(b) == 2 * SLICES
    for (ta, sa, ra), (tb, sb, rb) in zip(a, b):
        assert ta == tb and sa == sb and np.array_equal(ra, rb, equal_nan=True)


def test_a_live_output_change_mid_sweep_applies_from_the_next_slice(plane_tracer):
    """The attribute list: with partial output, edits of the output frame apply to what is delivered
    next. Set at 0.95 s (slices 0 and 1 of the scan stamped 1.0 s finished): slices 0 and 1 in
    the sensor frame, 2 and 3 in the world. partial_slices, which fixes a sweep's draw order,
    changes from the next sweep on; a refused change changes nothing."""
    config = config_of()
    clock = ManualClock(880 * MS)
    loop, emitted = make_loop(plane_tracer, clock, config)

    def during(ms):
        if ms == 951:
            loop.rebuild({"output_frame": "world", "partial_slices": 2})
            with pytest.raises(Exception, match=r"lidar\.partial_slices = 0 is out of range"):
                loop.rebuild({"partial_slices": 0})

    drive(loop, clock, emitted, 880, 1_120, during=during)
    parts = [p for _, _, ps in publications(emitted) for p in ps]
    first = [p for p in parts if p["stamp_ns"] == 1_000 * MS]
    second = [p for p in parts if p["stamp_ns"] == 1_100 * MS]
    assert [(p["slice"], p["frame_id"]) for p in first] == [
        ((0, 4), config.frame_id),
        ((1, 4), config.frame_id),
        ((2, 4), "odom"),
        ((3, 4), "odom"),
    ]
    assert [(p["slice"], p["frame_id"]) for p in second] == [((0, 2), "odom"), ((1, 2), "odom")]


def test_without_partial_output_the_scan_leaves_whole_at_its_release(plane_tracer):
    config = load_sensor_config("polaris")
    clock = ManualClock(880 * MS)
    loop, emitted = make_loop(plane_tracer, clock, config)
    drive(loop, clock, emitted, 880, 1_020)
    pubs = publications(emitted)
    assert len(pubs) == 1 and isinstance(pubs[0][1], ScanJob) and pubs[0][0] == (1_000 + DELAY_MS) * MS
    assert pubs[0][2][0]["columns"].size == config.columns


def test_a_pattern_rebuild_mid_sweep_keeps_the_slices_out_and_publishes_the_rest_once(plane_tracer):
    """the attribute list: an edit of tick or channel identity discards the partial scan. Slices 0 and 1
    are out when ``lens_center_m`` changes (a rebuild between scans); the sweep is traced again
    with the new pattern, and only slices 2 and 3 of it follow: each slice once, in order."""
    config = config_of()
    clock = ManualClock(880 * MS)
    loop, emitted = make_loop(plane_tracer, clock, config)

    def during(ms):
        if ms == 951:
            loop.rebuild({"lens_center_m": config.lens_center_m + 0.01})

    drive(loop, clock, emitted, 880, 1_020, during=during)
    parts = [p for _, _, ps in publications(emitted) for p in ps if p["stamp_ns"] == 1_000 * MS]
    assert [p["slice"] for p in parts] == [(k, SLICES) for k in range(SLICES)]
    assert np.array_equal(np.sort(np.concatenate([p["columns"] for p in parts])), np.arange(config.columns))


def test_with_the_truth_on_the_scans_truth_goes_beside_its_last_slice(plane_tracer):
    """The truth is per scan: one truth cloud of every cell (columns x rings), beside the last
    slice, with that slice's stamp; the early slices carry none."""
    from acres_lidar_ros.outputs.point_types import PROFILES
    from acres_lidar_ros.runtime.messages import pack_scan

    config = config_of()
    clock = ManualClock(880 * MS)
    scanner = Scanner(config, tracer=plane_tracer, options=ScanOptions(self_returns=False, seed=3, truth=True))
    emitted: list[LoopOutput] = []

    def message(cloud, frame_id, stamp_ns):
        return cloud.shape, frame_id, stamp_ns

    loop = NodeLoop(
        scanner,
        clock,
        lambda shaped, job: pack_scan(shaped, PROFILES["XYZI"], shaped.end_ns, message),
        emitted.append,
        executor=InlineExecutor(),
        throttle=LogThrottle(5.0, clock),
    )
    drive(loop, clock, emitted, 880, 1_020)
    messages = [m for _, _, ms in publications(emitted) for m in ms]
    assert len(messages) == SLICES
    assert [m.truth is None for m in messages] == [True] * (SLICES - 1) + [False]
    shape, frame_id, stamp_ns = messages[-1].truth
    assert shape == (config.columns, config.rings) and frame_id == config.frame_id
    assert stamp_ns == messages[-1].points[2] == 1_000 * MS
