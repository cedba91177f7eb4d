"""The per-beam radiometric model of the spec (AcresLidar::ProcessBeam), for a whole scan at once.

``process_beams`` changes the surface hits of every sub-ray of a scan into the returns of its
beams, without a Python loop over beams or echoes:

1. **Contributions.** Hits of a sub-ray are taken in range order; ``T`` is the product of the
   transmissions of the foliage hits in front (``T = 1`` at the start). A hit contributes
   ``P = w_j T^2 (1 - tau) rho_bs a``; foliage passes light (``tau`` of its material), a solid
   hit has ``tau = 0`` and ends the sub-ray. Hits behind the end and hits with ``P = 0``
   (no light comes back) form no echo.
2. **Ground relief and texture** (class ground only, each term off when its parameter is 0):
   micro-slope ``theta'`` from the 0.25 m cell normal (key ``seed``), albedo ``a`` from the 0.1 m
   cell normal (key ``seed + 1``), roughness from a normal of the (scan, beam, sub-ray) hash
   (``noise.roughness_normal``, key ``seed + 2``). Hashes, so the noise stream is untouched.
   ``theta'`` replaces ``theta`` for the backscatter, the roughness and the echo stretch.
3. **Echo stretch** ``g = L / sqrt(L^2 + (R tan theta beta_p)^2)`` with ``beta_p = beta_v`` for
   ground and ``beta`` for other solids; ``g = 1`` for foliage that passes light, for clutter and
   when ``L = 0``.
4. **Clutter** (rain and fog with clutter on): slabs of ``min_return_separation_m`` from
   ``min_range_m`` to the smallest of ``clutter_max_range_m``, ``range_m`` and the beam's nearest
   solid hit; ``P = rho_slab`` (the whole beam, ``g = 1``, no foliage transmission), class
   precipitation, material other. Slabs under the skip rule ``S + 5 sqrt(S + B) < S_T`` are
   dropped.
5. **Echoes.** All contributions of a beam in range order; an echo starts at the nearest
   contribution not yet in an echo and takes every contribution within
   ``min_return_separation_m`` of it (``R_i - R_first <= separation``). ``rho_e = sum P``,
   ``R_e`` and ``g_e`` are ``P``-weighted means; class, material and object are those of the
   largest contribution (the nearest one on a tie).
6. **Signal and detection.** ``S`` by the range equation (per-ring ``R10``, overlap, two-way
   extinction), ``S' = S + sqrt(S + B) n1``, detected when ``S' >= S_T`` and
   ``R_min <= R_e <= R_max``; ``R_meas = clamp(R_e + sigma_R n2, 0, R_max)``;
   ``rho_rep = rho_e max(0, S') / S_c`` with ``S_c = S e^{2 alpha R_e}``; signal
   ``min(S', S_sat)`` rounded half up to uint16 (negative gives 0); the intensity byte.
7. **Returns** by ``return_mode``, in range order, with the return_flags byte: a point that fills
   several functions (first and last of a single echo) carries all their bits; a mode's flags
   only name the functions that mode selects.

Noise: one PCG32 (``NoiseStreams.noise``: state seed + 2018, sequence 3). Each echo draws two
32-bit outputs, which give ``n1`` and ``n2`` as the cosine and sine branches of one Box-Muller
pair (``Pcg32.next_normal_pairs``, see ``noise``), echoes in range order,
beams in ring-major sequence: ring outer, column inner, i.e. the beam with ring ``r`` and column
``c`` is number ``r N_c + c`` of the sequence (the cells of the output are ``c N_r + r``). With
noise off the numbers are drawn all the same and not used, so the stream stays aligned.

Foliage option: with ``foliage_solid`` the tracer stops at foliage, and the model treats a
foliage hit as a solid surface: ``tau = 0`` (all the light that reaches it is reflected with
its ``rho_bs``), the sub-ray ends there, the echo stretch uses ``beta`` and the hit ends the
clutter slabs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

import numpy as np

from acres_lidar_ros.config.materials import CLASS_ID, IS_FOLIAGE_CLASS, MATERIAL_NAMES, MATERIAL_OF_CLASS
from acres_lidar_ros.config.sensors import MaterialTable
from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.radiometry.noise import NoiseStreams, place_normal, roughness_normal
from acres_lidar_ros.radiometry.physics import (
    MAX_TILT_RAD,
    detection_threshold,
    footprint_range_spread_m,
    intensity_byte,
    minnaert_backscatter,
    pulse_peak_factor,
    range_sigma_m,
    rough_range_sigma_m,
    signal_counts,
)
from acres_lidar_ros.radiometry.returns import (
    FLAG_FIRST,
    FLAG_LAST,
    FLAG_SECOND_STRONGEST,
    FLAG_STRONGEST,
    Returns,
)
from acres_lidar_ros.radiometry.weather import (
    CLEAR_AIR,
    Atmosphere,
    WeatherParams,
    atmosphere,
    check_conditions,
    clutter_slabs,
    mean_drops_in_slab,
    slab_drop_energy,
    slab_is_skipped,
    slab_reflectance,
)
from acres_lidar_ros.tracing.hits import NO_OBJECT, Hits

RETURN_MODES: dict[str, int] = {
    "strongest": 1,
    "first": 1,
    "last": 1,
    "dual_strongest_last": 2,
    "dual_first_last": 2,
    "triple_first_strongest_last": 3,
}
"""Return mode -> returns per beam ``R``."""

BACKENDS: tuple[str, ...] = ("numba", "numpy")
"""Implementations of ``process_beams``: compiled loops (``beam_kernel``) or numpy arrays."""

MICRO_SLOPE_CELL_M = 0.25
ALBEDO_CELL_M = 0.1
MIN_ROUGH_RANGE_M = 0.01
GROUND_CLASS = CLASS_ID["ground"]
PRECIPITATION_CLASS = CLASS_ID["precipitation"]
PRECIPITATION_MATERIAL = int(MATERIAL_OF_CLASS[PRECIPITATION_CLASS])
MAX_SIGNAL_COUNTS = 65535

_MATERIAL_FIELDS = tuple(f.name for f in fields(MaterialTable) if f.name != "names")


def sort_span_m(largest_range_m: float) -> float:
    """The ``span`` of the echo sort key ``beam * span + R``: the power of two above
    ``largest_range_m + 2`` m (both backends use it, so their ties agree)."""
    return 2.0 ** math.ceil(math.log2(largest_range_m + 2.0))


def _readonly(a: np.ndarray) -> np.ndarray:
    a = np.array(a, dtype=np.float64, copy=True)
    a.setflags(write=False)
    return a


@dataclass(frozen=True)
class MaterialParams(MaterialTable):
    """The sensor's ``MaterialTable`` checked for the model: (M,) finite, read-only float64
    arrays indexed by material number, each in the range the equations need.

    ``reflectivity`` (rho), ``specular`` (s), ``specular_width_rad`` (theta_s), ``transmission``
    (tau), ``wet_darkening`` (a_w), ``incidence_exponent`` (k), ``micro_slope_rad`` (sigma_t),
    ``reflectivity_sd`` (s_rho), ``roughness_m`` (sigma_h).
    """

    def __post_init__(self) -> None:
        n = len(MATERIAL_NAMES)
        for name in _MATERIAL_FIELDS:
            a = _readonly(getattr(self, name))
            if a.shape != (n,):
                raise ConfigError(f"materials.{name}: shape {a.shape}, expected ({n},) (one value per material)")
            if not np.all(np.isfinite(a)):
                raise ConfigError(f"materials.{name}: values must be finite, got {a.tolist()}")
            object.__setattr__(self, name, a)
        checks = {
            "reflectivity": (self.reflectivity >= 0.0, ">= 0"),
            "specular": (self.specular >= 0.0, ">= 0"),
            "specular_width_rad": (self.specular_width_rad >= 0.0, ">= 0"),
            "transmission": ((self.transmission >= 0.0) & (self.transmission < 1.0), "in [0, 1)"),
            "wet_darkening": (self.wet_darkening >= 0.0, ">= 0"),
            "incidence_exponent": (self.incidence_exponent >= 0.0, ">= 0"),
            "micro_slope_rad": (self.micro_slope_rad >= 0.0, ">= 0"),
            "reflectivity_sd": (self.reflectivity_sd >= 0.0, ">= 0"),
            "roughness_m": (self.roughness_m >= 0.0, ">= 0"),
        }
        for name, (ok, allowed) in checks.items():
            if not np.all(ok):
                bad = int(np.flatnonzero(~ok)[0])
                raise ConfigError(
                    f"materials.{MATERIAL_NAMES[bad]}.{name} = {getattr(self, name)[bad]!r}: must be {allowed}"
                )

    @classmethod
    def from_table(cls, table: object) -> MaterialParams:
        """From any object with the nine (M,) array attributes (``SensorConfig.material_table()``)."""
        return cls(
            names=tuple(getattr(table, "names", MATERIAL_NAMES)),
            **{name: np.asarray(getattr(table, name), dtype=np.float64) for name in _MATERIAL_FIELDS},
        )


@dataclass(frozen=True)
class BeamModelParams:
    """Sensor parameters of the radiometric model (spec "Parameters"), validated on creation.

    Attributes
    ----------
    columns, rings : int
        ``N_c``, ``N_r``; the beams of a scan are the cells ``c N_r + r``.
    min_range_m, range_m : float
        ``R_min`` and ``R_max``, m.
    std_m : float
        ``sigma_0``, m.
    wavelength_nm : float
    beam_divergence_rad, beam_divergence_v_rad : float
        ``beta`` and ``beta_v`` (already resolved: 0 in the file means ``beta``), rad.
    pulse_length_m : float
        ``L``, m (0: no echo stretch).
    min_return_separation_m : float
        Range width of an echo and length of a clutter slab, m.
    return_mode : str
        One of ``RETURN_MODES``.
    ring_range_at_10pct_m : (rings,) float64
        ``R10`` of each ring, m.
    signal_at_10pct_counts, ambient_counts : float
        ``S10`` and ``B``, counts.
    detection_probability_at_spec : float
        ``p_spec``.
    overlap_range_m : float
        ``R_ov``, m.
    saturation_counts : float
        ``S_sat``, counts.
    range_std_low_snr_m : float
        ``sigma_low``, m.
    weather : WeatherParams
    materials : MaterialParams
    detection_threshold_counts : float
        ``S_T``, derived.
    """

    columns: int
    rings: int
    min_range_m: float
    range_m: float
    std_m: float
    wavelength_nm: float
    beam_divergence_rad: float
    beam_divergence_v_rad: float
    pulse_length_m: float
    min_return_separation_m: float
    return_mode: str
    ring_range_at_10pct_m: np.ndarray
    signal_at_10pct_counts: float
    ambient_counts: float
    detection_probability_at_spec: float
    overlap_range_m: float
    saturation_counts: float
    range_std_low_snr_m: float
    weather: WeatherParams
    materials: MaterialParams
    detection_threshold_counts: float = field(init=False)

    def __post_init__(self) -> None:
        if self.return_mode not in RETURN_MODES:
            raise ConfigError(f"lidar.return_mode = {self.return_mode!r}: must be one of {sorted(RETURN_MODES)}")
        for key in ("columns", "rings"):
            value = getattr(self, key)
            if int(value) != value or value < 1:
                raise ConfigError(f"lidar.{key} = {value!r}: must be an integer >= 1")
        scalars = {
            "lidar.min_range_m": (self.min_range_m, 0.0),
            "lidar.range_m": (self.range_m, 0.0),
            "lidar.std_m": (self.std_m, 0.0),
            "lidar.wavelength_nm": (self.wavelength_nm, 0.0),
            "lidar.beam_divergence_mrad": (self.beam_divergence_rad, 0.0),
            "lidar.beam_divergence_v_mrad": (self.beam_divergence_v_rad, 0.0),
            "lidar.pulse_length_m": (self.pulse_length_m, 0.0),
            "lidar.min_return_separation_m": (self.min_return_separation_m, 0.0),
            "radiometry.signal_at_10pct_counts": (self.signal_at_10pct_counts, 0.0),
            "radiometry.ambient_counts": (self.ambient_counts, 0.0),
            "radiometry.overlap_range_m": (self.overlap_range_m, 0.0),
            "radiometry.saturation_counts": (self.saturation_counts, 0.0),
            "radiometry.range_std_low_snr_m": (self.range_std_low_snr_m, 0.0),
        }
        for key, (value, minimum) in scalars.items():
            if not (math.isfinite(value) and value >= minimum):
                raise ConfigError(f"{key} = {value!r}: must be a finite number >= {minimum:g}")
        if self.wavelength_nm <= 0.0:
            raise ConfigError(f"lidar.wavelength_nm = {self.wavelength_nm!r}: must be > 0")
        if self.min_range_m > self.range_m:
            raise ConfigError(
                f"lidar.min_range_m = {self.min_range_m!r}: must not exceed lidar.range_m = {self.range_m!r}"
            )
        r10 = _readonly(self.ring_range_at_10pct_m)
        if r10.shape != (self.rings,):
            raise ConfigError(
                f"radiometry.ring_range_at_10pct_m: {r10.shape[0] if r10.ndim == 1 else r10.shape} values, "
                f"expected one per ring ({self.rings})"
            )
        if not np.all(np.isfinite(r10) & (r10 > 0.0)):
            raise ConfigError(f"radiometry.ring_range_at_10pct_m = {r10.tolist()}: every value must be > 0")
        object.__setattr__(self, "ring_range_at_10pct_m", r10)
        object.__setattr__(self, "columns", int(self.columns))
        object.__setattr__(self, "rings", int(self.rings))
        threshold = detection_threshold(
            self.signal_at_10pct_counts, self.ambient_counts, self.detection_probability_at_spec
        )
        object.__setattr__(self, "detection_threshold_counts", threshold)

    @property
    def returns_per_beam(self) -> int:
        """``R``: 1, 2 or 3 by the return mode."""
        return RETURN_MODES[self.return_mode]

    @classmethod
    def from_config(cls, config: object) -> BeamModelParams:
        """From a ``SensorConfig`` (or any object with its attribute names; duck-typed).

        Reads ``columns, rings, min_range_m, range_m, std_m, wavelength_nm, beam_divergence_rad,
        beam_divergence_v_rad, pulse_length_m, min_return_separation_m, return_mode``, the
        ``radiometry`` block (``ring_range_at_10pct_m`` resolved per ring), the ``weather``
        block and ``material_table()``.
        """
        rad = config.radiometry
        return cls(
            columns=int(config.columns),
            rings=int(config.rings),
            min_range_m=float(config.min_range_m),
            range_m=float(config.range_m),
            std_m=float(config.std_m),
            wavelength_nm=float(config.wavelength_nm),
            beam_divergence_rad=float(config.beam_divergence_rad),
            beam_divergence_v_rad=float(config.beam_divergence_v_rad),
            pulse_length_m=float(config.pulse_length_m),
            min_return_separation_m=float(config.min_return_separation_m),
            return_mode=str(config.return_mode),
            ring_range_at_10pct_m=np.asarray(rad.ring_range_at_10pct_m, dtype=np.float64),
            signal_at_10pct_counts=float(rad.signal_at_10pct_counts),
            ambient_counts=float(rad.ambient_counts),
            detection_probability_at_spec=float(rad.detection_probability_at_spec),
            overlap_range_m=float(rad.overlap_range_m),
            saturation_counts=float(rad.saturation_counts),
            range_std_low_snr_m=float(rad.range_std_low_snr_m),
            weather=WeatherParams.from_config(config.weather),
            materials=MaterialParams.from_table(config.material_table()),
        )


@dataclass(frozen=True)
class BeamModelOptions:
    """Per-run switches of the model (the spec's command-line flags).

    Attributes
    ----------
    noise : bool
        Shot noise and range noise (``-SensorNoNoise`` sets it false). The numbers are drawn
        either way.
    weather : bool
        Rain and fog (``-SensorLidarNoWeather`` and ``-SensorLidarIdeal`` set it false); the
        sensor's ``weather.enabled`` must also be true.
    rain_mm_per_h : float
        ``R_r``, 0 to 500 mm/h.
    visibility_m : float
        ``V``, at least 10 m; ``inf`` is clear air.
    foliage_solid : bool
        Foliage stops the beam (see the module notes).
    """

    noise: bool = True
    weather: bool = True
    rain_mm_per_h: float = 0.0
    visibility_m: float = math.inf
    foliage_solid: bool = False

    def __post_init__(self) -> None:
        check_conditions(self.rain_mm_per_h, self.visibility_m)

    @classmethod
    def from_scan_options(cls, options: object) -> BeamModelOptions:
        """From the scanner's options (duck-typed: ``noise``, ``weather``, ``ideal``, ``foliage``,
        ``rain_mm_per_h``, ``visibility_m``). ``ideal`` switches the weather off and keeps the
        noise, as ``-SensorLidarIdeal`` does; ``foliage`` False makes foliage solid."""
        return cls(
            noise=bool(options.noise),
            weather=bool(options.weather) and not bool(getattr(options, "ideal", False)),
            rain_mm_per_h=float(options.rain_mm_per_h),
            visibility_m=float(options.visibility_m),
            foliage_solid=not bool(options.foliage),
        )


def scan_atmosphere(params: BeamModelParams, options: BeamModelOptions) -> Atmosphere:
    """The rain and fog a scan is traced with: clear air unless both switches are on."""
    if not (options.weather and params.weather.enabled):
        return CLEAR_AIR
    return atmosphere(options.rain_mm_per_h, options.visibility_m, params.wavelength_nm, params.weather)


def ring_major_cells(columns: int, rings: int) -> np.ndarray:
    """(rings * columns,) int64: the cell ``c N_r + r`` of each position ``r N_c + c`` of the
    ring-major sequence (ring outer, column inner)."""
    return (np.arange(columns)[None, :] * rings + np.arange(rings)[:, None]).ravel()


def _empty_returns(n_beams: int, slots: int) -> Returns:
    return Returns(
        range_m=np.full((n_beams, slots), np.nan),
        valid=np.zeros((n_beams, slots), bool),
        reflectivity=np.zeros((n_beams, slots)),
        signal=np.zeros((n_beams, slots), np.uint16),
        intensity=np.zeros((n_beams, slots), np.uint8),
        class_id=np.zeros((n_beams, slots), np.uint8),
        material_id=np.zeros((n_beams, slots), np.uint8),
        object_id=np.full((n_beams, slots), NO_OBJECT, np.int32),
        return_flags=np.zeros((n_beams, slots), np.uint8),
    )


def _segment_first_argmax(values: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Index of the first maximum of each contiguous segment ``[start, start + length)``.

    Segments must tile ``values`` in order and have lengths >= 1. Segments of one element (most
    of a scan) are answered directly; the segment reductions run only on the others.
    """
    result = starts.copy()
    multi = np.flatnonzero(lengths > 1)
    if multi.size == 0:
        return result
    m_len = lengths[multi]
    m_first = np.cumsum(m_len) - m_len  # starts inside the compact array
    member = np.repeat(starts[multi] - m_first, m_len) + np.arange(int(m_len.sum()))
    sub = values[member]
    peak = np.maximum.reduceat(sub, m_first)
    segment = np.repeat(np.arange(multi.size), m_len)
    candidate = np.where(sub == peak[segment], np.arange(sub.size), sub.size)
    result[multi] = member[np.minimum.reduceat(candidate, m_first)]
    return result


def _select_returns(
    mode: str,
    first: np.ndarray,
    last: np.ndarray,
    strongest: np.ndarray,
    second: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """The chosen echoes of each beam, merged and in range order.

    Inputs are (n,) indices into the range-ordered detected echoes (``second`` is -1 where the
    beam has one echo). Returns (n, C) indices (-1 for an empty slot, filled slots first) and
    (n, C) uint8 flags. Indices in range order equal echo order, so sorting them sorts by range.
    """
    none = np.full_like(first, -1)
    if mode == "strongest":
        columns = [(strongest, FLAG_STRONGEST)]
    elif mode == "first":
        columns = [(first, FLAG_FIRST)]
    elif mode == "last":
        columns = [(last, FLAG_LAST)]
    elif mode == "dual_first_last":
        columns = [(first, FLAG_FIRST), (last, FLAG_LAST)]
    elif mode == "triple_first_strongest_last":
        columns = [(first, FLAG_FIRST), (strongest, FLAG_STRONGEST), (last, FLAG_LAST)]
    elif mode == "dual_strongest_last":
        # The second strongest joins only when the strongest is the last.
        columns = [
            (np.where(strongest == last, second, none), FLAG_SECOND_STRONGEST),
            (strongest, FLAG_STRONGEST),
            (last, FLAG_LAST),
        ]
    else:  # guarded by BeamModelParams
        raise ConfigError(f"lidar.return_mode = {mode!r}: must be one of {sorted(RETURN_MODES)}")
    idx = np.stack([c for c, _ in columns], axis=1)
    flags = np.stack([np.where(c >= 0, f, 0) for c, f in columns], axis=1).astype(np.uint8)
    if len(columns) == 1:
        return idx, flags
    big = np.iinfo(np.int64).max
    order = np.argsort(np.where(idx >= 0, idx, big), axis=1, kind="stable")
    idx = np.take_along_axis(idx, order, axis=1)
    flags = np.take_along_axis(flags, order, axis=1)
    keep = idx >= 0
    for col in range(idx.shape[1] - 1, 0, -1):
        same = keep[:, col] & (idx[:, col] == idx[:, col - 1])
        flags[same, col - 1] |= flags[same, col]
        keep[same, col] = False
    idx = np.where(keep, idx, -1)
    flags = np.where(keep, flags, 0).astype(np.uint8)
    pack = np.argsort(~keep, axis=1, kind="stable")
    return np.take_along_axis(idx, pack, axis=1), np.take_along_axis(flags, pack, axis=1)


def process_beams(
    hits: Hits,
    ray_origins_world: np.ndarray,
    ray_directions_world: np.ndarray,
    weights: np.ndarray,
    params: BeamModelParams,
    options: BeamModelOptions,
    streams: NoiseStreams,
    scan_index: int,
    backend: str = "numba",
) -> Returns:
    """ProcessBeam for every beam of a scan: surface hits -> returns (see the module notes).

    Parameters
    ----------
    hits : Hits of shape (n_beams * S, K)
        Sub-ray ``j`` of beam ``b`` is row ``b * S + j``; beam ``b`` is the cell
        ``c * rings + r``, so ``n_beams = params.columns * params.rings``.
    ray_origins_world, ray_directions_world : (n_beams * S, 3) float64
        Origin (lens centre) and unit direction of each sub-ray in the world frame, m; only the
        x and y of ground hits ``o + R d`` are used (for the ground cells).
    weights : (S,) float64
        Energy weights ``w_j`` of the sub-rays.
    params : BeamModelParams
    options : BeamModelOptions
    streams : NoiseStreams
        The run's generators; ``streams.noise`` (and ``streams.rain`` in rain) advance.
        ``streams.seed`` keys the ground hashes.
    scan_index : int
        Scan number in the run, for the roughness hash.
    backend : str
        One of ``BACKENDS``: ``"numba"`` (default) runs the compiled loops of ``beam_kernel``,
        ``"numpy"`` this module's array code (the readable reference). Both give the same
        returns and advance the streams alike; float fields may differ by a few ulps (C library
        versus numpy SIMD transcendental functions).

    Returns
    -------
    Returns of shape (n_beams, R), ``R = params.returns_per_beam``.

    Raises
    ------
    ConfigError
        For an unknown ``backend``.
    ImportError
        For ``backend="numba"`` when numba cannot be imported (the kept error is the cause).
    """
    if backend not in BACKENDS:
        raise ConfigError(f"backend = {backend!r}: must be one of {sorted(BACKENDS)}")
    weights = np.asarray(weights, dtype=np.float64)
    n_sub = weights.size
    n_rows, k_slots = hits.shape
    n_rings, n_columns = params.rings, params.columns
    n_beams = n_rings * n_columns
    if n_sub < 1 or n_rows != n_beams * n_sub:
        raise ValueError(
            f"hits have {n_rows} rows; expected columns * rings * sub_rays = {n_columns} * {n_rings} * {n_sub}"
        )
    origins = np.asarray(ray_origins_world, dtype=np.float64)
    directions = np.asarray(ray_directions_world, dtype=np.float64)
    if origins.shape != (n_rows, 3) or directions.shape != (n_rows, 3):
        raise ValueError(f"ray origins {origins.shape} and directions {directions.shape} must both be ({n_rows}, 3)")
    atm = scan_atmosphere(params, options)
    if backend == "numba":
        from acres_lidar_ros.radiometry.beam_kernel import process_beams_compiled

        return process_beams_compiled(hits, origins, directions, weights, params, options, atm, streams, scan_index)
    mats = params.materials
    alpha = atm.alpha_per_m
    slots = params.returns_per_beam

    # --- 1. Which hits contribute, and the foliage transmission in front of each. ---
    # Valid slots are a prefix of each row (the Hits contract), so in the flat list of valid
    # hits the hit in front of slot k > 0 is the previous entry.
    flat = np.flatnonzero(hits.valid.ravel())
    slot = flat % k_slots
    cls = hits.class_id.ravel()[flat]
    mat = hits.material_id.ravel()[flat].astype(np.intp)
    if options.foliage_solid:
        passes = np.zeros(flat.size, bool)
    else:
        passes = IS_FOLIAGE_CLASS[cls]
    tau_hit = np.where(passes, mats.transmission[mat], 0.0)
    t_hit = np.ones(flat.size)
    for k in range(1, k_slots):
        at = np.flatnonzero(slot == k)
        if at.size == 0:
            break
        t_hit[at] = t_hit[at - 1] * tau_hit[at - 1]
    reached = np.flatnonzero(t_hit > 0.0)  # hits behind a solid surface get no light
    if reached.size != flat.size:
        flat, cls, mat, passes, tau_hit, t_hit = (
            flat[reached],
            cls[reached],
            mat[reached],
            passes[reached],
            tau_hit[reached],
            t_hit[reached],
        )
    row = flat // k_slots
    beam = row // n_sub
    sub_ray = row - beam * n_sub
    range_m = hits.range_m.ravel()[flat]
    if range_m.size and not (np.all(range_m >= 0.0) and np.all(np.isfinite(range_m))):
        raise ValueError("hits: every valid hit needs a finite range_m >= 0")
    cos_theta = np.clip(np.abs(hits.cos_incidence.ravel()[flat]), 0.0, 1.0)
    albedo = np.ones(flat.size)

    # --- 2. Ground relief and texture. ---
    ground = np.flatnonzero(cls == GROUND_CLASS)
    is_ground = np.zeros(flat.size, bool)
    is_ground[ground] = True
    if ground.size:
        g_mat = mat[ground]
        g_row = row[ground]
        g_range = range_m[ground]
        point_x = origins[g_row, 0] + g_range * directions[g_row, 0]
        point_y = origins[g_row, 1] + g_range * directions[g_row, 1]
        sigma_t = mats.micro_slope_rad[g_mat]
        tilt = np.flatnonzero(sigma_t > 0.0)
        theta = np.arccos(cos_theta[ground])
        if tilt.size:
            z_slope = place_normal(point_x[tilt], point_y[tilt], MICRO_SLOPE_CELL_M, streams.seed)
            theta[tilt] = theta[tilt] + sigma_t[tilt] * z_slope
        g_cos = np.cos(np.clip(theta, 0.0, MAX_TILT_RAD))
        cos_theta[ground] = g_cos
        s_rho = mats.reflectivity_sd[g_mat]
        tex = np.flatnonzero(s_rho > 0.0)
        if tex.size:
            z_albedo = place_normal(point_x[tex], point_y[tex], ALBEDO_CELL_M, streams.seed + 1)
            albedo[ground[tex]] = np.exp(s_rho[tex] * z_albedo - 0.5 * s_rho[tex] ** 2)
        sigma_h = mats.roughness_m[g_mat]
        rough = np.flatnonzero(sigma_h > 0.0)
        if rough.size:
            hit = ground[rough]
            z_rough = roughness_normal(streams.seed, scan_index, beam[hit], sub_ray[hit])
            moved = g_range[rough] + rough_range_sigma_m(sigma_h[rough], g_cos[rough]) * z_rough
            range_m[hit] = np.maximum(MIN_ROUGH_RANGE_M, moved)

    # --- Contribution and echo stretch of each hit. ---
    rho_bs = minnaert_backscatter(
        cos_theta,
        mats.reflectivity[mat],
        mats.incidence_exponent[mat],
        mats.specular[mat],
        mats.specular_width_rad[mat],
        mats.wet_darkening[mat],
        hits.wetness.ravel()[flat],
    )
    power = weights[sub_ray] * t_hit * t_hit * (1.0 - tau_hit) * rho_bs * albedo
    if params.pulse_length_m > 0.0:
        divergence = np.where(is_ground, params.beam_divergence_v_rad, params.beam_divergence_rad)
        stretch = pulse_peak_factor(params.pulse_length_m, footprint_range_spread_m(range_m, cos_theta, divergence))
        peak = np.where(passes, 1.0, stretch)
    else:
        peak = np.ones(flat.size)
    obj = hits.object_id.ravel()[flat]
    cls = cls.astype(np.uint8)
    mat_out = mat.astype(np.uint8)

    # --- 4. Clutter slabs of rain and fog. ---
    if atm.has_clutter:
        c_beam, c_range, c_power = _clutter(params, atm, streams, beam, range_m, passes)
        if c_beam.size:
            beam = np.concatenate([beam, c_beam])
            range_m = np.concatenate([range_m, c_range])
            power = np.concatenate([power, c_power])
            peak = np.concatenate([peak, np.ones(c_beam.size)])
            cls = np.concatenate([cls, np.full(c_beam.size, PRECIPITATION_CLASS, np.uint8)])
            mat_out = np.concatenate([mat_out, np.full(c_beam.size, PRECIPITATION_MATERIAL, np.uint8)])
            obj = np.concatenate([obj, np.full(c_beam.size, NO_OBJECT, np.int32)])

    lit = np.flatnonzero(power > 0.0)
    if lit.size == 0:
        return _empty_returns(n_beams, slots)

    # --- 5. Echo formation: contributions by beam, then range. ---
    beam, range_m, power, peak = beam[lit], range_m[lit], power[lit], peak[lit]
    cls, mat_out, obj = cls[lit], mat_out[lit], obj[lit]
    # beam * span + R with span a power of two above every range: exact beam part, and rounding
    # of the sum is monotone, so the stable sort is by beam then range (ties keep input order).
    # The span covers the sensor's maximum range (a scan's blocks then share one span) and any
    # range beyond it (roughness can push a hit past it).
    span = sort_span_m(max(float(range_m.max()), float(params.range_m)))
    sort_key = beam * span + range_m
    if sort_key.size > 1 and not np.all(sort_key[1:] >= sort_key[:-1]):  # often sorted already
        order = np.argsort(sort_key, kind="stable")
        beam, range_m, power, peak = beam[order], range_m[order], power[order], peak[order]
        cls, mat_out, obj = cls[order], mat_out[order], obj[order]

    count = np.bincount(beam, minlength=n_beams)
    start = np.cumsum(count) - count
    new_echo = np.zeros(beam.size, bool)
    echo_first_m = np.zeros(n_beams)
    active = np.flatnonzero(count > 0)
    separation = params.min_return_separation_m
    for m in range(int(count.max())):
        active = active[count[active] > m]
        pos = start[active] + m
        r = range_m[pos]
        opens = np.ones(active.size, bool) if m == 0 else r > echo_first_m[active] + separation
        echo_first_m[active] = np.where(opens, r, echo_first_m[active])
        new_echo[pos] = opens
    echo_start = np.flatnonzero(new_echo)
    rho_e = np.add.reduceat(power, echo_start)
    range_e = np.add.reduceat(power * range_m, echo_start) / rho_e
    peak_e = np.add.reduceat(power * peak, echo_start) / rho_e
    echo_length = np.diff(np.append(echo_start, beam.size))
    largest = _segment_first_argmax(power, echo_start, echo_length)
    e_beam = beam[echo_start]
    e_cls, e_mat, e_obj = cls[largest], mat_out[largest], obj[largest]
    n_echo = echo_start.size

    # --- Noise: n1, n2 per echo; echoes in range order, beams in ring-major sequence. ---
    echo_count = np.bincount(e_beam, minlength=n_beams)
    first_echo = np.cumsum(echo_count) - echo_count
    rank = np.arange(n_echo) - first_echo[e_beam]
    cells_rm = ring_major_cells(n_columns, n_rings)
    count_rm = echo_count[cells_rm]
    offset_rm = np.cumsum(count_rm) - count_rm
    ring = e_beam % n_rings
    position_rm = ring * n_columns + e_beam // n_rings
    draw = offset_rm[position_rm] + rank
    n1_drawn, n2_drawn = streams.noise.next_normal_pairs(n_echo)
    n1 = n1_drawn[draw]
    n2 = n2_drawn[draw]

    # --- 6. Signal, detection, range noise, brightness. ---
    ambient = params.ambient_counts
    clear_signal = signal_counts(
        rho_e,
        range_e,
        peak_e,
        params.signal_at_10pct_counts,
        params.ring_range_at_10pct_m[ring],
        params.overlap_range_m,
    )
    signal = clear_signal * np.exp(-2.0 * alpha * range_e) if alpha > 0.0 else clear_signal
    if options.noise:
        measured = signal + np.sqrt(np.maximum(signal + ambient, 0.0)) * n1
        sigma_r = range_sigma_m(
            signal, ambient, params.signal_at_10pct_counts, params.std_m, params.range_std_low_snr_m
        )
        range_meas = np.clip(range_e + sigma_r * n2, 0.0, params.range_m)
    else:
        measured = signal
        range_meas = np.clip(range_e, 0.0, params.range_m)
    detected = (
        (measured >= params.detection_threshold_counts) & (range_e >= params.min_range_m) & (range_e <= params.range_m)
    )
    det = np.flatnonzero(detected)
    if det.size == 0:
        return _empty_returns(n_beams, slots)

    # --- 7. Return selection among the detected echoes (beam-major, range order). ---
    d_beam = e_beam[det]
    d_measured = measured[det]
    d_count = np.bincount(d_beam, minlength=n_beams)
    lit_beams = np.flatnonzero(d_count > 0)
    d_start = (np.cumsum(d_count) - d_count)[lit_beams]
    d_n = d_count[lit_beams]
    first = d_start
    last = d_start + d_n - 1
    mode = params.return_mode
    if mode in ("strongest", "dual_strongest_last", "triple_first_strongest_last"):
        strongest = _segment_first_argmax(d_measured, d_start, d_n)
    else:
        strongest = first
    if mode == "dual_strongest_last":
        others = d_measured.copy()
        others[strongest] = -np.inf
        second = np.where(d_n >= 2, _segment_first_argmax(others, d_start, d_n), -1)
    else:
        second = np.full(lit_beams.size, -1)
    chosen, flags = _select_returns(mode, first, last, strongest, second)
    chosen, flags = chosen[:, :slots], flags[:, :slots]
    lit_row, slot_col = np.nonzero(chosen >= 0)
    pick = det[chosen[lit_row, slot_col]]  # echo of each return
    cell = lit_beams[lit_row]

    out = _empty_returns(n_beams, slots)
    at = cell * slots + slot_col  # flat index into the (n_beams, slots) arrays
    ret_measured = measured[pick]
    ret_clear = clear_signal[pick]
    with np.errstate(divide="ignore", invalid="ignore"):
        ret_reflectivity = np.where(ret_clear > 0.0, rho_e[pick] * np.maximum(ret_measured, 0.0) / ret_clear, 0.0)
    out.range_m.reshape(-1)[at] = range_meas[pick]
    out.valid.reshape(-1)[at] = True
    out.reflectivity.reshape(-1)[at] = ret_reflectivity
    out.signal.reshape(-1)[at] = np.floor(
        np.clip(ret_measured, 0.0, min(params.saturation_counts, MAX_SIGNAL_COUNTS)) + 0.5
    )
    out.intensity.reshape(-1)[at] = intensity_byte(ret_reflectivity)
    out.class_id.reshape(-1)[at] = e_cls[pick]
    out.material_id.reshape(-1)[at] = e_mat[pick]
    out.object_id.reshape(-1)[at] = e_obj[pick]
    out.return_flags.reshape(-1)[at] = flags[lit_row, slot_col]
    return out


def _clutter(
    params: BeamModelParams,
    atm: Atmosphere,
    streams: NoiseStreams,
    hit_beam: np.ndarray,
    hit_range_m: np.ndarray,
    hit_passes: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Clutter contributions of every beam: (beam cell, centre range m, rho_slab) of the slabs
    that survive the skip rule. Slabs are listed and drawn in ring-major beam order."""
    n_rings, n_columns = params.rings, params.columns
    n_beams = n_rings * n_columns
    nearest_solid = np.full(n_beams, np.inf)
    solid = ~hit_passes
    np.minimum.at(nearest_solid, hit_beam[solid], hit_range_m[solid])
    stop = np.minimum(nearest_solid, min(params.weather.clutter_max_range_m, params.range_m))
    cells_rm = ring_major_cells(n_columns, n_rings)
    slab_rm, center_m = clutter_slabs(stop[cells_rm], params.min_range_m, params.min_return_separation_m)
    if slab_rm.size == 0:
        return np.zeros(0, np.int64), np.zeros(0), np.zeros(0)
    cell = cells_rm[slab_rm]
    slab_length = params.min_return_separation_m
    if atm.drop_density_per_m3 > 0.0:
        mean_drops = mean_drops_in_slab(
            atm.drop_density_per_m3, params.weather.exit_diameter_m, center_m, params.beam_divergence_rad, slab_length
        )
        energy = slab_drop_energy(streams.rain, mean_drops)
    else:
        mean_drops = np.zeros(cell.size)
        energy = np.zeros(cell.size)
    rho_slab = slab_reflectance(atm.beta_fog_per_m_sr, atm.beta_rain_per_m_sr, slab_length, mean_drops, energy)
    signal = signal_counts(
        rho_slab,
        center_m,
        1.0,
        params.signal_at_10pct_counts,
        params.ring_range_at_10pct_m[cell % n_rings],
        params.overlap_range_m,
        atm.alpha_per_m,
    )
    keep = ~slab_is_skipped(signal, params.ambient_counts, params.detection_threshold_counts)
    return cell[keep], center_m[keep], rho_slab[keep]
