"""RS-Helios MSOP/DIFOP packets read back by a reader written from the format's description
(``helios_reader``: rs_driver's documented arithmetic on the bytes): every return of our scans
comes back, at its cell, within the format's steps, at its firing time."""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import numpy as np
import pytest
from helios_reader import decode
from packet_scans import our_returns, scans_of

from acres_lidar_ros.packets.formats import PcapRecorder, default_addresses, packet_encoder

RANGE_STEP_M = 0.0025
#: Direction: the block azimuth and the horizontal table entry are each rounded to 0.01 deg.
ANGLE_TOLERANCE_RAD = np.radians(0.005 + 0.005) + 1e-9
#: rs_driver's lens point is on the channel's interpolated azimuth, ours on the block's: at most
#: 3.498 cm x 0.19 deg apart.
LENS_TOLERANCE_M = 0.03498 * np.radians(0.19)


def _record(tmp_path, sensor, return_mode=None):
    config, scans = scans_of(sensor, return_mode)
    path = tmp_path / "packets.pcap"
    with PcapRecorder(path, packet_encoder(sensor, config), default_addresses(sensor)) as recorder:
        for scan in scans:
            recorder.write_scan(scan)
    return config, scans, path


def _matched(scans, points):
    """Our returns and the decoded ones, both sorted by (scan, cell, range)."""
    ours = our_returns(scans)
    their_cell = points.column * 32 + points.channel
    mine = np.lexsort((ours["range_m"], ours["cell"], ours["scan"]))
    theirs = np.lexsort((points.distance_m, their_cell, points.frame))
    assert np.array_equal(ours["scan"][mine], points.frame[theirs])
    assert np.array_equal(ours["cell"][mine], their_cell[theirs])
    return ours, mine, theirs


@pytest.mark.parametrize("return_mode", [None, "dual_strongest_last"])
def test_the_reader_gives_our_points_at_their_firing_times(tmp_path, return_mode):
    config, scans, path = _record(tmp_path, "helios5515", return_mode)
    points, info = decode(path)
    assert info["rpm"] == 600 and info["return_mode"] == (0x00 if return_mode else 0x04)
    ours = our_returns(scans)
    assert points.distance_m.size == ours["cell"].size > 50_000  # same count: no point lost or added
    ours, mine, theirs = _matched(scans, points)
    range_m = ours["range_m"][mine]
    assert np.abs(points.distance_m[theirs] - range_m).max() <= RANGE_STEP_M / 2 + 1e-9
    error_m = np.linalg.norm(points.xyz[theirs] - ours["xyz"][mine], axis=1)
    bound_m = RANGE_STEP_M / 2 + LENS_TOLERANCE_M + range_m * ANGLE_TOLERANCE_RAD
    assert np.all(error_m <= bound_m)
    assert np.abs(points.time_s[theirs] - ours["time_s"][mine]).max() < 1e-6
    assert np.array_equal(points.intensity[theirs], ours["intensity"][mine])


def test_difop_comes_first_and_then_each_second(tmp_path):
    _, scans, path = _record(tmp_path, "helios5515")
    points, info = decode(path)  # the reader asserts the first packet is a DIFOP
    # The sweeps cover [3600.9 s, 3601.2 s): the first DIFOP, then the one of the whole second 3601.
    assert info["difops"] == 2
    config, _ = scans_of("helios5515")
    from acres_lidar_ros.sensor.emitters import FiringPattern

    cells = FiringPattern.from_config(config).cells(0)
    assert np.array_equal(info["vertical"], np.rint(np.degrees(cells.elevation_rad[0]) * 100).astype(int))


def test_the_polaris_sends_helios_packets_with_the_helios_channel_times(tmp_path):
    """The Polaris fires a column's rings together (spec); its packets are a Helios's, whose decoders
    put channel c at 1.73 us x c after the block: the directions are ours, the times that much later."""
    config, scans, path = _record(tmp_path, "polaris")
    points, _ = decode(path)
    ours, mine, theirs = _matched(scans, points)
    range_m = ours["range_m"][mine]
    error_m = np.linalg.norm(points.xyz[theirs] - ours["xyz"][mine], axis=1)
    assert np.all(error_m <= RANGE_STEP_M / 2 + LENS_TOLERANCE_M + 0.00003 + range_m * ANGLE_TOLERANCE_RAD)
    late_s = points.time_s[theirs] - ours["time_s"][mine]
    assert np.abs(late_s - 1.73e-6 * points.channel[theirs]).max() < 1e-6


@pytest.mark.parametrize(
    "sensor, return_mode", [("helios5515", None), ("polaris", None), ("helios5515", "dual_strongest_last")]
)
def test_rs_driver_pcdsaver_gives_our_points(tmp_path, sensor, return_mode):
    """rs_driver's own tool (``rs_driver_pcdsaver -type RSHELIOS``: dense points) on our pcap, where
    ACRES_RS_DRIVER_PCDSAVER names a built one: each cloud it saves is a scan's returns, in our order."""
    tool = os.environ.get("ACRES_RS_DRIVER_PCDSAVER")
    if not tool or shutil.which(tool) is None:
        pytest.skip("set ACRES_RS_DRIVER_PCDSAVER to a built rs_driver_pcdsaver (docs/packets.md) to run rs_driver")
    _, scans, path = _record(tmp_path, sensor, return_mode)
    out = tmp_path / "clouds"
    out.mkdir()
    # The tool replays at the sensor's rate and never exits: wait for the clouds, then stop it.
    tool_process = subprocess.Popen(
        [tool, "-pcap", str(path), "-type", "RSHELIOS"], cwd=out, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        wanted = [out / f"{k}.pcd" for k in range(len(scans) - 1)]  # the last frame stays buffered
        deadline = time.monotonic() + 30.0
        while not all(_whole_pcd(p) for p in wanted) and time.monotonic() < deadline and tool_process.poll() is None:
            time.sleep(0.2)
    finally:
        tool_process.kill()
        tool_process.wait(timeout=10)
    for k, pcd in enumerate(wanted):
        assert pcd.exists(), f"rs_driver_pcdsaver wrote no {pcd.name}"
        fields = _pcd_fields(pcd)
        cloud = np.loadtxt(pcd, skiprows=11, ndmin=2)  # ASCII x y z intensity [ring timestamp]
        scan = scans[k]
        valid = scan.returns.valid
        cells = np.nonzero(valid)[0]
        ours = scan.points_sensor[valid]
        range_m = scan.returns.range_m[valid]
        intensity = scan.returns.intensity[valid]
        if return_mode is not None:  # rs_driver emits both blocks of a pair: a single return twice
            cells, ours, range_m, intensity = _as_pairs(scan)
        assert cloud.shape[0] == ours.shape[0]
        error_m = np.linalg.norm(cloud[:, :3] - ours, axis=1)
        print_step = 1e-5 * np.abs(ours).max(axis=1)  # six significant digits in the file
        assert np.all(error_m <= RANGE_STEP_M / 2 + LENS_TOLERANCE_M + range_m * ANGLE_TOLERANCE_RAD + 2 * print_step)
        assert np.array_equal(cloud[:, 3].astype(int), intensity)
        if "timestamp" in fields:  # a build of the tool with PointXYZIRT and use_lidar_clock (docs/packets.md)
            firing_s = scan.stamp_ns * 1e-9 + scan.cell_time_offset_s[cells]
            if sensor == "polaris":  # decoded at the Helios's channel times (see the test above)
                firing_s = firing_s + 1.73e-6 * (cells % scan.rings)
            assert np.abs(cloud[:, fields.index("timestamp")] - firing_s).max() < 1e-6


def _pcd_fields(path) -> list[str]:
    """The names on an ASCII PCD's FIELDS line."""
    with open(path) as stream:
        for line in stream:
            if line.startswith("FIELDS"):
                return line.split()[1:]
    return []


def _whole_pcd(path) -> bool:
    """Whether the tool has finished writing the ASCII PCD at ``path`` (its POINTS lines are all there)."""
    if not path.exists():
        return False
    lines = path.read_text().splitlines()
    points = [int(line.split()[1]) for line in lines[:11] if line.startswith("POINTS")]
    fields = [line.split()[1:] for line in lines[:11] if line.startswith("FIELDS")]
    return bool(points and fields) and len(lines) == 11 + points[0] and len(lines[-1].split()) == len(fields[0])


def _as_pairs(scan):
    """Our dual returns as the packet's block pairs give them to rs_driver: per column, the
    channels' first returns, then their last (the first again where a beam has one): cells, points,
    ranges, intensities."""
    returns = scan.returns
    n = scan.columns * scan.rings
    last = np.maximum(returns.num_returns.astype(np.int64) - 1, 0)
    slots = np.stack([np.zeros(n, np.int64), last], axis=1).reshape(scan.columns, scan.rings, 2)
    slots = slots.transpose(0, 2, 1).reshape(-1)
    cells = np.repeat(np.arange(scan.columns), 2 * scan.rings) * scan.rings + np.tile(
        np.arange(scan.rings), 2 * scan.columns
    )
    keep = returns.valid[cells, slots]
    cells, slots = cells[keep], slots[keep]
    return cells, scan.points_sensor[cells, slots], returns.range_m[cells, slots], returns.intensity[cells, slots]
