"""The PNG plots of ``acres-lidar calibrate`` (docs/calibration.md, "Calibration"): the recording against the
simulator before and after the calibration.

``return_rate.png`` return rate per ring; ``detection.png`` ground detection against range per surface;
``range_histogram.png``; ``intensity.png`` intensity histograms per surface; ``body_mask.png`` the body mask
as an image of columns x rings (real, calibrated, and where they differ). Drawn with matplotlib (the ``plot``
extra) on its Agg backend; without it no plot is drawn and ``write_plots`` says so.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np

from acres_lidar_ros.outputs.files import atomic_write

PLOTS = ("return_rate.png", "detection.png", "range_histogram.png", "intensity.png", "body_mask.png")
_REAL, _BEFORE, _AFTER = "#222222", "#c0392b", "#2471a3"


def _figure(width: float = 7.0, height: float = 4.2) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100)


def _png(figure: Any) -> bytes:
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def _three(axes: Any, x: np.ndarray, curves: dict, key: str, **style: Any) -> None:
    real, after = curves["after"][key]
    axes.plot(x, real, color=_REAL, label="recorded", **style)
    axes.plot(x, curves["before"][key][1], color=_BEFORE, label="start", linestyle="--", **style)
    axes.plot(x, after, color=_AFTER, label="calibrated", **style)
    axes.legend(fontsize=8)
    axes.grid(True, alpha=0.3)


def plot_pngs(curves: dict, columns: int, rings: int) -> dict[str, bytes]:
    """PNG bytes of each plot of ``PLOTS`` from ``lidar_sim.score_configs``' curves."""
    out = {}
    f = _figure()
    ax = f.add_subplot()
    _three(ax, np.arange(rings), curves, "return_rate_per_ring", marker="o", markersize=3)
    ax.set_xlabel("ring")
    ax.set_ylabel("beams with a return, %")
    ax.set_title("Return rate per ring", fontsize=10)
    out["return_rate.png"] = _png(f)

    by_surface = curves["after"]["detection_by_surface"]
    f = _figure(7.0, 2.6 * max(1, len(by_surface)))
    for k, (name, (real, after)) in enumerate(by_surface.items()):
        ax = f.add_subplot(max(1, len(by_surface)), 1, k + 1)
        x = 2.5 + 5.0 * np.arange(len(real))
        ax.plot(x, real, "o-", color=_REAL, label="recorded")
        ax.plot(
            x,
            curves["before"]["detection_by_surface"].get(name, (None, np.full_like(real, np.nan)))[1],
            "s--",
            color=_BEFORE,
            label="start",
        )
        ax.plot(x, after, "s-", color=_AFTER, label="calibrated")
        ax.set_ylim(0, 1.05)
        ax.set_ylabel(f"{name}: detected")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    ax.set_xlabel("ground range, m (5 m bins)")
    out["detection.png"] = _png(f)

    f = _figure()
    ax = f.add_subplot()
    real = curves["after"]["range_histogram"][0]
    x = 0.5 + np.arange(len(real))
    for hist, color, label in (
        (real, _REAL, "recorded"),
        (curves["before"]["range_histogram"][1], _BEFORE, "start"),
        (curves["after"]["range_histogram"][1], _AFTER, "calibrated"),
    ):
        ax.step(x, hist / max(hist.sum(), 1), where="mid", color=color, label=label)
    ax.set_yscale("log")
    ax.set_xlabel("range, m")
    ax.set_ylabel("share of the returns (1 m bins)")
    ax.legend(fontsize=8)
    out["range_histogram.png"] = _png(f)

    surfaces = curves["after"]["intensity_by_surface"]
    f = _figure(7.0, 2.6 * max(1, len(surfaces)))
    for k, (name, (real_h, after_h)) in enumerate(surfaces.items()):
        ax = f.add_subplot(max(1, len(surfaces)), 1, k + 1)
        top = int(np.flatnonzero(real_h + after_h).max()) + 2 if (real_h + after_h).any() else 256
        byte = np.arange(top)
        ax.step(byte, real_h[:top] / max(real_h.sum(), 1), where="mid", color=_REAL, label="recorded")
        ax.step(byte, after_h[:top] / max(after_h.sum(), 1), where="mid", color=_AFTER, label="calibrated")
        ax.set_ylabel(f"{name}: share")
        ax.legend(fontsize=7)
    ax.set_xlabel("intensity byte")
    out["intensity.png"] = _png(f)

    real_mask, sim_mask = curves["after"]["body_mask"]
    f = _figure(9.0, 4.0)
    images = (("recorded", real_mask), ("calibrated", sim_mask), ("differs", real_mask ^ sim_mask))
    for k, (title, mask) in enumerate(images):
        ax = f.add_subplot(3, 1, k + 1)
        ax.imshow(mask.reshape(columns, rings).T, aspect="auto", interpolation="nearest", cmap="Greys", origin="lower")
        ax.set_ylabel(f"{title}\nring", fontsize=8)
    ax.set_xlabel("column")
    out["body_mask.png"] = _png(f)
    return out


def write_plots(out_dir: Path, curves: dict, columns: int, rings: int) -> list[str]:
    """Write the plots into ``out_dir``; the names written, or a one-item note without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg", force=True)
    except ImportError as error:
        return [f"no plots: matplotlib is missing ({error}); pip install 'acres_lidar_ros[plot]'"]
    pngs = plot_pngs(curves, columns, rings)
    for name, data in pngs.items():
        atomic_write(out_dir / name, data, overwrite=True)
    return list(pngs)
