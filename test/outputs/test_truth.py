"""Why a beam gave no return: each drop reason on a constructed scene.

The scene is four walls around the spec's generic default sensor (180 x 8, no lens offset, no
mount rotation, 1.9 m above the base) and no ground under it. Every expectation is computed here
from the geometry (ray-plane intersections) and the spec's equations ("Backscatter", "Range
Equation", "Detection Threshold", "Rain and Fog", "Self Returns"), never from the package's
physics functions. Ranges agree to the tracer's float32 precision (Embree), 1 mm here.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from acres_lidar_ros.body.self_returns import SelfReturnTable
from acres_lidar_ros.config.material_table import CLASS_ID, MATERIAL_ID
from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.errors import ConfigError, OutputError
from acres_lidar_ros.radiometry.cell_truth import REASON, REASON_NAMES
from acres_lidar_ros.scan.scan_types import ScanOptions
from acres_lidar_ros.scan.scanner import Scanner
from acres_lidar_ros.scene.builder import SceneBuilder
from acres_lidar_ros.scene.grids import TerrainGrid
from acres_lidar_ros.scene.instances import BODY_INSTANCE, NO_INSTANCE
from acres_lidar_ros.sensor.poses import PoseHistory
from acres_lidar_ros.tracing.trace import Tracer

SENSOR_Z_M = 1.9
R10_M = 20.0  # radiometry.range_at_10pct_m, so that a dark wall at 30 m falls below S_T
# (axis, plane coordinate m, half extent along the other horizontal axis m, material)
WALLS = {
    "near": ("x", 0.3, 0.15, "concrete"),  # closer than min_range_m = 0.5 m
    "bright": ("y", 20.0, 6.0, "concrete"),
    "dark": ("x", -30.0, 8.0, "asphalt"),
    "far": ("y", -100.0, 40.0, "concrete"),  # beyond range_m = 60 m
}
WALL_Z_M = (-20.0, 20.0)
WALL_INSTANCE: dict[str, int] = {}  # the id SceneBuilder gives each wall (its instance label)


@pytest.fixture(scope="module")
def config():
    return load_sensor_config("default").with_overrides(
        {
            "sub_rays": 1,
            "return_mode": "strongest",
            "radiometry.range_at_10pct_m": R10_M,
            "weather.clutter_max_range_m": 0.0,  # no fog slabs: the extinction alone
        }
    )


@pytest.fixture(scope="module")
def tracer():
    builder = SceneBuilder(TerrainGrid(np.array([5000.0, 5000.0]), 10.0, np.zeros((2, 2))))  # no ground here
    for name, (axis, at, half, material) in WALLS.items():
        thick = 0.1 if name == "near" else 1.0
        centre = at + math.copysign(thick / 2, at)
        base, size = ([centre, 0.0], [thick, 2 * half]) if axis == "x" else ([0.0, centre], [2 * half, thick])
        WALL_INSTANCE[name] = builder.add_box(
            base, [*size, WALL_Z_M[1] - WALL_Z_M[0]], "building", material=material, base_z_m=WALL_Z_M[0], name=name
        )
    return Tracer(builder.build())


def at_rest():
    return PoseHistory.from_arrays(np.zeros(1), np.zeros((1, 3)), np.array([[0.0, 0.0, 0.0, 1.0]]))


def scan_with(config, tracer, table=None, **options):
    opts = ScanOptions(noise=False, motion_distortion=False, self_returns=table is not None, truth=True, **options)
    scanner = Scanner(config, tracer=tracer, options=opts, self_table=table)
    return scanner, scanner.scan(at_rest(), stamp_ns=10**9)


def expected(config, directions, alpha_per_m=0.0):
    """Per cell, by hand: the wall each beam meets, its range, incidence, S and the reason."""
    n = directions.shape[0]
    origin = np.array([0.0, 0.0, SENSOR_Z_M])
    range_m = np.full(n, np.inf)
    cos_theta = np.full(n, np.nan)
    material = np.full(n, -1)
    instance = np.full(n, -1)
    edge = np.zeros(n, bool)
    for wall, (axis, at, half, name) in WALLS.items():
        i, j = (0, 1) if axis == "x" else (1, 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            r = (at - origin[i]) / directions[:, i]
            point = origin + r[:, None] * directions
        inside = (r > 0) & (np.abs(point[:, j]) <= half) & (point[:, 2] > WALL_Z_M[0]) & (point[:, 2] < WALL_Z_M[1])
        near_edge = inside & (np.abs(np.abs(point[:, j]) - half) < 0.05)
        take = inside & (r < range_m)
        range_m[take] = r[take]
        cos_theta[take] = np.abs(directions[take, i])  # the wall's normal is the axis
        material[take] = MATERIAL_ID[name]
        instance[take] = WALL_INSTANCE[wall]
        edge |= near_edge
    mats, rad = config.materials, config.radiometry
    rho = mats.reflectivity[np.maximum(material, 0)]
    theta = np.arccos(np.clip(cos_theta, 0, 1))
    rho_bs = rho * np.abs(cos_theta) ** mats.incidence_exponent[np.maximum(material, 0)] + mats.specular[
        np.maximum(material, 0)
    ] * np.exp(-((theta / mats.specular_width_rad[np.maximum(material, 0)]) ** 2))
    s10, b = rad.signal_at_10pct_counts, rad.ambient_counts
    with np.errstate(invalid="ignore"):  # inf range: no surface
        clear = s10 * (rho_bs / 0.1) * (R10_M / range_m) ** 2 * (1 - np.exp(-((range_m / rad.overlap_range_m) ** 2)))
        signal = clear * np.exp(-2 * alpha_per_m * range_m)
    s_t = s10 - norm.ppf(rad.detection_probability_at_spec) * math.sqrt(s10 + b)
    reason = np.full(n, REASON["no_surface"])
    hit = range_m <= config.range_m
    reason[hit & (range_m < config.min_range_m)] = REASON["below_min_range"]
    window = hit & (range_m >= config.min_range_m)
    reason[window & (signal >= s_t)] = REASON["returned"]
    reason[window & (signal < s_t) & (clear >= s_t)] = REASON["extinguished_by_weather"]
    reason[window & (signal < s_t) & (clear < s_t)] = REASON["below_threshold"]
    want = {"range_m": range_m, "theta": theta, "material": material, "instance": instance, "signal": signal}
    return {**want, "s_t": s_t}, reason, edge


def test_each_reason_of_a_clear_scan_is_the_one_the_geometry_and_the_equations_give(config, tracer):
    scanner, scan = scan_with(config, tracer)
    want, reason, edge = expected(config, scanner.pattern.directions_sensor.reshape(-1, 3))
    t = scan.truth
    keep = ~edge
    np.testing.assert_array_equal(t.reason[keep], reason[keep])
    for name in ("returned", "no_surface", "below_min_range", "below_threshold"):
        assert (reason[keep] == REASON[name]).sum() >= 8, name  # each occurs on several beams
    surface = keep & (reason != REASON["no_surface"])
    np.testing.assert_allclose(t.range_m[surface], want["range_m"][surface], rtol=0, atol=1e-3)
    np.testing.assert_allclose(t.incidence_rad[surface], want["theta"][surface], atol=1e-5)
    np.testing.assert_allclose(t.signal_counts[surface], want["signal"][surface], rtol=2e-3)
    np.testing.assert_array_equal(t.material_id[surface], want["material"][surface])
    np.testing.assert_array_equal(t.instance[surface], want["instance"][surface])
    assert len(set(WALL_INSTANCE.values())) == 4 and 0 not in WALL_INSTANCE.values()  # 0 is the terrain
    assert (t.class_id[surface] == CLASS_ID["building"]).all()
    np.testing.assert_allclose(t.threshold_counts, want["s_t"], rtol=1e-9)
    # With the spec's shipped numbers S_T is 85.96 counts.
    assert t.threshold_counts[0] == pytest.approx(85.96, abs=0.01)
    empty = keep & (reason == REASON["no_surface"])
    assert np.isnan(t.range_m[empty]).all() and np.isnan(t.signal_counts[empty]).all()
    assert (t.instance[empty & (want["instance"] < 0)] == NO_INSTANCE).all()
    # A returned cell is exactly a cell with a return; the noise-free point is R_e d.
    np.testing.assert_array_equal(t.reason == REASON["returned"], scan.returns.valid.any(axis=1))
    d = scanner.pattern.directions_sensor.reshape(-1, 3)
    np.testing.assert_allclose(t.points_sensor[surface], want["range_m"][surface, None] * d[surface], rtol=0, atol=1e-3)


def test_fog_extinguishes_what_clear_air_detects(config, tracer):
    visibility_m = 50.0  # V_f < 0.5 km: q = 0, so alpha = 3.912 / V at any wavelength
    scanner, scan = scan_with(config, tracer, visibility_m=visibility_m)
    want, reason, edge = expected(config, scanner.pattern.directions_sensor.reshape(-1, 3), 3.912 / visibility_m)
    keep = ~edge
    np.testing.assert_array_equal(scan.truth.reason[keep], reason[keep])
    assert (reason[keep] == REASON["extinguished_by_weather"]).sum() >= 8
    assert (reason[keep] == REASON["below_threshold"]).sum() >= 8  # the dark wall fails in clear air too
    lost = keep & (reason == REASON["extinguished_by_weather"])
    np.testing.assert_allclose(scan.truth.signal_counts[lost], want["signal"][lost], rtol=2e-3)


def test_the_body_blocks_and_returns_where_its_table_says(config, tracer):
    cells = config.columns * config.rings
    p_self, p_block = np.zeros(cells, np.float32), np.zeros(cells, np.float32)
    range_m, intensity = np.zeros(cells, np.float32), np.zeros(cells, np.float32)
    blocked = np.arange(cells) % 5 == 1
    body = np.arange(cells) % 5 == 3
    p_block[blocked] = 1.0
    p_self[body], range_m[body], intensity[body] = 1.0, 0.1, 40.0  # nearer than 0.2 m: the body's minimum
    table = SelfReturnTable.from_planes(
        np.stack([p_self, range_m, intensity, p_block]), config.columns, config.rings, None
    )
    scanner, scan = scan_with(config, tracer, table=table)
    _, scene_reason, edge = expected(config, scanner.pattern.directions_sensor.reshape(-1, 3))
    t = scan.truth
    assert (t.reason[blocked] == REASON["blocked_by_body"]).all()
    assert (t.reason[body] == REASON["returned"]).all()
    assert (t.class_id[body] == CLASS_ID["vehicle"]).all() and (t.material_id[body] == MATERIAL_ID["vehicle"]).all()
    assert (t.instance[body] == BODY_INSTANCE).all()
    np.testing.assert_allclose(t.range_m[body], 0.2)
    assert np.isnan(t.signal_counts[body]).all()
    rest = ~blocked & ~body & ~edge
    np.testing.assert_array_equal(t.reason[rest], scene_reason[rest])
    # A blocked cell keeps what the scene had there (a wall that would have returned, say).
    hidden = blocked & ~edge & (scene_reason == REASON["returned"])
    assert hidden.sum() >= 8 and np.isfinite(t.range_m[hidden]).all()


def test_the_returns_are_the_same_with_and_without_the_truth(config, tracer):
    """With the noise, and with fog and its clutter slabs (which are no surface)."""
    foggy = config.with_overrides({"weather.clutter_max_range_m": 10.0})
    options = {"seed": 2, "visibility_m": 300.0}
    plain = Scanner(foggy, tracer=tracer, options=ScanOptions(**options)).scan(at_rest(), 10**9)
    truthful = Scanner(foggy, tracer=tracer, options=ScanOptions(**options, truth=True)).scan(at_rest(), 10**9)
    assert plain.truth is None and truthful.truth is not None
    for name in ("range_m", "valid", "signal", "class_id", "return_flags"):
        np.testing.assert_array_equal(getattr(plain.returns, name), getattr(truthful.returns, name))
    np.testing.assert_array_equal(truthful.truth.reason == REASON["returned"], truthful.returns.valid[:, 0])
    assert (truthful.truth.class_id[truthful.returns.valid[:, 0]] == CLASS_ID["precipitation"]).any()
    # With the noise on, the truth's range is R_e, not the measured range.
    clear = Scanner(config, tracer=tracer, options=ScanOptions(seed=2, truth=True)).scan(at_rest(), 10**9)
    lit = clear.returns.valid[:, 0]
    assert lit.sum() > 8
    assert not np.allclose(clear.truth.range_m[lit], clear.returns.range_m[lit, 0], rtol=0, atol=1e-9)
    np.testing.assert_allclose(clear.truth.range_m[lit], clear.returns.range_m[lit, 0], atol=0.2)


def test_a_beam_outside_the_valid_azimuth_window_is_outside_window(config, tracer):
    """The attribute list's azimuth window (docs/sensors.md): the firing angle ``(scan_start - a) mod 360``
    must lie in ``[start, end)``, here [120, 60) through 360, so FLU azimuths a in (60, 120] deg
    (the bright wall's side) give no point."""
    windowed = config.with_overrides({"valid_start_azimuth_deg": 120.0, "valid_end_azimuth_deg": 60.0})
    scanner, scan = scan_with(windowed, tracer)
    d = scanner.pattern.directions_sensor.reshape(-1, 3)
    _, reason, edge = expected(config, d)
    a = np.degrees(np.arctan2(d[:, 1], d[:, 0]))
    assert windowed.effective["lidar"]["scan_start_azimuth_deg"] == 180.0
    firing = np.mod(180.0 - a, 360.0)
    out = (firing >= 60.0) & (firing < 120.0)
    keep = ~edge & (np.abs(a - 60.0) > 0.5) & (np.abs(a - 120.0) > 0.5)
    lost = keep & out & (reason == REASON["returned"])
    assert lost.sum() >= 8
    want = np.where(lost, REASON["outside_window"], reason)
    np.testing.assert_array_equal(scan.truth.reason[keep], want[keep])
    assert not scan.returns.valid[lost].any()


def test_outside_window_is_a_defined_code_and_the_codes_are_documented():
    assert REASON_NAMES == (
        "returned",
        "no_surface",
        "below_min_range",
        "below_threshold",
        "blocked_by_body",
        "extinguished_by_weather",
        "outside_window",
    )
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "outputs.md").read_text()
    for code, name in enumerate(REASON_NAMES):
        assert f"| {code} | `{name}` |" in doc


def test_truth_needs_the_radiometry():
    with pytest.raises(ConfigError, match="truth = true needs radiometry"):
        ScanOptions(truth=True, radiometry=False)
    with pytest.raises(ConfigError, match="truth = 1"):
        ScanOptions(truth=1)


def test_the_truth_file_round_trips_and_is_written_whole(config, tracer, tmp_path):
    from acres_lidar_ros.outputs.truth_cloud import TRUTH_POINT, read_truth_npz, write_truth_npz

    _, scan = scan_with(config, tracer)
    path = write_truth_npz(tmp_path / "scan.truth.npz", scan)
    back = read_truth_npz(path)
    assert back.cells.dtype == TRUTH_POINT and back.cells.shape == (config.columns, config.rings)
    cells = back.cells.reshape(-1)
    t = scan.truth
    np.testing.assert_array_equal(cells["reason"], t.reason)
    np.testing.assert_array_equal(cells["range_m"], t.range_m.astype(np.float32))
    np.testing.assert_array_equal(cells["signal_counts"], t.signal_counts.astype(np.float32))
    np.testing.assert_array_equal(cells["material"], t.material_id)
    np.testing.assert_array_equal(cells["instance"], t.instance)
    np.testing.assert_array_equal(cells["x"], t.points_sensor[:, 0].astype(np.float32))
    assert back.reason_names == REASON_NAMES and back.stamp_ns == scan.stamp_ns and back.frame_id == scan.frame_id
    assert back.class_names[CLASS_ID["building"]] == "building"
    # The cell of column c, ring r is row c, column r (as the organised cloud).
    assert back.cells[3, 5]["reason"] == t.reason[3 * config.rings + 5]
    with pytest.raises(OutputError, match="exists already"):
        write_truth_npz(path, scan)
    bad = tmp_path / "bad.truth.npz"
    bad.write_bytes(b"not a zip")
    with pytest.raises(OutputError, match="not a readable .npz"):
        read_truth_npz(bad)
    plain = Scanner(config, tracer=tracer, options=ScanOptions(noise=False)).scan(at_rest(), 10**9)
    with pytest.raises(OutputError, match="no cell truth"):
        write_truth_npz(tmp_path / "none.truth.npz", plain)
    assert not (tmp_path / "none.truth.npz").exists()


def test_the_truth_layout_is_one_packed_dtype_its_fields_derive_from():
    from acres_lidar_ros.outputs.pointcloud2 import FLOAT32, UINT8, UINT32, point_fields
    from acres_lidar_ros.outputs.truth_cloud import TRUTH_POINT

    assert point_fields(TRUTH_POINT) == [
        ("x", 0, FLOAT32, 1),
        ("y", 4, FLOAT32, 1),
        ("z", 8, FLOAT32, 1),
        ("range_m", 12, FLOAT32, 1),
        ("incidence_rad", 16, FLOAT32, 1),
        ("signal_counts", 20, FLOAT32, 1),
        ("threshold_counts", 24, FLOAT32, 1),
        ("instance", 28, UINT32, 1),
        ("class", 32, UINT8, 1),
        ("material", 33, UINT8, 1),
        ("reason", 34, UINT8, 1),
    ]
    assert TRUTH_POINT.itemsize == 35


def test_the_truth_topic_goes_out_with_its_cloud_through_the_node_loop(config, tracer):
    """The ROS-free loop with the node's packing (``runtime.messages.pack_scan``), messages built
    with rosbags and read back from their PointField lists alone."""
    from acres_lidar_ros.outputs.point_types import PROFILES
    from acres_lidar_ros.outputs.pointcloud2 import decode_pointcloud2, pointcloud2_message
    from acres_lidar_ros.outputs.truth_cloud import TRUTH_POINT
    from acres_lidar_ros.runtime.events import LogThrottle
    from acres_lidar_ros.runtime.loop import InlineExecutor, NodeLoop
    from acres_lidar_ros.runtime.messages import pack_scan

    ms = 1_000_000
    now = {"ns": 0}
    scanner = Scanner(config, tracer=tracer, options=ScanOptions(noise=False, self_returns=False, truth=True))
    emitted = []
    loop = NodeLoop(
        scanner,
        lambda: now["ns"],
        lambda shaped, job: (shaped.scan, pack_scan(shaped, PROFILES["XYZI"], job.stamp_ns, pointcloud2_message)),
        emitted.append,
        executor=InlineExecutor(),
        throttle=LogThrottle(5.0, lambda: now["ns"]),
    )
    for t_ms in range(880, 1300, 20):  # at rest; each pose arrives 1 ms after its stamp
        now["ns"] = (t_ms + 1) * ms
        emitted.append(loop.on_pose(t_ms * ms, (0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0), "odom", "base_footprint"))
        emitted.append(loop.tick())
    jobs = [job for out in emitted for job in out.publish]
    assert jobs
    ((scan, messages),) = jobs[0].result  # a whole scan: one slice
    truth = messages.truth
    assert (truth.height, truth.width, truth.point_step) == (config.columns, config.rings, TRUTH_POINT.itemsize)
    assert truth.header.stamp == messages.points.header.stamp and truth.header.frame_id == "lidar"
    cells = decode_pointcloud2(truth)
    assert cells.dtype.names == TRUTH_POINT.names
    np.testing.assert_array_equal(cells["reason"].reshape(-1), scan.truth.reason)
    # The truth says returned exactly where the organised cloud has a point.
    points = decode_pointcloud2(messages.points).reshape(-1)
    np.testing.assert_array_equal(cells["reason"].reshape(-1) == REASON["returned"], np.isfinite(points["x"]))
    _, reason, edge = expected(config, scanner.pattern.directions_sensor.reshape(-1, 3))
    np.testing.assert_array_equal(cells["reason"].reshape(-1)[~edge], reason[~edge])


def test_scan_and_record_with_truth_write_one_truth_file_per_scan(tmp_path, capsys):
    import json

    from acres_lidar_ros.apps import cli
    from acres_lidar_ros.outputs.truth_cloud import read_truth_npz

    out = tmp_path / "scan"
    assert cli.main(["scan", "--sensor", "default", "--truth", "--out", str(out), "--seed", "4"]) == 0
    stdout = capsys.readouterr().out
    (path,) = (out / "lidar").glob("scan_*.truth.npz")
    back = read_truth_npz(path)
    returned = int((back.cells["reason"] == REASON["returned"]).sum())
    assert returned > 0 and f"{returned} returned" in stdout
    row = json.loads((out / "lidar.jsonl").read_text())
    assert f"lidar/{path.name}" in row["files"] and back.stamp_ns == row["stamp_ns"]
    # A recording without point files still writes the truth, and lists it.
    drive = tmp_path / "drive"
    argv = ["record", "--sensor", "default", "--truth", "--files", "none", "--duration", "0.35", "--no-progress"]
    assert cli.main([*argv, "--out", str(drive)]) == 0
    rows = [json.loads(line) for line in (drive / "lidar.jsonl").read_text().splitlines()]
    files = sorted((drive / "lidar").glob("*"))
    assert rows and [f"lidar/{p.name}" for p in files] == [name for r in rows for name in r["files"]]
    assert all(p.name.endswith(".truth.npz") for p in files)


def test_bench_truth_times_the_plain_scan_and_the_scan_with_truth_in_one_run(capsys):
    import json

    from acres_lidar_ros.apps import cli

    assert cli.main(["bench", "--sensor", "default", "--scans", "2", "--json", "--truth"]) == 0
    result = json.loads(capsys.readouterr().out)
    variant = result["variant"]
    assert variant["options"] == ["truth"]
    total = sum(variant[f"{k}_median"] for k in ("rays_ms", "trace_ms", "returns_ms", "points_ms", "packing_ms"))
    assert variant["scan_ms_median"] > 0 and total > 0
    assert variant["overhead_pct"] == pytest.approx(100 * (variant["scan_ms_median"] / result["scan_ms_median"] - 1))
    assert cli.main(["bench", "--sensor", "default", "--scans", "1", "--json", "--truth", "--labels"]) == 0
    both = json.loads(capsys.readouterr().out)["variant"]
    assert both["options"] == ["truth", "labels"] and both["point_type"] != result["point_type"]
    assert "variant" not in json.loads(
        (cli.main(["bench", "--sensor", "default", "--scans", "1", "--json"]), capsys.readouterr().out)[1]
    )


def test_merging_the_body_into_a_truth_copies_unless_told_not_to(config, tracer):
    from acres_lidar_ros.body.self_returns import SelfDecision, SelfReturnTable, merge_self_truth

    _, scan = scan_with(config, tracer)
    cells = config.columns * config.rings
    planes = np.zeros((4, cells), np.float32)
    planes[3, :5] = 1.0
    table = SelfReturnTable.from_planes(planes, config.columns, config.rings, None)
    blocked = np.zeros(cells, bool)
    blocked[:5] = True
    decision = SelfDecision(np.zeros(0, np.int64), np.arange(5), np.zeros(cells), np.zeros(cells, bool), blocked)
    before = scan.truth.reason.copy()
    merged = merge_self_truth(table, scan.truth, decision)
    assert (merged.reason[:5] == REASON["blocked_by_body"]).all()
    np.testing.assert_array_equal(scan.truth.reason, before)  # the input is untouched
    in_place = merge_self_truth(table, scan.truth, decision, copy=False)
    assert in_place is scan.truth and (scan.truth.reason[:5] == REASON["blocked_by_body"]).all()
