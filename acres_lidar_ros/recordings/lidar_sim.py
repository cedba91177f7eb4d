"""Render the simulator at a recording's poses and score it against the recording: the spec's 11
metrics (the spec's ``lidar_sim.py``; each metric is defined in docs/calibration.md, "Metrics").

Scans of either kind are compared in the sensor's cells. The ground is found by tracing each beam
of a run (its own beam table and mount, at the pose of its column) through the scene
(``lidar_model.ground_cells``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from scipy.spatial.distance import jensenshannon

from acres_lidar_ros.config.material_table import MATERIAL_NAMES
from acres_lidar_ros.config.sensors import SensorConfig
from acres_lidar_ros.outputs.files import atomic_write
from acres_lidar_ros.recordings.cloud_cells import CellCloud
from acres_lidar_ros.recordings.lidar_model import (
    MAD_TO_SIGMA,
    NOISE_RANGE_M,
    GroundCells,
    calibrate_beams,
    ground_cells,
)
from acres_lidar_ros.recordings.lidar_stats import (
    BODY_RANGE_M,
    body_stats,
    mask_iou,
    points_per_scan,
    return_rate_per_ring,
    stack_ranges,
)
from acres_lidar_ros.recordings.recorded_scans import RecordedScan, Recording, beam_table
from acres_lidar_ros.tracing.trace import Tracer

DETECTION_BIN_M = 5.0
DETECTION_MAX_M = 60.0
MIN_BIN_BEAMS = 50
RANGE_BIN_M = 1.0
MIN_SURFACE_POINTS = 50

#: (name, limit, kind): ``max`` means the metric must be at most the limit, ``min`` at least.
METRICS: tuple[tuple[str, float, str], ...] = (
    ("beam_elevation_worst_ring_deg", 0.05, "max"),
    ("ring_azimuth_offset_worst_ring_deg", 0.05, "max"),
    ("body_mask_iou", 0.90, "min"),
    ("return_rate_per_ring_mae_points", 5.0, "max"),
    ("points_per_scan_relative_error", 0.10, "max"),
    ("ground_detection_vs_range_mae", 0.05, "max"),
    ("ground_detection_vs_range_worst_bin", 0.15, "max"),
    ("range_histogram_js_distance", 0.15, "max"),
    ("ground_intensity_median_worst_surface", 3.0, "max"),
    ("ground_intensity_histogram_worst_surface_js", 0.20, "max"),
    ("range_noise_below_10m_worst_surface_relative", 0.41, "max"),
)


def render(
    recording: Recording,
    config: SensorConfig,
    tracer: Tracer,
    scans: Sequence[RecordedScan],
    progress: Callable[[int, int], None] | None = None,
) -> list[RecordedScan]:
    """The simulator's scans (``config``, its self-return table) at the recorded scans' stamps and poses;
    ``progress(done, total)`` after each."""
    from acres_lidar_ros.body.self_returns import sensor_self_table
    from acres_lidar_ros.scan.scanner import Scanner

    if recording.poses is None:
        raise ValueError("render needs a recording read with its poses")
    scanner = Scanner(config, tracer=tracer, self_table=sensor_self_table(config))
    out = []
    for recorded in scans:
        scan = scanner.scan(recording.poses.history, recorded.stamp_ns, index=recorded.index)
        beams = np.arange(scan.columns * scan.rings)
        slot = np.zeros(beams.size, np.int64) if scan.returns.valid.shape[1] == 1 else scan.returns.primary_index()
        valid = scan.returns.valid[beams, slot]
        points = np.where(valid[:, None], scan.points_sensor[beams, slot], np.nan)
        intensity = np.where(valid, scan.returns.intensity[beams, slot], 0).astype(np.float32)
        cells = CellCloud(
            scan.columns, scan.rings, points, intensity, np.full(beams.size, np.nan), "render", int(valid.sum())
        )
        out.append(
            RecordedScan(
                recorded.index, recorded.stamp_ns, cells, recorded.column_time_s, scan.T_world_sensor, "render"
            )
        )
        if progress is not None:
            progress(len(out), len(scans))
    return out


class Score(NamedTuple):
    """The metrics by name, and the curves the plots draw (real, sim) pairs."""

    metrics: dict[str, float | None]
    curves: dict[str, Any]


def _subset(g: GroundCells, sel: np.ndarray) -> GroundCells:
    return GroundCells(*(getattr(g, f)[sel] for f in GroundCells.__dataclass_fields__))


def _detection_curve(g: GroundCells) -> np.ndarray:
    edges = np.arange(0.0, DETECTION_MAX_M + DETECTION_BIN_M, DETECTION_BIN_M)
    b = np.digitize(g.ground_range_m, edges) - 1
    out = np.full(len(edges) - 1, np.nan)
    for k in range(len(edges) - 1):
        sel = b == k
        if sel.sum() >= MIN_BIN_BEAMS:
            out[k] = g.detected[sel].mean()
    return out


def _surfaces(g: GroundCells) -> dict[str, dict]:
    out = {}
    near = g.ground_range_m < NOISE_RANGE_M
    for m in np.unique(g.material_id):
        sel = (g.material_id == m) & g.matched
        if sel.sum() < MIN_SURFACE_POINTS:
            continue
        noise = sel & near
        residual = (g.return_range_m - g.ground_range_m)[noise]
        sigma = (
            MAD_TO_SIGMA * float(np.median(np.abs(residual - np.median(residual)))) if residual.size >= 20 else np.nan
        )
        hist = np.bincount(np.clip(np.rint(g.intensity[sel]).astype(np.int64), 0, 255), minlength=256)
        out[MATERIAL_NAMES[int(m)]] = {"median": float(np.median(g.intensity[sel])), "hist": hist, "sigma": sigma}
    return out


def _range_histogram(scans: Sequence[RecordedScan], config: SensorConfig) -> np.ndarray:
    r = stack_ranges(scans, beam_table(config)).reshape(-1)
    r = r[np.isfinite(r) & (r >= BODY_RANGE_M)]
    return np.histogram(r, bins=np.arange(0.0, config.range_m + RANGE_BIN_M, RANGE_BIN_M))[0]


def _js(p: np.ndarray, q: np.ndarray) -> float:
    if p.sum() == 0 or q.sum() == 0:
        return 1.0
    return float(jensenshannon(p / p.sum(), q / q.sum(), base=2))


def _worst(values: list[float]) -> float | None:
    finite = [v for v in values if np.isfinite(v)]
    return max(finite) if finite else None


def _worst_name(values: dict[str, float]) -> str | None:
    finite = {k: v for k, v in values.items() if np.isfinite(v)}
    return max(finite, key=lambda k: finite[k]) if finite else None


def _worst_bin(differences: np.ndarray) -> str | None:
    if not np.isfinite(differences).any():
        return None
    k = int(np.nanargmax(differences))
    return f"{k * DETECTION_BIN_M:g} to {(k + 1) * DETECTION_BIN_M:g} m"


def score(
    real: Sequence[RecordedScan],
    real_config: SensorConfig,
    sim: Sequence[RecordedScan],
    sim_config: SensorConfig,
    tracer: Tracer,
) -> Score:
    """The 11 metrics of ``sim`` against ``real`` (docs/calibration.md, "Metrics") and the curves behind them."""
    table_real, table_sim = beam_table(real_config), beam_table(sim_config)
    fit_real = calibrate_beams(real, table_real).fit
    fit_sim = calibrate_beams(sim, table_sim).fit
    both = (fit_real.points >= 2) & (fit_sim.points >= 2)
    d_el = np.rad2deg(np.abs(fit_sim.elevation_rad - fit_real.elevation_rad))[both]
    d_az = np.rad2deg(np.abs(fit_sim.azimuth_offset_rad - fit_real.azimuth_offset_rad))[both]
    mask_real, mask_sim = body_stats(real, table_real).mask, body_stats(sim, table_sim).mask
    iou = mask_iou(mask_real, mask_sim)
    rate_real, rate_sim = return_rate_per_ring(real, table_real), return_rate_per_ring(sim, table_sim)
    rate = float(np.mean(np.abs(rate_sim - rate_real)))
    pts_real, pts_sim = points_per_scan(real).mean(), points_per_scan(sim).mean()
    g_real, g_sim = ground_cells(real, real_config, tracer), ground_cells(sim, sim_config, tracer)
    det = np.abs(_detection_curve(g_sim) - _detection_curve(g_real))
    s_real, s_sim = _surfaces(g_real), _surfaces(g_sim)
    common = sorted(set(s_real) & set(s_sim))
    noise = [abs(s_sim[m]["sigma"] - s_real[m]["sigma"]) / s_real[m]["sigma"] for m in common if s_real[m]["sigma"] > 0]
    hist_real, hist_sim = _range_histogram(real, real_config), _range_histogram(sim, sim_config)
    curves = {
        "worst_case": {
            "ground_detection_vs_range_worst_bin": _worst_bin(det),
            "ground_intensity_median_worst_surface": _worst_name(
                {m: abs(s_sim[m]["median"] - s_real[m]["median"]) for m in common}
            ),
            "ground_intensity_histogram_worst_surface_js": _worst_name(
                {m: _js(s_sim[m]["hist"], s_real[m]["hist"]) for m in common}
            ),
            "range_noise_below_10m_worst_surface_relative": _worst_name(
                {
                    m: abs(s_sim[m]["sigma"] - s_real[m]["sigma"]) / s_real[m]["sigma"]
                    for m in common
                    if s_real[m]["sigma"] > 0
                }
            ),
        },
        "return_rate_per_ring": (rate_real, rate_sim),
        "body_mask": (mask_real, mask_sim),
        "range_histogram": (hist_real, hist_sim),
        "detection_by_surface": {
            MATERIAL_NAMES[int(m)]: (
                _detection_curve(_subset(g_real, g_real.material_id == m)),
                _detection_curve(_subset(g_sim, g_sim.material_id == m)),
            )
            for m in np.unique(g_real.material_id)
        },
        "intensity_by_surface": {m: (s_real[m]["hist"], s_sim[m]["hist"]) for m in common},
    }
    metrics = {
        "beam_elevation_worst_ring_deg": float(d_el.max()) if d_el.size else None,
        "ring_azimuth_offset_worst_ring_deg": float(d_az.max()) if d_az.size else None,
        "body_mask_iou": iou,
        "return_rate_per_ring_mae_points": rate,
        "points_per_scan_relative_error": float(abs(pts_sim - pts_real) / pts_real) if pts_real else None,
        "ground_detection_vs_range_mae": float(np.nanmean(det)) if np.isfinite(det).any() else None,
        "ground_detection_vs_range_worst_bin": float(np.nanmax(det)) if np.isfinite(det).any() else None,
        "range_histogram_js_distance": _js(hist_sim, hist_real),
        "ground_intensity_median_worst_surface": _worst(
            [abs(s_sim[m]["median"] - s_real[m]["median"]) for m in common]
        ),
        "ground_intensity_histogram_worst_surface_js": _worst(
            [_js(s_sim[m]["hist"], s_real[m]["hist"]) for m in common]
        ),
        "range_noise_below_10m_worst_surface_relative": _worst(noise),
    }
    return Score(metrics, curves)


def within(value: float | None, limit: float, kind: str) -> bool:
    if value is None or not np.isfinite(value):
        return False
    return value <= limit if kind == "max" else value >= limit


def score_configs(
    recording: Recording,
    before: SensorConfig,
    after: SensorConfig,
    tracer: Tracer,
    max_scans: int | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> tuple[list[dict], dict[str, Any]]:
    """Render with the start and the calibrated sensor and score both: ``metrics.json``'s list, and
    the curves of each (``{"before": ..., "after": ...}``)."""
    scans = recording.scans
    if max_scans is not None and len(scans) > max_scans:
        scans = [scans[i] for i in np.linspace(0, len(scans) - 1, max_scans).round().astype(int)]
    results, curves = {}, {}
    for name, config in (("before", before), ("after", after)):
        step = (lambda done, total, name=name: progress(f"render {name}", done, total)) if progress else None
        rendered = render(recording, config, tracer, scans, step)
        results[name], curves[name] = score(scans, after, rendered, config, tracer)
    metrics = [
        {
            "name": name,
            "limit": limit,
            "limit_kind": kind,
            "before": results["before"][name],
            "after": results["after"][name],
            "within_limit": within(results["after"][name], limit, kind),
            **(
                {"worst_case": {k: curves[k]["worst_case"][name] for k in ("before", "after")}}
                if name in curves["after"]["worst_case"]
                else {}
            ),
        }
        for name, limit, kind in METRICS
    ]
    return metrics, curves


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def write_report(out: Path, metrics: list[dict], recording: Recording, plots: Sequence[str] = ()) -> Path:
    """``report.md``: the metrics as the spec prints its table."""
    inside = (sum(m["within_limit"] for m in metrics), len(metrics))
    lines = [
        "# Calibration against recorded scans",
        "",
        f"{len(recording.scans)} recorded scans ({recording.layout}, topic {recording.topic}, poses "
        f"{recording.pose_source}); {inside[0]} of {inside[1]} metrics within their limits after the calibration.",
        "",
        "| Metric (Worst Case) | Limit | Before | Calibrated |",
        "| --- | --- | --- | --- |",
    ]
    for m in metrics:
        limit = f"{m['limit']:g}" + (" minimum" if m["limit_kind"] == "min" else "")
        after = _fmt(m["after"]) + ("" if m["within_limit"] else " (not in limit)")
        if m.get("worst_case", {}).get("after"):
            after += f", {m['worst_case']['after']}"
        lines.append(f"| {m['name']} | {limit} | {_fmt(m['before'])} | {after} |")
    lines += ["", 'Each metric is defined in docs/calibration.md ("Metrics").', ""]
    for name in plots:
        lines += [f"![{name}]({name})" if name.endswith(".png") else name, ""]
    return atomic_write(out / "report.md", "\n".join(lines).encode("utf-8"), overwrite=True)
