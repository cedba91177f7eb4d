"""Several LiDARs over one scene in one process (``runtime.lidar_set``): one tracer shared, each
sensor its own scans, schedule, mount, self table and noise stream."""

from __future__ import annotations

import json

import numpy as np
import pytest
from loop_support import flat_plane_tracer

from acres_lidar_ros.body.self_returns import sensor_self_table
from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.runtime.lidar_set import LidarSet
from acres_lidar_ros.scan import Scanner, ScanOptions
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
