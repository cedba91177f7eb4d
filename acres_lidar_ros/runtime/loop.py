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
  packing into a message by ``pack``); when it is done, ``emit`` gets what to publish;
* **with partial output**, after each pretrace: the slices of the running sweep whose columns
  are traced are finished and packed (``_deliver_slices``), and the tick publishes each at its
  own end + delay as a ``SliceOut``, while the sweep still runs (docs/outputs.md "Partial
  output"); the slices left leave with the scan's job.

Everything that needs the outside world is injected: ``clock`` (ROS time, ns), ``pack`` (scan ->
message, e.g. a PointCloud2), ``emit`` (called from a worker with a ``LoopOutput``),
``job_inputs`` (a job's boxes and the events of finding them) and the executor the work runs in.
Nothing here logs, publishes or reads the wall clock except to time the work.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from acres_lidar_ros.config.sensors import SensorConfig
from acres_lidar_ros.errors import PoseError
from acres_lidar_ros.outputs.shaping import ShapedScan, shape_slice, shaped_outputs
from acres_lidar_ros.runtime.diagnostics import diagnostic_status
from acres_lidar_ros.runtime.events import Clock, Event, LogThrottle
from acres_lidar_ros.runtime.pose_tracker import MAX_ACCELERATION_MPS2, MAX_SPEED_MPS, GroundWatch, PoseTracker
from acres_lidar_ros.runtime.scheduler import PollResult, ScanJob, ScanScheduler
from acres_lidar_ros.runtime.sweeps import SweepTracer
from acres_lidar_ros.scan.scan_types import Scan
from acres_lidar_ros.scan.scanner import Scanner
from acres_lidar_ros.scan.sweep import Sweep
from acres_lidar_ros.sensor.poses import MAX_POSE_GAP_S, PoseHistory
from acres_lidar_ros.sensor.timing import slice_span_ns

TRACE_WORKERS = 2
"""Threads of the trace pool: one finishes a scan while the other pretraces the next sweep."""


@dataclass
class SliceOut:
    """One slice of a partial-output scan published while its sweep still runs (before its job
    opens at the stamp): ``result`` is what ``pack`` made of it, a list of one message (as a
    ``ScanJob``'s result is the list of its slices' messages).

    Attributes
    ----------
    index : int
        The scan's number (the index its job gets).
    sweep_end_ns : int
    slice_index : int
    release_ns : int
        The slice's end plus ``delay_s``: when it leaves.
    result : list of one message
    published_ns : int or None
    """

    index: int
    sweep_end_ns: int
    slice_index: int
    release_ns: int
    result: Any = field(default=None, repr=False)
    published_ns: int | None = None


@dataclass
class _EarlySlices:
    """The slices of one sweep finished before its job opened: up to when (the end of the last
    one, ns), and those not out yet."""

    index: int
    until_ns: int | None = None
    pending: list[SliceOut] = field(default_factory=list)


@dataclass
class LoopOutput:
    """What the caller must do: publish the messages of each entry's ``.result``, in order (a
    ``ScanJob``'s is the list of its slices not yet out, one for a whole scan; a ``SliceOut``'s
    is its one slice), log the events (``NodeLoop.to_log`` keeps the ones the throttle lets through)."""

    publish: list[ScanJob | SliceOut] = field(default_factory=list)
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
    max_pose_speed_mps, max_pose_acceleration_mps2 : float
        The pose jump limits (``PoseTracker``'s ``max_speed_mps``, ``max_acceleration_mps2``; 0: off).
    ground : GroundWatch, optional
        Checks each accepted pose against the scene's terrain (``below_terrain``, ``above_terrain``).
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
        max_pose_speed_mps: float = MAX_SPEED_MPS,
        max_pose_acceleration_mps2: float = MAX_ACCELERATION_MPS2,
        ground: GroundWatch | None = None,
    ) -> None:
        self.clock = clock
        self.ground = ground
        self.config = scanner.config
        self.sweeps = SweepTracer(scanner)
        self.tracker = PoseTracker(
            self.config.period_s,
            odom_frame=odom_frame,
            base_frame=base_frame,
            max_speed_mps=max_pose_speed_mps,
            max_acceleration_mps2=max_pose_acceleration_mps2,
        )
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
        self._early: dict[int, _EarlySlices] = {}  # sweep end ns -> slices out before its job opened
        self._early_lock = threading.Lock()
        self._inputs: dict[int, tuple[Sequence[Any], list[Event]]] = {}  # sweep end ns -> job inputs fetched early

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
        if self.ground is not None:
            out.events.extend(self.ground.check(stamp_ns, position_m))
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
            with self._early_lock:
                self._early.clear()  # slices of abandoned scans
            self._inputs.clear()
        out.events.extend(result.events)
        open_ends = [job.sweep_end_ns for job in self.scheduler.jobs()]
        upcoming = self.scheduler.upcoming()
        if open_ends or upcoming is not None:  # forget sweeps of dropped or failed scans
            self.sweeps.discard(min(open_ends) if open_ends else upcoming[0])  # type: ignore[index]
        out.publish.extend(self._with_early(result.publish))
        out.publish.extend(self._due_slices())
        for job in result.start:
            self._start(job, out)
        return out

    def _with_early(self, publish: Sequence[ScanJob]) -> list[ScanJob | SliceOut]:
        """``publish`` with each job's early slices not yet out put before it (they go first)."""
        out: list[ScanJob | SliceOut] = []
        with self._early_lock:
            for job in publish:
                early = self._early.pop(job.sweep_end_ns, None)
                if early is not None and early.index == job.index:
                    now = int(self.clock())
                    for part in early.pending:
                        part.published_ns = now
                    out.extend(early.pending)
                out.append(job)
        return out

    def _due_slices(self) -> list[ScanJob | SliceOut]:
        """The early slices whose release time has come, once every earlier scan is out (a scan
        never overtakes an earlier one)."""
        now = int(self.clock())
        open_ends = [job.sweep_end_ns for job in self.scheduler.jobs()]
        out: list[ScanJob | SliceOut] = []
        with self._early_lock:
            for sweep_end_ns in sorted(self._early):
                if any(end < sweep_end_ns for end in open_ends):
                    break
                early = self._early[sweep_end_ns]
                due = [part for part in early.pending if part.release_ns <= now]
                early.pending = [part for part in early.pending if part.release_ns > now]
                for part in due:
                    part.published_ns = now
                out.extend(due)
                if not early.pending and sweep_end_ns not in open_ends and not self._upcoming_is(sweep_end_ns):
                    del self._early[sweep_end_ns]  # its job was dropped or skipped: nothing more comes
        return out

    def _upcoming_is(self, sweep_end_ns: int) -> bool:
        upcoming = self.scheduler.upcoming()
        return upcoming is not None and upcoming[0] <= sweep_end_ns

    def _coverage(self, sweep_end_ns: int, need_end: bool) -> str:
        """How the poses cover a sweep about to start: from its first column (one period before
        the stamp; the stamp alone without motion distortion) to its end."""
        sweep_ns = self.scheduler.period_ns if self.scanner.motion_on else 0
        return self.tracker.coverage(sweep_end_ns - sweep_ns, sweep_end_ns, self.max_pose_gap_s, need_end)

    def next_wakeup_ns(self) -> int | None:
        """The next ROS time at which ``tick`` has something to do if nothing else happens."""
        times = [self.scheduler.next_wakeup_ns()]
        with self._early_lock:
            times += [part.release_ns for early in self._early.values() for part in early.pending]
        known = [t for t in times if t is not None]
        return min(known) if known else None

    # -- the work -----------------------------------------------------------------------------

    def _start(self, job: ScanJob, out: LoopOutput) -> None:
        try:
            poses = self.tracker.snapshot(job.sweep_end_ns, extrapolate=job.extrapolated)
        except PoseError as exc:  # the history was cleared between the poll and now
            out.extend(self.scheduler.trace_failed(job, str(exc)))
            return
        early_inputs = self._inputs.pop(job.sweep_end_ns, None)
        boxes, events = early_inputs if early_inputs is not None else self._job_inputs(job)
        out.events.extend(events)
        future = self._executor.submit(self._finish, job, poses, tuple(boxes))
        future.add_done_callback(lambda f: self._finished(job, f))

    def _finish(self, job: ScanJob, poses: PoseHistory, boxes: tuple) -> tuple[list[Any], float]:
        """In a worker: the rest of the scan and its messages; returns (messages, wall s).

        ``pack`` gets what the scan is published as (``shaping.shaped_outputs`` with the output
        keys of the config at the finish), one slice at a time: the whole scan is one slice, and
        with ``partial_output`` the slices not out already follow in slice order. The result is
        the list of their messages."""
        started = time.perf_counter()
        scan, sweep = self.sweeps.finish_sweep(job, poses, boxes)
        config = self.config
        if sweep.partial:  # the slices not out already, in order
            until_ns = self._early_until_ns(job.sweep_end_ns, job.index)
            parts = [
                self._shape_slice(
                    scan, sweep, k, columns, poses, config, extrapolate=job.extrapolated, last=k == sweep.slices[-1][0]
                )
                for k, columns in sweep.slices
                if until_ns is None
                or slice_span_ns(k, sweep.slice_count, job.sweep_end_ns, config.period_s)[1] > until_ns
            ]
            return [self._pack(part, job) for part in parts], time.perf_counter() - started
        shaped = shaped_outputs(
            scan,
            config.outputs,
            poses,
            self.scanner.pattern.T_base_sensor,
            world_frame_id=self.tracker.odom_frame,
            period_s=config.period_s,
            extrapolate=job.extrapolated,
        )
        message = [self._pack(part, job) for part in shaped]
        return message, time.perf_counter() - started

    def _early_until_ns(self, sweep_end_ns: int, index: int) -> int | None:
        """The end of the slices of scan ``index`` (sweep ending at ``sweep_end_ns``) that went
        out early already; None where none did."""
        with self._early_lock:
            early = self._early.get(sweep_end_ns)
            return early.until_ns if early is not None and early.index == index else None

    def _shape_slice(
        self,
        scan: Scan,
        sweep: Sweep,
        k: int,
        columns: np.ndarray,
        poses: PoseHistory,
        config: SensorConfig,
        *,
        extrapolate: bool = False,
        last: bool = False,
    ) -> ShapedScan:
        """Slice ``k`` (its ``columns``) of ``scan`` in the output frame of ``config``."""
        return shape_slice(
            scan,
            k,
            sweep.slice_count,
            columns,
            config.outputs,
            poses,
            self.scanner.pattern.T_base_sensor,
            world_frame_id=self.tracker.odom_frame,
            period_s=config.period_s,
            extrapolate=extrapolate,
            last=last,
        )

    def _finished(self, job: ScanJob, future: Future) -> None:
        if future.cancelled():  # shutting down
            return
        exc = future.exception()
        if exc is not None:
            result = self.scheduler.trace_failed(job, f"{type(exc).__name__}: {exc}")
        else:
            message, wall_s = future.result()
            result = self.scheduler.trace_done(job, message, wall_s)
        out = LoopOutput(events=result.events)
        out.publish.extend(self._with_early(result.publish))
        self._emit(out)
        if self.config.outputs.partial_output and self.pretrace_enabled:  # the next scan may draw now
            with contextlib.suppress(RuntimeError):  # the pool is shutting down (close): nothing more comes
                self._executor.submit(self._deliver_slices).add_done_callback(self._pretraces_done)

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
        partial = self.config.outputs.partial_output
        for sweep_end_ns, index in targets:
            try:
                poses = self.tracker.snapshot(sweep_end_ns)
            except PoseError:
                return
            boxes: Sequence[Any] = ()
            if partial:  # slices leave before the stamp: trace them with the job's own boxes
                if sweep_end_ns not in self._inputs:
                    self._inputs[sweep_end_ns] = self._job_inputs(self._provisional_job(sweep_end_ns, index))
                    out.events.extend(self._inputs[sweep_end_ns][1])
                    self._inputs = {
                        end: v for end, v in self._inputs.items() if end >= sweep_end_ns - 4 * self.scheduler.period_ns
                    }
                boxes = self._inputs[sweep_end_ns][0]
            if self.sweeps.request_pretrace(sweep_end_ns, index, poses, boxes):  # merged with older requests
                self._executor.submit(self._drain).add_done_callback(self._pretraces_done)

    def _drain(self) -> int:
        traced = self.sweeps.drain_pretraces()
        if self.config.outputs.partial_output:
            self._deliver_slices()
        return traced

    def _provisional_job(self, sweep_end_ns: int, index: int) -> ScanJob:
        """The job a sweep will get when it opens (what ``pack`` and ``job_inputs`` read)."""
        scheduler = self.scheduler
        stamp_ns = sweep_end_ns - scheduler.period_ns if scheduler.ts_first_point else sweep_end_ns
        return ScanJob(index, sweep_end_ns, stamp_ns, sweep_end_ns + scheduler.delay_ns, opened_ns=int(self.clock()))

    def _deliver_slices(self) -> int:
        """Partial output, in a worker: the slices of the running sweep whose columns are traced
        are finished, shaped and packed now (``SweepTracer.deliver_slices``) and leave at their
        own end + ``delay_s`` (``tick``), while the sweep goes on. Only once every earlier scan
        is finished (its draws come first: the noise stream runs in scan order) and while the
        poses cover the sweep honestly so far (no gap, nothing before the first pose); otherwise
        the slices wait for the scan's finish. Returns the slices finished."""
        upcoming = self.scheduler.upcoming()
        newest_ns = self.tracker.newest_ns
        if upcoming is None or newest_ns is None:
            return 0
        sweep_end_ns, index = upcoming
        if any(job.state in ("waiting_pose", "tracing") for job in self.scheduler.jobs()):
            return 0  # an earlier scan has yet to draw
        sweep_ns = self.scheduler.period_ns if self.scanner.motion_on else 0
        start_ns = sweep_end_ns - sweep_ns
        if newest_ns <= start_ns or self.tracker.coverage(start_ns, newest_ns, self.max_pose_gap_s, True) != "covered":
            return 0
        try:
            poses = self.tracker.snapshot(sweep_end_ns)
        except PoseError:
            return 0
        config = self.config
        job = self._provisional_job(sweep_end_ns, index)

        def deliver(sweep: Any, done: list) -> None:  # under the sweeps' lock
            scan = sweep.scan_so_far()
            until_ns = self._early_until_ns(sweep_end_ns, index)
            parts = []
            for k, columns in done:
                end_ns = slice_span_ns(k, sweep.slice_count, sweep_end_ns, config.period_s)[1]
                if until_ns is not None and end_ns <= until_ns:
                    continue  # out already (a sweep traced again after a pattern rebuild)
                if k == sweep.slices[-1][0]:
                    break  # the last slice goes with the scan's job (and its truth, which needs every slice)
                shaped = self._shape_slice(scan, sweep, k, columns, poses, config)
                parts.append(
                    SliceOut(index, sweep_end_ns, k, end_ns + self.scheduler.delay_ns, [self._pack(shaped, job)])
                )
            with self._early_lock:
                early = self._early.setdefault(sweep_end_ns, _EarlySlices(index))
                if early.index != index:
                    early = self._early[sweep_end_ns] = _EarlySlices(index)
                early.pending.extend(parts)
                if parts:
                    end_ns = parts[-1].release_ns - self.scheduler.delay_ns
                    early.until_ns = end_ns if early.until_ns is None else max(early.until_ns, end_ns)

        delivered = self.sweeps.deliver_slices(sweep_end_ns, index, deliver)
        if delivered:  # wake the caller: the tick publishes them at their release (next_wakeup_ns)
            self._emit(LoopOutput())
        return delivered

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
        bad value raises ``ConfigError`` and nothing changes. A new mount drops the self-return
        table (made for the old one), with a ``self_table_dropped`` warning."""
        with self.sweeps.lock:
            scanner = self.sweeps.scanner
            table = scanner.self_table
            rebuilt = scanner.set_runtime_config(overrides)
            self.config = scanner.config
            if rebuilt:
                self.sweeps.forget_sweeps()
        if table is not None and scanner.self_table is None:
            message = (
                f"the mount changed to position_flu_m {self.config.position_flu_m.tolist()}, rpy_deg "
                f"{np.degrees(self.config.rpy_rad).round(6).tolist()}: the self-return table "
                f"{str(table.path) if table.path else '(in memory)'} was made for the sensors file's mount, so "
                "the scans leave the body out; make a table for this mount with `acres-lidar self-table`"
            )
            self._emit(LoopOutput(events=[Event("warn", "self_table_dropped", message)]))

    def set_options(self, **options: Any) -> None:
        """Change scan options (rain, noise, ...) between two scans."""
        with self.sweeps.lock:
            self.sweeps.scanner.set_options(**options)

    # -- reporting ----------------------------------------------------------------------------

    def to_log(self, events: Sequence[Event], final: bool = False) -> list[Event]:
        """The events worth a log line: every debug line, one line per kind per throttle period
        of the others, each with the count of its kind held back since the previous line, and
        the summary lines of kinds held back for longer than the period (``LogThrottle.filter``;
        ``final``: of every kind held back, at shutdown)."""
        lines = self.throttle.filter(list(events))
        return lines + self.throttle.due(force=True) if final else lines

    def diagnostics(self, window_s: float = 1.0) -> tuple[str, str, list[tuple[str, str]]]:
        """Level, message and key/value pairs since the previous call (``diagnostic_status``)."""
        current = dict(self.scheduler.diagnostics(window_s))
        current.update({f"pose_{kind}": n for kind, n in self.tracker.counts.items()})
        if self.ground is not None:
            current.update({f"pose_{kind}": n for kind, n in self.ground.counts.items()})
        level, message, values = diagnostic_status(current, self._last_diagnostics)
        self._last_diagnostics = current
        return level, message, values

    def close(self) -> None:
        """Open no more scans; wait for the work in progress (cancel what has not started)."""
        self.scheduler.stop()
        if self._owns_executor:
            self._executor.shutdown(wait=True, cancel_futures=True)
