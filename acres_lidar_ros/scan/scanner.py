"""The ``Scanner`` that traces the scans of one sensor over one scene."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from acres_lidar_ros.body.self_returns import SelfDecision, SelfReturnTable, decide_self_returns
from acres_lidar_ros.config.sensors import SensorConfig
from acres_lidar_ros.config.updates import plan_update
from acres_lidar_ros.config.window_rules import trace_key
from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.radiometry.detection import ScanEchoes
from acres_lidar_ros.radiometry.noise import NoiseStreams
from acres_lidar_ros.radiometry.radiometric_model import BeamModel
from acres_lidar_ros.radiometry.windows import CellWindows
from acres_lidar_ros.scan.scan_plan import ScanPlan
from acres_lidar_ros.scan.scan_types import Scan, ScanOptions
from acres_lidar_ros.scan.sweep import Sweep
from acres_lidar_ros.sensor.emitters import FiringPattern
from acres_lidar_ros.sensor.pattern import BeamPattern
from acres_lidar_ros.sensor.poses import PoseHistory

if TYPE_CHECKING:
    from acres_lidar_ros.scene.scene_model import Scene
    from acres_lidar_ros.tracing.trace import Tracer


class Scanner:
    """Traces scans of one sensor over one scene.

    It traces the full model (``lidar.model`` full); a sensor whose ``model`` is ``core`` is refused
    here, so no caller traces the full model in its place (``core_scanner.CoreScanner`` traces it).

    The scene's acceleration structure is built once; each ``scan`` builds the rays of every
    column (tick) from the sensor pose at that column's firing time, or of every cell from the
    pose at its own firing time where a tick's emitters fire at different times (the sensor's
    ``FiringPattern``), traces them, forms the returns and the points. Scans of one run share the noise streams, so a run is reproducible from its seed
    when its scans are taken in order.

    Parameters
    ----------
    config : SensorConfig
    scene : Scene (``acres_lidar_ros.scene``); ignored when ``tracer`` is given
    options : ScanOptions
    tracer : a ``Tracer`` to reuse (e.g. shared by scanners of one scene)
    self_table : the sensor's self-return table, loaded by the caller (``body.self_returns.sensor_self_table``),
        or None for a sensor without one; applied while ``options.self_returns`` is on
    cell_range_id : (columns * rings,) int64 or None
        Each beam's range region, replacing its emitter's ``range_id``; None: the emitters' ids.
        A rebuilt pattern (``set_runtime_config``) drops it.
    """

    model_name = "full"
    """The ``lidar.model`` this class traces."""

    def __init__(
        self,
        config: SensorConfig,
        scene: Scene | None = None,
        options: ScanOptions = ScanOptions(),
        tracer: Tracer | None = None,
        self_table: SelfReturnTable | None = None,
        cell_range_id: np.ndarray | None = None,
    ) -> None:
        from acres_lidar_ros.tracing.trace import Tracer

        if config.model != self.model_name:
            raise ConfigError(
                f"lidar.model = {config.model!r} ({config.source or 'the sensors file'}): this {type(self).__name__} "
                f"traces the {self.model_name} model; ACRES Core's is traced by acres-lidar scan and record "
                "(scan.core_scanner.CoreScanner) in acres-lidar scan, record and the node, not in the dataset or the benchmarks"
            )
        if tracer is None:
            if scene is None:
                raise ConfigError("Scanner needs a scene or a tracer")
            tracer = Tracer(scene)
        self.self_table = self_table
        self._check_self_table(config)
        self.config = config
        self.options = options
        self._set_pattern()
        if cell_range_id is not None and np.shape(cell_range_id) != (config.columns * config.rings,):
            raise ConfigError(
                f"cell_range_id of shape {np.shape(cell_range_id)}: expected one range id per beam, "
                f"({config.columns * config.rings},)"
            )
        self.cell_range_id = None if cell_range_id is None else np.asarray(cell_range_id, dtype=np.int64)
        self.tracer = tracer
        self.streams: NoiseStreams | None = self._new_streams()
        self._models: dict[int, BeamModel] = {}  # phase -> model, built on first use, again after a change
        self._plans: dict[int, ScanPlan] = {}  # scan index -> plan, the recent ones; emptied by a change
        # (index, seed, noise, std_m) -> the table and the body's part of the scan under it
        self._decisions: dict[tuple, tuple[SelfReturnTable, SelfDecision]] = {}
        self._next_index = 0
        self._empty_table: SelfReturnTable | None = None

    # -- configuration ---------------------------------------------------------------------

    def _check_self_table(self, config: SensorConfig) -> None:
        table = self.self_table
        if table is not None and (table.columns, table.rings) != (config.columns, config.rings):
            raise ConfigError(
                f"self_table {str(table.path) if table.path else ''!r} is for {table.columns} columns x "
                f"{table.rings} rings; the sensor has {config.columns} x {config.rings}"
            )

    def _set_pattern(self) -> None:
        self.firing = FiringPattern.from_config(self.config)
        self.pattern = BeamPattern.from_firing(self.firing, self.config)
        self._patterns: dict[int, BeamPattern] = {0: self.pattern}

    def pattern_for(self, index: int) -> BeamPattern:
        """The beams of scan ``index``: ``pattern``, or a solid-state sensor's state of that scan."""
        phase = self.firing.phase_of_scan(index)
        if phase not in self._patterns:
            self._patterns[phase] = BeamPattern.from_firing(self.firing, self.config, index=index)
        return self._patterns[phase]

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
        return self.model_for(0)

    def model_for(self, index: int) -> BeamModel:
        """The model of scan ``index``: ``model`` with the emitters' powers of that scan's beams."""
        phase = self.firing.phase_of_scan(index)
        if phase not in self._models:
            options = self.options
            cells = self.pattern_for(index).cells
            ratio = cells.power_ratio.reshape(-1)
            range_id = self.cell_range_id
            if range_id is None and cells.range_id.any():
                range_id = cells.range_id.reshape(-1)
            self._models[phase] = BeamModel.build(
                self.config,
                noise=options.noise,
                weather=options.weather_on(self.config),
                rain_mm_per_h=options.rain_mm_per_h,
                visibility_m=options.visibility_m,
                foliage_solid=not options.foliage,
                truth=options.truth,
                power_ratio=None if bool((ratio == 1.0).all()) else ratio,
                windows=CellWindows.build(self.config, self.cell_firing_angle_rad(index), range_id),
            )
        return self._models[phase]

    def cell_firing_angle_rad(self, index: int = 0) -> np.ndarray:
        """The attribute list's firing angle of each beam of scan ``index`` (clockwise from the sweep's start,
        rad; ``FiringCells.firing_angle_rad``): (cells,) float64, what the valid azimuth window is
        measured on."""
        return self.pattern_for(index).cells.firing_angle_rad.reshape(-1)

    @property
    def windows(self) -> CellWindows:
        """Each beam's validity windows (``radiometry.windows``) under the current config."""
        return self.windows_for(0)

    def windows_for(self, index: int) -> CellWindows:
        """The windows of scan ``index``'s beams (``ScanPlan.windows``)."""
        return self.plan(index).windows

    def set_options(self, **changes: Any) -> None:
        """Change options between scans (validated); a new seed restarts the noise streams."""
        options = replace(self.options, **changes)
        reseed = options.seed != self.options.seed or options.radiometry != self.options.radiometry
        self.options = options
        self._models, self._plans = {}, {}
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

    def set_runtime_config(self, overrides: dict) -> bool:
        """Change sensors-file keys between scans by ``config.updates``' rules: live keys from the
        next scan; pattern keys rebuild the firing pattern here (the scan numbers and noise streams
        go on; a sweep started before cannot be finished); fixed keys (``scan_type``, the
        ``emitters`` block, ``hz``, ...) are refused. The update is checked whole and its models
        and windows built before it is kept: a refused one raises ``ConfigError`` and leaves the
        previous config. A new mount (``position_flu_m``, ``rpy_deg``) drops the self-return table,
        which holds the body as seen from the old one (``same_mount``). Returns whether the pattern
        was rebuilt."""
        update = plan_update(self.config, overrides)
        before = (self.config, self.firing, self.pattern, self._patterns, self._models, self.cell_range_id)
        table = self.self_table
        try:
            self._check_self_table(update.config)
            if table is not None and not same_mount(self.config, update.config):
                self.self_table = None  # made for the old mount: the body would land in the wrong place
            self.config = update.config
            if update.rebuild:
                self._set_pattern()
                self.cell_range_id = None  # per-beam range ids belong to a pattern
            self._models, self._plans = {}, {}
            self.model  # noqa: B018 (builds the windows: the range ids against range_count)
        except ConfigError:
            self.config, self.firing, self.pattern, self._patterns, self._models, self.cell_range_id = before
            self.self_table, self._plans = table, {}
            raise
        return update.rebuild

    @property
    def sub_rays(self) -> int:
        return len(self.pattern.sub_ray_weights)

    @property
    def motion_on(self) -> bool:
        """Whether each column is traced from the pose at its own firing time (``ScanOptions.motion_on``):
        the loop then needs the poses of the whole sweep, else the pose at the stamp only."""
        return self.options.motion_on(self.config)

    @property
    def ray_count(self) -> int:
        return self.config.columns * self.config.rings * self.sub_rays

    # -- timing -----------------------------------------------------------------------------

    def time_offsets_s(self, index: int = 0) -> np.ndarray:
        """``dt_c`` of each column (tick) of scan ``index``: (N_c,) float64, zeros without motion
        distortion. Where the emitters of each tick share one fire time it is included (their
        common firing time); otherwise the tick's start (``fire_times_s`` gives the delays)."""
        if not self.motion_on:
            return np.zeros(self.config.columns)
        dt = self.firing.tick_time_offset_s
        if self.firing.shared_fire_times:
            fire = self.pattern_for(index).cells.fire_time_s[:, 0]
            return dt + fire if fire.any() else dt
        return dt

    def fire_times_s(self, index: int = 0) -> np.ndarray | None:
        """Each cell's delay after its tick's ``time_offsets_s``: (N_c N_r,) float64, or None
        where every emitter of a tick fires at one time (or without motion distortion)."""
        if self.firing.shared_fire_times or not self.motion_on:
            return None
        return self.pattern_for(index).cells.fire_time_s.reshape(-1)

    def firing_times_s(self, stamp_ns: int, index: int = 0) -> np.ndarray:
        """Absolute firing time of each column, s: (N_c,) float64."""
        return stamp_ns * 1e-9 + self.time_offsets_s(index)

    def firing_poses(self, poses: PoseHistory, stamp_ns: int, extrapolate: bool = False) -> np.ndarray:
        """``T_world_sensor`` at each column's firing time: (N_c, 4, 4) float64."""
        T_world_base = poses.transforms(self.firing_times_s(stamp_ns), extrapolate=extrapolate)
        return T_world_base @ self.pattern.T_base_sensor

    # -- the scan -----------------------------------------------------------------------------

    def plan(self, index: int) -> ScanPlan:
        """The plan of scan ``index`` under the current config and options (``ScanPlan``): made
        once, the same object until ``set_options`` or ``set_runtime_config`` changes something."""
        plan = self._plans.get(index)
        if plan is not None:
            return plan
        config, options = self.config, self.options
        model = self.model_for(index)
        table = self.applied_self_table
        if table is None:  # the body adds nothing: one empty table for the sensor's cells
            empty = self._empty_table
            if empty is None or (empty.columns, empty.rings) != (config.columns, config.rings):
                empty = self._empty_table = SelfReturnTable.empty(config.columns, config.rings)
            table = empty
        key = (index, options.seed, options.noise, config.std_m)
        cached = self._decisions.get(key)
        if cached is not None and cached[0] is table:
            decision = cached[1]
        else:
            decision = decide_self_returns(table, index, options.seed, config.std_m, options.noise)
            self._decisions = {k: v for k, v in self._decisions.items() if k[0] > index - 4}
            self._decisions[key] = (table, decision)
        plan = ScanPlan(
            index=index,
            config=config,
            options=options,
            pattern=self.pattern_for(index),
            model=model,
            windows=model.windows or CellWindows.band(config, config.columns * config.rings),
            trace_key=trace_key(config, options.foliage, options.seed),
            self_table=table,
            self_decision=decision,
            slots=int(model.returns_per_beam) if options.radiometry else 1,
            time_offset_s=self.time_offsets_s(index),
            fire_time_s=self.fire_times_s(index),
            tracer=self.tracer,
            streams=self.streams,
        )
        # The node works on at most the finishing scan and the next: keep a few recent plans.
        self._plans = {i: p for i, p in self._plans.items() if i > index - 4}
        self._plans[index] = plan
        return plan

    def start_sweep(self, stamp_ns: int, boxes: Sequence = (), index: int | None = None) -> Sweep:
        """A scan stamped ``stamp_ns`` to be traced column block by column block (``Sweep``)."""
        if index is None:
            index = self._next_index
        self._next_index = index + 1
        return Sweep(self.plan(index), int(stamp_ns), tuple(boxes), self.plan)

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
        return self.scan_echoes(poses, stamp_ns, boxes, index, extrapolate)[0]

    def scan_echoes(
        self,
        poses: PoseHistory,
        stamp_ns: int,
        boxes: Sequence = (),
        index: int | None = None,
        extrapolate: bool = False,
    ) -> tuple[Scan, ScanEchoes | None]:
        """``scan``, and the scan's echoes (``Sweep.echoes``: None without the radiometry)."""
        sweep = self.start_sweep(stamp_ns, boxes, index)
        scan = sweep.finish(poses, extrapolate=extrapolate)
        return scan, sweep.echoes


def same_mount(a: SensorConfig, b: SensorConfig) -> bool:
    """Whether two configs mount the sensor in the same place on the vehicle (``position_flu_m``
    and ``rpy_deg`` equal): a self-return table holds the body as seen from one mount only."""
    return bool(np.array_equal(a.position_flu_m, b.position_flu_m) and np.array_equal(a.rpy_rad, b.rpy_rad))
