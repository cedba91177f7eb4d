"""What a scan is published as (the attribute list's "Output shaping and cadence"): its frame, motion
compensation, coordinates, organised or dense, whole or in slices.

``shape_scan(scan, outputs, poses, T_base_sensor)`` turns a ``Scan`` (points in the sensor frame
at each point's own firing time) into a ``ShapedScan``: the points in the output frame, the
header frame, each cell's time offset and the part of the sweep it covers. ``slice_scan`` cuts
one into the slices that ``partial_output`` publishes. ``layouts.point_cloud`` lays either out in
a point type. Everything here works on each point's own time offset (``cell_time_offset_s``)
and the pose history, so a pattern whose emitters fire at their own times needs nothing else.

Transforms, with ``S`` the scan stamp, ``t_i = S + dt_i`` point ``i``'s firing time,
``T_ws(t) = T_world_base(t) T_base_sensor`` the sensor pose from the pose history and ``p_i``
the point in the sensor frame at ``t_i``:

* motion compensation off: ``p_world = T_ws(S) p_i`` (the distortion of the sweep stays);
* motion compensation on: ``p_world = T_ws(t_i) p_i`` (where the point was in the world);
* frame ``sensor``: ``T_ws(S)^-1 p_world`` (off: ``p_i`` itself, as before this option);
  ``world``: ``p_world`` (header frame: the odometry frame); ``custom``:
  ``T_world_custom^-1 p_world`` with ``T_world_custom`` from ``custom_frame_xyz_rpy``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from acres_lidar_ros.config.output_options import OutputConfig
from acres_lidar_ros.errors import OutputError
from acres_lidar_ros.radiometry.returns import Returns
from acres_lidar_ros.scan.scan_types import Scan
from acres_lidar_ros.sensor.poses import PoseHistory, pose_matrix
from acres_lidar_ros.sensor.timing import column_slices, slice_span_ns


@dataclass(frozen=True)
class ShapedScan:
    """A scan, or a slice of it, in its output frame, ready for ``layouts.point_cloud``.

    Attributes
    ----------
    scan : Scan
        The scan it comes from.
    column_ids : (k,) int64
        The scan's columns (firing columns, the rows of the organised grid) it holds, in firing
        order (a whole scan: ``0 .. columns - 1`` in cell order).
    rings : int
    returns : Returns of shape (k * rings, R)
        The returns of those columns' cells (cell ``c * rings + r`` of the scan is row
        ``i * rings + r`` here, for ``column_ids[i] = c``).
    points : (k * rings, R, 3) float64
        Each return slot in ``frame_id``, Cartesian, m; NaN where there is no return.
    time_offset_s : (k * rings,) float64
        Each cell's firing time minus the scan stamp, s (0 with ``instant``).
    frame_id : str
        The header frame.
    coordinates : {"cartesian", "spherical"}
    include_invalid_points : bool
    start_ns, end_ns : int
        The part of the sweep it covers: ``[S - T, S]`` for a whole scan (``[S, S]`` in instant
        mode: zero capture time), one slice's share of it for a slice.
    slice_index, slice_count : int
        Its place among the slices of its scan (0 of 1 for a whole scan).
    last_slice : bool
        The scan's last slice that holds a column (a whole scan: True): the scan's truth goes
        beside it.
    """

    scan: Scan
    column_ids: np.ndarray
    rings: int
    returns: Returns
    points: np.ndarray
    time_offset_s: np.ndarray
    frame_id: str
    coordinates: str = "cartesian"
    include_invalid_points: bool = True
    start_ns: int = 0
    end_ns: int = 0
    slice_index: int = 0
    slice_count: int = 1
    last_slice: bool = True

    @property
    def columns(self) -> int:
        return int(self.column_ids.size)

    @property
    def stamp_ns(self) -> int:
        """The scan's stamp (the end of its sweep)."""
        return int(self.scan.stamp_ns)

    @property
    def index(self) -> int:
        """The scan's number in its run."""
        return int(self.scan.index)

    @property
    def ring_rank(self) -> np.ndarray:
        return self.scan.ring_rank

    def header_stamp_ns(self, sweep_start: bool) -> int:
        """The header stamp: the start of the part it covers (``sweep_start``), else its end."""
        return self.start_ns if sweep_start else self.end_ns


def cell_time_offset_s(scan: Scan) -> np.ndarray:
    """(columns * rings,) float64: each cell's own firing time minus the stamp, s
    (``Scan.cell_time_offset_s``: its column's offset, plus its emitter's fire time where the
    emitters of a tick fire at their own times)."""
    offsets = np.asarray(scan.cell_time_offset_s, dtype=np.float64).reshape(-1)
    if offsets.size != scan.columns * scan.rings:
        raise OutputError(
            f"scan {scan.index}: {offsets.size} time offsets for {scan.columns} columns x {scan.rings} rings: "
            "expected one per cell"
        )
    return offsets


def T_world_frame(outputs: OutputConfig) -> np.ndarray:
    """(4, 4) the custom frame's pose in the world from ``custom_frame_xyz_rpy``."""
    xyz_rpy = np.asarray(outputs.custom_frame_xyz_rpy, dtype=np.float64)
    return pose_matrix(xyz_rpy[:3], xyz_rpy[3:])


def _inverse(T: np.ndarray) -> np.ndarray:
    """Inverse of rigid transforms (..., 4, 4)."""
    out = np.zeros_like(T)
    R_t = np.swapaxes(T[..., :3, :3], -1, -2)
    out[..., :3, :3] = R_t
    out[..., :3, 3] = -np.einsum("...ij,...j->...i", R_t, T[..., :3, 3])
    out[..., 3, 3] = 1.0
    return out


def shape_scan(
    scan: Scan,
    outputs: OutputConfig,
    poses: PoseHistory,
    T_base_sensor: np.ndarray,
    *,
    world_frame_id: str = "odom",
    period_s: float,
    extrapolate: bool = False,
    column_ids: np.ndarray | None = None,
) -> ShapedScan:
    """The whole scan (or the columns ``column_ids``) in the output frame of ``outputs`` (module
    notes).

    Parameters
    ----------
    scan : Scan
    outputs : OutputConfig
        The sensor's output keys (``SensorConfig.outputs``).
    poses : PoseHistory
        The poses the scan was traced with (base_footprint in the world), queried at each
        point's firing time as the trace did (``extrapolate`` as the trace had it).
    T_base_sensor : (4, 4) float64
        The mount (``BeamPattern.T_base_sensor``).
    world_frame_id : str
        The world's frame name (the odometry frame).
    period_s : float
        The sweep's period ``T``: a whole scan covers ``[S - T, S]`` (``[S, S]`` when every
        time offset is 0: instant mode, or no motion distortion).
    column_ids : (k,) int64, optional
        Only these columns (rows in this order; the columns of one slice, ``shape_slice``):
        each cell is shaped on its own, so its numbers are those of the whole scan's.
    """
    dt = cell_time_offset_s(scan)
    whole = column_ids is None
    columns = np.arange(scan.columns, dtype=np.int64) if column_ids is None else np.asarray(column_ids, np.int64)
    instant = not np.any(dt != 0.0)
    points = np.asarray(scan.points_sensor, dtype=np.float64)
    returns = scan.returns
    if not whole:
        cells = (columns[:, None] * scan.rings + np.arange(scan.rings)).reshape(-1)
        dt, points = dt[cells], points[cells]
        returns = Returns(**{name: getattr(returns, name)[cells] for name in Returns.__dataclass_fields__})
    frame_id = {"sensor": scan.frame_id, "world": world_frame_id, "custom": outputs.custom_frame_id}[
        outputs.output_frame
    ]
    if outputs.output_frame != "sensor" or outputs.motion_compensation:
        points = _transform_points(scan, dt, points, outputs, poses, T_base_sensor, extrapolate)
    stamp_ns = int(scan.stamp_ns)
    start_ns = stamp_ns if instant else stamp_ns - int(round(period_s * 1e9))
    return ShapedScan(
        scan=scan,
        column_ids=columns,
        rings=scan.rings,
        returns=returns,
        points=points,
        time_offset_s=dt,
        frame_id=frame_id,
        coordinates=outputs.coordinates,
        include_invalid_points=outputs.include_invalid_points,
        start_ns=start_ns,
        end_ns=stamp_ns,
    )


def _transform_points(
    scan: Scan,
    dt: np.ndarray,
    points: np.ndarray,
    outputs: OutputConfig,
    poses: PoseHistory,
    T_base_sensor: np.ndarray,
    extrapolate: bool,
) -> np.ndarray:
    """(cells, R, 3) points in the output frame: ``T_frame_world T_ws(t) p`` per cell."""
    stamp_s = scan.stamp_ns * 1e-9  # the firing times as the sweep computed them: stamp + dt
    T_ws_stamp = poses.transforms(np.array([stamp_s]), extrapolate=extrapolate)[0] @ T_base_sensor
    if outputs.output_frame == "sensor":
        T_frame_world = _inverse(T_ws_stamp)
    elif outputs.output_frame == "world":
        T_frame_world = np.eye(4)
    else:
        T_frame_world = _inverse(T_world_frame(outputs))
    if outputs.motion_compensation:
        offsets, of_cell = np.unique(dt, return_inverse=True)  # one pose per distinct firing time
        T_ws = poses.transforms(stamp_s + offsets, extrapolate=extrapolate) @ T_base_sensor
        M = T_frame_world @ T_ws  # (u, 4, 4)
        R, t = M[of_cell, :3, :3], M[of_cell, :3, 3]
        return np.einsum("nij,nrj->nri", R, points) + t[:, None, :]
    M = T_frame_world @ T_ws_stamp
    return points @ M[:3, :3].T + M[:3, 3]


def column_firing_offset_s(shaped: ShapedScan) -> np.ndarray:
    """(k,) float64: each column's first firing time minus the stamp, s."""
    return shaped.time_offset_s.reshape(shaped.columns, shaped.rings).min(axis=1)


def slice_scan(shaped: ShapedScan, count: int, period_s: float) -> list[ShapedScan]:
    """The slices ``partial_output`` publishes, cut from a whole shaped scan: the sweep ``[S - T,
    S)`` in ``count`` equal parts (``timing.column_slices``); slice ``k`` covers ``[S - T + k T /
    count, S - T + (k + 1) T / count)`` and holds the columns whose first firing time falls in it
    (a column's cells stay together, so an organised slice is a block of whole rows), in firing
    order. Slices without a column are left out; a column at or after the stamp (instant mode:
    all of them) is in the last slice. Every column of the scan is in exactly one slice."""
    _check_count(count)
    rings = shaped.rings
    out = []
    slices = column_slices(column_firing_offset_s(shaped), count, period_s)
    for k, rows in slices:  # rows of ``shaped``
        cells = (rows[:, None] * rings + np.arange(rings)).reshape(-1)
        out.append(
            _as_slice(
                replace(
                    shaped,
                    column_ids=shaped.column_ids[rows],
                    returns=Returns(
                        **{name: getattr(shaped.returns, name)[cells] for name in Returns.__dataclass_fields__}
                    ),
                    points=shaped.points[cells],
                    time_offset_s=shaped.time_offset_s[cells],
                ),
                k,
                count,
                period_s,
                last=k == slices[-1][0],
            )
        )
    return out


def shape_slice(
    scan: Scan,
    k: int,
    count: int,
    columns: np.ndarray,
    outputs: OutputConfig,
    poses: PoseHistory,
    T_base_sensor: np.ndarray,
    *,
    world_frame_id: str,
    period_s: float,
    extrapolate: bool = False,
    last: bool = False,
) -> ShapedScan:
    """Slice ``k`` of ``count`` of ``scan`` (its ``columns`` in firing order, from
    ``timing.column_slices``) in the output frame, shaped alone: only its cells are transformed,
    and the result equals the same slice of ``slice_scan(shape_scan(scan, ...))`` (``last``: it
    is the scan's last slice with a column). The node shapes each slice this way as soon as its
    returns are final (``Sweep.ready_slices``); the other cells of ``scan`` are not read."""
    _check_count(count)
    shaped = shape_scan(
        scan,
        outputs,
        poses,
        T_base_sensor,
        world_frame_id=world_frame_id,
        period_s=period_s,
        extrapolate=extrapolate,
        column_ids=columns,
    )
    return _as_slice(shaped, k, count, period_s, last)


def _check_count(count: int) -> None:
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise OutputError(f"partial_slices = {count!r}: expected an integer >= 1")


def _as_slice(shaped: ShapedScan, k: int, count: int, period_s: float, last: bool) -> ShapedScan:
    """``shaped`` as slice ``k`` of ``count``: the part of the sweep it covers (``[S, S]`` in
    instant mode: the scan takes no time)."""
    stamp_ns = shaped.stamp_ns
    start_ns, end_ns = slice_span_ns(int(k), count, stamp_ns, period_s)
    if shaped.start_ns == shaped.end_ns:  # instant: the scan takes no time
        start_ns = end_ns = stamp_ns
    return replace(
        shaped, start_ns=start_ns, end_ns=end_ns, slice_index=int(k), slice_count=count, last_slice=bool(last)
    )


def shaped_outputs(
    scan: Scan,
    outputs: OutputConfig,
    poses: PoseHistory,
    T_base_sensor: np.ndarray,
    *,
    world_frame_id: str,
    period_s: float,
    extrapolate: bool = False,
) -> list[ShapedScan]:
    """What one scan is published as: ``[shape_scan(...)]``, or its slices with
    ``outputs.partial_output`` (``slice_scan``)."""
    shaped = shape_scan(
        scan,
        outputs,
        poses,
        T_base_sensor,
        world_frame_id=world_frame_id,
        period_s=period_s,
        extrapolate=extrapolate,
    )
    if not outputs.partial_output:
        return [shaped]
    return slice_scan(shaped, outputs.partial_slices, period_s)


def spherical(points: np.ndarray) -> np.ndarray:
    """(..., 3) Cartesian -> (..., 3) azimuth ``atan2(y, x)`` in (-pi, pi] (counter-clockwise
    from +x), elevation ``asin(z / r)`` (computed as ``atan2(z, hypot(x, y))``), both rad, and
    range ``r = |p|``, m; NaN stays NaN."""
    x, y, z = points[..., 0], points[..., 1], points[..., 2]
    horizontal = np.hypot(x, y)
    return np.stack([np.arctan2(y, x), np.arctan2(z, horizontal), np.hypot(horizontal, z)], axis=-1)


def as_shaped(scan: Scan | ShapedScan) -> ShapedScan:
    """A ``ShapedScan`` as it is; a ``Scan`` as it was traced: the sensor frame at each point's
    firing time, Cartesian, organised, covering its first firing time to its stamp."""
    if isinstance(scan, ShapedScan):
        return scan
    dt = cell_time_offset_s(scan)
    stamp_ns = int(scan.stamp_ns)
    return ShapedScan(
        scan=scan,
        column_ids=np.arange(scan.columns, dtype=np.int64),
        rings=scan.rings,
        returns=scan.returns,
        points=scan.points_sensor,
        time_offset_s=dt,
        frame_id=scan.frame_id,
        start_ns=stamp_ns + int(np.rint(np.min(dt) * 1e9)) if dt.size else stamp_ns,
        end_ns=stamp_ns,
    )
