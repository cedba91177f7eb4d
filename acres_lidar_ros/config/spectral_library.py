"""Measured reflectance spectra of man-made materials, each from a cited public spectral library.

Every sample is a table of (wavelength nm, reflectance 0 to 1) at the library's own wavelengths;
``spectra.library_reflectance`` interpolates it linearly. Nothing here is estimated: where no
public measurement was found, the material stays numeric (``docs/materials.md``, "Sources").

``0425UUUASP``: ECOSTRESS Spectral Library v1.0 (Meerdink, Hook, Roberts and Abbott, 2019,
Remote Sensing of Environment 230, 111196; formerly the ASTER Spectral Library v2.0, Baldridge
et al., 2009), manmade / concrete / paving concrete, sample 0425UUUASP "Asphaltic concrete",
owner National Photographic Interpretation Center (Johns Hopkins University spectrometer):
"variegated asphaltic concrete with mostly limestone and some quartz aggregate showing; rough and
black; from runway side strips". Directional (10 degree) hemispherical reflectance, in percent in
the library. The values below are the library's at 20 nm steps (its own step above 800 nm,
every tenth value of its 2 nm step below), read from the copy of the library file in the
HELIOS++ repository (github.com/3dgeo-heidelberg/helios, ``assets/spectra/asphalt.txt``),
divided by 100. Reproduced from the ECOSTRESS Spectral Library through the courtesy of the Jet
Propulsion Laboratory, California Institute of Technology, Pasadena, California.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LibrarySample:
    """One measured spectrum: ``wavelength_nm`` ascending, ``reflectance`` 0 to 1 at each."""

    sample_id: str
    name: str
    library: str
    wavelength_nm: tuple[float, ...]
    reflectance: tuple[float, ...]


# ECOSTRESS 0425UUUASP, percent as in the library (divided by 100 below), 420 to 2500 nm.
_ASPHALTIC_CONCRETE_PERCENT = (
    15.6055, 13.5577, 13.951, 14.4397, 15.2758, 16.2893, 17.4814, 18.4343, 19.3251, 20.0918,
    20.7694, 21.4334, 22.1189, 22.7707, 23.4421, 24.0456, 24.5596, 25.0578, 25.5167, 25.9707,
    26.3415, 26.7017, 27.0293, 27.3743, 27.6779, 28.0185, 28.3563, 28.6739, 28.9782, 29.2636,
    29.5453, 29.8431, 30.1695, 30.5112, 30.8908, 31.2717, 31.5599, 31.9448, 32.3088, 32.5198,
    32.8375, 33.1393, 33.5972, 33.7202, 33.9725, 34.2892, 34.4527, 34.6539, 34.6689, 34.4296,
    34.1326, 34.4279, 34.7158, 35.0778, 35.4336, 35.7594, 36.0593, 36.2701, 36.5232, 36.7409,
    36.9014, 37.0, 37.1066, 37.2313, 37.1296, 37.0121, 37.1056, 37.2143, 37.5764, 37.6951,
    37.7092, 37.6118, 37.2982, 36.3007, 34.9446, 33.9715, 34.0369, 34.2755, 34.7213, 34.9691,
    36.0966, 36.7084, 36.9952, 37.1403, 37.1528, 37.0099, 36.499, 35.9732, 36.2728, 35.9134,
    35.5016, 34.5864, 32.6479, 29.9853, 27.8245, 27.066, 25.1312, 28.5487, 31.7182, 31.5372,
    31.0379, 29.5812, 27.5049, 24.7544, 23.5705,
)  # fmt: skip

LIBRARY_SAMPLES: dict[str, LibrarySample] = {
    "ecostress_0425UUUASP": LibrarySample(
        sample_id="ecostress_0425UUUASP",
        name="Asphaltic concrete (limestone and quartz aggregate, runway side strip)",
        library="ECOSTRESS Spectral Library v1.0, sample 0425UUUASP (JHU / NPIC)",
        wavelength_nm=tuple(420.0 + 20.0 * i for i in range(len(_ASPHALTIC_CONCRETE_PERCENT))),
        reflectance=tuple(v / 100.0 for v in _ASPHALTIC_CONCRETE_PERCENT),
    ),
}
"""Sample id (as a spectrum's ``sample`` names it) -> the measured spectrum."""
