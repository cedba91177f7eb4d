"""The split of the passes over independent items between the cores (``cores``)."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

from acres_lidar_ros import cores
from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.scan.scan_types import ScanOptions
from acres_lidar_ros.scan.scanner import Scanner
from acres_lidar_ros.scene.farm_v1 import build_default_farm
from acres_lidar_ros.scene.tour import default_tour
from acres_lidar_ros.sensor.poses import PoseHistory
from acres_lidar_ros.tracing.trace import Tracer


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


def test_set_parts_splits_into_that_many_and_refuses_what_it_cannot():
    before = cores.set_parts(3)
    try:
        assert cores.split_bounds(9, 3).tolist() == [0, 3, 6, 9]
        together = threading.Barrier(3, timeout=30)  # broken unless the three parts run at once

        def part(lo: int, hi: int) -> int:
            together.wait()
            return lo

        assert cores.map_parts(part, cores.split_bounds(9, 3)) == [0, 3, 6]  # the pool grew to 2 threads
        for bad in (0, 65, 1.5, True):
            with pytest.raises(ValueError, match=r"parts = .*: expected an integer from 1 to 64"):
                cores.set_parts(bad)  # type: ignore[arg-type]
        assert cores.set_parts(1) == 3 and cores.in_background(threading.current_thread).result().name == "MainThread"
    finally:
        cores.set_parts(before)


def test_one_part_or_two_give_the_same_bits():
    """Polaris in rain and fog on the farm: hit passes, clutter draws, noise pairs and echo
    signals each run as one part or two, and Embree's casts in one thread or two (a dataset
    worker's share of the cores), with the same result."""
    scene = build_default_farm(seed=0)
    times_s, positions, quaternions = default_tour(scene)
    tour = PoseHistory.from_arrays(times_s, positions, quaternions)
    config = load_sensor_config("polaris")
    runs = []
    for parts in (1, 2):
        before = cores.set_parts(parts)
        try:
            options = ScanOptions(seed=4, rain_mm_per_h=10.0, visibility_m=2000.0)
            scanner = Scanner(config, options=options, tracer=Tracer(scene, nthreads=parts))
            stamps = [int(round((times_s[0] + k * config.period_s) * 1e9)) for k in (3, 4)]
            runs.append([_fields(scanner.scan(tour, stamp)) for stamp in stamps])
        finally:
            cores.set_parts(before)
    assert runs[0] == runs[1]
