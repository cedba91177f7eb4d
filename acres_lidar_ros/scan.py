"""One LiDAR scan (the ``Scan`` every output is made from) and the ``Scanner`` that traces it.

Cells are organised as the real driver lays them out: cell = column x rings + ring.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from acres_lidar_ros.body.self_returns import SelfDecision, SelfReturnTable
from acres_lidar_ros.config.limits import trace_key
from acres_lidar_ros.config.schema import check_option
from acres_lidar_ros.config.sensors import SensorConfig
from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.radiometry.detection import ScanEchoes, finish_returns
from acres_lidar_ros.radiometry.echoes import BeamBlock, prepare_block
from acres_lidar_ros.radiometry.mechanical import block_rays
from acres_lidar_ros.radiometry.model import BeamModel
from acres_lidar_ros.radiometry.noise import NoiseStreams
from acres_lidar_ros.radiometry.returns import Returns, nearest_hit_returns
from acres_lidar_ros.radiometry.windows import CellWindows, firing_angle_rad
from acres_lidar_ros.sensor.pattern import BeamPattern
from acres_lidar_ros.sensor.poses import PoseHistory
from acres_lidar_ros.sensor.rays import sensor_points, world_rays
from acres_lidar_ros.sensor.timing import column_time_offset
from acres_lidar_ros.tracing.hits import Hits

if TYPE_CHECKING:
    from acres_lidar_ros.scene.model import Scene
    from acres_lidar_ros.tracing.trace import Tracer


@dataclass(frozen=True)
class Scan:
    """A finished scan.

    Attributes
    ----------
    index : int
        Scan number in its run, from 0.
    stamp_ns : int
        Scan stamp, ns: the end of the sweep (the last column fires at ``stamp + dt_c`` < stamp).
    columns, rings : int
        ``N_c`` and ``N_r``.
    returns : Returns of shape (columns * rings, R)
    points_sensor : (columns * rings, R, 3) float64
        Point ``p = R d + o`` in the sensor frame at its column's firing time, m; NaN where the
        slot has no return.
    time_offset_s : (columns,) float64
        ``dt_c``: firing time of column ``c`` minus the stamp, s (``-T <= dt_c < 0``; 0 without
        motion distortion).
    ring_rank : (rings,) uint16
        Rank of each ring's elevation, 0 = lowest (rslidar_sdk's ``ring`` field).
    T_world_sensor : (columns, 4, 4) float64
        Sensor pose at each column's firing time (maps sensor coordinates into the world).
    frame_id : str
        Frame name of the cloud.
    weather : dict
        ``rain_mm_per_h`` and ``visibility_m`` the scan was traced with.
    """

    index: int
    stamp_ns: int
    columns: int
    rings: int
    returns: Returns
    points_sensor: np.ndarray
    time_offset_s: np.ndarray
    ring_rank: np.ndarray
    T_world_sensor: np.ndarray
    frame_id: str = "lidar"
    weather: dict = field(default_factory=dict)

    @property
    def stamp_s(self) -> float:
        return self.stamp_ns * 1e-9

    @property
    def cell_column(self) -> np.ndarray:
        """(columns * rings,) uint16: column of each cell."""
        return np.repeat(np.arange(self.columns, dtype=np.uint16), self.rings)

    @property
    def cell_ring(self) -> np.ndarray:
        """(columns * rings,) uint16: ring (driver index) of each cell."""
        return np.tile(np.arange(self.rings, dtype=np.uint16), self.columns)


# ----------------------------------------------------------------------------------------------
# The scanner: rays from the firing poses, the trace, the returns and the points.
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScanOptions:
    """Options of a scan, as ACRES Core's FAcresLidarOptions and the game's command-line flags.

    Attributes
    ----------
    noise : signal and range noise (off: the noise numbers are still drawn, ``-SensorNoNoise``)
    foliage : foliage passes beams with its transmission; False makes it solid
    radiometry : the full radiometric model; False: every in-range nearest hit is a return
    self_returns : apply the self-return table the scanner was given (``Scanner(self_table=...)``)
    motion_distortion : None uses the sensors file; False traces all columns from the stamp pose
    weather : rain and fog (``-SensorLidarNoWeather`` is False)
    rain_mm_per_h, visibility_m : weather at the scan stamp (0 and inf: clear air)
    seed : seed of the noise streams and the hashes
    ideal : no motion distortion and no weather; the noise stays (``-SensorLidarIdeal``)
    """

    noise: bool = True
    foliage: bool = True
    radiometry: bool = True
    self_returns: bool = True
    motion_distortion: bool | None = None
    weather: bool = True
    rain_mm_per_h: float = 0.0
    visibility_m: float = math.inf
    seed: int = 0
    ideal: bool = False

    def __post_init__(self) -> None:
        for name in ("rain_mm_per_h", "visibility_m", "noise", "seed"):
            object.__setattr__(self, name, check_option(name, getattr(self, name)))
        for name in ("foliage", "radiometry", "self_returns", "weather", "ideal"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} = {getattr(self, name)!r}: expected true or false")
        if self.motion_distortion is not None and not isinstance(self.motion_distortion, bool):
            raise ConfigError(f"motion_distortion = {self.motion_distortion!r}: expected true, false or null")

    def weather_on(self, config: SensorConfig) -> bool:
        return self.weather and not self.ideal and config.weather.enabled

    def motion_on(self, config: SensorConfig) -> bool:
        if self.ideal:
            return False
        return config.motion_distortion if self.motion_distortion is None else self.motion_distortion


class Scanner:
    """Traces scans of one sensor over one scene.

    The scene's acceleration structure is built once; each ``scan`` builds the rays of every
    column from the sensor pose at that column's firing time, traces them, forms the returns and
    the points. Scans of one run share the noise streams, so a run is reproducible from its seed
    when its scans are taken in order.

    Parameters
    ----------
    config : SensorConfig
    scene : Scene (``acres_lidar_ros.scene``); ignored when ``tracer`` is given
    options : ScanOptions
    tracer : a ``Tracer`` to reuse (e.g. shared by scanners of one scene)
    self_table : the sensor's self-return table, loaded by the caller (``body.self_returns.sensor_self_table``),
        or None for a sensor without one; applied while ``options.self_returns`` is on
    """

    def __init__(
        self,
        config: SensorConfig,
        scene: Scene | None = None,
        options: ScanOptions = ScanOptions(),
        tracer: Tracer | None = None,
        self_table: SelfReturnTable | None = None,
    ) -> None:
        from acres_lidar_ros.tracing.trace import Tracer

        if tracer is None:
            if scene is None:
                raise ConfigError("Scanner needs a scene or a tracer")
            tracer = Tracer(scene)
        if self_table is not None and (self_table.columns, self_table.rings) != (config.columns, config.rings):
            raise ConfigError(
                f"self_table {str(self_table.path) if self_table.path else ''!r} is for {self_table.columns} columns x "
                f"{self_table.rings} rings; the sensor has {config.columns} x {config.rings}"
            )
        self.config = config
        self.options = options
        self.pattern = BeamPattern.from_config(config)
        self.tracer = tracer
        self._beam_directions = self.pattern.directions_sensor.reshape(-1, 3)
        self._lens_origins = np.repeat(self.pattern.lens_origins_sensor, config.rings, axis=0)
        self.self_table = self_table
        self.streams: NoiseStreams | None = self._new_streams()
        self._model: BeamModel | None = None  # built on first use, again after a change
        self._next_index = 0
        self.timings_ms: dict[str, float] = {}
        self.last_echoes: ScanEchoes | None = None

    # -- configuration ---------------------------------------------------------------------

    def _new_streams(self) -> NoiseStreams | None:
        """The run's noise streams (``noise.NoiseStreams`` of the seed); None without radiometry."""
        return NoiseStreams(self.options.seed) if self.options.radiometry else None

    @property
    def applied_self_table(self) -> SelfReturnTable | None:
        """The self-return table the scans apply: ``self_table`` while ``options.self_returns``."""
        return self.self_table if self.options.self_returns else None

    @property
    def model(self) -> BeamModel:
        """The radiometric model of the current config and options (built on first use and
        again after ``set_options`` or ``set_runtime_config``; the same object until then)."""
        if self._model is None:
            options = self.options
            self._model = BeamModel.build(
                self.config,
                noise=options.noise,
                weather=options.weather and not options.ideal,
                rain_mm_per_h=options.rain_mm_per_h,
                visibility_m=options.visibility_m,
                foliage_solid=not options.foliage,
                windows=CellWindows.build(self.config, self.cell_firing_angle_rad(), self.cell_range_id),
            )
        return self._model

    cell_range_id: np.ndarray | None = None
    """The range region of each beam (its emitter's ``range_id``); None: region 0 for every ring."""

    def cell_firing_angle_rad(self) -> np.ndarray:
        """Seed 004's firing angle of each beam (column azimuth plus ring offset, clockwise from the
        sweep's start, rad): (cells,) float64, what the valid azimuth window is measured on."""
        azimuth = self.pattern.column_azimuth_rad[:, None] + self.config.azimuth_offsets_rad[None, :]
        return firing_angle_rad(azimuth.reshape(-1), self.config.scan_start_azimuth_rad)

    @property
    def windows(self) -> CellWindows:
        """Each beam's validity windows (``radiometry.windows``) under the current config."""
        return self.model.windows or CellWindows.band(self.config, self.config.columns * self.config.rings)

    def set_options(self, **changes: Any) -> None:
        """Change options between scans (validated); a new seed restarts the noise streams."""
        options = replace(self.options, **changes)
        reseed = options.seed != self.options.seed or options.radiometry != self.options.radiometry
        self.options = options
        self._model = None
        if reseed:
            self.streams = self._new_streams()

    def warm_up(self) -> float:
        """Trace one throw-away scan with a copy of this scanner (same tracer, own streams), so
        numba's kernels are compiled (or loaded from its cache) before the first real scan;
        this scanner's noise streams and scan numbers are untouched. Returns the seconds it took."""
        started = time.perf_counter()
        spare = Scanner(self.config, options=self.options, tracer=self.tracer, self_table=self.self_table)
        at_rest = PoseHistory.from_arrays(np.zeros(1), np.zeros((1, 3)), np.array([[0.0, 0.0, 0.0, 1.0]]))
        sweep = spare.start_sweep(int(round(self.config.period_s * 1e9)), index=0)
        half = np.flatnonzero(sweep.firing_time_s <= np.median(sweep.firing_time_s))
        sweep.trace_columns(at_rest, half)  # the block path the node takes, too
        sweep.finish(at_rest)
        return time.perf_counter() - started

    def set_runtime_config(self, overrides: dict) -> None:
        """Change sensors-file keys that need no rebuild (``schema`` marks them ``runtime``)."""
        from acres_lidar_ros.config.schema import LIDAR_PARAM

        fixed = [key for key in overrides if key in LIDAR_PARAM and not LIDAR_PARAM[key].runtime]
        if fixed:
            raise ConfigError(
                f"lidar.{fixed[0]} cannot change while running; runtime keys: "
                + ", ".join(p.name for p in LIDAR_PARAM.values() if p.runtime)
            )
        self.config = self.config.with_overrides(overrides)
        self._model = None

    @property
    def sub_rays(self) -> int:
        return len(self.pattern.sub_ray_weights)

    @property
    def ray_count(self) -> int:
        return self.config.columns * self.config.rings * self.sub_rays

    # -- timing -----------------------------------------------------------------------------

    def time_offsets_s(self) -> np.ndarray:
        """``dt_c`` of each column: (N_c,) float64, zeros without motion distortion."""
        if not self.options.motion_on(self.config):
            return np.zeros(self.config.columns)
        return column_time_offset(
            self.pattern.column_azimuth_rad,
            self.config.scan_start_azimuth_rad,
            self.config.spin_direction,
            self.config.period_s,
        )

    def firing_times_s(self, stamp_ns: int) -> np.ndarray:
        """Absolute firing time of each column, s: (N_c,) float64."""
        return stamp_ns * 1e-9 + self.time_offsets_s()

    def firing_poses(self, poses: PoseHistory, stamp_ns: int, extrapolate: bool = False) -> np.ndarray:
        """``T_world_sensor`` at each column's firing time: (N_c, 4, 4) float64."""
        T_world_base = poses.transforms(self.firing_times_s(stamp_ns), extrapolate=extrapolate)
        return T_world_base @ self.pattern.T_base_sensor

    # -- rays -------------------------------------------------------------------------------

    def rays_world(
        self, T_world_sensor: np.ndarray, columns: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Origins and unit directions of every sub-ray in the world: two (n, 3) float64 arrays.

        ``T_world_sensor`` is (N_c, 4, 4), or (len(columns), 4, 4) for a subset of ``columns``.
        Row ``(c * N_r + r) * S + j`` is sub-ray ``j`` of ring ``r`` of column ``c`` (counting
        only the given columns, in their order).
        """
        per_column = self.config.rings * self.sub_rays
        sub = self.pattern.sub_directions_sensor.reshape(self.config.columns, per_column, 3)
        lens = self.pattern.lens_origins_sensor
        if columns is not None:
            sub, lens = sub[columns], lens[columns]
        return world_rays(np.ascontiguousarray(T_world_sensor), np.ascontiguousarray(sub), np.ascontiguousarray(lens))

    def points_sensor(self, range_m: np.ndarray) -> np.ndarray:
        """``p = R d + o`` of every return slot in the sensor frame: (cells, R, 3) float64 from
        the (cells, R) ranges; NaN where the range is NaN."""
        return sensor_points(range_m, self._beam_directions, self._lens_origins)

    # -- the scan -----------------------------------------------------------------------------

    def start_sweep(self, stamp_ns: int, boxes: Sequence = (), index: int | None = None) -> Sweep:
        """A scan stamped ``stamp_ns`` to be traced column block by column block (``Sweep``)."""
        if index is None:
            index = self._next_index
        self._next_index = index + 1
        return Sweep(self, int(stamp_ns), tuple(boxes), index)

    def scan(
        self,
        poses: PoseHistory,
        stamp_ns: int,
        boxes: Sequence = (),
        index: int | None = None,
        extrapolate: bool = False,
    ) -> Scan:
        """Trace one scan stamped ``stamp_ns`` (end of the sweep) from the poses in ``poses``.

        ``boxes`` are other vehicles (``boxes.VehicleBox``) in the world at this scan.
        ``extrapolate`` continues the last pose for columns that fire after it.
        """
        sweep = self.start_sweep(stamp_ns, boxes, index)
        scan = sweep.finish(poses, extrapolate=extrapolate)
        self.timings_ms, self.last_echoes = sweep.timings_ms, sweep.echoes
        return scan


@dataclass
class _Block:
    """One traced column block of a sweep: its rays, hits and (with radiometry) its beams'
    contributions and echoes, prepared with ``model``."""

    columns: np.ndarray
    cells: np.ndarray
    origins: np.ndarray
    directions: np.ndarray
    hits: Hits
    trace_key: tuple
    beams: BeamBlock | None = None
    model: BeamModel | None = None


class Sweep:
    """One scan traced in column blocks as the pose history covers their firing times.

    The ROS 2 node starts a sweep when the scan is due and calls ``trace_covered`` whenever
    odometry arrives, so when the sweep ends only the columns that fired after the last pose are
    left; ``finish`` traces those and forms the scan. With radiometry, the part that needs only
    a beam's own hits (contributions and echoes: ``echoes.prepare_block``) runs on each block as
    it is traced, and the noise pairs the scan will take are formed ahead
    (``NoiseStreams.draw_ahead``); ``finish`` runs the rest over all beams at once
    (``detection.finish_returns``: clutter, noise draws, detection, returns), because the noise
    and rain streams run over the beams in ring-major order. A block prepared with another model
    than the scanner's at the finish (``set_options``, ``set_runtime_config``), or one whose
    hits were refused, is prepared again there (which raises the refusal). Either way the result
    is the same scan as one ``Scanner.scan`` with the same poses.

    Attributes
    ----------
    timings_ms : dict
        After ``finish``: ``rays_ms``, ``trace_ms``, ``returns_ms`` (the radiometry of the blocks
        while they were traced, and of the finish, and the self returns), ``points_ms``.
    echoes : ScanEchoes or None
        After ``finish`` with radiometry: every echo of the scan after detection.
    """

    def __init__(self, scanner: Scanner, stamp_ns: int, boxes: tuple, index: int) -> None:
        self.scanner = scanner
        self.stamp_ns = stamp_ns
        self.boxes = boxes
        self.index = index
        self.time_offset_s = scanner.time_offsets_s()
        self.firing_time_s = stamp_ns * 1e-9 + self.time_offset_s
        self.traced = np.zeros(scanner.config.columns, dtype=bool)
        self.T_world_sensor = np.empty((scanner.config.columns, 4, 4))
        self._blocks: list[_Block] = []
        self._self_decision: tuple[tuple, SelfDecision] | None = None  # (key, decision) once decided
        self.rays_s = 0.0
        self.trace_s = 0.0
        self.prepare_s = 0.0
        self.timings_ms: dict[str, float] = {}
        self.echoes: ScanEchoes | None = None

    @property
    def done(self) -> bool:
        return bool(self.traced.all())

    def self_decision(self, table: SelfReturnTable) -> SelfDecision:
        """The body's part of this scan from ``table`` (the scanner's ``applied_self_table``;
        ``self_returns.decide_self_returns``), decided once, while the sweep runs; decided again
        if the seed, noise or range noise changed since."""
        scanner = self.scanner
        key = (self.index, scanner.options.seed, scanner.options.noise, scanner.config.std_m)
        if self._self_decision is None or self._self_decision[0] != key:
            from acres_lidar_ros.body.self_returns import decide_self_returns

            decision = decide_self_returns(
                table,
                self.index,
                scanner.options.seed,
                scanner.config.std_m,
                scanner.options.noise,
            )
            self._self_decision = (key, decision)
        return self._self_decision[1]

    def trace_covered(self, poses: PoseHistory, min_columns: int = 1) -> int:
        """Trace the untraced columns that fire at or before the newest pose, if there are at
        least ``min_columns`` of them (a tiny block costs more than it saves); return how many."""
        if not len(poses):
            return 0
        columns = np.flatnonzero(~self.traced & (self.firing_time_s <= poses.end_s))
        if columns.size < max(min_columns, 1):
            return 0
        self.trace_columns(poses, columns)
        return int(columns.size)

    def finish(self, poses: PoseHistory, extrapolate: bool = False) -> Scan:
        """Trace what is left (and blocks traced under another ``trace_key``: a
        runtime change since) and form the scan."""
        scanner = self.scanner
        key = trace_key(scanner.config, scanner.options.foliage, scanner.options.seed)
        for block in [block for block in self._blocks if block.trace_key != key]:
            self.traced[block.columns] = False
            self._blocks.remove(block)
        columns = np.flatnonzero(~self.traced)
        if columns.size:
            self.trace_columns(poses, columns, extrapolate)
        config, options = scanner.config, scanner.options
        t2 = time.perf_counter()
        returns = self._returns()
        table = scanner.applied_self_table
        if table is not None:
            from acres_lidar_ros.body.self_returns import merge_self_returns

            # The returns were just made for this scan and nothing else holds them: merge in place.
            returns = merge_self_returns(table, returns, self.self_decision(table), copy=False)
        t3 = time.perf_counter()
        points = scanner.points_sensor(returns.range_m)
        t4 = time.perf_counter()
        weather_on = options.weather_on(config)
        self.timings_ms = {
            "rays_ms": self.rays_s * 1e3,
            "trace_ms": self.trace_s * 1e3,
            "returns_ms": (t3 - t2 + self.prepare_s) * 1e3,
            "points_ms": (t4 - t3) * 1e3,
        }
        return Scan(
            index=self.index,
            stamp_ns=self.stamp_ns,
            columns=config.columns,
            rings=config.rings,
            returns=returns,
            points_sensor=points,
            time_offset_s=self.time_offset_s,
            ring_rank=scanner.pattern.ring_rank,
            T_world_sensor=self.T_world_sensor,
            frame_id=config.frame_id,
            weather={
                "rain_mm_per_h": options.rain_mm_per_h if weather_on else 0.0,
                "visibility_m": options.visibility_m if weather_on else math.inf,
            },
        )

    def trace_columns(self, poses: PoseHistory, columns: np.ndarray, extrapolate: bool = False) -> None:
        """Trace the given untraced columns from ``poses`` (and, with radiometry, prepare their
        beams); ``trace_covered`` and ``finish`` call it with the columns that are due."""
        scanner, config = self.scanner, self.scanner.config
        table = scanner.applied_self_table
        if table is not None and self._self_decision is None:
            self.self_decision(table)  # the body's part needs no poses: decide it before the stamp
        t0 = time.perf_counter()
        T_world_base = poses.transforms(self.firing_time_s[columns], extrapolate=extrapolate)
        T_world_sensor = T_world_base @ scanner.pattern.T_base_sensor
        self.T_world_sensor[columns] = T_world_sensor
        everything = columns.size == config.columns
        origins, directions = scanner.rays_world(T_world_sensor, None if everything else columns)
        rings = config.rings
        cells = (columns[:, None] * rings + np.arange(rings)).reshape(-1)
        key = (scanner.options.seed, self.index, cells)  # the firings' mechanical errors (none by default)
        rays = (T_world_sensor[:, :3, :3], scanner._beam_directions, origins, directions)
        origins, directions = block_rays(config.mechanical_noise, *key, *rays)
        t1 = time.perf_counter()
        hits = scanner.tracer.trace(
            origins,
            directions,
            max_range_m=config.range_m,
            max_hits=config.max_hits_per_sub_ray,
            continue_step_m=config.continue_step_m,
            pond_threshold_m=config.pond_threshold_m,
            boxes=self.boxes,
            foliage_solid=not scanner.options.foliage,
            range_offset_m=config.windows.range_offset_m,
        )
        t2 = time.perf_counter()
        self.rays_s += t1 - t0
        self.trace_s += t2 - t1
        self.traced[columns] = True
        block = _Block(
            columns, cells, origins, directions, hits, trace_key(config, scanner.options.foliage, scanner.options.seed)
        )
        self._blocks.append(block)
        if scanner.options.radiometry:
            try:
                self._prepare(block)
            except (ValueError, IndexError):
                block.beams = None  # refused: finish prepares it again and raises there
            streams = scanner.streams
            if not self.done and streams is not None:
                # The noise pairs depend on the stream's position alone: form them now, before
                # the stamp, so that finish only takes them (no number changes). Every block
                # checks, because the previous scan may finish (and move the stream on) meanwhile.
                used = streams.pairs_used_last
                streams.draw_ahead(used + used // 4 + 1024 if used else config.columns * config.rings)
            self.prepare_s += time.perf_counter() - t2

    def _prepare(self, block: _Block) -> None:
        scanner = self.scanner
        model = scanner.model
        block.model = model
        block.beams = prepare_block(
            block.hits,
            block.origins,
            block.directions,
            scanner.pattern.sub_ray_weights,
            model,
            scanner.options.seed,
            self.index,
            block.cells,
        )

    def _returns(self) -> Returns:
        scanner = self.scanner
        if scanner.options.radiometry:
            model = scanner.model
            for block in self._blocks:
                if block.beams is None or block.model is not model:
                    self._prepare(block)
            assert scanner.streams is not None
            beams = [block.beams for block in self._blocks if block.beams is not None]
            self._blocks = []
            returns, self.echoes = finish_returns(beams, model, scanner.streams, self.index)
            return returns
        config = scanner.config
        if len(self._blocks) == 1:
            hits = self._blocks[0].hits
        else:
            order = np.argsort(np.concatenate([block.columns for block in self._blocks]), kind="stable")
            per_column = config.rings * scanner.sub_rays
            rows = (order[:, None] * per_column + np.arange(per_column)).reshape(-1)
            hits = _concatenate_hits([block.hits for block in self._blocks], rows)
        self._blocks = []
        windows = scanner.windows
        return nearest_hit_returns(
            hits,
            scanner.pattern.sub_ray_weights,
            np.where(windows.azimuth_inside, windows.near_m, np.inf),
            windows.far_m,
            config.materials.reflectivity,
            windows.separation_m,
        )


def _concatenate_hits(blocks: list[Hits], rows: np.ndarray) -> Hits:
    """Hits of several column blocks in one array set, rows put back in cell order."""
    fields = Hits.__dataclass_fields__
    return Hits(**{name: np.concatenate([getattr(b, name) for b in blocks])[rows] for name in fields})
