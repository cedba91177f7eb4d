"""The sensors file: every schema bound, unknown keys, types, lengths, overlays, the shipped files."""

import json
import math

import numpy as np
import pytest

from acres_lidar_ros.config.material_table import MATERIAL_NAMES
from acres_lidar_ros.config.schema import LIDAR_PARAMS, MATERIAL_PARAMS, check_option, markdown_table
from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.config.share_paths import config_dir
from acres_lidar_ros.errors import ConfigError


def write(tmp_path, lidar, name="s.json", **top):
    path = tmp_path / name
    path.write_text(json.dumps({"lidar": lidar, **top}))
    return path


def nest(key, value):
    """{"radiometry.x": v} -> {"radiometry": {"x": v}}."""
    if "." in key:
        a, b = key.split(".")
        return {a: {b: value}}
    return {key: value}


def bounded_cases():
    for p in LIDAR_PARAMS:
        if p.kind in ("int", "float") and (p.low is not None or p.high is not None):
            if p.low is not None:
                yield pytest.param(
                    p, p.low - (0 if p.low_open else (1 if p.kind == "int" else 1e-6)), id=f"{p.name}-low"
                )
            if p.high is not None:
                yield pytest.param(
                    p, p.high + (0 if p.high_open else (1 if p.kind == "int" else 1e-6)), id=f"{p.name}-high"
                )


@pytest.mark.parametrize("param, value", list(bounded_cases()))
def test_every_number_bound_is_rejected_with_key_value_and_range(tmp_path, param, value):
    value = int(value) if param.kind == "int" else value
    base = {"range_m": 200, "min_range_m": 0} if param.name in ("range_m", "min_range_m") else {}
    lidar = {**base, **nest(param.name, value)}
    with pytest.raises(ConfigError) as err:
        load_sensor_config(write(tmp_path, lidar))
    message = str(err.value)
    assert f"lidar.{param.name} = {value!r}" in message
    assert param.allowed() in message


@pytest.mark.parametrize("param", [p for p in LIDAR_PARAMS if p.kind in ("int", "float")], ids=lambda p: p.name)
def test_every_number_key_rejects_a_string(tmp_path, param):
    with pytest.raises(ConfigError, match=rf"lidar\.{param.name} = 'ten': expected"):
        load_sensor_config(write(tmp_path, nest(param.name, "ten")))


@pytest.mark.parametrize(
    "param", [p for p in MATERIAL_PARAMS if p.low is not None or p.high is not None], ids=lambda p: p.name
)
def test_every_material_bound_is_rejected(tmp_path, param):
    value = param.high if param.high_open else param.high + 0.5
    with pytest.raises(ConfigError, match=rf"lidar\.materials\.soil\.{param.name} = {value!r} is out of range"):
        load_sensor_config(write(tmp_path, {"materials": {"soil": {param.name: value}}}))
    with pytest.raises(ConfigError, match=rf"lidar\.materials\.soil\.{param.name} = -1"):
        load_sensor_config(write(tmp_path, {"materials": {"soil": {param.name: -1}}}))


def test_spec_physics_limits_from_issue(tmp_path):
    for lidar, key in (
        ({"radiometry": {"detection_probability_at_spec": 0.49}}, "detection_probability_at_spec"),
        ({"radiometry": {"detection_probability_at_spec": 0.99991}}, "detection_probability_at_spec"),
        ({"materials": {"grass": {"reflectivity": -0.1}}}, "reflectivity"),
        ({"materials": {"grass": {"transmission": 1.0}}}, "transmission"),
    ):
        with pytest.raises(ConfigError, match=key):
            load_sensor_config(write(tmp_path, lidar))
    with pytest.raises(ConfigError, match=r"visibility_m = 9.0 is out of range: expected a number >= 10"):
        check_option("visibility_m", 9.0)
    with pytest.raises(ConfigError, match=r"rain_mm_per_h = 501.0 is out of range: expected a number >= 0 and <= 500"):
        check_option("rain_mm_per_h", 501.0)
    assert check_option("visibility_m", math.inf) == math.inf


def test_unknown_keys_name_the_key_and_the_allowed_ones(tmp_path):
    with pytest.raises(ConfigError, match=r"lidar\.colums: unknown key; allowed: .*columns"):
        load_sensor_config(write(tmp_path, {"colums": 10}))
    with pytest.raises(ConfigError, match=r"lidar\.radiometry\.s10: unknown key; allowed: .*signal_at_10pct_counts"):
        load_sensor_config(write(tmp_path, {"radiometry": {"s10": 1}}))
    with pytest.raises(ConfigError, match=r"lidar\.materials\.lava: unknown material"):
        load_sensor_config(write(tmp_path, {"materials": {"lava": {}}}))
    with pytest.raises(ConfigError, match=r"lidar\.materials\.soil\.shine: unknown key"):
        load_sensor_config(write(tmp_path, {"materials": {"soil": {"shine": 1}}}))
    with pytest.raises(ConfigError, match=r"unknown top-level key\(s\) \['camera'\]"):
        load_sensor_config(write(tmp_path, {}, camera={}))


def test_wrong_types(tmp_path):
    with pytest.raises(ConfigError, match=r"lidar\.motion_distortion = 1: expected true or false"):
        load_sensor_config(write(tmp_path, {"motion_distortion": 1}))
    with pytest.raises(ConfigError, match=r"lidar\.columns = 10\.5: expected an integer"):
        load_sensor_config(write(tmp_path, {"columns": 10.5}))
    with pytest.raises(ConfigError, match=r"lidar\.return_mode = 'loudest': expected one of strongest, first"):
        load_sensor_config(write(tmp_path, {"return_mode": "loudest"}))
    with pytest.raises(ConfigError, match=r"lidar\.sub_rays = 3 is out of range: expected one of 1, 7"):
        load_sensor_config(write(tmp_path, {"sub_rays": 3}))
    with pytest.raises(ConfigError, match=r"lidar\.position_flu_m has 2 values: expected a list of 3 values"):
        load_sensor_config(write(tmp_path, {"position_flu_m": [1, 2]}))
    with pytest.raises(ConfigError, match=r"lidar\.elevations_deg\[1\] = 95 is out of range"):
        load_sensor_config(write(tmp_path, {"elevations_deg": [0, 95]}))
    with pytest.raises(ConfigError, match=r"lidar\.frame_id = '1abc': expected a frame name"):
        load_sensor_config(write(tmp_path, {"frame_id": "1abc"}))


def test_inconsistent_lengths_and_ranges(tmp_path):
    with pytest.raises(ConfigError, match=r"lidar\.azimuth_offsets_deg has 2 values but the sensor has 3 rings"):
        load_sensor_config(write(tmp_path, {"elevations_deg": [0, 1, 2], "azimuth_offsets_deg": [0, 1]}))
    with pytest.raises(ConfigError, match=r"ring_range_at_10pct_m has 3 values but the sensor has 8 rings"):
        load_sensor_config(write(tmp_path, {"radiometry": {"ring_range_at_10pct_m": [1, 2, 3]}}))
    with pytest.raises(ConfigError, match=r"lidar\.min_range_m = 5\.0 is not below lidar\.range_m = 5\.0"):
        load_sensor_config(write(tmp_path, {"min_range_m": 5, "range_m": 5}))
    with pytest.raises(ConfigError, match=r"elevation_min_deg = 5\.0 is above lidar\.elevation_max_deg = 1\.0"):
        load_sensor_config(write(tmp_path, {"elevation_min_deg": 5, "elevation_max_deg": 1}))


def test_missing_and_malformed_files(tmp_path):
    with pytest.raises(
        ConfigError, match=r"sensors file '.*nope\.json' does not exist; give a file or one of default, polaris"
    ):
        load_sensor_config(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(ConfigError, match=r"is not valid JSON"):
        load_sensor_config(bad)
    with pytest.raises(ConfigError, match=r"extends = 'missing\.json': file .* does not exist"):
        load_sensor_config(write(tmp_path, {}, extends="missing.json"))


def test_overlay_changes_only_the_keys_it_names(tmp_path):
    base = json.loads((config_dir() / "sensors.json").read_text())
    (tmp_path / "sensors.json").write_text(json.dumps(base))
    overlay = write(
        tmp_path, {"hz": 20, "materials": {"soil": {"reflectivity": 0.2}}}, name="o.json", extends="sensors.json"
    )
    default, over = load_sensor_config("default"), load_sensor_config(overlay)
    assert over.hz == 20.0 and default.hz == 10.0
    soil = MATERIAL_NAMES.index("soil")
    assert over.materials.reflectivity[soil] == 0.2
    assert over.materials.wet_darkening[soil] == default.materials.wet_darkening[soil] == 0.5
    for name in ("columns", "range_m", "return_mode", "sub_rays", "min_return_separation_m"):
        assert getattr(over, name) == getattr(default, name)


def test_defaults_are_the_spec_table():
    c = load_sensor_config("default")
    assert (c.hz, c.columns, c.rings, c.range_m, c.min_range_m, c.std_m) == (10.0, 180, 8, 60.0, 0.5, 0.02)
    np.testing.assert_allclose(np.rad2deg(c.elevations_rad), -20 + 30 * np.arange(8) / 7)
    assert (c.sub_rays, c.max_hits_per_sub_ray, c.return_mode, c.spin_direction) == (7, 4, "dual_strongest_last", "cw")
    assert c.beam_divergence_v_rad == c.beam_divergence_rad == 3e-3  # 0 means beta_v = beta
    assert math.isclose(math.degrees(c.scan_start_azimuth_rad), 180.0)
    assert c.radiometry.signal_at_10pct_counts == 100 and c.radiometry.ambient_counts == 20
    assert c.weather.rain_extinction_db_per_km == 1.076 and c.weather.clutter_max_range_m == 10
    # The spec's 17 materials, in its order, with its numbers, exactly (the spec's table as printed).
    assert c.materials.names == MATERIAL_NAMES and len(MATERIAL_NAMES) == 17
    assert c.materials.reflectivity.tolist() == [
        0.30, 0.25, 0.45, 0.35, 0.12, 0.35, 0.02, 0.45, 0.48, 0.45, 0.30, 0.42, 0.45, 0.30, 0.30, 0.12, 0.47
    ]  # fmt: skip
    assert c.materials.transmission.tolist() == [0, 0, 0.5, 0, 0, 0, 0, 0.5, 0.45, 0.6, 0, 0.5, 0, 0, 0, 0, 0.45]
    assert c.materials.wet_darkening.tolist() == [0, 0.5, 0.1, 0.35, 0.3, 0.35, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    for name in MATERIAL_NAMES:
        assert (
            c.effective["lidar"]["materials"][name]["reflectivity"]
            == c.materials.reflectivity[MATERIAL_NAMES.index(name)]
        )
    water = MATERIAL_NAMES.index("water")
    assert c.materials.specular[water] == 5.0 and math.isclose(math.degrees(c.materials.specular_width_rad[water]), 3)


def test_the_spec_stated_values_hold_on_the_default_table():
    # The default table through the spec's Minnaert law, with the spec's numbers by hand:
    # mud (rho 0.12, k 1) at cos 0.5 gives 0.06; wet soil (rho 0.25, a_w 0.5) at wetness 0.8 and
    # normal incidence gives 0.25 * 0.6 = 0.15, at cos 0.5 the ground rules' 0.075; a corn leaf's
    # P at cos 0.5 in front of nothing is rho_bs (1 - tau) = 0.45 * 0.5 * 0.5 = 0.1125.
    from acres_lidar_ros.radiometry.equations import minnaert_backscatter

    t = load_sensor_config("default").materials

    def rho_bs(name, cos_theta, wetness=0.0):
        i = MATERIAL_NAMES.index(name)
        return float(
            minnaert_backscatter(
                cos_theta, t.reflectivity[i], t.incidence_exponent[i], t.specular[i], t.specular_width_rad[i],
                t.wet_darkening[i], wetness,
            )
        )  # fmt: skip

    assert rho_bs("mud", 0.5) == pytest.approx(0.06, rel=1e-12)
    assert rho_bs("soil", 1.0, wetness=0.8) == pytest.approx(0.15, rel=1e-12)
    assert rho_bs("soil", 0.5, wetness=0.8) == pytest.approx(0.075, rel=1e-12)
    corn = MATERIAL_NAMES.index("corn_leaf")
    assert rho_bs("corn_leaf", 0.5) * (1.0 - t.transmission[corn]) == pytest.approx(0.1125, rel=1e-12)


def test_one_ring_sits_in_the_middle(tmp_path):
    c = load_sensor_config(write(tmp_path, {"rings": 1, "elevation_min_deg": -10, "elevation_max_deg": 4}))
    np.testing.assert_allclose(np.rad2deg(c.elevations_rad), [-3.0])


def test_polaris_overlay_matches_the_spec_table():
    c = load_sensor_config("polaris")
    assert (c.columns, c.rings, c.azimuth_order, c.spin_direction) == (1800, 32, "cw", "cw")
    assert (c.lens_center_m, c.range_m, c.min_range_m, c.sub_rays) == (0.035, 161.3, 0.2, 1)
    np.testing.assert_allclose(c.position_flu_m, [2.5, 0, 2.039])
    np.testing.assert_allclose(np.rad2deg(c.rpy_rad), [-1.518, 5.317, 0])
    np.testing.assert_allclose([c.beam_divergence_rad, c.beam_divergence_v_rad], [1.6e-3, 6.9e-3])
    assert (c.pulse_length_m, c.return_mode, c.std_m, c.delay_s, c.output) == (1.0, "strongest", 0.0022, 0.012, "pcd")
    assert c.scan_start_azimuth_rad == 0.0
    r10 = c.radiometry.ring_range_at_10pct_m
    assert (r10[:16] == 87.0).all() and (r10[16:28] == 38.7).all() and (r10[28:31] == 19.3).all() and r10[31] == 9.7
    assert c.radiometry.range_std_low_snr_m == 0.0393
    elevations = np.rad2deg(c.elevations_rad)
    np.testing.assert_allclose(elevations[[0, 9, 16, 17, 23, 31]], [14.94, 0.0, -9.94, -15.97, -30.95, -53.696])
    offsets = np.rad2deg(c.azimuth_offsets_rad)
    even, odd = offsets[0::2], offsets[1::2]
    assert np.isclose(even.min(), 3.88) and np.isclose(even.max(), 5.11)
    assert np.isclose(odd.min(), -5.03) and np.isclose(odd.max(), -3.63)
    m = c.materials
    assert (m.incidence_exponent == 0).all()
    grass = MATERIAL_NAMES.index("grass")
    assert (
        m.reflectivity[grass],
        math.degrees(m.micro_slope_rad[grass]),
        m.reflectivity_sd[grass],
        m.roughness_m[grass],
    ) == pytest.approx((0.17, 4.35, 0.24, 0.0026))
    for name, rho in (
        ("building", 0.31),
        ("metal_bin", 0.23),
        ("bark", 0.23),
        ("vehicle", 0.10),
        ("mud", 0.08),
        ("other", 0.20),
        ("corn_leaf", 0.30),
        ("shrub", 0.36),
        ("tree_foliage", 0.45),
    ):
        assert m.reflectivity[MATERIAL_NAMES.index(name)] == rho


def test_with_overrides_validates():
    c = load_sensor_config("polaris")
    assert c.with_overrides({"return_mode": "first"}).return_mode == "first"
    with pytest.raises(ConfigError, match=r"lidar\.return_mode = 'loud'"):
        c.with_overrides({"return_mode": "loud"})
    with pytest.raises(ConfigError, match=r"lidar\.nope: unknown key"):
        c.with_overrides({"nope": 1})


def test_with_overrides_keeps_an_emitters_block_s_ticks():
    # ft120 is one flash of 19200 emitters: outside the ranges of the columns (4 to 3600) and rings
    # (1 to 128) keys, which its effective block holds.
    c = load_sensor_config("ft120")
    changed = c.with_overrides({"return_mode": "first"})
    assert (c.columns, c.rings, changed.columns, changed.rings, changed.return_mode) == (1, 19200, 1, 19200, "first")
    assert (changed.effective["lidar"]["columns"], changed.effective["lidar"]["rings"]) == (1, 19200)


def test_readme_table_lists_every_key():
    table = markdown_table()
    for p in LIDAR_PARAMS:
        assert f"`lidar.{p.name}`" in table
    for p in MATERIAL_PARAMS:
        assert f"`lidar.materials.<name>.{p.name}`" in table


def test_readme_parameter_table_is_the_schema(repo_root):
    readme = (repo_root / "README.md").read_text()
    block = readme.split("<!-- schema-table-start -->\n", 1)[1].split("\n<!-- schema-table-end -->", 1)[0]
    assert block == markdown_table()


def test_a_typed_block_takes_each_field_from_the_key_of_its_name():
    from dataclasses import dataclass

    from acres_lidar_ros.config.param import typed_block

    @dataclass(frozen=True)
    class Block:
        range_m: float
        tilt_rad: float
        rpy_rad: np.ndarray
        beam_rad: float
        rings: int

    values = {"b.range_m": 5.0, "b.tilt_deg": 90.0, "b.rpy_deg": [180.0, 0.0, 45.0], "b.beam_mrad": 3.0}
    block = typed_block(Block, values, "b.", rings=4)
    assert (block.range_m, block.rings) == (5.0, 4)
    assert (block.tilt_rad, block.beam_rad) == pytest.approx((math.pi / 2, 0.003), rel=1e-15)
    assert block.rpy_rad.dtype == np.float64
    assert block.rpy_rad == pytest.approx([math.pi, 0.0, math.pi / 4], rel=1e-15)
    with pytest.raises(TypeError, match=r"Block\.rings: no key b\.rings"):
        typed_block(Block, values, "b.")


def test_a_key_s_kind_says_what_its_text_may_be():
    from acres_lidar_ros.config.param import Param

    with pytest.raises(ValueError, match="a str key needs choices"):
        Param("mode", "str", "a")
    with pytest.raises(ValueError, match="a frame_name key takes no choices"):
        Param("frame", "frame_name", "a", choices=("a",))
    with pytest.raises(ValueError, match="kind 'string' is none of"):
        Param("mode", "string", "a")
    profile = Param("point_type", "profile", "XYZI", choices=("XYZI", "XYZIRT"))
    assert profile.allowed() == "a point layout: one of XYZI, XYZIRT"
    with pytest.raises(ConfigError, match=r"point_type = 'lidar': expected a point layout: one of XYZI, XYZIRT"):
        profile.validate("lidar", "point_type")
    assert Param("frame_id", "frame_name", "lidar").validate("base/lidar_1", "frame_id") == "base/lidar_1"
