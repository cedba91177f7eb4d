"""Ouster OS1-64 packets read back by ouster-sdk (PyPI), a decoder this project did not write:
every decoded pixel is our primary return within the format's 1 mm range step, none is missing
or added, and each column's time is its firing time.

ouster-sdk pins rosbags==0.9.23, which conflicts with ours, so it lives in a venv of its own
(``.ci/run`` makes ``.venv-ouster``; ``ACRES_OUSTER_PYTHON`` names another python) and
``ouster_decode.py`` runs there; the test is skipped where that python is absent.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from packet_scans import scans_of

from acres_lidar_ros.errors import OutputError
from acres_lidar_ros.packets.formats import PcapRecorder, default_addresses, packet_encoder
from acres_lidar_ros.packets.ouster import LIDAR_PACKET, LIDAR_PORT

HERE = Path(__file__).resolve().parent
OUSTER_PYTHON = Path(os.environ.get("ACRES_OUSTER_PYTHON", HERE.parents[1] / ".venv-ouster" / "bin" / "python"))
RANGE_TOLERANCE_M = 0.0005 + 1e-5  # half the 1 mm step, plus the metadata's 1e-6 deg angles at 10 m


def _record(directory: Path):
    config, scans = scans_of("os1_64")
    with PcapRecorder(directory / "packets.pcap", packet_encoder("os1_64", config), default_addresses("os1_64")) as r:
        counts = [r.write_scan(scan) for scan in scans]
    return config, scans, counts


def test_packets_and_metadata_layout(tmp_path):
    config, scans, counts = _record(tmp_path)
    assert counts == [64, 64, 64]  # 1024 columns, 16 a packet
    metadata = json.loads((tmp_path / "sensor_metadata.json").read_text())
    fmt = metadata["lidar_data_format"]
    assert (fmt["columns_per_frame"], fmt["columns_per_packet"], fmt["pixels_per_column"]) == (1024, 16, 64)
    assert fmt["udp_profile_lidar"] == "LEGACY" and metadata["config_params"]["lidar_mode"] == "1024x10"
    assert metadata["config_params"]["udp_port_lidar"] == LIDAR_PORT == 7502
    # The SDK's default gen-1 OS1-64 tables (docs/sensors.md): 3.164, 1.055, -1.055, -3.164 deg.
    assert metadata["beam_intrinsics"]["beam_azimuth_angles"][:4] == [3.164, 1.055, -1.055, -3.164]
    assert metadata["beam_intrinsics"]["lidar_origin_to_beam_origin_mm"] == pytest.approx(15.806)
    assert fmt["pixel_shift_by_row"][:4] == [18, 12, 6, 0]  # 6.328 deg x 1024 / 360, ...
    # Each frame: an Ethernet + IPv4 + UDP header, then a 12608-byte payload.
    size = (tmp_path / "packets.pcap").stat().st_size
    assert size == 24 + 3 * 64 * (16 + 14 + 20 + 8 + LIDAR_PACKET.itemsize)


def test_existing_metadata_is_refused(tmp_path):
    (tmp_path / "sensor_metadata.json").write_text("{}")
    with pytest.raises(OutputError, match="sensor_metadata.json exists"):
        _record(tmp_path)
    assert not (tmp_path / "packets.pcap").exists()


@pytest.mark.skipif(
    not OUSTER_PYTHON.exists(),
    reason=f"no ouster-sdk python at {OUSTER_PYTHON} (.ci/run makes .venv-ouster; or set ACRES_OUSTER_PYTHON)",
)
def test_ouster_sdk_gives_our_points(tmp_path):
    config, scans, _ = _record(tmp_path)
    out = tmp_path / "decoded.npz"
    done = subprocess.run(
        [str(OUSTER_PYTHON), str(HERE / "ouster_decode.py"), str(tmp_path / "packets.pcap")]
        + [str(tmp_path / "sensor_metadata.json"), str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    decoded = np.load(out)
    assert decoded["range_mm"].shape == (len(scans), 64, 1024)
    assert list(decoded["frame_id"]) == [scan.index for scan in scans]
    total = 0
    for k, scan in enumerate(scans):
        returns = scan.returns
        beams = np.arange(scan.columns * scan.rings)
        slot = returns.primary_index()
        valid = returns.valid[beams, slot]

        def grid(values, scan=scan):
            """(cells,) in cell order (column-major) -> (rings, columns) as the decoder gives it."""
            return values.reshape(scan.columns, scan.rings).T

        assert np.array_equal(decoded["measurement_id"][k], np.arange(1024))
        column_ns = scan.stamp_ns + np.rint(scan.time_offset_s * 1e9).astype(np.int64)
        assert np.abs(decoded["timestamp_ns"][k].astype(np.int64) - column_ns).max() <= 1000  # 1 us
        has = decoded["range_mm"][k] > 0
        assert np.array_equal(has, grid(valid))
        total += int(has.sum())
        ours = scan.points_sensor[beams, slot].reshape(scan.columns, scan.rings, 3).transpose(1, 0, 2)
        error = np.linalg.norm(decoded["xyz"][k] - ours, axis=2)[has]
        assert error.max() <= RANGE_TOLERANCE_M
        assert np.array_equal(decoded["reflectivity"][k][has], grid(returns.intensity[beams, slot])[has])
        assert np.array_equal(decoded["signal"][k][has], grid(returns.signal[beams, slot])[has])
    primary = [s.returns.valid[np.arange(s.returns.valid.shape[0]), s.returns.primary_index()] for s in scans]
    assert total == sum(int(v.sum()) for v in primary) > 10_000
