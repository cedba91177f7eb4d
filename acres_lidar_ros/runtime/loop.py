"""The node's loop without ROS: poses in, scheduled scans out (``NodeLoop``).

``ros/node.py`` connects rclpy to it (an odometry callback calls ``on_pose``, a timer calls
``tick``, another ``diagnostics``), and the schedule benchmark (``runtime.simulate``) drives the
very same class with a simulated clock and a simulated odometry stream.

What runs when:

* **as odometry arrives** (``on_pose``): the sample is checked and kept (``PoseTracker``); a scan
  whose sweep it completes starts at once; then the columns of the running and waiting sweeps
  that the poses now cover are traced in a worker (``SweepTracer`` pretraces), so little is left
  for after the stamp;
* **at each tick** (the node's 2 ms timer, the benchmark's next wake-up): due scans open, covered
  ones start (``ScanScheduler.poll``), ready ones are released at stamp + delay;
* **in a worker**: a scan's finish (its last columns, the whole-scan noise and detection pass, the
  packing into a message by ``pack``); when it is done, ``emit`` gets what to publish.

Everything that needs the outside world is injected: ``clock`` (ROS time, ns), ``pack`` (scan ->
message, e.g. a PointCloud2), ``emit`` (called from a worker with a ``LoopOutput``),
``job_inputs`` (a job's boxes and the events of finding them) and the executor the work runs in.
Nothing here logs, publishes or reads the wall clock except to time the work.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from acres_lidar_ros.errors import PoseError
from acres_lidar_ros.outputs.shaping import shaped_outputs
from acres_lidar_ros.runtime.diagnostics import diagnostic_status
from acres_lidar_ros.runtime.events import Clock, Event, LogThrottle
from acres_lidar_ros.runtime.pose_tracker import PoseTracker
from acres_lidar_ros.runtime.scheduler import PollResult, ScanJob, ScanScheduler
from acres_lidar_ros.runtime.sweeps import SweepTracer
from acres_lidar_ros.scan import Scanner
from acres_lidar_ros.sensor.poses import MAX_POSE_GAP_S, PoseHistory

TRACE_WORKERS = 2
"""Threads of the trace pool: one finishes a scan while the other pretraces the next sweep."""


@dataclass
class LoopOutput:
    """What the caller must do: publish ``job.result`` of each job (in order), log the events
    (``NodeLoop.to_log`` keeps the ones the throttle lets through)."""

    publish: list[ScanJob] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)

    def extend(self, other: LoopOutput | PollResult) -> LoopOutput:
        self.publish.extend(other.publish)
        self.events.extend(other.events)
        return self


class InlineExecutor(Executor):
    """Runs each task in the calling thread at ``submit``: deterministic replays and tests (with
    a manual clock, a scan's whole life happens inside the call that started it)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        future: Future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # the future carries it, as a pool's would
            future.set_exception(exc)
        return future


def no_job_inputs(job: ScanJob) -> tuple[Sequence[Any], list[Event]]:
    """No other vehicles: the default ``job_inputs``."""
    return (), []


class NodeLoop:
    """The node's logic: pose ingestion, due times, pretraces, finishes, publish decisions and
    diagnostics, with injected clock, packing and output.

    Parameters
    ----------
    scanner : Scanner
        Traces the scans (``start_sweep``, ``config``); replaced by ``rebuild``.
    clock : callable returning int
        ROS time, ns. 0 means "no time yet" (sim time before the first ``/clock``): nothing opens.
    pack : callable (ShapedScan, ScanJob) -> message
        Runs in the worker after the finish (organised cloud + PointCloud2 bytes), once per
        scan, or once per slice with ``partial_output`` (``_finish``).
    emit : callable (LoopOutput) -> None
        Called from a worker when a finish completes (scans to publish now, events).
    job_inputs : callable (ScanJob) -> (boxes, events)
        Called when a scan starts: the other vehicles at its stamp (``boxes_from_markers``).
    executor : Executor, optional
        Where finishes and pretraces run; default a pool of ``TRACE_WORKERS`` threads, shut down
        by ``close``. ``InlineExecutor()`` runs them in the calling thread.
    pretrace : bool
        Trace each sweep's columns as the odometry covering them arrives (False: the whole scan
        after the stamp's pose, to measure what the pretraces save).
    ts_first_point, pose_timeout_s, max_extrapolation_s : ScanScheduler's
    odom_frame, base_frame : PoseTracker's
    throttle : LogThrottle, optional
        The throttle of ``to_log`` (default one line per kind per 5 s of the monotonic clock).
    max_pose_gap_s : float
        Honest pose coverage: a scan whose sweep starts before the first pose held (the start of a
        run, a reset) or spans two poses further apart than this is skipped and counted
        (``skipped_pose_start``, ``skipped_pose_gap``), never published as a normal scan.
    """

    def __init__(
        self,
        scanner: Scanner,
        clock: Clock,
        pack: Callable[[Any, ScanJob], Any],
        emit: Callable[[LoopOutput], None],
        *,
        job_inputs: Callable[[ScanJob], tuple[Sequence[Any], list[Event]]] = no_job_inputs,
        executor: Executor | None = None,
        pretrace: bool = True,
        ts_first_point: bool = False,
        pose_timeout_s: float = 0.05,
        max_extrapolation_s: float = 0.1,
        odom_frame: str = "odom",
        base_frame: str = "base_footprint",
        throttle: LogThrottle | None = None,
        max_pose_gap_s: float = MAX_POSE_GAP_S,
    ) -> None:
        self.clock = clock
        self.config = scanner.config
        self.sweeps = SweepTracer(scanner)
        self.tracker = PoseTracker(self.config.period_s, odom_frame=odom_frame, base_frame=base_frame)
        self.scheduler = ScanScheduler(
            self.config.period_s,
            self.config.delay_s,
            clock,
            ts_first_point=ts_first_point,
            pose_timeout_s=pose_timeout_s,
            max_extrapolation_s=max_extrapolation_s,
        )
        self.throttle = throttle or LogThrottle(5.0)
        self.pretrace_enabled = bool(pretrace)
        self.max_pose_gap_s = max_pose_gap_s
        self._pack = pack
        self._emit = emit
        self._job_inputs = job_inputs
        self._owns_executor = executor is None
        self._executor = executor or ThreadPoolExecutor(max_workers=TRACE_WORKERS, thread_name_prefix="lidar-trace")
        self._last_diagnostics: dict[str, Any] | None = None

    @property
    def scanner(self) -> Scanner:
        return self.sweeps.scanner

    # -- inputs -------------------------------------------------------------------------------

    def on_pose(
        self,
        stamp_ns: int,
        position_m: Sequence[float] | np.ndarray,
        quaternion_xyzw: Sequence[float] | np.ndarray,
        frame_id: str | None = None,
        child_frame_id: str | None = None,
    ) -> LoopOutput:
        """One odometry (or TF) sample of base_footprint in the odom frame (frames None: not
        checked, as for TF lookups). A scan this sample completes starts before any pretrace."""
        result = self.tracker.add(stamp_ns, position_m, quaternion_xyzw, frame_id, child_frame_id)
        out = LoopOutput()
        if result.kind != "accepted":
            out.events.append(Event(result.level, result.kind, result.message))
        if not result.accepted:
            return out
        out.extend(self.tick())
        self._pretrace(out)
        return out

    def tick(self) -> LoopOutput:
        """Open due scans, start the covered ones, release the ready ones."""
        out = LoopOutput()
        if not self.config.enabled or self.clock() == 0:
            return out  # disabled, or sim time before the first /clock
        result = self.scheduler.poll(self.tracker.newest_ns, self._coverage)
        if any(e.kind == "clock_jump_back" for e in result.events):
            self.tracker.clear()  # poses of the old timeline must not cover the new one's sweeps
        out.events.extend(result.events)
        open_ends = [job.sweep_end_ns for job in self.scheduler.jobs()]
        upcoming = self.scheduler.upcoming()
        if open_ends or upcoming is not None:  # forget sweeps of dropped or failed scans
            self.sweeps.discard(min(open_ends) if open_ends else upcoming[0])  # type: ignore[index]
        out.publish.extend(result.publish)
        for job in result.start:
            self._start(job, out)
        return out

    def _coverage(self, sweep_end_ns: int, need_end: bool) -> str:
        """How the poses cover a sweep about to start: from its first column (one period before
        the stamp; the stamp alone without motion distortion) to its end."""
        sweep_ns = self.scheduler.period_ns if self.scanner.options.motion_on(self.config) else 0
        return self.tracker.coverage(sweep_end_ns - sweep_ns, sweep_end_ns, self.max_pose_gap_s, need_end)

    def next_wakeup_ns(self) -> int | None:
        """The next ROS time at which ``tick`` has something to do if nothing else happens."""
        return self.scheduler.next_wakeup_ns()

    # -- the work -----------------------------------------------------------------------------

    def _start(self, job: ScanJob, out: LoopOutput) -> None:
        try:
            poses = self.tracker.snapshot(job.sweep_end_ns, extrapolate=job.extrapolated)
        except PoseError as exc:  # the history was cleared between the poll and now
            out.extend(self.scheduler.trace_failed(job, str(exc)))
            return
        boxes, events = self._job_inputs(job)
        out.events.extend(events)
        future = self._executor.submit(self._finish, job, poses, tuple(boxes))
        future.add_done_callback(lambda f: self._finished(job, f))

    def _finish(self, job: ScanJob, poses: PoseHistory, boxes: tuple) -> tuple[Any, float]:
        """In a worker: the rest of the scan and its message; returns (message, wall s).

        ``pack`` gets what the scan is published as (``shaping.shaped_outputs`` with the output
        keys of the config at the finish): the whole scan, whose message is the result, or with
        ``partial_output`` each slice in turn, whose messages, a list in slice order, are."""
        started = time.perf_counter()
        scan = self.sweeps.finish(job, poses, boxes)
        config = self.config
        shaped = shaped_outputs(
            scan,
            config.outputs,
            poses,
            self.scanner.pattern.T_base_sensor,
            world_frame_id=self.tracker.odom_frame,
            period_s=config.period_s,
            extrapolate=job.extrapolated,
        )
        message = (
            [self._pack(part, job) for part in shaped] if config.outputs.partial_output else self._pack(shaped[0], job)
        )
        return message, time.perf_counter() - started

    def _finished(self, job: ScanJob, future: Future) -> None:
        if future.cancelled():  # shutting down
            return
        exc = future.exception()
        if exc is not None:
            result = self.scheduler.trace_failed(job, f"{type(exc).__name__}: {exc}")
        else:
            message, wall_s = future.result()
            result = self.scheduler.trace_done(job, message, wall_s)
        self._emit(LoopOutput().extend(result))

    def _pretrace(self, out: LoopOutput) -> None:
        """Ask a worker to trace the columns of the running and waiting sweeps the poses cover."""
        if not self.pretrace_enabled:
            return
        newest_ns = self.tracker.newest_ns
        if newest_ns is None:
            return
        # A job whose sweep the poses now cover is about to start: its finish does the rest.
        targets = [
            (job.sweep_end_ns, job.index)
            for job in self.scheduler.jobs()
            if job.state == "waiting_pose" and newest_ns < job.sweep_end_ns
        ]
        upcoming = self.scheduler.upcoming()
        if upcoming is not None:
            targets.append(upcoming)
        for sweep_end_ns, index in targets:
            try:
                poses = self.tracker.snapshot(sweep_end_ns)
            except PoseError:
                return
            if self.sweeps.request_pretrace(sweep_end_ns, index, poses):  # merged with older requests
                self._executor.submit(self.sweeps.drain_pretraces).add_done_callback(self._pretraces_done)

    def _pretraces_done(self, future: Future) -> None:
        """A failed pretrace loses nothing (the scan's finish traces those columns again and
        reports its own failure), but it is reported."""
        if future.cancelled() or future.exception() is None:
            return
        exc = future.exception()
        message = f"tracing a sweep ahead failed ({type(exc).__name__}: {exc}); its scan traces those columns when it finishes"
        self._emit(LoopOutput(events=[Event("warn", "pretrace_failed", message)]))

    # -- the model ----------------------------------------------------------------------------

    def rebuild(self, overrides: dict[str, Any]) -> None:
        """Apply sensors-file overrides (a TF mount, runtime parameters) between two scans, by the
        rules of ``config.updates`` (``Scanner.set_runtime_config``): live keys from the next
        scan; pattern keys rebuild the scanner's pattern, on the same scanner, so its scan
        numbers and noise streams go on, and the sweeps in work are discarded; a fixed key or a
        bad value raises ``ConfigError`` and nothing changes."""
        with self.sweeps.lock:
            scanner = self.sweeps.scanner
            rebuilt = scanner.set_runtime_config(overrides)
            self.config = scanner.config
            if rebuilt:
                self.sweeps.forget_sweeps()

    def set_options(self, **options: Any) -> None:
        """Change scan options (rain, noise, ...) between two scans."""
        with self.sweeps.lock:
            self.sweeps.scanner.set_options(**options)

    # -- reporting ----------------------------------------------------------------------------

    def to_log(self, events: Sequence[Event]) -> list[Event]:
        """The events worth a log line: every debug line, one line per kind per throttle period
        of the others."""
        return [e for e in events if e.level == "debug" or self.throttle.allow(e.kind)]

    def diagnostics(self, window_s: float = 1.0) -> tuple[str, str, list[tuple[str, str]]]:
        """Level, message and key/value pairs since the previous call (``diagnostic_status``)."""
        current = dict(self.scheduler.diagnostics(window_s))
        current.update({f"pose_{kind}": n for kind, n in self.tracker.counts.items()})
        level, message, values = diagnostic_status(current, self._last_diagnostics)
        self._last_diagnostics = current
        return level, message, values

    def close(self) -> None:
        """Open no more scans; wait for the work in progress (cancel what has not started)."""
        self.scheduler.stop()
        if self._owns_executor:
            self._executor.shutdown(wait=True, cancel_futures=True)
