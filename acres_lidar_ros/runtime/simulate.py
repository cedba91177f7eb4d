"""The node loop driven by a simulated clock and a simulated odometry stream.

``simulate_schedule`` runs a ``NodeLoop`` (the class the ROS node runs, not a copy) the way the
node's callbacks do: each odometry message goes to ``on_pose`` when it arrives, ``tick`` runs at
every wake-up the loop asks for, and what a worker finishes comes back through ``emit``. Two
clocks drive it:

* ``VirtualClock``: simulated time that jumps from one event to the next. With
  ``InlineExecutor`` a run is deterministic (the tests use it);
* ``WallPacedClock``: simulated ROS time that runs at the wall clock's pace, with real workers:
  the figures of ``acres-lidar bench --schedule`` (``run_schedule_benchmark``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.spatial.transform import Rotation

from acres_lidar_ros.errors import AcresLidarError
from acres_lidar_ros.outputs.point_types import PROFILES, PointProfile
from acres_lidar_ros.runtime.loop import LoopOutput, NodeLoop, SliceOut
from acres_lidar_ros.runtime.scheduler import ScanJob
from acres_lidar_ros.runtime.startup import freeze_startup_objects, gil_switch_interval
from acres_lidar_ros.scan.scanner import Scanner
from acres_lidar_ros.sensor.poses import PoseHistory
from acres_lidar_ros.units import NS_PER_S

ON_TIME_TOLERANCE_MS = 1.0
"""A scan counts as "at stamp + delay" when published within this of it (the node's +- 1 ms release tolerance)."""


@dataclass(frozen=True)
class OdometrySample:
    """One simulated odometry message: it arrives at ``arrival_ns`` and is stamped ``stamp_ns``."""

    arrival_ns: int
    stamp_ns: int
    position_m: np.ndarray
    quaternion_xyzw: np.ndarray
    frame_id: str = "odom"
    child_frame_id: str = "base_footprint"


def odometry_stream(
    history: PoseHistory,
    start_ns: int,
    end_ns: int,
    rate_hz: float = 50.0,
    latency_s: float = 0.001,
    loop: bool = True,
) -> list[OdometrySample]:
    """Samples of a trajectory at ``rate_hz`` from ``start_ns`` to ``end_ns`` (ROS time), each
    arriving ``latency_s`` after its stamp. With ``loop`` the trajectory repeats (its time modulo
    its duration); the stamps always increase."""
    step_ns = int(round(NS_PER_S / rate_hz))
    stamps = np.arange(start_ns, end_ns + 1, step_ns, dtype=np.int64)
    t_s = stamps * 1e-9
    duration = history.end_s - history.start_s
    if loop and duration > 0:
        t_s = history.start_s + np.mod(t_s - history.start_s, duration)
    positions, rotations = history.interpolate(t_s)
    quats = Rotation.from_matrix(rotations).as_quat()
    latency_ns = int(round(latency_s * NS_PER_S))
    return [OdometrySample(int(s) + latency_ns, int(s), positions[i], quats[i]) for i, s in enumerate(stamps)]


class VirtualClock:
    """Simulated time that stands still until the driver moves it to the next event."""

    def __init__(self, start_ns: int = 0) -> None:
        self.now_ns = int(start_ns)

    def __call__(self) -> int:
        return self.now_ns

    def wait_until(self, t_ns: int | None) -> None:
        if t_ns is None:
            raise AcresLidarError("simulated run stalled: no odometry left and the loop expects nothing")
        self.now_ns = max(self.now_ns, int(t_ns))

    def notify(self) -> None:
        """Work completes inside the call that started it (``InlineExecutor``): nothing to wake."""


class WallPacedClock:
    """Simulated ROS time running at the wall clock's pace from ``start_ns`` (at construction).

    ``wait_until`` sleeps until that time or until ``notify`` (a worker finished), at most
    ``max_wait_s``, so a run never hangs on a lost wake-up."""

    def __init__(self, start_ns: int = 0, max_wait_s: float = 0.5) -> None:
        self._t0_ns = time.perf_counter_ns()
        self._start_ns = int(start_ns)
        self._max_wait_s = max_wait_s
        self._wake = threading.Condition()
        self._dirty = False

    def __call__(self) -> int:
        return time.perf_counter_ns() - self._t0_ns + self._start_ns

    def wait_until(self, t_ns: int | None) -> None:
        timeout_s = self._max_wait_s if t_ns is None else max(0.0, (t_ns - self()) * 1e-9)
        with self._wake:
            if not self._dirty:
                self._wake.wait(timeout=min(timeout_s, self._max_wait_s))
            self._dirty = False

    def notify(self) -> None:
        with self._wake:
            self._dirty = True
            self._wake.notify()


def summary(values_ms: Sequence[float]) -> dict[str, float]:
    """n, min, median, p95 and max of a list of milliseconds ({"n": 0} when empty)."""
    if not len(values_ms):
        return {"n": 0}
    v = np.asarray(values_ms, dtype=np.float64)
    return {
        "n": int(v.size),
        "min": float(v.min()),
        "median": float(np.median(v)),
        "p95": float(np.percentile(v, 95)),
        "max": float(v.max()),
    }


class _Record:
    """What the run published and logged, from the driver's thread and the workers'."""

    def __init__(self, clock: VirtualClock | WallPacedClock) -> None:
        self.clock = clock
        self.published: list[ScanJob] = []
        self.slices: list[SliceOut] = []  # partial output: slices out before their scan's job
        self.events: dict[str, int] = {}
        self._lock = threading.Lock()

    def add(self, out: LoopOutput) -> None:
        with self._lock:
            self.published.extend(job for job in out.publish if isinstance(job, ScanJob))  # whole scans
            self.slices.extend(part for part in out.publish if isinstance(part, SliceOut))
            for event in out.events:
                self.events[event.kind] = self.events.get(event.kind, 0) + 1

    def emit(self, out: LoopOutput) -> None:
        self.add(out)
        self.clock.notify()


def simulate_schedule(
    scanner: Scanner,
    odometry: Sequence[OdometrySample],
    n_scans: int,
    *,
    pack: Callable[[Any, ScanJob], Any],
    clock: VirtualClock | WallPacedClock,
    executor: Executor | None = None,
    **loop_options: Any,
) -> dict[str, Any]:
    """Run a ``NodeLoop`` over ``odometry`` until ``n_scans`` scans were due and none is in work.

    ``loop_options`` go to ``NodeLoop`` (``pretrace``, ``ts_first_point``, ``pose_timeout_s``,
    ...). With a ``WallPacedClock`` it takes ``n_scans`` periods of wall time.

    Returns
    -------
    dict
        ``counts`` (the scheduler's counters), ``pose_counts`` (the tracker's),
        ``publish_minus_stamp_ms`` (``on_time``, ``late``, ``all``: n, min, median, p95, max),
        ``at_delay`` (scans published within ``ON_TIME_TOLERANCE_MS`` of stamp + delay, and
        their fraction of the due scans), ``work_after_stamp_ms`` (each finish: its last
        columns, the whole-scan pass and the packing), ``pose_wait_ms`` (sweep end to the start
        of its finish), ``early_slices`` (with partial output, the slices published while their
        sweep ran: ``n``, ``publish_minus_slice_end_ms`` and ``before_sweep_end_ms``, the time
        from publication to the end of the sweep), ``events`` (kind -> number), ``wall_s``.
    """
    started = time.perf_counter()
    record = _Record(clock)
    loop = NodeLoop(scanner, clock, pack, record.emit, executor=executor, **loop_options)
    try:
        _drive(loop, clock, sorted(odometry, key=lambda s: s.arrival_ns), n_scans, record)
    finally:
        loop.close()
    published = sorted(record.published, key=lambda j: j.index)
    delay_ms = loop.scheduler.delay_ns * 1e-6
    after = [(j.published_ns - j.stamp_ns) * 1e-6 for j in published]  # type: ignore[operator]
    at_delay = sum(abs(ms - delay_ms) <= ON_TIME_TOLERANCE_MS for ms in after)
    return {
        "n_scans": n_scans,
        "hz": 1.0 / loop.config.period_s,
        "delay_ms": delay_ms,
        "counts": dict(loop.scheduler.counts),
        "pose_counts": dict(loop.tracker.counts),
        "publish_minus_stamp_ms": {
            "on_time": summary([ms for ms, j in zip(after, published) if not j.late]),
            "late": summary([ms for ms, j in zip(after, published) if j.late]),
            "all": summary(after),
        },
        "at_delay": {
            "tolerance_ms": ON_TIME_TOLERANCE_MS,
            "n": int(at_delay),
            "fraction_of_due": at_delay / max(loop.scheduler.counts["due"], 1),
        },
        "work_after_stamp_ms": summary([j.trace_wall_s * 1e3 for j in published if j.trace_wall_s is not None]),
        "pose_wait_ms": summary([(j.started_ns - j.sweep_end_ns) * 1e-6 for j in published if j.started_ns]),
        "early_slices": {
            "n": len(record.slices),
            "publish_minus_slice_end_ms": summary(
                [(p.published_ns - p.release_ns) * 1e-6 + delay_ms for p in record.slices if p.published_ns]
            ),
            "before_sweep_end_ms": summary(
                [(p.sweep_end_ns - p.published_ns) * 1e-6 for p in record.slices if p.published_ns]
            ),
        },
        "events": dict(record.events),
        "wall_s": time.perf_counter() - started,
    }


def _drive(
    loop: NodeLoop,
    clock: VirtualClock | WallPacedClock,
    samples: list[OdometrySample],
    n_scans: int,
    record: _Record,
) -> None:
    i = 0
    while True:
        now = clock()
        while i < len(samples) and samples[i].arrival_ns <= now:
            s = samples[i]
            record.add(loop.on_pose(s.stamp_ns, s.position_m, s.quaternion_xyzw, s.frame_id, s.child_frame_id))
            i += 1
        if loop.scheduler.counts["due"] >= n_scans:
            loop.scheduler.stop()
        record.add(loop.tick())
        if loop.scheduler.counts["due"] >= n_scans and loop.scheduler.in_work == 0:
            return
        wakeups = [
            t for t in (loop.next_wakeup_ns(), samples[i].arrival_ns if i < len(samples) else None) if t is not None
        ]
        clock.wait_until(min(wakeups) if wakeups else None)


def run_schedule_benchmark(
    n_scans: int = 600,
    sensors: str = "polaris",
    seed: int = 0,
    profile: PointProfile = PROFILES["XYZI"],
    odom_hz: float = 50.0,
    odom_latency_s: float = 0.001,
    options: dict[str, Any] | None = None,
    pretrace_columns: bool = True,
) -> dict[str, Any]:
    """The figures of ``acres-lidar bench --schedule``: ``n_scans`` scans of the real ``Scanner``
    on the built-in farm along its tour, run by the node's loop (``NodeLoop``, two workers) on a
    ``WallPacedClock``, with odometry at ``odom_hz`` arriving ``odom_latency_s`` after its stamp,
    packed in ``profile``'s layout.

    Takes about ``n_scans / hz`` seconds of wall time plus the scene build. ``options`` are extra
    ``ScanOptions`` (e.g. ``{"radiometry": False}`` to time the geometry alone).
    ``pretrace_columns`` False traces the whole scan after the stamp's pose arrives.
    """
    from acres_lidar_ros.body.self_returns import sensor_self_table
    from acres_lidar_ros.config.sensors import load_sensor_config
    from acres_lidar_ros.outputs.layouts import point_cloud
    from acres_lidar_ros.outputs.pointcloud2 import default_typestore, pointcloud2_message
    from acres_lidar_ros.scan.scan_types import ScanOptions
    from acres_lidar_ros.scene.farm_v1 import build_default_farm
    from acres_lidar_ros.scene.tour import default_tour

    config = load_sensor_config(sensors)
    scene = build_default_farm(seed)
    times_s, positions_m, quaternions_xyzw = default_tour(scene)
    tour = PoseHistory.from_arrays(times_s, positions_m, quaternions_xyzw, where="default tour")
    scanner = Scanner(
        config, scene, ScanOptions(**{"seed": seed, **(options or {})}), self_table=sensor_self_table(config)
    )
    typestore = default_typestore()
    period_ns = int(round(config.period_s * NS_PER_S))
    start_ns = -(-int(round(tour.start_s * NS_PER_S)) // period_ns) * period_ns
    scanner.scan(tour, start_ns + period_ns, index=0)  # warm-up, not counted
    freeze_startup_objects()  # as the node does after its warm-up

    def pack(scan: Any, job: ScanJob) -> Any:
        return pointcloud2_message(point_cloud(scan, profile, job.stamp_ns), scan.frame_id, job.stamp_ns, typestore)

    odometry = odometry_stream(
        tour, start_ns - period_ns, start_ns + (n_scans + 2) * period_ns, rate_hz=odom_hz, latency_s=odom_latency_s
    )
    with gil_switch_interval():
        result = simulate_schedule(
            scanner,
            odometry,
            n_scans,
            pack=pack,
            clock=WallPacedClock(start_ns - period_ns // 2),
            pretrace=pretrace_columns,
            ts_first_point=profile.stamps_sweep_start(False),
        )
    result.update(
        sensors=sensors,
        rays_per_scan=scanner.ray_count,
        odom_hz=odom_hz,
        odom_latency_ms=odom_latency_s * 1e3,
        options=dict(options or {}),
        pretrace_columns=pretrace_columns,
    )
    return result
