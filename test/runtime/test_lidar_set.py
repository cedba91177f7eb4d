"""Several LiDARs over one scene in one process (``runtime.lidar_set``): one tracer shared, each
sensor its own scans, schedule, mount, self table and noise stream."""

from __future__ import annotations

import json

import numpy as np
import pytest
from loop_support import IDENTITY, MS, ManualClock, flat_plane_tracer

from acres_lidar_ros.body.self_returns import sensor_self_table
from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.runtime.events import LogThrottle
from acres_lidar_ros.runtime.lidar_set import LidarSet, LidarSetLoop
from acres_lidar_ros.runtime.loop import InlineExecutor
from acres_lidar_ros.scan.scan_types import ScanOptions
from acres_lidar_ros.scan.scanner import Scanner
from acres_lidar_ros.sensor.poses import PoseHistory


@pytest.fixture(scope="module")
def tracer():
    return flat_plane_tracer(100.0)


def still_drive(duration_s=0.5):
    t = np.arange(0.0, duration_s + 1e-9, 0.01)
    return PoseHistory.from_arrays(t, np.zeros((len(t), 3)), np.tile([0.0, 0.0, 0.0, 1.0], (len(t), 1)))


def test_each_sensor_scans_as_it_would_alone_over_the_one_shared_scene(tracer):
    options = ScanOptions(seed=5)
    lidars = LidarSet(["vlp16", "polaris"], tracer, options)
    assert all(slot.scanner.tracer is tracer for slot in lidars.slots)  # the scene is held once
    scans = lidars.scans(still_drive(0.2), 0.0, 0.2)
    # vlp16 and Polaris at 10 Hz: sweeps ending 0.1 and 0.2 s, in stamp order, the set's order at a tie.
    assert [(slot.name, scan.stamp_ns) for slot, scan in scans] == [
        ("sensors_vlp16", 100_000_000),
        ("sensors_polaris", 100_000_000),
        ("sensors_vlp16", 200_000_000),
        ("sensors_polaris", 200_000_000),
    ]
    for i, name in enumerate(("vlp16", "polaris")):
        config = load_sensor_config(name)
        alone = Scanner(config, options=ScanOptions(seed=5 + i), tracer=tracer, self_table=sensor_self_table(config))
        for slot, scan in scans:
            if slot.name != f"sensors_{name}":
                continue
            own = alone.scan(still_drive(0.2), scan.stamp_ns)
            assert own.returns.range_m.tobytes() == scan.returns.range_m.tobytes()
            assert own.returns.intensity.tobytes() == scan.returns.intensity.tobytes()
    topics = {slot.name: (slot.topic, slot.frame_id) for slot in lidars.slots}
    assert topics == {"sensors_vlp16": ("/velodyne_points", "velodyne"), "sensors_polaris": ("/lidar/points", "lidar")}


def test_two_of_the_same_sensor_need_their_own_topic_and_frame_and_draw_their_own_noise(tracer, tmp_path, repo_root):
    base = str(repo_root / "config" / "sensors_vlp16.json")
    right = tmp_path / "right.json"
    right.write_text(
        json.dumps({"extends": base, "lidar": {"topic": "/right/points", "frame_id": "velodyne_right", "hz": 5.0}})
    )
    with pytest.raises(ConfigError, match="both have lidar.topic '/velodyne_points'"):
        LidarSet(["vlp16", "vlp16"], tracer)
    lidars = LidarSet(["vlp16", str(right)], tracer, ScanOptions(seed=1))
    scans = lidars.scans(still_drive(0.4), 0.0, 0.4)
    by_name: dict[str, list] = {}
    for slot, scan in scans:
        by_name.setdefault(slot.name, []).append(scan)
    assert [s.stamp_ns for s in by_name["right"]] == [200_000_000, 400_000_000]  # 5 Hz
    assert [s.stamp_ns for s in by_name["sensors_vlp16"]] == [100_000_000, 200_000_000, 300_000_000, 400_000_000]
    # The same sensor, pose and scene at 0.2 s (at rest the sweep's duration does not matter);
    # seeds 1 and 2: the noise differs, the geometry does not.
    a = next(s for s in by_name["sensors_vlp16"] if s.stamp_ns == 200_000_000)
    b = next(s for s in by_name["right"] if s.stamp_ns == 200_000_000)
    both = a.returns.valid & b.returns.valid
    assert both.sum() > 1000
    difference = np.abs(a.returns.range_m[both] - b.returns.range_m[both])
    assert difference.max() > 0.0 and np.median(difference) < 0.1
    with pytest.raises(ConfigError, match="2 seeds for 1 sensors"):
        LidarSet(["vlp16"], tracer, seeds=[1, 2])


def test_the_set_loop_runs_each_sensor_on_its_own_schedule_and_noise_and_says_a_pose_once(tracer, tmp_path, repo_root):
    """``LidarSetLoop``: two copies of the default sensor (180 x 8) at 10 and 5 Hz, the second
    turned round, fed the same odometry at rest with a manual clock, work inline. Each publishes
    its own due times (docs/sensors.md: scans due at k / hz), and each published scan is bit for
    bit what that sensor's own Scanner gives alone with seed base + i and the loop's scan number."""
    files = []
    for name, hz, yaw in (("front", 10.0, 0.0), ("rear", 5.0, 180.0)):
        files.append(tmp_path / f"{name}.json")
        lidar = {"topic": f"/{name}/points", "frame_id": name, "hz": hz, "rpy_deg": [0.0, 0.0, yaw]}
        files[-1].write_text(json.dumps({"extends": str(repo_root / "config" / "sensors.json"), "lidar": lidar}))
    lidars = LidarSet([str(f) for f in files], tracer, ScanOptions(seed=7))
    clock = ManualClock(0)
    got: list[tuple[int, int, int, bytes]] = []

    def publish(i, out):
        got.extend(message for job in out.publish for message in job.result)

    def pack(i, shaped, job):
        return (i, job.stamp_ns, job.index, shaped.scan.returns.range_m.tobytes())

    loops = LidarSetLoop(
        [slot.scanner for slot in lidars.slots],
        clock,
        pack,
        publish,
        executor=InlineExecutor,
        throttle=lambda: LogThrottle(5.0, clock),
    )
    events: list[list] = [[], []]
    for ms in range(0, 1001, 10):
        clock.now_ns = (ms + 1) * MS
        outs = loops.on_pose(ms * MS, (0.0, 0.0, 0.0), IDENTITY, "odom", "base_footprint") if ms % 20 == 0 else []
        outs = outs or loops.tick()
        for i, out in enumerate(outs):
            events[i] += out.events
            publish(i, out)
    wrong = loops.on_pose(1_001 * MS, (0.0, 0.0, 0.0), IDENTITY, "map", "base_footprint")
    stamps = {i: [stamp for j, stamp, _, _ in got if j == i] for i in (0, 1)}
    assert stamps[0] == [k * 100 * MS for k in range(1, 10)]  # 10 Hz
    assert stamps[1] == [k * 200 * MS for k in range(1, 5)]  # 5 Hz
    poses = PoseHistory.from_arrays(np.arange(0.0, 1.0001, 0.02), np.zeros((51, 3)), np.tile(IDENTITY, (51, 1)))
    # Each sensor alone scans the same stamps in the same order (its noise stream runs in scan order).
    alone = [
        Scanner(slot.config, options=ScanOptions(seed=7 + i), tracer=tracer) for i, slot in enumerate(lidars.slots)
    ]
    for i, stamp, index, ranges in got:
        assert alone[i].scan(poses, stamp, index=index).returns.range_m.tobytes() == ranges, (i, stamp)
    # The same pose check for both sensors: said once (the first loop), counted by both.
    assert [e.kind for e in wrong[0].events] == ["wrong_frame"] and wrong[1].events == []
    assert [loop.tracker.counts["wrong_frame"] for loop in loops.loops] == [1, 1]
    assert [dict(values)["scans_published"] for _, _, values in loops.diagnostics()] == ["9", "4"]
    loops.close()
