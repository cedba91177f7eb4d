"""One LiDAR scan (the ``Scan`` every output is made from) and the options a scan is traced with.

Cells are organised as the real driver lays them out: cell = column x rings + ring, where a
column is a tick of the firing pattern and a ring an emitter (``sensor.emitters``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from acres_lidar_ros.config.schema import check_option
from acres_lidar_ros.config.sensors import SensorConfig
from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.radiometry.cell_truth import CellTruth
from acres_lidar_ros.radiometry.returns import Returns
from acres_lidar_ros.sensor.emitters import FiringCells


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
        ``N_c`` and ``N_r``: the ticks and the emitters of the firing pattern.
    returns : Returns of shape (columns * rings, R)
    points_sensor : (columns * rings, R, 3) float64
        Point ``p = R d + o`` in the sensor frame at its own firing time, m; NaN where the slot
        has no return.
    time_offset_s : (columns,) float64
        ``dt_c``: firing time of column ``c`` minus the stamp, s (``-T <= dt_c < 0``; 0 without
        motion distortion). Where a tick's emitters fire at different times (``fire_time_s``),
        the tick's start.
    ring_rank : (rings,) uint16
        Rank of each ring's elevation, 0 = lowest (rslidar_sdk's ``ring`` field).
    T_world_sensor : (columns, 4, 4) float64
        Sensor pose at each column's ``time_offset_s`` (maps sensor coordinates into the world).
    frame_id : str
        Frame name of the cloud.
    weather : dict
        ``rain_mm_per_h`` and ``visibility_m`` the scan was traced with.
    fire_time_s : (columns * rings,) float64 or None
        Each cell's delay after its column's ``time_offset_s``, s, where the emitters of a tick
        fire at different times; None where every emitter of a column fires at its time.
    emitter_T_world_sensor : (columns * rings, 4, 4) float64 or None
        With ``fire_time_s``: the sensor pose at each cell's own firing time.
    cells : FiringCells or None
        The firing pattern's cells the scan was traced with (channel ids, firing angles, range
        regions ...); None for a scan built by hand.
    truth : CellTruth or None
        Why each beam gave a return or none (``radiometry.truth``), with ``ScanOptions.truth``.
    timings_ms : dict
        What tracing the scan took, ms: ``rays_ms``, ``trace_ms``, ``returns_ms`` (the
        radiometry of the blocks while they were traced and of the finish, the self returns and
        the truth), ``points_ms``; empty for a scan built by hand. Not compared.
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
    fire_time_s: np.ndarray | None = None
    truth: CellTruth | None = None
    emitter_T_world_sensor: np.ndarray | None = None
    cells: FiringCells | None = field(default=None, repr=False)
    timings_ms: dict[str, float] = field(default_factory=dict, repr=False, compare=False)

    @property
    def stamp_s(self) -> float:
        return self.stamp_ns * 1e-9

    @property
    def cell_time_offset_s(self) -> np.ndarray:
        """(columns * rings,) float64: each cell's own firing time minus the stamp, s."""
        per_column = np.repeat(np.asarray(self.time_offset_s, dtype=np.float64), self.rings)
        return per_column if self.fire_time_s is None else per_column + self.fire_time_s

    def T_world_sensor_of(self, cells: np.ndarray) -> np.ndarray:
        """(n, 4, 4) float64: the sensor pose at the firing time of each of ``cells``."""
        cells = np.asarray(cells, dtype=np.int64)
        if self.emitter_T_world_sensor is not None:
            return self.emitter_T_world_sensor[cells]
        return np.asarray(self.T_world_sensor)[cells // self.rings]

    @property
    def cell_column(self) -> np.ndarray:
        """(columns * rings,) uint16: column of each cell."""
        return np.repeat(np.arange(self.columns, dtype=np.uint16), self.rings)

    @property
    def cell_ring(self) -> np.ndarray:
        """(columns * rings,) uint16: ring (driver index) of each cell."""
        return np.tile(np.arange(self.rings, dtype=np.uint16), self.columns)


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
    truth : each scan carries its cell truth (``Scan.truth``); needs radiometry
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
    truth: bool = False

    def __post_init__(self) -> None:
        for name in ("rain_mm_per_h", "visibility_m", "noise", "seed"):
            object.__setattr__(self, name, check_option(name, getattr(self, name)))
        for name in ("foliage", "radiometry", "self_returns", "weather", "ideal", "truth"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} = {getattr(self, name)!r}: expected true or false")
        if self.truth and not self.radiometry:
            raise ConfigError(
                "truth = true needs radiometry = true: without it no echo is detected, so none is dropped"
            )
        if self.motion_distortion is not None and not isinstance(self.motion_distortion, bool):
            raise ConfigError(f"motion_distortion = {self.motion_distortion!r}: expected true, false or null")

    def weather_on(self, config: SensorConfig) -> bool:
        """Whether a scan of ``config`` has rain and fog: the one rule (``weather`` on, not
        ``ideal``, and the sensor's ``weather.enabled``)."""
        return self.weather and not self.ideal and config.weather.enabled

    def motion_on(self, config: SensorConfig) -> bool:
        if self.ideal or config.outputs.instant:  # instant: the whole scan at the stamp pose
            return False
        return config.motion_distortion if self.motion_distortion is None else self.motion_distortion
