#!/usr/bin/env python3
"""Mutation check: does a test fail when the code is wrong? (docs/tests.md, "Mutation check").

Each mutation below is one text replacement in one source file, with the test files that should
catch it. For each, the script copies the checkout (the files git tracks or would track, not
``.git``, not ignored build output) into a temporary folder, applies the replacement there (the
checkout is never touched), runs those test files against the copy and reports the mutation
*killed* (a test failed, named) or *survived* (every test passed: the tests cannot see that
mistake). The numba cache of the copy is its own, so a mutated kernel is compiled afresh.

    python scripts/mutation_check.py                 # every mutation, a table on stdout
    python scripts/mutation_check.py --list          # the mutations and their tests
    python scripts/mutation_check.py --only rain_drop_energy node_point_type --json

It runs only the few test files each mutation names (the machine may be shared), one mutation
at a time. Exit status: 0, or 1 with ``--strict`` when a mutation survives.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutation:
    name: str
    path: str  # relative to the repository
    old: str  # must occur exactly once
    new: str
    tests: tuple[str, ...]
    why: str


MUTATIONS: tuple[Mutation, ...] = (
    Mutation(
        "rain_drop_energy",
        "acres_lidar_ros/radiometry/clutter.py",
        "total += 0.5 * e * e",
        "total += e * e",
        ("test/radiometry/test_rain_clutter.py", "test/radiometry/test_weather.py"),
        "rain slabs: sum E^2 instead of sum E^2 / 2 (drop energy doubled)",
    ),
    Mutation(
        "node_point_type",
        "acres_lidar_ros/ros/node.py",
        'stamp = shaped.header_stamp_ns(profile.stamps_sweep_start(self.settings["ts_first_point"]))\n'
        "        return pack_scan(shaped, profile, stamp, cloud_message)",
        'stamp = shaped.header_stamp_ns(False)\n        return pack_scan(shaped, point_profile("XYZI"), stamp, cloud_message)',
        ("test/ros/test_ros_outputs.py",),
        "the node publishes XYZI stamped at the sweep end, whatever point_type and ts_first_point say",
    ),
    Mutation(
        "node_stamp",
        "acres_lidar_ros/ros/node.py",
        'stamp = shaped.header_stamp_ns(profile.stamps_sweep_start(self.settings["ts_first_point"]))',
        "stamp = shaped.header_stamp_ns(False)",
        ("test/ros/test_ros_outputs.py",),
        "the node stamps every cloud at the sweep end, whatever ts_first_point and the point type say",
    ),
    Mutation(
        "set_seed",
        "acres_lidar_ros/runtime/lidar_set.py",
        "seed = options.seed + i if seeds is None else int(seeds[i])",
        "seed = options.seed if seeds is None else int(seeds[i])",
        ("test/runtime/test_lidar_set.py",),
        "every sensor of a LiDAR set draws the same noise stream (seed, not seed + i)",
    ),
    Mutation(
        "layer_checker",
        "test/house/test_layers.py",
        "if LAYER_RANK[there] >= LAYER_RANK[here]:",
        "if LAYER_RANK[there] > LAYER_RANK[here] + 100:",
        ("test/house/test_layers.py",),
        "the import-direction check disabled",
    ),
    Mutation(
        "skip_rule_sigmas",
        "acres_lidar_ros/radiometry/weather.py",
        "return signal + 5.0 * np.sqrt(max(signal + ambient_counts, 0.0)) < threshold_counts",
        "return signal + 4.0 * np.sqrt(max(signal + ambient_counts, 0.0)) < threshold_counts",
        ("test/radiometry/test_weather.py", "test/radiometry/test_rain_clutter.py"),
        "clutter skip rule with 4 sigma instead of the spec's 5",
    ),
    Mutation(
        "drop_cap",
        "acres_lidar_ros/radiometry/weather.py",
        "MAX_DROPS_PER_SLAB = 64",
        "MAX_DROPS_PER_SLAB = 16",
        ("test/radiometry/test_weather.py", "test/radiometry/test_rain_clutter.py"),
        "drops per slab limited to 16 instead of the spec's 64",
    ),
    Mutation(
        "range_equation_overlap",
        "acres_lidar_ros/radiometry/equation_kernels.py",
        "f = -math.expm1(-x) / x if x > 0.0 else 1.0",
        "f = -math.expm1(-x) / x if x > 0.0 else 0.5",
        ("test/radiometry/test_physics.py", "test/radiometry/test_radiometry_passes.py"),
        "the range equation's limit at R = 0 (overlap factor) wrong",
    ),
    Mutation(
        "truth_stamp",
        "acres_lidar_ros/runtime/messages.py",
        "truth = message(truth_cloud(scan), scan.frame_id, stamp_ns)",
        "truth = message(truth_cloud(scan), scan.frame_id, stamp_ns + 1)",
        ("test/runtime/test_output_options_runtime.py", "test/ros/test_ros_outputs.py"),
        "the truth cloud's stamp one ns off its points cloud's",
    ),
    Mutation(
        "dense_flag",
        "acres_lidar_ros/outputs/pointcloud2.py",
        "def cloud_is_dense(cloud: np.ndarray) -> bool:",
        "def cloud_is_dense(cloud: np.ndarray) -> bool:\n    return False",
        ("test/outputs/test_outputs_pointcloud2.py", "test/outputs/test_outputs_profiles.py"),
        "is_dense always false",
    ),
)


def _tracked_files() -> list[str]:
    out = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-co", "--exclude-standard", "-z"],
        capture_output=True,
        check=True,
    ).stdout
    return [name for name in out.decode().split("\0") if name]


def _copy_checkout(target: Path) -> None:
    for name in _tracked_files():
        source = REPO / name
        if source.is_file():
            destination = target / name
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination)


def _apply(mutation: Mutation, root: Path) -> None:
    path = root / mutation.path
    text = path.read_text()
    found = text.count(mutation.old)
    if found != 1:
        raise SystemExit(f"mutation {mutation.name}: {mutation.path} has the text {found} times (must be once)")
    path.write_text(text.replace(mutation.old, mutation.new))


def run_mutation(mutation: Mutation, timeout_s: float) -> dict:
    """Apply one mutation to a temporary copy and run its tests there."""
    with tempfile.TemporaryDirectory(prefix=f"mutation-{mutation.name}-") as folder:
        root = Path(folder)
        _copy_checkout(root)
        _apply(mutation, root)
        env = dict(os.environ, PYTHONPATH=str(root), NUMBA_CACHE_DIR=str(root / ".numba-cache"))
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", "-rf", *mutation.tests]
        started = time.monotonic()
        try:
            result = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return {"name": mutation.name, "status": "timed out", "killed_by": [], "seconds": timeout_s}
        seconds = time.monotonic() - started
    failed = [line.split(" ", 2)[1] for line in result.stdout.splitlines() if line.startswith(("FAILED ", "ERROR "))]
    if result.returncode == 0:
        status = "survived"
    elif failed:
        status = "killed"
    else:
        status = f"error (pytest exit {result.returncode})"
    return {"name": mutation.name, "status": status, "killed_by": failed, "seconds": round(seconds, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", metavar="NAME", help="these mutations only")
    parser.add_argument("--list", action="store_true", help="list the mutations and their tests")
    parser.add_argument("--json", action="store_true", help="one JSON object per mutation")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a mutation survives")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per mutation's tests (default 600)")
    args = parser.parse_args(argv)
    chosen = [m for m in MUTATIONS if not args.only or m.name in args.only]
    unknown = sorted(set(args.only or ()) - {m.name for m in MUTATIONS})
    if unknown:
        parser.error(f"unknown mutations {unknown}; known: {[m.name for m in MUTATIONS]}")
    if args.list:
        for m in chosen:
            print(f"{m.name}: {m.why}\n    {m.path}\n    tests: {' '.join(m.tests)}")
        return 0
    survived = 0
    for m in chosen:
        row = run_mutation(m, args.timeout)
        survived += row["status"] == "survived"
        if args.json:
            print(json.dumps({**row, "why": m.why}), flush=True)
        else:
            killer = row["killed_by"][0] if row["killed_by"] else "-"
            print(f"{m.name:<24} {row['status']:<10} {row['seconds']:>7} s  {killer}", flush=True)
    return 1 if args.strict and survived else 0


if __name__ == "__main__":
    sys.exit(main())
