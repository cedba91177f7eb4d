"""Scan scheduling and pose ingestion for the ROS 2 node, without ROS (spec "Scan Timing").

The node wires these classes to rclpy; everything here takes an injected clock (a callable that
returns the current ROS time in ns) and returns events instead of logging, so the tests drive it
with simulated message streams and assert the reasons.

* ``ScanScheduler``: due times ``t = 0, T, 2T, ...``; the stamp (end of the sweep, or its first
  point with ``ts_first_point``); the wait for a pose that covers the sweep (or extrapolation after
  a timeout); at most two scans in work (a scan due while two are open is dropped and counted
  ``dropped_busy``); release at ``sweep end + delay_s``, in scan order; a scan that is ready later
  than that is published at once and counted ``late``.
* ``PoseTracker``: odometry (or TF) samples of base_footprint in the odom frame into a
  ``PoseHistory`` of one period plus a margin; NaN, non-unit quaternions and wrong frames are
  rejected with a reason; duplicate stamps are ignored; older samples are dropped, and a jump
  backwards (a looping bag, a simulator reset) clears the history and says so.
* ``boxes_from_markers`` and ``mount_overrides``: the ROS-free parts of the marker subscription
  and of the TF mount lookup.
* ``simulate_schedule`` and ``run_schedule_benchmark``: the scheduling path driven by a simulated
  clock and odometry stream with a pool of two workers (the figures of ``acres-lidar bench
  --schedule``).
"""

from __future__ import annotations

import copy
import heapq
import math
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.spatial.transform import Rotation

from acres_lidar_ros.errors import ConfigError, PoseError, SceneError
from acres_lidar_ros.scene.boxes import VehicleBox
from acres_lidar_ros.sensor.poses import UNIT_QUATERNION_TOLERANCE, PoseHistory

NS_PER_S = 1_000_000_000

Clock = Callable[[], int]


GIL_SWITCH_INTERVAL_S = 0.001
"""The GIL switch interval the node runs with (``sys.setswitchinterval``; Python's default is
5 ms). A timer or callback waiting for the GIL while a worker runs Python code waits up to one
interval, which showed as publications up to 5 ms past their release time; with 1 ms they sit
at it. ``simulate_schedule`` runs with it too."""


@dataclass(frozen=True)
class Event:
    """Something the node logs: ``level`` is ``debug``, ``info``, ``warn`` or ``error``.

    ``kind`` is a stable key (``dropped_busy``, ``late``, ``extrapolate``, ``no_pose``,
    ``clock_jump_back``, ...) that the node uses to throttle repeated lines and the tests assert.
    """

    level: str
    kind: str
    message: str
    scan_index: int | None = None


# --------------------------------------------------------------------------------------------
# Scheduling


@dataclass
class ScanJob:
    """One scan from its due time to its publication.

    Attributes
    ----------
    index : int
        Scan number since the scheduler started (or since the last clock jump), from 0.
    sweep_end_ns : int
        The due time ``k T``: the end of the sweep, the stamp the ``Scanner`` traces with.
    stamp_ns : int
        Header stamp: ``sweep_end_ns``, or ``sweep_end_ns - T`` with ``ts_first_point``.
    release_ns : int
        ``sweep_end_ns + delay``: the earliest publication time.
    extrapolated : bool
        The pose history did not reach ``sweep_end_ns`` when the trace started.
    """

    index: int
    sweep_end_ns: int
    stamp_ns: int
    release_ns: int
    opened_ns: int
    state: str = "waiting_pose"  # waiting_pose -> tracing -> ready -> published | failed | abandoned
    started_ns: int | None = None
    finished_ns: int | None = None
    published_ns: int | None = None
    extrapolated: bool = False
    late: bool = False
    trace_wall_s: float | None = None
    result: Any = field(default=None, repr=False)

    @property
    def open(self) -> bool:
        return self.state in ("waiting_pose", "tracing", "ready")


@dataclass
class PollResult:
    """What the caller must do now: start these traces, publish these results, log these events."""

    start: list[ScanJob] = field(default_factory=list)
    publish: list[ScanJob] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)


COUNT_KEYS = (
    "due",
    "published",
    "late",
    "dropped_busy",
    "extrapolated",
    "skipped_no_pose",
    "skipped_time_jump",
    "failed",
    "abandoned",
)


class ScanScheduler:
    """Due times, stamps, pose wait, busy drops, in-order release (thread-safe).

    Parameters
    ----------
    period_s : float
        ``T = 1 / hz``; due times are integer multiples of ``round(T * 1e9)`` ns of ROS time.
    delay_s : float
        Publication delay after the end of the sweep (0.012 s for the Polaris).
    clock : callable returning int
        Current ROS time, ns.
    ts_first_point : bool
        Stamp the first point of the sweep (``sweep end - T``) instead of its end, as
        rslidar_sdk's option of the same name does. The cloud still leaves ``delay_s`` after the
        last point: a driver cannot send a sweep before it ends.
    max_in_work : int
        Scans open at once (waiting for a pose, tracing or waiting for release).
    pose_timeout_s : float
        How long after the end of the sweep to wait for a pose sample at or after it.
    max_extrapolation_s : float
        After the timeout, the newest pose may be at most this much older than the end of the
        sweep to extrapolate; otherwise the scan is skipped: no cloud with a pose it did not have.
    """

    def __init__(
        self,
        period_s: float,
        delay_s: float,
        clock: Clock,
        *,
        ts_first_point: bool = False,
        max_in_work: int = 2,
        pose_timeout_s: float = 0.05,
        max_extrapolation_s: float = 0.1,
    ) -> None:
        if not (math.isfinite(period_s) and period_s > 0):
            raise ConfigError(f"period_s = {period_s!r}: expected a number > 0")
        for name, value in (
            ("delay_s", delay_s),
            ("pose_timeout_s", pose_timeout_s),
            ("max_extrapolation_s", max_extrapolation_s),
        ):
            if not (math.isfinite(value) and value >= 0):
                raise ConfigError(f"{name} = {value!r}: expected a number >= 0")
        if isinstance(max_in_work, bool) or not isinstance(max_in_work, int) or max_in_work < 1:
            raise ConfigError(f"max_in_work = {max_in_work!r}: expected an integer >= 1")
        self.period_ns = int(round(period_s * NS_PER_S))
        self.delay_ns = int(round(delay_s * NS_PER_S))
        self.pose_timeout_ns = int(round(pose_timeout_s * NS_PER_S))
        self.max_extrapolation_ns = int(round(max_extrapolation_s * NS_PER_S))
        self.ts_first_point = bool(ts_first_point)
        self.max_in_work = max_in_work
        self.clock = clock
        self.counts: dict[str, int] = dict.fromkeys(COUNT_KEYS, 0)
        self._lock = threading.Lock()
        self._jobs: list[ScanJob] = []  # open jobs, oldest first
        self._next_due_ns: int | None = None
        self._last_now_ns: int | None = None
        self._next_index = 0
        self._extrapolating = False  # one warning per pose outage
        self._skipping = False
        self._trace_wall_s: list[tuple[int, float]] = []  # (finished_ns, wall s) for diagnostics
        self._last_published_ns: int | None = None
        self._stopped = False

    # -- queries -----------------------------------------------------------------------------

    @property
    def in_work(self) -> int:
        with self._lock:
            return len(self._jobs)

    def jobs(self) -> list[ScanJob]:
        """The open jobs, oldest first (copies of the list, not of the jobs)."""
        with self._lock:
            return list(self._jobs)

    def upcoming(self) -> tuple[int, int] | None:
        """The next due time (ns) and the index its job will get if it is not dropped; None
        before the first poll or after ``stop``. Lets the node trace a sweep while it runs."""
        with self._lock:
            if self._next_due_ns is None or self._stopped:
                return None
            return self._next_due_ns, self._next_index

    def next_wakeup_ns(self) -> int | None:
        """The next ROS time at which ``poll`` has something to do, if nothing else happens
        (a due time, a pose timeout, a release); None before the first poll."""
        with self._lock:
            if self._next_due_ns is None:
                return None
            times = [] if self._stopped else [self._next_due_ns]
            for job in self._jobs:
                if job.state == "waiting_pose":
                    times.append(job.sweep_end_ns + self.pose_timeout_ns)
                elif job.state == "ready":
                    times.append(job.release_ns)
            return min(times) if times else None

    def stop(self) -> None:
        """Open no more scans (shutdown, or the end of a simulated run); open ones still finish."""
        with self._lock:
            self._stopped = True

    # -- the cycle ----------------------------------------------------------------------------

    def poll(self, pose_end_ns: int | None) -> PollResult:
        """Open due scans, start the traces whose sweep the poses cover, release ready scans.

        Parameters
        ----------
        pose_end_ns : int or None
            Stamp of the newest pose sample (``PoseTracker.newest_ns``); None without any.
        """
        with self._lock:
            now = int(self.clock())
            out = PollResult()
            self._check_clock(now, out)
            self._open_due(now, out)
            self._start_covered(now, pose_end_ns, out)
            self._release(now, out)
            return out

    def trace_done(self, job: ScanJob, result: Any, trace_wall_s: float | None = None) -> PollResult:
        """A worker finished ``job``; returns the scans to publish now (late ones at once)."""
        with self._lock:
            out = PollResult()
            if job.state != "tracing":
                out.events.append(
                    Event(
                        "debug",
                        "stale_result",
                        f"scan {job.index} finished after it was {job.state}; result discarded",
                        job.index,
                    )
                )
                return out
            now = int(self.clock())
            job.state, job.result, job.finished_ns, job.trace_wall_s = "ready", result, now, trace_wall_s
            if trace_wall_s is not None:
                self._trace_wall_s.append((now, float(trace_wall_s)))
            self._release(now, out)
            return out

    def trace_failed(self, job: ScanJob, reason: str) -> PollResult:
        """A worker raised while tracing ``job``: it is counted ``failed`` and later scans move on."""
        with self._lock:
            out = PollResult()
            if job.state != "tracing":
                return out
            job.state = "failed"
            self._jobs.remove(job)
            self.counts["failed"] += 1
            out.events.append(
                Event(
                    "error",
                    "trace_failed",
                    f"scan {job.index} (stamp {job.stamp_ns * 1e-9:.3f} s) failed: {reason}",
                    job.index,
                )
            )
            self._release(int(self.clock()), out)
            return out

    def diagnostics(self, window_s: float = 1.0) -> dict[str, float | int]:
        """Counters plus the trace time and real-time factor over the last ``window_s`` of ROS time.

        ``trace_ms`` is the mean wall time of the traces finished in the window (NaN if none);
        ``real_time_factor`` is ``T / trace time``: how many times faster than the sensor one
        worker traces (>= 1 holds the rate with one worker, the pool has two).
        """
        with self._lock:
            now = int(self.clock())
            cutoff = now - int(window_s * NS_PER_S)
            self._trace_wall_s = [(t, s) for t, s in self._trace_wall_s if t >= cutoff]
            walls = [s for _, s in self._trace_wall_s]
            mean_s = statistics.fmean(walls) if walls else math.nan
            return dict(
                self.counts,
                in_work=len(self._jobs),
                trace_ms=mean_s * 1e3,
                real_time_factor=(self.period_ns / NS_PER_S) / mean_s if walls and mean_s > 0 else math.nan,
            )

    # -- internals (called with the lock held) -------------------------------------------------

    def _check_clock(self, now: int, out: PollResult) -> None:
        last = self._last_now_ns
        self._last_now_ns = now
        if last is None or now >= last:
            return
        abandoned = 0
        for job in self._jobs:
            job.state = "abandoned"
            abandoned += 1
        self._jobs.clear()
        self.counts["abandoned"] += abandoned
        self._next_due_ns = None
        self._last_published_ns = None
        out.events.append(
            Event(
                "warn",
                "clock_jump_back",
                f"ROS time jumped back from {last * 1e-9:.3f} s to {now * 1e-9:.3f} s (a looping bag or a "
                f"simulator reset): {abandoned} scan(s) in work abandoned, due times restart",
            )
        )

    def _open_due(self, now: int, out: PollResult) -> None:
        if self._stopped:
            return
        T = self.period_ns
        if self._next_due_ns is None:
            self._next_due_ns = -(-now // T) * T  # the first k T at or after now
        backlog = (now - self._next_due_ns) // T + 1 if now >= self._next_due_ns else 0
        if backlog > self.max_in_work + 1:
            # ROS time leapt forward (a sim clock starting, a long stall): scans of the gap are not
            # traced; only the newest due time is kept.
            skipped = backlog - 1
            self.counts["skipped_time_jump"] += skipped
            self._next_due_ns += skipped * T
            out.events.append(
                Event(
                    "warn",
                    "clock_jump_forward",
                    f"ROS time reached {now * 1e-9:.3f} s, {skipped} scan period(s) past the last due time: "
                    f"those {skipped} scan(s) are skipped",
                )
            )
        while self._next_due_ns <= now:
            due = self._next_due_ns
            self._next_due_ns += T
            self.counts["due"] += 1
            if len(self._jobs) >= self.max_in_work:
                self.counts["dropped_busy"] += 1
                out.events.append(
                    Event(
                        "warn",
                        "dropped_busy",
                        f"scan due at {due * 1e-9:.3f} s dropped: {len(self._jobs)} scans already in work "
                        f"(lidar_busy = {self.counts['dropped_busy']})",
                    )
                )
                continue
            stamp = due - T if self.ts_first_point else due
            job = ScanJob(self._next_index, due, stamp, due + self.delay_ns, opened_ns=now)
            self._next_index += 1
            self._jobs.append(job)

    def _start_covered(self, now: int, pose_end_ns: int | None, out: PollResult) -> None:
        for job in list(self._jobs):
            if job.state != "waiting_pose":
                continue
            if pose_end_ns is not None and pose_end_ns >= job.sweep_end_ns:
                if self._extrapolating or self._skipping:
                    out.events.append(
                        Event(
                            "info",
                            "pose_recovered",
                            f"poses cover the sweep of scan {job.index} again; tracing resumes normally",
                            job.index,
                        )
                    )
                self._extrapolating = self._skipping = False
                self._start(job, now, extrapolated=False, out=out)
            elif now >= job.sweep_end_ns + self.pose_timeout_ns:
                if pose_end_ns is not None and job.sweep_end_ns - pose_end_ns <= self.max_extrapolation_ns:
                    self.counts["extrapolated"] += 1
                    if not self._extrapolating:
                        out.events.append(
                            Event(
                                "warn",
                                "extrapolate",
                                f"no pose at or after {job.sweep_end_ns * 1e-9:.3f} s within "
                                f"{self.pose_timeout_ns * 1e-6:.0f} ms (newest at {pose_end_ns * 1e-9:.3f} s): "
                                "extrapolating; warned once until poses catch up",
                                job.index,
                            )
                        )
                    self._extrapolating = True
                    self._start(job, now, extrapolated=True, out=out)
                else:
                    job.state = "abandoned"
                    self._jobs.remove(job)
                    self.counts["skipped_no_pose"] += 1
                    if not self._skipping:
                        newest = "none yet" if pose_end_ns is None else f"newest at {pose_end_ns * 1e-9:.3f} s"
                        out.events.append(
                            Event(
                                "warn",
                                "no_pose",
                                f"scan {job.index} (sweep end {job.sweep_end_ns * 1e-9:.3f} s) skipped: no pose "
                                f"within {self.max_extrapolation_ns * 1e-6:.0f} ms of it ({newest}); "
                                "warned once until poses return",
                                job.index,
                            )
                        )
                    self._skipping = True

    def _start(self, job: ScanJob, now: int, extrapolated: bool, out: PollResult) -> None:
        job.state, job.started_ns, job.extrapolated = "tracing", now, extrapolated
        out.start.append(job)

    def _release(self, now: int, out: PollResult) -> None:
        # In scan order: a scan never overtakes an earlier one that is still open.
        while self._jobs and self._jobs[0].state == "ready":
            job = self._jobs[0]
            previous_published = self._last_published_ns
            ready_ns = max(job.finished_ns, previous_published if previous_published is not None else job.finished_ns)
            if now < job.release_ns:
                return
            job.late = ready_ns > job.release_ns
            job.state, job.published_ns = "published", now
            self._jobs.pop(0)
            self.counts["published"] += 1
            if job.late:
                self.counts["late"] += 1
                out.events.append(
                    Event(
                        "debug",
                        "late",
                        f"scan {job.index} ready {(ready_ns - job.sweep_end_ns) * 1e-6:.1f} ms after the end of its "
                        f"sweep, {(ready_ns - job.release_ns) * 1e-6:.1f} ms after its release time: published late",
                        job.index,
                    )
                )
            self._last_published_ns = now
            out.publish.append(job)


class LogThrottle:
    """One log line per event kind per ``period_s`` (the node's throttle for repeated warnings).

    ``clock`` returns ns (default: the monotonic wall clock, so a paused sim clock still logs).
    """

    def __init__(self, period_s: float = 5.0, clock: Clock = time.monotonic_ns) -> None:
        self.period_ns = int(round(period_s * NS_PER_S))
        self.clock = clock
        self._last: dict[str, int] = {}
        self.suppressed: dict[str, int] = {}

    def allow(self, kind: str) -> bool:
        now = int(self.clock())
        last = self._last.get(kind)
        if last is not None and now - last < self.period_ns:
            self.suppressed[kind] = self.suppressed.get(kind, 0) + 1
            return False
        self._last[kind] = now
        return True


DIAGNOSTIC_KEYS = (
    ("scans_published", "published"),
    ("scans_late", "late"),
    ("scans_dropped_busy", "dropped_busy"),
    ("scans_extrapolated", "extrapolated"),
    ("scans_skipped_no_pose", "skipped_no_pose"),
    ("scans_failed", "failed"),
    ("scans_in_work", "in_work"),
)


def diagnostic_status(
    current: dict[str, Any], previous: dict[str, Any] | None
) -> tuple[str, str, list[tuple[str, str]]]:
    """Level (``OK``, ``WARN``, ``ERROR``), message and key/value pairs of the node's
    ``diagnostic_msgs/DiagnosticStatus`` from two successive ``ScanScheduler.diagnostics()``.

    WARN when scans were dropped, late, extrapolated or skipped since the previous report; ERROR
    when a trace failed or nothing was published in the interval though scans were due.
    """
    previous = previous or {}
    delta = {k: current.get(k, 0) - previous.get(k, 0) for k in COUNT_KEYS}
    if delta["failed"] or (delta["due"] and not delta["published"] and not current.get("in_work")):
        level = "ERROR"
    elif delta["dropped_busy"] or delta["late"] or delta["extrapolated"] or delta["skipped_no_pose"]:
        level = "WARN"
    else:
        level = "OK"
    message = (
        f"{delta['published']} published, {delta['late']} late, {delta['dropped_busy']} dropped (busy), "
        f"{delta['skipped_no_pose']} without pose since the last report"
    )
    values = [(key, str(int(current.get(name, 0)))) for key, name in DIAGNOSTIC_KEYS]
    trace_ms, rtf = current.get("trace_ms", math.nan), current.get("real_time_factor", math.nan)
    values.append(("trace_ms", "nan" if math.isnan(trace_ms) else f"{trace_ms:.1f}"))
    values.append(("real_time_factor", "nan" if math.isnan(rtf) else f"{rtf:.2f}"))
    return level, message, values


# --------------------------------------------------------------------------------------------
# Pose ingestion


@dataclass(frozen=True)
class IngestResult:
    """Outcome of one pose sample: ``kind`` is ``accepted``, ``duplicate``, ``out_of_order``,
    ``time_jump`` (history cleared, the sample accepted), ``invalid`` or ``wrong_frame``."""

    accepted: bool
    kind: str
    level: str = "debug"
    message: str = ""


class PoseTracker:
    """Samples of base_footprint in the odom frame -> a ``PoseHistory`` (thread-safe).

    Parameters
    ----------
    period_s : float
        Scan period; the history keeps ``period_s + margin_s``.
    margin_s : float
        Extra history, so that a sweep is covered even when the sample after it comes late.
    odom_frame, base_frame : str
        The frames a sample must name (``header.frame_id``, ``child_frame_id``).
    jump_back_s : float
        A sample older than the newest by more than this is a time jump (a looping bag, a
        simulator reset): the history is cleared and restarts with it. Less than this: the sample
        is out of order and dropped.
    """

    def __init__(
        self,
        period_s: float,
        margin_s: float = 0.1,
        odom_frame: str = "odom",
        base_frame: str = "base_footprint",
        jump_back_s: float = 1.0,
    ) -> None:
        if not (math.isfinite(period_s) and period_s > 0) or not (math.isfinite(margin_s) and margin_s >= 0):
            raise ConfigError(f"period_s = {period_s!r}, margin_s = {margin_s!r}: expected period > 0, margin >= 0")
        self.history = PoseHistory(max_age_s=period_s + margin_s)
        self.odom_frame = odom_frame
        self.base_frame = base_frame
        self.jump_back_ns = int(round(jump_back_s * NS_PER_S))
        self.counts: dict[str, int] = dict.fromkeys(
            ("accepted", "duplicate", "out_of_order", "time_jump", "invalid", "wrong_frame"), 0
        )
        self._newest_ns: int | None = None
        self._lock = threading.Lock()

    @property
    def newest_ns(self) -> int | None:
        """Stamp of the newest accepted sample, ns (None when the history is empty)."""
        with self._lock:
            return self._newest_ns

    def add(
        self,
        stamp_ns: int,
        position_m: Sequence[float],
        quaternion_xyzw: Sequence[float],
        frame_id: str | None = None,
        child_frame_id: str | None = None,
    ) -> IngestResult:
        """Take one sample (``frame_id``/``child_frame_id`` None: not checked, as for TF lookups)."""
        result = self._add(int(stamp_ns), position_m, quaternion_xyzw, frame_id, child_frame_id)
        self.counts[result.kind] += 1
        return result

    def _add(self, stamp_ns, position_m, quaternion_xyzw, frame_id, child_frame_id) -> IngestResult:
        if (frame_id is not None and frame_id != self.odom_frame) or (
            child_frame_id is not None and child_frame_id != self.base_frame
        ):
            return IngestResult(
                False,
                "wrong_frame",
                "warn",
                f"pose sample {frame_id!r} -> {child_frame_id!r} rejected: expected "
                f"{self.odom_frame!r} -> {self.base_frame!r} (parameters odom_frame, base_frame)",
            )
        p = np.asarray(position_m, dtype=np.float64).reshape(-1)
        q = np.asarray(quaternion_xyzw, dtype=np.float64).reshape(-1)
        if p.shape != (3,) or q.shape != (4,) or not (np.isfinite(p).all() and np.isfinite(q).all()):
            return IngestResult(
                False,
                "invalid",
                "warn",
                f"pose sample at {stamp_ns * 1e-9:.3f} s rejected: position {p.tolist()} and "
                f"quaternion {q.tolist()} must be 3 and 4 finite numbers",
            )
        norm = float(np.linalg.norm(q))
        if abs(norm - 1.0) > UNIT_QUATERNION_TOLERANCE:
            return IngestResult(
                False,
                "invalid",
                "warn",
                f"pose sample at {stamp_ns * 1e-9:.3f} s rejected: quaternion {q.tolist()} has "
                f"norm {norm:.6g}; expected a unit quaternion (within {UNIT_QUATERNION_TOLERANCE})",
            )
        with self._lock:
            newest = self._newest_ns
            cleared = ""
            if newest is not None:
                if stamp_ns == newest:
                    return IngestResult(
                        False,
                        "duplicate",
                        "debug",
                        f"pose sample at {stamp_ns * 1e-9:.6f} s repeats the newest stamp: ignored",
                    )
                if stamp_ns < newest:
                    back_ns = newest - stamp_ns
                    if back_ns <= self.jump_back_ns:
                        return IngestResult(
                            False,
                            "out_of_order",
                            "warn",
                            f"pose sample at {stamp_ns * 1e-9:.6f} s is {back_ns * 1e-6:.1f} ms older "
                            f"than the newest ({newest * 1e-9:.6f} s): dropped",
                        )
                    self.history.clear()
                    cleared = (
                        f"pose time jumped back {back_ns * 1e-9:.3f} s, from {newest * 1e-9:.3f} s to "
                        f"{stamp_ns * 1e-9:.3f} s (a looping bag or a simulator reset): history cleared"
                    )
            try:
                self.history.append(stamp_ns / NS_PER_S, p, q)
            except PoseError as exc:  # two ns stamps that are one float second apart, for instance
                return IngestResult(False, "invalid", "warn", f"pose sample rejected: {exc}")
            self._newest_ns = stamp_ns
            if cleared:
                return IngestResult(True, "time_jump", "warn", cleared)
            return IngestResult(True, "accepted")

    def clear(self) -> None:
        with self._lock:
            self.history.clear()
            self._newest_ns = None

    def snapshot(self, sweep_end_ns: int, extrapolate: bool = False) -> PoseHistory:
        """A copy of the history for one trace (so ingestion goes on while a worker reads it).

        With ``extrapolate`` and no sample at or after ``sweep_end_ns``, the copy gets one more
        sample at ``sweep_end_ns``: the position continued at the last segment's velocity, the
        rotation held (``PoseHistory.interpolate(extrapolate=True)``).
        """
        with self._lock:
            if not len(self.history):
                raise PoseError("pose history is empty: no odometry received yet")
            history = copy.deepcopy(self.history)
            newest = self._newest_ns
        history.max_age_s = None
        if extrapolate and newest is not None and newest < sweep_end_ns:
            t_s = sweep_end_ns / NS_PER_S
            position, rotation = history.interpolate(np.array([t_s]), extrapolate=True)
            history.append(t_s, position[0], Rotation.from_matrix(rotation[0]).as_quat())
        return history


class SweepTracer:
    """Traces each scan's columns while its sweep is still running (``scan.Sweep``).

    A scan's sweep runs for the period before its due time, but the scheduler opens its job only
    at the due time (the stamp). So the node calls ``pretrace_upcoming`` with the scheduler's
    next due time and index (``ScanScheduler.upcoming``) whenever odometry arrives, which traces
    the columns whose firing time the poses already cover, and ``finish`` when the scheduler
    starts the job: after the stamp only the last columns and the noise/detection pass remain.
    Sweeps are keyed by their stamp; one whose predicted index or boxes turn out different (a
    dropped scan shifted the numbering, new markers) is traced again, so the scan always equals
    one ``Scanner.scan``. Scans are traced one at a time (the scanner keeps its noise streams in
    scan order).

    Pretraces are requested, not run, per odometry message (``request_pretrace``): requests for
    one sweep are merged (the newest poses cover the most columns) and one worker at a time
    drains them (``drain_pretraces``). So a slow moment never queues a pile of pretraces in
    front of a finish in the worker pool, and a finish waiting for the lock goes before the
    next pretrace.
    """

    def __init__(self, scanner: Any) -> None:
        self.scanner = scanner
        self.lock = threading.Lock()
        self._sweeps: dict[int, Any] = {}  # sweep end (stamp) ns -> Sweep
        self._finished: list[int] = []  # recent finished sweep ends: a late pretrace skips them
        self._requests: dict[int, tuple] = {}  # sweep end ns -> (index, poses, boxes), newest
        self._draining = False
        self._finishing = 0  # finishes waiting for or holding the lock
        self._turn = threading.Condition()  # guards the three above

    def request_pretrace(self, sweep_end_ns: int, index: int, poses: PoseHistory, boxes: Sequence = ()) -> bool:
        """Ask for the covered columns of a sweep to be traced (``pretrace_upcoming``); a
        request replaces an older one for the same sweep. Returns True when the caller must hand
        ``drain_pretraces`` to a worker (no drain is running or queued)."""
        with self._turn:
            self._requests[int(sweep_end_ns)] = (int(index), poses, tuple(boxes))
            if self._draining:
                return False
            self._draining = True
            return True

    def drain_pretraces(self) -> int:
        """Run the requested pretraces, oldest sweep first, each with its newest poses, until
        none is left; waits while a finish is in work. Returns the columns traced."""
        traced = 0
        while True:
            with self._turn:
                self._turn.wait_for(lambda: self._finishing == 0)
                if not self._requests:
                    self._draining = False
                    return traced
                sweep_end_ns = min(self._requests)
                index, poses, boxes = self._requests.pop(sweep_end_ns)
            try:
                traced += self.pretrace_upcoming(sweep_end_ns, index, poses, boxes)
            except BaseException:
                with self._turn:
                    self._draining = False
                raise

    def pretrace_upcoming(self, sweep_end_ns: int, index: int, poses: PoseHistory, boxes: Sequence = ()) -> int:
        """Trace the covered columns of the sweep ending at ``sweep_end_ns`` (scan ``index``)."""
        with self.lock:
            if sweep_end_ns in self._finished:
                return 0
            sweep = self._sweeps.get(sweep_end_ns)
            if sweep is None or sweep.index != index:
                sweep = self.scanner.start_sweep(sweep_end_ns, boxes=boxes, index=index)
                self._sweeps[sweep_end_ns] = sweep
            # Blocks of at least a twentieth of a sweep: the pose at the stamp covers only the
            # first column of the next sweep, and tracing it would hold up the finishing scan.
            return sweep.trace_covered(poses, min_columns=max(1, self.scanner.config.columns // 20))

    def pretrace(self, job: ScanJob, poses: PoseHistory, boxes: Sequence = ()) -> int:
        """``pretrace_upcoming`` for an open job that still waits for its pose."""
        if job.state not in ("waiting_pose", "tracing"):
            return 0
        return self.pretrace_upcoming(job.sweep_end_ns, job.index, poses, boxes)

    def finish(self, job: ScanJob, poses: PoseHistory, boxes: Sequence = ()) -> Any:
        """The whole scan of ``job`` (its remaining columns, extrapolated when the job says so).
        Requested pretraces wait until it is done."""
        with self._turn:
            self._finishing += 1
        try:
            with self.lock:
                sweep = self._sweeps.pop(job.sweep_end_ns, None)
                if sweep is None or sweep.index != job.index or not _same_boxes(sweep.boxes, tuple(boxes)):
                    sweep = self.scanner.start_sweep(job.sweep_end_ns, boxes=boxes, index=job.index)
                self._finished = self._finished[-7:] + [job.sweep_end_ns]
                return sweep.finish(poses, extrapolate=job.extrapolated)
        finally:
            with self._turn:
                self._finishing -= 1
                self._turn.notify_all()

    def discard(self, keep_after_ns: int) -> bool:
        """Forget sweeps ending before ``keep_after_ns`` (their jobs were dropped or failed).

        Housekeeping only, called from the poll that also publishes: it never waits for a trace
        in work (which holds the lock for tens of ms and would hold up a release); it returns
        False and the next poll does it."""
        if not self.lock.acquire(blocking=False):
            return False
        try:
            for end_ns in [t for t in self._sweeps if t < keep_after_ns]:
                del self._sweeps[end_ns]
        finally:
            self.lock.release()
        return True

    def replace_scanner(self, scanner: Any) -> None:
        with self.lock:
            self.scanner = scanner
            self._sweeps.clear()
            self._finished.clear()


def _same_boxes(a: tuple, b: tuple) -> bool:
    if len(a) != len(b):
        return False
    return all(
        x.object_id == y.object_id
        and np.array_equal(x.centre_m, y.centre_m)
        and np.array_equal(x.quaternion_xyzw, y.quaternion_xyzw)
        and np.array_equal(x.half_extents_m, y.half_extents_m)
        for x, y in zip(a, b)
    )


# --------------------------------------------------------------------------------------------
# Mount and boxes (the ROS-free halves of two TF-dependent inputs)


def mount_overrides(
    translation_m: Sequence[float],
    quaternion_xyzw: Sequence[float],
    position_flu_m: Sequence[float],
    rpy_rad: Sequence[float],
    tolerance_m: float = 1e-4,
    tolerance_rad: float = 1e-5,
) -> dict[str, list[float]] | None:
    """Sensors-file overrides for a TF mount base_footprint -> lidar, or None if it already matches.

    Returns ``{"position_flu_m": [...], "rpy_deg": [...]}`` (R = Rz Ry Rx, scipy's extrinsic
    ``xyz``, the URDF convention) when the TF mount differs from the configured one.
    """
    t = np.asarray(translation_m, dtype=np.float64)
    q = np.asarray(quaternion_xyzw, dtype=np.float64)
    if t.shape != (3,) or q.shape != (4,) or not (np.isfinite(t).all() and np.isfinite(q).all()):
        raise PoseError(f"mount transform {t.tolist()} {q.tolist()}: expected 3 + 4 finite numbers")
    rotation = Rotation.from_quat(q)
    configured = Rotation.from_euler("xyz", np.asarray(rpy_rad, dtype=np.float64))
    angle = float((rotation * configured.inv()).magnitude())
    if np.max(np.abs(t - np.asarray(position_flu_m))) <= tolerance_m and angle <= tolerance_rad:
        return None
    return {"position_flu_m": t.tolist(), "rpy_deg": np.degrees(rotation.as_euler("xyz")).tolist()}


def _matrix(position_m: Sequence[float], quaternion_xyzw: Sequence[float]) -> np.ndarray:
    T = np.eye(4)
    T[:3, :3] = Rotation.from_quat(np.asarray(quaternion_xyzw, dtype=np.float64)).as_matrix()
    T[:3, 3] = position_m
    return T


MARKER_CUBE = 1  # visualization_msgs/Marker CUBE
MARKER_ADD = 0  # visualization_msgs/Marker ADD (MODIFY)


def boxes_from_markers(
    markers: Iterable[Any], world_from_frame: Callable[[str], tuple[Sequence[float], Sequence[float]] | None]
) -> tuple[list[VehicleBox], list[Event]]:
    """``VehicleBox`` es of other vehicles from ``visualization_msgs/Marker`` s (any object with
    ``type``, ``action``, ``id``, ``ns``, ``header.frame_id``, ``pose`` and ``scale``).

    CUBE markers with action ADD become boxes; other markers are ignored. ``world_from_frame``
    returns the transform (translation, quaternion xyzw) of a marker's frame into the world (the
    odom frame) at the scan stamp, or None when TF has none: that marker is skipped with an event.
    """
    boxes: list[VehicleBox] = []
    events: list[Event] = []
    cache: dict[str, np.ndarray | None] = {}
    for marker in markers:
        if marker.type != MARKER_CUBE or marker.action != MARKER_ADD:
            continue
        frame = marker.header.frame_id
        if frame not in cache:
            transform = world_from_frame(frame)
            cache[frame] = None if transform is None else _matrix(*transform)
        T_world_frame = cache[frame]
        if T_world_frame is None:
            events.append(
                Event(
                    "warn",
                    "box_no_tf",
                    f"marker {marker.ns!r}/{marker.id} in frame {frame!r} "
                    "skipped: no transform into the world at the scan stamp",
                )
            )
            continue
        o = marker.pose.orientation
        p = marker.pose.position
        try:
            T = T_world_frame @ _matrix((p.x, p.y, p.z), (o.x, o.y, o.z, o.w))
            boxes.append(
                VehicleBox(
                    centre_m=T[:3, 3],
                    quaternion_xyzw=Rotation.from_matrix(T[:3, :3]).as_quat(),
                    half_extents_m=0.5 * np.array([marker.scale.x, marker.scale.y, marker.scale.z], dtype=np.float64),
                    object_id=int(marker.id),
                )
            )
        except (SceneError, ValueError) as exc:
            events.append(Event("warn", "box_invalid", f"marker {marker.ns!r}/{marker.id} skipped: {exc}"))
    return boxes, events


# --------------------------------------------------------------------------------------------
# A simulated run: the scheduling path with a simulated clock and odometry stream, real workers


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


def _summary(values_ms: list[float]) -> dict[str, float]:
    if not values_ms:
        return {"n": 0}
    v = np.asarray(values_ms)
    return {
        "n": int(v.size),
        "min": float(v.min()),
        "median": float(np.median(v)),
        "p95": float(np.percentile(v, 95)),
        "max": float(v.max()),
    }


def simulate_schedule(
    trace: Callable[[PoseHistory, ScanJob], Any],
    odometry: Sequence[OdometrySample],
    n_scans: int,
    *,
    sweeps: SweepTracer | None = None,
    period_s: float,
    delay_s: float,
    ts_first_point: bool = False,
    pose_timeout_s: float = 0.05,
    workers: int = 2,
    start_ns: int = 0,
) -> dict[str, Any]:
    """Run the scheduling path as the node does, against a simulated ROS clock that runs at the
    speed of the wall clock (``start_ns`` at the call), for ``n_scans`` due times.

    ``odometry`` messages are fed to a ``PoseTracker`` at their arrival times; with ``sweeps``
    (the ``SweepTracer`` that ``trace`` finishes scans with), every arrival also requests a
    pretrace of each waiting scan and the upcoming one (``request_pretrace``, drained in the
    pool) and each poll forgets stale sweeps (``discard``), as the node does; each scan whose
    sweep the poses cover is finished by ``trace(poses, job)`` in a pool of ``workers`` threads;
    results are published at release or, when late, at once. Runs with the node's GIL switch
    interval (``GIL_SWITCH_INTERVAL_S``, restored after). Not a test: it takes
    ``n_scans * period_s`` of wall time.

    Returns
    -------
    dict
        ``counts`` (the scheduler's counters), ``pose_counts`` (the tracker's),
        ``publish_minus_stamp_ms`` (``on_time``, ``late``, ``all``: n, min, median, p95, max),
        ``trace_wall_ms`` (the same statistics), ``events`` (kind -> number), ``wall_s``.
    """
    switch_interval_s = sys.getswitchinterval()
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    try:
        return _simulate(
            trace, odometry, n_scans, sweeps, period_s, delay_s, ts_first_point, pose_timeout_s, workers, start_ns
        )
    finally:
        sys.setswitchinterval(switch_interval_s)


def _simulate(
    trace, odometry, n_scans, sweeps, period_s, delay_s, ts_first_point, pose_timeout_s, workers, start_ns
) -> dict[str, Any]:
    t0 = time.perf_counter_ns()

    def clock() -> int:
        return time.perf_counter_ns() - t0 + start_ns

    scheduler = ScanScheduler(period_s, delay_s, clock, ts_first_point=ts_first_point, pose_timeout_s=pose_timeout_s)
    tracker = PoseTracker(period_s)
    pending = sorted(odometry, key=lambda s: s.arrival_ns)
    heap = [(s.arrival_ns, i) for i, s in enumerate(pending)]
    heapq.heapify(heap)
    wake = threading.Condition()
    state = {"dirty": False}
    published: list[ScanJob] = []
    events: dict[str, int] = {}
    record_lock = threading.Lock()

    def record(result: PollResult) -> None:
        with record_lock:
            published.extend(result.publish)
            for event in result.events:
                events[event.kind] = events.get(event.kind, 0) + 1

    def run(job: ScanJob, poses: PoseHistory) -> tuple[Any, float]:
        started = time.perf_counter()
        result = trace(poses, job)
        return result, time.perf_counter() - started

    def finished(job: ScanJob, future: Future) -> None:
        exc = future.exception()
        if exc is not None:
            record(scheduler.trace_failed(job, f"{type(exc).__name__}: {exc}"))
        else:
            result, wall_s = future.result()
            record(scheduler.trace_done(job, result, wall_s))
        with wake:
            state["dirty"] = True
            wake.notify()

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="lidar-trace") as pool:
        while True:
            now = clock()
            arrived = False
            while heap and heap[0][0] <= now:
                sample = pending[heapq.heappop(heap)[1]]
                result = tracker.add(
                    sample.stamp_ns, sample.position_m, sample.quaternion_xyzw, sample.frame_id, sample.child_frame_id
                )
                if result.kind != "accepted":
                    events[result.kind] = events.get(result.kind, 0) + 1
                arrived = True
            if scheduler.counts["due"] >= n_scans:
                scheduler.stop()
            polled = scheduler.poll(tracker.newest_ns)
            if any(e.kind == "clock_jump_back" for e in polled.events):
                tracker.clear()
            if sweeps is not None:
                open_ends = [job.sweep_end_ns for job in scheduler.jobs()]
                upcoming = scheduler.upcoming()
                sweeps.discard(min(open_ends) if open_ends else (upcoming[0] if upcoming else clock()))
            record(polled)
            for job in polled.start:
                try:
                    poses = tracker.snapshot(job.sweep_end_ns, extrapolate=job.extrapolated)
                except PoseError as exc:
                    record(scheduler.trace_failed(job, str(exc)))
                    continue
                future = pool.submit(run, job, poses)
                future.add_done_callback(lambda f, job=job: finished(job, f))
            # After the poll: a finish just started goes to the pool first.
            if arrived and sweeps is not None and tracker.newest_ns is not None:
                # A job whose sweep the poses now cover is about to start: its finish does the rest.
                targets = [
                    (job.sweep_end_ns, job.index)
                    for job in scheduler.jobs()
                    if job.state == "waiting_pose" and tracker.newest_ns < job.sweep_end_ns
                ]
                upcoming = scheduler.upcoming()
                if upcoming is not None:
                    targets.append(upcoming)
                for sweep_end_ns, index in targets:
                    if sweeps.request_pretrace(sweep_end_ns, index, tracker.snapshot(sweep_end_ns)):
                        pool.submit(sweeps.drain_pretraces)
            if scheduler.counts["due"] >= n_scans and scheduler.in_work == 0:
                break
            wakeups = [t for t in (scheduler.next_wakeup_ns(), heap[0][0] if heap else None) if t is not None]
            timeout_s = max(0.0, (min(wakeups) - clock()) * 1e-9) if wakeups else 0.05
            with wake:
                if not state["dirty"]:
                    wake.wait(timeout=min(timeout_s, 0.5))
                state["dirty"] = False

    on_time = [(j.published_ns - j.stamp_ns) * 1e-6 for j in published if not j.late]
    late = [(j.published_ns - j.stamp_ns) * 1e-6 for j in published if j.late]
    traces = [j.trace_wall_s * 1e3 for j in published if j.trace_wall_s is not None]
    return {
        "n_scans": n_scans,
        "hz": 1.0 / period_s,
        "delay_ms": delay_s * 1e3,
        "counts": dict(scheduler.counts),
        "pose_counts": dict(tracker.counts),
        "publish_minus_stamp_ms": {
            "on_time": _summary(on_time),
            "late": _summary(late),
            "all": _summary(on_time + late),
        },
        "trace_wall_ms": _summary(traces),
        "events": events,
        "wall_s": (time.perf_counter_ns() - t0) * 1e-9,
    }


def run_schedule_benchmark(
    n_scans: int = 600,
    sensors: str = "polaris",
    seed: int = 0,
    point_type: str = "XYZI",
    odom_hz: float = 50.0,
    odom_latency_s: float = 0.001,
    options: dict[str, Any] | None = None,
    pretrace_columns: bool = True,
) -> dict[str, Any]:
    """The figures of ``acres-lidar bench --schedule``: ``n_scans`` scans of the real ``Scanner``
    on the built-in farm along its tour, scheduled as the node schedules them (10 Hz and the
    sensor's delay for the Polaris), two workers, odometry at ``odom_hz``.

    The scans are traced one at a time (the ``Scanner`` keeps its noise streams in scan order);
    packing the organised cloud into a PointCloud2 runs in parallel in the two workers. Takes
    about ``n_scans / hz`` seconds of wall time plus the scene build. ``options`` are extra
    ``ScanOptions`` (e.g. ``{"radiometry": False}`` to time the geometry alone).
    ``pretrace_columns`` traces each sweep's columns as the odometry covering them arrives, as the
    node does (False: the whole scan after the stamp's pose arrives).
    """
    from acres_lidar_ros.config.sensors import load_sensor_config
    from acres_lidar_ros.outputs.layouts import point_cloud, stamps_sweep_start
    from acres_lidar_ros.outputs.pointcloud2 import default_typestore, pointcloud2_message
    from acres_lidar_ros.scan import Scanner, ScanOptions, freeze_startup_objects
    from acres_lidar_ros.scene import build_default_farm, default_tour

    config = load_sensor_config(sensors)
    scene = build_default_farm(seed)
    times_s, positions_m, quaternions_xyzw = default_tour(scene)
    tour = PoseHistory.from_arrays(times_s, positions_m, quaternions_xyzw, where="default tour")
    scanner = Scanner(config, scene, ScanOptions(**{"seed": seed, **(options or {})}))
    typestore = default_typestore()
    start_ns = int(round(tour.start_s * NS_PER_S))
    period_ns = int(round(config.period_s * NS_PER_S))
    start_ns = -(-start_ns // period_ns) * period_ns
    scanner.scan(tour, start_ns + period_ns, index=0)  # warm-up, not counted
    freeze_startup_objects()  # as the node does after its warm-up
    sweeps = SweepTracer(scanner)

    def trace(poses: PoseHistory, job: ScanJob) -> Any:
        scan = sweeps.finish(job, poses)
        return pointcloud2_message(point_cloud(scan, point_type, job.stamp_ns), scan.frame_id, job.stamp_ns, typestore)

    odometry = odometry_stream(
        tour, start_ns - period_ns, start_ns + (n_scans + 2) * period_ns, rate_hz=odom_hz, latency_s=odom_latency_s
    )
    result = simulate_schedule(
        trace,
        odometry,
        n_scans,
        period_s=config.period_s,
        delay_s=config.delay_s,
        start_ns=start_ns - period_ns // 2,
        sweeps=sweeps if pretrace_columns else None,
        ts_first_point=stamps_sweep_start(point_type, False),
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
