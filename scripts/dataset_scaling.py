#!/usr/bin/env python3
"""Shards per minute of ``acres-lidar dataset`` with 1 and with 2 workers, and the scaling.

    .venv/bin/python scripts/dataset_scaling.py [--rounds 3] [--shards 8] [--duration 0.5] [--workers 1 2]

Writes a dataset file of ``--shards`` drives (the built-in tour for ``--duration`` s on farm 0,
seeds 0, 1, ..., Polaris, XYZI, PCD files) into a temporary directory and runs
``acres-lidar dataset --workers W --no-progress`` on it, a fresh output directory each run, the
worker counts alternated round by round (the machine's other load then falls on both alike).
One line per run: the load average before it, the command's wall time, shards per minute
(shards / wall time), the first shard's time from Ray's start, the peak memory of each worker,
and from the shards' figures (``shard.json``) the wall and CPU seconds (``os.times``, every
thread of the worker) of the shards, the scene builds and each worker's CPU in all (its imports,
scene builds and shards), and of a warm shard (each worker's shards after its first) its CPU,
its own thread's CPU and its wall time. Then the medians of each worker count and the scaling:
the shards per minute of the largest worker count against the smallest's, run by run and of the
medians, and the ceiling of that scaling on warm shards when no other load takes the cores
(CPU times, which the machine's other load hardly moves): a one-worker shard takes at least its
own thread's CPU, W one-thread workers finish W shards per shard CPU.
``--json`` prints everything as one JSON object instead.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def dataset_file(directory: Path, shards: int, duration_s: float) -> Path:
    path = directory / "dataset.json"
    drives = {
        "tours": ["default"],
        "farm_seeds": [0],
        "seeds": {"first": 0, "count": shards},
        "weather": [{"name": "clear"}],
        "sensors": ["polaris"],
        "point_types": ["XYZI"],
    }
    path.write_text(json.dumps({"drives": drives, "scene": "default", "duration_s": duration_s, "files": "pcd"}))
    return path


def one_run(config: Path, out: Path, workers: int) -> dict:
    """One ``dataset`` run and its figures."""
    load = os.getloadavg()[0]
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    command = [sys.executable, "-m", "acres_lidar_ros.apps.cli", "dataset", "--config", str(config)]
    command += ["--out", str(out), "--workers", str(workers), "--no-progress"]
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    wall_s = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"dataset --workers {workers} exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    shards = json.loads((out / "manifest.json").read_text())["shards"]
    figures = [s["figures"] for s in shards]
    by_worker: dict[int, list[dict]] = {}
    for shard in shards:
        by_worker.setdefault(shard["worker_pid"], []).append(shard["figures"])
    # A worker's first shard also builds its scene and loads the compiled kernels; the others are warm.
    warm = [f for fs in by_worker.values() for f in sorted(fs, key=lambda f: f["worker_cpu_s"])[1:]]
    warm_cpu = statistics.median(f["cpu_s"] for f in warm) if warm else float("nan")
    return {
        "workers": workers,
        "load_average": load,
        "wall_s": wall_s,
        "shards": len(shards),
        "shards_per_min": len(shards) / wall_s * 60.0,
        "first_shard_s": min(s["done_after_s"] for s in shards),
        "worker_peak_rss_mib": sorted(max(f["worker_peak_rss_mib"] for f in fs) for fs in by_worker.values()),
        "threads": sorted({f.get("threads", 1) for f in figures}),
        "shard_wall_s": sum(f["wall_s"] for f in figures),
        "shard_cpu_s": sum(f["cpu_s"] for f in figures),
        "scene_s": sum(f["scene_s"] for f in figures),
        "worker_cpu_s": sorted(max(f["worker_cpu_s"] for f in fs) for fs in by_worker.values()),
        "shards_per_worker": sorted(len(fs) for fs in by_worker.values()),
        "warm_shard_cpu_s": warm_cpu,
        "warm_shard_thread_cpu_s": statistics.median(f["thread_cpu_s"] for f in warm) if warm else float("nan"),
        "warm_shard_wall_s": statistics.median(f["wall_s"] for f in warm) if warm else float("nan"),
        # each worker's CPU besides its warm shards: imports, scene builds, kernels
        "worker_startup_cpu_s": sorted(
            max(f["worker_cpu_s"] for f in fs) - len(fs) * warm_cpu for fs in by_worker.values()
        )
        if warm
        else [],
    }


def run_line(run: dict) -> str:
    memory = ", ".join(f"{m:.0f}" for m in run["worker_peak_rss_mib"])
    cpu = ", ".join(f"{c:.1f}" for c in run["worker_cpu_s"])
    return (
        f"{time.strftime('%H:%M:%S')} load {run['load_average']:4.1f}  workers {run['workers']} "
        f"(threads {run['threads']}): {run['shards']} shards in {run['wall_s']:5.1f} s = "
        f"{run['shards_per_min']:5.1f} shards/min, first {run['first_shard_s']:5.1f} s; shards: wall "
        f"{run['shard_wall_s']:5.1f} s, CPU {run['shard_cpu_s']:5.1f} s; scenes {run['scene_s']:4.1f} s; "
        f"worker CPU [{cpu}] s; peak [{memory}] MiB; a warm shard: CPU {run['warm_shard_cpu_s']:.2f} s, "
        f"its thread {run['warm_shard_thread_cpu_s']:.2f} s, wall {run['warm_shard_wall_s']:.2f} s"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="runs of each worker count (default 3)")
    parser.add_argument("--shards", type=int, default=8, help="shards of the dataset (default 8)")
    parser.add_argument("--duration", type=float, default=0.5, help="seconds of each drive (default 0.5)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="worker counts (default 1 2)")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = parser.parse_args()
    runs: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="dataset_scaling_") as tmp:
        config = dataset_file(Path(tmp), args.shards, args.duration)
        for k in range(args.rounds):
            order = args.workers if k % 2 == 0 else args.workers[::-1]
            for workers in order:
                runs.append(one_run(config, Path(tmp) / f"run{len(runs)}", workers))
                if not args.json:
                    print(run_line(runs[-1]), flush=True)
    low, high = min(args.workers), max(args.workers)
    rate = {w: [r["shards_per_min"] for r in runs if r["workers"] == w] for w in args.workers}
    summary = {
        "median_shards_per_min": {str(w): statistics.median(v) for w, v in rate.items()},
        "median_first_shard_s": {
            str(w): statistics.median(r["first_shard_s"] for r in runs if r["workers"] == w) for w in args.workers
        },
        "median_shard_cpu_s": {
            str(w): statistics.median(r["shard_cpu_s"] for r in runs if r["workers"] == w) for w in args.workers
        },
        "scaling_per_round": [h / lo for h, lo in zip(rate[high], rate[low], strict=True)],
        "scaling_of_medians": statistics.median(rate[high]) / statistics.median(rate[low]),
    }
    # The most the workers can gain on warm shards with the cores to themselves: one worker's shard
    # takes at least its own thread's CPU (the parts it hands to other threads run beside it); W
    # workers of one thread each finish W shards per warm shard's CPU.
    one = [r["warm_shard_thread_cpu_s"] for r in runs if r["workers"] == low]
    many = [r["warm_shard_cpu_s"] for r in runs if r["workers"] == high]
    summary["warm_ceiling"] = high / low * statistics.median(one) / statistics.median(many)
    if args.json:
        print(json.dumps({"runs": runs, **summary}, indent=2))
        return 0
    for w in args.workers:
        print(
            f"{w} worker(s): median {summary['median_shards_per_min'][str(w)]:.1f} shards/min, first shard "
            f"{summary['median_first_shard_s'][str(w)]:.1f} s, shards' CPU {summary['median_shard_cpu_s'][str(w)]:.1f} s"
        )
    per_round = ", ".join(f"{s:.2f}x" for s in summary["scaling_per_round"])
    print(f"{high} against {low} workers: {summary['scaling_of_medians']:.2f}x of the medians; per round {per_round}")
    print(
        f"ceiling on warm shards with the cores free ({high} x {low} worker's shard-thread CPU / {high} workers' "
        f"shard CPU): {summary['warm_ceiling']:.2f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
