#!/usr/bin/env python3
"""Rain and fog of the Polaris sensor against visibility and rain rate: the figures of docs/weather.md.

One Polaris scan (noise on, seed 0, the body on) at the start of the built-in farm tour per
condition, with the spec's model (the default sensor ``polaris``) and, with ``--compare``, another
sensors file: the measured-sensor option ``config/sensors_polaris_weather_measured.json``
(docs/weather.md). Per condition it prints and, with ``--plot``,
draws (matplotlib, the ``[plot]`` extra):

* ``points``: the returns of the scan (every slot), ``scene``: those of the scene (not the body,
  not clutter), ``clutter``: those of rain and fog (class ``precipitation``);
* ``clutter_beams_pct``: the share of beams whose strongest return is clutter, with the median and
  95th percentile of the clutter ranges;
* ``scene_p95_m``: the 95th percentile range of the scene returns (how far the scan still sees);
* ``range10_m``: the spec's detection range of a 10 % Lambertian target at normal incidence on
  ring 0 (``S(R) = S_T`` with the two-way extinction), solved by bisection from the scalar
  equations.

    PYTHONPATH=. python scripts/weather_comparison.py \
        --compare config/sensors_polaris_weather_measured.json --plot docs   # about two minutes
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

from acres_lidar_ros.body.self_returns import sensor_self_table
from acres_lidar_ros.config.material_table import CLASS_ID
from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.radiometry.equations import detection_threshold, signal_counts
from acres_lidar_ros.radiometry.weather import atmosphere
from acres_lidar_ros.scan.scan_types import ScanOptions
from acres_lidar_ros.scan.scanner import Scanner
from acres_lidar_ros.scene.farm_v1 import build_default_farm
from acres_lidar_ros.scene.tour import default_tour
from acres_lidar_ros.sensor.poses import PoseHistory
from acres_lidar_ros.tracing.trace import Tracer

VISIBILITIES_M = (math.inf, 10000.0, 5000.0, 2000.0, 1000.0, 500.0, 200.0, 100.0, 50.0, 20.0)
RAIN_MM_PER_H = (0.0, 1.0, 5.0, 10.0, 25.0, 50.0, 100.0)
PRECIPITATION = CLASS_ID["precipitation"]
# The measured Velodyne VLP-16 (905 nm) of Linnhoff et al., "Measuring the Influence of Environmental
# Conditions on Automotive Lidar Sensors", Sensors 22(14) 5266 (2022), as calibrated in the openMSL
# reflection-based lidar object model (docs/weather.md cites the file): a beam has a rain return with
# the probability 1.69e-4 per mm/h, at a log-normal range (mu 1.362, sigma 0.784 of ln R); fog gives
# no returns; the extinction is 3 / V in fog and 7.677e-5 R_r in rain (1/m, two-way exp(-2 alpha R)).
MEASURED_RAIN_RETURN_PER_MM_H = 1.69e-4
MEASURED_RAIN_LN_RANGE = (1.362, 0.784)
MEASURED_FOG_EXTINCTION_VISIBILITY = 3.0
MEASURED_RAIN_EXTINCTION_PER_MM_H = 7.677e-5
BODY = CLASS_ID["vehicle"]


def range_of_10pct_target_m(
    config, rain_mm_per_h: float, visibility_m: float, alpha_per_m: float | None = None
) -> float:
    """The spec's range at which a 10 % target at normal incidence gives S = S_T (ring 0), with the
    model's extinction or ``alpha_per_m``."""
    rad = config.radiometry
    if alpha_per_m is None:
        alpha_per_m = atmosphere(rain_mm_per_h, visibility_m, config.wavelength_nm, config.weather).alpha_per_m
    threshold = detection_threshold(rad.signal_at_10pct_counts, rad.ambient_counts, rad.detection_probability_at_spec)
    r10 = float(rad.ring_range_at_10pct_m[0])

    def margin(range_m: float) -> float:
        s = signal_counts(0.1, range_m, 1.0, rad.signal_at_10pct_counts, r10, rad.overlap_range_m, alpha_per_m)
        return float(s) - threshold

    lo, hi = 2.0, 1000.0
    if margin(hi) > 0:
        return hi
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if margin(mid) > 0 else (lo, mid)
    return lo


def scan_figures(scan) -> dict:
    r = scan.returns
    valid = np.asarray(r.valid)
    cls = np.asarray(r.class_id)
    rng = np.asarray(r.range_m)
    clutter = valid & (cls == PRECIPITATION)
    scene = valid & (cls != PRECIPITATION) & (cls != BODY)
    strongest = valid & ((np.asarray(r.return_flags) & 2) != 0)
    strongest_clutter = (strongest & clutter).any(axis=1)
    clutter_ranges = rng[clutter]
    body_beams = int((valid & (cls == BODY)).any(axis=1).sum())
    return {
        "beams": int(valid.shape[0]),
        "body_beams": body_beams,
        "points": int(valid.sum()),
        "scene": int(scene.sum()),
        "clutter": int(clutter.sum()),
        "clutter_beams_pct": round(100.0 * float(strongest_clutter.mean()), 2),
        "clutter_median_m": round(float(np.median(clutter_ranges)), 2) if clutter_ranges.size else None,
        "clutter_p95_m": round(float(np.percentile(clutter_ranges, 95)), 2) if clutter_ranges.size else None,
        "scene_p95_m": round(float(np.percentile(rng[scene], 95)), 1) if scene.any() else None,
    }


def run(sensor: str) -> list[dict]:
    scene = build_default_farm()
    tracer = Tracer(scene)
    config = load_sensor_config(sensor)
    table = sensor_self_table(config)
    tour = PoseHistory.from_arrays(*default_tour(scene))
    stamp_ns = int(round((tour.start_s + 0.1) * 1e9))
    rows = []
    conditions = [(0.0, v) for v in VISIBILITIES_M] + [(r, math.inf) for r in RAIN_MM_PER_H[1:]]
    for rain, vis in conditions:
        options = ScanOptions(seed=0, rain_mm_per_h=rain, visibility_m=vis)
        scanner = Scanner(config, options=options, tracer=tracer, self_table=table)
        row = {"rain_mm_per_h": rain, "visibility_m": vis, **scan_figures(scanner.scan(tour, stamp_ns))}
        row["range10_m"] = round(range_of_10pct_target_m(config, rain, vis), 1)
        measured_alpha = MEASURED_FOG_EXTINCTION_VISIBILITY / vis + MEASURED_RAIN_EXTINCTION_PER_MM_H * rain
        row["range10_measured_extinction_m"] = round(range_of_10pct_target_m(config, rain, vis, measured_alpha), 1)
        row["measured_clutter"] = round(
            MEASURED_RAIN_RETURN_PER_MM_H * rain * scanner.config.columns * scanner.config.rings
        )
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def plot(rows: list[dict], option_rows: list[dict] | None, folder: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from acres_lidar_ros.outputs.files import atomic_write

    for kind, key, xlabel in (("fog", "visibility_m", "visibility V, m"), ("rain", "rain_mm_per_h", "rain rate, mm/h")):
        fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
        for label, data, style in (
            ("spec model (default)", rows, "-o"),
            ("measured-sensor option", option_rows, "--s"),
        ):
            if not data:
                continue
            sel = [r for r in data if (r["rain_mm_per_h"] == 0.0 if kind == "fog" else r["visibility_m"] == math.inf)]
            sel = [r for r in sel if math.isfinite(r[key]) and (kind == "fog" or r[key] > 0)]
            x = [r[key] for r in sel]
            axes[0].plot(x, [r["range10_m"] for r in sel], style, label=label)
            axes[1].plot(x, [r["scene"] for r in sel], style, label=f"scene, {label}")
            axes[1].plot(x, [r["clutter"] for r in sel], style, alpha=0.5, label=f"clutter, {label}")
            axes[2].plot(x, [r["clutter_p95_m"] or 0 for r in sel], style, label=label)
        sel = [r for r in rows if (r["rain_mm_per_h"] == 0.0 if kind == "fog" else r["visibility_m"] == math.inf)]
        sel = [r for r in sel if math.isfinite(r[key]) and (kind == "fog" or r[key] > 0)]
        x = [r[key] for r in sel]
        measured = "measured VLP-16 (Linnhoff et al. 2022)"
        axes[0].plot(x, [r["range10_measured_extinction_m"] for r in sel], "k:", label=f"extinction of the {measured}")
        axes[1].plot(x, [r["measured_clutter"] for r in sel], "k:", label=f"clutter, {measured}")
        mu, sigma = MEASURED_RAIN_LN_RANGE
        p95 = math.exp(mu + 1.6449 * sigma) if kind == "rain" else 0.0
        axes[2].plot(x, [p95] * len(x), "k:", label=measured)
        axes[2].legend(fontsize=7)
        for ax in axes:
            ax.set_xscale("log")
            ax.set_xlabel(xlabel)
            ax.grid(True, which="both", alpha=0.3)
        axes[0].set_ylabel("range of a 10 % target, m")
        axes[1].set_ylabel("returns per scan")
        axes[2].set_ylabel("clutter range, 95th percentile, m")
        axes[1].legend(fontsize=7)
        axes[0].legend(fontsize=7)
        fig.suptitle(f"Polaris scan at the tour start: {kind}")
        fig.tight_layout()
        path = folder / f"weather_{kind}.png"

        def write(handle, fig=fig):
            fig.savefig(handle, format="png", dpi=80)

        atomic_write(path, write, overwrite=True)
        plt.close(fig)
        print(f"wrote {path}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compare", metavar="SENSOR", help="a second sensor (file) to run, e.g. the measured option")
    parser.add_argument("--plot", type=Path, metavar="FOLDER", help="write weather_fog.png and weather_rain.png there")
    args = parser.parse_args(argv)
    rows = run("polaris")
    option_rows = None
    if args.compare:
        print(f"with {args.compare}")
        option_rows = run(args.compare)
    if args.plot:
        plot(rows, option_rows, args.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
