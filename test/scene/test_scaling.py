"""Cost against scene size: the generated corridors, the brute-force tracer and the gate."""

import json

import numpy as np
import pytest

from acres_lidar_ros.apps import cli
from acres_lidar_ros.apps.scaling_bench import brute_sample, fixed_pose_rays
from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.errors import SceneError
from acres_lidar_ros.scene import scaling
from acres_lidar_ros.scene.scaling import MAX_OBSTACLES, scaling_scene, scaling_triangle_count
from acres_lidar_ros.tracing.brute_force import NO_TRIANGLE, brute_force_nearest, plane_distance
from acres_lidar_ros.tracing.soup import EmbreeSoup, gate


# --- scenes ------------------------------------------------------------------------------
def test_scene_has_the_announced_triangles_objects_and_float32_vertices():
    scene = scaling_scene(7, seed=2)
    pillars, boxes = 4, 3
    assert scene.triangle_count == 2 + 2 * 12 + pillars * 4 * scaling.PILLAR_SEGMENTS + boxes * 12 * 81
    assert scene.triangle_count == scaling_triangle_count(7)
    assert set(np.unique(scene.triangle_object)) == set(range(3 + 7))
    assert np.array_equal(scene.vertices_m.astype(np.float32).astype(np.float64), scene.vertices_m)
    obstacles = scene.triangle_object >= scaling.FIRST_OBSTACLE
    corners = scene.vertices_m[scene.triangles[obstacles]]
    # Every obstacle's footprint centre lies outside the clear disc and inside the walls.
    for oid in range(3, 10):
        xy = scene.vertices_m[scene.triangles[scene.triangle_object == oid]].reshape(-1, 3)[:, :2]
        centre = (xy.min(axis=0) + xy.max(axis=0)) / 2
        assert np.hypot(*centre) >= scaling.CLEAR_RADIUS_M - 1e-9
        assert abs(centre[1]) < scaling.CORRIDOR_WIDTH_M / 2 - scaling.WALL_THICKNESS_M
    assert corners[..., 2].min() == 0.0


def test_scene_is_the_same_for_the_same_seed_and_differs_for_another():
    a, b, c = scaling_scene(20, seed=1), scaling_scene(20, seed=1), scaling_scene(20, seed=2)
    assert np.array_equal(a.vertices_m, b.vertices_m) and np.array_equal(a.triangles, b.triangles)
    assert not np.array_equal(a.vertices_m, c.vertices_m)


@pytest.mark.parametrize("n", [0, -3, MAX_OBSTACLES + 1, True, 2.5])
def test_a_size_beyond_the_limit_is_refused_before_any_allocation(n):
    with pytest.raises(SceneError, match=r"n_obstacles = .*(allowed: 1 to 10000 obstacles|must be an integer)"):
        scaling_scene(n)


def test_the_top_size_is_ten_million_triangles():
    assert 9.5e6 < scaling_triangle_count(MAX_OBSTACLES) < 1.05e7


# --- brute force from geometry ----------------------------------------------------------
def _square_at_x(x_m: float, half_m: float = 1.0) -> np.ndarray:
    a = [x_m, -half_m, -half_m]
    b = [x_m, half_m, -half_m]
    c = [x_m, half_m, half_m]
    d = [x_m, -half_m, half_m]
    return np.array([a + b + c, a + c + d], np.float32)


def test_brute_force_distance_to_a_plane_is_d_over_cos():
    corners = _square_at_x(5.0)
    angle = np.deg2rad([0.0, 5.0, 10.0, 12.0, 30.0])  # 5 tan 12 deg > 1 m: off the square
    directions = np.column_stack([np.cos(angle), np.sin(angle), np.zeros(5)])
    t, tri = brute_force_nearest(np.zeros((5, 3)), directions, corners)
    expected = 5.0 / np.cos(angle[:3])
    assert np.allclose(t[:3], expected, rtol=0, atol=1e-12)
    assert np.all(np.isinf(t[3:])) and np.all(tri[3:] == NO_TRIANGLE)
    assert np.allclose(plane_distance(np.zeros((5, 3)), directions, corners, np.zeros(5, int)), 5.0 / np.cos(angle))


def test_brute_force_keeps_the_nearest_of_many_and_sees_both_faces():
    corners = np.vstack([_square_at_x(9.0), _square_at_x(3.0), _square_at_x(6.0)])
    t, tri = brute_force_nearest(np.zeros((1, 3)), np.array([[1.0, 0.01, 0.02]]), corners)
    assert tri[0] in (2, 3) and t[0] == pytest.approx(3.0, abs=1e-12)
    t, tri = brute_force_nearest(np.array([[10.0, 0.0, 0.1]]), np.array([[-1.0, 0.0, 0.0]]), corners)  # back
    assert tri[0] in (0, 1) and t[0] == pytest.approx(1.0, abs=1e-12)
    t, _ = brute_force_nearest(np.array([[10.0, 0.0, 0.0]]), np.array([[1.0, 0.0, 0.0]]), corners)  # behind
    assert np.isinf(t[0])


# --- the gate --------------------------------------------------------------------------------
def _both_tracers(n_obstacles, sample):
    config = load_sensor_config("polaris")
    rays = fixed_pose_rays(config)[sample]
    scene = scaling_scene(n_obstacles)
    corners = scene.corners()
    o, d = rays[:, :3].astype(np.float64), rays[:, 3:].astype(np.float64)
    norm = np.linalg.norm(d, axis=1)
    t_b, k_b = brute_force_nearest(o, d, corners)
    _, k_e = EmbreeSoup(scene.vertices_m, scene.triangles).cast(np.ascontiguousarray(rays))
    t_e = plane_distance(o, d, corners, k_e)
    obj = scene.triangle_object

    def side(t, k):
        r = np.where(k != NO_TRIANGLE, t * norm, np.inf)
        r[r > config.range_m] = np.inf
        return r, np.where(k != NO_TRIANGLE, obj[np.maximum(k, 0)], -1)

    return side(t_b, k_b), side(t_e, k_e)


@pytest.mark.parametrize("n_obstacles", [1, 10])
def test_embree_agrees_with_brute_force_on_small_scenes(n_obstacles):
    sample = brute_sample(57600, 1_000_000)  # the nested fixed sample, 1000 rays here
    (rb, ob), (re, oe) = _both_tracers(n_obstacles, sample)
    result = gate(rb, ob, re, oe)
    assert result.rays == len(sample) == 1000
    assert np.isfinite(rb).sum() > 500 and len(set(ob[np.isfinite(rb)])) >= 3  # ground, walls, obstacles
    assert result.mismatches == 0, result


def test_the_gate_catches_a_wrong_brute_force_result():
    (rb, ob), (re, oe) = _both_tracers(10, brute_sample(57600, 1_000_000))
    hits = np.flatnonzero(np.isfinite(rb))
    far, other, lost = rb.copy(), ob.copy(), rb.copy()
    far[hits[0]] += 2e-6
    other[hits[1]] = ob[hits[1]] + 1
    lost[hits[2]] = np.inf
    assert gate(far, ob, re, oe).distance == 1
    assert gate(rb, other, re, oe).object == 1
    assert gate(lost, ob, re, oe).hit_miss == 1
    assert gate(far, ob, re, oe, tolerance_m=1e-5).mismatches == 0


# --- the command -------------------------------------------------------------------------
def test_bench_scaling_json_and_plot(tmp_path, capsys):
    png = tmp_path / "scaling.png"
    code = cli.main(["bench", "--scaling", "--sizes", "1", "3", "--json", "--plot", str(png)])
    out = capsys.readouterr().out
    assert code == 0
    result = json.loads(out)["scaling"]
    assert [row["obstacles"] for row in result["rows"]] == [1, 3]
    assert all(row["gate"]["mismatches"] == 0 and row["rays"] == 57600 for row in result["rows"])
    assert result["rows"][0]["brute_rays"] == 57600 and result["ratio_at_3200"] is None
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from PIL import Image

    with Image.open(png) as image:
        assert image.size[0] > 400 and image.size[1] > 300


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--scaling", "--sizes", "20000"], "--sizes = 20000: allowed: 1 to 10000 obstacles (the memory limit"),
        (["--scaling", "--sizes", "0"], "--sizes = 0: allowed: 1 to 10000"),
        (["--deadline-ms", "0"], "--deadline-ms 0.0: each budget must be a number of ms > 0"),
        (["--deadline-ms", "-1", "0.5"], "--deadline-ms -1.0: each budget must be"),
        (["--plot", "x.png"], "the plot is of --scaling"),
    ],
)
def test_bench_bad_input_is_one_clear_message(capsys, argv, message):
    assert cli.main(["bench", *argv]) == 2
    assert message in capsys.readouterr().err


def test_bench_scaling_exits_1_when_the_gate_finds_a_mismatch(monkeypatch, capsys):
    # README: "exits 1 if any ray mismatches". Fault injection: the real gate is handed a brute-force
    # result whose first three hits are 1 m further, so it reports three mismatches; the command
    # must fail with them, not only print them.
    from acres_lidar_ros.apps import scaling_bench

    real_gate = scaling_bench.gate

    def gate_of_a_wrong_brute_force(range_b, object_b, range_e, object_e):
        wrong = range_b.copy()
        wrong[np.flatnonzero(np.isfinite(wrong))[:3]] += 1.0
        return real_gate(wrong, object_b, range_e, object_e)

    monkeypatch.setattr(scaling_bench, "gate", gate_of_a_wrong_brute_force)
    code = cli.main(["bench", "--sensor", "default", "--scaling", "--sizes", "1", "--json"])  # 1440 rays: quick
    captured = capsys.readouterr()
    assert code == 1
    assert json.loads(captured.out)["scaling"]["mismatches"] == 3
    assert "the gate failed: 3 mismatches (must be 0)" in captured.err
