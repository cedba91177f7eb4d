"""The split of the passes over independent items between the cores (``cores``)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from acres_lidar_ros import cores
from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.scan import Scanner, ScanOptions
from acres_lidar_ros.scene import build_default_farm, default_tour
from acres_lidar_ros.sensor.poses import PoseHistory


def test_small_passes_stay_in_one_part_and_large_ones_split_evenly(monkeypatch):
    monkeypatch.setattr(cores, "PARTS", 2)
    assert cores.split_bounds(7999, 4000).tolist() == [0, 7999]
    assert cores.split_bounds(10, 5).tolist() == [0, 5, 10]
    assert cores.split_bounds(0, 5).tolist() == [0, 0]
    monkeypatch.setattr(cores, "PARTS", 1)
    assert cores.split_bounds(10**6, 5).tolist() == [0, 10**6]


def test_parts_come_back_in_order_and_a_part_error_is_raised():
    bounds = np.array([0, 3, 10])
    assert cores.map_parts(lambda lo, hi: list(range(lo, hi)), bounds) == [[0, 1, 2], list(range(3, 10))]

    def fails(lo: int, hi: int) -> None:
        if lo:
            raise ValueError("part 2")

    with pytest.raises(ValueError, match="part 2"):
        cores.map_parts(fails, bounds)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_makes_its_own_threads():
    bounds = np.array([0, 5, 10])
    assert cores.map_parts(lambda lo, hi: hi - lo, bounds) == [5, 5]  # the parent's pool exists
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its parent's worker threads are gone
        os.write(write, repr(cores.map_parts(lambda lo, hi: hi - lo, bounds)).encode())
        os._exit(0)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    assert os.read(read, 100).decode() == "[5, 5]" and status == 0


def _fields(scan) -> list[bytes]:
    r = scan.returns
    return [np.ascontiguousarray(getattr(r, f)).tobytes() for f in r.__dataclass_fields__] + [
        scan.points_sensor.tobytes()
    ]


def test_one_part_or_two_give_the_same_bits(monkeypatch):
    """Polaris in rain and fog on the farm: hit passes, clutter draws, noise pairs and echo
    signals each run as one part or two, with the same result."""
    scene = build_default_farm(seed=0)
    times_s, positions, quaternions = default_tour(scene)
    tour = PoseHistory.from_arrays(times_s, positions, quaternions)
    config = load_sensor_config("polaris")
    runs = []
    for parts in (1, 2):
        monkeypatch.setattr(cores, "PARTS", parts)
        scanner = Scanner(config, scene, ScanOptions(seed=4, rain_mm_per_h=10.0, visibility_m=2000.0))
        stamps = [int(round((times_s[0] + k * config.period_s) * 1e9)) for k in (3, 4)]
        runs.append([_fields(scanner.scan(tour, stamp)) for stamp in stamps])
    assert runs[0] == runs[1]
