"""Loading and validating a sensors file into a ``SensorConfig`` (the spec's lidar block).

A sensors file is JSON: ``{"lidar": {...}}`` with the keys of ``schema.LIDAR_PARAMS`` (dotted
names are nested objects: ``"radiometry": {...}``, ``"weather": {...}``) and ``"materials"``
(material name -> keys of ``schema.MATERIAL_PARAMS``). A file may name another with
``"extends": "sensors.json"`` (relative to itself): it is then an overlay that changes only the
keys it names. Keys whose name starts with ``_`` are comments. Degrees appear only in keys
ending ``_deg`` and are converted to radians here, once.

A material gives its optical keys (``reflectivity``, ``transmission``) as numbers or as a
``"spectrum"`` (``spectra``), never both in one entry. The spectrum is resolved here, once, at
the sensor's ``wavelength_nm``. In an overlay, a material that names numbers replaces the
spectrum it inherits and one that names a spectrum replaces the numbers; ``"spectrum": null``
asks for the numbers of the spec's table. Without either, a material of
``schema.DEFAULT_SPECTRA`` takes its default spectrum; an optical key a numeric material leaves
out takes the spec's table (``schema.MATERIAL_DEFAULTS``).
"""

from __future__ import annotations

import copy
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from acres_lidar_ros.config.emitters import (
    MIN_SCAN_RATE_HZ,
    UNREAD_WITH_EMITTERS,
    EmittersConfig,
    effective_block,
    emitters_of_lidar,
)
from acres_lidar_ros.config.input_files import MAX_SENSORS_FILE_BYTES, load_json_file
from acres_lidar_ros.config.limits import MechanicalNoiseConfig, WindowConfig, mechanical_noise_config, window_config
from acres_lidar_ros.config.materials import MATERIAL_NAMES
from acres_lidar_ros.config.output_options import OutputConfig
from acres_lidar_ros.config.schema import (
    DEFAULT_SPECTRA,
    LIDAR_PARAM,
    LIDAR_PARAMS,
    MATERIAL_DEFAULTS,
    MATERIAL_PARAM,
    MATERIAL_PARAMS,
    OPTICAL_KEYS,
)
from acres_lidar_ros.config.spectra import check_spectrum, resolve_spectrum
from acres_lidar_ros.errors import ConfigError

PACKAGE = "acres_lidar_ros"
#: Longest chain of ``extends`` (a file, its base, the base's base, ...).
MAX_EXTENDS_DEPTH = 16
#: The objects of the lidar block whose keys are declared with dotted names (``radiometry.x``).
NESTED_BLOCKS = ("radiometry", "weather", "mechanical_noise")
NAMED_SENSORS = {"default": "sensors.json", "polaris": "sensors_polaris.json"}


def limits_markdown() -> str:
    """The limits paragraph of the README's parameter section (a test keeps the two in step)."""
    from acres_lidar_ros.config.input_files import MAX_JSON_DEPTH

    nullable = ", ".join(f"`{p.name}`" for p in LIDAR_PARAMS if p.nullable)
    return (
        f"A sensors file is a regular UTF-8 file of at most {MAX_SENSORS_FILE_BYTES >> 10} KiB, objects and lists "
        f"nest at most {MAX_JSON_DEPTH} levels, an `extends` chain has at most {MAX_EXTENDS_DEPTH} files, each key "
        "appears once per object, integers fit in int64 and `NaN`/`Infinity` are no numbers. `null` is an error "
        f"except for {nullable}, where it means none (an overlay unsets its base's table with it). The self-return "
        "table is a regular file of exactly 4 x 4 x columns x rings bytes. Every refusal names the file, the key, "
        "the value and what is allowed."
    )


def share_dir() -> Path:
    """The package's share directory: the source checkout, a pip install or an ament install."""
    source = Path(__file__).resolve().parents[2]
    candidates = [source, Path(sys.prefix) / "share" / PACKAGE]
    try:  # an ament (colcon) install
        from ament_index_python.packages import get_package_share_directory

        candidates.append(Path(get_package_share_directory(PACKAGE)))
    except Exception:
        pass
    for candidate in candidates:
        if (candidate / "config" / "sensors.json").is_file():
            return candidate
    raise ConfigError(f"cannot find the {PACKAGE} config directory (looked in {', '.join(str(c) for c in candidates)})")


def config_dir() -> Path:
    return share_dir() / "config"


@dataclass(frozen=True)
class MaterialTable:
    """Material parameters as (M,) float64 arrays indexed by material number."""

    names: tuple[str, ...]
    reflectivity: np.ndarray
    specular: np.ndarray
    specular_width_rad: np.ndarray
    transmission: np.ndarray
    wet_darkening: np.ndarray
    incidence_exponent: np.ndarray
    micro_slope_rad: np.ndarray
    reflectivity_sd: np.ndarray
    roughness_m: np.ndarray


@dataclass(frozen=True)
class RadiometryConfig:
    range_at_10pct_m: float
    ring_range_at_10pct_m: np.ndarray  # (rings,) resolved: the ring table or range_at_10pct_m
    signal_at_10pct_counts: float
    ambient_counts: float
    detection_probability_at_spec: float
    overlap_range_m: float
    saturation_counts: float
    range_std_low_snr_m: float
    detection_model: str = "spec"  # "spec" or "reflectance_limit" (seed 002)
    max_range_m: float | None = None  # d_max of reflectance_limit
    reflectance_at_max_range: float | None = None  # R_L,max of reflectance_limit


@dataclass(frozen=True)
class WeatherConfig:
    enabled: bool
    rain_extinction_db_per_km: float
    rain_extinction_exponent: float
    fog_lidar_ratio_sr: float
    haze_lidar_ratio_sr: float
    rain_lidar_ratio_sr: float
    rain_drops_per_m3: float
    rain_drops_exponent: float
    exit_diameter_m: float
    clutter_max_range_m: float


@dataclass(frozen=True)
class SensorConfig:
    """The validated lidar block, in SI units and radians.

    ``effective`` is the merged JSON (defaults filled in) that a run writes beside its results.
    """

    enabled: bool
    hz: float
    columns: int
    rings: int
    elevations_rad: np.ndarray  # (rings,) in the sensor's ring order
    azimuth_order: str
    azimuth_offsets_rad: np.ndarray  # (rings,)
    lens_center_m: float
    range_m: float
    min_range_m: float
    std_m: float
    position_flu_m: np.ndarray  # (3,)
    rpy_rad: np.ndarray  # (3,) roll, pitch, yaw
    wavelength_nm: float
    beam_divergence_rad: float
    beam_divergence_v_rad: float  # resolved: 0 in the file gives beta
    pulse_length_m: float
    sub_rays: int
    max_hits_per_sub_ray: int
    continue_step_m: float
    min_return_separation_m: float
    return_mode: str
    pond_threshold_m: float
    motion_distortion: bool
    spin_direction: str
    scan_start_azimuth_rad: float
    delay_s: float
    output: str
    frame_id: str
    topic: str  # the driver's default cloud topic
    point_type: str  # the driver's default layout, a name of outputs.point_types.PROFILES
    self_returns: Path | None
    radiometry: RadiometryConfig
    weather: WeatherConfig
    materials: MaterialTable
    scan_type: str = "rotary"
    peak_power_w: float = 10.0
    emitters: EmittersConfig | None = field(default=None, repr=False)  # None: the rings x columns keys
    effective: dict = field(repr=False, compare=False, default_factory=dict)
    source: str = ""
    outputs: OutputConfig = field(default_factory=OutputConfig)  # the output keys (config/output_options.py)
    windows: WindowConfig = field(default_factory=WindowConfig)  # seed 004's windows and limits
    mechanical_noise: MechanicalNoiseConfig = field(default_factory=MechanicalNoiseConfig)

    @property
    def period_s(self) -> float:
        return 1.0 / self.hz

    def material_table(self) -> MaterialTable:
        return self.materials

    def with_overrides(self, overrides: dict[str, Any]) -> SensorConfig:
        """A new config with dotted lidar keys replaced (``{"return_mode": "first"}``), validated.

        ``"emitters"`` replaces the emitters block (None: the rings x columns keys give the
        pattern again); a rings x columns key the emitters block leaves unread is refused.
        """
        merged = _strip_comments(copy.deepcopy(self.effective))
        unread = () if self.emitters is None or "emitters" in overrides else UNREAD_WITH_EMITTERS
        for key, value in overrides.items():
            if key == "emitters":
                if value is None:
                    merged["lidar"].pop("emitters", None)
                else:
                    merged["lidar"]["emitters"] = copy.deepcopy(value)
                continue
            if key not in LIDAR_PARAM:
                raise ConfigError(f"lidar.{key}: unknown key; allowed: {', '.join(sorted(LIDAR_PARAM))}, emitters")
            if key in unread:
                raise ConfigError(
                    f"lidar.{key} = {value!r}: the sensor's pattern is its lidar.emitters block, which this key does "
                    "not change (replace the block, or set emitters to null to use the rings x columns keys)"
                )
            node = merged["lidar"]
            *parents, leaf = key.split(".")
            for parent in parents:
                node = node.setdefault(parent, {})
            node[leaf] = value
        return _build(merged, self.source, base_dir=None)


def resolve_sensor(source: str | Path) -> Path:
    """``polaris``, ``default`` or a file path -> the sensors file."""
    if str(source) in NAMED_SENSORS:
        return config_dir() / NAMED_SENSORS[str(source)]
    path = Path(source)
    if not path.exists():  # a FIFO or a directory is refused by the reader, which names its kind
        raise ConfigError(
            f"sensors file {str(path)!r} does not exist; give a file or one of {', '.join(NAMED_SENSORS)}"
        )
    return path


def load_sensor_config(source: str | Path = "polaris") -> SensorConfig:
    """Load, merge (``extends``) and validate a sensors file; ``source`` may be a named sensor."""
    path = resolve_sensor(source)
    raw = _read_with_extends(path, chain=())
    try:
        return _build(raw, str(path), base_dir=path.parent)
    except ConfigError as exc:  # name the file (the key may come from a file it extends)
        raise ConfigError(f"sensors file {str(path)!r}: {exc}") from exc


def _read_json(path: Path) -> dict:
    data = load_json_file(path, "sensors file", MAX_SENSORS_FILE_BYTES)
    if not isinstance(data, dict):
        raise ConfigError(f"sensors file {str(path)!r}: the top level must be an object with a 'lidar' block")
    return data


def _read_with_extends(path: Path, chain: tuple[Path, ...]) -> dict:
    resolved = path.resolve()
    if resolved in chain:
        raise ConfigError(f"sensors file {str(path)!r} extends itself through {' -> '.join(map(str, chain))}")
    if len(chain) >= MAX_EXTENDS_DEPTH:
        raise ConfigError(
            f"sensors file {str(path)!r}: the extends chain from {str(chain[0])!r} is longer than "
            f"{MAX_EXTENDS_DEPTH} files: the limit is {MAX_EXTENDS_DEPTH}"
        )
    data = _strip_comments(_read_json(path))
    unknown = set(data) - {"lidar", "extends"}
    if unknown:
        raise ConfigError(
            f"sensors file {str(path)!r}: unknown top-level key(s) {sorted(unknown)}; allowed: extends, lidar"
        )
    lidar = data.get("lidar", {})
    if not isinstance(lidar, dict):
        raise ConfigError(f"{path}: lidar = {lidar!r}: expected an object")
    # A relative self_returns belongs to the file that names it (checked before it is resolved,
    # so "" or "." cannot become the file's directory).
    if lidar.get("self_returns") is not None:
        LIDAR_PARAM["self_returns"].validate(lidar["self_returns"], f"{path}: lidar.self_returns")
        lidar["self_returns"] = str((path.parent / lidar["self_returns"]).resolve())
    if "extends" in data:
        base_name = data["extends"]
        if not isinstance(base_name, str) or not base_name or "\0" in base_name:
            raise ConfigError(f"{path}: extends = {base_name!r}: expected a file name relative to {str(path)!r}")
        base_path = path.parent / base_name
        if not base_path.exists():
            raise ConfigError(f"{path}: extends = {base_name!r}: file {str(base_path)!r} does not exist")
        base = _read_with_extends(base_path, chain + (resolved,))
        return {"lidar": _merge_lidar(base.get("lidar", {}), lidar, str(path))}
    _check_material_sources(lidar, str(path))
    return {"lidar": lidar}


def _strip_comments(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_comments(v) for k, v in value.items() if not (isinstance(k, str) and k.startswith("_"))}
    if isinstance(value, list):
        return [_strip_comments(v) for v in value]
    return value


def _check_material_sources(lidar: dict, where: str) -> None:
    """One file's materials: numbers or a spectrum, never both in one entry."""
    materials = lidar.get("materials")
    if not isinstance(materials, dict):
        return  # _materials names the malformed block
    for name, entry in materials.items():
        if isinstance(entry, dict):
            _one_source(entry, f"{where}: lidar.materials.{name}")


def _one_source(entry: dict, where: str) -> None:
    named = [key for key in OPTICAL_KEYS if key in entry]
    if named and entry.get("spectrum") is not None:
        raise ConfigError(
            f"{where} gives both a spectrum and {' and '.join(named)}: expected the numbers "
            f"({', '.join(OPTICAL_KEYS)}) or a spectrum, not both"
        )


def _merge_lidar(base: dict, overlay: dict, where: str) -> dict:
    """An overlay's lidar block over its base's; a material's numbers and spectrum replace each other."""
    _check_material_sources(overlay, where)
    base = copy.deepcopy(base)
    base_materials = base.get("materials")
    overlay_materials = overlay.get("materials")
    if isinstance(base_materials, dict) and isinstance(overlay_materials, dict):
        for name, entry in overlay_materials.items():
            inherited = base_materials.get(name)
            if not (isinstance(entry, dict) and isinstance(inherited, dict)):
                continue
            if any(key in entry for key in OPTICAL_KEYS):
                inherited.pop("spectrum", None)
            if "spectrum" in entry:
                for key in OPTICAL_KEYS:
                    inherited.pop(key, None)
    return _deep_merge(base, overlay)


def _deep_merge(base: dict, overlay: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _flatten(lidar: dict, where: str) -> dict[str, Any]:
    """Nested lidar block -> dotted keys (materials kept whole); unknown keys are errors."""
    flat: dict[str, Any] = {}
    for key, value in lidar.items():
        if key in ("materials", "emitters"):
            flat[key] = value
        elif key in NESTED_BLOCKS:
            if not isinstance(value, dict):
                raise ConfigError(f"{where}.{key} = {value!r}: expected an object")
            for sub, sub_value in value.items():
                dotted = f"{key}.{sub}"
                if dotted not in LIDAR_PARAM:
                    allowed = sorted(p.name.split(".", 1)[1] for p in LIDAR_PARAMS if p.name.startswith(key + "."))
                    raise ConfigError(f"{where}.{dotted}: unknown key; allowed: {', '.join(allowed)}")
                flat[dotted] = sub_value
        elif key in LIDAR_PARAM and "." not in key:
            flat[key] = value
        else:
            allowed = sorted({p.name.split(".")[0] for p in LIDAR_PARAMS} | {"materials", "emitters"})
            raise ConfigError(f"{where}.{key}: unknown key; allowed: {', '.join(allowed)}")
    return flat


def _build(raw: dict, source: str, base_dir: Path | None) -> SensorConfig:
    del base_dir  # relative paths were resolved while reading
    where = "lidar"
    flat = _flatten(raw.get("lidar", {}), where)
    hz = flat.get("hz")
    if isinstance(hz, (int, float)) and not isinstance(hz, bool) and 0 < hz < MIN_SCAN_RATE_HZ:
        raise ConfigError(
            f"lidar.hz = {hz!r} is below the minimum scan rate of {MIN_SCAN_RATE_HZ} Hz (seed 004: a scan's fire "
            f"times must fit in 2**31 ns): expected {LIDAR_PARAM['hz'].allowed()}"
        )
    v: dict[str, Any] = {}
    for param in LIDAR_PARAMS:
        if param.name in flat:  # null only where the schema allows it (validate refuses the rest)
            v[param.name] = param.validate(flat[param.name], f"{where}.{param.name}")
        else:
            v[param.name] = copy.deepcopy(param.default)

    emitters = emitters_of_lidar(flat.get("emitters"), v)
    elevations = v["elevations_deg"]
    if emitters is not None:
        rings = emitters.emitters
        v["columns"] = emitters.ticks
        elevations_deg = np.rad2deg(emitters.states[0].elevation_rad)
    elif elevations is not None:
        rings = len(elevations)
        if len(elevations) > 128:
            raise ConfigError(f"lidar.elevations_deg has {len(elevations)} values: expected 1 to 128")
        elevations_deg = np.asarray(elevations, dtype=np.float64)
    else:
        rings = v["rings"]
        lo, hi = v["elevation_min_deg"], v["elevation_max_deg"]
        if lo > hi:
            raise ConfigError(
                f"lidar.elevation_min_deg = {lo!r} is above lidar.elevation_max_deg = {hi!r}: expected min <= max"
            )
        elevations_deg = np.array([(lo + hi) / 2.0]) if rings == 1 else lo + (hi - lo) * np.arange(rings) / (rings - 1)
    for key in ("azimuth_offsets_deg", "radiometry.ring_range_at_10pct_m"):
        if v[key] is not None and len(v[key]) != rings:
            raise ConfigError(
                f"lidar.{key} has {len(v[key])} values but the sensor has {rings} rings "
                f"(from {'elevations_deg' if elevations is not None else 'rings: no elevations_deg table'}): expected one value per ring"
            )
    if v["radiometry.detection_model"] == "reflectance_limit":
        missing = [k for k in ("radiometry.max_range_m", "radiometry.reflectance_at_max_range") if v[k] is None]
        if missing:
            raise ConfigError(
                "lidar.radiometry.detection_model = 'reflectance_limit' needs "
                + " and ".join(f"lidar.{k} ({LIDAR_PARAM[k].allowed()})" for k in missing)
            )
    if v["min_range_m"] >= v["range_m"]:
        raise ConfigError(
            f"lidar.min_range_m = {v['min_range_m']!r} is not below lidar.range_m = {v['range_m']!r}: expected min < max"
        )

    offsets_deg = np.zeros(rings) if v["azimuth_offsets_deg"] is None else np.asarray(v["azimuth_offsets_deg"])
    if emitters is not None:
        offsets_deg = np.rad2deg(emitters.states[0].azimuth_rad)
    ring_r10 = (
        np.full(rings, v["radiometry.range_at_10pct_m"])
        if v["radiometry.ring_range_at_10pct_m"] is None
        else np.asarray(v["radiometry.ring_range_at_10pct_m"], dtype=np.float64)
    )
    materials, material_rows = _materials(flat.get("materials", {}), v["wavelength_nm"])
    beta = v["beam_divergence_mrad"] * 1e-3
    beta_v = v["beam_divergence_v_mrad"] * 1e-3 or beta

    effective = {"lidar": _effective(v, material_rows, rings)}
    if emitters is not None:
        effective["lidar"]["emitters"] = effective_block(flat["emitters"])
    self_returns = Path(v["self_returns"]) if v["self_returns"] else None
    return SensorConfig(
        enabled=v["enabled"],
        hz=v["hz"],
        columns=v["columns"],
        rings=rings,
        elevations_rad=np.deg2rad(elevations_deg),
        azimuth_order=v["azimuth_order"],
        azimuth_offsets_rad=np.deg2rad(offsets_deg),
        lens_center_m=v["lens_center_m"],
        range_m=v["range_m"],
        min_range_m=v["min_range_m"],
        std_m=v["std_m"],
        position_flu_m=np.asarray(v["position_flu_m"], dtype=np.float64),
        rpy_rad=np.deg2rad(np.asarray(v["rpy_deg"], dtype=np.float64)),
        wavelength_nm=v["wavelength_nm"],
        beam_divergence_rad=beta,
        beam_divergence_v_rad=beta_v,
        pulse_length_m=v["pulse_length_m"],
        sub_rays=v["sub_rays"],
        max_hits_per_sub_ray=v["max_hits_per_sub_ray"],
        continue_step_m=v["continue_step_m"],
        min_return_separation_m=v["min_return_separation_m"],
        return_mode=v["return_mode"],
        pond_threshold_m=v["pond_threshold_m"],
        motion_distortion=v["motion_distortion"],
        spin_direction=v["spin_direction"],
        scan_start_azimuth_rad=math.radians(v["scan_start_azimuth_deg"]),
        delay_s=v["delay_s"],
        output=v["output"],
        frame_id=v["frame_id"],
        topic=v["topic"],
        point_type=v["point_type"],
        self_returns=self_returns,
        radiometry=RadiometryConfig(
            range_at_10pct_m=v["radiometry.range_at_10pct_m"],
            ring_range_at_10pct_m=ring_r10,
            signal_at_10pct_counts=v["radiometry.signal_at_10pct_counts"],
            ambient_counts=v["radiometry.ambient_counts"],
            detection_probability_at_spec=v["radiometry.detection_probability_at_spec"],
            overlap_range_m=v["radiometry.overlap_range_m"],
            saturation_counts=v["radiometry.saturation_counts"],
            range_std_low_snr_m=v["radiometry.range_std_low_snr_m"],
            detection_model=v["radiometry.detection_model"],
            max_range_m=v["radiometry.max_range_m"],
            reflectance_at_max_range=v["radiometry.reflectance_at_max_range"],
        ),
        weather=WeatherConfig(**{k.split(".", 1)[1]: v[k] for k in v if k.startswith("weather.")}),
        materials=materials,
        scan_type=v["scan_type"],
        peak_power_w=v["peak_power_w"],
        emitters=emitters,
        effective=effective,
        source=source,
        outputs=OutputConfig.from_values(v),
        windows=window_config(v),
        mechanical_noise=mechanical_noise_config(v),
    )


def _materials(entries: Any, wavelength_nm: float) -> tuple[MaterialTable, dict[str, dict[str, Any]]]:
    """The material table at ``wavelength_nm`` and each material's effective entry (its numbers,
    or its spectrum with the resolved numbers under the comment key ``_resolved``)."""
    if not isinstance(entries, dict):
        raise ConfigError(f"lidar.materials = {entries!r}: expected an object of material name -> keys")
    unknown = [name for name in entries if name not in MATERIAL_NAMES]
    if unknown:
        raise ConfigError(f"lidar.materials.{unknown[0]}: unknown material; allowed: {', '.join(MATERIAL_NAMES)}")
    rows: dict[str, dict[str, Any]] = {}
    effective: dict[str, dict[str, Any]] = {}
    for name in MATERIAL_NAMES:
        where = f"lidar.materials.{name}"
        entry = entries.get(name, {})
        if not isinstance(entry, dict):
            raise ConfigError(f"{where} = {entry!r}: expected an object")
        row: dict[str, Any] = {p.name: p.default for p in MATERIAL_PARAMS}
        row.update(MATERIAL_DEFAULTS[name])
        for key, value in entry.items():
            if key == "spectrum":
                continue
            if key not in MATERIAL_PARAM:
                allowed = ", ".join([p.name for p in MATERIAL_PARAMS] + ["spectrum"])
                raise ConfigError(f"{where}.{key}: unknown key; allowed: {allowed}")
            row[key] = MATERIAL_PARAM[key].validate(value, f"{where}.{key}")
        _one_source(entry, where)
        if any(key in entry for key in OPTICAL_KEYS):
            spectrum = None
        elif "spectrum" in entry:
            spectrum = entry["spectrum"]  # None: the spec's numbers
        else:
            spectrum = DEFAULT_SPECTRA.get(name)
        effective_row = dict(row)
        if spectrum is not None:
            checked = check_spectrum(spectrum, f"{where}.spectrum")
            resolved = resolve_spectrum(checked, wavelength_nm, f"{where}.spectrum")
            for key, value in resolved.items():
                row[key] = MATERIAL_PARAM[key].validate(
                    value, f"{where}.{key} (from its spectrum at {wavelength_nm:g} nm)"
                )
                del effective_row[key]
            effective_row["spectrum"] = checked
            effective_row["_resolved"] = {"wavelength_nm": wavelength_nm, **resolved}
        rows[name] = row
        effective[name] = effective_row

    def column(key: str) -> np.ndarray:
        return np.array([rows[n][key] for n in MATERIAL_NAMES], dtype=np.float64)

    table = MaterialTable(
        names=MATERIAL_NAMES,
        reflectivity=column("reflectivity"),
        specular=column("specular"),
        specular_width_rad=np.deg2rad(column("specular_width_deg")),
        transmission=column("transmission"),
        wet_darkening=column("wet_darkening"),
        incidence_exponent=column("incidence_exponent"),
        micro_slope_rad=np.deg2rad(column("micro_slope_deg")),
        reflectivity_sd=column("reflectivity_sd"),
        roughness_m=column("roughness_m"),
    )
    return table, effective


def _effective(values: dict[str, Any], material_rows: dict[str, dict[str, Any]], rings: int) -> dict:
    lidar: dict[str, Any] = {}
    for name, value in values.items():
        node = lidar
        *parents, leaf = name.split(".")
        for parent in parents:
            node = node.setdefault(parent, {})
        node[leaf] = value
    lidar["rings"] = rings
    lidar["materials"] = copy.deepcopy(material_rows)
    return lidar
