"""A scan's files in the session folder: names, modes, and the row after the files."""

from __future__ import annotations

import json

import pytest
from test_outputs_synthetic import PERIOD_S, STAMP_NS, make_scan

from acres_lidar_ros.errors import ConfigError, OutputError
from acres_lidar_ros.outputs.pcd import read_pcd
from acres_lidar_ros.outputs.ply import read_ply
from acres_lidar_ros.outputs.scan_files import write_scan_files

STEM = f"scan_{STAMP_NS // 1000}"


@pytest.mark.parametrize(("output", "suffixes"), [("ply", [".ply"]), ("pcd", [".pcd"]), ("both", [".ply", ".pcd"])])
def test_files_and_row_per_output_mode(tmp_path, output, suffixes):
    scan = make_scan(seed=50)
    row = write_scan_files(tmp_path, scan, output, delay_s=0.012, period_s=PERIOD_S)
    expected = [f"lidar/{STEM}{suffix}" for suffix in suffixes] + [f"lidar/{STEM}.png"]
    assert row["files"] == expected
    assert sorted(p.name for p in (tmp_path / "lidar").iterdir()) == sorted(name.split("/")[1] for name in expected)
    (line,) = (tmp_path / "lidar.jsonl").read_text().splitlines()
    assert json.loads(line) == row
    if ".ply" in suffixes:
        assert len(read_ply(tmp_path / expected[0])) == int(scan.returns.valid.sum())
    if ".pcd" in suffixes:
        assert read_pcd(tmp_path / f"lidar/{STEM}.pcd").shape == (scan.columns, scan.rings)


def test_no_row_when_a_file_of_the_scan_exists(tmp_path):
    scan = make_scan(seed=51)
    write_scan_files(tmp_path, scan, "ply", delay_s=0.0, period_s=PERIOD_S, preview=False)
    with pytest.raises(OutputError, match=rf"{STEM}\.ply"):
        write_scan_files(tmp_path, scan, "ply", delay_s=0.0, period_s=PERIOD_S, preview=False)
    assert len((tmp_path / "lidar.jsonl").read_text().splitlines()) == 1


def test_bad_mode_and_missing_session(tmp_path):
    with pytest.raises(ConfigError, match="ply, pcd, both"):
        write_scan_files(tmp_path, make_scan(), "las", delay_s=0.0, period_s=PERIOD_S)
    with pytest.raises(OutputError, match="missing"):
        write_scan_files(tmp_path / "missing", make_scan(), "ply", delay_s=0.0, period_s=PERIOD_S)
