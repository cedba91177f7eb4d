"""The acres-lidar command line end to end: files and bag read back, bad input, Ctrl-C."""

import json
import math

import numpy as np
import pytest
from rosbags.highlevel import AnyReader
from urdf_support import urdf_with

from acres_lidar_ros.apps import cli
from acres_lidar_ros.outputs.pcd import read_pcd
from acres_lidar_ros.outputs.ply import read_ply
from acres_lidar_ros.outputs.pointcloud2 import decode_pointcloud2
from acres_lidar_ros.outputs.tum import read_tum


def run(capsys, *argv):
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_help_shows_examples(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "examples:" in out and "acres-lidar record" in out and "acres-lidar bench" in out


def test_scan_writes_every_file_once(tmp_path, capsys):
    out = tmp_path / "scan"
    code, stdout, _ = run(capsys, "scan", "--out", str(out), "--format", "both", "--seed", "3")
    assert code == 0, stdout
    pcd = list((out / "lidar").glob("scan_*.pcd"))
    ply = list((out / "lidar").glob("scan_*.ply"))
    png = list((out / "lidar").glob("scan_*.png"))
    assert len(pcd) == len(ply) == len(png) == 1
    cloud = read_pcd(pcd[0])
    assert cloud.shape == (1800, 32)
    points = read_ply(ply[0])
    assert np.isfinite(cloud["x"]).sum() == int(stdout.split()[0])
    assert len(points) >= np.isfinite(cloud["x"]).sum()
    rows = (out / "lidar.jsonl").read_text().splitlines()
    assert len(rows) == 1 and json.loads(rows[0])
    episode = json.loads((out / "episode.json").read_text())
    assert "classes" in json.dumps(episode) and "materials" in json.dumps(episode)
    effective = json.loads((out / "config.json").read_text())
    assert effective["sensors"]["lidar"]["columns"] == 1800 and effective["options"]["seed"] == 3
    # The CLI loads the sensor's self-return table for the scanner: the Polaris body is in the
    # scan (the spec's ~15,900 body points within 1.7 m), and out of it with --no-self-returns.
    near = np.linalg.norm(np.c_[points["x"], points["y"], points["z"]], axis=1) < 1.7
    assert 14500 < int(((points["class"] == 12) & near).sum()) < 17500
    code, _, _ = run(capsys, "scan", "--out", str(tmp_path / "bare"), "--format", "ply", "--no-self-returns")
    bare = read_ply(next((tmp_path / "bare" / "lidar").glob("scan_*.ply")))
    near = np.linalg.norm(np.c_[bare["x"], bare["y"], bare["z"]], axis=1) < 1.7
    assert code == 0 and int(((bare["class"] == 12) & near).sum()) == 0


def test_record_bag_and_files_read_back(tmp_path, capsys):
    out = tmp_path / "drive"
    code, stdout, _ = run(
        capsys,
        "record",
        "--duration",
        "0.5",
        "--out",
        str(out),
        "--point-type",
        "XYZIRT",
        "--no-progress",
        "--files",
        "pcd",
    )
    assert code == 0
    # Due at t = 0, 0.1, ..., 0.5 s of the drive (spec "Scan Stamp"): six scans. The first sweeps
    # the period before the first pose and holds it, flagged in its row and counted.
    assert "6 scans (1 holding the first pose)" in stdout and "real-time factor" in stdout
    assert len(list((out / "lidar").glob("scan_*.pcd"))) == 6
    rows = [json.loads(line) for line in (out / "lidar.jsonl").read_text().splitlines()]
    assert [r["sweep"]["pose_coverage"] for r in rows] == ["before_first_pose"] + ["covered"] * 5
    episode = json.loads((out / "episode.json").read_text())
    assert episode["counters"]["scans_held_first_pose"] == 1 and episode["counters"]["scans_across_pose_gap"] == 0
    times, positions, quaternions = read_tum(out / "trajectory_gt.tum")
    assert len(times) >= 50 and np.allclose(np.linalg.norm(quaternions, axis=1), 1, atol=1e-6)
    counts, stamps = {}, []
    with AnyReader([out / "bag"]) as reader:
        for connection, timestamp, raw in reader.messages():
            counts[connection.topic] = counts.get(connection.topic, 0) + 1
            if connection.topic == "/lidar/points":
                msg = reader.deserialize(raw, connection.msgtype)
                assert (msg.height, msg.width, msg.point_step, msg.row_step) == (1800, 32, 26, 32 * 26)
                cloud = decode_pointcloud2(msg)
                stamp_s = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
                stamps.append(stamp_s)
                # The last column fires just before the stamp, the first one period before it.
                assert cloud["timestamp"][0, 0] == pytest.approx(stamp_s - 0.1, abs=1e-6)
                assert timestamp == pytest.approx(stamp_s * 1e9 + 12e6, abs=2)  # logged at stamp + delay
    assert counts["/lidar/points"] == 6 and counts["/tf_static"] == 1
    assert counts["/odom"] == counts["/tf"] == counts["/clock"] >= 50
    np.testing.assert_allclose(np.diff(stamps), 0.1, atol=1e-6)


def test_record_velodyne_clouds_for_lio_sam(tmp_path, capsys):
    """LIO-SAM and FAST-LIO: dense, ring and time (s after a stamp at the sweep start)."""
    out = tmp_path / "lio"
    argv = ["record", "--duration", "0.2", "--out", str(out), "--point-type", "velodyne", "--no-progress"]
    code, stdout, _ = run(capsys, *argv, "--files", "pcd")
    # Due at t = 0, 0.1 and 0.2 s; the first would be stamped at its sweep start, -0.1 s, which ROS
    # time cannot hold: it is left out and counted.
    assert code == 0 and "2 scans" in stdout
    assert json.loads((out / "episode.json").read_text())["counters"]["scans_before_time_zero"] == 1
    stamps = []
    with AnyReader([out / "bag"]) as reader:
        for connection, timestamp, raw in reader.messages():
            if connection.topic != "/lidar/points":
                continue
            msg = reader.deserialize(raw, connection.msgtype)
            assert [f.name for f in msg.fields] == ["x", "y", "z", "intensity", "ring", "time"]
            assert msg.height == 1 and msg.is_dense and msg.point_step == 22
            cloud = decode_pointcloud2(msg)
            assert np.isfinite(cloud["x"]).all() and 0.0 <= cloud["time"].min() < cloud["time"].max() < 0.1
            assert set(np.unique(cloud["ring"])) <= set(range(32))
            stamp_ns = msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec
            assert timestamp == pytest.approx(stamp_ns + 0.1e9 + 12e6, abs=2)  # released at the sweep end + delay
            stamps.append(stamp_ns)
    assert len(stamps) == 2 and stamps[1] - stamps[0] == 100_000_000
    pcds = sorted((out / "lidar").glob("scan_*.pcd"))
    assert len(pcds) == 2 and read_pcd(pcds[0]).dtype.names == ("x", "y", "z", "intensity", "ring", "time")


def test_scan_writes_the_pcd_in_the_point_type(tmp_path, capsys):
    out = tmp_path / "ouster"
    code, _, _ = run(capsys, "scan", "--out", str(out), "--format", "pcd", "--point-type", "ouster")
    assert code == 0
    (pcd,) = (out / "lidar").glob("scan_*.pcd")
    cloud = read_pcd(pcd)
    assert cloud.shape == (32, 1800)  # rows = rings, as ouster_ros
    assert cloud.dtype.names == ("x", "y", "z", "intensity", "t", "reflectivity", "ring", "ambient", "range")
    np.testing.assert_array_equal(cloud["ring"][:, 0], np.arange(32))


@pytest.mark.parametrize(
    "argv, message",
    [
        (["scan", "--sensor", "nope.json"], "sensors file 'nope.json' does not exist"),
        (["scan", "--scene", "nope_scene.json"], "nope_scene.json"),
        (["scan", "--pose", "0", "0", "nan", "0", "0", "0"], "expected six finite numbers"),
        (["scan", "--rain", "900"], "rain_mm_per_h = 900.0 is out of range"),
        (["scan", "--visibility", "5"], "visibility_m = 5.0 is out of range"),
        (["record", "--duration", "-1"], "--duration -1.0: expected a number of seconds > 0"),
        (["record", "--still-start", "-3"], "--still-start -3.0: expected seconds >= 0 and <= 600"),
        (["record", "--trajectory", "missing.tum"], "missing.tum"),
        (["bench", "--scans", "0"], "--scans 0: expected an integer >= 1"),
        (
            ["scan", "--point-type", "XYZRGB"],
            "point_type 'XYZRGB' is not a point type; allowed: XYZI, XYZIRT, XYZIRT_labels, velodyne, ouster, nebula",
        ),
        (
            ["record", "--point-type", "velodyne_points"],
            "allowed: XYZI, XYZIRT, XYZIRT_labels, velodyne, ouster, nebula",
        ),
        (
            ["record", "--labels", "--point-type", "ouster"],
            "--point-type 'ouster' with labels: labels publish the XYZIRT_labels layout",
        ),
    ],
)
def test_bad_input_is_one_clear_message_and_a_nonzero_exit(tmp_path, capsys, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert message in err
    assert "Traceback" not in err
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").rglob("*.pcd"))


def test_existing_output_is_refused(tmp_path, capsys):
    out = tmp_path / "taken"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    code, _, err = run(capsys, "scan", "--out", str(out))
    assert code == 2 and "exists and is not empty" in err
    assert [p.name for p in out.iterdir()] == ["keep.txt"]


def test_bad_trajectory_rows_are_named(tmp_path, capsys):
    tum = tmp_path / "t.tum"
    tum.write_text("0 0 0 0 0 0 0 1\n0.1 1 0 0 0 0 0 1\n0.05 2 0 0 0 0 0 1\n")
    code, _, err = run(capsys, "record", "--trajectory", str(tum), "--out", str(tmp_path / "o"))
    assert code == 2 and "line 3" in err


def test_ctrl_c_leaves_a_readable_bag(tmp_path, monkeypatch):
    from acres_lidar_ros.apps import cmd_record

    calls = {"n": 0}
    real_scan = cmd_record.Scanner.scan

    def interrupted(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real_scan(self, *args, **kwargs)

    monkeypatch.setattr(cmd_record.Scanner, "scan", interrupted)
    out = tmp_path / "cut"
    assert cli.main(["record", "--duration", "1", "--out", str(out), "--no-progress", "--files", "none"]) == 130
    with AnyReader([out / "bag"]) as reader:
        clouds = [c for c in reader.connections if c.topic == "/lidar/points"]
        assert sum(1 for _ in reader.messages(connections=clouds)) == 2
    assert len((out / "lidar.jsonl").read_text().splitlines()) == 2
    assert json.loads((out / "episode.json").read_text())
    assert read_tum(out / "trajectory_gt.tum")[0].size > 0


def test_record_puts_other_vehicles_from_box_tracks_in_the_scans(tmp_path, capsys):
    from acres_lidar_ros.scene.farm_v1 import build_default_farm
    from acres_lidar_ros.scene.tour import default_tour

    times, positions, quaternions = default_tour(build_default_farm())
    x, y, z, w = quaternions[0]
    heading = np.array([1 - 2 * (y * y + z * z), 2 * (x * y + z * w), 0.0])
    heading /= np.linalg.norm(heading)
    centre = positions[0] + 12.0 * heading + [0.0, 0.0, 1.0]
    tracks = tmp_path / "boxes.json"
    sample = {"centre_m": centre.tolist(), "quaternion_xyzw": [0, 0, 0, 1], "half_extents_m": [2.0, 1.0, 1.0]}
    tracks.write_text(
        json.dumps(
            {
                "tracks": [
                    {
                        "object_id": 101,
                        "samples": [{"t_s": float(times[0]), **sample}, {"t_s": float(times[0]) + 5.0, **sample}],
                    }
                ]
            }
        )
    )
    out = tmp_path / "boxes_run"
    code, _, _ = run(
        capsys,
        "record",
        "--duration",
        "0.2",
        "--out",
        str(out),
        "--files",
        "both",
        "--boxes",
        str(tracks),
        "--no-progress",
        "--labels",
    )
    assert code == 0
    plys = sorted((out / "lidar").glob("scan_*.ply"))
    assert plys
    for ply in plys:
        points = read_ply(ply)
        far_vehicle = (points["class"] == 12) & (
            np.linalg.norm(np.c_[points["x"], points["y"], points["z"]], axis=1) > 5
        )
        assert far_vehicle.sum() > 50  # the box, not the body (which is within 1.7 m)
        # --labels: the box's points carry its track's instance, the body's the body's.
        assert points.dtype.itemsize == 35 and (points["instance"][far_vehicle] == 2**31 + 101).all()
        assert (points["instance"][(points["class"] == 12) & ~far_vehicle] == 2**32 - 2).all()
        cloud = read_pcd(ply.with_suffix(".pcd"))
        assert cloud.dtype.names[-2:] == ("class", "instance") and (cloud["instance"] == 2**31 + 101).any()
    rows = json.loads((out / "episode.json").read_text())["instances"]["rows"]
    assert (
        rows[0] == [0, "terrain", "ground", "terrain"]
        and [2**31 + 101, "vehicle_101", "vehicle", "vehicle_box"] in rows
    )
    assert rows[-1] == [2**32 - 2, "body", "vehicle", "body"]
    with AnyReader([out / "bag"]) as reader:
        (connection,) = [c for c in reader.connections if c.topic == "/lidar/points"]
        _, _, raw = next(iter(reader.messages(connections=[connection])))
        assert [f.name for f in reader.deserialize(raw, connection.msgtype).fields][-2:] == ["class", "instance"]
    bad = tmp_path / "bad_boxes.json"
    bad.write_text(
        json.dumps({"tracks": [{"object_id": 1, "samples": [{**sample, "t_s": 1.0, "half_extents_m": [0, 1, 1]}]}]})
    )
    code, _, err = run(capsys, "record", "--out", str(tmp_path / "o2"), "--boxes", str(bad), "--no-progress")
    assert code == 2 and "half_extents_m" in err and not (tmp_path / "o2").exists()


def test_files_default_to_the_sensors_output_key(tmp_path, capsys):
    out = tmp_path / "polaris_default"
    assert run(capsys, "scan", "--out", str(out))[0] == 0  # the Polaris overlay says output = pcd
    assert {p.suffix for p in (out / "lidar").iterdir()} == {".pcd", ".png"}
    out = tmp_path / "generic_default"
    assert run(capsys, "scan", "--sensor", "default", "--out", str(out))[0] == 0  # generic: ply
    assert {p.suffix for p in (out / "lidar").iterdir()} == {".ply", ".png"}


def test_bench_json_reports_stages_and_the_ratio_to_a_bare_cast(capsys):
    code, out, _ = run(capsys, "bench", "--sensor", "default", "--scans", "2", "--json")
    assert code == 0
    figures = json.loads(out)
    stages = ("rays_ms", "trace_ms", "returns_ms", "points_ms", "packing_ms")
    for key in stages:
        assert figures[f"{key}_median"] >= 0
    assert figures["rays_per_scan"] == 180 * 8 * 7 and figures["scans"] == 2
    assert figures["ratio"] == pytest.approx(figures["scan_ms_median"] / figures["bare_cast_ms_median"])
    assert figures["scan_ms_median"] >= figures["trace_ms_median"] > 0 and figures["peak_memory_mb"] > 0


def test_bench_against_scans_the_other_farm_alternately_and_reports_the_paired_ratio(capsys, tmp_path):
    from acres_lidar_ros.scene.farm_v1 import build_default_farm

    code, out, _ = run(capsys, "bench", "--sensor", "default", "--scans", "3", "--json", "--against", "farm-v1")
    assert code == 0
    figures = json.loads(out)
    other = figures["against"]
    assert other["scene"] == "farm-v1"
    assert other["scene_triangles"] == build_default_farm(seed=0, layout="v1").triangle_count
    assert figures["scene_triangles"] == build_default_farm(seed=0).triangle_count
    assert other["scan_ms_median"] >= other["trace_ms_median"] > 0 and other["bare_cast_ms_median"] > 0
    assert other["points_per_scan_median"] > 0 and 0 < other["paired_ratio_median"] < float("inf")
    code, _, err = run(capsys, "bench", "--scans", "1", "--against", str(tmp_path / "none.json"))
    assert code == 2 and "none.json" in err


def test_bench_schedule_takes_the_odometry_rate_and_refuses_a_bad_one(capsys, monkeypatch):
    import acres_lidar_ros.runtime.simulate as simulate

    asked = []
    monkeypatch.setattr(simulate, "run_schedule_benchmark", lambda **kw: asked.append(kw) or {"stand_in": True})
    code, out, _ = run(
        capsys, "bench", "--sensor", "default", "--scans", "1", "--json", "--schedule", "--odom-hz", "100"
    )
    assert code == 0 and json.loads(out)["schedule"] == {"stand_in": True}
    assert asked == [{"n_scans": 600, "odom_hz": 100.0}]
    for bad in ("0", "-5", "nan", "2000"):
        code, _, err = run(capsys, "bench", "--scans", "1", "--schedule", "--odom-hz", bad)
        assert code == 2 and f"--odom-hz {float(bad)}" in err and "> 0 and <= 1000" in err


def test_self_table_command_writes_the_shipped_table(tmp_path, capsys, repo_root):
    out = tmp_path / "polaris_lidar_self.f32"
    code, stdout, _ = run(
        capsys,
        "self-table",
        "--urdf",
        str(repo_root / "urdf" / "polaris.urdf"),
        "--sensor",
        "polaris",
        "--out",
        str(out),
    )
    assert code == 0 and "cells with a body return" in stdout
    assert out.read_bytes() == (repo_root / "config" / "polaris_lidar_self.f32").read_bytes()
    code, _, err = run(
        capsys,
        "self-table",
        "--urdf",
        str(repo_root / "urdf" / "polaris.urdf"),
        "--sensor",
        "polaris",
        "--out",
        str(out),
    )
    assert code == 2 and "exists" in err  # never overwritten without --force
    assert out.with_suffix(".json").read_text() == (repo_root / "config" / "polaris_lidar_self.json").read_text()


def test_the_self_table_command_prints_writes_and_refuses_to_overwrite(tmp_path, repo_root, capsys):
    urdf = tmp_path / "wall.urdf"
    urdf.write_text(urdf_with((2.1, 0.0, 1.0), (0.2, 2.0, 2.0)))
    out = tmp_path / "new" / "self.f32"  # its directory is made
    argv = ["self-table", "--urdf", str(urdf), "--sensor", str(small_sensors_file(tmp_path, repo_root))]
    argv += ["--out", str(out), "--body-return-max-m", "inf"]  # the wall is 2 m away, beyond the Polaris 1.58 m
    code, printed, _ = run(capsys, *argv)
    assert code == 0
    stats = json.loads(out.with_suffix(".json").read_text())
    assert stats["cells_with_return"] == 15  # as the wall test: 5 columns x 3 rings
    assert stats["body_return_max_m"] is None and stats["sub_ray_hits_beyond_return_max"] == 0
    assert stats["table"] == "self.f32" and stats["urdf"] == "wall.urdf"
    farthest_m = round(2.0 / math.cos(math.radians(20.0)) ** 2, 4)
    assert f"cells with a body return: 15 of 108 at 2.0 m to {farthest_m} m" in printed
    assert f"expected body points per scan: {stats['expected_body_points_per_scan']}" in printed
    before = out.read_bytes()
    out.with_suffix(".json").unlink()  # one of the two files is enough to refuse
    code, _, err = run(capsys, *argv)
    assert code == 2 and "exists already; refusing to overwrite it (--force replaces it)" in err
    assert not out.with_suffix(".json").exists()
    code, _, _ = run(capsys, *argv, "--force")
    assert code == 0 and out.read_bytes() == before and out.with_suffix(".json").exists()
    assert sorted(p.name for p in out.parent.iterdir()) == ["self.f32", "self.json"]  # no temporary files


def test_the_self_table_command_writes_both_files_or_neither(tmp_path, repo_root, capsys, monkeypatch):
    from acres_lidar_ros.errors import OutputError
    from acres_lidar_ros.outputs import json_files

    def full_disk(statistics):
        raise OutputError("no space left on device")

    monkeypatch.setattr(json_files, "json_key_lines", full_disk)
    urdf = tmp_path / "wall.urdf"
    urdf.write_text(urdf_with((2.1, 0.0, 1.0), (0.2, 2.0, 2.0)))
    code, _, err = run(
        capsys,
        "self-table",
        "--urdf",
        str(urdf),
        "--sensor",
        str(small_sensors_file(tmp_path, repo_root)),
        "--out",
        str(tmp_path / "self.f32"),
    )
    assert code == 2 and "no space left on device" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sensors_small.json", "wall.urdf"]


def test_a_urdf_without_the_lidar_link_writes_nothing(tmp_path, capsys):
    urdf = tmp_path / "no_lidar.urdf"
    urdf.write_text(urdf_with((2.1, 0.0, 1.0), (0.2, 2.0, 2.0)).replace("lidar", "laser"))
    out = tmp_path / "x.f32"
    code, _, err = run(capsys, "self-table", "--urdf", str(urdf), "--sensor", "polaris", "--out", str(out))
    assert code == 2
    assert "has no link 'lidar'" in err and str(urdf) in err
    assert list(tmp_path.iterdir()) == [urdf]


def small_sensors_file(tmp_path, repo_root):
    """A sensors file: the default sensor, level at (0, 0, 1) with 36 columns and three rings."""
    path = tmp_path / "sensors_small.json"
    path.write_text(
        json.dumps(
            {
                "extends": str(repo_root / "config" / "sensors.json"),
                "lidar": {
                    "columns": 36,
                    "elevations_deg": [-20.0, 0.0, 20.0],
                    "azimuth_order": "ccw",
                    "position_flu_m": [0.0, 0.0, 1.0],
                    "beam_divergence_mrad": 0.0,
                },
            }
        )
    )
    return path


def test_scan_preview_range_sets_the_scale_and_is_refused_beyond_the_sensor(tmp_path, capsys):
    from PIL import Image

    from acres_lidar_ros.config.sensors import load_sensor_config

    range_m = load_sensor_config("polaris").range_m
    code, _, err = run(capsys, "scan", "--out", str(tmp_path / "far"), "--preview-range", "500")
    assert code == 2 and "--preview-range 500" in err and f"<= {range_m:g} m" in err and "lidar.range_m" in err
    assert not (tmp_path / "far").exists()
    out = tmp_path / "scan"
    code, stdout, _ = run(capsys, "scan", "--out", str(out), "--preview-range", "100", "--format", "ply")
    assert code == 0, stdout
    (png,) = (out / "lidar").glob("scan_*.png")
    with Image.open(png) as image:
        pixels = np.asarray(image.convert("RGB"))
    # 100 m to the edges of 384 px: a quarter of the 200 m width is 50 m, so the bar is 50 m = 96 px.
    white = np.all(pixels[384 - 5] == 255, axis=1)
    assert white[4 : 4 + 96].all() and not white[4 + 96 :].any()


def test_scan_with_odom_in_scene_sees_the_same_ground_from_the_same_scene_pose(tmp_path, capsys):
    # The built-in tour is made in the scene; under --odom-in-scene it is given in odom, so the
    # scan at its start traces the same scene pose: the same points in the sensor frame.
    plain, moved = tmp_path / "plain", tmp_path / "moved"
    code, stdout, _ = run(capsys, "scan", "--out", str(plain), "--format", "ply", "--no-noise")
    assert code == 0, stdout
    offset = ["--odom-in-scene", "10", "-5", "0.25", "0", "0", "30"]
    code, stdout, _ = run(capsys, "scan", "--out", str(moved), "--format", "ply", "--no-noise", *offset)
    assert code == 0, stdout
    (a,) = (plain / "lidar").glob("scan_*.ply")
    (b,) = (moved / "lidar").glob("scan_*.ply")
    pa, pb = read_ply(a), read_ply(b)
    xyz_a = np.c_[pa["x"], pa["y"], pa["z"]].astype(float)
    xyz_b = np.c_[pb["x"], pb["y"], pb["z"]].astype(float)
    # Float32 casts of rays composed in two ways: a few grazing beams (17 of 43,381 here) flip.
    assert len(xyz_a) > 10000 and abs(len(xyz_a) - len(xyz_b)) <= 1e-3 * len(xyz_a)
    from scipy.spatial import cKDTree

    nearest_m, _ = cKDTree(xyz_a).query(xyz_b)
    assert np.mean(nearest_m < 2e-3) > 0.999
    code, _, err = run(
        capsys, "scan", "--out", str(tmp_path / "bad"), "--odom-in-scene", "1", "2", "3", "4", "5", "nan"
    )
    assert code == 2 and "--odom-in-scene" in err and "six finite numbers" in err
