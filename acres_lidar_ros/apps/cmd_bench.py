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

With ``--against SCENE`` (``against_setup``) each scan alternates with one on the other scene,
along that scene's own tour at the same scan index (which goes first swaps every scan), so both
see the same load: ``against`` holds its medians and ``paired_ratio_median``, the median of the
per-index ratios of this scene's scan to that one's (the figure to compare scenes by on a shared
machine, where separate runs drift with the load).
"""

from __future__ import annotations

import resource
import statistics
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from acres_lidar_ros.outputs.layouts import default_stamp_ns, point_cloud
from acres_lidar_ros.outputs.point_types import PROFILES, PointProfile
from acres_lidar_ros.outputs.pointcloud2 import pointcloud2_message
from acres_lidar_ros.outputs.truth_cloud import truth_cloud
from acres_lidar_ros.scan.scan_types import Scan
from acres_lidar_ros.scan.scanner import Scanner
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


def _packed_ms(scan: Scan, profile: PointProfile) -> float:
    """Milliseconds to pack what the node publishes of a scan: its cloud in ``profile``'s layout,
    and its truth cloud."""
    started = time.perf_counter()
    header_ns = default_stamp_ns(scan, profile)
    messages = [pointcloud2_message(point_cloud(scan, profile, header_ns), scan.frame_id, header_ns)]
    if scan.truth is not None:
        messages.append(pointcloud2_message(truth_cloud(scan), scan.frame_id, scan.stamp_ns))
    return (time.perf_counter() - started) * 1e3


@dataclass(frozen=True)
class Against:
    """The other scene of ``bench --against``: its scanner (the bench's sensor, options and
    self-return table), its tour, its name, triangle count and build seconds."""

    scanner: Scanner
    trajectory: PoseHistory
    label: str
    triangles: int
    build_s: float


def against_setup(scanner: Scanner, scene_arg: str, layout: str | None) -> Against:
    """The bench's scanner on another scene: the built-in farm ``layout`` ("v1", "v2") or, for
    None, the scene file ``scene_arg``; along that farm's tour (a scene file: the v2 tour)."""
    from acres_lidar_ros.scene.farm_v1 import build_default_farm
    from acres_lidar_ros.scene.scene_file import load_scene
    from acres_lidar_ros.scene.tour import default_tour
    from acres_lidar_ros.tracing.trace import Tracer

    started = time.perf_counter()
    scene = build_default_farm(seed=0, layout=layout) if layout else load_scene(Path(scene_arg))
    tracer = Tracer(scene)
    build_s = time.perf_counter() - started
    other = Scanner(scanner.config, options=scanner.options, tracer=tracer, self_table=scanner.self_table)
    times, positions, quaternions = default_tour(scene, layout=layout or "v2")
    tour = PoseHistory.from_arrays(times, positions, quaternions, where=f"tour of {scene_arg}")
    return Against(other, tour, scene_arg, scene.triangle_count, build_s)


def bench_lines(result: dict, sensor: str, n_scans: int) -> list[str]:
    """The text report of ``bench_scans``' result (the CLI prints it without ``--json``)."""
    lines = [
        f"sensor {sensor}: {result['rays_per_scan']} rays per scan, {n_scans} scans, "
        f"scene {result['scene_triangles']} triangles built in {result['scene_build_s']:.2f} s"
    ]
    lines += [f"  {key[:-3]:<10} {result[key + '_median']:8.2f} ms (median)" for key in STAGES]
    lines += [
        f"  scan       {result['scan_ms_median']:8.2f} ms (median), p90 {result['scan_ms_p90']:.2f} ms",
        f"  bare cast  {result['bare_cast_ms_median']:8.2f} ms (median)",
        f"  ratio      {result['ratio']:8.2f} (scan / bare cast)",
        f"  peak memory {result['peak_memory_mb']:.0f} MiB; {result['points_per_scan_median']:.0f} points per scan",
    ]
    if "against" in result:
        a = result["against"]
        lines.append(
            f"  against {a['scene']} ({a['scene_triangles']} triangles): scan {a['scan_ms_median']:.2f} ms, "
            f"bare cast {a['bare_cast_ms_median']:.2f} ms (medians); this scene's scan {a['paired_ratio_median']:.3f}x "
            f"(median of the paired ratios)"
        )
    if "variant" in result:
        v = result["variant"]
        lines.append(
            f"  with {' '.join('--' + name for name in v['options'])}: scan {v['scan_ms_median']:.2f} ms (median), "
            f"{v['overhead_pct']:+.1f} % over the plain scan ({v['paired_overhead_pct_median']:+.1f} % paired)"
        )
    return lines


def bench_scans(
    scanner: Scanner,
    trajectory: PoseHistory,
    n_scans: int = 20,
    profile: PointProfile = PROFILES["XYZI"],
    variant: Scanner | None = None,
    variant_profile: PointProfile | None = None,
    against: Against | None = None,
) -> dict:
    """Time ``n_scans`` scans along ``trajectory`` (motion as configured) and the bare casts.

    Returns medians in ms of each stage (``rays_ms``, ``trace_ms``, ``returns_ms``, ``points_ms``,
    ``packing_ms``), ``scan_ms_median`` (their sum per scan), ``bare_cast_ms_median`` and ``ratio``;
    with a ``variant`` scanner (``plain_and_variant``) also ``variant`` (see the module notes),
    packed in ``variant_profile``'s layout (default ``profile``'s); with ``against``, ``against``
    (see the module notes).
    """
    variant_profile = variant_profile or profile
    period_s = scanner.config.period_s
    stages: dict[str, list[float]] = {k: [] for k in STAGES}
    variant_stages: dict[str, list[float]] = {k: [] for k in STAGES}
    totals, bare, variant_totals = [], [], []
    points = []
    t0 = trajectory.start_s
    other: dict[str, list[float]] = {"scan": [], "bare": [], "points": [], **{k: [] for k in STAGES}}

    def scan_against(k: int) -> None:
        assert against is not None
        stamp_ns = int(round((against.trajectory.start_s + (k + 1) * period_s) * 1e9))
        scan = against.scanner.scan(against.trajectory, stamp_ns)
        timings = dict(scan.timings_ms, packing_ms=_packed_ms(scan, profile))
        origins, directions = against.scanner.pattern.rays_world(scan.T_world_sensor)
        started = time.perf_counter()
        against.scanner.tracer.cast_bare(origins, directions)
        if k > 0:
            other["bare"].append((time.perf_counter() - started) * 1e3)
            other["scan"].append(sum(timings[key] for key in STAGES))
            other["points"].append(int(scan.returns.valid.sum()))
            for key in STAGES:
                other[key].append(timings[key])

    for k in range(n_scans + 1):  # one warm-up scan
        if against is not None and k % 2:
            scan_against(k)
        stamp_ns = int(round((t0 + (k + 1) * period_s) * 1e9))
        scan = scanner.scan(trajectory, stamp_ns)
        packing_ms = _packed_ms(scan, profile)
        if variant is not None:
            variant_scan = variant.scan(trajectory, stamp_ns)
            variant_timings = dict(variant_scan.timings_ms, packing_ms=_packed_ms(variant_scan, variant_profile))
            if k > 0:
                for key in STAGES:
                    variant_stages[key].append(variant_timings[key])
                variant_totals.append(sum(variant_timings[key] for key in STAGES))
        origins, directions = scanner.pattern.rays_world(scan.T_world_sensor)
        started = time.perf_counter()
        scanner.tracer.cast_bare(origins, directions)
        bare_ms = (time.perf_counter() - started) * 1e3
        if against is not None and not k % 2:
            scan_against(k)
        if k == 0:
            continue
        timings = dict(scan.timings_ms, packing_ms=packing_ms)
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
    if against is not None:
        result["against"] = {
            "scene": against.label,
            "scene_triangles": against.triangles,
            "scene_build_s": against.build_s,
            **{f"{key}_median": statistics.median(other[key]) for key in STAGES},
            "scan_ms_median": statistics.median(other["scan"]),
            "bare_cast_ms_median": statistics.median(other["bare"]),
            "points_per_scan_median": statistics.median(other["points"]),
            "paired_ratio_median": statistics.median(a / b for a, b in zip(totals, other["scan"], strict=True)),
            "bare_cast_paired_ratio_median": statistics.median(a / b for a, b in zip(bare, other["bare"], strict=True)),
        }
    if variant is not None:
        on = [name for name in VARIANT_OPTIONS if getattr(variant.options, name)]
        on += ["labels"] if variant_profile != profile else []
        median = statistics.median(variant_totals)
        result["variant"] = {
            "options": on,
            "point_type": variant_profile.name,
            **{f"{key}_median": statistics.median(values) for key, values in variant_stages.items()},
            "scan_ms_median": median,
            "overhead_pct": 100.0 * (median / result["scan_ms_median"] - 1.0),
            "paired_overhead_pct_median": 100.0
            * statistics.median(v / p - 1.0 for v, p in zip(variant_totals, totals, strict=True)),
        }
    return result
