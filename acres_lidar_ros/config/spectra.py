"""Material reflectance and transmission at the sensor's wavelength from a spectral model.

A material of the sensors file may give ``"spectrum": {"model": ..., traits}`` instead of the
numbers ``reflectivity`` and ``transmission``. The loader resolves it once, at the sensor's
``wavelength_nm``, into those two numbers (``resolve_spectrum``); the radiometry sees plain
numbers. The models (``docs/materials.md``):

* ``prospect``: the PROSPECT-D leaf model of the ``prosail`` package (``prosail.run_prospect``),
  from the leaf structure N and the contents of chlorophyll, carotenoids, anthocyanins, brown
  pigments, water and dry matter. It gives the leaf's directional-hemispherical reflectance and
  transmittance from 400 to 2500 nm at 1 nm.
* ``soil``: the soil model of the same package, ``brightness * (dry_fraction * dry + (1 -
  dry_fraction) * wet)`` with its dry and wet soil spectra (400 to 2500 nm at 1 nm);
  transmission 0.
* ``library``: a measured sample of ``spectral_library`` (cited there); transmission 0.
* ``shipped``: the material's curve of ``config/material_spectra.csv`` (computed once with the two
  models above by ``scripts/make_material_spectra.py``), scaled so that its value at 905 nm is the
  spec's number for that material (``schema.MATERIAL_DEFAULTS``): exactly the spec's table at
  905 nm, the model's shape at any other wavelength. It needs no spectral package.

``prospect`` and ``soil`` run the ``prosail`` package (GPL-3.0), the optional ``[spectra]`` extra;
without it they are refused with a ``ConfigError`` that names the extra.

Between the tabulated wavelengths the spectra are interpolated linearly; a laser line is narrow
next to the 1 nm (leaves, soils) or 20 nm (library) steps of these smooth spectra.
"""

from __future__ import annotations

import functools
import json
from typing import Any, NamedTuple

import numpy as np

from acres_lidar_ros.config.input_files import read_regular_file
from acres_lidar_ros.config.schema import (
    MATERIAL_DEFAULTS,
    SPECTRUM_KEYS,
    SPECTRUM_MODELS,
    SPECTRUM_PARAM,
    SPECTRUM_WAVELENGTH_NM,
)
from acres_lidar_ros.config.share_paths import config_dir
from acres_lidar_ros.config.spectral_library import LIBRARY_SAMPLES
from acres_lidar_ros.errors import ConfigError

SHIPPED_SPECTRA_FILE = "material_spectra.csv"
"""The shipped spectra, in the package's ``config/`` directory."""
MAX_SHIPPED_SPECTRA_BYTES = 1 << 20
SCALING_WAVELENGTH_NM = 905.0
"""A shipped curve is scaled so that its value here is the spec's number (the spec's table is of 905 nm)."""
SPECTRA_EXTRA = "pip install 'acres_lidar_ros[spectra]'"

PROSPECT_VERSION = "D"
"""The PROSPECT version of the ``prospect`` model (PROSPECT-D, Féret et al. 2017)."""


def _prosail(where: str, model: str) -> Any:
    try:
        import prosail
    except ImportError as exc:  # the optional [spectra] extra
        raise ConfigError(
            f"{where}.model = {model!r} needs the prosail package (GPL-3.0), the optional [spectra] extra: "
            f"{SPECTRA_EXTRA} ({exc}); or give the material numbers, or its shipped spectrum "
            '{"model": "shipped"}'
        ) from exc
    return prosail


class ShippedSpectra(NamedTuple):
    """``config/material_spectra.csv``: the wavelengths (n,) and each material's curves, (n,) each."""

    wavelength_nm: np.ndarray
    reflectance: dict[str, np.ndarray]
    transmittance: dict[str, np.ndarray]
    traits: dict[str, dict[str, Any]]


@functools.lru_cache(maxsize=1)
def shipped_spectra() -> ShippedSpectra:
    """The shipped spectra (read once): raw model curves, before the scaling to the spec's numbers."""
    path = config_dir() / SHIPPED_SPECTRA_FILE
    what = f"the shipped material spectra {path}"
    text = read_regular_file(path, what, MAX_SHIPPED_SPECTRA_BYTES).decode("utf-8")
    lines = text.splitlines()
    traits_line = next((line for line in lines if line.startswith("# traits: ")), None)
    header = next((i for i, line in enumerate(lines) if line and not line.startswith("#")), None)
    if traits_line is None or header is None:
        raise ConfigError(f"{what}: no '# traits:' line or no column names; regenerate it (scripts/)")
    names = lines[header].split(",")
    try:
        table = np.array([[float(v) for v in line.split(",")] for line in lines[header + 1 :] if line], np.float64)
        traits = json.loads(traits_line[len("# traits: ") :])
    except ValueError as exc:
        raise ConfigError(f"{what}: {exc}; regenerate it with scripts/make_material_spectra.py") from exc
    if table.ndim != 2 or table.shape[1] != len(names) or names[0] != "wavelength_nm":
        raise ConfigError(f"{what}: expected a wavelength_nm column and {len(names) - 1} curves in every row")
    columns = {name: _readonly(np.ascontiguousarray(table[:, i])) for i, name in enumerate(names)}
    materials = list(traits)
    for material in materials:
        for kind in ("reflectance", "transmittance"):
            if f"{material}_{kind}" not in columns:
                raise ConfigError(f"{what}: no column {material}_{kind}")
    return ShippedSpectra(
        columns["wavelength_nm"],
        {m: columns[f"{m}_reflectance"] for m in materials},
        {m: columns[f"{m}_transmittance"] for m in materials},
        traits,
    )


def _shipped(material: str, where: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A material's shipped curves scaled to the spec's numbers at 905 nm (each curve times the
    spec's number over the curve's 905 nm value, so that 905 nm gives the number exactly)."""
    shipped = shipped_spectra()
    if material not in shipped.reflectance:
        raise ConfigError(
            f"{where}.model = 'shipped': lidar.materials.{material} has no shipped spectrum; "
            f"the shipped ones are {', '.join(shipped.reflectance)}"
        )
    wavelength = shipped.wavelength_nm
    scaled = []
    for curve, key in (
        (shipped.reflectance[material], "reflectivity"),
        (shipped.transmittance[material], "transmission"),
    ):
        spec = MATERIAL_DEFAULTS[material].get(key, 0.0)
        at_905 = float(np.interp(SCALING_WAVELENGTH_NM, wavelength, curve))
        if spec == 0.0:
            scaled.append(np.zeros_like(curve))
        elif at_905 <= 0.0:
            raise ConfigError(f"{where}: the shipped {key} curve of {material} is 0 at 905 nm; cannot scale it")
        else:
            # (curve / at_905) is exactly 1 at 905 nm, so the spec's number comes back bit for bit.
            scaled.append(_readonly(spec * (curve / at_905)))
    return wavelength, scaled[0], scaled[1]


def check_spectrum(spectrum: Any, where: str) -> dict[str, Any]:
    """Validate a ``spectrum`` object; returns it with the optional traits filled in.

    ``where`` names it in messages (``lidar.materials.corn_leaf.spectrum``).
    """
    if not isinstance(spectrum, dict):
        raise ConfigError(f"{where} = {spectrum!r}: expected an object with a model and its traits")
    model = spectrum.get("model")
    if model not in SPECTRUM_MODELS:
        raise ConfigError(f"{where}.model = {model!r}: expected one of {', '.join(SPECTRUM_MODELS)}")
    keys = SPECTRUM_KEYS[model]
    unknown = sorted(set(spectrum) - {"model", *keys})
    if unknown:
        raise ConfigError(
            f"{where}.{unknown[0]}: not a key of the {model} model; allowed: {', '.join(('model', *keys))}"
        )
    out: dict[str, Any] = {"model": model}
    for key in keys:
        param = SPECTRUM_PARAM[key]
        if key not in spectrum:
            if param.default is None:
                raise ConfigError(f"{where}.{key} is missing: the {model} model needs it ({param.allowed()})")
            out[key] = param.default
        else:
            out[key] = param.validate(spectrum[key], f"{where}.{key}")
    return out


def spectrum_curves(
    spectrum: dict[str, Any], where: str = "spectrum", material: str | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The whole spectrum of a checked ``spectrum`` object: (wavelength_nm, reflectance,
    transmittance), (n,) float64 each, read-only, wavelengths ascending. ``material`` names the
    material a ``shipped`` spectrum belongs to (default: the one ``where`` names)."""
    model = spectrum["model"]
    if model == "shipped":
        if material is None:
            raise ConfigError(f"{where}: a shipped spectrum is a material's; name the material")
        return _shipped(material, where)
    if model == "prospect":
        return _prospect(
            float(spectrum["structure"]),
            float(spectrum["chlorophyll_ug_cm2"]),
            float(spectrum["carotenoid_ug_cm2"]),
            float(spectrum["brown_pigment"]),
            float(spectrum["water_cm"]),
            float(spectrum["dry_matter_g_cm2"]),
            float(spectrum["anthocyanin_ug_cm2"]),
            where,
        )
    if model == "soil":
        return _soil(float(spectrum["dry_fraction"]), float(spectrum["brightness"]), where)
    sample = LIBRARY_SAMPLES[spectrum["sample"]]
    wavelength = _readonly(np.asarray(sample.wavelength_nm, dtype=np.float64))
    reflectance = _readonly(np.asarray(sample.reflectance, dtype=np.float64))
    return wavelength, reflectance, _readonly(np.zeros_like(reflectance))


def covered_nm(spectrum: dict[str, Any]) -> tuple[float, float]:
    """The wavelengths a checked spectrum is defined at, nm (both ends included)."""
    if spectrum["model"] == "library":
        sample = LIBRARY_SAMPLES[spectrum["sample"]]
        return max(SPECTRUM_WAVELENGTH_NM[0], sample.wavelength_nm[0]), min(
            SPECTRUM_WAVELENGTH_NM[1], sample.wavelength_nm[-1]
        )
    return SPECTRUM_WAVELENGTH_NM


def resolve_spectrum(spectrum: Any, wavelength_nm: float, where: str, material: str | None = None) -> dict[str, float]:
    """``{"reflectivity": rho, "transmission": tau}`` of a ``spectrum`` object at ``wavelength_nm``.

    Raises ``ConfigError`` naming ``where`` (the spectrum's key) for an unknown model, a missing,
    unknown or out-of-range trait, or a wavelength outside the spectrum.
    """
    checked = check_spectrum(spectrum, where)
    low, high = covered_nm(checked)
    if not low <= wavelength_nm <= high:
        raise ConfigError(
            f"lidar.wavelength_nm = {wavelength_nm!r} is outside the {checked['model']} spectrum of {where}: "
            f"expected {low:g} to {high:g} nm, or numbers (reflectivity, transmission) instead of the spectrum"
        )
    wavelength, reflectance, transmittance = spectrum_curves(checked, where, material)
    return {
        "reflectivity": float(np.interp(wavelength_nm, wavelength, reflectance)),
        "transmission": float(np.interp(wavelength_nm, wavelength, transmittance)),
    }


def _readonly(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


@functools.lru_cache(maxsize=64)
def _prospect(
    structure: float,
    chlorophyll: float,
    carotenoid: float,
    brown: float,
    water: float,
    dry_matter: float,
    anthocyanin: float,
    where: str,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    prosail = _prosail(where, "prospect")
    # With no absorber at some wavelength the package multiplies 0 by inf in a branch whose result
    # it then discards (kall = 0); the warning says nothing about the returned values.
    with np.errstate(invalid="ignore"):
        wavelength, reflectance, transmittance = prosail.run_prospect(
            structure,
            chlorophyll,
            carotenoid,
            brown,
            water,
            dry_matter,
            ant=anthocyanin,
            prospect_version=PROSPECT_VERSION,
        )
    curves = tuple(np.array(a, dtype=np.float64) for a in (wavelength, reflectance, transmittance))
    if not all(np.all(np.isfinite(a)) for a in curves):
        raise ConfigError(f"{where}: PROSPECT gave a non-finite spectrum for these traits")
    return _readonly(curves[0]), _readonly(curves[1]), _readonly(curves[2])


@functools.lru_cache(maxsize=64)
def _soil(dry_fraction: float, brightness: float, where: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    soil = _prosail(where, "soil").spectral_lib.soil
    dry = np.asarray(soil.rsoil1, dtype=np.float64)
    wet = np.asarray(soil.rsoil2, dtype=np.float64)
    wavelength = np.arange(SPECTRUM_WAVELENGTH_NM[0], SPECTRUM_WAVELENGTH_NM[1] + 1.0)
    if dry.shape != wavelength.shape or wet.shape != wavelength.shape:
        raise ConfigError(f"{where}: the prosail soil spectra have {dry.size} values, expected {wavelength.size}")
    reflectance = brightness * (dry_fraction * dry + (1.0 - dry_fraction) * wet)
    return _readonly(wavelength), _readonly(reflectance), _readonly(np.zeros_like(reflectance))
