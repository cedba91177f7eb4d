"""Several LiDARs over one scene in one process: one ``Tracer`` (the scene and its Embree
structure held once) and one ``Scanner`` per sensors file.

Each sensor keeps its own topic, frame, mount, schedule (its ``lidar.hz``: scans due at ``k /
hz``, stamped as ``sensor.timing.scan_stamp_ns``), self-return table (``lidar.self_returns``,
checked against its mount) and noise streams: sensor ``i`` scans with seed ``seed + i`` unless
seeds are given, so two identical sensors do not draw the same noise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from acres_lidar_ros.body.self_returns import sensor_self_table
from acres_lidar_ros.config.sensors import SensorConfig, load_sensor_config
from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.scan import Scan, Scanner, ScanOptions
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
