"""The benchmark behind ``acres-lidar bench``: per-stage milliseconds of a scan against a bare cast.

The reference is one Open3D ``cast_rays`` of exactly the rays of the scan (``Tracer.cast_bare``),
timed in the same run; ``ratio`` is the median scan time over the median bare cast time.

With an option that adds to each scan (``--truth``: ``ScanOptions.truth``; ``--labels``: the
labelled point type of the packing) the top-level figures are the plain scan's, and ``variant``
holds the same scans with the options on, each traced right after its plain twin at the same
stamp (so both see the same load): its stage medians, and its cost over the plain scan,
``overhead_pct`` (of the medians) and ``paired_overhead_pct_median`` (the median of the
per-stamp ratios). A variant's packing is its point type's cloud and its truth cloud
(``outputs.truth``), as the node publishes them.
"""

from __future__ import annotations

import resource
import statistics
import time
from dataclasses import replace
from typing import Any

import numpy as np

from acres_lidar_ros.outputs.layouts import default_stamp_ns, point_cloud
from acres_lidar_ros.outputs.pointcloud2 import pointcloud2_message
from acres_lidar_ros.outputs.truth import truth_cloud
from acres_lidar_ros.scan import Scan, Scanner
from acres_lidar_ros.sensor.poses import PoseHistory


def peak_memory_mb() -> float:
    """Peak resident memory of this process, MiB (Linux ru_maxrss is in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


STAGES = ("rays_ms", "trace_ms", "returns_ms", "points_ms", "packing_ms")
VARIANT_OPTIONS = ("truth",)
"""``ScanOptions`` switches that add to a scan; the bench times them against the plain scan."""


def plain_and_variant(scanner: Scanner, labels: bool = False) -> tuple[Scanner, Scanner | None]:
    """The plain scanner (the ``VARIANT_OPTIONS`` off, same tracer and table) and ``scanner`` as
    the variant; ``(scanner, None)`` when none of them is on and ``labels`` is off."""
    on = {name: False for name in VARIANT_OPTIONS if getattr(scanner.options, name)}
    if not on and not labels:
        return scanner, None
    plain = Scanner(
        scanner.config, options=replace(scanner.options, **on), tracer=scanner.tracer, self_table=scanner.self_table
    )
    return plain, scanner


def _packed_ms(scan: Scan, point_type: str) -> float:
    """Milliseconds to pack what the node publishes of a scan: its cloud, and its truth cloud."""
    started = time.perf_counter()
    header_ns = default_stamp_ns(scan, point_type)
    messages = [pointcloud2_message(point_cloud(scan, point_type, header_ns), scan.frame_id, header_ns)]
    if scan.truth is not None:
        messages.append(pointcloud2_message(truth_cloud(scan), scan.frame_id, scan.stamp_ns))
    return (time.perf_counter() - started) * 1e3


def bench_scans(
    scanner: Scanner,
    trajectory: PoseHistory,
    n_scans: int = 20,
    point_type: str = "XYZI",
    variant: Scanner | None = None,
    variant_point_type: str | None = None,
) -> dict:
    """Time ``n_scans`` scans along ``trajectory`` (motion as configured) and the bare casts.

    Returns medians in ms of each stage (``rays_ms``, ``trace_ms``, ``returns_ms``, ``points_ms``,
    ``packing_ms``), ``scan_ms_median`` (their sum per scan), ``bare_cast_ms_median`` and ``ratio``;
    with a ``variant`` scanner (``plain_and_variant``) also ``variant`` (see the module notes),
    packed in ``variant_point_type`` (default ``point_type``).
    """
    variant_point_type = variant_point_type or point_type
    period_s = scanner.config.period_s
    stages: dict[str, list[float]] = {k: [] for k in STAGES}
    variant_stages: dict[str, list[float]] = {k: [] for k in STAGES}
    totals, bare, variant_totals = [], [], []
    points = []
    t0 = trajectory.start_s
    for k in range(n_scans + 1):  # one warm-up scan
        stamp_ns = int(round((t0 + (k + 1) * period_s) * 1e9))
        scan = scanner.scan(trajectory, stamp_ns)
        packing_ms = _packed_ms(scan, point_type)
        if variant is not None:
            variant_scan = variant.scan(trajectory, stamp_ns)
            variant_timings = dict(variant.timings_ms, packing_ms=_packed_ms(variant_scan, variant_point_type))
            if k > 0:
                for key in STAGES:
                    variant_stages[key].append(variant_timings[key])
                variant_totals.append(sum(variant_timings[key] for key in STAGES))
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
    result: dict[str, Any] = {f"{key}_median": statistics.median(values) for key, values in stages.items()}
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
    if variant is not None:
        on = [name for name in VARIANT_OPTIONS if getattr(variant.options, name)]
        on += ["labels"] if variant_point_type != point_type else []
        median = statistics.median(variant_totals)
        result["variant"] = {
            "options": on,
            "point_type": variant_point_type,
            **{f"{key}_median": statistics.median(values) for key, values in variant_stages.items()},
            "scan_ms_median": median,
            "overhead_pct": 100.0 * (median / result["scan_ms_median"] - 1.0),
            "paired_overhead_pct_median": 100.0
            * statistics.median(v / p - 1.0 for v, p in zip(variant_totals, totals, strict=True)),
        }
    return result
