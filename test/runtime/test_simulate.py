"""The node loop driven by simulated clocks and odometry (the path of ``bench --schedule``).

With a ``VirtualClock`` and an ``InlineExecutor`` a run is deterministic: a scan's work takes no
simulated time unless the test's ``pack`` moves the clock, so every figure is known exactly. The
600-scan figures come from ``acres-lidar bench --schedule``, never from a test.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.runtime.loop import InlineExecutor
from acres_lidar_ros.runtime.simulate import VirtualClock, WallPacedClock, odometry_stream, simulate_schedule
from acres_lidar_ros.scan.scan_types import ScanOptions
from acres_lidar_ros.scan.scanner import Scanner
from acres_lidar_ros.scene.builder import SceneBuilder
from acres_lidar_ros.scene.grids import TerrainGrid
from acres_lidar_ros.sensor.poses import PoseHistory
from acres_lidar_ros.tracing.trace import Tracer

MS = 1_000_000
START_NS = 10_000 * MS  # ROS time 0 means "no /clock yet" to the loop: start well after it
T_NS = 100 * MS  # the Polaris at 10 Hz
DELAY_NS = 12 * MS


@pytest.fixture(scope="module")
def flat_tracer() -> Tracer:
    return Tracer(SceneBuilder(TerrainGrid(np.array([-300.0, -300.0]), 600.0, np.zeros((2, 2)))).build())


def scanner(tracer: Tracer) -> Scanner:
    return Scanner(load_sensor_config("polaris"), tracer=tracer, options=ScanOptions(self_returns=False, seed=1))


def straight_line() -> PoseHistory:
    t = np.linspace(0.0, 100.0, 101)
    return PoseHistory.from_arrays(
        t, np.column_stack([2.0 * t, np.zeros(101), np.zeros(101)]), np.tile([0, 0, 0, 1.0], (101, 1))
    )


def stream(n_scans: int, rate_hz: float = 50.0, latency_s: float = 0.001):
    return odometry_stream(
        straight_line(), START_NS - T_NS, START_NS + (n_scans + 2) * T_NS, rate_hz=rate_hz, latency_s=latency_s
    )


def test_odometry_stream_samples_the_trajectory_and_loops():
    t = np.linspace(0.0, 10.0, 11)
    history = PoseHistory.from_arrays(t, np.column_stack([t, t * 0, t * 0]), np.tile([0, 0, 0, 1.0], (11, 1)))
    samples = odometry_stream(history, 0, 12_000 * MS, rate_hz=50, latency_s=0.002)
    assert len(samples) == 601
    assert samples[1].stamp_ns == 20 * MS and samples[1].arrival_ns == 22 * MS
    assert samples[100].position_m[0] == pytest.approx(2.0)
    assert samples[550].position_m[0] == pytest.approx(1.0)  # 11 s -> 1 s into the 10 s trajectory


def test_a_scan_that_costs_no_time_is_published_at_exactly_stamp_plus_delay(flat_tracer):
    packed = []

    def pack(scan, job):
        packed.append((job.index, scan.stamp_ns, scan.index))
        return job.index

    out = simulate_schedule(
        scanner(flat_tracer),
        stream(12),
        12,
        pack=pack,
        clock=VirtualClock(START_NS - T_NS // 2),
        executor=InlineExecutor(),
    )
    c = out["counts"]
    assert (c["due"], c["published"], c["late"], c["dropped_busy"], c["skipped_no_pose"]) == (12, 12, 0, 0, 0)
    # Due at k T from the first multiple of T after the start; each scan is the k-th of the run.
    assert packed == [(k, START_NS + k * T_NS, k) for k in range(12)]
    on_time = out["publish_minus_stamp_ms"]["on_time"]
    assert on_time["n"] == 12 and on_time["min"] == on_time["max"] == DELAY_NS / MS
    assert out["at_delay"] == {"tolerance_ms": 1.0, "n": 12, "fraction_of_due": 1.0}
    # The pose at the stamp arrives 1 ms after it (50 Hz odometry on the period's grid).
    assert out["pose_wait_ms"]["min"] == out["pose_wait_ms"]["max"] == 1.0
    # The run ends at the last release, 11.112 s: samples stamped 9.90 ... 11.10 s arrived by then.
    assert out["pose_counts"]["accepted"] == round((11.1 - 9.9) / 0.02) + 1


def test_a_slow_finish_makes_every_scan_late_by_its_cost(flat_tracer):
    clock = VirtualClock(START_NS - T_NS // 2)

    def pack(scan, job):
        clock.now_ns += 45 * MS  # the finish takes 45 ms of simulated time
        return job.index

    out = simulate_schedule(scanner(flat_tracer), stream(6), 6, pack=pack, clock=clock, executor=InlineExecutor())
    c = out["counts"]
    assert (c["due"], c["published"], c["late"]) == (6, 6, 6)
    late = out["publish_minus_stamp_ms"]["late"]
    assert late["min"] == late["max"] == 46.0  # 1 ms for the pose, 45 ms of work
    assert out["at_delay"]["n"] == 0 and out["events"]["late"] == 6


def test_a_failed_finish_is_counted_and_later_scans_go_on(flat_tracer):
    def pack(scan, job):
        if job.index == 1:
            raise RuntimeError("tracer lost")
        return job.index

    out = simulate_schedule(
        scanner(flat_tracer),
        stream(5),
        5,
        pack=pack,
        clock=VirtualClock(START_NS - T_NS // 2),
        executor=InlineExecutor(),
    )
    assert out["counts"]["failed"] == 1 and out["counts"]["published"] == 4
    assert out["events"]["trace_failed"] == 1


def test_without_odometry_no_scan_is_published_and_each_is_counted(flat_tracer):
    out = simulate_schedule(
        scanner(flat_tracer),
        [],
        4,
        pack=lambda scan, job: job.index,
        clock=VirtualClock(START_NS - T_NS // 2),
        executor=InlineExecutor(),
    )
    assert out["counts"]["published"] == 0 and out["counts"]["skipped_no_pose"] == 4


def test_wall_paced_run_with_real_workers_accounts_for_every_due_scan(flat_tracer):
    # Real threads and the wall clock's pace: only the bookkeeping is asserted, never a time.
    with ThreadPoolExecutor(max_workers=2) as pool:
        out = simulate_schedule(
            scanner(flat_tracer),
            stream(4),
            4,
            pack=lambda scan, job: job.index,
            clock=WallPacedClock(START_NS - T_NS // 2),
            executor=pool,
        )
    c = out["counts"]
    assert c["due"] == 4
    assert c["due"] == c["published"] + c["dropped_busy"] + c["skipped_no_pose"] + c["failed"]


def test_partial_output_slices_leave_while_the_sweep_runs(flat_tracer):
    """Four 25 ms slices, odometry at 50 Hz 1 ms late: slices 0 .. 2 of each scan leave before
    its sweep ends, each at its end + 12 ms or, when the pose covering it comes later, as soon as
    that pose arrives (slice 0: the pose at 40 ms arrives at 41 ms, 16 ms after its end, 59 ms
    before the sweep ends)."""
    config = load_sensor_config("polaris").with_overrides({"partial_output": True, "partial_slices": 4})
    partial_scanner = Scanner(config, tracer=flat_tracer, options=ScanOptions(self_returns=False, seed=1))
    out = simulate_schedule(
        partial_scanner,
        stream(6),
        6,
        pack=lambda scan, job: job.index,
        clock=VirtualClock(START_NS - T_NS // 2),
        executor=InlineExecutor(),
    )
    assert out["counts"]["published"] == 6 and out["counts"]["late"] == 0
    early = out["early_slices"]
    assert early["n"] == 3 * 6
    after_end = early["publish_minus_slice_end_ms"]
    # Slices 1 and 2 at their end + 12 ms, slice 0 16 ms after its end (the first scan's 25 ms:
    # the run's first tick, which opens the schedule, is only at 50 ms into its sweep).
    assert after_end["min"] == after_end["median"] == DELAY_NS / MS and after_end["max"] == 25.0
    assert early["before_sweep_end_ms"]["max"] == 59.0 and early["before_sweep_end_ms"]["min"] == 13.0
