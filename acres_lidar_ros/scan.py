"""One LiDAR scan (the ``Scan`` every output is made from) and the ``Scanner`` that traces it.

Cells are organised as the real driver lays them out: cell = column x rings + ring.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import Sequence

import numpy as np

from acres_lidar_ros.config import SensorConfig
from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.pattern import BeamPattern
from acres_lidar_ros.poses import PoseHistory
from acres_lidar_ros.returns import Returns, nearest_hit_returns
from acres_lidar_ros.schema import check_option
from acres_lidar_ros.timing import column_time_offset


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
    self_returns : apply the sensor's self-return table when it has one
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
    """

    def __init__(self, config: SensorConfig, scene=None, options: ScanOptions = ScanOptions(), tracer=None) -> None:
        from acres_lidar_ros.trace import Tracer

        if tracer is None and scene is None:
            raise ConfigError("Scanner needs a scene or a tracer")
        self.config = config
        self.options = options
        self.pattern = BeamPattern.from_config(config)
        self.tracer = tracer if tracer is not None else Tracer(scene)
        self._beam_directions = self.pattern.directions_sensor.reshape(-1, 3)
        self._lens_origins = np.repeat(self.pattern.lens_origins_sensor, config.rings, axis=0)
        self._beam_ring = np.tile(np.arange(config.rings), config.columns)
        self._self_table = self._load_self_table()
        self._streams = self._new_streams()
        self._beam_params = None  # built on the first radiometric scan
        self._beam_options = None
        self._next_index = 0
        self.timings_ms: dict[str, float] = {}

    # -- configuration ---------------------------------------------------------------------

    def _new_streams(self):
        if not self.options.radiometry:
            return None
        from acres_lidar_ros.beam_model import NoiseStreams

        return NoiseStreams(self.options.seed)

    def _load_self_table(self):
        if not (self.options.self_returns and self.config.self_returns is not None):
            return None
        from acres_lidar_ros.self_returns import load_self_table

        return load_self_table(self.config.self_returns, self.config.columns, self.config.rings)

    def set_options(self, **changes) -> None:
        """Change options between scans (validated); a new seed restarts the noise streams."""
        options = replace(self.options, **changes)
        reseed = options.seed != self.options.seed or options.radiometry != self.options.radiometry
        self.options = options
        self._beam_params = self._beam_options = None  # rebuilt on the next scan
        if reseed:
            self._streams = self._new_streams()
        if "self_returns" in changes:
            self._self_table = self._load_self_table()

    def set_runtime_config(self, overrides: dict) -> None:
        """Change sensors-file keys that need no rebuild (``schema`` marks them ``runtime``)."""
        from acres_lidar_ros.schema import LIDAR_PARAM

        fixed = [key for key in overrides if key in LIDAR_PARAM and not LIDAR_PARAM[key].runtime]
        if fixed:
            raise ConfigError(f"lidar.{fixed[0]} cannot change while running; runtime keys: "
                              + ", ".join(p.name for p in LIDAR_PARAM.values() if p.runtime))
        self.config = self.config.with_overrides(overrides)
        self._beam_params = self._beam_options = None

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

    def rays_world(self, T_world_sensor: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Origins and unit directions of every sub-ray in the world: two (n, 3) float64 arrays.

        Row ``(c * N_r + r) * S + j`` is sub-ray ``j`` of ring ``r`` of column ``c``.
        """
        R = T_world_sensor[:, :3, :3]
        t = T_world_sensor[:, :3, 3]
        per_column = self.config.rings * self.sub_rays
        sub = self.pattern.sub_directions_sensor.reshape(self.config.columns, per_column, 3)
        # Row vectors times R^T: a batched matmul (einsum is ten times slower here).
        directions = (sub @ R.transpose(0, 2, 1)).reshape(-1, 3)
        lens_world = (R @ self.pattern.lens_origins_sensor[:, :, None])[:, :, 0] + t  # (N_c, 3)
        origins = np.repeat(lens_world, per_column, axis=0)
        return origins, directions

    # -- the scan -----------------------------------------------------------------------------

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
        """
        config, options = self.config, self.options
        if index is None:
            index = self._next_index
        self._next_index = index + 1
        t0 = time.perf_counter()
        time_offset_s = self.time_offsets_s()
        T_world_base = poses.transforms(stamp_ns * 1e-9 + time_offset_s, extrapolate=extrapolate)
        T_world_sensor = T_world_base @ self.pattern.T_base_sensor
        origins, directions = self.rays_world(T_world_sensor)
        t1 = time.perf_counter()
        hits = self.tracer.trace(
            origins,
            directions,
            max_range_m=config.range_m,
            max_hits=config.max_hits_per_sub_ray,
            continue_step_m=config.continue_step_m,
            pond_threshold_m=config.pond_threshold_m,
            boxes=boxes,
            foliage_solid=not options.foliage,
        )
        t2 = time.perf_counter()
        returns = self._returns(hits, origins, directions, index)
        if self._self_table is not None:
            from acres_lidar_ros.self_returns import apply_self_returns

            returns = apply_self_returns(
                self._self_table, returns, scan_index=index, seed=options.seed,
                std_m=config.std_m, noise_on=options.noise,
            ).returns
        t3 = time.perf_counter()
        points = returns.range_m[..., None] * self._beam_directions[:, None, :] + self._lens_origins[:, None, :]
        t4 = time.perf_counter()
        weather = {
            "rain_mm_per_h": options.rain_mm_per_h if options.weather_on(config) else 0.0,
            "visibility_m": options.visibility_m if options.weather_on(config) else math.inf,
        }
        self.timings_ms = {
            "rays_ms": (t1 - t0) * 1e3,
            "trace_ms": (t2 - t1) * 1e3,
            "returns_ms": (t3 - t2) * 1e3,
            "points_ms": (t4 - t3) * 1e3,
        }
        return Scan(
            index=index,
            stamp_ns=int(stamp_ns),
            columns=config.columns,
            rings=config.rings,
            returns=returns,
            points_sensor=points,
            time_offset_s=time_offset_s,
            ring_rank=self.pattern.ring_rank,
            T_world_sensor=T_world_sensor,
            frame_id=config.frame_id,
            weather=weather,
        )

    def _returns(self, hits, origins: np.ndarray, directions: np.ndarray, index: int):
        config, options = self.config, self.options
        if not options.radiometry:
            return nearest_hit_returns(
                hits,
                self.pattern.sub_ray_weights,
                config.min_range_m,
                config.range_m,
                config.materials.reflectivity,
            )
        from acres_lidar_ros.beam_model import BeamModelOptions, BeamModelParams, process_beams

        if self._beam_params is None:
            self._beam_params = BeamModelParams.from_config(config)
            self._beam_options = BeamModelOptions.from_scan_options(options)
        return process_beams(
            hits, origins, directions, self.pattern.sub_ray_weights,
            self._beam_params, self._beam_options, self._streams, index,
        )
