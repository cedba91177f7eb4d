"""The frozen plan of one scan: everything a ``Sweep`` traces and finishes that scan with."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from acres_lidar_ros.body.self_returns import SelfDecision, SelfReturnTable
from acres_lidar_ros.config.sensors import SensorConfig
from acres_lidar_ros.radiometry.noise import NoiseStreams
from acres_lidar_ros.radiometry.radiometric_model import BeamModel
from acres_lidar_ros.radiometry.windows import CellWindows
from acres_lidar_ros.scan.scan_types import ScanOptions
from acres_lidar_ros.sensor.pattern import BeamPattern

if TYPE_CHECKING:
    from acres_lidar_ros.tracing.trace import Tracer


@dataclass(frozen=True, eq=False)
class ScanPlan:
    """What scan ``index`` is traced and finished with, made once by ``Scanner.plan``.

    A plan is not changed: a live change (``Scanner.set_options``, ``Scanner.set_runtime_config``)
    makes the scanner hand out a new plan, and a sweep in work adopts it at its next block or at
    its finish (docs/sensors.md, "Live parameter changes"). Plans compare by identity.

    Attributes
    ----------
    index : int
        The scan number.
    config, options : SensorConfig, ScanOptions
        The sensor and the scan options of the plan.
    pattern : BeamPattern
        The beams of this scan (a solid-state sensor's state of the scan).
    model : BeamModel
        The radiometric model of this scan's beams (with their emitters' powers and windows).
    windows : CellWindows
        Each beam's validity windows (the model's, or the plain band of the config).
    trace_key : tuple
        What a block's hits depend on beyond its rays (``config.window_rules.trace_key``): a block
        traced under another key is traced again.
    self_table : SelfReturnTable
        The self-return table the scan applies (``SelfReturnTable.empty`` where the body adds nothing).
    self_decision : SelfDecision
        The body's part of this scan (``self_returns.decide_self_returns``), with ``self_table``:
        no cell where the table is empty.
    slots : int
        Return slots per beam: the model's ``returns_per_beam``, 1 without radiometry.
    time_offset_s : (columns,) float64
        ``dt_c`` of each column (``Scanner.time_offsets_s``).
    fire_time_s : (columns * rings,) float64 or None
        Each cell's delay after its column's time (``Scanner.fire_times_s``).
    tracer : Tracer
        The scene's tracer.
    streams : NoiseStreams or None
        The run's noise streams (None without radiometry); shared by the run's scans, which draw
        from them in scan order.
    """

    index: int
    config: SensorConfig
    options: ScanOptions
    pattern: BeamPattern
    model: BeamModel
    windows: CellWindows
    trace_key: tuple
    self_table: SelfReturnTable
    self_decision: SelfDecision
    slots: int
    time_offset_s: np.ndarray = field(repr=False)
    fire_time_s: np.ndarray | None = field(repr=False)
    tracer: Tracer = field(repr=False)
    streams: NoiseStreams | None = field(repr=False)

    @property
    def columns(self) -> int:
        return self.config.columns

    @property
    def rings(self) -> int:
        return self.config.rings

    @property
    def sub_rays(self) -> int:
        return len(self.pattern.sub_ray_weights)
