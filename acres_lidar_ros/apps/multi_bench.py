"""Memory and per-sensor timing of 1, 2 and 4 LiDARs over one scene in one process
(``runtime.lidar_set``), on the built-in farm:

    python -m acres_lidar_ros.apps.multi_bench [--scans 3] [--sensors polaris vlp16 os1_64 pandar_xt32]

Prints the process's resident memory after the scene and after each set, and the mean wall
time of one scan of each sensor along the tour (the sensors scan in turn, one thread each).
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path


def rss_mb() -> float:
    """Resident memory of this process now (Linux ``/proc``), else its peak, MB."""
    status = Path("/proc/self/status")
    if status.is_file():
        for line in status.read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m acres_lidar_ros.apps.multi_bench", description=__doc__)
    parser.add_argument("--scans", type=int, default=3, help="scans per sensor and set (default 3)")
    parser.add_argument("--sensors", nargs="+", default=["polaris", "vlp16", "os1_64", "pandar_xt32"])
    args = parser.parse_args(argv)
    if args.scans < 1 or len(args.sensors) < 1:
        parser.error("--scans must be >= 1 and --sensors must name at least one sensor")

    from acres_lidar_ros.runtime.lidar_set import LidarSet
    from acres_lidar_ros.scan import ScanOptions
    from acres_lidar_ros.scene import build_default_farm, default_tour
    from acres_lidar_ros.sensor.poses import PoseHistory
    from acres_lidar_ros.tracing.trace import Tracer

    before = rss_mb()
    scene = build_default_farm(seed=0)
    tracer = Tracer(scene)
    poses = PoseHistory.from_arrays(*default_tour(scene))
    scene_mb = rss_mb()
    report: dict = {"rss_start_mb": round(before, 1), "rss_with_scene_mb": round(scene_mb, 1), "sets": []}
    sizes = sorted({n for n in (1, 2, 4, len(args.sensors)) if n <= len(args.sensors)})
    for n in sizes:
        lidars = LidarSet(args.sensors[:n], tracer, ScanOptions(seed=0))
        times: dict[str, list[float]] = {slot.name: [] for slot in lidars.slots}
        for k in range(args.scans):
            stamp_ns = int((poses.start_s + 10.0 + 0.1 * (k + 1)) * 1e9)
            for slot in lidars.slots:
                started = time.perf_counter()
                slot.scanner.scan(poses, stamp_ns)
                times[slot.name].append(time.perf_counter() - started)
        report["sets"].append(
            {
                "sensors": n,
                "rss_mb": round(rss_mb(), 1),
                "scan_ms": {name: round(1e3 * sum(t[1:] or t) / len(t[1:] or t), 1) for name, t in times.items()},
            }
        )
        del lidars
    json.dump(report, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
