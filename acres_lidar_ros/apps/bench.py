"""The benchmark behind ``acres-lidar bench``: per-stage milliseconds of a scan against a bare cast.

The reference is one Open3D ``cast_rays`` of exactly the rays of the scan (``Tracer.cast_bare``),
timed in the same run; ``ratio`` is the median scan time over the median bare cast time.
"""

from __future__ import annotations

import resource
import statistics
import time

import numpy as np

from acres_lidar_ros.outputs.layouts import default_stamp_ns, point_cloud
from acres_lidar_ros.outputs.pointcloud2 import pointcloud2_message
from acres_lidar_ros.scan import Scanner
from acres_lidar_ros.sensor.poses import PoseHistory


def peak_memory_mb() -> float:
    """Peak resident memory of this process, MiB (Linux ru_maxrss is in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def bench_scans(scanner: Scanner, trajectory: PoseHistory, n_scans: int = 20, point_type: str = "XYZI") -> dict:
    """Time ``n_scans`` scans along ``trajectory`` (motion as configured) and the bare casts.

    Returns medians in ms of each stage (``rays_ms``, ``trace_ms``, ``returns_ms``, ``points_ms``,
    ``packing_ms``), ``scan_ms_median`` (their sum per scan), ``bare_cast_ms_median`` and ``ratio``.
    """
    period_s = scanner.config.period_s
    stages: dict[str, list[float]] = {k: [] for k in ("rays_ms", "trace_ms", "returns_ms", "points_ms", "packing_ms")}
    totals, bare = [], []
    points = []
    t0 = trajectory.start_s
    for k in range(n_scans + 1):  # one warm-up scan
        stamp_ns = int(round((t0 + (k + 1) * period_s) * 1e9))
        scan = scanner.scan(trajectory, stamp_ns)
        started = time.perf_counter()
        header_ns = default_stamp_ns(scan, point_type)
        message = pointcloud2_message(point_cloud(scan, point_type, header_ns), scan.frame_id, header_ns)
        packing_ms = (time.perf_counter() - started) * 1e3
        origins, directions = scanner.rays_world(scan.T_world_sensor)
        started = time.perf_counter()
        scanner.tracer.cast_bare(origins, directions)
        bare_ms = (time.perf_counter() - started) * 1e3
        if k == 0:
            continue
        timings = dict(scanner.timings_ms, packing_ms=packing_ms)
        for key in stages:
            stages[key].append(timings[key])
        totals.append(sum(timings[key] for key in stages))
        bare.append(bare_ms)
        points.append(int(scan.returns.valid.sum()))
        del message
    result = {f"{key}_median": statistics.median(values) for key, values in stages.items()}
    result.update(
        scans=n_scans,
        rays_per_scan=scanner.ray_count,
        points_per_scan_median=statistics.median(points),
        scan_ms_median=statistics.median(totals),
        scan_ms_p90=float(np.percentile(totals, 90)),
        bare_cast_ms_median=statistics.median(bare),
    )
    result["ratio"] = result["scan_ms_median"] / result["bare_cast_ms_median"]
    result["scans_per_second"] = 1e3 / result["scan_ms_median"]
    result["real_time_factor_trace_only"] = result["scans_per_second"] * period_s
    return result
