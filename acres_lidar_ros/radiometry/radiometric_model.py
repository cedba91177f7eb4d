"""The radiometric model of one scanner: the sensor's validated blocks and the run's switches.

``BeamModel`` passes the ``SensorConfig`` on as it is (its ``radiometry``, ``weather`` and
``materials`` blocks were validated by the schema when the sensors file was loaded) and adds
only what the switches of a run decide and what is derived once: the atmosphere of the scan
(``weather.atmosphere``) and the detection threshold ``S_T`` (``physics.detection_threshold``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from acres_lidar_ros.config.schema import RETURNS_PER_BEAM
from acres_lidar_ros.config.sensors import SensorConfig
from acres_lidar_ros.radiometry.equations import detection_threshold
from acres_lidar_ros.radiometry.weather import CLEAR_AIR, Atmosphere, atmosphere, check_conditions
from acres_lidar_ros.radiometry.windows import CellWindows


@dataclass(frozen=True)
class BeamModel:
    """What the passes from hits to returns need of a sensor and a run.

    Attributes
    ----------
    config : SensorConfig
        The sensor; the passes read its blocks directly (``config.radiometry``,
        ``config.weather``, ``config.materials``, ``config.return_mode`` ...).
    noise : bool
        Shot noise and range noise (``-SensorNoNoise`` sets it false; the numbers are drawn
        either way, so the stream stays aligned).
    foliage_solid : bool
        Foliage stops the beam: ``tau = 0``, the sub-ray ends there, the echo stretch uses
        ``beta`` and the hit ends the clutter slabs.
    atmosphere : Atmosphere
        Rain and fog of the scans (clear air unless the run's and the sensor's weather are on).
    detection_threshold_counts : float
        ``S_T`` of ``config.radiometry``.
    windows : CellWindows or None
        Each beam's validity windows (``windows``; the scanner builds them from its pattern);
        None: the band ``min_range_m .. range_m`` for every beam.
    power_ratio : (N_c N_r,) float64 or None
        Each cell's emitter peak power over the sensor's (``lidar.peak_power_w``): the factor of
        its signal in the range equation (the attribute list's ``emitterPeakPowerW``); None where all are 1.
    truth : bool
        The passes keep what the per-cell truth output needs (``radiometry.truth``): the
        incidence of each contribution and echo, and what detection decided of each echo.
        Off, they keep nothing extra.
    """

    config: SensorConfig
    noise: bool
    foliage_solid: bool
    atmosphere: Atmosphere
    detection_threshold_counts: float
    windows: CellWindows | None = None
    power_ratio: np.ndarray | None = None
    truth: bool = False

    @classmethod
    def build(
        cls,
        config: SensorConfig,
        *,
        noise: bool = True,
        weather: bool = True,
        rain_mm_per_h: float = 0.0,
        visibility_m: float = math.inf,
        foliage_solid: bool = False,
        windows: CellWindows | None = None,
        power_ratio: np.ndarray | None = None,
        truth: bool = False,
    ) -> BeamModel:
        """The model of ``config`` under a run's switches.

        ``weather`` false gives clear air (the run's rule: ``ScanOptions.weather_on``, which
        holds ``-SensorLidarNoWeather``, ``-SensorLidarIdeal`` and the sensor's
        ``weather.enabled``; ``weather.atmosphere`` gives clear air for a disabled block too);
        the rain rate and the visibility are checked either way.

        Raises
        ------
        ConfigError
            For a rain rate outside [0, 500] mm/h or a visibility below 10 m.
        """
        check_conditions(rain_mm_per_h, visibility_m)
        if weather:
            atm = atmosphere(rain_mm_per_h, visibility_m, config.wavelength_nm, config.weather)
        else:
            atm = CLEAR_AIR
        rad = config.radiometry
        return cls(
            config=config,
            noise=bool(noise),
            foliage_solid=bool(foliage_solid),
            truth=bool(truth),
            atmosphere=atm,
            detection_threshold_counts=detection_threshold(
                rad.signal_at_10pct_counts, rad.ambient_counts, rad.detection_probability_at_spec
            ),
            windows=windows,
            power_ratio=power_ratio,
        )

    @property
    def returns_per_beam(self) -> int:
        """``R``: 1, 2 or 3 by the return mode."""
        return RETURNS_PER_BEAM[self.config.return_mode]

    @property
    def beams(self) -> int:
        """``N_c N_r``: the beams (cells) of a scan."""
        return self.config.columns * self.config.rings

    @property
    def has_clutter(self) -> bool:
        """Whether the scans have clutter slabs (backscatter from rain or fog, and slabs of
        some length)."""
        return self.atmosphere.has_clutter and self.config.min_return_separation_m > 0.0


def ring_major_cells(columns: int, rings: int) -> np.ndarray:
    """(rings * columns,) int64: the cell ``c N_r + r`` of each position ``r N_c + c`` of the
    ring-major sequence (ring outer, column inner)."""
    return (np.arange(columns)[None, :] * rings + np.arange(rings)[:, None]).ravel()


def ring_major_order(cells: np.ndarray, rings: int) -> np.ndarray:
    """``cells`` (n,) int64 (distinct cells ``c N_r + r``) sorted in the ring-major sequence
    (ring, then column): the order ``ring_major_cells`` restricted to them. One slice of a
    partial-output scan draws its numbers in this order (docs/outputs.md)."""
    cells = np.asarray(cells, dtype=np.int64)
    return cells[np.lexsort((cells // rings, cells % rings))]
