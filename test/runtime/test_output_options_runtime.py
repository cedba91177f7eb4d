"""The output keys through the ROS-free NodeLoop (manual clock, inline work) and the command
line: slices published in order, a live change at the next scan, the flags and their refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest
from loop_support import IDENTITY, MS, ManualClock
from rosbags.highlevel import AnyReader

from acres_lidar_ros.apps import cli
from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.outputs.pcd import read_pcd
from acres_lidar_ros.outputs.ply import read_ply
from acres_lidar_ros.outputs.pointcloud2 import decode_pointcloud2
from acres_lidar_ros.runtime.events import LogThrottle
from acres_lidar_ros.runtime.loop import InlineExecutor, LoopOutput, NodeLoop
from acres_lidar_ros.scan.scan_types import ScanOptions
from acres_lidar_ros.scan.scanner import Scanner


def pack(shaped, job):
    """What the node's pack reads of each part: frame, span, slice, columns, valid points."""
    return {
        "frame_id": shaped.frame_id,
        "span": (shaped.start_ns, shaped.end_ns),
        "slice": (shaped.slice_index, shaped.slice_count),
        "columns": shaped.column_ids.copy(),
        "points": shaped.points[shaped.returns.valid[:, 0], 0].copy(),
        "stamp_ns": shaped.stamp_ns,
    }


def make_loop(tracer, clock, config):
    scanner = Scanner(config, tracer=tracer, options=ScanOptions(self_returns=False, seed=3))
    emitted: list[LoopOutput] = []
    loop = NodeLoop(scanner, clock, pack, emitted.append, executor=InlineExecutor(), throttle=LogThrottle(5.0, clock))
    return loop, emitted


def drive(loop, clock, emitted, until_ms, from_ms=880, x_at=lambda t_s: 0.0):
    """Odometry every 20 ms (x = ``x_at(t)``), 1 ms late, and a tick each time; what the
    calls return joins what the workers emitted."""
    for ms in range(from_ms, until_ms + 1, 20):
        clock.now_ns = (ms + 1) * MS
        emitted.append(loop.on_pose(ms * MS, (x_at(ms * 1e-3), 0.0, 0.0), IDENTITY, "odom", "base_footprint"))
        emitted.append(loop.tick())
    clock.now_ns = (until_ms + 15) * MS
    emitted.append(loop.tick())


def published(emitted):
    return [message for out in emitted for job in out.publish for message in job.result]


def slices_by_scan(emitted):
    """The slices published, per scan (a ``SliceOut``'s result is the one slice out early, a
    job's the list of its slices left), in publication order."""
    by_stamp: dict[int, list] = {}
    for out in emitted:
        for entry in out.publish:
            for part in entry.result:
                by_stamp.setdefault(part["stamp_ns"], []).append(part)
    return [by_stamp[k] for k in sorted(by_stamp)]


def test_partial_output_publishes_the_slices_of_each_scan_in_order(plane_tracer):
    config = load_sensor_config("polaris").with_overrides({"partial_output": True, "partial_slices": 4})
    clock = ManualClock(870 * MS)
    loop, emitted = make_loop(plane_tracer, clock, config)
    drive(loop, clock, emitted, 1_100)
    results = slices_by_scan(emitted)
    assert len(results) == 2  # the scans stamped 1.0 and 1.1 s
    for stamp_ms, parts in zip((1_000, 1_100), results):
        assert isinstance(parts, list) and [p["slice"] for p in parts] == [(k, 4) for k in range(4)]
        start = (stamp_ms - 100) * MS
        assert [p["span"] for p in parts] == [(start + k * 25 * MS, start + (k + 1) * 25 * MS) for k in range(4)]
        columns = np.concatenate([p["columns"] for p in parts])
        assert np.array_equal(np.sort(columns), np.arange(config.columns))  # each column once
        assert all(p["stamp_ns"] == stamp_ms * MS for p in parts)


def test_a_live_change_of_the_output_keys_applies_from_the_next_scan(plane_tracer):
    """Driving at 5 m/s: the first scan in the sensor frame; then output_frame world with
    compensation, set between scans (as the node's parameter callback does): the next scan's
    points are in the odometry frame, on the plane z = 0."""
    config = load_sensor_config("polaris")
    clock = ManualClock(870 * MS)
    loop, emitted = make_loop(plane_tracer, clock, config)
    drive(loop, clock, emitted, 1_000, x_at=lambda t: 5.0 * t)
    loop.rebuild({"output_frame": "world", "motion_compensation": True, "coordinates": "cartesian"})
    assert loop.config.outputs.output_frame == "world" and loop.config.outputs.motion_compensation
    drive(loop, clock, emitted, 1_100, from_ms=1_020, x_at=lambda t: 5.0 * t)
    first, second = published(emitted)
    assert first["frame_id"] == config.frame_id and second["frame_id"] == "odom"
    assert abs(np.median(first["points"][:, 2]) + config.position_flu_m[2]) < 0.1  # the plane, 1.9 m below
    assert abs(np.median(second["points"][:, 2])) < 0.05 and np.abs(second["points"][:, 2]).max() < 0.5


def test_a_refused_output_value_changes_nothing(plane_tracer):
    config = load_sensor_config("polaris")
    loop, _ = make_loop(plane_tracer, ManualClock(1_000 * MS), config)
    with pytest.raises(Exception, match=r"lidar\.output_frame = 'map': expected one of sensor, world, custom"):
        loop.rebuild({"output_frame": "map"})
    assert loop.config.outputs.output_frame == "sensor"


# -- the command line ------------------------------------------------------------------------------


def run(capsys, *argv):
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_scan_flags_give_a_dense_spherical_pcd_in_a_custom_frame(tmp_path, capsys):
    """The same scan twice: dense Cartesian in the world, and dense spherical in a custom frame
    at (10, -5, 0) turned 30 deg; the spherical fields are the world points moved into that
    frame by hand, ``Rz(-30 deg) (p - t)``."""
    pose = ["--pose", "10", "-5", "0", "0", "0", "30", "--format", "both", "--no-include-invalid-points"]
    world_out, custom_out = tmp_path / "w", tmp_path / "c"
    code, _, err = run(capsys, "scan", "--out", str(world_out), *pose, "--output-frame", "world")
    assert code == 0, err
    yaw = math.radians(30)
    custom = ["--output-frame", "custom", "--custom-frame", "10", "-5", "0", "0", "0", str(yaw)]
    code, _, err = run(capsys, "scan", "--out", str(custom_out), *pose, *custom, "--coordinates", "spherical")
    assert code == 0, err
    (world_pcd,) = (world_out / "lidar").glob("scan_*.pcd")
    (custom_pcd,) = (custom_out / "lidar").glob("scan_*.pcd")
    world, sph = read_pcd(world_pcd), read_pcd(custom_pcd)
    assert sph.dtype.names == ("azimuth", "elevation", "range", "intensity")
    assert sph.shape == world.shape and sph.shape[0] == 1 and np.isfinite(sph["range"]).all()
    p = np.stack([world[n][0].astype(np.float64) for n in "xyz"], axis=1) - [10.0, -5.0, 0.0]
    c, s_ = math.cos(-yaw), math.sin(-yaw)
    q = np.stack([c * p[:, 0] - s_ * p[:, 1], s_ * p[:, 0] + c * p[:, 1], p[:, 2]], axis=1)
    r = np.linalg.norm(q, axis=1)
    np.testing.assert_allclose(sph["range"][0], r, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(sph["azimuth"][0], np.arctan2(q[:, 1], q[:, 0]), atol=1e-4)
    np.testing.assert_allclose(sph["elevation"][0], np.arcsin(q[:, 2] / r), atol=1e-4)
    (ply,) = (custom_out / "lidar").glob("scan_*.ply")
    records = read_ply(ply)
    assert {"azimuth", "elevation", "range"} <= set(records.dtype.names)


def test_record_partial_output_writes_the_slices_in_the_world(tmp_path, capsys):
    out = tmp_path / "r"
    argv = ["record", "--duration", "0.25", "--out", str(out), "--files", "none", "--no-progress"]
    code, stdout, err = run(capsys, *argv, "--partial-output", "--partial-slices", "5", "--output-frame", "world")
    assert code == 0, err
    spans, logged = [], []
    with AnyReader([out / "bag"]) as reader:
        for connection, timestamp, raw in reader.messages():
            if connection.topic == "/lidar/points":
                msg = reader.deserialize(raw, connection.msgtype)
                assert msg.header.frame_id == "odom"
                spans.append((msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec, msg.height))
                logged.append(timestamp)
                assert decode_pointcloud2(msg).shape[0] < 1800  # a slice of the 1800 rows
    stamps = [s for s, _ in spans]
    # Each slice is logged when the node publishes it: its end (the header stamp) + delay_s.
    delay_ns = round(load_sensor_config().delay_s * 1e9)
    assert [t - s for t, s in zip(logged, stamps)] == [delay_ns] * len(stamps)
    assert len(stamps) % 5 == 0 and len(stamps) >= 10
    assert all(b - a == 20_000_000 for a, b in zip(stamps[:4], stamps[1:5]))  # the ends of 20 ms slices


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--output-frame", "map"], "invalid choice: 'map'"),
        (["--partial-slices", "0"], "--partial-slices 0: lidar.partial_slices = 0 is out of range"),
        (["--custom-frame", "0", "0", "0", "0", "0", "1e9"], "--custom-frame 0 0 0 0 0 1e+09"),
        (["--coordinates", "spherical", "--point-type", "ouster"], "lidar.coordinates = 'spherical' with point_type"),
    ],
)
def test_bad_output_flags_are_refused_with_the_key(tmp_path, capsys, argv, message):
    try:
        code, _, err = run(capsys, "scan", "--out", str(tmp_path / "bad"), *argv)
    except SystemExit as exit_:  # argparse's own refusal (a choice)
        code, err = exit_.code, capsys.readouterr().err
    assert code != 0 and message in err
    assert not (tmp_path / "bad").exists()
