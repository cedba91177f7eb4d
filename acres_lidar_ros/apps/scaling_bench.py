"""``acres-lidar bench --scaling``: cost per ray against scene size, gated against brute force.

A fixed ray set, the Polaris scan's 57,600 rays (1800 columns x 32 rings, one sub-ray) from a
fixed pose (base_footprint at the world origin, facing +x, at rest), is traced against the
generated corridors of ``scene.scaling`` with ``N`` obstacles. For each ``N``:

* Open3D/Embree (``tracing.soup.EmbreeSoup``): all rays, ``EMBREE_REPEATS`` timed casts after a
  first one that builds the BVH; ns per ray of the median cast.
* Brute force (``tracing.brute_force``): Möller–Trumbore over every triangle, on a fixed sample of
  the rays (a seeded permutation's first ``m``, nested across sizes) holding the ray-triangle
  tests near ``BRUTE_TEST_BUDGET`` (all rays where that allows, never fewer than
  ``MIN_BRUTE_RAYS``); ns per ray of that one timed call.
* The gate on the sampled rays: same hit or miss, same object, distance within 1e-6 m. Embree's
  distance is taken on the triangle it found, in float64 (``plane_distance``); its own float32
  ``t_hit`` differs from the float64 distance by up to ``embree_f32_max_error_m``, reported too.

Ranges beyond the sensor's ``range_m`` are misses for both. Rays and vertices are float32 numbers
so both tracers see the same geometry. Timings are wall-clock on whatever else the machine runs.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence

import numpy as np

from acres_lidar_ros.apps.cmd_bench import peak_memory_mb
from acres_lidar_ros.config.sensors import SensorConfig
from acres_lidar_ros.scene.scaling import check_obstacle_count, scaling_scene
from acres_lidar_ros.sensor.pattern import BeamPattern
from acres_lidar_ros.tracing.brute_force import NO_TRIANGLE, brute_force_nearest, plane_distance
from acres_lidar_ros.tracing.soup import EmbreeSoup, gate, soup_rays

DEFAULT_SIZES = (1, 10, 32, 100, 320, 1000, 3200, 10000)
BRUTE_TEST_BUDGET = 1.0e9  # ray-triangle tests of brute force per size
MIN_BRUTE_RAYS = 256
EMBREE_REPEATS = 5
SAMPLE_SEED = 3  # the fixed ray sample's permutation
SEED_RATIO_AT_3200 = 274.0  # the simulator README: scene-BVH cheaper per ray at 3,200 obstacles


def fixed_pose_rays(config: SensorConfig, yaw_rad: float = 0.0) -> np.ndarray:
    """The sensor's rays (one per beam) from base_footprint at the origin, turned ``yaw_rad``
    from +x, at rest: (n, 6) float32 ``(origin, direction)`` in the world, beam order
    ``column * rings + ring``."""
    pattern = BeamPattern.from_config(config, sub_rays=1)
    c, s = np.cos(yaw_rad), np.sin(yaw_rad)
    R_world_base = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    R, t = R_world_base @ pattern.R_base_sensor, R_world_base @ pattern.t_base_sensor_m
    directions = pattern.directions_sensor.reshape(-1, 3) @ R.T
    origins = pattern.lens_origins_sensor.reshape(-1, 3) @ R.T + t
    return soup_rays(origins, directions)


def brute_sample(n_rays: int, triangles: int) -> np.ndarray:
    """Indices (sorted) of the rays brute force traces at a scene of ``triangles`` triangles."""
    m = int(min(n_rays, max(MIN_BRUTE_RAYS, BRUTE_TEST_BUDGET // max(triangles, 1))))
    return np.sort(np.random.default_rng(SAMPLE_SEED).permutation(n_rays)[:m])


def _ranges(t: np.ndarray, triangle: np.ndarray, norm: np.ndarray | float, max_range_m: float) -> np.ndarray:
    r = np.where(triangle != NO_TRIANGLE, t * norm, np.inf)
    r[r > max_range_m] = np.inf
    return r


def bench_one(n_obstacles: int, rays: np.ndarray, max_range_m: float, seed: int = 0) -> dict:
    """Figures of one scene size (see the module docstring)."""
    started = time.perf_counter()
    scene = scaling_scene(n_obstacles, seed=seed)
    generated_s = time.perf_counter() - started
    corners = scene.corners()
    embree = EmbreeSoup(scene.vertices_m, scene.triangles)
    started = time.perf_counter()
    t_e, k_e = embree.cast(rays)  # builds the BVH
    first_s = time.perf_counter() - started
    times = []
    for _ in range(EMBREE_REPEATS):
        started = time.perf_counter()
        t_e, k_e = embree.cast(rays)
        times.append(time.perf_counter() - started)
    embree_s = statistics.median(times)

    sample = brute_sample(len(rays), scene.triangle_count)
    origins = rays[sample, :3].astype(np.float64)
    directions = rays[sample, 3:].astype(np.float64)
    brute_force_nearest(origins[:1], directions[:1], corners[:1])  # compiled or loaded from cache
    started = time.perf_counter()
    t_b, k_b = brute_force_nearest(origins, directions, corners)
    brute_s = time.perf_counter() - started

    norm = np.linalg.norm(directions, axis=1)
    k_es = k_e[sample]
    range_b = _ranges(t_b, k_b, norm, max_range_m)
    range_e = _ranges(plane_distance(origins, directions, corners, k_es), k_es, norm, max_range_m)
    objects = scene.triangle_object
    object_b = np.where(k_b != NO_TRIANGLE, objects[np.maximum(k_b, 0)], -1)
    object_e = np.where(k_es != NO_TRIANGLE, objects[np.maximum(k_es, 0)], -1)
    result = gate(range_b, object_b, range_e, object_e)
    f32 = _ranges(t_e[sample].astype(np.float64), k_es, norm, max_range_m)
    both = np.isfinite(f32) & np.isfinite(range_b)
    brute_ns = brute_s / len(sample) * 1e9
    embree_ns = embree_s / len(rays) * 1e9
    return {
        "obstacles": scene.n_obstacles,
        "triangles": scene.triangle_count,
        "rays": len(rays),
        "hit_fraction": float(np.isfinite(_ranges(t_e.astype(np.float64), k_e, 1.0, max_range_m)).mean()),
        "scene_generated_s": generated_s,
        "embree_build_s": max(first_s - embree_s, 0.0),
        "embree_ns_per_ray": embree_ns,
        "brute_rays": len(sample),
        "brute_ns_per_ray": brute_ns,
        "ratio": brute_ns / embree_ns,
        "gate": result.as_dict(),
        "embree_f32_max_error_m": float(np.abs(f32[both] - range_b[both]).max()) if both.any() else 0.0,
    }


def bench_scaling(
    config: SensorConfig,
    sizes: Sequence[int] = DEFAULT_SIZES,
    seed: int = 0,
    progress: Callable[[dict], None] | None = None,
) -> dict:
    """Every size of ``sizes`` (validated first, all of them, before any work); ``progress(row)``
    after each. Returns ``{"rows": [...], "ratio_at_3200": ..., ...}``."""
    sizes = [check_obstacle_count(n, "--sizes") for n in sizes]
    rays = fixed_pose_rays(config)
    rows = []
    for n in sizes:
        rows.append(bench_one(n, rays, config.range_m, seed=seed))
        if progress is not None:
            progress(rows[-1])
    by_n = {row["obstacles"]: row for row in rows}
    result: dict = {
        "rows": rows,
        "sensor_rays": len(rays),
        "mismatches": sum(row["gate"]["mismatches"] for row in rows),
        "seed_ratio_at_3200": SEED_RATIO_AT_3200,
        "ratio_at_3200": by_n[3200]["ratio"] if 3200 in by_n else None,
        "peak_memory_mb": peak_memory_mb(),
    }
    low, high = min(rows, key=lambda r: r["triangles"]), max(rows, key=lambda r: r["triangles"])
    result["embree_growth"] = {
        "from_triangles": low["triangles"],
        "to_triangles": high["triangles"],
        "factor": high["embree_ns_per_ray"] / low["embree_ns_per_ray"],
    }
    return result


def scaling_lines(result: dict) -> list[str]:
    """The table of ``bench_scaling`` for the terminal."""
    lines = [
        f"{'obstacles':>9} {'triangles':>10} {'Embree ns/ray':>13} {'brute ns/ray':>13} {'ratio':>9} "
        f"{'brute rays':>10} {'mismatches':>10}"
    ]
    for row in result["rows"]:
        lines.append(
            f"{row['obstacles']:>9} {row['triangles']:>10} {row['embree_ns_per_ray']:>13.1f} "
            f"{row['brute_ns_per_ray']:>13.0f} {row['ratio']:>8.0f}x {row['brute_rays']:>10} "
            f"{row['gate']['mismatches']:>10}"
        )
    if result["ratio_at_3200"] is not None:
        lines.append(
            f"at 3,200 obstacles Embree is {result['ratio_at_3200']:.0f}x cheaper per ray than brute force "
            f"(the simulator README: {result['seed_ratio_at_3200']:.0f}x)"
        )
    growth = result["embree_growth"]
    lines.append(
        f"Embree from {growth['from_triangles']:,} to {growth['to_triangles']:,} triangles: "
        f"{growth['factor']:.2f}x the cost per ray; mismatches in all: {result['mismatches']}"
    )
    return lines


__all__ = ["DEFAULT_SIZES", "bench_one", "bench_scaling", "brute_sample", "fixed_pose_rays", "scaling_lines"]
