"""The options of a run's scans (``ScanOptions``): the switches of ACRES Core's FAcresLidarOptions
and the game's command-line flags, beside the sensors file (``scan.py`` re-exports it)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from acres_lidar_ros.config.schema import check_option
from acres_lidar_ros.config.sensors import SensorConfig
from acres_lidar_ros.errors import ConfigError


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
        return self.weather and not self.ideal and config.weather.enabled

    def motion_on(self, config: SensorConfig) -> bool:
        if self.ideal:
            return False
        return config.motion_distortion if self.motion_distortion is None else self.motion_distortion
