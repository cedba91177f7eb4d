"""One scan traced tick block by tick block as the pose history covers its firing times."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, replace

import numpy as np

from acres_lidar_ros.body.self_returns import SelfDecision, SelfReturnTable, merge_self_returns, merge_self_truth
from acres_lidar_ros.cores import in_background
from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.radiometry.cell_truth import CellTruth, truth_of_primary_slots
from acres_lidar_ros.radiometry.detection import ScanEchoes, finish_returns, join_scan_echoes
from acres_lidar_ros.radiometry.echoes import BeamBlock, prepare_block
from acres_lidar_ros.radiometry.mechanical import block_rays
from acres_lidar_ros.radiometry.radiometric_model import BeamModel
from acres_lidar_ros.radiometry.returns import Returns, empty_returns, nearest_hit_returns
from acres_lidar_ros.scan.scan_plan import ScanPlan
from acres_lidar_ros.scan.scan_types import Scan
from acres_lidar_ros.sensor.emitters import FiringCells
from acres_lidar_ros.sensor.poses import PoseHistory
from acres_lidar_ros.sensor.rays import mounted_poses
from acres_lidar_ros.sensor.timing import column_slices
from acres_lidar_ros.tracing.hits import Hits


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
    slice_position: int = 0  # with partial output: the slice it belongs to (``Sweep.slices``)


class Sweep:
    """One scan traced in column (tick) blocks as the pose history covers their firing times.

    A tick is traced once the history covers its last emitter's firing time. Where the emitters
    of a tick share one fire time the tick's rays come from one pose; otherwise each cell's rays
    come from the pose at its own firing time (``Scanner.fire_times_s``).

    The ROS 2 node starts a sweep when the scan is due and calls ``trace_covered`` whenever
    odometry arrives, so when the sweep ends only the columns that fired after the last pose are
    left; ``finish`` traces those and forms the scan. With radiometry, the part that needs only
    a beam's own hits (contributions, echoes and their signals ``S`` and ``sigma_R``:
    ``echoes.prepare_block``) runs on each block as it is traced, and the noise pairs the scan
    will take are formed ahead (``NoiseStreams.draw_ahead``); ``finish`` runs the rest over all
    beams at once (``detection.finish_returns``: clutter, the noise draws' places, ``S'`` and
    ``R_meas``, detection, returns), because the noise
    and rain streams run over the beams in ring-major order. With partial output (read when the
    sweep starts) each slice is finished on its own as soon as its columns are traced
    (``ready_slices``), the streams taken slice by slice (docs/outputs.md "Partial output"), and
    ``finish`` finishes the slices left.

    The sweep reads only its ``ScanPlan``. A live change (``Scanner.set_options``,
    ``Scanner.set_runtime_config``) gives the scan a new plan, which the sweep adopts at its next
    block and at its finish (docs/sensors.md, "Live parameter changes"): a block traced under
    another ``trace_key`` is traced again, a block prepared with another model than the plan's at
    the finish, or one whose hits were refused, is prepared again there (which raises the
    refusal). Either way the result is the same scan as one ``Scanner.scan`` with the same poses.

    Attributes
    ----------
    echoes : ScanEchoes or None
        After ``finish`` with radiometry: every echo of the scan after detection.
    plan : ScanPlan
        What the scan is traced and finished with (the scanner's current plan of the scan).
    pattern : BeamPattern
        The beams of this scan (``plan.pattern``; a rebuilt pattern refuses the sweep).
    """

    def __init__(self, plan: ScanPlan, stamp_ns: int, boxes: tuple, plans: Callable[[int], ScanPlan]) -> None:
        """``plan``: the scan's plan (``Scanner.plan``); ``plans``: the scanner's current plan of a
        scan index, which the sweep adopts at each block and at its finish (a live change)."""
        self.plan = plan
        self._plans = plans
        self.stamp_ns = stamp_ns
        self.boxes = boxes
        self.index = plan.index
        columns, rings = plan.columns, plan.rings
        self.pattern = plan.pattern
        self.time_offset_s = plan.time_offset_s
        self.firing_time_s = stamp_ns * 1e-9 + self.time_offset_s
        self.fire_time_s = plan.fire_time_s
        self.T_world_sensor = np.empty((columns, 4, 4))
        self.emitter_T_world_sensor: np.ndarray | None = None
        self._covered_time_s = self.firing_time_s  # when a tick's last emitter has fired
        if self.fire_time_s is not None:
            self.emitter_T_world_sensor = np.empty((columns * rings, 4, 4))
            self._covered_time_s = self.firing_time_s + self.fire_time_s.reshape(columns, rings).max(axis=1)
        self.traced = np.zeros(columns, dtype=bool)
        self._blocks: list[_Block] = []
        # The slices in time order, each finished on its own once its columns are traced: a whole
        # scan is one slice; with partial output (read when the sweep starts) each slice is
        # finished as soon as its columns are traced (``ready_slices``), the noise stream taken
        # slice by slice (docs/outputs.md "Partial output").
        outputs = plan.config.outputs
        self.partial = bool(outputs.partial_output)
        self.slices: list[tuple[int, np.ndarray]] = [(0, np.arange(columns))]
        self.slice_count = 1  # partial_slices at the sweep's start
        self.slices_done = 0
        self._slice_of_column = np.zeros(columns, np.int64)
        if self.partial:
            first_offset_s = self.time_offset_s
            if self.fire_time_s is not None:
                first_offset_s = first_offset_s + self.fire_time_s.reshape(columns, rings).min(axis=1)
            self.slice_count = outputs.partial_slices
            self.slices = column_slices(first_offset_s, outputs.partial_slices, plan.config.period_s)
            for position, (_, slice_columns) in enumerate(self.slices):
                self._slice_of_column[slice_columns] = position
        self._returns_so_far: Returns | None = None
        self._points_so_far: np.ndarray | None = None
        self._slice_echoes: list[ScanEchoes] = []
        self._primary_slot = np.zeros(columns * rings, np.int64)  # with the truth: before the body
        self._truth_job: Future[CellTruth] | None = None
        self.rays_s = 0.0
        self.trace_s = 0.0
        self.prepare_s = 0.0
        self.points_s = 0.0
        self.echoes: ScanEchoes | None = None

    @property
    def done(self) -> bool:
        return bool(self.traced.all())

    def trace_covered(self, poses: PoseHistory, min_columns: int = 1) -> int:
        """Trace the untraced columns that fire at or before the newest pose, if there are at
        least ``min_columns`` of them (a tiny block costs more than it saves); return how many."""
        if not len(poses):
            return 0
        columns = np.flatnonzero(~self.traced & (self._covered_time_s <= poses.end_s))
        if columns.size < max(min_columns, 1):
            return 0
        self.trace_columns(poses, columns)
        return int(columns.size)

    def ready_slices(self) -> list[tuple[int, np.ndarray]]:
        """With partial output: finish, in order, every next slice whose columns are all traced
        (its returns, self returns, corrections and points; its noise pairs and rain numbers are
        drawn now, after the previous slice's); returns those slices as ``(k, columns)``
        (``timing.column_slices``). Their cells of ``scan_so_far`` are then final. The caller
        keeps the scans in order: an earlier scan's draws come first. A whole scan's one slice
        waits for ``finish``."""
        if not self.partial:
            return []
        return self._finish_ready_slices()

    def _finish_ready_slices(self) -> list[tuple[int, np.ndarray]]:
        """Finish, in order, every next slice whose columns are all traced."""
        self._replan()
        done = []
        while self.slices_done < len(self.slices):
            k, columns = self.slices[self.slices_done]
            if not self.traced[columns].all():
                break
            self._finish_slice(self.slices_done, columns)
            self.slices_done += 1
            done.append((k, columns))
        return done

    def _replan(self) -> ScanPlan:
        """Adopt the scanner's current plan of this scan (a live change since the last block):
        blocks traced under another ``trace_key`` are dropped (traced again), blocks prepared with
        another model are prepared again at the finish. A sweep belongs to the beam pattern it
        started with: after a rebuild (``set_runtime_config`` of a pattern key) its traced columns
        are of the old pattern, and it is refused."""
        plan = self._plans(self.index)
        if plan is self.plan:
            return plan
        if plan.pattern is not self.pattern:
            raise ConfigError(f"scan {self.index}: its sweep started before the beam pattern was rebuilt")
        for block in [block for block in self._blocks if block.trace_key != plan.trace_key]:
            self.traced[block.columns] = False  # a finished slice has no blocks left
            self._blocks.remove(block)
        self.plan = plan
        return plan

    def finish(self, poses: PoseHistory, extrapolate: bool = False) -> Scan:
        """Trace what is left (and blocks traced under another ``trace_key``: a runtime change
        since), finish the slices not yet finished, in order (a whole scan is one slice), and
        form the scan from them."""
        self._replan()
        columns = np.flatnonzero(~self.traced)
        if columns.size:
            self.trace_columns(poses, columns, extrapolate)
        self._finish_ready_slices()
        assert self._returns_so_far is not None and self._points_so_far is not None
        if self.echoes is None and self._slice_echoes:  # with the truth: joined at the last slice
            self.echoes = join_scan_echoes(self._slice_echoes, self.index)
        waited = time.perf_counter()
        truth = None if self._truth_job is None else self._truth_job.result()
        self.prepare_s += time.perf_counter() - waited  # the truth's wait counts in the returns
        return self._scan(self._returns_so_far, self._points_so_far, truth)

    def _truth(
        self,
        echoes: ScanEchoes,
        primary_slot: np.ndarray,
        model: BeamModel,
        table: SelfReturnTable,
        decision: SelfDecision,
    ) -> CellTruth:
        """The cell truth of the scan from its echoes and its returns' primary slots before the
        body, the body's ``decision`` merged in and the noise-free points formed (reads nothing
        else that changes meanwhile: it runs on the other core while the last slice finishes)."""
        truth = merge_self_truth(table, truth_of_primary_slots(echoes, primary_slot, model), decision, copy=False)
        return replace(truth, points_sensor=self.pattern.points_sensor(truth.range_m[:, None])[:, 0])

    def _scan(self, returns: Returns, points: np.ndarray, truth: CellTruth | None) -> Scan:
        """The ``Scan`` of this sweep from its returns and points, with its ``timings_ms``."""
        config, options = self.plan.config, self.plan.options
        weather_on = options.weather_on(config)
        timings_ms = {
            "rays_ms": self.rays_s * 1e3,
            "trace_ms": self.trace_s * 1e3,
            "returns_ms": self.prepare_s * 1e3,
            "points_ms": self.points_s * 1e3,
        }
        return Scan(
            index=self.index,
            stamp_ns=self.stamp_ns,
            columns=config.columns,
            rings=config.rings,
            returns=returns,
            points_sensor=points,
            time_offset_s=self.time_offset_s,
            ring_rank=self.pattern.ring_rank,
            T_world_sensor=self.T_world_sensor,
            fire_time_s=self.fire_time_s,
            emitter_T_world_sensor=self.emitter_T_world_sensor,
            cells=self.pattern.cells,
            frame_id=config.frame_id,
            weather={
                "rain_mm_per_h": options.rain_mm_per_h if weather_on else 0.0,
                "visibility_m": options.visibility_m if weather_on else math.inf,
            },
            truth=truth,
            timings_ms=timings_ms,
        )

    def scan_so_far(self) -> Scan:
        """With partial output, the scan as its finished slices make it (``ready_slices``): the
        cells of the other slices hold no return yet. What the node shapes each slice from."""
        if self._returns_so_far is None or self._points_so_far is None:
            raise ConfigError(f"scan {self.index}: no slice of its sweep is finished yet")
        return self._scan(self._returns_so_far, self._points_so_far, None)

    def _finish_slice(self, position: int, columns: np.ndarray) -> None:
        """One slice's returns (``ready_slices``, ``finish``): its blocks through the detection
        with the noise and rain streams at their place after the previous slice, then the body's
        part, the emitters' corrections and the points, written into the scan's arrays at its
        cells. A whole scan's one slice is every cell, taken as the spec's whole-scan order."""
        plan = self.plan
        config, rings = plan.config, plan.rings
        n_cells = config.columns * rings
        whole = len(self.slices) == 1
        last = position == len(self.slices) - 1
        cells = (np.sort(columns)[:, None] * rings + np.arange(rings)).reshape(-1)
        at = None if whole else cells  # the slice's cells; None: every cell
        blocks = [block for block in self._blocks if block.slice_position == position]
        self._blocks = [block for block in self._blocks if block.slice_position != position]
        t0 = time.perf_counter()
        table, full = plan.self_table, plan.self_decision
        decision = full
        if not whole:
            mine = np.zeros(n_cells, bool)
            mine[cells] = True
            decision = full._replace(
                body_cells=full.body_cells[mine[full.body_cells]],
                replaced_cells=full.replaced_cells[mine[full.replaced_cells]],
            )
        if self._returns_so_far is None:
            self._returns_so_far = empty_returns(n_cells, plan.slots)
        returns = self._returns_so_far
        if plan.options.radiometry:
            model = plan.model
            for block in blocks:
                if block.beams is None or block.model is not model:
                    self._prepare(block)
            assert plan.streams is not None
            replaced = _unformed_cells(decision, model)
            beams = [block.beams for block in blocks if block.beams is not None]
            _, echoes = finish_returns(beams, model, plan.streams, self.index, replaced, cells=at, out=returns)
            self._slice_echoes.append(echoes)
            if plan.options.truth:  # the truth reads the primary slots before the body and the corrections
                self._primary_slot[cells] = _rows(returns, at).primary_index()
                if last:  # every echo is in: the truth forms on the other core while this slice ends
                    self.echoes = join_scan_echoes(self._slice_echoes, self.index)
                    args = (self.echoes, self._primary_slot, model, table, full)
                    self._truth_job = in_background(self._truth, *args)
        else:
            block_cells = np.concatenate([block.cells for block in blocks])
            windows = plan.windows
            mine_returns = nearest_hit_returns(
                Hits.joined([block.hits for block in blocks], np.arange(block_cells.size * plan.sub_rays)),
                self.pattern.sub_ray_weights,
                np.where(windows.azimuth_inside, windows.near_m, np.inf)[block_cells],
                windows.far_m[block_cells],
                config.materials.reflectivity,
                windows.separation_m,
            )
            _put_rows(returns, block_cells, mine_returns)
        merge_self_returns(table, returns, decision, copy=False)  # the scan's own arrays
        corrected = emitter_corrections(_rows(returns, at), self.pattern.cells, at)
        if whole:
            self._returns_so_far = corrected
        else:
            _put_rows(returns, cells, corrected)
        t1 = time.perf_counter()
        points = self.pattern.points_sensor(corrected.range_m, at)
        if whole:
            self._points_so_far = points
        else:
            if self._points_so_far is None:
                self._points_so_far = np.full((n_cells, plan.slots, 3), np.nan)
            self._points_so_far[cells] = points
        t2 = time.perf_counter()
        self.prepare_s += t1 - t0
        self.points_s += t2 - t1

    def trace_columns(self, poses: PoseHistory, columns: np.ndarray, extrapolate: bool = False) -> None:
        """Trace the given untraced columns from ``poses`` (and, with radiometry, prepare their
        beams); ``trace_covered`` and ``finish`` call it with the columns that are due. With
        partial output, one block per slice (a slice's beams are its blocks')."""
        columns = np.asarray(columns)
        part = self._slice_of_column[columns]
        for position in np.unique(part):
            self._trace_block(poses, columns[part == position], extrapolate, int(position))

    def _trace_block(self, poses: PoseHistory, columns: np.ndarray, extrapolate: bool, position: int) -> None:
        """``trace_columns`` of one block (of the slice ``position`` with partial output)."""
        plan = self._replan()
        config = plan.config
        # The noise pairs depend on the stream's position alone: they are formed in the pool
        # while this block is traced, so that the finish only takes them (no number changes).
        # Every block checks, because the previous scan may finish (and move the stream on)
        # meanwhile.
        streams = plan.streams if plan.options.radiometry else None
        used = 0 if streams is None else streams.pairs_used_last
        wanted = used + used // 4 + 1024 if used else config.columns * config.rings
        ahead = None
        if streams is not None and streams.pairs_ahead < wanted:
            ahead = in_background(streams.draw_ahead, wanted, False)  # one part: it runs in the pool
        t0 = time.perf_counter()
        T_base_sensor = self.pattern.T_base_sensor
        T_world_sensor = poses.transforms(self.firing_time_s[columns], extrapolate=extrapolate) @ T_base_sensor
        self.T_world_sensor[columns] = T_world_sensor
        cells = (columns[:, None] * config.rings + np.arange(config.rings)).reshape(-1)
        if self.fire_time_s is None:
            everything = columns.size == config.columns
            origins, directions = self.pattern.rays_world(T_world_sensor, None if everything else columns)
            R_firings = T_world_sensor[:, :3, :3]  # one per column
        else:  # each emitter from the pose at its own firing time
            assert self.emitter_T_world_sensor is not None
            times_s = np.repeat(self.firing_time_s[columns], config.rings) + self.fire_time_s[cells]
            T_cells = mounted_poses(*poses.interpolate(times_s, extrapolate), T_base_sensor)
            self.emitter_T_world_sensor[cells] = T_cells
            origins, directions = self.pattern.rays_world_of_cells(T_cells, cells)
            R_firings = T_cells[:, :3, :3]  # one per beam
        key = (plan.options.seed, self.index, cells)  # the firings' mechanical errors (none by default)
        beam_directions = self.pattern.directions_sensor.reshape(-1, 3)
        origins, directions = block_rays(config.mechanical_noise, *key, R_firings, beam_directions, origins, directions)
        t1 = time.perf_counter()
        try:
            hits = self._trace_rays(origins, directions)
        finally:
            t2 = time.perf_counter()
            if ahead is not None:
                ahead.result()  # joined here (its wait counts in the returns): the streams are the caller's again
        self.rays_s += t1 - t0
        self.trace_s += t2 - t1
        self.traced[columns] = True
        block = _Block(columns, cells, origins, directions, hits, plan.trace_key, slice_position=position)
        self._blocks.append(block)
        if plan.options.radiometry:
            try:
                self._prepare(block)
            except (ValueError, IndexError):
                block.beams = None  # refused: finish prepares it again and raises there
            self.prepare_s += time.perf_counter() - t2

    def _trace_rays(self, origins: np.ndarray, directions: np.ndarray) -> Hits:
        """The hits of a block's rays under the plan's config and options."""
        config = self.plan.config
        return self.plan.tracer.trace(
            origins,
            directions,
            max_range_m=config.range_m,
            max_hits=config.max_hits_per_sub_ray,
            continue_step_m=config.continue_step_m,
            pond_threshold_m=config.pond_threshold_m,
            boxes=self.boxes,
            foliage_solid=not self.plan.options.foliage,
            range_offset_m=config.windows.range_offset_m,
        )

    def _prepare(self, block: _Block) -> None:
        plan = self.plan
        block.model = plan.model
        # The radiometry's place hashes (the ground's micro-slope and albedo cells) are the scene's:
        # its rays in the scene's frame (``Tracer.to_scene``; the same arrays without an offset).
        block.beams = prepare_block(
            block.hits,
            *plan.tracer.to_scene(block.origins, block.directions),
            self.pattern.sub_ray_weights,
            plan.model,
            plan.options.seed,
            self.index,
            block.cells,
        )


def _rows(returns: Returns, cells: np.ndarray | None) -> Returns:
    """The returns of ``cells`` (copies); ``returns`` itself for None (every cell)."""
    if cells is None:
        return returns
    return Returns(**{name: getattr(returns, name)[cells] for name in Returns.__dataclass_fields__})


def _put_rows(returns: Returns, cells: np.ndarray, rows: Returns) -> None:
    """Write ``rows`` (the returns of ``cells``, as ``_rows`` gives them) into ``returns`` at ``cells``."""
    for name in Returns.__dataclass_fields__:
        getattr(returns, name)[cells] = getattr(rows, name)


def _unformed_cells(decision: SelfDecision, model: BeamModel) -> np.ndarray:
    """The cells whose echoes ``finish_returns`` need not form (its ``replaced_cells``): those the
    body replaces; with the truth only those it returns from, since a blocked cell's truth reads
    the echoes the body hid."""
    return decision.body_cells if model.truth else decision.replaced_cells


def emitter_corrections(returns: Returns, cells: FiringCells, at: np.ndarray | None = None) -> Returns:
    """The emitters' own corrections of a scan's returns (the attribute list), in place where there are any
    (``at``: the returns are those of these cells only, one slice's).

    * An ROI state's emitter that does not fire at a tick (``cells.fires`` False) has no return.
    * ``distance_correction_m`` is subtracted from every range the emitter reports; a return whose
      corrected range falls below 0 is no return.
    """
    fires = cells.fires.reshape(-1)
    correction = cells.distance_correction_m.reshape(-1)
    if at is not None:
        fires, correction = fires[at], correction[at]
    if fires.all() and not correction.any():
        return returns
    valid = returns.valid & fires[:, None]
    range_m = returns.range_m - correction[:, None]
    valid &= ~(range_m < 0.0)
    if valid.all() and not correction.any():
        return returns
    dropped = returns.valid & ~valid
    none = empty_returns(*valid.shape)  # what a slot without a return holds, field by field
    fields = {
        name: np.where(dropped, getattr(none, name), getattr(returns, name)) for name in Returns.__dataclass_fields__
    }
    fields.update(range_m=np.where(valid, range_m, np.nan), valid=valid)
    return Returns(**fields)
