"""Memory and per-sensor timing of 1, 2 and 4 LiDARs over one scene in one process
(``runtime.lidar_set``, what ``lidar_node`` runs with ``lidar_set``) against the same sensors as
separate processes of one sensor each (one ``lidar_node`` per sensor), on the built-in farm:

    python -m acres_lidar_ros.apps.multi_bench [--scans 3] [--sensors polaris vlp16 os1_64 pandar_xt32]

Every figure comes from a fresh child process (``--one-process``): it builds the farm and its
``Tracer`` once, makes the set, and scans each sensor ``--scans`` times along the tour, in turn;
it reports its peak resident memory (``ru_maxrss``), its resident memory with the scene alone, and
the mean and the shortest wall time of one scan of each sensor (the first scan, which compiles,
left out when there are more; on a shared machine the shortest is the steadier figure). Separate processes: one child per sensor, their peaks summed for N sensors.
Prints a table, or the JSON with ``--json``.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

SIZES = (1, 2, 4)


def rss_mb() -> float:
    """Resident memory of this process now (Linux ``/proc``), else its peak, MB."""
    status = Path("/proc/self/status")
    if status.is_file():
        for line in status.read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return peak_rss_mb()


def peak_rss_mb() -> float:
    """Peak resident memory of this process, MB (Linux reports ``ru_maxrss`` in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def one_process(sensors: list[str], scans: int) -> dict:
    """In this process: the farm once, a ``LidarSet`` of ``sensors`` over it, ``scans`` scans each."""
    from acres_lidar_ros.runtime.lidar_set import LidarSet
    from acres_lidar_ros.scan.scan_types import ScanOptions
    from acres_lidar_ros.scene.farm_v1 import build_default_farm
    from acres_lidar_ros.scene.tour import default_tour
    from acres_lidar_ros.sensor.poses import PoseHistory
    from acres_lidar_ros.tracing.trace import Tracer

    started = time.perf_counter()
    scene = build_default_farm(seed=0)
    tracer = Tracer(scene)
    poses = PoseHistory.from_arrays(*default_tour(scene))
    scene_mb, scene_s = rss_mb(), time.perf_counter() - started
    lidars = LidarSet(sensors, tracer, ScanOptions(seed=0))
    times: dict[str, list[float]] = {slot.name: [] for slot in lidars.slots}
    for k in range(scans):
        stamp_ns = int((poses.start_s + 10.0 + 0.1 * (k + 1)) * 1e9)
        for slot in lidars.slots:
            t0 = time.perf_counter()
            slot.scanner.scan(poses, stamp_ns)
            times[slot.name].append(time.perf_counter() - t0)
    return {
        "sensors": sensors,
        "scene_s": round(scene_s, 1),
        "rss_with_scene_mb": round(scene_mb, 1),
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "scan_ms": {name: round(1e3 * sum(t[1:] or t) / len(t[1:] or t), 1) for name, t in times.items()},
        "scan_min_ms": {name: round(1e3 * min(t[1:] or t), 1) for name, t in times.items()},
    }


def child(sensors: list[str], scans: int) -> dict:
    """``one_process`` in a fresh interpreter (so its peak memory is its own)."""
    command = [sys.executable, "-m", "acres_lidar_ros.apps.multi_bench", "--one-process", "--scans", str(scans)]
    done = subprocess.run([*command, "--sensors", *sensors], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"multi_bench: the child for {sensors} failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout)


def compare(sensors: list[str], scans: int) -> dict:
    """One child per set size (the first N sensors in one process), one per sensor alone."""
    sizes = [n for n in SIZES if n <= len(sensors)] or [len(sensors)]
    alone = {name: child([name], scans) for name in dict.fromkeys(sensors[: max(sizes)])}
    rows = []
    for n in sizes:
        together = child(sensors[:n], scans)
        separate = [alone[name] for name in sensors[:n]]
        rows.append(
            {
                "sensors": n,
                "names": sensors[:n],
                "one_process_peak_rss_mb": together["peak_rss_mb"],
                "separate_processes_peak_rss_mb": round(sum(r["peak_rss_mb"] for r in separate), 1),
                "one_process_scan_ms": together["scan_ms"],
                "separate_scan_ms": {k: v for r in separate for k, v in r["scan_ms"].items()},
                "one_process_scan_min_ms": together["scan_min_ms"],
                "separate_scan_min_ms": {k: v for r in separate for k, v in r["scan_min_ms"].items()},
                "scene_rss_mb": together["rss_with_scene_mb"],
            }
        )
    return {"scans": scans, "rows": rows}


def table(report: dict) -> str:
    lines = [
        "| sensors | one process: peak RSS | separate processes: summed peak RSS | ms per scan, one process, "
        "mean (min) | ms per scan, each alone, mean (min) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row in report["rows"]:
        mean, low = row["one_process_scan_ms"], row["one_process_scan_min_ms"]
        together = ", ".join(f"{k} {v:g} ({low[k]:g})" for k, v in mean.items())
        mean, low = row["separate_scan_ms"], row["separate_scan_min_ms"]
        alone = ", ".join(f"{k} {v:g} ({low[k]:g})" for k, v in mean.items())
        lines.append(
            f"| {row['sensors']} ({', '.join(row['names'])}) | {row['one_process_peak_rss_mb']:.0f} MB | "
            f"{row['separate_processes_peak_rss_mb']:.0f} MB | {together} | {alone} |"
        )
    scene = report["rows"][0]["scene_rss_mb"]
    lines.append(f"\nresident memory with the scene alone (before any sensor): {scene:.0f} MB")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m acres_lidar_ros.apps.multi_bench", description=__doc__)
    parser.add_argument("--scans", type=int, default=3, help="scans per sensor (default 3)")
    parser.add_argument("--sensors", nargs="+", default=["polaris", "vlp16", "os1_64", "pandar_xt32"])
    parser.add_argument("--json", action="store_true", help="print the JSON report instead of the table")
    parser.add_argument("--one-process", action="store_true", help=argparse.SUPPRESS)  # a child's run
    args = parser.parse_args(argv)
    if args.scans < 1:
        parser.error(f"--scans {args.scans}: expected 1 or more")
    if args.one_process:
        json.dump(one_process(args.sensors, args.scans), sys.stdout)
        print()
        return 0
    report = compare(args.sensors, args.scans)
    print(json.dumps(report, indent=2) if args.json else table(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
