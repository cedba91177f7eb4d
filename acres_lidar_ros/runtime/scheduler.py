"""Due times, stamps, the pose wait, busy drops and in-order release of scans (spec "Scan Timing").

``ScanScheduler`` takes an injected clock (a callable that returns the current ROS time in ns)
and returns what to do (``PollResult``: traces to start, scans to publish, events to log) instead
of doing it, so the tests drive it with a manual clock.

Due times ``t = 0, T, 2T, ...``; the stamp (end of the sweep, or its first point with
``ts_first_point``); the wait for a pose that covers the sweep (or extrapolation after a
timeout); at most two scans in work (a scan due while two are open is dropped and counted
``dropped_busy``); release at ``sweep end + delay_s``, in scan order; a scan that is ready later
than that is published at once and counted ``late``.
"""

from __future__ import annotations

import math
import statistics
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.runtime.events import Clock, Event
from acres_lidar_ros.sensor.timing import first_scan_at_or_after, scan_stamp_ns
from acres_lidar_ros.units import NS_PER_S

JobState = Literal["waiting_pose", "tracing", "ready", "published", "failed", "abandoned"]
"""A scan job's state: waiting_pose -> tracing -> ready -> published, or failed or abandoned."""
JOB_STATES: tuple[JobState, ...] = get_args(JobState)

Coverage = Callable[[int, bool], str]
"""(sweep_end_ns, need_end) -> one of ``sensor.poses.COVERAGE``."""

UNCOVERED_COUNT = {"before_first_pose": "skipped_pose_start", "gap": "skipped_pose_gap"}


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
    state: JobState = "waiting_pose"  # waiting_pose -> tracing -> ready -> published | failed | abandoned
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
    "skipped_pose_start",
    "skipped_pose_gap",
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
    stepped : bool
        Stamp each scan on the first 1/120 s physics step at or after its due time ``k T``
        (``sensor.timing.scan_stamp_ns``, the spec's "Scan Stamp"; the same times at 10 Hz).
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
        stepped: bool = True,
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
        self.hz = 1.0 / period_s
        self.stepped = bool(stepped)
        self.delay_ns = int(round(delay_s * NS_PER_S))
        self.pose_timeout_ns = int(round(pose_timeout_s * NS_PER_S))
        self.max_extrapolation_ns = int(round(max_extrapolation_s * NS_PER_S))
        self.ts_first_point = bool(ts_first_point)
        self.max_in_work = max_in_work
        self.clock = clock
        self.counts: dict[str, int] = dict.fromkeys(COUNT_KEYS, 0)
        self._lock = threading.Lock()
        self._jobs: list[ScanJob] = []  # open jobs, oldest first
        self._next_due_ns: int | None = None  # the stamp of scan k = _next_k
        self._next_k = 0
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

    def poll(self, pose_end_ns: int | None, coverage: Coverage | None = None) -> PollResult:
        """Open due scans, start the traces whose sweep the poses cover, release ready scans.

        Parameters
        ----------
        pose_end_ns : int or None
            Stamp of the newest pose sample (``PoseTracker.newest_ns``); None without any.
        coverage : callable (sweep_end_ns, need_end) -> str, optional
            How the poses cover a sweep that is about to start (``sensor.poses.sweep_coverage``):
            a sweep that starts before the first pose (start of run, reset) or spans a gap is
            skipped and counted (``skipped_pose_start``, ``skipped_pose_gap``). ``need_end`` is
            False for a scan that will be extrapolated.
        """
        with self._lock:
            now = int(self.clock())
            out = PollResult()
            self._check_clock(now, out)
            self._open_due(now, out)
            self._start_covered(now, pose_end_ns, coverage, out)
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
            self._next_k = first_scan_at_or_after(now, self.hz, self.stepped)  # the first stamp at or after now
            self._next_due_ns = scan_stamp_ns(self._next_k, self.hz, self.stepped)
        newest_k = first_scan_at_or_after(now + 1, self.hz, self.stepped) - 1  # the last stamp at or before now
        backlog = max(newest_k - self._next_k + 1, 0)
        if backlog > self.max_in_work + 1:
            # ROS time leapt forward (a sim clock starting, a long stall): scans of the gap are not
            # traced; only the newest due time is kept.
            skipped = backlog - 1
            self.counts["skipped_time_jump"] += skipped
            self._next_k += skipped
            self._next_due_ns = scan_stamp_ns(self._next_k, self.hz, self.stepped)
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
            self._next_k += 1
            self._next_due_ns = scan_stamp_ns(self._next_k, self.hz, self.stepped)
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

    def _start_covered(self, now: int, pose_end_ns: int | None, coverage: Coverage | None, out: PollResult) -> None:
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
                self._start(job, now, False, coverage, out)
            elif now >= job.sweep_end_ns + self.pose_timeout_ns:
                if pose_end_ns is not None and job.sweep_end_ns - pose_end_ns <= self.max_extrapolation_ns:
                    out.events.append(  # every extrapolated scan (the log throttle counts repeats)
                        Event(
                            "warn",
                            "extrapolate",
                            f"scan {job.index}: no pose at or after {job.sweep_end_ns * 1e-9:.3f} s within "
                            f"{self.pose_timeout_ns * 1e-6:.0f} ms (newest at {pose_end_ns * 1e-9:.3f} s): "
                            f"extrapolating (scans_extrapolated = {self.counts['extrapolated'] + 1})",
                            job.index,
                        )
                    )
                    self._extrapolating = True
                    self._start(job, now, True, coverage, out)
                else:
                    job.state = "abandoned"
                    self._jobs.remove(job)
                    self.counts["skipped_no_pose"] += 1
                    newest = "none yet" if pose_end_ns is None else f"newest at {pose_end_ns * 1e-9:.3f} s"
                    out.events.append(  # every skipped scan (the log throttle counts repeats)
                        Event(
                            "warn",
                            "no_pose",
                            f"scan {job.index} (sweep end {job.sweep_end_ns * 1e-9:.3f} s) skipped: no pose "
                            f"within {self.max_extrapolation_ns * 1e-6:.0f} ms of it ({newest}; "
                            f"scans_skipped_no_pose = {self.counts['skipped_no_pose']})",
                            job.index,
                        )
                    )
                    self._skipping = True

    def _start(self, job: ScanJob, now: int, extrapolated: bool, coverage: Coverage | None, out: PollResult) -> None:
        reason = "covered" if coverage is None else coverage(job.sweep_end_ns, not extrapolated)
        if reason != "covered":
            key = UNCOVERED_COUNT.get(reason, "skipped_no_pose")
            job.state = "abandoned"
            self._jobs.remove(job)
            self.counts[key] += 1
            what = {
                "before_first_pose": "its sweep starts before the first pose (start of the run, or a reset)",
                "gap": "its sweep spans a gap in the poses longer than the limit",
            }.get(reason, "the poses do not reach the end of its sweep")
            out.events.append(
                Event("warn", key, f"scan {job.index} (stamp {job.stamp_ns * 1e-9:.3f} s) skipped: {what}", job.index)
            )
            return
        if extrapolated:
            self.counts["extrapolated"] += 1
        job.state, job.started_ns, job.extrapolated = "tracing", now, extrapolated
        out.start.append(job)

    def _release(self, now: int, out: PollResult) -> None:
        # In scan order: a scan never overtakes an earlier one that is still open.
        while self._jobs and self._jobs[0].state == "ready":
            job = self._jobs[0]
            finished_ns = job.finished_ns if job.finished_ns is not None else now  # set by trace_done
            previous_published = self._last_published_ns
            ready_ns = max(finished_ns, previous_published if previous_published is not None else finished_ns)
            if now < job.release_ns:
                return
            job.late = ready_ns > job.release_ns
            job.state, job.published_ns = "published", now
            self._jobs.pop(0)
            self.counts["published"] += 1
            if job.late:
                self.counts["late"] += 1
                out.events.append(  # every late scan (the log throttle counts repeats)
                    Event(
                        "warn",
                        "late",
                        f"scan {job.index} ready {(ready_ns - job.sweep_end_ns) * 1e-6:.1f} ms after the end of its "
                        f"sweep, {(ready_ns - job.release_ns) * 1e-6:.1f} ms after its release time: published late "
                        f"(scans_late = {self.counts['late']})",
                        job.index,
                    )
                )
            self._last_published_ns = now
            out.publish.append(job)
