"""Every key of the sensors file, declared once (spec "Parameters", "Materials of sensors.json").

A ``Param`` carries the name, type, unit, default, allowed range and description of one key.
The JSON loader (``config.py``), the ROS 2 parameter descriptors of the node, the validation
messages and the README's parameter table all come from ``LIDAR_PARAMS``, ``MATERIAL_PARAMS``
and ``OPTION_PARAMS``.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from acres_lidar_ros.config.output_options import output_params
from acres_lidar_ros.config.param import Param
from acres_lidar_ros.config.spectral_library import LIBRARY_SAMPLES

RETURNS_PER_BEAM: dict[str, int] = {
    "strongest": 1,
    "first": 1,
    "last": 1,
    "dual_strongest_last": 2,
    "dual_first_last": 2,
    "triple_first_strongest_last": 3,
}
"""Each return mode (spec "Return Mode") and the returns per beam ``R`` it gives."""

RETURN_MODES: tuple[str, ...] = tuple(RETURNS_PER_BEAM)
DETECTION_MODELS: tuple[str, ...] = ("spec", "reflectance_limit")
POINT_TYPE_NAMES: tuple[str, ...] = ("XYZI", "XYZIRT", "XYZIRT_labels", "velodyne", "ouster", "nebula", "hesai")
"""The point layouts by name (``outputs.point_types.PROFILES`` holds their dtypes, in this order):
the config layer validates ``point_type`` against them."""
MAX_RANGE_REGIONS = 64
"""Most range regions (``range_count``, ``ranges_min_m``, ``ranges_max_m``)."""


def P(name: str, kind: str, default: Any, unit: str = "", **kw: Any) -> Param:
    return Param(name=name, kind=kind, default=default, unit=unit, **kw)


# The lidar block, in the order of the spec's table. Dotted names are nested objects.
LIDAR_PARAMS: tuple[Param, ...] = (
    P("enabled", "bool", True, description="Records the LiDAR."),
    P(
        "scan_type",
        "str",
        "rotary",
        choices=("rotary", "solid_state"),
        description="Rotary (ticks around a rotation) or solid state (one tick per scan; needs lidar.emitters).",
    ),
    P(
        "peak_power_w",
        "float",
        10.0,
        "W",
        low=0,
        high=1e6,
        low_open=True,
        description="Reference peak power; an emitter's peak_power_w scales its signal by the ratio.",
    ),
    P("hz", "float", 10.0, "Hz", low=1, high=120, description="The scan rate."),
    P("columns", "int", 180, low=4, high=3600, description="N_c, columns (azimuth steps per turn)."),
    P("rings", "int", 8, low=1, high=128, description="N_r without an elevation table."),
    P("elevation_min_deg", "float", -20.0, "deg", low=-90, high=90, description="Lowest ring without a table."),
    P("elevation_max_deg", "float", 10.0, "deg", low=-90, high=90, description="Highest ring without a table."),
    P(
        "elevations_deg",
        "float_list",
        None,
        "deg",
        nullable=True,
        low=-90,
        high=90,
        description="Elevation of each ring in the sensor's ring order; sets N_r.",
    ),
    P("azimuth_order", "str", "ccw", choices=("ccw", "cw"), description="Direction of the column index."),
    P(
        "azimuth_offsets_deg",
        "float_list",
        None,
        "deg",
        nullable=True,
        low=-30,
        high=30,
        description="delta_r, azimuth offset of each ring (counter-clockwise).",
    ),
    P("lens_center_m", "float", 0.0, "m", low=0, high=0.5, description="l, lens centre distance from the spin axis."),
    P("range_m", "float", 60.0, "m", low=1, high=200, description="R_max, maximum range."),
    P("min_range_m", "float", 0.5, "m", low=0, high=200, description="R_min, minimum range (below range_m)."),
    # Windows and limits (the attribute list; docs/sensors.md "Windows and limits"): validated together by config.limits.
    P(
        "range_count",
        "int",
        0,
        low=0,
        high=MAX_RANGE_REGIONS,
        description="Range regions of ranges_min_m / ranges_max_m (0 counts as 1); an emitter's range_id picks one.",
        runtime=True,
    ),
    P(
        "ranges_min_m",
        "float_array",
        None,
        "m",
        low=0,
        high=200,
        max_items=MAX_RANGE_REGIONS,
        nullable=True,
        description="Near limit of each range region; with ranges_max_m it replaces min_range_m .. range_m.",
        runtime=True,
    ),
    P(
        "ranges_max_m",
        "float_array",
        None,
        "m",
        low=0,
        high=200,
        max_items=MAX_RANGE_REGIONS,
        nullable=True,
        description="Far limit of each range region (range_m still ends the trace).",
        runtime=True,
    ),
    P(
        "valid_start_azimuth_deg",
        "float",
        0.0,
        "deg",
        low=0,
        high=360,
        description="Start of the valid azimuth window, on the firing angle (clockwise from forward); rotary only.",
        runtime=True,
    ),
    P(
        "valid_end_azimuth_deg",
        "float",
        360.0,
        "deg",
        low=0,
        high=360,
        description="End of the valid azimuth window; a start above the end wraps through 360 deg.",
        runtime=True,
    ),
    P(
        "range_offset_m",
        "float",
        0.0,
        "m",
        low=0,
        high=200,
        description="The trace starts this far along each ray (a sensor in a housing); ranges stay from the emitter.",
        runtime=True,
    ),
    P(
        "separation_near_limit",
        "bool",
        False,
        description="min_return_separation_m is a second near limit (the attribute list): a firing whose first echo is "
        "nearer reports nothing.",
        runtime=True,
    ),
    P("std_m", "float", 0.02, "m", low=0, high=1, description="sigma_0, range noise at high SNR.", runtime=True),
    P(
        "position_flu_m",
        "float_list",
        [0.0, 0.0, 1.9],
        "m",
        low=-100,
        high=100,
        length=3,
        description="Position in the mount frame (base_footprint FLU).",
    ),
    P(
        "rpy_deg",
        "float_list",
        [0.0, 0.0, 0.0],
        "deg",
        low=-180,
        high=180,
        length=3,
        description="Roll, pitch, yaw of the mount (R = Rz Ry Rx).",
    ),
    P("wavelength_nm", "float", 905.0, "nm", low=200, high=2500, description="lambda, for the fog extinction."),
    P("beam_divergence_mrad", "float", 3.0, "mrad", low=0, high=20, description="beta, full-angle divergence."),
    P(
        "beam_divergence_v_mrad",
        "float",
        0.0,
        "mrad",
        low=0,
        high=20,
        description="beta_v, vertical divergence; 0 gives beta_v = beta.",
    ),
    P("pulse_length_m", "float", 0.0, "m", low=0, high=100, description="L; 0 sets the echo stretch off."),
    P("sub_rays", "int", 7, int_values=(1, 7), description="Sub-rays per beam: 1 or 7."),
    P("max_hits_per_sub_ray", "int", 4, low=1, high=8, description="K, hits of one sub-ray."),
    P(
        "continue_step_m",
        "float",
        0.25,
        "m",
        low=0,
        high=10,
        low_open=True,
        description="Distance behind a foliage hit where the search continues.",
    ),
    P(
        "min_return_separation_m",
        "float",
        0.75,
        "m",
        low=0,
        high=100,
        low_open=True,
        description="Range width of an echo.",
    ),
    P(
        "return_mode",
        "str",
        "dual_strongest_last",
        choices=RETURN_MODES,
        description="Echoes that become points.",
        runtime=True,
    ),
    P("pond_threshold_m", "float", 0.003, "m", low=0, high=10, description="Water depth that makes ground water."),
    P("motion_distortion", "bool", True, description="A firing time for each column.", runtime=True),
    P("spin_direction", "str", "cw", choices=("cw", "ccw"), description="Spin direction of the sweep."),
    P("scan_start_azimuth_deg", "float", 180.0, "deg", low=-360, high=360, description="alpha_s, start of the sweep."),
    P("delay_s", "float", 0.05, "s", low=0, high=10, description="Delay of the scan row and the published cloud."),
    P("output", "str", "ply", choices=("ply", "pcd", "both"), description="Files each scan writes."),
    P("frame_id", "frame_name", "lidar", description="Frame name of the cloud."),
    P(
        "topic",
        "topic",
        "/lidar/points",
        description="Cloud topic the sensor's driver publishes by default (the node's topic when it names none).",
    ),
    P(
        "point_type",
        "profile",
        "XYZI",
        choices=POINT_TYPE_NAMES,
        description="Point layout the sensor's driver publishes by default: a profile of outputs/point_types.py "
        "(the CLI's and the node's point type when they name none).",
    ),
    P("self_returns", "path", None, nullable=True, description="File of the self-return table."),
    P(
        "model",
        "str",
        "full",
        choices=("full", "core"),
        description="LiDAR model: full (the spec's), or core (ACRES Core's simplified one, docs/calibration.md, ACRES Core's LiDAR; "
        "acres-lidar scan and record trace it, and the node from its start).",
    ),
    P(
        "radiometry.range_at_10pct_m",
        "float",
        60.0,
        "m",
        low=0,
        high=10000,
        low_open=True,
        description="R_10, range of the specification point.",
    ),
    P(
        "radiometry.ring_range_at_10pct_m",
        "float_list",
        None,
        "m",
        nullable=True,
        low=0,
        high=10000,
        low_open=True,
        description="R_10 of each ring.",
    ),
    P(
        "radiometry.signal_at_10pct_counts",
        "float",
        100.0,
        "counts",
        low=0,
        high=65535,
        low_open=True,
        description="S_10, mean signal of a 10 % target at R_10.",
    ),
    P("radiometry.ambient_counts", "float", 20.0, "counts", low=0, high=65535, description="B, ambient signal."),
    P(
        "radiometry.detection_probability_at_spec",
        "float",
        0.9,
        low=0.5,
        high=0.9999,
        description="p_spec, detection probability at the specification point.",
    ),
    P(
        "radiometry.overlap_range_m",
        "float",
        1.0,
        "m",
        low=0,
        high=100,
        low_open=True,
        description="R_ov, transmitter/receiver overlap range.",
    ),
    P("radiometry.saturation_counts", "float", 65535.0, "counts", low=1, high=65535, description="S_sat."),
    P(
        "radiometry.range_std_low_snr_m",
        "float",
        0.03,
        "m",
        low=0,
        high=10,
        description="sigma_low, range noise at the specification SNR.",
        runtime=True,
    ),
    P(
        "radiometry.detection_model",
        "str",
        "spec",
        choices=DETECTION_MODELS,
        description="Which echoes are points: the spec's signal against S_T, or the engine paper's linear reflectance limit "
        "(docs/detection.md).",
    ),
    P(
        "radiometry.max_range_m",
        "float",
        None,
        "m",
        low=0,
        high=10000,
        low_open=True,
        nullable=True,
        description="d_max of reflectance_limit (needed there, unused by spec): points beyond it are dropped.",
    ),
    P(
        "radiometry.reflectance_at_max_range",
        "float",
        None,
        low=0,
        high=1,
        low_open=True,
        nullable=True,
        description="R_L,max of reflectance_limit (needed there, unused by spec): the reflectance detected at d_max.",
    ),
    P("weather.enabled", "bool", True, description="Rain and fog.", runtime=True),
    P("weather.rain_extinction_db_per_km", "float", 1.076, "dB/km", low=0, high=1000, description="a."),
    P("weather.rain_extinction_exponent", "float", 0.67, low=0, high=5, description="b."),
    P("weather.fog_lidar_ratio_sr", "float", 18.8, "sr", low=0, high=1000, low_open=True, description="S_fog."),
    P("weather.haze_lidar_ratio_sr", "float", 60.0, "sr", low=0, high=1000, low_open=True, description="S_haze."),
    P(
        "weather.rain_lidar_ratio_sr",
        "float",
        500.0,
        "sr",
        low=0,
        high=100000,
        low_open=True,
        description="S_rain, an engineering estimate.",
    ),
    P("weather.rain_drops_per_m3", "float", 1951.0, "1/m^3", low=0, high=1e7, description="Factor of n_d."),
    P("weather.rain_drops_exponent", "float", 0.21, low=0, high=5, description="Exponent of n_d."),
    P("weather.exit_diameter_m", "float", 0.01, "m", low=0, high=1, description="d_exit."),
    P("weather.clutter_max_range_m", "float", 10.0, "m", low=0, high=1000, description="Range limit of the clutter."),
    *output_params(P),  # the attribute list's "Output shaping and cadence" (config/output_options.py)
    # Mechanical noise (the attribute list; docs/sensors.md "Mechanical noise"): sensor.mechanical draws it.
    P(
        "mechanical_noise.azimuth_error_mean_deg",
        "float",
        0.0,
        "deg",
        low=-10,
        high=10,
        description="Mean azimuth error of a firing (counter-clockwise).",
        runtime=True,
    ),
    P(
        "mechanical_noise.azimuth_error_std_deg",
        "float",
        0.0,
        "deg",
        low=0,
        high=10,
        description="Standard deviation of the azimuth error of a firing.",
        runtime=True,
    ),
    P(
        "mechanical_noise.elevation_error_mean_deg",
        "float",
        0.0,
        "deg",
        low=-10,
        high=10,
        description="Mean elevation error of a firing (up).",
        runtime=True,
    ),
    P(
        "mechanical_noise.elevation_error_std_deg",
        "float",
        0.0,
        "deg",
        low=0,
        high=10,
        description="Standard deviation of the elevation error of a firing.",
        runtime=True,
    ),
    P(
        "mechanical_noise.origin_error_mean_m",
        "float_list",
        [0.0, 0.0, 0.0],
        "m",
        low=-1,
        high=1,
        length=3,
        description="Mean origin error of a firing, x y z in the sensor frame.",
        runtime=True,
    ),
    P(
        "mechanical_noise.origin_error_std_m",
        "float_list",
        [0.0, 0.0, 0.0],
        "m",
        low=0,
        high=1,
        length=3,
        description="Standard deviation of the origin error of a firing, x y z in the sensor frame.",
        runtime=True,
    ),
)

# How a running sensor takes a change of each key (config.updates; docs/sensors.md "Runtime updates"): the keys
# marked runtime=True above and these change live, from the next scan; REBUILD_KEYS change the beam pattern,
# rebuilt between scans; every other key is fixed while running.
LIVE_KEYS: tuple[str, ...] = (
    *["range_m", "min_range_m", "wavelength_nm", "beam_divergence_v_mrad", "pulse_length_m"],
    *["max_hits_per_sub_ray", "continue_step_m", "min_return_separation_m", "pond_threshold_m"],
    *(p.name for p in LIDAR_PARAMS if p.name.startswith(("radiometry.", "weather."))),
)
REBUILD_KEYS: tuple[str, ...] = (
    *["columns", "rings", "elevation_min_deg", "elevation_max_deg", "elevations_deg", "azimuth_order"],
    *["azimuth_offsets_deg", "lens_center_m", "position_flu_m", "rpy_deg", "beam_divergence_mrad", "sub_rays"],
    *["spin_direction", "scan_start_azimuth_deg", "peak_power_w"],  # peak_power_w: the cells' power ratios
)
LIDAR_PARAMS = tuple(
    replace(p, runtime=p.runtime or p.name in LIVE_KEYS, rebuild=p.name in REBUILD_KEYS) for p in LIDAR_PARAMS
)
LIDAR_PARAM: dict[str, Param] = {p.name: p for p in LIDAR_PARAMS}

# Keys of one entry of lidar.materials. Reflectivity has no single default: MATERIAL_DEFAULTS.
MATERIAL_PARAMS: tuple[Param, ...] = (
    P("reflectivity", "float", None, low=0, high=1, description="rho, diffuse reflectance at normal incidence."),
    P("specular", "float", 0.0, low=0, high=100, description="s, peak of the specular lobe."),
    P("specular_width_deg", "float", 8.0, "deg", low=0, high=90, low_open=True, description="theta_s, lobe width."),
    P("transmission", "float", 0.0, low=0, high=1, high_open=True, description="tau, of one foliage layer."),
    P("wet_darkening", "float", 0.0, low=0, high=1, description="a_w, loss of reflectance at wetness 1."),
    P("incidence_exponent", "float", 1.0, low=0, high=4, description="k, Minnaert exponent."),
    P("micro_slope_deg", "float", 0.0, "deg", low=0, high=30, description="sigma_t, micro-slope of ground."),
    P("reflectivity_sd", "float", 0.0, low=0, high=2, description="s_rho, albedo texture."),
    P("roughness_m", "float", 0.0, "m", low=0, high=0.5, description="sigma_h, roughness of ground."),
)
MATERIAL_PARAM: dict[str, Param] = {p.name: p for p in MATERIAL_PARAMS}

# The spec's material table (905 nm estimates): reflectivity, specular, width, transmission, wet.
# The default of every material; a "shipped" spectrum is scaled to these numbers at 905 nm.
MATERIAL_DEFAULTS: dict[str, dict[str, float]] = {
    "other": {"reflectivity": 0.30},
    "soil": {"reflectivity": 0.25, "wet_darkening": 0.5},
    "grass": {"reflectivity": 0.45, "transmission": 0.5, "wet_darkening": 0.1},
    "gravel": {"reflectivity": 0.35, "wet_darkening": 0.35},
    "asphalt": {"reflectivity": 0.12, "wet_darkening": 0.3},
    "concrete": {"reflectivity": 0.35, "wet_darkening": 0.35},
    "water": {"reflectivity": 0.02, "specular": 5.0, "specular_width_deg": 3.0},
    "corn_leaf": {"reflectivity": 0.45, "transmission": 0.5},
    "soybean_leaf": {"reflectivity": 0.48, "transmission": 0.45},
    "tree_foliage": {"reflectivity": 0.45, "transmission": 0.6},
    "bark": {"reflectivity": 0.30},
    "shrub": {"reflectivity": 0.42, "transmission": 0.5},
    "building": {"reflectivity": 0.45, "specular": 0.3, "specular_width_deg": 8.0},
    "metal_bin": {"reflectivity": 0.30, "specular": 2.0, "specular_width_deg": 6.0},
    "vehicle": {"reflectivity": 0.30, "specular": 0.5, "specular_width_deg": 8.0},
    "mud": {"reflectivity": 0.12},
    "potato_leaf": {"reflectivity": 0.47, "transmission": 0.45},
}

# A material's "spectrum": its reflectivity and transmission at the sensor's wavelength from a
# model, resolved once at load (config/spectra.py, docs/materials.md). Ranges: the "typical" ones of
# the prosail package's README where it gives them (N, chlorophyll, carotenoid, brown pigment,
# psoil); ours for the rest, wide enough for measured leaves (see docs/materials.md).
SPECTRUM_MODELS: tuple[str, ...] = ("prospect", "soil", "library", "shipped")
SPECTRUM_PARAMS: tuple[Param, ...] = (
    P("model", "str", None, choices=SPECTRUM_MODELS, description="The spectral model."),
    P("structure", "float", None, low=0.8, high=2.5, description="prospect: N, leaf structure (plates)."),
    P("chlorophyll_ug_cm2", "float", None, "ug/cm^2", low=0, high=80, description="prospect: C_ab, chlorophyll a+b."),
    P("water_cm", "float", None, "cm", low=0, high=0.1, description="prospect: C_w, equivalent water thickness."),
    P(
        "dry_matter_g_cm2",
        "float",
        None,
        "g/cm^2",
        low=0,
        high=0.05,
        description="prospect: C_m, dry matter (leaf mass per area).",
    ),
    P("carotenoid_ug_cm2", "float", 8.0, "ug/cm^2", low=0, high=20, description="prospect: C_car, carotenoids."),
    P("anthocyanin_ug_cm2", "float", 0.0, "ug/cm^2", low=0, high=40, description="prospect: C_ant, anthocyanins."),
    P("brown_pigment", "float", 0.0, low=0, high=1, description="prospect: C_brown, brown pigments (arbitrary units)."),
    P("dry_fraction", "float", None, low=0, high=1, description="soil: psoil, 1 the dry soil spectrum, 0 the wet one."),
    P("brightness", "float", 1.0, low=0, high=1.9, description="soil: rsoil, scales the mixed soil spectrum."),
    P("sample", "str", None, choices=tuple(LIBRARY_SAMPLES), description="library: the measured sample."),
)
SPECTRUM_PARAM: dict[str, Param] = {p.name: p for p in SPECTRUM_PARAMS}
SPECTRUM_KEYS: dict[str, tuple[str, ...]] = {
    "prospect": (
        "structure",
        "chlorophyll_ug_cm2",
        "water_cm",
        "dry_matter_g_cm2",
        "carotenoid_ug_cm2",
        "anthocyanin_ug_cm2",
        "brown_pigment",
    ),
    "soil": ("dry_fraction", "brightness"),
    "library": ("sample",),
    "shipped": (),
}
"""The keys of each model besides ``model``; those whose default is None are required."""

SPECTRUM_WAVELENGTH_NM: tuple[float, float] = (400.0, 2500.0)
"""The wavelengths every spectrum is defined at (a library sample may cover less)."""

OPTICAL_KEYS: tuple[str, ...] = ("reflectivity", "transmission")
"""The material keys a spectrum gives; a material names these or a spectrum, never both."""

# Scan options (command line and node parameters), not keys of the sensors file.
OPTION_PARAMS: tuple[Param, ...] = (
    P("rain_mm_per_h", "float", 0.0, "mm/h", low=0, high=500, description="Rain rate R_r.", runtime=True),
    P(
        "visibility_m",
        "float",
        math.inf,
        "m",
        low=10,
        description="Meteorological visibility V (inf: clear).",
        runtime=True,
    ),
    P("noise", "bool", True, description="Signal and range noise.", runtime=True),
    P("seed", "int", 0, low=0, high=2**63 - 1, description="Seed of the noise streams and hashes."),
)
OPTION_PARAM: dict[str, Param] = {p.name: p for p in OPTION_PARAMS}


def check_option(name: str, value: Any) -> Any:
    """Validate one scan option (``rain_mm_per_h``, ``visibility_m``, ``noise``, ``seed``)."""
    param = OPTION_PARAM[name]
    if name == "visibility_m" and isinstance(value, (int, float)) and value == math.inf:
        return math.inf
    return param.validate(value, name)


def markdown_table() -> str:
    """The README's parameter table, generated from the schema."""
    rows = ["| key | type | unit | default | allowed | description |", "| --- | --- | --- | --- | --- | --- |"]
    for prefix, params in (("lidar.", LIDAR_PARAMS), ("lidar.materials.<name>.", MATERIAL_PARAMS)):
        for p in params:
            default = "table" if p.default is None and prefix.endswith("<name>.") else p.default
            default = "none" if default is None else default
            if isinstance(default, bool):
                default = str(default).lower()
            rows.append(f"| `{prefix}{p.name}` | {p.kind} | {p.unit} | {default} | {p.allowed()} | {p.description} |")
    for p in SPECTRUM_PARAMS:
        default = "required" if p.default is None else p.default
        rows.append(
            f"| `lidar.materials.<name>.spectrum.{p.name}` | {p.kind} | {p.unit} | {default} | {p.allowed()} "
            f"| {p.description} |"
        )
    return "\n".join(rows)
