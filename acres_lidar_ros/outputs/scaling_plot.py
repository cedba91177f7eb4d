"""The PNG plot of ``acres-lidar bench --scaling``: ns per ray against obstacles, log-log.

Drawn with matplotlib (the optional ``plot`` extra, ``pip install '.[plot]'``) on its
non-interactive Agg backend; written with ``atomic_write`` (never over an existing file).
"""

from __future__ import annotations

import io
from pathlib import Path

from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.outputs.files import atomic_write, refuse_existing


def scaling_plot_png(result: dict) -> bytes:
    """PNG bytes of the plot of ``bench_scaling``'s result (its ``rows``)."""
    try:
        import matplotlib

        matplotlib.use("Agg", force=True)
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ConfigError(
            f"--plot needs matplotlib ({exc}); install it with pip install 'acres_lidar_ros[plot]'"
        ) from exc
    rows = result["rows"]
    n = [row["obstacles"] for row in rows]
    figure = Figure(figsize=(7.0, 4.6), dpi=110)
    axes = figure.add_subplot()
    axes.loglog(n, [r["brute_ns_per_ray"] for r in rows], "o-", color="#c0392b", label="brute force (Möller–Trumbore)")
    axes.loglog(n, [r["embree_ns_per_ray"] for r in rows], "s-", color="#2471a3", label="Open3D / Embree BVH")
    for row in rows:
        axes.annotate(
            f"{row['triangles']:.0e}".replace("e+0", "e"),
            (row["obstacles"], row["embree_ns_per_ray"]),
            textcoords="offset points",
            xytext=(0, -13),
            ha="center",
            fontsize=7,
            color="#555555",
        )
    axes.set_xlabel("obstacles in the corridor (triangles under the BVH points)")
    axes.set_ylabel("ns per ray")
    title = f"{result['sensor_rays']:,} Polaris rays, fixed pose; mismatches: {result['mismatches']}"
    if result.get("ratio_at_3200"):
        title += f"; {result['ratio_at_3200']:.0f}x at 3,200 (seed: {result['seed_ratio_at_3200']:.0f}x)"
    axes.set_title(title, fontsize=9)
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def write_scaling_plot(path: Path, result: dict) -> Path:
    """Write the plot to a new file ``path`` (``OutputError`` where it exists)."""
    refuse_existing(path)
    return atomic_write(path, scaling_plot_png(result))


__all__ = ["scaling_plot_png", "write_scaling_plot"]
