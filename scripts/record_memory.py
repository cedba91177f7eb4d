#!/usr/bin/env python3
"""Memory of an ``acres-lidar record`` run: RSS at the first scan, the peak, and at the last scan.

    .venv/bin/python scripts/record_memory.py --duration 60 [-- more record options]

Starts ``acres-lidar record --duration D --no-progress`` into a temporary run directory (deleted
afterwards), samples the process's resident set size every 0.1 s from ``/proc/<pid>/status``
(Linux), and prints one JSON line: RSS at the start (the first ``lidar.jsonl`` row), the peak (the
kernel's high-water mark ``VmHWM``) and at the end (the last sample while scans were written), the
scans and the wall time. A recording that holds scans in memory shows a peak
far above the start; a flat one keeps start, peak and end within a few MiB.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _status_mib(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM of ``pid`` in MiB ({} once the process is gone or a zombie)."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return {}
    values = {}
    for line in lines:
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0]) / 1024  # kB
    return values


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=60.0, help="simulated seconds (default 60)")
    parser.add_argument("--interval", type=float, default=0.1, help="sampling interval, s (default 0.1)")
    parser.add_argument("extra", nargs="*", help="more acres-lidar record options (after --)")
    args = parser.parse_args()
    script = Path(sys.executable).with_name("acres-lidar")
    with tempfile.TemporaryDirectory(prefix="record_memory_") as tmp:
        run = Path(tmp) / "run"
        command = [str(script), "record", "--duration", str(args.duration), "--out", str(run), "--no-progress"]
        started = time.perf_counter()
        child = subprocess.Popen(command + args.extra, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        samples: list[tuple[float, float, bool]] = []  # (t, rss MiB, a scan is listed)
        peak_mib = 0.0
        while child.poll() is None:
            status = _status_mib(child.pid)
            if "VmRSS" not in status:
                break
            peak_mib = max(peak_mib, status.get("VmHWM", 0.0), status["VmRSS"])
            samples.append((time.perf_counter() - started, status["VmRSS"], (run / "lidar.jsonl").exists()))
            time.sleep(args.interval)
        stdout, stderr = child.communicate()
        wall_s = time.perf_counter() - started
        rows = len((run / "lidar.jsonl").read_text().splitlines()) if (run / "lidar.jsonl").exists() else 0
    if child.returncode != 0:
        print(stderr, file=sys.stderr)
        return child.returncode
    recording = [rss for _, rss, listed in samples if listed]
    print(
        json.dumps(
            {
                "duration_s": args.duration,
                "scans": rows,
                "wall_s": round(wall_s, 1),
                "rss_start_mib": round(recording[0], 1),
                "rss_peak_mib": round(peak_mib, 1),
                "rss_end_mib": round(recording[-1], 1),
                "samples": len(samples),
                "summary": stdout.strip(),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
