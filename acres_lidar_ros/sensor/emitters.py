"""The firing pattern of a sensor: ticks x emitters (the attribute list), of which rings x columns is one.

A tick is one application of the pattern; at each tick every emitter of the active state fires
with its azimuth (relative to the tick), its elevation and its fire time after the tick's start.
Cells are ordered ``cell = tick x N_e + emitter``; for the rings x columns keys of the spec a tick
is a column and an emitter a ring, so this is ``column x rings + ring`` as before.

Angles are FLU: azimuth counter-clockwise from forward. ``firing_angle`` is the attribute list's angle of a
firing, clockwise from the start of the sweep: ``(alpha_s - alpha) mod 2 pi``.

Rotary ticks (``lidar.emitters``): tick ``k`` points at ``alpha_k = alpha_s -+ k res`` (cw / ccw
spin), ``alpha_s = scan_start_azimuth_deg``, and starts ``dt_k = k res / 2 pi T - T`` before the
stamp, so tick 0 starts one period before it as the first column of the spec does. A rotation
holds the ticks with ``k res < 360`` deg (``config.emitters.rotary_tick_count``): when
``360 / res`` is not whole the last tick is short, and its late emitters may fire up to one tick
period after the stamp. A solid-state scan is one tick, forward, starting one period before
the stamp; its fire times spread the emitters over the scan.

Rings x columns (no ``emitters`` block): tick ``c`` is column ``c`` at ``alpha_c`` (``azimuth_order``),
timed by the spec's ``dt_c`` (``timing.column_time_offset``); one state whose emitters are the rings
(elevation, azimuth offset, channel id = ring index, horizontal offset = ``lens_center_m``, fire
time 0: all rings of a column fire together).

States: a rotary tick ``k`` uses state ``(k // step) mod S``; a solid-state scan ``i`` uses state
``(i // step) mod S`` (``step = state_resolution_step``). An ROI state fires its ``roi`` emitters
only at ticks whose firing angle lies in ``[min_azimuth_roi_deg, max_azimuth_roi_deg]`` (wrapping
through 360 when start > end), and no other emitter.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from acres_lidar_ros.config.emitter_block import NO_ROI_DEG, ROTARY, SOLID_STATE, EmittersConfig, EmitterState
from acres_lidar_ros.config.sensors import SensorConfig
from acres_lidar_ros.sensor.timing import column_time_offset

TWO_PI = 2.0 * math.pi


def column_azimuths_rad(columns: int, azimuth_order: str) -> np.ndarray:
    """Block azimuth ``alpha_c = +-2 pi c / N_c`` (ccw / cw): (columns,) float64."""
    sign = 1.0 if azimuth_order == "ccw" else -1.0
    return sign * 2.0 * np.pi * np.arange(columns) / columns


def firing_angle_rad(azimuth_rad: np.ndarray, start_azimuth_rad: float) -> np.ndarray:
    """The attribute list's firing angle of beams whose FLU azimuth (counter-clockwise from forward) is
    ``azimuth_rad``: clockwise from the sweep's start ``alpha_s`` (``scan_start_azimuth_deg``, seed
    004's start azimuth offset: docs/sensors.md), ``(alpha_s - azimuth) mod 2 pi`` in [0, 2 pi)."""
    angle = np.mod(start_azimuth_rad - np.asarray(azimuth_rad, dtype=np.float64), TWO_PI)
    return np.where(angle >= TWO_PI, 0.0, angle)  # np.mod of a tiny negative can round to 2 pi


@dataclass(frozen=True)
class FiringCells:
    """The cells of one scan's pattern: (N_t, N_e) arrays unless noted.

    Attributes
    ----------
    state : (N_t,) int64, the state each tick uses
    azimuth_rad : FLU azimuth of each firing, ``alpha_tick + delta_e``
    elevation_rad : elevation of each firing
    origin_sensor_m : (N_t, N_e, 3) emitter origin: ``hor_offset`` along the tick azimuth plus
        ``vert_offset`` along z
    fire_time_s : delay of each firing after its tick's start
    firing_angle_rad : the attribute list's firing angle ``(alpha_s - azimuth) mod 2 pi`` (clockwise from the
        sweep's start, before any start offset), in [0, 2 pi)
    channel_id : uint32 vendor channel of each firing
    bank, range_id : int64
    distance_correction_m : subtracted from the ranges the firing reports
    power_ratio : ``peak_power_w[e] / lidar.peak_power_w``, the signal's scale
    fires : False where an ROI state does not fire the emitter at that tick
    """

    state: np.ndarray
    azimuth_rad: np.ndarray
    elevation_rad: np.ndarray
    origin_sensor_m: np.ndarray
    fire_time_s: np.ndarray
    firing_angle_rad: np.ndarray
    channel_id: np.ndarray
    bank: np.ndarray
    range_id: np.ndarray
    distance_correction_m: np.ndarray
    power_ratio: np.ndarray
    fires: np.ndarray


@dataclass(frozen=True)
class FiringPattern:
    """Ticks x emitters of a sensor (module notes), in cell order.

    Attributes
    ----------
    scan_type : "rotary" or "solid_state"
    ticks, emitters : N_t and N_e; cell = tick x N_e + emitter
    tick_azimuth_rad : (N_t,) FLU azimuth of each tick (the block azimuth of a column)
    tick_time_offset_s : (N_t,) each tick's start minus the scan stamp, s, with motion distortion
    states : the emitter states, cycled in order
    state_resolution_step : ticks (rotary) or scans (solid state) per state
    start_azimuth_rad : ``alpha_s``, where the sweep starts
    roi_deg : (start, end) of the ROI interval on the firing angle, or None
    peak_power_w : the sensor's reference power
    """

    scan_type: str
    ticks: int
    emitters: int
    tick_azimuth_rad: np.ndarray
    tick_time_offset_s: np.ndarray
    states: tuple[EmitterState, ...]
    state_resolution_step: int
    start_azimuth_rad: float
    roi_deg: tuple[float, float] | None
    peak_power_w: float

    @classmethod
    def from_config(cls, config: SensorConfig) -> FiringPattern:
        """The pattern of ``config``: its emitters block, or its rings x columns keys."""
        if config.emitters is None:
            return cls._rings_by_columns(config)
        return cls._from_emitters(config, config.emitters)

    @classmethod
    def _rings_by_columns(cls, config: SensorConfig) -> FiringPattern:
        rings = config.rings
        alpha_c = column_azimuths_rad(config.columns, config.azimuth_order)
        zeros = np.zeros(rings)
        state = EmitterState(
            azimuth_rad=np.asarray(config.azimuth_offsets_rad, dtype=np.float64),
            elevation_rad=np.asarray(config.elevations_rad, dtype=np.float64),
            fire_time_s=zeros,
            fire_time_ns=np.zeros(rings, np.int64),
            channel_id=np.arange(rings, dtype=np.uint32),
            bank=np.zeros(rings, np.int64),
            range_id=np.zeros(rings, np.int64),
            vert_offset_m=zeros,
            hor_offset_m=np.full(rings, config.lens_center_m),
            distance_correction_m=zeros,
            peak_power_w=np.full(rings, config.peak_power_w),
            roi=np.ones(rings, bool),
            is_roi_state=False,
        )
        dt = column_time_offset(alpha_c, config.scan_start_azimuth_rad, config.spin_direction, config.period_s)
        return cls(
            scan_type=ROTARY,
            ticks=config.columns,
            emitters=rings,
            tick_azimuth_rad=alpha_c,
            tick_time_offset_s=np.asarray(dt, dtype=np.float64),
            states=(state,),
            state_resolution_step=1,
            start_azimuth_rad=config.scan_start_azimuth_rad,
            roi_deg=None,
            peak_power_w=config.peak_power_w,
        )

    @classmethod
    def _from_emitters(cls, config: SensorConfig, block: EmittersConfig) -> FiringPattern:
        T = config.period_s
        if block.scan_type == SOLID_STATE:
            tick_azimuth = np.zeros(1)
            tick_time = np.array([-T])
            start = 0.0
        else:
            k = np.arange(block.ticks, dtype=np.float64)
            turned = k * block.firing_res_rad  # k res < 2 pi (config.emitters.rotary_tick_count)
            sign = -1.0 if config.spin_direction == "cw" else 1.0
            start = config.scan_start_azimuth_rad
            tick_azimuth = start + sign * turned
            tick_time = turned / TWO_PI * T - T
        return cls(
            scan_type=block.scan_type,
            ticks=block.ticks,
            emitters=block.emitters,
            tick_azimuth_rad=tick_azimuth,
            tick_time_offset_s=tick_time,
            states=block.states,
            state_resolution_step=block.state_resolution_step,
            start_azimuth_rad=start,
            roi_deg=(block.min_azimuth_roi_deg, block.max_azimuth_roi_deg) if block.has_roi else None,
            peak_power_w=config.peak_power_w,
        )

    # -- states ------------------------------------------------------------------------------

    @property
    def phases(self) -> int:
        """How many different scans the pattern gives: the states of a solid-state sensor, else 1."""
        return len(self.states) if self.scan_type == SOLID_STATE else 1

    def phase_of_scan(self, index: int) -> int:
        """Which of ``phases`` scan ``index`` is: a solid-state scan's state, else 0."""
        if self.scan_type != SOLID_STATE:
            return 0
        return (int(index) // self.state_resolution_step) % len(self.states)

    def tick_states(self, index: int = 0) -> np.ndarray:
        """(N_t,) int64: the state of each tick of scan ``index``."""
        if self.scan_type == SOLID_STATE:
            return np.full(self.ticks, self.phase_of_scan(index), np.int64)
        return (np.arange(self.ticks, dtype=np.int64) // self.state_resolution_step) % len(self.states)

    @property
    def shared_fire_times(self) -> bool:
        """Whether every tick's emitters fire at one time (each state's fire times are equal):
        then one pose per tick serves all of its emitters."""
        return all(bool((s.fire_time_ns == s.fire_time_ns[0]).all()) for s in self.states)

    # -- cells -------------------------------------------------------------------------------

    def cells(self, index: int = 0) -> FiringCells:
        """The cells of scan ``index`` (``FiringCells``)."""
        state = self.tick_states(index)
        used = np.unique(state)

        def per_cell(name: str) -> np.ndarray:
            rows = np.stack([getattr(s, name) for s in self.states])  # (S, N_e)
            if used.size == 1:  # one state: a broadcast view of its row, no gather
                return np.broadcast_to(rows[used[0]], (self.ticks, self.emitters))
            return rows[state]

        alpha = self.tick_azimuth_rad[:, None]
        azimuth = alpha + per_cell("azimuth_rad")
        hor = per_cell("hor_offset_m")
        origin = np.stack(
            [hor * np.cos(alpha), hor * np.sin(alpha), per_cell("vert_offset_m") + np.zeros_like(alpha)], axis=-1
        )
        firing_angle = firing_angle_rad(azimuth, self.start_azimuth_rad)
        fires = np.ones((self.ticks, self.emitters), bool)
        roi_states = [s for s, st in enumerate(self.states) if st.is_roi_state]
        if roi_states:
            roi_tick = self._ticks_in_roi()[:, None]
            roi_state = np.isin(state, roi_states)[:, None]
            fires = np.where(roi_state, per_cell("roi") & roi_tick, True)
        return FiringCells(
            state=state,
            azimuth_rad=azimuth,
            elevation_rad=np.ascontiguousarray(per_cell("elevation_rad")),
            origin_sensor_m=origin,
            fire_time_s=np.ascontiguousarray(per_cell("fire_time_s")),
            firing_angle_rad=firing_angle,
            channel_id=np.ascontiguousarray(per_cell("channel_id")),
            bank=np.ascontiguousarray(per_cell("bank")),
            range_id=np.ascontiguousarray(per_cell("range_id")),
            distance_correction_m=np.ascontiguousarray(per_cell("distance_correction_m")),
            power_ratio=np.ascontiguousarray(per_cell("peak_power_w")) / self.peak_power_w,
            fires=fires,
        )

    def _ticks_in_roi(self) -> np.ndarray:
        """(N_t,) bool: the ticks whose firing angle lies in the ROI interval (inclusive; an
        interval whose start is greater than its end wraps through 360 deg)."""
        if self.roi_deg is None:
            return np.zeros(self.ticks, bool)
        tick_angle = np.mod(self.start_azimuth_rad - self.tick_azimuth_rad, TWO_PI)
        tick_deg = np.where(tick_angle >= TWO_PI, 0.0, tick_angle) * (180.0 / math.pi)
        lo, hi = self.roi_deg
        if lo <= hi:
            return (tick_deg >= lo) & (tick_deg <= hi)
        return (tick_deg >= lo) | (tick_deg <= hi)

    @property
    def has_roi(self) -> bool:
        return self.roi_deg is not None and any(s.is_roi_state for s in self.states)


__all__ = ["NO_ROI_DEG", "FiringCells", "FiringPattern", "column_azimuths_rad", "firing_angle_rad"]
