"""Odometry (or TF) samples of base_footprint in the odom frame into a ``PoseHistory``.

``PoseTracker`` keeps one period plus a margin; NaN, non-unit quaternions and wrong frames are
rejected with a reason; duplicate stamps are ignored; older samples are dropped, and a jump
backwards (a looping bag, a simulator reset) clears the history and says so.

Pose jumps: a sample further from the previous one than ``max_speed_mps`` allows (a teleport, a
reset of the simulated vehicle, an estimator's relocalisation) is reported (``jump``) and
restarts the history with it, so no scan is interpolated across the jump (the scans whose sweep
it is in are skipped as before the first pose); a change of velocity between two successive
segments beyond ``max_acceleration_mps2`` is reported (``acceleration``) and kept. Both are counted.
"""

from __future__ import annotations

import copy
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.spatial.transform import Rotation

from acres_lidar_ros.errors import ConfigError, PoseError
from acres_lidar_ros.runtime.events import Event
from acres_lidar_ros.scene.drives import check_ground
from acres_lidar_ros.sensor.poses import (
    MAX_POSE_GAP_S,
    UNIT_QUATERNION_TOLERANCE,
    Coverage,
    PoseHistory,
    sweep_coverage,
)
from acres_lidar_ros.units import NS_PER_S

MAX_SPEED_MPS = 50.0
"""Default speed limit of the pose jump check (180 km/h: no farm vehicle, a teleport)."""
MAX_ACCELERATION_MPS2 = 50.0
"""Default acceleration limit (about 5 g)."""
MIN_SEGMENT_S = 0.005
"""Segments shorter than this give no velocity for the acceleration check (stamp jitter)."""


@dataclass(frozen=True)
class IngestResult:
    """Outcome of one pose sample: ``kind`` is ``accepted``, ``duplicate``, ``out_of_order``,
    ``time_jump`` (history cleared, the sample accepted), ``jump`` (too fast: history restarted
    with the sample), ``acceleration`` (accepted), ``invalid`` or ``wrong_frame``."""

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
    max_speed_mps : float
        Speed between two successive samples beyond which the second is a jump (0: no check).
    max_acceleration_mps2 : float
        Change of velocity between two successive segments (each at least
        ``MIN_SEGMENT_S`` long) per second beyond which it is reported (0: no check).
    """

    def __init__(
        self,
        period_s: float,
        margin_s: float = 0.1,
        odom_frame: str = "odom",
        base_frame: str = "base_footprint",
        jump_back_s: float = 1.0,
        max_speed_mps: float = MAX_SPEED_MPS,
        max_acceleration_mps2: float = MAX_ACCELERATION_MPS2,
    ) -> None:
        if not (math.isfinite(period_s) and period_s > 0) or not (math.isfinite(margin_s) and margin_s >= 0):
            raise ConfigError(f"period_s = {period_s!r}, margin_s = {margin_s!r}: expected period > 0, margin >= 0")
        self.history = PoseHistory(max_age_s=period_s + margin_s)
        self.odom_frame = odom_frame
        self.base_frame = base_frame
        self.jump_back_ns = int(round(jump_back_s * NS_PER_S))
        for name, value in (("max_speed_mps", max_speed_mps), ("max_acceleration_mps2", max_acceleration_mps2)):
            if not (math.isfinite(value) and value >= 0):
                raise ConfigError(f"{name} = {value!r}: expected a number >= 0 (0: no check)")
        self.max_speed_mps = float(max_speed_mps)
        self.max_acceleration_mps2 = float(max_acceleration_mps2)
        self.counts: dict[str, int] = dict.fromkeys(
            ("accepted", "duplicate", "out_of_order", "time_jump", "jump", "acceleration", "invalid", "wrong_frame"), 0
        )
        self._newest_position_m: np.ndarray | None = None
        self._velocity_mps: np.ndarray | None = None  # of the newest segment at least MIN_SEGMENT_S long
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
        position_m: Sequence[float] | np.ndarray,
        quaternion_xyzw: Sequence[float] | np.ndarray,
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
            jump = "" if cleared else self._motion_check(stamp_ns, p)
            if jump.startswith("jump"):
                self.history.clear()
            try:
                self.history.append(stamp_ns / NS_PER_S, p, q)
            except PoseError as exc:  # two ns stamps that are one float second apart, for instance
                return IngestResult(False, "invalid", "warn", f"pose sample rejected: {exc}")
            if cleared or jump.startswith("jump"):
                self._velocity_mps = None
            self._newest_ns = stamp_ns
            self._newest_position_m = p
            if cleared:
                return IngestResult(True, "time_jump", "warn", cleared)
            if jump:
                kind, _, message = jump.partition(":")
                return IngestResult(True, kind, "warn", message.strip())
            return IngestResult(True, "accepted")

    def _motion_check(self, stamp_ns: int, p: np.ndarray) -> str:
        """``"jump: message"``, ``"acceleration: message"`` or ``""`` for the segment from the
        newest sample to this one (called with the lock held, for a newer stamp)."""
        if self._newest_ns is None or self._newest_position_m is None:
            return ""
        dt_s = (stamp_ns - self._newest_ns) / NS_PER_S
        step_m = float(np.linalg.norm(p - self._newest_position_m))
        speed = step_m / dt_s
        at = f"pose sample at {stamp_ns * 1e-9:.3f} s"
        count = f"pose_jumps = {self.counts['jump'] + 1}"
        if self.max_speed_mps > 0 and speed > self.max_speed_mps:
            return (
                f"jump: {at} is {step_m:.3f} m from the previous one {dt_s * 1e3:.1f} ms before ({speed:.1f} m/s > "
                f"max_pose_speed_mps {self.max_speed_mps:g}): a teleport or a reset, not motion; the pose history "
                f"restarts at it and the scans across the jump are skipped ({count})"
            )
        if dt_s < MIN_SEGMENT_S:
            return ""
        velocity = (p - self._newest_position_m) / dt_s
        previous, self._velocity_mps = self._velocity_mps, velocity
        if previous is None or self.max_acceleration_mps2 <= 0:
            return ""
        acceleration = float(np.linalg.norm(velocity - previous)) / dt_s
        if acceleration > self.max_acceleration_mps2:
            return (
                f"acceleration: {at}: the velocity changed from {np.round(previous, 3).tolist()} to "
                f"{np.round(velocity, 3).tolist()} m/s in {dt_s * 1e3:.1f} ms ({acceleration:.1f} m/s^2 > "
                f"max_pose_acceleration_mps2 {self.max_acceleration_mps2:g}): kept, but the odometry is not smooth "
                f"(pose_accelerations = {self.counts['acceleration'] + 1})"
            )
        return ""

    def coverage(
        self, start_ns: int, end_ns: int, max_gap_s: float = MAX_POSE_GAP_S, need_end: bool = True
    ) -> Coverage:
        """How the samples held cover the sweep ``[start_ns, end_ns]`` (``sensor.poses.sweep_coverage``)."""
        with self._lock:
            times_s = self.history.times_s
        return sweep_coverage(times_s, start_ns / NS_PER_S, end_ns / NS_PER_S, max_gap_s, need_end)

    def clear(self) -> None:
        with self._lock:
            self.history.clear()
            self._newest_ns = None
            self._newest_position_m = None
            self._velocity_mps = None

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


GROUND_KINDS = ("below_terrain", "above_terrain")
"""The events of ``GroundWatch`` (and its counts' keys)."""


class GroundWatch:
    """Poses against the scene's terrain: the rule of the CLI's ``--pose`` and ``--trajectory``
    warnings (``scene.drives.check_ground``), applied to each accepted odometry sample.

    A base_footprint pose more than ``drives.BELOW_GROUND_TOLERANCE_M`` below the terrain under it
    (its scans see the ground from below: a few percent of the points) or more than
    ``drives.ABOVE_GROUND_TOLERANCE_M`` above it is a warning (kind ``below_terrain`` or
    ``above_terrain``, rate-limited by the loop's throttle with the count it held back) naming the
    terrain height there, and is counted (``counts``); the pose is kept.

    Parameters
    ----------
    scene : the scene traced (its ``height_at``)
    T_scene_odom : (4, 4) or None
        The odom frame's pose in the scene (``odom_in_scene``); None: the scene at the odom origin.
    """

    def __init__(self, scene: Any, T_scene_odom: np.ndarray | None = None) -> None:
        self.scene = scene
        self.T_scene_odom = None if T_scene_odom is None else np.asarray(T_scene_odom, dtype=np.float64)
        self.counts: dict[str, int] = dict.fromkeys(GROUND_KINDS, 0)

    def check(self, stamp_ns: int, position_m: Sequence[float] | np.ndarray) -> list[Event]:
        """The event of one odometry position (odom frame), or none."""
        p = np.asarray(position_m, dtype=np.float64).reshape(1, 3)
        if self.T_scene_odom is not None:
            p = p @ self.T_scene_odom[:3, :3].T + self.T_scene_odom[:3, 3]
        ground = check_ground(self.scene, p)
        lines = ground.warnings(p, f"odometry pose at {stamp_ns * 1e-9:.3f} s (in the scene frame)")
        if not lines:
            return []
        kind = "below_terrain" if bool(ground.below[0]) else "above_terrain"
        self.counts[kind] += 1
        return [Event("warn", kind, f"{lines[0]}; the pose is kept (pose_{kind} = {self.counts[kind]})")]
