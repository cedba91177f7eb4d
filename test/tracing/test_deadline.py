"""Scans under a compute deadline: the progressive ray order and the deadline contract (injected clock)."""

import json

import numpy as np
import pytest

from acres_lidar_ros.apps import cli
from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.sensor.ray_order import beam_order, progressive_order
from acres_lidar_ros.tracing.deadline import trace_until_deadline


# --- the order ----------------------------------------------------------------------------
@pytest.mark.parametrize("n", [3, 4, 11, 360, 361])
def test_order_starts_centre_then_edges_and_every_prefix_spans_the_field(n):
    order = progressive_order(n)
    assert sorted(order.tolist()) == list(range(n))
    assert order[0] == n // 2 and set(order[1:3].tolist()) == {0, n - 1}
    for k in range(3, n + 1):
        prefix = order[:k]
        assert prefix.min() == 0 and prefix.max() == n - 1


@pytest.mark.parametrize("n", [11, 360, 361])
def test_each_ray_goes_into_a_largest_gap(n):
    order = progressive_order(n)
    for k in range(3, n):
        seen = np.sort(order[:k])
        gaps = np.diff(seen)
        lo = seen[np.searchsorted(seen, order[k]) - 1]
        hi = seen[np.searchsorted(seen, order[k])]
        assert hi - lo == gaps.max()  # the gap it splits is one of the largest
        assert abs((order[k] - lo) - (hi - order[k])) <= 1  # and it lands in its middle


def test_order_of_361_angles_is_mirror_symmetric_pair_by_pair():
    offsets = progressive_order(361) - 180
    assert offsets[:5].tolist() == [0, -180, 180, -90, 90]
    assert np.all(offsets[3::2] == -offsets[4::2])  # a left ray, then its mirror


def test_planar_beams_go_forward_first_then_the_two_behind():
    azimuth = 2 * np.pi * np.arange(360) / 360
    order = beam_order(azimuth)
    assert order[:3].tolist() == [0, 180, 179]
    assert order[3:5].tolist() == [270, 89]  # -90 deg, then the middle of the right half


def test_bad_order_sizes_are_refused():
    with pytest.raises(ConfigError, match="n = 0"):
        progressive_order(0)


# --- the deadline, with an injected clock ---------------------------------------------------
class FakeClock:
    """Advances only when a trace runs: ``overhead_s`` per call plus ``per_ray_s`` per ray."""

    def __init__(self, overhead_s: float, per_ray_s: float, late_call: int | None = None, stall_s: float = 0.0):
        self.now = 100.0
        self.calls = []
        self.overhead_s, self.per_ray_s = overhead_s, per_ray_s
        self.late_call, self.stall_s = late_call, stall_s

    def __call__(self) -> float:
        return self.now

    def trace(self, indices):
        self.calls.append(indices.copy())
        self.now += self.overhead_s + self.per_ray_s * len(indices)
        if len(self.calls) == self.late_call:
            self.now += self.stall_s
        return indices * 10


def test_rays_completed_by_the_deadline_are_kept_and_the_late_chunk_discarded():
    clock = FakeClock(overhead_s=0.0, per_ray_s=1e-5)  # 10 us per ray, budget 1 ms: 100 rays fit
    order = progressive_order(360)
    frame = trace_until_deadline(clock.trace, order, 1e-3, clock)
    sent = np.concatenate(clock.calls)
    assert np.array_equal(sent, order[: len(sent)])  # in order, nothing twice
    assert len(clock.calls[0]) == 1  # the first chunk is one ray
    assert frame.completed + frame.discarded == len(sent)
    assert frame.completed * 1e-5 <= 1e-3 + 1e-12 < (frame.completed + frame.discarded) * 1e-5
    assert frame.discarded == len(clock.calls[-1]) and frame.overrun_s == pytest.approx(
        (frame.completed + frame.discarded) * 1e-5 - 1e-3
    )
    assert np.array_equal(np.concatenate(frame.results), order[: frame.completed] * 10)
    assert frame.chunks == len(clock.calls) - 1


def test_a_ray_completing_exactly_at_the_deadline_is_usable():
    clock = FakeClock(overhead_s=0.0, per_ray_s=0.25)
    frame = trace_until_deadline(clock.trace, progressive_order(8), 1.0, clock)
    # 0.25, 0.5, 0.75 and 1.0 s (on the deadline) are usable; the ray done at 1.25 s is not.
    assert (frame.completed, frame.discarded, frame.overrun_s) == (4, 1, 0.25)


def test_a_stall_makes_the_chunk_late_and_records_its_overrun():
    clock = FakeClock(overhead_s=1e-6, per_ray_s=1e-5, late_call=3, stall_s=0.5)
    frame = trace_until_deadline(clock.trace, progressive_order(360), 2e-3, clock)
    assert len(clock.calls) == 3 and frame.chunks == 2
    assert frame.completed == sum(len(c) for c in clock.calls[:2])
    assert frame.overrun_s > 0.49


def test_a_cheap_scan_completes_every_ray_with_no_overrun():
    clock = FakeClock(overhead_s=1e-6, per_ray_s=1e-9)
    frame = trace_until_deadline(clock.trace, progressive_order(360), 2e-3, clock)
    assert frame.completed == 360 and frame.discarded == 0 and frame.overrun_s == 0.0


def test_the_first_ray_late_leaves_nothing():
    clock = FakeClock(overhead_s=0.0, per_ray_s=1.0)
    frame = trace_until_deadline(clock.trace, progressive_order(360), 0.5, clock)
    assert frame.completed == 0 and frame.discarded == 1 and frame.overrun_s == pytest.approx(0.5)


@pytest.mark.parametrize("budget", [0.0, -1e-3, float("nan"), float("inf")])
def test_a_budget_that_is_not_positive_and_finite_is_refused(budget):
    with pytest.raises(ConfigError, match="budget"):
        trace_until_deadline(lambda i: i, progressive_order(4), budget, lambda: 0.0)


def test_bench_deadline_json_rows(capsys):
    code = cli.main(["bench", "--deadline-ms", "0.05", "2", "--sizes", "1", "--frames", "3", "--json"])
    assert code == 0
    result = json.loads(capsys.readouterr().out)["deadline"]
    rows = result["rows"]
    assert [(r["tracer"], r["budget_ms"]) for r in rows] == [
        ("bvh", 0.05),
        ("bvh", 2.0),
        ("brute_force", 0.05),
        ("brute_force", 2.0),
    ]
    for r in rows:
        assert 0 <= r["rays_min"] <= r["rays_p5"] <= r["rays_mean"] <= 360 and r["frames"] == 3
