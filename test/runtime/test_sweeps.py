"""SweepTracer: a scan's columns traced while its sweep runs, the same scan as one Scanner.scan."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

from acres_lidar_ros.runtime.scheduler import ScanJob
from acres_lidar_ros.runtime.sweeps import SweepTracer
from acres_lidar_ros.sensor.poses import PoseHistory


def test_sweep_tracer_traces_columns_as_poses_arrive_and_finishes_the_same_scan():
    import numpy as np

    from acres_lidar_ros.config.sensors import load_sensor_config
    from acres_lidar_ros.scan.scan_types import ScanOptions
    from acres_lidar_ros.scan.scanner import Scanner
    from acres_lidar_ros.scene.builder import SceneBuilder
    from acres_lidar_ros.scene.grids import TerrainGrid
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


WAIT_S = 120.0
"""Bounds of the waits below: far beyond any stall of a loaded machine (each returns at once when
all goes well); with 5 s the first pretrace could time out before ``block.set()`` and break the order."""


class _FakeSweep:
    """Stands in for scan.Sweep: records the poses each pretrace saw."""

    started = threading.Event()  # set by the first pretrace to run

    def __init__(self, end_ns, index, log, block):
        self.index, self.boxes, self.end_ns, self.log, self.block = index, (), end_ns, log, block

    def trace_covered(self, poses, min_columns=1):
        self.log.append((self.end_ns, poses))
        self.started.set()
        self.block.wait(WAIT_S)
        return 7

    def finish(self, poses, extrapolate=False):
        self.log.append((self.end_ns, "finish"))
        return "scan"


def _fake_tracer(block=None):

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
    tracer, log, block = _fake_tracer()
    tracer.request_pretrace(100, 1, "first")
    tracer.request_pretrace(200, 2, "second")
    drain = threading.Thread(target=tracer.drain_pretraces)
    _FakeSweep.started = threading.Event()
    drain.start()
    assert _FakeSweep.started.wait(WAIT_S)  # the first pretrace runs (and holds the lock) until block is set
    job = ScanJob(index=1, sweep_end_ns=100, stamp_ns=100, release_ns=0, opened_ns=0)
    finisher = threading.Thread(target=tracer.finish, args=(job, "poses"))
    finisher.start()
    deadline = time.monotonic() + WAIT_S  # a bounded wait for the finisher to queue up; no timing assert
    while tracer._finishing == 0 and time.monotonic() < deadline:
        time.sleep(0.001)
    assert tracer._finishing == 1
    block.set()
    finisher.join(WAIT_S)
    drain.join(WAIT_S)
    assert not finisher.is_alive() and not drain.is_alive()
    assert [entry[1] for entry in log] == ["first", "finish", "second"]
