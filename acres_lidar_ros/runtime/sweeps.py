"""Each scan's columns traced while its sweep still runs, one scan at a time (``scan.Sweep``)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from acres_lidar_ros.runtime.scheduler import ScanJob
from acres_lidar_ros.sensor.poses import PoseHistory

if TYPE_CHECKING:
    from acres_lidar_ros.scan.scan_types import Scan
    from acres_lidar_ros.scan.scanner import Scanner
    from acres_lidar_ros.scan.sweep import Sweep


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

    def __init__(self, scanner: Scanner) -> None:
        self.scanner = scanner
        self.lock = threading.Lock()
        self._sweeps: dict[int, Sweep] = {}  # sweep end (stamp) ns -> its sweep
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

    def deliver_slices(self, sweep_end_ns: int, index: int, deliver: Callable[[Sweep, list], None]) -> int:
        """Partial output: finish the next slices of the sweep ending at ``sweep_end_ns`` (scan
        ``index``) whose columns are traced (``Sweep.ready_slices``) and hand them to
        ``deliver(sweep, slices)`` while the lock is held, so a finish of that scan (which takes
        the lock) comes after them. The caller keeps the scans' draws in order: it calls this only
        once every earlier scan is finished. Returns the slices finished."""
        with self.lock:
            if sweep_end_ns in self._finished:
                return 0
            sweep = self._sweeps.get(int(sweep_end_ns))
            if sweep is None or sweep.index != index or not sweep.partial:
                return 0
            done = sweep.ready_slices()
            if done:
                deliver(sweep, done)
            return len(done)

    def finish(self, job: ScanJob, poses: PoseHistory, boxes: Sequence = ()) -> Scan:
        """The whole scan of ``job`` (its remaining columns, extrapolated when the job says so).
        Requested pretraces wait until it is done."""
        return self.finish_sweep(job, poses, boxes)[0]

    def finish_sweep(self, job: ScanJob, poses: PoseHistory, boxes: Sequence = ()) -> tuple[Scan, Sweep]:
        """``finish``, with the ``Sweep`` it finished (its ``slices`` with partial output)."""
        with self._turn:
            self._finishing += 1
        try:
            with self.lock:
                sweep = self._sweeps.pop(job.sweep_end_ns, None)
                if sweep is None or sweep.index != job.index or not _same_boxes(sweep.boxes, tuple(boxes)):
                    sweep = self.scanner.start_sweep(job.sweep_end_ns, boxes=boxes, index=job.index)
                self._finished = self._finished[-7:] + [job.sweep_end_ns]
                return sweep.finish(poses, extrapolate=job.extrapolated), sweep
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

    def forget_sweeps(self) -> None:
        """Forget every sweep in work (the caller holds ``lock``): after the scanner's beam pattern
        is rebuilt their traced columns belong to the old pattern (the attribute list discards the partial
        scan when an edit changes tick or channel identity)."""
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
