"""Pose history of base_footprint in the world (spec "Pose at the Firing Time").

Between two samples ``a`` and ``b`` the position is linear and the rotation is the slerp of the
two quaternions at ``lambda = (t - t_a) / (t_b - t_a)``. Before the first sample the history
holds the first pose. Quaternions are ``(x, y, z, w)`` as in ROS and TUM files.
"""

from __future__ import annotations

import math
from typing import Literal, get_args

import numba
import numpy as np
from scipy.spatial.transform import Rotation

from acres_lidar_ros.errors import ConfigError, PoseError

UNIT_QUATERNION_TOLERANCE = 1e-3

MAX_POSE_GAP_S = 0.25
"""Longest time between two successive pose samples that a sweep is interpolated across; a
sweep with a longer gap (an odometry outage) is not covered (``sweep_coverage``)."""

Coverage = Literal["covered", "before_first_pose", "after_last_pose", "gap"]
"""How pose samples cover a sweep (``sweep_coverage``): a closed set."""
COVERAGE: tuple[Coverage, ...] = get_args(Coverage)


def sweep_coverage(
    times_s: np.ndarray, start_s: float, end_s: float, max_gap_s: float = MAX_POSE_GAP_S, need_end: bool = True
) -> Coverage:
    """How pose samples at ``times_s`` (increasing) cover the sweep ``[start_s, end_s]``.

    Returns one of ``COVERAGE``: ``covered``; ``before_first_pose`` (the sweep starts before the
    first sample, or there is none: the model holds the first pose, as at the start of a run or
    after a reset); ``after_last_pose`` (with ``need_end``, it ends after the last sample); ``gap``
    (two successive samples around or inside the sweep more than ``max_gap_s`` apart: the sweep
    would be interpolated across an outage).
    """
    t = np.asarray(times_s, dtype=np.float64)
    if t.size == 0 or start_s < t[0]:
        return "before_first_pose"
    if need_end and end_s > t[-1]:
        return "after_last_pose"
    lo = max(int(np.searchsorted(t, start_s, side="right")) - 1, 0)
    hi = min(int(np.searchsorted(t, end_s, side="left")), t.size - 1)
    if hi > lo and float(np.max(np.diff(t[lo : hi + 1]))) > max_gap_s:
        return "gap"
    return "covered"


def first_bad_pose(
    times_s: np.ndarray, positions_m: np.ndarray, quaternions_xyzw: np.ndarray, tolerance: float
) -> tuple[str, int] | None:
    """The first rule a sequence of poses breaks, and the row: ``("not_finite", i)``,
    ``("not_increasing", i)`` (time ``i`` is not after time ``i - 1``) or ``("not_unit", i)``
    (quaternion norm not within ``tolerance`` of 1); None when all rows are good. The callers
    (``check_poses``, the TUM reader) phrase the message for their own rows."""
    finite = np.isfinite(times_s) & np.isfinite(positions_m).all(axis=1) & np.isfinite(quaternions_xyzw).all(axis=1)
    if not finite.all():
        return "not_finite", int(np.argmin(finite))
    steps = np.diff(times_s)
    if (steps <= 0).any():
        return "not_increasing", int(np.argmax(steps <= 0)) + 1
    unit = np.abs(np.linalg.norm(quaternions_xyzw, axis=1) - 1.0) <= tolerance
    if not unit.all():
        return "not_unit", int(np.argmin(unit))
    return None


def check_poses(times_s: np.ndarray, positions_m: np.ndarray, quaternions_xyzw: np.ndarray, where: str) -> None:
    """Raise ``PoseError`` naming ``where`` and the first bad sample for NaN, a non-unit quaternion
    or non-increasing times."""
    times_s = np.asarray(times_s, dtype=np.float64)
    positions_m = np.asarray(positions_m, dtype=np.float64)
    quaternions_xyzw = np.asarray(quaternions_xyzw, dtype=np.float64)
    n = len(times_s)
    if positions_m.shape != (n, 3) or quaternions_xyzw.shape != (n, 4):
        raise PoseError(
            f"{where}: expected {n} positions (n, 3) and quaternions (n, 4), got {positions_m.shape} and "
            f"{quaternions_xyzw.shape}"
        )
    bad = first_bad_pose(times_s, positions_m, quaternions_xyzw, UNIT_QUATERNION_TOLERANCE)
    if bad is None:
        return
    kind, i = bad
    t = float(times_s[i])
    if kind == "not_finite":
        raise PoseError(
            f"{where}: sample {i} (t = {t!r}) is not finite: position {positions_m[i].tolist()}, "
            f"quaternion {quaternions_xyzw[i].tolist()}; expected finite numbers"
        )
    if kind == "not_increasing":
        raise PoseError(
            f"{where}: time {t!r} at sample {i} is not after {float(times_s[i - 1])!r}; expected increasing times"
        )
    raise PoseError(
        f"{where}: sample {i} (t = {t!r}) has a quaternion of norm {np.linalg.norm(quaternions_xyzw[i]):.6g} "
        f"{quaternions_xyzw[i].tolist()}; expected a unit quaternion (x, y, z, w), norm within "
        f"{UNIT_QUATERNION_TOLERANCE} of 1"
    )


class PoseHistory:
    """Time-stamped poses of base_footprint in the world, queried at any times at once.

    Parameters
    ----------
    max_age_s : float or None
        Samples older than the newest minus ``max_age_s`` are dropped on ``append`` (the node
        keeps one period plus a margin). None keeps everything.
    """

    _times_s: np.ndarray  # (n,) float64, increasing
    _positions_m: np.ndarray  # (n, 3) float64
    _quaternions_xyzw: np.ndarray  # (n, 4) float64, unit

    def __init__(self, max_age_s: float | None = None) -> None:
        self.max_age_s = max_age_s
        self.clear()

    @classmethod
    def from_arrays(
        cls, times_s: np.ndarray, positions_m: np.ndarray, quaternions_xyzw: np.ndarray, where: str = "trajectory"
    ) -> PoseHistory:
        check_poses(times_s, positions_m, quaternions_xyzw, where)
        history = cls()
        history._times_s = np.array(times_s, dtype=np.float64)
        history._positions_m = np.array(positions_m, dtype=np.float64)
        q = np.array(quaternions_xyzw, dtype=np.float64)
        history._quaternions_xyzw = q / np.linalg.norm(q, axis=1, keepdims=True)
        return history

    def __len__(self) -> int:
        return len(self._times_s)

    @property
    def times_s(self) -> np.ndarray:
        return self._times_s.copy()

    @property
    def start_s(self) -> float:
        return float(self._times_s[0]) if len(self) else float("nan")

    @property
    def end_s(self) -> float:
        return float(self._times_s[-1]) if len(self) else float("nan")

    def append(self, t_s: float, position_m: np.ndarray, quaternion_xyzw: np.ndarray) -> None:
        """Add a sample after the newest one (``PoseError`` for NaN, non-unit or non-increasing)."""
        times = np.append(self._times_s[-1:], t_s)
        positions = np.vstack([self._positions_m[-1:], np.asarray(position_m, dtype=np.float64).reshape(1, 3)])
        quats = np.vstack([self._quaternions_xyzw[-1:], np.asarray(quaternion_xyzw, dtype=np.float64).reshape(1, 4)])
        check_poses(times, positions, quats, where=f"pose at t = {t_s!r}")
        q = quats[-1] / np.linalg.norm(quats[-1])
        self._times_s = np.append(self._times_s, float(t_s))
        self._positions_m = np.vstack([self._positions_m, positions[-1:]])
        self._quaternions_xyzw = np.vstack([self._quaternions_xyzw, q[None]])
        if self.max_age_s is not None:
            self.trim_before(float(t_s) - self.max_age_s)

    def trim_before(self, t_s: float) -> None:
        """Drop samples older than ``t_s``, keeping the newest one at or before it for interpolation."""
        keep_from = max(int(np.searchsorted(self._times_s, t_s, side="right")) - 1, 0)
        if keep_from:
            self._times_s = self._times_s[keep_from:]
            self._positions_m = self._positions_m[keep_from:]
            self._quaternions_xyzw = self._quaternions_xyzw[keep_from:]

    def clear(self) -> None:
        """Forget every sample (``max_age_s`` stays)."""
        self._times_s = np.empty(0)
        self._positions_m = np.empty((0, 3))
        self._quaternions_xyzw = np.empty((0, 4))

    def interpolate(self, times_s: np.ndarray, extrapolate: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Positions (n, 3) and rotation matrices (n, 3, 3) of base_footprint at ``times_s`` (n,).

        Before the first sample: the first pose. After the last: the last pose, or with
        ``extrapolate`` the position continued at the last segment's velocity (rotation held).
        """
        if not len(self):
            raise PoseError("pose history is empty: no pose to interpolate")
        t = np.atleast_1d(np.asarray(times_s, dtype=np.float64))
        if len(self) == 1:
            return np.repeat(self._positions_m, len(t), axis=0), np.repeat(
                Rotation.from_quat(self._quaternions_xyzw).as_matrix(), len(t), axis=0
            )
        tc = np.clip(t, self._times_s[0], self._times_s[-1])
        positions = np.stack([np.interp(tc, self._times_s, self._positions_m[:, k]) for k in range(3)], axis=1)
        if extrapolate:
            after = t > self._times_s[-1]
            velocity = (self._positions_m[-1] - self._positions_m[-2]) / (self._times_s[-1] - self._times_s[-2])
            positions[after] += (t[after] - self._times_s[-1])[:, None] * velocity
        return positions, self._slerp_matrices(tc)

    def _slerp_matrices(self, t: np.ndarray) -> np.ndarray:
        """Slerp between the samples around each time, as rotation matrices (n, 3, 3).

        One compiled pass (``_slerp``): scipy's ``Slerp`` (a test compares them) cost 1.2 ms for
        a sweep's 1800 columns, a fifth of the bare cast of its rays.
        """
        return _slerp(self._times_s, self._quaternions_xyzw, np.ascontiguousarray(t, dtype=np.float64))

    def transforms(self, times_s: np.ndarray, extrapolate: bool = False) -> np.ndarray:
        """``T_world_base`` at ``times_s``: (n, 4, 4) float64."""
        positions, rotations = self.interpolate(times_s, extrapolate)
        T = np.zeros((len(positions), 4, 4))
        T[:, :3, :3] = rotations
        T[:, :3, 3] = positions
        T[:, 3, 3] = 1.0
        return T


MAX_STILL_START_S = 600.0
"""Longest wait at the first pose that ``with_still_start`` adds (ten minutes)."""


def check_still_start(still_s: float, where: str = "--still-start") -> None:
    """``ConfigError`` unless ``still_s`` is a wait ``with_still_start`` takes."""
    if not (isinstance(still_s, int | float) and math.isfinite(still_s) and 0.0 <= still_s <= MAX_STILL_START_S):
        raise ConfigError(f"{where} {still_s!r}: expected seconds >= 0 and <= {MAX_STILL_START_S:g}")


def with_still_start(trajectory: PoseHistory, still_s: float, where: str = "--still-start") -> PoseHistory:
    """``trajectory`` with the vehicle waiting ``still_s`` seconds at its first pose before it drives.

    The wait is sampled at the trajectory's first sample interval, from its start time, and every
    sample after it is ``still_s`` later: the drive is the same, it starts ``still_s`` later. LiDAR-
    inertial front ends calibrate the IMU at rest (DLIO averages its first ``imu_calib_time`` of
    3 s, FAST-LIO its first 10 samples: docs/imu.md), so a drive recorded for them starts still.
    """
    check_still_start(still_s, where)
    times, positions, quaternions = trajectory._times_s, trajectory._positions_m, trajectory._quaternions_xyzw
    if still_s == 0.0 or len(times) == 0:
        return PoseHistory.from_arrays(times, positions, quaternions, where=where)
    step_s = float(times[1] - times[0]) if len(times) > 1 else 0.01
    n = math.ceil(still_s / step_s - 1e-9)
    wait_s = times[0] + still_s * np.arange(n) / n
    return PoseHistory.from_arrays(
        np.concatenate([wait_s, times + still_s]),
        np.concatenate([np.repeat(positions[:1], n, axis=0), positions]),
        np.concatenate([np.repeat(quaternions[:1], n, axis=0), quaternions]),
        where=where,
    )


def pose_matrix(position_m: np.ndarray, roll_pitch_yaw_rad: np.ndarray) -> np.ndarray:
    """(4, 4) ``T_world_base`` from a position and roll, pitch, yaw (R = Rz Ry Rx, fixed axes)."""
    T = np.eye(4)
    T[:3, :3] = Rotation.from_euler("xyz", roll_pitch_yaw_rad).as_matrix()
    T[:3, 3] = position_m
    return T


@numba.njit(cache=True, nogil=True)
def _slerp(times_s, quaternions_xyzw, t):
    """Rotation matrices (n, 3, 3) at the times ``t`` (inside the history), by slerp between
    the two samples around each: ``q = (sin((1 - l) W) q_a + sin(l W) q_b) / sin W`` along the
    shorter arc, ``cos W = |q_a . q_b|`` (linear and normalised where W is below 1e-9 rad)."""
    n = t.size
    last = times_s.size - 2
    out = np.empty((n, 3, 3))
    for i in range(n):
        k = np.searchsorted(times_s, t[i], side="right") - 1
        k = min(max(k, 0), last)
        lam = (t[i] - times_s[k]) / (times_s[k + 1] - times_s[k])
        a = quaternions_xyzw[k]
        b = quaternions_xyzw[k + 1]
        dot = a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3]
        sign = 1.0
        if dot < 0.0:
            dot, sign = -dot, -1.0
        if dot > 1.0:
            dot = 1.0
        omega = np.arccos(dot)
        if omega < 1e-9:
            wa, wb = 1.0 - lam, lam * sign
        else:
            wa = np.sin((1.0 - lam) * omega) / np.sin(omega)
            wb = np.sin(lam * omega) / np.sin(omega) * sign
        x = wa * a[0] + wb * b[0]
        y = wa * a[1] + wb * b[1]
        z = wa * a[2] + wb * b[2]
        w = wa * a[3] + wb * b[3]
        norm = np.sqrt(x * x + y * y + z * z + w * w)
        x, y, z, w = x / norm, y / norm, z / norm, w / norm
        out[i, 0, 0] = 1.0 - 2.0 * (y * y + z * z)
        out[i, 0, 1] = 2.0 * (x * y - z * w)
        out[i, 0, 2] = 2.0 * (x * z + y * w)
        out[i, 1, 0] = 2.0 * (x * y + z * w)
        out[i, 1, 1] = 1.0 - 2.0 * (x * x + z * z)
        out[i, 1, 2] = 2.0 * (y * z - x * w)
        out[i, 2, 0] = 2.0 * (x * z - y * w)
        out[i, 2, 1] = 2.0 * (y * z + x * w)
        out[i, 2, 2] = 1.0 - 2.0 * (x * x + y * y)
    return out
