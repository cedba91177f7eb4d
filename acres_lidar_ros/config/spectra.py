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

Between the tabulated wavelengths the spectra are interpolated linearly; a laser line is narrow
next to the 1 nm (leaves, soils) or 20 nm (library) steps of these smooth spectra.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from acres_lidar_ros.config.schema import (
    SPECTRUM_KEYS,
    SPECTRUM_MODELS,
    SPECTRUM_PARAM,
    SPECTRUM_WAVELENGTH_NM,
)
from acres_lidar_ros.config.spectral_library import LIBRARY_SAMPLES
from acres_lidar_ros.errors import ConfigError

PROSPECT_VERSION = "D"
"""The PROSPECT version of the ``prospect`` model (PROSPECT-D, Féret et al. 2017)."""


def _prosail(where: str) -> Any:
    try:
        import prosail
    except ImportError as exc:  # a dependency of the package; a broken install says so here
        raise ConfigError(
            f"{where}: the spectral models need the prosail package, which cannot be imported: {exc}"
        ) from exc
    return prosail


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


def spectrum_curves(spectrum: dict[str, Any], where: str = "spectrum") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The whole spectrum of a checked ``spectrum`` object: (wavelength_nm, reflectance,
    transmittance), (n,) float64 each, read-only, wavelengths ascending."""
    model = spectrum["model"]
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


def resolve_spectrum(spectrum: Any, wavelength_nm: float, where: str) -> dict[str, float]:
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
    wavelength, reflectance, transmittance = spectrum_curves(checked, where)
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
    prosail = _prosail(where)
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
    soil = _prosail(where).spectral_lib.soil
    dry = np.asarray(soil.rsoil1, dtype=np.float64)
    wet = np.asarray(soil.rsoil2, dtype=np.float64)
    wavelength = np.arange(SPECTRUM_WAVELENGTH_NM[0], SPECTRUM_WAVELENGTH_NM[1] + 1.0)
    if dry.shape != wavelength.shape or wet.shape != wavelength.shape:
        raise ConfigError(f"{where}: the prosail soil spectra have {dry.size} values, expected {wavelength.size}")
    reflectance = brightness * (dry_fraction * dry + (1.0 - dry_fraction) * wet)
    return _readonly(wavelength), _readonly(reflectance), _readonly(np.zeros_like(reflectance))
