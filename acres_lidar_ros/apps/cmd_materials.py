"""``acres-lidar materials``: the material table of a sensors file at any wavelength, 400 to 2500 nm.

Each material's reflectivity and transmission are the sensor's numbers, or its spectrum resolved at
``--wavelength`` exactly as a scan resolves it (the sensors file loaded with ``wavelength_nm``
replaced); the source column says which.
"""

from __future__ import annotations

import argparse
from typing import Any

from acres_lidar_ros.config.schema import SPECTRUM_WAVELENGTH_NM
from acres_lidar_ros.config.sensors import SensorConfig, load_sensor_config
from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.outputs.json_files import json_text, jsonable

_TRAIT_LABELS = {
    "structure": "N",
    "chlorophyll_ug_cm2": "Cab",
    "water_cm": "Cw",
    "dry_matter_g_cm2": "Cm",
    "dry_fraction": "dry",
    "brightness": "bright",
    "sample": "",
}


def add_materials_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--sensor",
        default="polaris",
        metavar="polaris|default|FILE",
        help="sensors file or a named sensor (default: polaris)",
    )
    low, high = SPECTRUM_WAVELENGTH_NM
    parser.add_argument(
        "--wavelength",
        type=float,
        metavar="NM",
        help=f"laser wavelength, {low:g} to {high:g} nm (default: the sensor's wavelength_nm)",
    )
    parser.add_argument("--json", action="store_true", help="print the table as one JSON object")


def material_rows(config: SensorConfig) -> list[dict[str, Any]]:
    """One row per material number: name, reflectivity, transmission, incidence exponent, source."""
    table = config.materials
    effective = config.effective["lidar"]["materials"]
    rows = []
    for number, name in enumerate(table.names):
        spectrum = effective[name].get("spectrum")
        rows.append(
            {
                "number": number,
                "name": name,
                "reflectivity": float(table.reflectivity[number]),
                "transmission": float(table.transmission[number]),
                "incidence_exponent": float(table.incidence_exponent[number]),
                "source": _source(spectrum),
                "spectrum": spectrum,
            }
        )
    return rows


def _source(spectrum: dict[str, Any] | None) -> str:
    if spectrum is None:
        return "numbers"
    if spectrum["model"] == "shipped":
        return "shipped: config/material_spectra.csv, the spec's number at 905 nm"
    traits = " ".join(
        f"{_TRAIT_LABELS[key]} {value:g}".strip() if isinstance(value, float) else f"{value}"
        for key, value in spectrum.items()
        if key in _TRAIT_LABELS
    )
    return f"{spectrum['model']}: {traits}"


def run_materials(args: argparse.Namespace) -> int:
    config = load_sensor_config(args.sensor)
    if args.wavelength is not None:
        low, high = SPECTRUM_WAVELENGTH_NM
        if not low <= args.wavelength <= high:
            raise ConfigError(f"--wavelength {args.wavelength:g}: expected {low:g} to {high:g} nm")
        config = config.with_overrides({"wavelength_nm": float(args.wavelength)})
    rows = material_rows(config)
    if args.json:
        document = {"sensor": args.sensor, "wavelength_nm": config.wavelength_nm, "materials": rows}
        print(json_text(jsonable(document), indent=None), end="")
        return 0
    print(f"materials of {args.sensor} at {config.wavelength_nm:g} nm")
    print(f"{'#':>2}  {'material':<13} {'rho':>6} {'tau':>6} {'k':>4}  source")
    for row in rows:
        print(
            f"{row['number']:>2}  {row['name']:<13} {row['reflectivity']:6.3f} {row['transmission']:6.3f} "
            f"{row['incidence_exponent']:4g}  {row['source']}"
        )
    return 0
