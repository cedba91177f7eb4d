"""``acres-lidar calibrate`` on simulated recordings with a known truth.

The truth: the shipped Polaris overlay (its beam table, mount, body table and ground materials)
driving along an asphalt road over grass (``recording_support.simulated_drive``). The calibration
starts from the nominal ``helios5515`` file, whose column order, lens, mount and azimuth offsets
differ and which has no body.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from recording_support import simulated_drive, two_surface_scene

from acres_lidar_ros.apps.cli import main
from acres_lidar_ros.body.self_returns import load_self_table, sensor_self_table
from acres_lidar_ros.config.material_table import MATERIAL_ID
from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.recordings.lidar_stats import BODY_MASK_P_SELF, mask_iou

SCANS = 20


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    from acres_lidar_ros.recordings.calibrate_run import calibrate

    root = tmp_path_factory.mktemp("calib")
    scene = two_surface_scene()
    bag = simulated_drive(root / "drive", load_sensor_config("polaris"), scene, SCANS)
    out = root / "out"
    summary = calibrate([bag], "config/sensors_helios5515.json", out, scene=scene, render_scans=8)
    return summary, out


def test_beam_table_column_order_lens_and_mount(calibrated):
    _summary, out = calibrated
    truth = load_sensor_config("polaris")
    fitted = load_sensor_config(out / "sensors_calibrated.json")
    measures = json.loads((out / "measures.json").read_text())
    points = np.array(measures["beam_table"]["points"])
    seen = points >= 2
    assert seen.sum() >= 24  # the rings that see the ground or the body
    np.testing.assert_allclose(
        np.rad2deg(fitted.elevations_rad)[seen], np.rad2deg(truth.elevations_rad)[seen], atol=0.02
    )
    np.testing.assert_allclose(
        np.rad2deg(fitted.azimuth_offsets_rad)[seen], np.rad2deg(truth.azimuth_offsets_rad)[seen], atol=0.02
    )
    assert fitted.azimuth_order == "cw" and fitted.emitters is None
    assert fitted.lens_center_m == pytest.approx(truth.lens_center_m, abs=1e-4)
    np.testing.assert_allclose(fitted.position_flu_m, truth.position_flu_m, atol=1e-6)
    np.testing.assert_allclose(fitted.rpy_rad, truth.rpy_rad, atol=1e-9)
    overlay = json.loads((out / "sensors_calibrated.json").read_text())
    assert overlay["extends"].endswith("sensors_helios5515.json")


def test_body_table_loads_and_matches_the_shipped_mask(calibrated):
    _summary, out = calibrated
    shipped = sensor_self_table(load_sensor_config("polaris"))
    measured = load_self_table(out / "self_table.f32", 1800, 32)
    iou = mask_iou(measured.p_self >= BODY_MASK_P_SELF, shipped.p_self >= BODY_MASK_P_SELF)
    assert iou >= 0.95
    stats = json.loads((out / "self_table.json").read_text())
    assert stats["scans_measured"] == SCANS
    assert stats["return_range_min_m"] >= 0.2 and stats["return_range_max_m"] < 1.6


def test_ground_reflectivity_within_0_01(calibrated):
    _summary, out = calibrated
    truth = load_sensor_config("polaris").materials
    fitted = load_sensor_config(out / "sensors_calibrated.json").materials
    for name in ("grass", "asphalt"):
        i = MATERIAL_ID[name]
        assert fitted.reflectivity[i] == pytest.approx(truth.reflectivity[i], abs=0.01), name


def test_metrics_before_and_after(calibrated):
    summary, out = calibrated
    metrics = json.loads((out / "metrics.json").read_text())["metrics"]
    assert [m["name"] for m in metrics] == [m["name"] for m in summary["metrics"]] and len(metrics) == 11
    for m in metrics:  # all 11 within their limits after the calibration
        assert m["within_limit"], m
        before_ok = m["before"] >= m["limit"] if m["limit_kind"] == "min" else m["before"] <= m["limit"]
        # before: all outside but the elevations, which the nominal helios5515 shares with the Polaris
        assert before_ok == (m["name"] == "beam_elevation_worst_ring_deg"), m
    report = (out / "report.md").read_text()
    assert "| Metric (Worst Case) | Limit | Before | Calibrated |" in report


def test_plots_are_pngs_the_report_shows(calibrated):
    from PIL import Image

    from acres_lidar_ros.recordings.calibration_plots import PLOTS

    summary, out = calibrated
    assert summary["plots"] == list(PLOTS)
    report = (out / "report.md").read_text()
    for name in PLOTS:
        with Image.open(out / name) as image:  # a decoder the project did not write
            assert image.format == "PNG" and image.size[0] >= 600
        assert f"![{name}]({name})" in report


def test_calibrate_refuses_a_bad_scan_count(tmp_path, capsys):
    assert (
        main(
            [
                "calibrate",
                "--bag",
                str(tmp_path),
                "--sensor",
                "polaris",
                "--out",
                str(tmp_path / "o"),
                "--max-scans",
                "0",
            ]
        )
        == 2
    )
    assert "--max-scans 0: expected an integer >= 1" in capsys.readouterr().err
