"""Materials from physics: spectra resolved at the sensor's wavelength (config/spectra.py).

Expectations come from the prosail package called directly (the tests that need it skip without
the ``[spectra]`` extra), the issue's measured corn-leaf case, the cited library values and the
spec's table; bad input gets ConfigError naming the key.
"""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from acres_lidar_ros.apps import cli
from acres_lidar_ros.config.material_table import MATERIAL_NAMES
from acres_lidar_ros.config.schema import MATERIAL_DEFAULTS, SPECTRUM_KEYS, SPECTRUM_PARAM, markdown_table
from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.config.spectra import resolve_spectrum, shipped_spectra
from acres_lidar_ros.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
CORN = {"model": "prospect", "chlorophyll_ug_cm2": 40, "water_cm": 0.01, "dry_matter_g_cm2": 0.009, "structure": 1.5}
SHIPPED = ("corn_leaf", "soybean_leaf", "potato_leaf", "shrub", "grass", "soil", "mud")
needs_prosail = pytest.mark.skipif(
    importlib.util.find_spec("prosail") is None, reason="needs prosail (the [spectra] extra)"
)


def write(tmp_path, lidar, name="s.json", **top):
    path = tmp_path / name
    path.write_text(json.dumps({"lidar": lidar, **top}))
    return path


def m(config, name):
    i = MATERIAL_NAMES.index(name)
    return config.materials.reflectivity[i], config.materials.transmission[i]


def shipped_file(tmp_path, wavelength_nm, names=SHIPPED):
    """A sensors file whose ``names`` take their shipped spectra."""
    materials = {name: {"spectrum": {"model": "shipped"}} for name in names}
    return write(tmp_path, {"wavelength_nm": wavelength_nm, "materials": materials}, name="shipped.json")


def prospect_direct(wavelength_nm, n, cab, cw, cm, car=8.0, brown=0.0, ant=0.0):
    """prosail's PROSPECT-D at an integer wavelength: its arrays start at 400 nm, 1 nm steps."""
    import prosail

    wl, rho, tau = prosail.run_prospect(n, cab, car, brown, cw, cm, ant=ant, prospect_version="D")
    i = int(wavelength_nm) - 400
    assert wl[i] == wavelength_nm
    return rho[i], tau[i]


@needs_prosail
@pytest.mark.parametrize("wavelength_nm", [450.0, 905.0, 1064.0, 1550.0, 2500.0])
def test_prospect_is_the_package_called_directly(tmp_path, wavelength_nm):
    traits = {"structure": 1.8, "chlorophyll_ug_cm2": 55.0, "water_cm": 0.015, "dry_matter_g_cm2": 0.006}
    spectrum = {"model": "prospect", **traits, "carotenoid_ug_cm2": 11.0, "anthocyanin_ug_cm2": 2.0}
    c = load_sensor_config(
        write(tmp_path, {"wavelength_nm": wavelength_nm, "materials": {"soybean_leaf": {"spectrum": spectrum}}})
    )
    assert m(c, "soybean_leaf") == prospect_direct(wavelength_nm, 1.8, 55.0, 0.015, 0.006, car=11.0, ant=2.0)


@needs_prosail
def test_between_the_package_wavelengths_the_spectrum_is_linear():
    lo, hi = prospect_direct(905, 1.5, 40, 0.01, 0.009), prospect_direct(906, 1.5, 40, 0.01, 0.009)
    got = resolve_spectrum(CORN, 905.25, "s")
    assert got["reflectivity"] == pytest.approx(0.75 * lo[0] + 0.25 * hi[0], abs=1e-15)
    assert got["transmission"] == pytest.approx(0.75 * lo[1] + 0.25 * hi[1], abs=1e-15)


@needs_prosail
def test_corn_leaf_case_of_the_issue(tmp_path):
    # Measured for the issue: PROSPECT-D, N 1.5, Cab 40, Cw 0.01, Cm 0.009 -> rho 0.44, tau 0.47 at 905 nm.
    c = load_sensor_config(write(tmp_path, {"materials": {"corn_leaf": {"spectrum": CORN}}}))
    rho, tau = m(c, "corn_leaf")
    assert rho == pytest.approx(0.44, abs=0.005) and tau == pytest.approx(0.47, abs=0.005)
    assert c.effective["lidar"]["materials"]["corn_leaf"]["_resolved"]["reflectivity"] == rho


def test_the_default_sensor_names_the_spec_table_and_no_spectrum():
    c = load_sensor_config("default")
    for i, name in enumerate(MATERIAL_NAMES):
        assert "spectrum" not in c.effective["lidar"]["materials"][name], name
        assert c.materials.reflectivity[i] == MATERIAL_DEFAULTS[name]["reflectivity"], name
        assert c.materials.transmission[i] == MATERIAL_DEFAULTS[name].get("transmission", 0.0), name


def test_shipped_spectra_give_the_spec_table_exactly_at_905_nm(tmp_path):
    c = load_sensor_config(shipped_file(tmp_path, 905.0))
    spec = {  # the spec's "Materials of sensors.json" table (rho, tau), as it prints them
        "soil": (0.25, 0.0),
        "grass": (0.45, 0.5),
        "corn_leaf": (0.45, 0.5),
        "soybean_leaf": (0.48, 0.45),
        "shrub": (0.42, 0.5),
        "mud": (0.12, 0.0),
        "potato_leaf": (0.47, 0.45),
    }
    assert set(spec) == set(shipped_spectra().traits) == set(SHIPPED)
    for name, expected in spec.items():
        assert m(c, name) == expected, name  # bit for bit
        assert c.effective["lidar"]["materials"][name]["spectrum"] == {"model": "shipped"}


@needs_prosail
@pytest.mark.parametrize("name", SHIPPED)
def test_a_shipped_spectrum_is_its_model_scaled_to_the_spec_at_905_nm(tmp_path, name):
    traits = shipped_spectra().traits[name]
    rho_spec, tau_spec = MATERIAL_DEFAULTS[name]["reflectivity"], MATERIAL_DEFAULTS[name].get("transmission", 0.0)
    model = {"model": traits["model"], **{k: v for k, v in traits.items() if k != "model"}}
    at_905 = resolve_spectrum(model, 905.0, "s")
    for wavelength_nm in (450.0, 1064.0, 1550.0, 2500.0):
        c = load_sensor_config(shipped_file(tmp_path, wavelength_nm, (name,)))
        raw = resolve_spectrum(model, wavelength_nm, "s")
        rho, tau = m(c, name)
        # The file holds 10 significant digits of the model's curves.
        assert rho == pytest.approx(rho_spec * raw["reflectivity"] / at_905["reflectivity"], rel=1e-9)
        if tau_spec:
            assert tau == pytest.approx(tau_spec * raw["transmission"] / at_905["transmission"], rel=1e-9)
        else:
            assert tau == 0.0
    # Before the scaling the traits give the spec's table to within 1e-4 (docs/materials.md).
    assert at_905["reflectivity"] == pytest.approx(rho_spec, abs=1e-4)
    assert at_905["transmission"] == pytest.approx(tau_spec, abs=1e-4)


@needs_prosail
def test_the_shipped_file_is_what_its_script_writes():
    spec = importlib.util.spec_from_file_location(
        "make_material_spectra", REPO / "scripts" / "make_material_spectra.py"
    )
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert shipped_spectra().traits == script.TRAITS
    assert (REPO / "config" / "material_spectra.csv").read_text() == script.spectra_text()


@pytest.mark.parametrize("name", ["corn_leaf", "soybean_leaf", "potato_leaf", "shrub", "grass"])
def test_a_1550_nm_sensor_sees_shipped_foliage_darker_and_less_transparent(tmp_path, name):
    # Water absorbs at 1550 nm: the shipped (PROSPECT-D) leaves are darker and pass less light there.
    c905 = load_sensor_config(shipped_file(tmp_path, 905.0, (name,)))
    c1550 = c905.with_overrides({"wavelength_nm": 1550.0})
    (rho_905, tau_905), (rho_1550, tau_1550) = m(c905, name), m(c1550, name)
    assert 0.5 * rho_905 < rho_1550 < 0.75 * rho_905 and 0.6 * tau_905 < tau_1550 < 0.85 * tau_905
    # Numeric materials do not change with the wavelength.
    assert m(c1550, "tree_foliage") == m(c905, "tree_foliage") == (0.45, 0.6)


def test_loading_the_shipped_sensors_needs_no_spectral_package(tmp_path):
    # A fresh interpreter in which prosail cannot be imported: the default, Polaris and shipped
    # spectra load, and the models are refused with a message that names the extra.
    code = f"""
import sys
sys.modules["prosail"] = None  # import prosail raises ImportError
from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.errors import ConfigError
load_sensor_config("default"); load_sensor_config("polaris"); load_sensor_config({str(shipped_file(tmp_path, 1550.0))!r})
try:
    load_sensor_config({str(write(tmp_path, {"materials": {"corn_leaf": {"spectrum": CORN}}}))!r})
except ConfigError as exc:
    print(exc)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO, check=True)
    assert "lidar.materials.corn_leaf.spectrum.model = 'prospect' needs the prosail package (GPL-3.0)" in out.stdout
    assert "the optional [spectra] extra: pip install 'acres_lidar_ros[spectra]'" in out.stdout


def test_a_shipped_spectrum_only_for_the_materials_that_have_one(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_sensor_config(shipped_file(tmp_path, 905.0, ("bark",)))
    message = str(err.value)
    assert "lidar.materials.bark.spectrum.model = 'shipped': lidar.materials.bark has no shipped spectrum" in message
    assert "the shipped ones are " + ", ".join(SHIPPED) in message


@needs_prosail
def test_soil_is_the_package_mixture_of_its_dry_and_wet_spectra(tmp_path):
    import prosail

    dry, wet = prosail.spectral_lib.soil.rsoil1, prosail.spectral_lib.soil.rsoil2
    for fraction, brightness, expected in ((1.0, 1.0, dry[505]), (0.0, 1.0, wet[505]), (1.0, 0.5, 0.5 * dry[505])):
        spectrum = {"model": "soil", "dry_fraction": fraction, "brightness": brightness}
        c = load_sensor_config(write(tmp_path, {"materials": {"soil": {"spectrum": spectrum}}}))
        assert m(c, "soil") == (pytest.approx(expected, rel=1e-12), 0.0)
    c = load_sensor_config(write(tmp_path, {"wavelength_nm": 1550, "materials": {"mud": {"spectrum": spectrum}}}))
    assert m(c, "mud")[0] == pytest.approx(0.5 * dry[1150], rel=1e-12)


def test_library_asphalt_is_the_cited_ecostress_sample(tmp_path):
    spectrum = {"model": "library", "sample": "ecostress_0425UUUASP"}
    # ECOSTRESS 0425UUUASP: 27.6779 % at 0.90 um, 28.0185 % at 0.92 um, 36.0593 % at 1.54 um.
    assert resolve_spectrum(spectrum, 900.0, "s") == {"reflectivity": pytest.approx(0.276779), "transmission": 0.0}
    assert resolve_spectrum(spectrum, 910.0, "s")["reflectivity"] == pytest.approx((0.276779 + 0.280185) / 2)
    assert resolve_spectrum(spectrum, 1540.0, "s")["reflectivity"] == pytest.approx(0.360593)
    with pytest.raises(ConfigError, match=r"lidar\.wavelength_nm = 410.0 is outside .*expected 420 to 2500 nm"):
        load_sensor_config(write(tmp_path, {"wavelength_nm": 410, "materials": {"asphalt": {"spectrum": spectrum}}}))


def test_polaris_keeps_its_calibrated_numbers():
    c = load_sensor_config("polaris")
    for name in MATERIAL_NAMES:
        assert "spectrum" not in c.effective["lidar"]["materials"][name], name
    # The overlay's medians, and the spec's transmissions where it names none.
    assert m(c, "corn_leaf") == (0.30, 0.5) and m(c, "soil") == (0.13, 0.0) and m(c, "grass") == (0.17, 0.5)
    assert m(c, "soybean_leaf") == (0.30, 0.45) and m(c, "potato_leaf") == (0.30, 0.45) and m(c, "shrub") == (0.36, 0.5)
    assert m(c, "mud") == (0.08, 0.0)


@needs_prosail
def test_overlays_replace_numbers_by_a_spectrum_and_back(tmp_path):
    write(tmp_path, {"materials": {"bark": {"reflectivity": 0.2}, "shrub": {"spectrum": CORN}}}, name="b.json")
    over = write(
        tmp_path,
        {"materials": {"bark": {"spectrum": CORN}, "shrub": {"reflectivity": 0.3}}},
        name="o.json",
        extends="b.json",
    )
    c = load_sensor_config(over)
    assert m(c, "bark") == prospect_direct(905, 1.5, 40, 0.01, 0.009)
    assert m(c, "shrub") == (0.3, 0.5)  # the numbers replace the spectrum; tau from the spec's table
    # "spectrum": null asks for the spec's numbers instead of a default spectrum.
    c = load_sensor_config(write(tmp_path, {"materials": {"corn_leaf": {"spectrum": None}}}))
    assert m(c, "corn_leaf") == (0.45, 0.5) and "spectrum" not in c.effective["lidar"]["materials"]["corn_leaf"]


def test_the_effective_config_loads_back_to_the_same_table(tmp_path):
    c = load_sensor_config(shipped_file(tmp_path, 1064.0))
    again = c.with_overrides({})
    for field in ("reflectivity", "transmission", "wet_darkening", "incidence_exponent"):
        np.testing.assert_array_equal(getattr(again.materials, field), getattr(c.materials, field))
    corn = c.effective["lidar"]["materials"]["corn_leaf"]
    assert "reflectivity" not in corn and corn["_resolved"]["wavelength_nm"] == 1064.0


# --- Bad input: the project's error, naming the key and what is allowed. ---


def test_unknown_spectrum_model(tmp_path):
    with pytest.raises(ConfigError, match=r"lidar\.materials\.soil\.spectrum\.model = 'hapke': expected one of "):
        load_sensor_config(write(tmp_path, {"materials": {"soil": {"spectrum": {"model": "hapke"}}}}))
    with pytest.raises(ConfigError, match=r"lidar\.materials\.soil\.spectrum = 0\.3: expected an object"):
        load_sensor_config(write(tmp_path, {"materials": {"soil": {"spectrum": 0.3}}}))


def trait_bounds():
    for model, keys in SPECTRUM_KEYS.items():
        for key in keys:
            p = SPECTRUM_PARAM[key]
            if p.kind == "float":
                yield pytest.param(model, key, p.low - 1e-6, id=f"{key}-low")
                yield pytest.param(model, key, p.high + 1e-6, id=f"{key}-high")


@pytest.mark.parametrize("model, key, value", list(trait_bounds()))
def test_out_of_range_traits(tmp_path, model, key, value):
    spectrum = {"prospect": dict(CORN), "soil": {"model": "soil", "dry_fraction": 0.5}}[model]
    spectrum[key] = value
    with pytest.raises(ConfigError) as err:
        load_sensor_config(write(tmp_path, {"materials": {"shrub": {"spectrum": spectrum}}}))
    message = str(err.value)
    assert f"lidar.materials.shrub.spectrum.{key} = {value!r} is out of range" in message
    assert SPECTRUM_PARAM[key].allowed() in message


def test_missing_and_foreign_traits(tmp_path):
    without_water = {k: v for k, v in CORN.items() if k != "water_cm"}
    with pytest.raises(ConfigError, match=r"spectrum\.water_cm is missing: the prospect model needs it"):
        load_sensor_config(write(tmp_path, {"materials": {"shrub": {"spectrum": without_water}}}))
    with pytest.raises(ConfigError, match=r"spectrum\.carotenoid_ug_cm2 = null: expected a number >= 0 and <= 20"):
        load_sensor_config(write(tmp_path, {"materials": {"shrub": {"spectrum": {**CORN, "carotenoid_ug_cm2": None}}}}))
    with pytest.raises(ConfigError, match=r"spectrum\.dry_fraction: not a key of the prospect model; allowed: model, "):
        load_sensor_config(write(tmp_path, {"materials": {"shrub": {"spectrum": {**CORN, "dry_fraction": 1}}}}))
    with pytest.raises(ConfigError, match=r"spectrum\.sample = 'usgs_x': expected one of ecostress_0425UUUASP"):
        load_sensor_config(
            write(tmp_path, {"materials": {"asphalt": {"spectrum": {"model": "library", "sample": "usgs_x"}}}})
        )


def test_numbers_and_a_spectrum_together(tmp_path):
    for numbers in ({"reflectivity": 0.4}, {"transmission": 0.4}, {"reflectivity": 0.4, "transmission": 0.4}):
        with pytest.raises(ConfigError) as err:
            load_sensor_config(write(tmp_path, {"materials": {"corn_leaf": {"spectrum": CORN, **numbers}}}))
        message = str(err.value)
        assert "lidar.materials.corn_leaf gives both a spectrum and " + " and ".join(numbers) in message
        assert "expected the numbers (reflectivity, transmission) or a spectrum, not both" in message


@pytest.mark.parametrize("wavelength_nm", [399.0, 200.0])
def test_a_wavelength_outside_the_spectra(tmp_path, wavelength_nm):
    # The default names numbers, so any wavelength loads; a spectrum is defined from 400 nm.
    assert m(load_sensor_config(write(tmp_path, {"wavelength_nm": wavelength_nm})), "corn_leaf") == (0.45, 0.5)
    with pytest.raises(ConfigError) as err:
        load_sensor_config(shipped_file(tmp_path, wavelength_nm, ("corn_leaf",)))
    message = str(err.value)
    assert f"lidar.wavelength_nm = {wavelength_nm!r} is outside the shipped spectrum of " in message
    assert "lidar.materials.corn_leaf.spectrum: expected 400 to 2500 nm" in message


def test_the_readme_table_lists_every_spectrum_key():
    table = markdown_table()
    for key in SPECTRUM_PARAM:
        assert f"`lidar.materials.<name>.spectrum.{key}`" in table


# --- acres-lidar materials ---


def run(capsys, *argv):
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_materials_command_prints_the_table_at_a_wavelength(tmp_path, capsys):
    sensor = str(shipped_file(tmp_path, 905.0))
    code, out, _ = run(capsys, "materials", "--sensor", sensor, "--wavelength", "1550", "--json")
    assert code == 0
    table = json.loads(out)
    assert table["wavelength_nm"] == 1550.0 and [r["name"] for r in table["materials"]] == list(MATERIAL_NAMES)
    corn = table["materials"][MATERIAL_NAMES.index("corn_leaf")]
    expected = m(load_sensor_config(shipped_file(tmp_path, 1550.0)), "corn_leaf")
    assert (corn["reflectivity"], corn["transmission"]) == expected and corn["source"].startswith("shipped")
    assert table["materials"][MATERIAL_NAMES.index("bark")]["source"] == "numbers"
    code, out, _ = run(capsys, "materials", "--sensor", sensor, "--wavelength", "1550")
    assert code == 0 and f"materials of {sensor} at 1550 nm" in out
    assert f" 7  corn_leaf     {expected[0]:6.3f} {expected[1]:6.3f}" in out


@pytest.mark.parametrize("wavelength", ["399", "2500.5"])
def test_materials_command_rejects_a_wavelength_outside_400_to_2500(capsys, wavelength):
    code, _, err = run(capsys, "materials", "--wavelength", wavelength)
    assert code == 2 and f"--wavelength {float(wavelength):g}: expected 400 to 2500 nm" in err
