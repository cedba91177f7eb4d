"""``acres-lidar bench --deadline-ms B ...``: rays completed per frame under a compute budget.

The planar 360-beam scan (ACRES Core's ``Planar``, ``sensor.pattern.planar_config``: level,
1 deg apart, 30 m) is traced against the scaling corridors (``scene.scaling``) by Open3D/Embree
(the BVH) and by brute force, in the progressive order of ``sensor.ray_order`` (centre, edges,
largest gap), until a live deadline (``tracing.deadline``; the clock is ``time.perf_counter``).
Frame ``k`` is the vehicle at the origin turned ``k`` golden angles, so frames see different
parts of the corridor. For each size, tracer and budget: rays completed per frame (mean, min,
p5), frames with a late chunk, and the overrun of the late chunk (median, max).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

import numba
import numpy as np

from acres_lidar_ros.apps.scaling_bench import fixed_pose_rays
from acres_lidar_ros.config.sensors import SensorConfig
from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.scene.scaling import check_obstacle_count, scaling_scene
from acres_lidar_ros.sensor.pattern import BeamPattern, planar_config
from acres_lidar_ros.sensor.ray_order import beam_order
from acres_lidar_ros.tracing.brute_force import brute_force_nearest
from acres_lidar_ros.tracing.deadline import trace_until_deadline
from acres_lidar_ros.tracing.soup import EmbreeSoup

DEFAULT_BUDGETS_MS = (0.05, 0.1, 0.2, 0.5, 1.0, 2.0)
DEFAULT_DEADLINE_SIZES = (10, 100, 1000, 3200, 10000)
DEFAULT_FRAMES = 30
MAX_BUDGET_MS = 1000.0
DEADLINE_THREADS = 1  # one frame's scan on one core, as the seed's per-frame budget (and less jitter)
GOLDEN_ANGLE_RAD = math.pi * (3.0 - math.sqrt(5.0))


def check_budgets(budgets_ms: Sequence[float]) -> list[float]:
    """Budgets in ms, each a finite number > 0 and <= ``MAX_BUDGET_MS``; ``ConfigError`` otherwise."""
    out = []
    for b in budgets_ms:
        if not (isinstance(b, (int, float)) and math.isfinite(b) and 0.0 < b <= MAX_BUDGET_MS):
            raise ConfigError(f"--deadline-ms {b!r}: each budget must be a number of ms > 0 and <= {MAX_BUDGET_MS:g}")
        out.append(float(b))
    if not out:
        raise ConfigError("--deadline-ms: give one or more budgets in ms, e.g. 0.05 0.5 2")
    return out


def _stats(frames: list, budget_ms: float) -> dict:
    completed = np.array([f.completed for f in frames])
    late = [f.overrun_s * 1e6 for f in frames if f.discarded]
    return {
        "budget_ms": budget_ms,
        "frames": len(frames),
        "rays_mean": float(completed.mean()),
        "rays_min": int(completed.min()),
        "rays_p5": float(np.percentile(completed, 5)),
        "late_frames": len(late),
        "overrun_us_median": float(np.median(late)) if late else 0.0,
        "overrun_us_max": float(max(late)) if late else 0.0,
    }


def bench_deadline(
    config: SensorConfig,
    budgets_ms: Sequence[float] = DEFAULT_BUDGETS_MS,
    sizes: Sequence[int] = DEFAULT_DEADLINE_SIZES,
    frames: int = DEFAULT_FRAMES,
    seed: int = 0,
    clock: Callable[[], float] = time.perf_counter,
    progress: Callable[[dict], None] | None = None,
) -> dict:
    """Rows ``{obstacles, triangles, tracer, budget_ms, rays_mean, rays_min, rays_p5, ...}``."""
    budgets = check_budgets(budgets_ms)
    sizes = [check_obstacle_count(n, "--sizes") for n in sizes]
    if isinstance(frames, bool) or not isinstance(frames, int) or not 1 <= frames <= 10_000:
        raise ConfigError(f"--frames {frames!r}: must be an integer from 1 to 10000")
    planar = planar_config(config)
    order = beam_order(BeamPattern.from_config(planar).column_azimuth_rad)
    frame_rays = [fixed_pose_rays(planar, k * GOLDEN_ANGLE_RAD) for k in range(frames)]
    rows = []
    threads = numba.get_num_threads()
    numba.set_num_threads(DEADLINE_THREADS)
    try:
        for n in sizes:
            rows.extend(_bench_size(n, seed, budgets, frame_rays, order, clock, progress))
    finally:
        numba.set_num_threads(threads)
    return {"rows": rows, "beams": len(order), "frames": frames, "budgets_ms": budgets, "threads": DEADLINE_THREADS}


def _bench_size(n, seed, budgets, frame_rays, order, clock, progress) -> list[dict]:
    """The rows of one scene size: both tracers at every budget."""
    scene = scaling_scene(n, seed=seed)
    corners = scene.corners()
    embree = EmbreeSoup(scene.vertices_m, scene.triangles, nthreads=DEADLINE_THREADS)
    embree.cast(frame_rays[0])  # builds the BVH
    brute_force_nearest(frame_rays[0][:1, :3], frame_rays[0][:1, 3:], corners[:1])  # compiled
    rays64 = [(rays[:, :3].astype(np.float64), rays[:, 3:].astype(np.float64)) for rays in frame_rays]

    def tracer_of(name: str, k: int) -> Callable[[np.ndarray], object]:
        if name == "bvh":
            rays = frame_rays[k]
            return lambda idx: embree.cast(rays[idx])
        o64, d64 = rays64[k]
        return lambda idx: brute_force_nearest(o64[idx], d64[idx], corners)

    rows = []
    for name in ("bvh", "brute_force"):
        for budget_ms in budgets:
            traced = [
                trace_until_deadline(tracer_of(name, k), order, budget_ms * 1e-3, clock) for k in range(len(frame_rays))
            ]
            row = {"obstacles": n, "triangles": scene.triangle_count, "tracer": name, **_stats(traced, budget_ms)}
            rows.append(row)
            if progress is not None:
                progress(row)
    return rows


def deadline_lines(result: dict) -> list[str]:
    """The table of ``bench_deadline`` for the terminal."""
    lines = [
        f"planar {result['beams']}-beam scan, {result['frames']} frames per row; rays completed per frame",
        f"{'obstacles':>9} {'triangles':>10} {'tracer':>11} {'budget ms':>9} {'mean':>7} {'min':>5} {'p5':>6} "
        f"{'late':>5} {'overrun us (median, max)':>25}",
    ]
    for r in result["rows"]:
        lines.append(
            f"{r['obstacles']:>9} {r['triangles']:>10} {r['tracer']:>11} {r['budget_ms']:>9.2f} {r['rays_mean']:>7.1f} "
            f"{r['rays_min']:>5} {r['rays_p5']:>6.1f} {r['late_frames']:>5} "
            f"{r['overrun_us_median']:>12.1f} {r['overrun_us_max']:>12.1f}"
        )
    return lines


__all__ = ["DEFAULT_BUDGETS_MS", "bench_deadline", "check_budgets", "deadline_lines"]
