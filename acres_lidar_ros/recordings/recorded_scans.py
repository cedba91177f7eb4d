"""A recording read whole: each scan in the sensor's cells with the sensor pose at each column's firing time.

``read_recording(paths, config, ...)`` ties ``bag_source``, ``cloud_cells`` and
``recorded_poses`` together (docs/calibration.md, "Recordings"):

* the cloud topic defaults to the bags' one PointCloud2 topic;
* each column's firing time is the median of its points' own times where the layout carries them
  (XYZIRT's absolute ``timestamp``, velodyne's ``time``, ouster's and nebula's ``t``), else the
  stamp plus the column's offset of the sensors file (``sensor.timing.column_time_offset``), the
  stamp read as the end of the sweep (rslidar_sdk's default) or, with ``stamp_at="sweep_start"``,
  its start (``ts_first_point``);
* the mount is the static chain of ``/tf_static`` to the cloud frame, or the sensors file's
  (``mount="sensors"``, where the cloud frame must be ``lidar.frame_id``);
* a scan whose sweep begins before the first pose or ends after the last is left out and named in
  ``Recording.dropped``; a sweep across a pose gap (``sensor.poses.MAX_POSE_GAP_S``) is an error,
  and so is a recording in which no scan is covered.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from acres_lidar_ros.config.sensors import SensorConfig
from acres_lidar_ros.errors import RecordingError
from acres_lidar_ros.recordings.bag_source import ODOMETRY, POINTCLOUD2, BagSource
from acres_lidar_ros.recordings.cloud_cells import BeamTable, CellCloud, cell_cloud
from acres_lidar_ros.recordings.recorded_poses import (
    VehiclePoses,
    firing_poses,
    odometry_poses,
    pose_source_kind,
    tf_chain,
    tum_poses,
)
from acres_lidar_ros.sensor.pattern import mount_rotation
from acres_lidar_ros.sensor.poses import sweep_coverage
from acres_lidar_ros.sensor.timing import column_time_offset

STAMPS_AT = ("sweep_end", "sweep_start")
MOUNTS = ("tf_static", "sensors")
DEFAULT_ODOM_TOPIC = "/odom"
TF_TOPICS = ("/tf", "/tf_static")


@dataclass(frozen=True)
class RecordedScan:
    """One recorded scan: its cells and the sensor pose at each column's firing time.

    ``column_time_s`` (columns,) absolute firing time of each column, s; ``T_world_sensor``
    (columns, 4, 4) maps sensor coordinates into the world at that time (None when the recording
    was read without poses).
    """

    index: int
    stamp_ns: int
    cells: CellCloud
    column_time_s: np.ndarray
    T_world_sensor: np.ndarray | None
    source: str


@dataclass
class Recording:
    """The scans of one or more bags, and what reading them found."""

    scans: list[RecordedScan]
    topic: str
    frame_id: str
    layout: str
    pose_source: str
    T_base_sensor: np.ndarray
    dropped: list[str] = field(default_factory=list)
    points_in: int = 0
    unassigned: int = 0
    merged: int = 0
    poses: VehiclePoses | None = None
    stamp_at: str = "sweep_end"

    @property
    def unassigned_share(self) -> float:
        """Share of the dense points that no beam took (0 for organised clouds)."""
        return self.unassigned / self.points_in if self.points_in else 0.0

    def summary(self) -> dict:
        return {
            "scans": len(self.scans),
            "topic": self.topic,
            "frame_id": self.frame_id,
            "layout": self.layout,
            "pose_source": self.pose_source,
            "dropped": self.dropped,
            "points": self.points_in,
            "unassigned_points": self.unassigned,
            "unassigned_share": self.unassigned_share,
            "merged_points": self.merged,
        }


def retimed(recording: Recording, config: SensorConfig) -> Recording:
    """The recording with each column's firing time and pose taken again from ``config``, for the
    scans whose points carry no time of their own: their column times come from the sensors file's
    column order, spin and start azimuth, and the file a recording was first read with may have
    the wrong column order (``cw`` against ``ccw`` puts a column's firing time at the other end of
    the sweep, and its pose up to a sweep's travel away)."""
    if recording.poses is None:
        return recording
    scans = []
    for scan in recording.scans:
        times = _column_times(scan.cells, scan.stamp_ns, config, recording.stamp_at)
        T = firing_poses(recording.poses, recording.T_base_sensor, times)
        scans.append(RecordedScan(scan.index, scan.stamp_ns, scan.cells, times, T, scan.source))
    return replace(recording, scans=scans)


def beam_table(config: SensorConfig) -> BeamTable:
    """The beam table of a sensor; for an ``emitters`` block the lens offset is its first emitter's
    horizontal offset (``hor_offset_m``, the origin of cell 0)."""
    lens_m = float(config.lens_center_m)
    if config.emitters is not None:
        from acres_lidar_ros.sensor.pattern import BeamPattern

        lens_m = float(np.hypot(*BeamPattern.from_config(config, sub_rays=1).lens_origins_sensor[0, 0, :2]))
    return BeamTable(
        np.asarray(config.elevations_rad, dtype=np.float64),
        np.asarray(config.azimuth_offsets_rad, dtype=np.float64),
        int(config.columns),
        config.azimuth_order,
        lens_m,
    )


def sensors_mount(config: SensorConfig) -> np.ndarray:
    T = np.eye(4)
    T[:3, :3] = mount_rotation(np.asarray(config.rpy_rad, dtype=np.float64))
    T[:3, 3] = config.position_flu_m
    return T


def _vehicle_poses(source: BagSource, poses: str, cloud_frame: str, mount: str, config: SensorConfig):
    kind = pose_source_kind(poses)
    transforms = source.transforms(TF_TOPICS) if (mount == "tf_static" or kind == "tf") else []
    T_base_sensor, vehicle = sensors_mount(config), None
    if mount == "tf_static":
        T_base_sensor, _base, vehicle = tf_chain(transforms, cloud_frame)
    elif cloud_frame != config.frame_id:
        raise RecordingError(
            f"the clouds' frame {cloud_frame!r} is not the sensors file's lidar.frame_id {config.frame_id!r}; "
            "with the mount from the sensors file they must match (or take the mount from /tf_static)"
        )
    if kind == "tf":
        if vehicle is None:
            _m, _b, vehicle = tf_chain(transforms, cloud_frame)
        if vehicle is None:
            raise RecordingError(f"poses from /tf: no moving transform above the clouds' frame {cloud_frame!r}")
        return T_base_sensor, vehicle
    if kind == "tum":
        return T_base_sensor, tum_poses(poses)
    topic = source.topic_of_type(
        ODOMETRY, DEFAULT_ODOM_TOPIC if DEFAULT_ODOM_TOPIC in source.topics() else None, "odom"
    )
    return T_base_sensor, odometry_poses(source.odometry(topic), topic)


def _column_times(cells: CellCloud, stamp_ns: int, config: SensorConfig, stamp_at: str) -> np.ndarray:
    t = cells.column_time_s()
    if np.isfinite(t).all():
        return t
    from acres_lidar_ros.sensor.emitters import column_azimuths_rad

    offset = column_time_offset(
        column_azimuths_rad(config.columns, config.azimuth_order),
        config.scan_start_azimuth_rad,
        config.spin_direction,
        config.period_s,
    )
    if not config.motion_distortion:
        offset = np.zeros_like(offset)
    base = stamp_ns * 1e-9 + (config.period_s if stamp_at == "sweep_start" and config.motion_distortion else 0.0)
    return np.where(np.isfinite(t), t, base + offset)


def read_recording(
    paths: Sequence[str | os.PathLike[str]],
    config: SensorConfig,
    *,
    topic: str | None = None,
    poses: str | None = "odom",
    mount: str = "tf_static",
    stamp_at: str = "sweep_end",
    ring_field: str = "rank",
    max_scans: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> Recording:
    """Read the scans of ``paths`` for the sensor ``config`` (its columns, rings and beam table).

    ``poses``: ``odom`` (the odometry topic), ``tf``, a TUM file, or None (the scans without their
    poses: every scan, ``T_world_sensor`` None, the mount from the sensors file); ``progress`` is
    called with the number of scans read so far.
    """
    if stamp_at not in STAMPS_AT:
        raise RecordingError(f"stamp_at {stamp_at!r}: allowed {', '.join(STAMPS_AT)}")
    if mount not in MOUNTS:
        raise RecordingError(f"mount {mount!r}: allowed {', '.join(MOUNTS)}")
    table = beam_table(config)
    with BagSource(paths) as source:
        cloud_topic = source.topic_of_type(POINTCLOUD2, topic, "cloud")
        raw_clouds = []
        for raw in source.clouds(cloud_topic):
            raw_clouds.append(raw)
            if max_scans is not None and len(raw_clouds) >= max_scans:
                break
        if not raw_clouds:
            raise RecordingError(f"recording {', '.join(map(str, source.paths))}: topic {cloud_topic} has no clouds")
        frames = sorted({r.frame_id for r in raw_clouds})
        if len(frames) != 1:
            raise RecordingError(f"topic {cloud_topic}: clouds in several frames {frames}; expected one")
        if poses is None:
            T_base_sensor, vehicle = sensors_mount(config), None
        else:
            T_base_sensor, vehicle = _vehicle_poses(source, poses, frames[0], mount, config)
    return _assemble(raw_clouds, table, config, vehicle, T_base_sensor, cloud_topic, stamp_at, ring_field, progress)


def _assemble(
    raw_clouds, table, config, vehicle: VehiclePoses | None, T_base_sensor, topic, stamp_at, ring_field, progress
):
    scans: list[RecordedScan] = []
    dropped: list[str] = []
    gaps: list[str] = []
    totals = np.zeros(3, np.int64)
    layouts = set()
    pose_times = vehicle.history.times_s if vehicle is not None else np.zeros(0)
    for i, raw in enumerate(raw_clouds):
        cells = cell_cloud(raw.cloud, table, raw.stamp_ns, ring_field, raw.source)
        layouts.add(cells.layout)
        times = _column_times(cells, raw.stamp_ns, config, stamp_at)
        if vehicle is None:
            totals += (cells.points_in, cells.unassigned, cells.merged)
            scans.append(RecordedScan(i, raw.stamp_ns, cells, times, None, raw.source))
            continue
        coverage = sweep_coverage(pose_times, float(times.min()), float(times.max()))
        where = f"scan {i} (stamp {raw.stamp_ns * 1e-9:.6f} s, {raw.source})"
        if coverage == "gap":
            gaps.append(where)
            continue
        if coverage != "covered":
            dropped.append(f"{where}: {coverage.replace('_', ' ')}")
            continue
        totals += (cells.points_in, cells.unassigned, cells.merged)
        scans.append(
            RecordedScan(i, raw.stamp_ns, cells, times, firing_poses(vehicle, T_base_sensor, times), raw.source)
        )
        if progress is not None:
            progress(len(scans))
    if vehicle is None:
        return Recording(
            scans,
            topic,
            raw_clouds[0].frame_id,
            "+".join(sorted(layouts)),
            "none",
            T_base_sensor,
            [],
            int(totals[0]),
            int(totals[1]),
            int(totals[2]),
        )
    span = f"poses ({vehicle.source}) cover {pose_times[0]:.6f} s to {pose_times[-1]:.6f} s"
    if gaps:
        raise RecordingError(f"{len(gaps)} scans sweep across a pose gap, e.g. {'; '.join(gaps[:5])}; {span}")
    if not scans:
        raise RecordingError(f"no scan of topic {topic} is covered by the poses: {'; '.join(dropped[:5])}; {span}")
    return Recording(
        scans,
        topic,
        raw_clouds[0].frame_id,
        "+".join(sorted(layouts)),
        vehicle.source,
        T_base_sensor,
        dropped,
        int(totals[0]),
        int(totals[1]),
        int(totals[2]),
        vehicle,
        stamp_at,
    )
