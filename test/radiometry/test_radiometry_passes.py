"""The spec's ProcessBeam (``echoes.prepare_block`` then ``detection.finish_returns``) against
hand computations, the spec's stated values, statistics and properties."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acres_lidar_ros.config.material_table import CLASS_ID, MATERIAL_ID
from acres_lidar_ros.config.schema import RETURN_MODES, RETURNS_PER_BEAM
from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.config.window_rules import WindowConfig
from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.radiometry.detection import draw_positions, finish_returns
from acres_lidar_ros.radiometry.echoes import prepare_block
from acres_lidar_ros.radiometry.equations import (
    detection_threshold,
    range_sigma_m,
    signal_counts,
    tilted_cos,
)
from acres_lidar_ros.radiometry.noise import NoiseStreams, place_normal, roughness_normal
from acres_lidar_ros.radiometry.radiometric_model import BeamModel, ring_major_cells
from acres_lidar_ros.radiometry.returns import FLAG_FIRST, FLAG_LAST, FLAG_SECOND_STRONGEST, FLAG_STRONGEST
from acres_lidar_ros.radiometry.weather import atmosphere
from acres_lidar_ros.scene.instances import CLUTTER_INSTANCE, NO_INSTANCE
from acres_lidar_ros.tracing.hits import Hits

N_MATERIALS = 17
GROUND, BUILDING, SILO, OTHER, CORN = (
    CLASS_ID["ground"],
    CLASS_ID["building"],
    CLASS_ID["silo"],
    CLASS_ID["other"],
    CLASS_ID["corn"],
)
SOIL, BUILDING_M, METAL, OTHER_M, CORN_LEAF = (
    MATERIAL_ID["soil"],
    MATERIAL_ID["building"],
    MATERIAL_ID["metal_bin"],
    MATERIAL_ID["other"],
    MATERIAL_ID["corn_leaf"],
)
S_T = detection_threshold(100.0, 20.0, 0.9)
SHIPPED = load_sensor_config("default")


# ---------------------------------------------------------------------------------------------
# Stand-ins for the sensor config and small constructed scenes
# ---------------------------------------------------------------------------------------------


def material_table(**overrides: dict[int, float]) -> SimpleNamespace:
    """Lambertian (k = 1) materials with rho 0.3 and no texture; foliage transmits 0.5."""
    table = {
        "reflectivity": np.full(N_MATERIALS, 0.3),
        "specular": np.zeros(N_MATERIALS),
        "specular_width_rad": np.full(N_MATERIALS, math.radians(8.0)),
        "transmission": np.zeros(N_MATERIALS),
        "wet_darkening": np.zeros(N_MATERIALS),
        "incidence_exponent": np.ones(N_MATERIALS),
        "micro_slope_rad": np.zeros(N_MATERIALS),
        "reflectivity_sd": np.zeros(N_MATERIALS),
        "roughness_m": np.zeros(N_MATERIALS),
    }
    for m in ("grass", "corn_leaf", "soybean_leaf", "tree_foliage", "shrub", "potato_leaf"):
        table["transmission"][MATERIAL_ID[m]] = 0.5
    for name, values in overrides.items():
        for material, value in values.items():
            table[name][material] = value
    return SimpleNamespace(**table)


def stand_in_config(
    columns: int = 1, rings: int = 1, materials: SimpleNamespace | None = None, **lidar
) -> SimpleNamespace:
    """An object with SensorConfig's attribute names (the model reads its blocks by name)."""
    radiometry = SimpleNamespace(
        range_at_10pct_m=60.0,
        ring_range_at_10pct_m=np.full(rings, 60.0),
        signal_at_10pct_counts=100.0,
        ambient_counts=20.0,
        detection_probability_at_spec=0.9,
        overlap_range_m=1.0,
        saturation_counts=65535.0,
        range_std_low_snr_m=0.03,
        detection_model="spec",
        max_range_m=None,
        reflectance_at_max_range=None,
    )
    for key in list(lidar):
        if hasattr(radiometry, key):
            setattr(radiometry, key, lidar.pop(key))
    weather = SimpleNamespace(**{**vars(SHIPPED.weather), **lidar.pop("weather", {})})
    table = materials if materials is not None else material_table()
    base = dict(
        columns=columns,
        rings=rings,
        range_m=200.0,
        min_range_m=0.5,
        std_m=0.02,
        wavelength_nm=905.0,
        beam_divergence_rad=0.003,
        beam_divergence_v_rad=0.003,
        pulse_length_m=0.0,
        sub_rays=1,
        max_hits_per_sub_ray=4,
        min_return_separation_m=0.75,
        return_mode="strongest",
        windows=WindowConfig(),
    )
    base.update(lidar)
    return SimpleNamespace(**base, radiometry=radiometry, weather=weather, materials=table)


def params_for(columns: int = 1, rings: int = 1, materials: SimpleNamespace | None = None, **lidar) -> SimpleNamespace:
    """A stand-in for ``SensorConfig`` with the attributes the model reads."""
    return stand_in_config(columns, rings, materials, **lidar)


@dataclass(frozen=True)
class BeamModelOptions:
    """The run's switches of ``BeamModel.build``, bundled for the tests."""

    noise: bool = True
    weather: bool = True
    rain_mm_per_h: float = 0.0
    visibility_m: float = math.inf
    foliage_solid: bool = False


def make_hits(rows: list[list[tuple]], k: int | None = None) -> Hits:
    """Rows of (range_m, class, material, cos[, wetness, instance]) in range order."""
    k = k or max(1, max(len(r) for r in rows))
    hits = Hits.empty(len(rows), k)
    for i, row in enumerate(rows):
        for j, hit in enumerate(row):
            r, cls, mat, cos = hit[:4]
            hits.range_m[i, j] = r
            hits.valid[i, j] = True
            hits.class_id[i, j] = cls
            hits.material_id[i, j] = mat
            hits.cos_incidence[i, j] = cos
            hits.wetness[i, j] = hit[4] if len(hit) > 4 else 0.0
            hits.instance[i, j] = hit[5] if len(hit) > 5 else 7
    return hits


def rays(n: int, origin=(0.0, 0.0, 0.0)) -> tuple[np.ndarray, np.ndarray]:
    origins = np.tile(np.asarray(origin, dtype=float), (n, 1))
    directions = np.tile([1.0, 0.0, 0.0], (n, 1))
    return origins, directions


def run(hits: Hits, config, options=None, streams=None, weights=None, scan_index=0, origin=(0.0, 0.0, 0.0), blocks=1):
    """The returns of one scan of ``hits``, its beams prepared in ``blocks`` column blocks."""
    options = options if options is not None else BeamModelOptions(noise=False)
    streams = streams if streams is not None else NoiseStreams(0)
    weights = np.ones(1) if weights is None else np.asarray(weights, dtype=float)
    o, d = rays(hits.shape[0], origin)
    model = BeamModel.build(config, **vars(options))
    n_sub = weights.size
    cells = np.arange(hits.shape[0] // n_sub)
    if cells.size * n_sub != hits.shape[0] or cells.size != config.columns * config.rings:
        raise ValueError(f"hits have {hits.shape[0]} rows; expected columns * rings * sub_rays")
    prepared = []
    for part in np.array_split(cells, blocks):
        rows = (part[:, None] * n_sub + np.arange(n_sub)).reshape(-1)
        hits_part = Hits(**{name: getattr(hits, name)[rows] for name in Hits.__dataclass_fields__})
        prepared.append(prepare_block(hits_part, o[rows], d[rows], weights, model, streams.seed, scan_index, part))
    returns, _ = finish_returns(prepared[::-1], model, streams, scan_index)
    return returns


def single(out, slot=0):
    """Fields of one return of beam 0."""
    return {
        name: getattr(out, name)[0, slot]
        for name in (
            "range_m",
            "valid",
            "reflectivity",
            "signal",
            "intensity",
            "class_id",
            "material_id",
            "instance",
            "return_flags",
        )
    }


# ---------------------------------------------------------------------------------------------
# Parameters
# ---------------------------------------------------------------------------------------------


def test_the_model_passes_the_config_on_and_derives_the_threshold():
    p = params_for(columns=4, rings=2, return_mode="dual_first_last", pulse_length_m=1.0)
    model = BeamModel.build(p, noise=False)
    assert model.config is p and (model.beams, model.returns_per_beam) == (8, 2)
    # Spec "Detection": S10 = 100, B = 20, p = 0.9 give S_T = 85.961306 counts.
    assert model.detection_threshold_counts == pytest.approx(85.961306, abs=5e-7)
    assert not model.has_clutter and not model.noise


def test_the_model_of_the_polaris_sensor_file():
    config = load_sensor_config("polaris")
    model = BeamModel.build(config)
    assert (config.columns, config.rings, model.returns_per_beam) == (1800, 32, 1)
    # Spec "The Polaris LiDAR": R10 by ring groups, 6.9 mrad vertical divergence, L = 1 m.
    r10 = config.radiometry.ring_range_at_10pct_m
    assert r10[[0, 15, 16, 27, 28, 30, 31]].tolist() == [87.0, 87.0, 38.7, 38.7, 19.3, 19.3, 9.7]
    assert config.beam_divergence_v_rad == pytest.approx(6.9e-3)
    assert config.pulse_length_m == 1.0


def test_weather_off_or_disabled_in_the_sensor_is_clear_air():
    p = params_for(weather={"enabled": False})
    assert not BeamModel.build(p, rain_mm_per_h=10.0, visibility_m=100.0).has_clutter
    on = BeamModel.build(params_for(), rain_mm_per_h=10.0, visibility_m=100.0)
    off = BeamModel.build(params_for(), weather=False, rain_mm_per_h=10.0, visibility_m=100.0)
    assert on.has_clutter and on.atmosphere.alpha_per_m > 0.0
    assert off.atmosphere.alpha_per_m == 0.0 and not off.has_clutter


@pytest.mark.parametrize(
    "change, message",
    [
        ({"return_mode": "loudest"}, "lidar.return_mode = 'loudest': expected one of strongest, first"),
        ({"radiometry.ring_range_at_10pct_m": [60.0, 60.0]}, "ring_range_at_10pct_m has 2 values but the sensor has 8"),
        ({"radiometry.ring_range_at_10pct_m": [0.0] * 8}, r"ring_range_at_10pct_m\[0\] = 0.0 is out of range"),
        ({"radiometry.detection_probability_at_spec": 1.0}, "detection_probability_at_spec = 1.0 is out of range"),
        ({"radiometry.signal_at_10pct_counts": float("nan")}, "signal_at_10pct_counts = nan: expected a number > 0"),
        ({"min_range_m": 300.0}, "lidar.min_range_m = 300.0 is out of range"),
        ({"std_m": -0.1}, r"lidar.std_m = -0.1 is out of range: expected a number >= 0"),
        ({"weather.fog_lidar_ratio_sr": 0.0}, "lidar.weather.fog_lidar_ratio_sr = 0.0 is out of range"),
    ],
)
def test_bad_model_keys_are_refused_by_the_schema_with_key_value_and_range(change, message):
    with pytest.raises(ConfigError, match=message):
        SHIPPED.with_overrides(change)


@pytest.mark.parametrize(
    "material, key, value, message",
    [
        ("corn_leaf", "transmission", 1.0, "lidar.materials.corn_leaf.transmission = 1.0"),
        ("soil", "reflectivity", -0.1, "lidar.materials.soil.reflectivity = -0.1"),
        ("soil", "roughness_m", 1e9, "lidar.materials.soil.roughness_m = 1000000000.0"),
    ],
)
def test_bad_materials_are_refused_with_the_key(tmp_path, material, key, value, message):
    from acres_lidar_ros.config.share_paths import config_dir

    path = tmp_path / "sensors.json"
    path.write_text(
        json.dumps({"extends": str(config_dir() / "sensors.json"), "lidar": {"materials": {material: {key: value}}}})
    )
    with pytest.raises(ConfigError, match=message):
        load_sensor_config(path)


def test_bad_options_are_rejected_with_the_name():
    with pytest.raises(ConfigError, match="rain_mm_per_h"):
        BeamModel.build(SHIPPED, rain_mm_per_h=600.0)
    with pytest.raises(ConfigError, match="visibility_m"):
        BeamModel.build(SHIPPED, visibility_m=5.0)


def test_shape_mismatch_is_refused():
    p = params_for(columns=2)
    with pytest.raises(ValueError, match="rows"):
        run(make_hits([[(10.0, BUILDING, BUILDING_M, 1.0)]]), p)


# ---------------------------------------------------------------------------------------------
# One echo by hand
# ---------------------------------------------------------------------------------------------


def test_single_solid_echo_by_hand():
    # Building (rho 0.45, s 0.3, theta_s 8 deg) at R = 20 m, cos 0.8, L = 1 m, beta = 3 mrad.
    materials = material_table(reflectivity={BUILDING_M: 0.45}, specular={BUILDING_M: 0.3})
    p = params_for(materials=materials, pulse_length_m=1.0)
    out = run(make_hits([[(20.0, BUILDING, BUILDING_M, 0.8, 0.0, 42)]]), p)
    theta = math.acos(0.8)
    rho_bs = 0.45 * 0.8 + 0.3 * math.exp(-((theta / math.radians(8.0)) ** 2))
    spread = 20.0 * math.tan(theta) * 0.003  # 0.045 m
    g = 1.0 / math.sqrt(1.0 + spread**2)
    s = 100.0 * (rho_bs / 0.1) * (60.0 / 20.0) ** 2 * (1.0 - math.exp(-400.0)) * g  # 3240 / 1.001012 = 3236.72
    r = single(out)
    assert r["valid"] and r["range_m"] == 20.0
    # Noise off: S' = S, so rho_rep = rho_e (the echo stretch does not change it).
    assert r["reflectivity"] == pytest.approx(rho_bs, rel=1e-12)
    assert r["signal"] == round(s) == 3237
    assert r["intensity"] == 36
    assert (r["class_id"], r["material_id"], r["instance"]) == (BUILDING, BUILDING_M, 42)
    assert r["return_flags"] == FLAG_STRONGEST
    assert out.valid.shape == (1, 1)


def test_ground_stretch_uses_the_vertical_divergence():
    # Ground at 10 m, cos 0.5 (tan sqrt 3); beta_v = 7 mrad, beta = 1 mrad, L = 1 m.
    p = params_for(pulse_length_m=1.0, beam_divergence_rad=0.001, beam_divergence_v_rad=0.007)
    out = run(make_hits([[(10.0, GROUND, SOIL, 0.5)]]), p)
    g = 1.0 / math.hypot(1.0, 10.0 * math.sqrt(3.0) * 0.007)
    s = 100.0 * (0.3 * 0.5 / 0.1) * 36.0 * (1 - math.exp(-100.0)) * g
    assert out.signal[0, 0] == round(s)
    # The same hit on a wall uses beta.
    out = run(make_hits([[(10.0, BUILDING, SOIL, 0.5)]]), p)
    g = 1.0 / math.hypot(1.0, 10.0 * math.sqrt(3.0) * 0.001)
    assert out.signal[0, 0] == round(100.0 * 1.5 * 36.0 * (1 - math.exp(-100.0)) * g)


def test_foliage_transmission_product_and_no_stretch():
    # Corn (tau 0.5, rho 0.3) at 10 m, cos 0.5, then ground (soil rho 0.3) at 12 m, cos 0.8; L = 1 m.
    # Corn: P = 1 * 1^2 * (1 - 0.5) * 0.3 * 0.5 = 0.075, g = 1 (foliage).
    # Ground: P = 0.5^2 * 1 * 0.3 * 0.8 = 0.06.
    p = params_for(pulse_length_m=1.0, return_mode="triple_first_strongest_last")
    out = run(make_hits([[(10.0, CORN, CORN_LEAF, 0.5), (12.0, GROUND, SOIL, 0.8)]]), p)
    assert out.valid[0].tolist() == [True, True, False]
    assert out.range_m[0, :2].tolist() == [10.0, 12.0]
    assert out.reflectivity[0, 0] == pytest.approx(0.075, rel=1e-12)
    assert out.reflectivity[0, 1] == pytest.approx(0.06, rel=1e-12)
    s_corn = 100.0 * 0.75 * 36.0 * (1 - math.exp(-100.0))  # g = 1
    assert out.signal[0, 0] == round(s_corn)
    assert out.class_id[0, :2].tolist() == [CORN, GROUND]


def test_foliage_solid_option_stops_at_the_foliage():
    # Solid foliage: tau = 0, P = rho_bs = 0.15, the ground behind gets no light; stretch with beta.
    p = params_for(pulse_length_m=1.0, return_mode="triple_first_strongest_last")
    hits = make_hits([[(10.0, CORN, CORN_LEAF, 0.5), (12.0, GROUND, SOIL, 0.8)]])
    out = run(hits, p, BeamModelOptions(noise=False, foliage_solid=True))
    assert out.valid[0].tolist() == [True, False, False]
    assert out.reflectivity[0, 0] == pytest.approx(0.15, rel=1e-12)
    g = 1.0 / math.hypot(1.0, 10.0 * math.sqrt(3.0) * 0.003)
    assert out.signal[0, 0] == round(100.0 * 1.5 * 36.0 * (1 - math.exp(-100.0)) * g)
    assert out.return_flags[0, 0] == FLAG_FIRST | FLAG_STRONGEST | FLAG_LAST


def test_hits_behind_a_solid_surface_get_no_light():
    p = params_for(return_mode="triple_first_strongest_last")
    out = run(make_hits([[(10.0, BUILDING, BUILDING_M, 1.0), (30.0, BUILDING, BUILDING_M, 1.0)]]), p)
    assert out.num_returns.tolist() == [1]


def test_echo_formation_within_the_separation_of_the_first_contribution():
    # Four sub-rays of weight 0.25 hit walls at 10.0, 10.5, 10.8 and 11.0 m (separation 0.75):
    # echo 1 = {10.0, 10.5} (10.8 - 10.0 > 0.75), echo 2 = {10.8, 11.0}. Equal P, so R_e are means.
    p = params_for(return_mode="dual_first_last")
    hits = make_hits([[(r, BUILDING, BUILDING_M, 1.0)] for r in (10.0, 10.5, 10.8, 11.0)])
    out = run(hits, p, weights=np.full(4, 0.25))
    assert out.range_m[0].tolist() == pytest.approx([10.25, 10.9], abs=1e-12)
    assert out.reflectivity[0].tolist() == pytest.approx([0.15, 0.15], rel=1e-12)  # 2 * 0.25 * 0.3


def test_echo_takes_energy_weighted_range_and_class_of_the_largest():
    # Centre sub-ray (w 0.25) on a wall at 20.0 (rho 0.3); six (w 0.125) on metal at 20.4 (rho 0.5).
    # P_wall = 0.075, each P_metal = 0.0625 (sum 0.375); R_e = (0.075 * 20 + 0.375 * 20.4) / 0.45.
    materials = material_table(reflectivity={METAL: 0.5})
    p = params_for(materials=materials, pulse_length_m=1.0)
    rows = [[(20.0, BUILDING, BUILDING_M, 1.0, 0.0, 1)]] + [[(20.4, SILO, METAL, 1.0, 0.0, 2)]] * 6
    out = run(make_hits(rows), p, weights=[0.25] + [0.125] * 6)
    assert out.range_m[0, 0] == pytest.approx((0.075 * 20.0 + 0.375 * 20.4) / 0.45, abs=1e-12)
    assert out.reflectivity[0, 0] == pytest.approx(0.45, rel=1e-12)
    # The largest single contribution is the wall (0.075 > 0.0625).
    assert (out.class_id[0, 0], out.material_id[0, 0], out.instance[0, 0]) == (BUILDING, BUILDING_M, 1)


def test_ground_relief_and_texture_from_the_hashes():
    # Soil with sigma_t 0.2 rad, s_rho 0.3, sigma_h 0.05 m; ground hit at 10 m from (0.3, -0.2, 0)
    # along x, so the point is (10.3, -0.2). Noise off, so every number comes from the hashes.
    seed, scan = 17, 5
    materials = material_table(micro_slope_rad={SOIL: 0.2}, reflectivity_sd={SOIL: 0.3}, roughness_m={SOIL: 0.05})
    p = params_for(materials=materials)
    hits = make_hits([[(10.0, GROUND, SOIL, 0.6)]])
    out = run(hits, p, streams=NoiseStreams(seed), scan_index=scan, origin=(0.3, -0.2, 0.0))
    z_slope = place_normal(10.3, -0.2, 0.25, seed)
    z_albedo = place_normal(10.3, -0.2, 0.1, seed + 1)
    cos_t = float(tilted_cos(0.6, 0.2, z_slope))
    albedo = math.exp(0.3 * z_albedo - 0.5 * 0.3**2)
    c = min(max(cos_t, 0.05), 1.0)
    z_rough = roughness_normal(seed, scan, np.array([0]), np.array([0]))[0]
    assert out.range_m[0, 0] == pytest.approx(max(0.01, 10.0 + 0.05 / c**1.5 * z_rough), abs=1e-12)
    assert out.reflectivity[0, 0] == pytest.approx(0.3 * cos_t * albedo, rel=1e-12)
    # Another scan moves the roughness, not the fixed cells.
    other = run(hits, p, streams=NoiseStreams(seed), scan_index=scan + 1, origin=(0.3, -0.2, 0.0))
    assert other.range_m[0, 0] != out.range_m[0, 0]
    assert other.reflectivity[0, 0] == pytest.approx(out.reflectivity[0, 0], rel=1e-14)


def test_texture_applies_to_ground_only_and_wetness_darkens():
    materials = material_table(micro_slope_rad={SOIL: 0.2}, reflectivity_sd={SOIL: 0.3}, wet_darkening={SOIL: 0.5})
    p = params_for(materials=materials)
    # A mud clod-like wet soil hit that is not class ground: no texture, wetness 1 -> 0.3 * 0.6 * 0.5.
    out = run(make_hits([[(10.0, OTHER, SOIL, 0.6, 1.0)]]), p)
    assert out.reflectivity[0, 0] == pytest.approx(0.09, rel=1e-12)


def test_range_window():
    # R_min <= R_e <= R_max: echoes at 0.3 m and 150 m are outside [0.5, 100]; 0.5 m is inside.
    p = params_for(columns=3, min_range_m=0.5, range_m=100.0, return_mode="triple_first_strongest_last")
    rows = [
        [(0.3, BUILDING, BUILDING_M, 1.0)],
        [(150.0, BUILDING, BUILDING_M, 1.0)],
        [(0.5, BUILDING, BUILDING_M, 1.0)],
    ]
    out = run(make_hits(rows), p)
    assert out.valid[:, 0].tolist() == [False, False, True]
    assert np.isnan(out.range_m[:2]).all() and (out.instance[:2] == NO_INSTANCE).all()
    assert (out.signal[:2] == 0).all() and (out.intensity[:2] == 0).all()


def test_rain_darkens_the_reflectivity_two_way():
    # 10 mm/h, clear visibility, no clutter slabs (clutter_max_range_m 0): rho_rep = rho_e e^{-2 alpha R}.
    p = params_for(weather={"clutter_max_range_m": 0.0})
    opts = BeamModelOptions(noise=False, rain_mm_per_h=10.0)
    out = run(make_hits([[(30.0, BUILDING, BUILDING_M, 1.0)]]), p, opts)
    alpha = 1.076 * 10**0.67 / 4343.0
    assert out.reflectivity[0, 0] == pytest.approx(0.3 * math.exp(-60.0 * alpha), rel=1e-12)
    s = 100.0 * 3.0 * 4.0 * math.exp(-60.0 * alpha)
    assert out.signal[0, 0] == round(s)
    # Weather off (the sensor's enabled or the option) gives clear air.
    clear = run(make_hits([[(30.0, BUILDING, BUILDING_M, 1.0)]]), p, replace(opts, weather=False))
    assert clear.reflectivity[0, 0] == pytest.approx(0.3, rel=1e-12)


def test_fog_clutter_slabs_become_precipitation_echoes():
    # Fog of 50 m: slabs of 0.75 m from 0.5 m, a wall at 5 m stops them: 6 slabs, centres
    # 0.875 ... 4.625. Slabs 0.75 apart join in pairs (R_i - R_first <= 0.75), so the first
    # echo is {0.875, 1.625}: rho_e = 2 pi beta_fog 0.75, R_e = 1.25.
    p = params_for(return_mode="triple_first_strongest_last", min_range_m=0.5)
    opts = BeamModelOptions(noise=False, visibility_m=50.0)
    out = run(make_hits([[(5.0, BUILDING, BUILDING_M, 1.0)]]), p, opts)
    atm = atmosphere(0.0, 50.0, 905.0, SHIPPED.weather)
    # The near clutter is also the strongest echo (S = 100 * 0.196 * 2304 * 0.790 * e^-0.196 = 2.9e4
    # against the wall's 100 * 3 * 144 * e^-0.78 = 2.0e4), so triple mode gives two points.
    assert out.valid[0].tolist() == [True, True, False]
    assert out.class_id[0, 0] == CLASS_ID["precipitation"] and out.instance[0, 0] == CLUTTER_INSTANCE
    assert out.return_flags[0, :2].tolist() == [FLAG_FIRST | FLAG_STRONGEST, FLAG_LAST]
    assert out.range_m[0, 0] == pytest.approx(1.25, abs=1e-12)
    # rho_rep = rho_e e^{-2 alpha R_e}: fog darkens the reported reflectivity.
    rho_e = 2 * math.pi * atm.beta_fog_per_m_sr * 0.75
    assert out.reflectivity[0, 0] == pytest.approx(rho_e * math.exp(-2.5 * atm.alpha_per_m), rel=1e-9)
    # The last return is the wall, and no clutter lies behind it.
    assert out.class_id[0, 1] == BUILDING and out.range_m[0, 1] == 5.0
    last_clutter = run(make_hits([[(5.0, BUILDING, BUILDING_M, 1.0)]]), params_for(return_mode="dual_first_last"), opts)
    assert last_clutter.range_m[0].tolist() == [1.25, 5.0]


def test_rain_clutter_draws_from_the_rain_stream_only():
    p = params_for(columns=8, return_mode="dual_first_last")
    opts = BeamModelOptions(noise=False, rain_mm_per_h=200.0)
    hits = make_hits([[(8.0, BUILDING, BUILDING_M, 1.0)]] * 8)
    a, b = NoiseStreams(3), NoiseStreams(3)
    out_a = run(hits, p, opts, streams=a)
    out_b = run(hits, p, opts, streams=b)
    for name in ("range_m", "reflectivity", "signal", "class_id", "return_flags"):
        np.testing.assert_array_equal(getattr(out_a, name), getattr(out_b, name))
    assert a.rain.state != NoiseStreams(3).rain.state
    assert a.rain.state == b.rain.state


# ---------------------------------------------------------------------------------------------
# Return modes
# ---------------------------------------------------------------------------------------------

THREE_ECHOES = {
    # S proportional to rho / R^2: 0.05/100, 1.0/400, 0.5/900 -> the middle echo is the strongest.
    "middle": (0.05, 1.0, 0.5),
    # 0.05/100, 0.3/400, 1.0/900 -> the last is the strongest, the middle the second strongest.
    "last": (0.05, 0.3, 1.0),
}

EXPECTED_MODES = {
    ("middle", "strongest"): ([20.0], [FLAG_STRONGEST]),
    ("middle", "first"): ([10.0], [FLAG_FIRST]),
    ("middle", "last"): ([30.0], [FLAG_LAST]),
    ("middle", "dual_strongest_last"): ([20.0, 30.0], [FLAG_STRONGEST, FLAG_LAST]),
    ("middle", "dual_first_last"): ([10.0, 30.0], [FLAG_FIRST, FLAG_LAST]),
    ("middle", "triple_first_strongest_last"): ([10.0, 20.0, 30.0], [FLAG_FIRST, FLAG_STRONGEST, FLAG_LAST]),
    ("last", "strongest"): ([30.0], [FLAG_STRONGEST]),
    ("last", "dual_strongest_last"): ([20.0, 30.0], [FLAG_SECOND_STRONGEST, FLAG_STRONGEST | FLAG_LAST]),
    ("last", "triple_first_strongest_last"): ([10.0, 30.0], [FLAG_FIRST, FLAG_STRONGEST | FLAG_LAST]),
    ("last", "dual_first_last"): ([10.0, 30.0], [FLAG_FIRST, FLAG_LAST]),
}


@pytest.mark.parametrize("case, mode", sorted(EXPECTED_MODES))
def test_return_modes_on_a_beam_with_three_echoes(case, mode):
    rho = THREE_ECHOES[case]
    materials = material_table(reflectivity={OTHER_M: rho[0], BUILDING_M: rho[1], METAL: rho[2]})
    p = params_for(materials=materials, return_mode=mode)
    rows = [[(10.0, OTHER, OTHER_M, 1.0)], [(20.0, BUILDING, BUILDING_M, 1.0)], [(30.0, SILO, METAL, 1.0)]]
    out = run(make_hits(rows), p, weights=np.full(3, 1.0 / 3.0))
    ranges, flags = EXPECTED_MODES[(case, mode)]
    slots = RETURNS_PER_BEAM[mode]
    assert out.valid.shape == (1, slots)
    n = len(ranges)
    assert out.valid[0].tolist() == [True] * n + [False] * (slots - n)
    assert out.range_m[0, :n].tolist() == ranges
    assert out.return_flags[0, :n].tolist() == flags
    assert out.return_flags[0, n:].tolist() == [0] * (slots - n)
    assert np.isnan(out.range_m[0, n:]).all()


@pytest.mark.parametrize("mode", sorted(RETURN_MODES))
def test_one_echo_carries_every_flag_of_its_mode(mode):
    p = params_for(return_mode=mode)
    out = run(make_hits([[(10.0, BUILDING, BUILDING_M, 1.0)]]), p)
    expected = {
        "strongest": FLAG_STRONGEST,
        "first": FLAG_FIRST,
        "last": FLAG_LAST,
        "dual_strongest_last": FLAG_STRONGEST | FLAG_LAST,
        "dual_first_last": FLAG_FIRST | FLAG_LAST,
        "triple_first_strongest_last": FLAG_FIRST | FLAG_STRONGEST | FLAG_LAST,
    }[mode]
    assert out.num_returns.tolist() == [1]
    assert out.return_flags[0, 0] == expected
    assert out.primary_index().tolist() == [0]


# ---------------------------------------------------------------------------------------------
# Noise streams
# ---------------------------------------------------------------------------------------------


def test_ring_major_cells():
    # 3 columns, 2 rings: positions r * 3 + c hold cells c * 2 + r.
    assert ring_major_cells(3, 2).tolist() == [0, 2, 4, 1, 3, 5]


def test_noise_draws_follow_ring_major_order_and_range_order():
    # 2 columns x 2 rings, K = 2. Cell 0 (c0, r0) has two echoes (corn 10 m, wall 20 m); the others
    # one wall each. Ring-major: (r0,c0) cell 0 -> pairs 0 and 1, (r0,c1) cell 2 -> pair 2,
    # (r1,c0) cell 1 -> pair 3, (r1,c1) cell 3 -> pair 4. Each pair is (n1, n2).
    p = params_for(columns=2, rings=2, return_mode="triple_first_strongest_last", std_m=0.02)
    rows = [
        [(10.0, CORN, CORN_LEAF, 1.0), (20.0, BUILDING, BUILDING_M, 1.0)],
        [(11.0, BUILDING, BUILDING_M, 1.0)],
        [(12.0, BUILDING, BUILDING_M, 1.0)],
        [(13.0, BUILDING, BUILDING_M, 1.0)],
    ]
    streams = NoiseStreams(99)
    n1, n2 = streams.copy().noise.next_normal_pairs(5)
    out = run(make_hits(rows, k=2), p, BeamModelOptions(noise=True), streams=streams)
    # (cell, slot, R_e, rho_e, pair)
    cases = [
        (0, 0, 10.0, 0.15, 0),
        (0, 1, 20.0, 0.075, 1),
        (2, 0, 12.0, 0.3, 2),
        (1, 0, 11.0, 0.3, 3),
        (3, 0, 13.0, 0.3, 4),
    ]
    for cell, slot, r_e, rho_e, pair in cases:
        s = float(signal_counts(rho_e, r_e, 1.0, 100.0, 60.0, 1.0))
        sigma = float(range_sigma_m(s, 20.0, 100.0, 0.02, 0.03))
        assert out.range_m[cell, slot] == pytest.approx(r_e + sigma * n2[pair], abs=1e-12)
        assert out.signal[cell, slot] == math.floor(s + math.sqrt(s + 20.0) * n1[pair] + 0.5)
    # Two 32-bit numbers per echo: the stream moved by 10.
    reference = NoiseStreams(99)
    reference.noise.advance(10)
    assert streams.noise.state == reference.noise.state


def test_noise_off_still_draws_so_the_next_scan_matches():
    p = params_for(columns=6, return_mode="dual_first_last")
    rows = [[(5.0 + i, CORN, CORN_LEAF, 0.9), (9.0 + i, BUILDING, BUILDING_M, 0.9)] for i in range(6)]
    hits = make_hits(rows)
    on, off = NoiseStreams(5), NoiseStreams(5)
    run(hits, p, BeamModelOptions(noise=True), streams=on, scan_index=0)
    quiet = run(hits, p, BeamModelOptions(noise=False), streams=off, scan_index=0)
    assert quiet.range_m[:, 0].tolist() == [5.0 + i for i in range(6)]  # no noise applied
    assert on.noise.state == off.noise.state != NoiseStreams(5).noise.state
    second_on = run(hits, p, BeamModelOptions(noise=True), streams=on, scan_index=1)
    second_off = run(hits, p, BeamModelOptions(noise=True), streams=off, scan_index=1)
    np.testing.assert_array_equal(second_on.range_m, second_off.range_m)
    np.testing.assert_array_equal(second_on.signal, second_off.signal)


def test_same_inputs_give_identical_arrays_and_inputs_are_not_changed():
    materials = material_table(micro_slope_rad={SOIL: 0.1}, reflectivity_sd={SOIL: 0.2}, roughness_m={SOIL: 0.01})
    p = params_for(columns=50, rings=2, materials=materials, return_mode="dual_strongest_last", pulse_length_m=1.0)
    rng = np.random.default_rng(3)
    rows = []
    for _ in range(100):
        r = rng.uniform(1, 80)
        rows.append(
            [(r, CORN, CORN_LEAF, rng.uniform(0.1, 1)), (r + rng.uniform(0.2, 3), GROUND, SOIL, rng.uniform(0.05, 1))]
        )
    hits = make_hits(rows)
    before = {name: getattr(hits, name).copy() for name in vars(hits)}
    opts = BeamModelOptions(noise=True, rain_mm_per_h=20.0, visibility_m=800.0)
    a = run(hits, p, opts, streams=NoiseStreams(8), scan_index=3)
    b = run(hits, p, opts, streams=NoiseStreams(8), scan_index=3)
    for name in vars(a):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    for name, value in before.items():
        np.testing.assert_array_equal(getattr(hits, name), value)


def test_no_hits_draw_nothing():
    p = params_for(columns=3)
    streams = NoiseStreams(1)
    out = run(Hits.empty(3, 2), p, BeamModelOptions(noise=True), streams=streams)
    assert not out.valid.any()
    assert streams.noise.state == NoiseStreams(1).noise.state


# ---------------------------------------------------------------------------------------------
# Statistics with fixed seeds
# ---------------------------------------------------------------------------------------------


def test_spec_target_is_detected_with_p_spec():
    # A 10 % Lambertian target at R10 at normal incidence: S = S10, so P(S' >= S_T) = p_spec = 0.9.
    # 20 000 beams: standard error sqrt(0.9 * 0.1 / 20000) = 0.0021; tolerance 0.01 (4.7 sigma).
    n = 20_000
    materials = material_table(reflectivity={BUILDING_M: 0.1})
    p = params_for(columns=n, materials=materials)
    out = run(
        make_hits([[(60.0, BUILDING, BUILDING_M, 1.0)]] * n),
        p,
        BeamModelOptions(noise=True),
        streams=NoiseStreams(2024),
    )
    assert abs(out.valid.mean() - 0.9) < 0.01


def test_range_noise_at_high_snr_has_sigma_0():
    # rho 1 at 5 m: S = 100 * 10 * 144 (1 - e^-25) = 144000, SNR = 144000 / sqrt(144020) = 379.4,
    # SNR_spec = 9.1287, sigma_R = sqrt(0.02^2 + (0.03 * 9.1287 / 379.4)^2) = 0.020013 m: sigma_0
    # to 0.07 %. 20 000 beams: the sample std has a standard error of 0.5 %;
    # tolerance 2.5 %.
    n = 20_000
    materials = material_table(reflectivity={BUILDING_M: 1.0})
    p = params_for(columns=n, materials=materials, std_m=0.02)
    out = run(
        make_hits([[(5.0, BUILDING, BUILDING_M, 1.0)]] * n), p, BeamModelOptions(noise=True), streams=NoiseStreams(7)
    )
    sigma = float(range_sigma_m(signal_counts(1.0, 5.0, 1.0, 100.0, 60.0, 1.0), 20.0, 100.0, 0.02, 0.03))
    assert sigma == pytest.approx(0.020013, rel=1e-5)
    err = out.range_m[:, 0] - 5.0
    assert out.valid.all()
    assert abs(err.std() / sigma - 1.0) < 0.025
    assert abs(err.mean()) < 4 * sigma / math.sqrt(n)


# ---------------------------------------------------------------------------------------------
# Laws that must hold
# ---------------------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    ranges=st.lists(st.floats(1.0, 150.0), min_size=16, max_size=16),
    cosines=st.lists(st.floats(0.0, 1.0), min_size=16, max_size=16),
    grazing=st.lists(st.floats(0.0, 1.0), min_size=16, max_size=16),
    darker=st.floats(0.01, 1.0),
    k=st.floats(0.0, 2.0),
)
def test_darker_or_more_grazing_targets_are_never_detected_more_often(seed, ranges, cosines, grazing, darker, k):
    # One echo per beam in both scenes, so both draw the same n1 for each beam.
    def scene(rho: float, cos_values: list[float]):
        materials = material_table(reflectivity={BUILDING_M: rho}, incidence_exponent={BUILDING_M: k})
        p = params_for(columns=16, materials=materials, pulse_length_m=1.0)
        hits = make_hits([[(r, BUILDING, BUILDING_M, c)] for r, c in zip(ranges, cos_values)])
        return run(hits, p, BeamModelOptions(noise=True), streams=NoiseStreams(seed)).valid[:, 0]

    base = scene(0.5, cosines)
    dark = scene(0.5 * darker, cosines)
    graze = scene(0.5, [c * f for c, f in zip(cosines, grazing)])
    assert not np.any(dark & ~base)
    assert not np.any(graze & ~base)


hit_strategy = st.tuples(
    st.floats(0.0, 250.0),
    st.sampled_from([GROUND, BUILDING, CORN, OTHER]),
    st.floats(0.0, 1.0),
    st.floats(0.0, 1.0),
)


@settings(max_examples=40, deadline=None)
@given(
    rows=st.lists(st.lists(hit_strategy, min_size=0, max_size=3), min_size=4, max_size=4),
    ambient=st.sampled_from([0.0, 20.0]),
    mode=st.sampled_from(sorted(RETURN_MODES)),
    rain=st.sampled_from([0.0, 30.0]),
)
def test_returns_are_finite_and_in_range_for_any_hits(rows, ambient, mode, rain):
    materials = material_table(
        micro_slope_rad={SOIL: 0.3}, reflectivity_sd={SOIL: 0.5}, roughness_m={SOIL: 0.1}, specular={BUILDING_M: 2.0}
    )
    p = params_for(
        columns=4, materials=materials, return_mode=mode, ambient_counts=ambient, pulse_length_m=1.0, range_m=200.0
    )
    material_of = {GROUND: SOIL, BUILDING: BUILDING_M, CORN: CORN_LEAF, OTHER: OTHER_M}
    built = [[(r, c, material_of[c], cos, wet) for r, c, cos, wet in sorted(row)] for row in rows]
    out = run(
        make_hits(built, k=3),
        p,
        BeamModelOptions(noise=True, rain_mm_per_h=rain, visibility_m=300.0 if rain else math.inf),
    )
    v = out.valid
    assert np.all(np.isfinite(out.range_m[v])) and np.all(np.isfinite(out.reflectivity[v]))
    assert np.all((out.range_m[v] >= 0.0) & (out.range_m[v] <= 200.0))
    assert np.all(out.reflectivity[v] >= 0.0)
    assert np.all(out.return_flags[v] > 0) and np.all(out.return_flags[~v] == 0)
    # Returns are packed to the front and in range order.
    assert np.all(v[:, :-1] | ~v[:, 1:])


def test_draw_positions_by_hand():
    # 2 columns x 2 rings; cells 0 .. 3 have 2, 1, 1 and 2 echoes. Ring-major: ring 0 (cells 0
    # and 2), then ring 1 (cells 1 and 3): cell 0 takes pairs 0 and 1, cell 2 pair 2, cell 1
    # pair 3, cell 3 pairs 4 and 5.
    cell = np.array([0, 0, 1, 2, 3, 3])
    assert draw_positions(cell, columns=2, rings=2).tolist() == [0, 1, 3, 2, 4, 5]
    assert draw_positions(np.zeros(0, np.int64), 2, 2).size == 0


@pytest.mark.parametrize("blocks", [2, 5])
@pytest.mark.parametrize("rain", [0.0, 30.0])
def test_any_split_into_blocks_gives_the_same_bits(blocks, rain):
    rng = np.random.default_rng(4)
    rows = []
    for _ in range(40):
        n = int(rng.integers(0, 4))
        ranges = np.sort(rng.uniform(0.6, 60.0, n))
        kinds = rng.choice([(CORN, CORN_LEAF), (BUILDING, BUILDING_M), (GROUND, SOIL)], n)
        rows.append([(float(r), int(c), int(m), float(rng.uniform(0.1, 1.0))) for r, (c, m) in zip(ranges, kinds)])
    hits = make_hits(rows, k=4)
    p = params_for(columns=20, rings=2, return_mode="triple_first_strongest_last", pulse_length_m=1.0)
    opts = BeamModelOptions(noise=True, rain_mm_per_h=rain, visibility_m=500.0 if rain else math.inf)
    one_streams, split_streams = NoiseStreams(3), NoiseStreams(3)
    one = run(hits, p, opts, streams=one_streams, scan_index=2)
    split = run(hits, p, opts, streams=split_streams, scan_index=2, blocks=blocks)
    for name in one.__dataclass_fields__:
        assert np.array_equal(getattr(one, name), getattr(split, name), equal_nan=True), name
    assert (one_streams.noise.state, one_streams.rain.state) == (split_streams.noise.state, split_streams.rain.state)
