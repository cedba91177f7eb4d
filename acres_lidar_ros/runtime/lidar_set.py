"""Several LiDARs over one scene in one process: one ``Tracer`` (the scene and its Embree
structure held once) and one ``Scanner`` per sensors file (``LidarSet``), and the node's loop of
each (``LidarSetLoop``: one ``NodeLoop`` per sensor, fed the same poses).

Each sensor keeps its own topic, frame, mount, schedule (its ``lidar.hz``: scans due at ``k /
hz``, stamped as ``sensor.timing.scan_stamp_ns``), self-return table (``lidar.self_returns``,
checked against its mount) and noise streams: sensor ``i`` scans with seed ``seed + i`` unless
seeds are given, so two identical sensors do not draw the same noise.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from acres_lidar_ros.body.self_returns import sensor_self_table
from acres_lidar_ros.config.sensors import SensorConfig, load_sensor_config
from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.runtime.events import Clock, Event, LogThrottle
from acres_lidar_ros.runtime.loop import LoopOutput, NodeLoop, no_job_inputs
from acres_lidar_ros.runtime.pose_tracker import GroundWatch
from acres_lidar_ros.runtime.scheduler import ScanJob
from acres_lidar_ros.scan.scan_types import Scan, ScanOptions
from acres_lidar_ros.scan.scanner import Scanner
from acres_lidar_ros.sensor.poses import PoseHistory
from acres_lidar_ros.sensor.timing import first_scan_at_or_after, scan_stamp_ns


@dataclass(frozen=True)
class LidarSlot:
    """One sensor of the set: its scanner, topic and frame."""

    name: str
    scanner: Scanner
    topic: str
    frame_id: str

    @property
    def config(self) -> SensorConfig:
        return self.scanner.config


class LidarSet:
    """N sensors over one scene.

    Parameters
    ----------
    sensors : sensors files or shipped names (or loaded ``SensorConfig``)
    tracer : the scene's ``Tracer``, shared by every scanner
    options : scan options of every sensor (its ``seed`` is the base seed)
    seeds : one seed per sensor (default ``options.seed + i``)
    """

    def __init__(
        self,
        sensors: Sequence[str | Path | SensorConfig],
        tracer: Any,
        options: ScanOptions | None = None,
        seeds: Sequence[int] | None = None,
    ) -> None:
        if not sensors:
            raise ConfigError("a LiDAR set needs at least one sensors file")
        if seeds is not None and len(seeds) != len(sensors):
            raise ConfigError(f"{len(seeds)} seeds for {len(sensors)} sensors: give one seed per sensor")
        options = options or ScanOptions()
        self.tracer = tracer
        self.slots: list[LidarSlot] = []
        for i, sensor in enumerate(sensors):
            config = sensor if isinstance(sensor, SensorConfig) else load_sensor_config(sensor)
            seed = options.seed + i if seeds is None else int(seeds[i])
            sensor_options = replace(options, seed=seed)
            table = sensor_self_table(config) if sensor_options.self_returns else None
            scanner = Scanner(config, options=sensor_options, tracer=tracer, self_table=table)
            name = Path(config.source).stem if config.source else f"sensor{i}"
            self.slots.append(LidarSlot(name, scanner, config.topic, config.frame_id))
        for what in ("topic", "frame_id"):
            seen: dict[str, str] = {}
            for slot in self.slots:
                value = getattr(slot, what)
                if value in seen:
                    raise ConfigError(
                        f"sensors {seen[value]!r} and {slot.name!r} both have lidar.{what} {value!r}: each sensor of "
                        f"a set needs its own (an overlay with another lidar.{what})"
                    )
                seen[value] = slot.name

    def due_stamps_ns(self, slot: LidarSlot, start_s: float, end_s: float) -> list[int]:
        """The stamps of ``slot``'s scans whose sweep lies in ``[start_s, end_s]`` (its own schedule)."""
        config = slot.config
        start_ns = int(round(start_s * 1e9))
        first = first_scan_at_or_after(start_ns + int(round(config.period_s * 1e9)), config.hz)
        stamps = []
        k = first
        while (stamp := scan_stamp_ns(k, config.hz)) <= int(round(end_s * 1e9)):
            stamps.append(stamp)
            k += 1
        return stamps

    def scans(self, poses: PoseHistory, start_s: float, end_s: float) -> list[tuple[LidarSlot, Scan]]:
        """Every sensor's scans over ``[start_s, end_s]`` of ``poses``, in stamp order (ties in
        the set's order)."""
        jobs = [(stamp, i) for i, slot in enumerate(self.slots) for stamp in self.due_stamps_ns(slot, start_s, end_s)]
        return [(self.slots[i], self.slots[i].scanner.scan(poses, stamp)) for stamp, i in sorted(jobs)]


def check_set_start_up(settings: Mapping[str, Any], overrides: Mapping[str, Any]) -> None:
    """The node's start-up check of a set (its ``lidar_set`` parameter, ``settings`` its own
    parameters' values, ``overrides`` the start-up values given, rclpy ``Parameter``s or plain):
    refuse what is one sensor's: a ``lidar.<key>`` (each sensor's keys come from its own file),
    ``sensors`` beside it, and a ``topic``, ``truth`` or ``packets`` (one topic, one truth topic,
    one packet stream). Raises ``ConfigError`` naming the parameter, its value and what to do."""
    for name, value in overrides.items():
        if name.startswith("lidar."):
            raise ConfigError(
                f"{name} = {getattr(value, 'value', value)!r} with lidar_set: each sensor's keys come from its own sensors file; "
                f'write the key in an overlay ({{"extends": "FILE", "lidar": {{...}}}}) and list the overlay in lidar_set'
            )
    if "sensors" in overrides:
        raise ConfigError(
            f"sensors = {getattr(overrides['sensors'], 'value', overrides['sensors'])!r} and lidar_set = {list(settings['lidar_set'])!r}: give "
            "sensors for one LiDAR or lidar_set for several, not both"
        )
    for name, one_sensors in (("topic", ""), ("truth", False), ("packets", "")):
        if settings[name] != one_sensors:
            raise ConfigError(
                f"{name} = {settings[name]!r} with lidar_set: allowed only for one sensor (each sensor of a set "
                f"publishes on its own lidar.topic); leave {name} unset, or run that sensor in a node of its own"
            )


POSE_SAMPLE_KINDS = ("duplicate", "out_of_order", "time_jump", "jump", "acceleration", "invalid", "wrong_frame")
"""What each loop's ``PoseTracker`` says of one odometry sample (``IngestResult.kind``, other than
``accepted``): the same for every sensor of a set, so said once, by the first."""


class LidarSetLoop:
    """One ``NodeLoop`` per scanner, all fed the same poses and ticks: what ``lidar_node`` runs
    (one loop for one sensor, N with ``lidar_set``), ROS-free.

    Each loop keeps its sensor's schedule (its ``lidar.hz`` and ``delay_s``), pose history, scan
    numbers, diagnostics and log throttle; the loops share the clock and, through their scanners,
    the one ``Tracer``. The pose checks are the same for every sensor, so the events of a pose
    sample come from the first loop only (every loop counts them), and the terrain check (``ground``)
    runs in the first loop only.

    Parameters
    ----------
    scanners : one per sensor (``LidarSet.slots``' scanners, or the one sensor's)
    clock : ROS time, ns
    pack : callable (i, ShapedScan, ScanJob) -> message, for sensor ``i`` (``NodeLoop``'s ``pack``)
    emit : callable (i, LoopOutput) -> None, from a worker of sensor ``i``
    job_inputs : callable (i, ScanJob) -> (boxes, events), optional
    executor : callable () -> Executor or None, called once per loop (None: each loop's own pool)
    ground : GroundWatch, optional, given to the first loop
    throttle : callable () -> LogThrottle, optional, called once per loop
    ts_first_point : one bool for every loop, or one per loop (each sensor's point type's stamp rule)
    **options : the other keyword arguments of ``NodeLoop``, the same for every loop
    """

    def __init__(
        self,
        scanners: Sequence[Scanner],
        clock: Clock,
        pack: Callable[[int, Any, ScanJob], Any],
        emit: Callable[[int, LoopOutput], None],
        *,
        job_inputs: Callable[[int, ScanJob], tuple[Sequence[Any], list[Event]]] | None = None,
        executor: Callable[[], Executor | None] = lambda: None,
        ground: GroundWatch | None = None,
        throttle: Callable[[], LogThrottle] | None = None,
        ts_first_point: bool | Sequence[bool] = False,
        **options: Any,
    ) -> None:
        if not scanners:
            raise ConfigError("a LiDAR set needs at least one sensor")
        firsts = [ts_first_point] * len(scanners) if isinstance(ts_first_point, bool) else list(ts_first_point)
        self.loops: list[NodeLoop] = []
        for i, scanner in enumerate(scanners):
            self.loops.append(
                NodeLoop(
                    scanner,
                    clock,
                    partial(pack, i),
                    partial(emit, i),
                    job_inputs=no_job_inputs if job_inputs is None else partial(job_inputs, i),
                    executor=executor(),
                    ground=ground if i == 0 else None,
                    throttle=None if throttle is None else throttle(),
                    ts_first_point=bool(firsts[i]),
                    **options,
                )
            )

    def on_pose(self, *sample: Any) -> list[LoopOutput]:
        """``NodeLoop.on_pose`` of every loop (a sample's own events from the first only)."""
        outs = [loop.on_pose(*sample) for loop in self.loops]
        for out in outs[1:]:
            out.events = [e for e in out.events if e.kind not in POSE_SAMPLE_KINDS]
        return outs

    def tick(self) -> list[LoopOutput]:
        return [loop.tick() for loop in self.loops]

    def next_wakeup_ns(self) -> int | None:
        times = [t for t in (loop.next_wakeup_ns() for loop in self.loops) if t is not None]
        return min(times) if times else None

    def set_options(self, **options: Any) -> None:
        """Scan options (rain, noise, ...) of every sensor, between two scans."""
        for loop in self.loops:
            loop.set_options(**options)

    def diagnostics(self, window_s: float = 1.0) -> list[tuple[str, str, list[tuple[str, str]]]]:
        return [loop.diagnostics(window_s) for loop in self.loops]

    def close(self) -> None:
        for loop in self.loops:
            loop.close()
