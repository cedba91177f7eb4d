"""``acres-lidar trajectory`` (a drive draped on the terrain), ``record --scene`` without a
trajectory, and poses below or above the terrain (docs/scene_format.md, "Drives")."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from acres_lidar_ros.apps import cli
from acres_lidar_ros.errors import SceneError
from acres_lidar_ros.outputs.tum import read_tum
from acres_lidar_ros.scene.drives import check_ground, read_waypoints
from acres_lidar_ros.scene.scene_file import load_scene
from acres_lidar_ros.scene.tour import LATERAL_ACCEL_M_S2, LONGITUDINAL_ACCEL_M_S2

SLOPE = 0.1  # the test terrain: z = 0.1 x, a 10 % climb towards +x


def run(capsys, *argv):
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture()
def ramp(tmp_path):
    x = np.array([-100.0, 100.0])
    heights = np.tile(SLOPE * x, (2, 1))  # rows along y, columns along x
    doc = {"terrain": {"origin_xy_m": [-100.0, -100.0], "cell_m": 200.0, "height_m": heights.tolist()}}
    path = tmp_path / "ramp.json"
    path.write_text(json.dumps(doc))
    return path


def write_waypoints(tmp_path, rows, header="x_m,y_m"):
    path = tmp_path / "w.csv"
    path.write_text("\n".join([header] + [f"{x},{y}" for x, y in rows]) + "\n")
    return path


def test_the_drive_lies_on_the_terrain_and_slows_in_turns(tmp_path, capsys, ramp):
    # East 40 m on the climb, a left turn, north 40 m across it (a point on the straight between).
    waypoints = write_waypoints(tmp_path, [(-20, 0), (20, 0), (20, 20), (20, 40)])
    out = tmp_path / "drive.tum"
    code, stdout, err = run(
        capsys, "trajectory", "--scene", str(ramp), "--waypoints", str(waypoints), "--out", str(out)
    )
    assert code == 0, err
    assert str(out) in stdout
    t, p, q = read_tum(out)
    np.testing.assert_allclose(np.diff(t), 0.01, atol=1e-9)
    # z on the ground of the plane z = 0.1 x (TUM keeps 9 decimals).
    np.testing.assert_allclose(p[:, 2], SLOPE * p[:, 0], atol=1e-8)
    r = Rotation.from_quat(q).as_matrix()
    up, forward = r[:, :, 2], r[:, :, 0]
    # The body's z axis is the plane's normal everywhere: pitch and roll from the slope.
    normal = np.array([-SLOPE, 0.0, 1.0]) / math.hypot(SLOPE, 1.0)
    np.testing.assert_allclose(up, np.broadcast_to(normal, up.shape), atol=1e-7)
    # Speeds are along the plan view of the path, as the built-in tour's; from rest to rest.
    speed = np.linalg.norm(np.diff(p[:, :2], axis=0), axis=1) / 0.01
    first_step = math.sqrt(2 * LONGITUDINAL_ACCEL_M_S2 * 0.05) / 2  # the mean speed over the first 5 cm
    assert speed.max() <= 5.0 + 1e-6 and speed[0] <= first_step + 1e-6 and speed[-1] <= first_step + 1e-6
    # On the east leg the nose points up the slope: forward = (1, 0, 0.1) / |.|.
    east = (p[:-1, 0] > -10) & (p[:-1, 0] < 5) & (np.abs(p[:-1, 1]) < 1e-6)
    np.testing.assert_allclose(
        forward[:-1][east], [[1 / math.hypot(1, SLOPE), 0, SLOPE / math.hypot(1, SLOPE)]] * int(east.sum()), atol=1e-6
    )
    assert speed[east].max() == pytest.approx(5.0, abs=1e-3)
    # In the 10 m arc round (20, 0) the lateral acceleration stays within the limit: v <= sqrt(a r).
    arc = (p[:-1, 0] > 10.5) & (p[:-1, 1] > 0.5) & (p[:-1, 1] < 9.5)
    assert arc.any() and speed[arc].max() <= math.sqrt(LATERAL_ACCEL_M_S2 * 10.0) * 1.01
    # Speeding up and braking into the turn keep to the longitudinal limit: the speed over 0.5 s
    # windows (the path is sampled every 5 cm, so 10 ms steps of speed are coarse at low speed).
    s = np.concatenate([[0.0], np.cumsum(speed * 0.01)])[::50]
    accel = np.diff(np.diff(s) / 0.5) / 0.5
    assert np.abs(accel).max() <= LONGITUDINAL_ACCEL_M_S2 * 1.2
    # The straight-line waypoint (20, 20) leaves no jump: every step is a speed's worth.
    assert np.linalg.norm(np.diff(p[:, :2], axis=0), axis=1).max() < 0.0501
    assert p[-1, :2] == pytest.approx([20.0, 40.0], abs=0.002)  # within the last 10 ms step, at rest


@pytest.mark.parametrize(
    "rows, options, match",
    [
        ([(0, 0), (0, 0), (10, 0)], [], r"waypoints 1 and 2 are both at \[0.0, 0.0\]: drop one"),
        ([(0, 0), (10, 0), (0, 0.01)], [], r"waypoint 2 at \[10.0, 0.0\] turns back by 179.9 deg"),
        (
            [(0, 0), (5, 0), (5, 5)],
            [],
            r"the leg from waypoint 1 to 2 is 5.00 m: its turns of radius 10 m need 10.00 m; give a smaller turn radius",
        ),
        ([(0, 0)], [], r"w.csv' has 1 waypoints: a drive needs 2 or more"),
        ([(0, 0), (5, 0)], ["--speed", "0"], r"--speed 0.0: expected a top speed from 0.1 to 50 m/s"),
    ],
)
def test_bad_waypoints_and_options_are_named(tmp_path, capsys, ramp, rows, options, match):
    waypoints = write_waypoints(tmp_path, rows)
    out = tmp_path / "drive.tum"
    argv = ["trajectory", "--scene", str(ramp), "--waypoints", str(waypoints), "--out", str(out), *options]
    code, _, err = run(capsys, *argv)
    assert code == 2 and not out.exists()
    assert re.search(match, err), err


def test_waypoint_files_name_the_bad_line(tmp_path):
    path = tmp_path / "w.csv"
    path.write_text("# my drive\nx,y\n0,0\n5,abc\n")
    with pytest.raises(SceneError, match=r"w.csv' line 4: '5,abc': expected two numbers x_m,y_m"):
        read_waypoints(path)
    path.write_text("0,0\n5,1,2\n")
    with pytest.raises(SceneError, match=r"line 2: '5,1,2': expected two finite numbers"):
        read_waypoints(path)
    path.write_text("0, 0\n\n5,1e3\n")
    np.testing.assert_array_equal(read_waypoints(path), [[0.0, 0.0], [5.0, 1000.0]])


def test_record_on_a_scene_file_needs_a_trajectory(tmp_path, capsys, ramp):
    code, _, err = run(capsys, "record", "--scene", str(ramp), "--out", str(tmp_path / "r"), "--duration", "0.1")
    assert code == 2 and not (tmp_path / "r").exists()
    assert f"record --scene {ramp}: --trajectory is missing" in err
    assert f"acres-lidar trajectory --scene {ramp} --waypoints W.csv --out drive.tum" in err


def test_poses_below_and_above_the_terrain_are_reported(ramp):
    scene = load_scene(ramp)
    positions = np.array([[10.0, 0.0, 1.0], [10.0, 0.0, 0.5], [20.0, 5.0, 2.0], [30.0, 0.0, 9.0]])
    check = check_ground(scene, positions)
    np.testing.assert_allclose(check.clearance_m, [0.0, -0.5, 0.0, 6.0], atol=1e-12)
    below, above = check.warnings(positions, "drive.tum", np.array([0.0, 0.1, 0.2, 0.3]))
    assert below.startswith("drive.tum: 1 of 4 poses are more than 0.05 m below the terrain (first at t = 0.100 s)")
    assert "base_footprint z = 0.500 m at (x, y) = (10.00, 0.00) where the terrain is at z = 1.000 m" in below
    assert "more than 2 m above the terrain (first at t = 0.300 s)" in above and "terrain is at z = 3.000 m" in above


def test_a_scan_pose_under_the_ground_warns_with_the_terrain_height(tmp_path, capsys, ramp):
    out = tmp_path / "scan"
    code, _, err = run(
        capsys,
        "scan",
        "--scene",
        str(ramp),
        "--pose",
        "10",
        "0",
        "0",
        "0",
        "0",
        "0",
        "--out",
        str(out),
        "--format",
        "pcd",
    )
    assert code == 0
    assert "warning: --pose: the pose is more than 0.05 m below the terrain: base_footprint z = 0.000 m" in err
    assert "where the terrain is at z = 1.000 m (-1.000 m)" in err
