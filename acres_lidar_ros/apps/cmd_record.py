"""Runs without ROS: one scan at a pose, or a recorded drive (rosbag2 + files).

These are the library functions behind ``acres-lidar scan`` and ``acres-lidar record``. They take
a sensor config, a scene and poses, and write into a new run directory: the effective
configuration, the scan files, ``lidar.jsonl``, ``episode.json`` and (for a drive) the bag and
the ground-truth trajectory.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy.spatial.transform import Rotation

from acres_lidar_ros.config.sensors import SensorConfig
from acres_lidar_ros.errors import OutputError
from acres_lidar_ros.outputs.files import make_directory
from acres_lidar_ros.outputs.json_files import append_jsonl, jsonable, write_json
from acres_lidar_ros.outputs.point_types import PROFILES, PointProfile
from acres_lidar_ros.outputs.scan_files import PREVIEW_RANGE_M
from acres_lidar_ros.scan.scan_types import Scan, ScanOptions
from acres_lidar_ros.scan.scanner import Scanner
from acres_lidar_ros.scene.instances import InstanceTable, instance_table

if TYPE_CHECKING:
    from acres_lidar_ros.outputs.shaping import ShapedScan
from acres_lidar_ros.sensor.pattern import mount_rotation
from acres_lidar_ros.sensor.poses import PoseHistory, sweep_coverage
from acres_lidar_ros.sensor.timing import first_scan_at_or_after, scan_stamp_ns

FILE_CHOICES = ("pcd", "ply", "both", "none")


def prepare_run_dir(out_dir: Path) -> Path:
    """Create ``out_dir`` (and ``out_dir/lidar``); refuse a path that exists and is not empty."""
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise OutputError(f"output directory {out_dir} exists and is not a directory; give a new --out path")
    try:
        taken = out_dir.exists() and any(out_dir.iterdir())
    except OSError as error:
        raise OutputError(f"output directory {out_dir} cannot be listed: {error.strerror or error}") from error
    if taken:
        raise OutputError(f"output directory {out_dir} exists and is not empty; give a new --out path")
    make_directory(out_dir / "lidar", "output directory")
    return out_dir


def write_effective_config(out_dir: Path, config: SensorConfig, options: ScanOptions, run: dict) -> None:
    """The run's effective configuration beside its results."""
    write_json(out_dir / "config.json", jsonable({"sensors": config.effective, "options": asdict(options), "run": run}))


def run_instances(scanner: Scanner, vehicle_object_ids: Sequence[int] = ()) -> InstanceTable:
    """The instance table of a run of ``scanner``: its scene's objects, the vehicle boxes of
    ``vehicle_object_ids`` (the box tracks' ``object_id``), the body when the scans have its self
    returns and the clutter when they have rain or fog clutter (``scene.instances``)."""
    clutter = scanner.options.radiometry and scanner.options.weather_on(scanner.config) and scanner.model.has_clutter
    return instance_table(
        scanner.tracer.scene, vehicle_object_ids, body=scanner.applied_self_table is not None, clutter=clutter
    )


def write_scan_outputs(
    scan: Scan,
    out_dir: Path,
    files: str,
    config: SensorConfig,
    cloud: np.ndarray | None = None,
    pose_coverage: str = "covered",
    shaped: ShapedScan | None = None,
    labels: bool = False,
    preview_range_m: float = PREVIEW_RANGE_M,
) -> dict:
    """The scan's point files (``pcd``, ``ply``, ``both``; ``none`` writes no point file and no
    preview), its truth file when it has its cell truth (``--truth``), and then its
    ``lidar.jsonl`` row, appended once the files exist. ``cloud`` is the PCD's cloud
    (``layouts.point_cloud``); default the spec's organised ``XYZI``; ``shaped`` the scan in its
    output frame for the PLY (``shaping.shape_scan``). With ``labels`` the PLY file
    carries each point's instance label; ``preview_range_m`` is the preview's range (m)."""
    from acres_lidar_ros.outputs.records import scan_row
    from acres_lidar_ros.outputs.scan_files import write_scan_files, write_truth_file

    if files == "none":
        names = [] if scan.truth is None else [write_truth_file(out_dir, scan).relative_to(out_dir).as_posix()]
        row = scan_row(scan, delay_s=config.delay_s, period_s=config.period_s, files=names, pose_coverage=pose_coverage)
        append_jsonl(out_dir / "lidar.jsonl", row)
        return row
    return write_scan_files(
        out_dir,
        scan,
        files,
        delay_s=config.delay_s,
        period_s=config.period_s,
        cloud=cloud,
        pose_coverage=pose_coverage,
        shaped=shaped,
        labels=labels,
        preview_range_m=preview_range_m,
    )


def whole_output(scanner: Scanner, scan: Scan, poses: PoseHistory) -> ShapedScan:
    """The whole scan in the output frame and coordinates of the sensors file's output keys
    (``shaping.shape_scan``; the world is the odometry frame ``odom``)."""
    from acres_lidar_ros.outputs.shaping import shape_scan

    config = scanner.config
    return shape_scan(
        scan, config.outputs, poses, scanner.pattern.T_base_sensor, world_frame_id="odom", period_s=config.period_s
    )


def body_twist(
    times_s: np.ndarray, positions_m: np.ndarray, quaternions_xyzw: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Linear and angular velocity in the body frame from sampled poses (central differences).

    Returns two (n, 3) arrays: ``R^T dp/dt`` and the rotation vector rate of ``R_i^T R_{i+1}``.
    """
    n = len(times_s)
    if n < 2:
        return np.zeros((n, 3)), np.zeros((n, 3))
    rotations = Rotation.from_quat(quaternions_xyzw)
    velocity_world = np.gradient(positions_m, times_s, axis=0)
    linear = rotations.inv().apply(velocity_world)
    step = (rotations[:-1].inv() * rotations[1:]).as_rotvec() / np.diff(times_s)[:, None]
    angular = np.vstack([step, step[-1:]])
    return linear, angular


@dataclass
class RecordSummary:
    scans: int
    points: int
    seconds: float
    sim_seconds: float
    lidar_busy: int = 0
    stopped: bool = False  # ended early by ``should_stop``
    held_first_pose: int = 0  # scans whose sweep began before the trajectory (flagged in lidar.jsonl)
    across_pose_gap: int = 0  # scans interpolated across a pose gap over MAX_POSE_GAP_S (flagged)
    before_time_zero: int = 0  # scans left out: their header stamp (the sweep start) would be < 0 s
    packets: int = 0  # the sensor's own packets written or sent (``--packets``)
    scans_without_packets: int = 0  # their sweep began before 0 s: no UNIX time for their packets

    @property
    def real_time_factor(self) -> float:
        return self.sim_seconds / self.seconds if self.seconds > 0 else math.inf

    def line(self) -> str:
        flagged = [
            f"{n} {what}"
            for n, what in (
                (self.held_first_pose, "holding the first pose"),
                (self.across_pose_gap, "across a pose gap"),
            )
            if n
        ]
        return (
            f"{self.scans} scans{' (' + ', '.join(flagged) + ')' if flagged else ''}, {self.points} points, "
            f"{self.seconds:.1f} s for {self.sim_seconds:.1f} s of driving, real-time factor {self.real_time_factor:.1f}x"
            + (f", {self.packets} sensor packets" if self.packets else "")
            + (f" (none for {self.scans_without_packets} scan swept before 0 s)" if self.scans_without_packets else "")
        )


def single_scan(
    scanner: Scanner,
    T_world_base: np.ndarray,
    out_dir: Path,
    files: str = "both",
    run: dict | None = None,
    profile: PointProfile = PROFILES["XYZI"],
    labels: bool = False,
    preview_range_m: float = PREVIEW_RANGE_M,
) -> Scan:
    """One scan with the sensor at rest at ``T_world_base`` (4, 4), written into a new run dir;
    its PCD file in ``profile``'s layout (``layouts.point_cloud``). With ``labels`` the PLY file
    has each point's instance label and ``episode.json`` the instance table (``run_instances``)."""
    from acres_lidar_ros.outputs.layouts import point_cloud
    from acres_lidar_ros.outputs.records import episode_dict

    profile.dtype_in(scanner.config.outputs.coordinates)  # fails before the run dir exists
    out_dir = prepare_run_dir(out_dir)
    write_effective_config(out_dir, scanner.config, scanner.options, run or {})
    position = T_world_base[:3, 3]
    quaternion = Rotation.from_matrix(T_world_base[:3, :3]).as_quat()
    poses = PoseHistory.from_arrays(np.zeros(1), position[None], quaternion[None], where="--pose")
    stamp_ns = int(round(scanner.config.period_s * 1e9))
    scan = scanner.scan(poses, stamp_ns)
    shaped = whole_output(scanner, scan, poses)
    header_ns = shaped.header_stamp_ns(profile.stamps_sweep_start(False))
    cloud = point_cloud(shaped, profile, header_ns)
    write_scan_outputs(
        scan, out_dir, files, scanner.config, cloud, shaped=shaped, labels=labels, preview_range_m=preview_range_m
    )
    instances = run_instances(scanner) if labels else None
    episode = episode_dict(scans=1, lidar_busy=0, material_table=scanner.config.materials, instances=instances)
    write_json(out_dir / "episode.json", episode)
    return scan


def drive_stamps_ns(
    config: SensorConfig, trajectory: PoseHistory, duration_s: float | None, profile: PointProfile
) -> tuple[list[int], int, float, float]:
    """The stamps of a drive's scans (ns), how many due scans are left out before time zero, and
    the drive's start and end on the trajectory (s).

    Scans are due at t = 0 and each period from the trajectory's start, stamped on the first
    physics step at or after (spec "Scan Stamp"). The scan at t = 0 sweeps the period before the
    first pose: it holds that pose, as the spec says, and is flagged (pose_coverage) and counted.
    A layout stamped at the sweep start (velodyne, ouster, ...) cannot stamp the scan due at a
    trajectory start of 0 s, since ROS time has no negative stamps: that scan is left out (counted).
    With ``partial_output`` the slices are stamped inside the sweep, so a sweep starting before 0
    is left out too. ``lidar.enabled`` false gives no stamps (odometry, /tf and /clock only).
    """
    t_start, t_end = trajectory.start_s, trajectory.end_s
    if duration_s is not None:
        t_end = min(t_end, t_start + duration_s)
    if not config.enabled:
        return [], 0, t_start, t_end
    start_ns = int(round(t_start * 1e9))
    last_k = first_scan_at_or_after(int(round((t_end - t_start) * 1e9)) + 1, config.hz) - 1
    stamps_ns = [start_ns + scan_stamp_ns(k, config.hz) for k in range(last_k + 1)]
    period_s = config.period_s
    sweep_ns = int(round(period_s * 1e9)) if config.outputs.partial_output else 0
    before_zero = sum(profile.header_stamp_ns(s, period_s) < 0 or s - sweep_ns < 0 for s in stamps_ns)
    return stamps_ns[before_zero:], before_zero, t_start, t_end


@dataclass
class DriveStreams:
    """A drive's odometry samples (the trajectory's own times in the run) and, with an IMU, its
    samples, written to the bag in time order as the scans go out.

    ``samples_written`` and ``imu_written`` count what is in the bag so far (the writer thread
    advances them; the trajectory file at the end has the odometry samples written).
    """

    times_s: np.ndarray
    stamps_ns: np.ndarray
    positions_m: np.ndarray
    quaternions_xyzw: np.ndarray
    linear_m_s: np.ndarray
    angular_rad_s: np.ndarray
    imu: Any = None  # sensor.imu's samples, or None
    imu_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    samples_written: int = 0
    imu_written: int = 0

    @classmethod
    def of_drive(
        cls, trajectory: PoseHistory, t_start: float, t_end: float, imu_config: Any, seed: int
    ) -> DriveStreams:
        """The samples of ``trajectory`` in ``[t_start, t_end]`` with their body twist, and the IMU
        samples of ``imu_config`` (an ``ImuConfig``, or None) made from them (``sensor.imu``)."""
        times = trajectory.times_s
        times_s = times[(times >= t_start) & (times <= t_end)]
        positions, rotations = trajectory.interpolate(times_s)
        quaternions = Rotation.from_matrix(rotations).as_quat()
        linear, angular = body_twist(times_s, positions, quaternions)
        streams = cls(times_s, np.rint(times_s * 1e9).astype(np.int64), positions, quaternions, linear, angular)
        if imu_config is not None:
            from acres_lidar_ros.sensor.imu import imu_of_drive

            streams.imu = imu_of_drive(imu_config, times_s, positions, quaternions, int(seed))
            streams.imu_ns = np.rint(streams.imu.times_s * 1e9).astype(np.int64)
        return streams

    def write_up_to(self, bag: Any, until_ns: int) -> None:
        """The clock, odometry and IMU messages stamped up to ``until_ns`` not yet in ``bag``."""
        i = self.samples_written
        while i < len(self.stamps_ns) and self.stamps_ns[i] <= until_ns:
            t_ns = int(self.stamps_ns[i])
            bag.write_clock(t_ns)
            bag.write_base_pose(
                t_ns, self.positions_m[i], self.quaternions_xyzw[i], self.linear_m_s[i], self.angular_rad_s[i]
            )
            i += 1
        self.samples_written = i
        j, s = self.imu_written, self.imu
        while s is not None and j < len(self.imu_ns) and self.imu_ns[j] <= until_ns:
            bag.write_imu(
                int(self.imu_ns[j]), s.orientation_xyzw[j], s.angular_velocity_rad_s[j], s.linear_acceleration_m_s2[j]
            )
            j += 1
        self.imu_written = j


@dataclass
class ScanWriter:
    """Writes one traced scan of a drive (``record_drive``'s writer thread calls it): the odometry
    up to the cloud's release and the cloud (or, with ``partial_output``, each slice at its own
    release) in the bag, flushed; then the sensor packets, the scan's files and its
    ``lidar.jsonl`` row, and the summary's counts."""

    scanner: Scanner
    trajectory: PoseHistory
    out_dir: Path
    profile: PointProfile
    files: str
    labels: bool
    preview_range_m: float
    streams: DriveStreams
    summary: RecordSummary
    reserve: Any  # apps.disk_reserve.DiskReserve
    packet_sink: Any = None
    n_scans: int = 0
    t_start_s: float = 0.0
    progress: Callable[[int, int], None] | None = None

    def __call__(self, bag: Any, scan: Scan, release_ns: int, pose_coverage: str) -> None:
        from acres_lidar_ros.outputs.layouts import point_cloud
        from acres_lidar_ros.outputs.shaping import slice_scan

        config, summary = self.scanner.config, self.summary
        # Messages in time order: the odometry up to the cloud's release, then the cloud.
        if not config.outputs.partial_output:
            self.streams.write_up_to(bag, release_ns)
        shaped = whole_output(self.scanner, scan, self.trajectory)  # the output keys of the sensors file
        sweep_start = self.profile.stamps_sweep_start(False)
        cloud = point_cloud(shaped, self.profile, shaped.header_stamp_ns(sweep_start))  # the bag's and the PCD's
        bag_bytes = bag.size_bytes
        if config.outputs.partial_output:  # the slices on /lidar/points, the whole scan in the files
            # Each slice when the node publishes it: at its own end + delay_s, while the sweep runs.
            delay_ns = int(round(config.delay_s * 1e9))
            for part in slice_scan(shaped, config.outputs.partial_slices, config.period_s):
                part_ns = part.header_stamp_ns(sweep_start)
                part_release_ns = part.end_ns + delay_ns
                self.streams.write_up_to(bag, part_release_ns)
                part_cloud = point_cloud(part, self.profile, part_ns)
                bag.write_cloud(part_ns, part_cloud, log_time_ns=part_release_ns, frame_id=part.frame_id)
        else:
            bag.write_cloud(
                shaped.header_stamp_ns(sweep_start), cloud, log_time_ns=release_ns, frame_id=shaped.frame_id
            )
        bag.flush()  # on the disk before the jsonl row says the scan is complete
        if self.packet_sink is not None:
            summary.packets += self.packet_sink.write_scan(scan, bag)
            summary.scans_without_packets = self.packet_sink.scans_before_zero
        row = write_scan_outputs(
            scan,
            self.out_dir,
            self.files,
            config,
            cloud,
            pose_coverage,
            shaped=shaped,
            labels=self.labels,
            preview_range_m=self.preview_range_m,
        )
        file_bytes = sum((self.out_dir / name).stat().st_size for name in row["files"])
        self.reserve.note_scan(bag.size_bytes - bag_bytes + file_bytes + 4096)
        summary.held_first_pose += pose_coverage == "before_first_pose"
        summary.across_pose_gap += pose_coverage == "gap"
        summary.scans += 1
        summary.points += int(scan.returns.valid.sum())
        summary.sim_seconds = scan.stamp_s - self.t_start_s
        if self.progress is not None:
            self.progress(summary.scans, self.n_scans)

    def trace_all(
        self,
        bag: Any,
        writer: ThreadPoolExecutor,
        stamps_ns: Sequence[int],
        boxes_at: Callable[[float], Iterable] | None,
        should_stop: Callable[[], bool] | None,
    ) -> str | None:
        """Trace the scan of each stamp and hand it to ``writer`` (at most two scans wait; a writer
        error stops the drive here), then the odometry to the end. Before each scan ``should_stop()``
        is asked and the disk reserve checked; either stops the drive (``summary.stopped``), and a
        short reserve is returned as its message (None otherwise)."""
        config, summary, streams = self.scanner.config, self.summary, self.streams
        sweep_s = config.period_s if self.scanner.options.motion_on(config) else 0.0
        delay_ns = int(round(config.delay_s * 1e9))
        pending: deque = deque()
        disk_full: str | None = None
        for stamp_ns in stamps_ns:
            if should_stop is not None and should_stop():
                summary.stopped = True
                break
            disk_full = self.reserve.shortage(len(pending) + 1, summary.scans + len(pending), len(streams.stamps_ns))
            if disk_full is not None:
                summary.stopped = True
                break
            boxes = tuple(boxes_at(stamp_ns * 1e-9)) if boxes_at is not None else ()
            scan = self.scanner.scan(self.trajectory, stamp_ns, boxes=boxes)
            coverage = sweep_coverage(self.trajectory.times_s, stamp_ns * 1e-9 - sweep_s, stamp_ns * 1e-9)
            pending.append(writer.submit(self, bag, scan, stamp_ns + delay_ns, coverage))
            while len(pending) > 2 or (pending and pending[0].done()):
                pending.popleft().result()
        while pending:
            pending.popleft().result()
        if not summary.stopped:
            streams.write_up_to(bag, int(streams.stamps_ns[-1]))
        return disk_full


def record_drive(
    scanner: Scanner,
    trajectory: PoseHistory,
    out_dir: Path,
    duration_s: float | None = None,
    profile: PointProfile = PROFILES["XYZI"],
    files: str = "pcd",
    boxes_at: Callable[[float], Iterable] | None = None,
    run: dict | None = None,
    progress: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    labels: bool = False,
    vehicle_object_ids: Sequence[int] = (),
    packets: Callable[[Path], Any] | None = None,
    imu: str | None = None,
    preview_range_m: float = PREVIEW_RANGE_M,
) -> RecordSummary:
    """Drive ``trajectory`` and record every scan into a new run directory.

    Scans are due at t = 0 and every period from the trajectory's start, each stamped on the
    first 1/120 s physics step at or after its due time (``sensor.timing.scan_stamp_ns``); each
    ends its sweep at its stamp and is traced column by column from the pose at that column's
    firing time. Honest pose coverage: the scan due at t = 0 sweeps the period before the first
    pose and holds that pose, as the spec says; it is flagged in its ``lidar.jsonl`` row
    (``sweep.pose_coverage: before_first_pose``) and counted in ``episode.json``
    (``scans_held_first_pose``), as is a scan interpolated across a trajectory gap longer than
    ``sensor.poses.MAX_POSE_GAP_S`` (``gap``, ``scans_across_pose_gap``). The bag gets
    ``/lidar/points`` (``profile``'s layout, stamped as ``PointProfile.header_stamp_ns``: the end of
    the sweep, or its start for the profiles with relative point times), ``/tf``, ``/tf_static``,
    ``/odom`` and ``/clock``; the PCD files have the same layout. ``trajectory_gt.tum`` gets the
    ground-truth base_footprint poses. The bag is closed, readable, on any error or Ctrl-C.

    Nothing completed is lost: each scan's cloud and the odometry before it are flushed to the
    disk (``BagWriter.flush``) before its files are written and its ``lidar.jsonl`` row is
    appended, so after a kill, a power cut or a full disk every scan the jsonl lists is in the
    bag (``acres-lidar bag-repair`` rebuilds its summary and metadata).

    ``should_stop()`` is asked before each scan (the CLI's signal flag); when it answers True,
    the scans handed to the writer are finished, the bag is closed, and the summary says
    ``stopped``. Before each scan the free disk space is checked too (``DiskReserve``): short of
    room for the next scans and the end of the run, the drive stops the same way, closes the bag
    and its files whole and then raises ``OutputError`` saying so.

    ``packets(out_dir)`` (``apps.packet_flags.packet_sink``) opens a sink of the sensor's own
    packets (a pcap file published whole at the end, or a live UDP stream); each scan goes to it
    after its cloud is in the bag.

    ``boxes_at(t_s)`` gives the other vehicles' boxes at a scan stamp (``box_tracks``).
    ``progress(done, total)`` is called after each scan. With ``labels`` the PLY files carry each
    point's instance label and ``episode.json`` the instance table (``run_instances``, with the
    boxes' tracks of ``vehicle_object_ids``); the clouds' layout stays ``profile``'s.

    With ``imu`` (an IMU file, or ``"default"`` for the shipped ``config/imu.json``) the bag also
    has sensor_msgs/Imu on the file's topic at its rate, made from the same trajectory samples
    as the odometry (``sensor.imu``), stamped on the same clock as the scans, its noise drawn
    from the scan options' seed; its mount joins the LiDAR's on ``/tf_static``.
    """
    from acres_lidar_ros.apps.disk_reserve import DiskReserve, scan_bytes
    from acres_lidar_ros.outputs.bag import BagWriter

    config = scanner.config
    # Spherical coordinates in a profile without them fail before the run dir exists.
    point_bytes = profile.dtype_in(config.outputs.coordinates).itemsize
    instances = run_instances(scanner, vehicle_object_ids) if labels else None  # bad ids fail before the run dir
    imu_config = None
    if imu is not None:  # a bad IMU file fails before the run dir too
        from acres_lidar_ros.config.imu_file import load_imu_config

        imu_config = load_imu_config(imu)
    out_dir = prepare_run_dir(out_dir)
    write_effective_config(out_dir, config, scanner.options, run or {})
    packet_sink = packets(out_dir) if packets is not None else None
    stamps_ns, before_zero, t_start, t_end = drive_stamps_ns(config, trajectory, duration_s, profile)
    streams = DriveStreams.of_drive(trajectory, t_start, t_end, imu_config, scanner.options.seed)
    summary = RecordSummary(scans=0, points=0, seconds=0.0, sim_seconds=0.0, before_time_zero=before_zero)
    reserve = DiskReserve(out_dir, scan_bytes(config.columns * config.rings, point_bytes, files))
    scan_writer = ScanWriter(
        scanner=scanner,
        trajectory=trajectory,
        out_dir=out_dir,
        profile=profile,
        files=files,
        labels=labels,
        preview_range_m=preview_range_m,
        streams=streams,
        summary=summary,
        reserve=reserve,
        packet_sink=packet_sink,
        n_scans=len(stamps_ns),
        t_start_s=t_start,
        progress=progress,
    )
    started = time.perf_counter()
    try:
        # One writer thread writes scan k while scan k + 1 is traced; at most two scans wait.
        # Leaving the block (also on Ctrl-C) waits for the writes already handed over, then
        # closes the bag.
        with (
            packet_sink if packet_sink is not None else nullcontext(),
            BagWriter(
                out_dir / "bag",
                profile,
                lidar_frame=config.frame_id,
                cloud_topic=config.topic,
                imu_topic=None if imu_config is None else imu_config.topic,
                imu_frame="imu_link" if imu_config is None else imu_config.frame_id,
            ) as bag,
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="lidar-writer") as writer,
        ):
            mount_quaternion = Rotation.from_matrix(scanner.pattern.R_base_sensor).as_quat()
            imu_mount = None
            if imu_config is not None:
                imu_mount = (
                    imu_config.position_flu_m,
                    Rotation.from_matrix(mount_rotation(imu_config.rpy_rad)).as_quat(),
                )
            bag.write_static_mount(
                int(streams.stamps_ns[0]), scanner.pattern.t_base_sensor_m, mount_quaternion, imu_mount
            )
            disk_full = scan_writer.trace_all(bag, writer, stamps_ns, boxes_at, should_stop)
    except BaseException as error:
        summary.seconds = time.perf_counter() - started
        try:
            _write_run_end(out_dir, summary, streams, config, instances)
        except OutputError as late:
            error.add_note(f"writing the run's last files also failed: {late}")
        if isinstance(error, OutputError) and not (out_dir / "bag" / "metadata.yaml").exists():
            error.add_note(
                f"the {summary.scans} scans listed in {out_dir / 'lidar.jsonl'} are in the bag; "
                f"once there is space, `acres-lidar bag-repair {out_dir}` makes it readable"
            )
        raise
    summary.seconds = time.perf_counter() - started
    _write_run_end(out_dir, summary, streams, config, instances)
    if disk_full is not None:
        raise OutputError(disk_full)
    return summary


def _write_run_end(
    out_dir: Path,
    summary: RecordSummary,
    streams: DriveStreams,
    config: SensorConfig,
    instances: InstanceTable | None = None,
) -> None:
    """The ground-truth trajectory written so far and ``episode.json`` (at the end of a drive),
    with the run's instance table when it has labels."""
    from acres_lidar_ros.outputs.records import episode_dict
    from acres_lidar_ros.outputs.tum import write_tum

    n = streams.samples_written
    write_tum(out_dir / "trajectory_gt.tum", streams.times_s[:n], streams.positions_m[:n], streams.quaternions_xyzw[:n])
    write_json(
        out_dir / "episode.json",
        episode_dict(
            scans=summary.scans,
            lidar_busy=summary.lidar_busy,
            scans_held_first_pose=summary.held_first_pose,
            scans_across_pose_gap=summary.across_pose_gap,
            scans_before_time_zero=summary.before_time_zero,
            material_table=config.materials,
            instances=instances,
        ),
    )
