"""ACRES Core's LiDAR as a model of its own (ACRES Core's header ``FAcresLidar``; the spec's "The LiDAR of ACRES Core").

What it is, against the full model (the table of the spec):

* one sub-ray and one return per beam; a beam ends at its first solid hit (``core_cast``);
* a tree crown is one foliage layer, passed with its material's transmission by a hash of the
  beam's ``BeamKey`` (``core_cast.beam_keys``), and solid with ``foliage`` off;
* no crops or ground cover, no micro-slope, albedo texture, roughness, wetness, rain, fog or
  motion distortion: every beam of a scan is cast from the pose at the scan stamp;
* the divergence in the plane of incidence from each hit's normal (``equations.in_plane_divergence``
  with the sensor's up axis), and from it the echo stretch;
* the backscatter, the range equation, the detection threshold, the range noise and the
  intensity byte of the full model's equations (``radiometry.equations``);
* noise off by default (``bNoise``); on, ``n_1`` and ``n_2`` are ``hash_normal`` of a hash of the
  seed and the cell, so a cell's noise is the same in every scan of a seed;
* the vehicle's own body from the self-return table (``body.self_returns``), as the full model
  applies it (a hash per scan and cell).

The output is ``FAcresLidarScanOut``'s: ``range_m`` per cell (NaN without a return), ``points``
x y z intensity per cell in the sensor frame, the material code per cell and the count of returns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from acres_lidar_ros.body.self_returns import SelfReturnTable, decide_self_returns
from acres_lidar_ros.config.sensors import SensorConfig
from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.radiometry import equations as eq
from acres_lidar_ros.radiometry.noise import hash_normal, mix64
from acres_lidar_ros.scan.core_cast import LIDAR_NO_RETURN, LIDAR_SELF, CoreCaster, CoreHits, beam_keys
from acres_lidar_ros.scene.boxes import VehicleBox
from acres_lidar_ros.scene.scene_model import Scene
from acres_lidar_ros.sensor.pattern import BeamPattern

#: The noise hash's seed term: ``mix64(seed ^ NOISE_SALT)``, apart from the beam keys' ``mix64(seed)``.
NOISE_SALT = 0xC0DE5EED


@dataclass(frozen=True)
class CoreOptions:
    """``FAcresLidarOptions``: ``noise`` (bNoise, off), ``foliage`` (bFoliage), ``self_returns``
    (bSelfReturns) and the ``seed`` of the noise and the beam keys."""

    noise: bool = False
    foliage: bool = True
    self_returns: bool = True
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("noise", "foliage", "self_returns"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"core model {name} = {getattr(self, name)!r}: expected true or false")
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)) or self.seed < 0:
            raise ConfigError(f"core model seed = {self.seed!r}: expected an integer >= 0")


@dataclass(frozen=True)
class CoreBeams:
    """Every beam of one scan before the body is put in: its hit (``CoreHits``, world), the
    divergence in the plane of incidence ``beta_p`` (rad), the mean signal ``S`` and the measured
    ``S'`` (counts, equal without noise), the reported range (m) and reflectance, and whether it
    is detected (``S' >= S_T`` and ``R_min <= R <= R_max``)."""

    hits: CoreHits
    divergence_rad: np.ndarray
    signal_counts: np.ndarray
    measured_counts: np.ndarray
    range_m: np.ndarray
    reflectance: np.ndarray
    detected: np.ndarray


@dataclass(frozen=True)
class CoreScanOut:
    """One scan of ACRES Core's LiDAR, organised as the game's PCD (cell = column x rings + ring).

    Attributes
    ----------
    range_m : (cells,) float32, range along the beam from the lens centre, m; NaN without a return
    points : (cells, 4) float32, x y z (sensor frame, m; NaN without a return) and the intensity byte
    material : (cells,) uint8, the material code (``core_cast``: a scene material or a ``LIDAR_*`` code)
    returns : int, beams with a return
    range_exact_m : (cells,) float64, ``range_m`` before its rounding to float32
    beams : CoreBeams, each beam's hit and radiometry before the body was put in
    """

    range_m: np.ndarray
    points: np.ndarray
    material: np.ndarray
    returns: int
    range_exact_m: np.ndarray = field(repr=False)
    beams: CoreBeams = field(repr=False)


@dataclass(frozen=True)
class CoreRay:
    """``CastRay``'s answer for one ray: whether it hit, its range (m), the hit point and normal
    (world) and the material code."""

    hit: bool
    range_m: float
    point_world_m: np.ndarray
    normal_world: np.ndarray
    material: int


class CoreLidar:
    """ACRES Core's ray-cast LiDAR over a scene and dynamic boxes (``FAcresLidar``).

    Parameters
    ----------
    config : SensorConfig, the ``lidar`` block (pattern, mount, radiometry, materials)
    scene : Scene
    self_table : the sensor's self-return table, or None for a sensor without one
    T_scene_odom : (4, 4), optional
        The odom frame's pose in the scene (``tracing.scene_frame``): poses are in odom, the scene
        is met at ``T_scene_odom`` applied to them (``core_cast.CoreCaster``).
    """

    def __init__(
        self,
        config: SensorConfig,
        scene: Scene,
        self_table: SelfReturnTable | None = None,
        T_scene_odom: np.ndarray | None = None,
    ) -> None:
        if self_table is not None and (self_table.columns, self_table.rings) != (config.columns, config.rings):
            raise ConfigError(
                f"self_table {str(self_table.path or '')!r} is for {self_table.columns} x {self_table.rings}; "
                f"the sensor has {config.columns} x {config.rings}"
            )
        self.config = config
        self.self_table = self_table
        self.pattern = BeamPattern.from_config(config, sub_rays=1)
        self.caster = CoreCaster(scene, config.materials.transmission, config.pond_threshold_m, T_scene_odom)
        rad = config.radiometry
        self.threshold_counts = eq.detection_threshold(
            rad.signal_at_10pct_counts, rad.ambient_counts, rad.detection_probability_at_spec
        )
        self._directions = np.ascontiguousarray(self.pattern.directions_sensor).reshape(-1, 3)
        self._origins = np.ascontiguousarray(self.pattern.lens_origins_sensor).reshape(-1, 3)
        self._ring = np.tile(np.arange(config.rings), config.columns)

    @property
    def cells(self) -> int:
        return self.config.columns * self.config.rings

    def cast_ray(
        self,
        origin_m: np.ndarray,
        direction: np.ndarray,
        max_range_m: float,
        beam_key: int,
        boxes: Sequence[VehicleBox] = (),
        options: CoreOptions = CoreOptions(),
    ) -> CoreRay:
        """``CastRay``: the closest hit of one ray on the terrain, the scene (crowns passed per
        ``options.foliage`` and ``beam_key``) and the boxes."""
        d = np.asarray(direction, dtype=np.float64).reshape(3)
        norm = float(np.linalg.norm(d))
        if not norm > 0 or not np.isfinite(norm):
            raise ConfigError(f"cast_ray direction = {d.tolist()}: expected a finite, non-zero vector")
        if not max_range_m > 0:
            raise ConfigError(f"cast_ray max_range_m = {max_range_m!r}: expected > 0")
        o = np.asarray(origin_m, dtype=np.float64).reshape(1, 3)
        hits = self.caster.cast(
            o, (d / norm)[None], float(max_range_m), np.array([beam_key], np.uint64), boxes, options.foliage
        )
        r = float(hits.range_m[0])
        return CoreRay(
            bool(hits.hit[0]),
            r,
            (o[0] + r * d / norm) if hits.hit[0] else np.full(3, np.nan),
            hits.normal_world[0],
            int(hits.code[0]),
        )

    def scan(
        self,
        T_world_base: np.ndarray,
        index: int = 0,
        boxes: Sequence[VehicleBox] = (),
        options: CoreOptions = CoreOptions(),
    ) -> CoreScanOut:
        """``Scan``: every beam from the base pose ``T_world_base`` ((4, 4), world <- base_footprint FLU).

        ``index`` is the scan number (the beam keys and the body's hash).
        """
        beams = self.trace_beams(T_world_base, index, boxes, options)
        hits, detected = beams.hits, beams.detected
        range_m = beams.range_m
        rho_rep = beams.reflectance
        code = np.where(detected, hits.code, LIDAR_NO_RETURN).astype(np.uint8)
        range_m = np.where(detected, range_m, np.nan)
        intensity = np.where(detected, eq.intensity_byte(rho_rep), 0).astype(np.float64)
        table = self.self_table if options.self_returns else None
        if table is not None:
            decision = decide_self_returns(table, index, options.seed, self.config.std_m, options.noise)
            range_m[decision.blocked] = np.nan
            code[decision.blocked] = LIDAR_NO_RETURN
            intensity[decision.blocked] = 0.0
            body = decision.body_cells
            range_m[body] = decision.body_range_m[body]
            code[body] = LIDAR_SELF
            intensity[body] = table.intensity_byte[body]
        points = np.empty((self.cells, 4), np.float32)
        points[:, :3] = range_m[:, None] * self._directions + self._origins
        points[:, 3] = intensity
        return CoreScanOut(
            range_m=range_m.astype(np.float32),
            points=points,
            material=code,
            returns=int(np.isfinite(range_m).sum()),
            range_exact_m=range_m,
            beams=beams,
        )

    def trace_beams(
        self,
        T_world_base: np.ndarray,
        index: int = 0,
        boxes: Sequence[VehicleBox] = (),
        options: CoreOptions = CoreOptions(),
    ) -> CoreBeams:
        """Cast every beam of scan ``index`` from ``T_world_base`` and apply the radiometry."""
        T = np.asarray(T_world_base, dtype=np.float64)
        if T.shape != (4, 4) or not np.isfinite(T).all():
            raise ConfigError(f"T_world_base of shape {T.shape}: expected a finite (4, 4) transform")
        T_world_sensor = T @ self.pattern.T_base_sensor
        R, t = T_world_sensor[:3, :3], T_world_sensor[:3, 3]
        d_world = self._directions @ R.T
        o_world = self._origins @ R.T + t
        cells = np.arange(self.cells)
        keys = beam_keys(options.seed, index, cells)
        hits = self.caster.cast(o_world, d_world, self.config.range_m, keys, boxes, options.foliage)
        return self._radiometry(hits, d_world, R[:, 2], cells, options)

    def _radiometry(
        self, hits: CoreHits, d_world: np.ndarray, up_world: np.ndarray, cells: np.ndarray, options: CoreOptions
    ) -> CoreBeams:
        """Range, reported reflectance and detection of each beam's one hit."""
        cfg, rad, mat = self.config, self.config.radiometry, self.config.materials
        hit = hits.hit
        m = np.maximum(hits.material, 0)
        r_e = np.where(hit, hits.range_m, 1.0)
        cos_theta = np.abs(np.einsum("ij,ij->i", hits.normal_world, d_world))
        rho_e = eq.minnaert_backscatter(
            cos_theta, mat.reflectivity[m], mat.incidence_exponent[m], mat.specular[m], mat.specular_width_rad[m]
        )
        beta_p = eq.in_plane_divergence(
            hits.normal_world, d_world, up_world, cfg.beam_divergence_rad, cfg.beam_divergence_v_rad
        )
        g = eq.pulse_peak_factor(cfg.pulse_length_m, eq.footprint_range_spread_m(r_e, cos_theta, beta_p))
        signal = eq.signal_counts(
            rho_e, r_e, g, rad.signal_at_10pct_counts, rad.ring_range_at_10pct_m[self._ring], rad.overlap_range_m
        )
        measured, range_out = signal, r_e
        if options.noise:
            h = mix64(cells.astype(np.uint64) ^ np.uint64(mix64(int(options.seed) ^ NOISE_SALT)))
            n1, n2 = hash_normal(h), hash_normal(mix64(h))
            measured = signal + np.sqrt(np.maximum(signal + rad.ambient_counts, 0.0)) * n1
            sigma = eq.range_sigma_m(
                signal, rad.ambient_counts, rad.signal_at_10pct_counts, cfg.std_m, rad.range_std_low_snr_m
            )
            range_out = np.clip(r_e + sigma * n2, 0.0, cfg.range_m)
        detected = hit & (measured >= self.threshold_counts) & (r_e >= cfg.min_range_m) & (r_e <= cfg.range_m)
        with np.errstate(divide="ignore", invalid="ignore"):
            rho_rep = np.where(signal > 0, rho_e * np.maximum(measured, 0.0) / signal, 0.0)
        return CoreBeams(hits, beta_p, signal, measured, range_out, rho_rep, detected)
