"""Velodyne VLP-16 and HDL-32E packets read back by velodyne-decoder (PyPI), a decoder this project
did not write: every decoded point is one of our returns, within the format's steps, and none is
missing. The pcap's framing is read by dpkt (velodyne-decoder's own pcap reader)."""

from __future__ import annotations

import numpy as np
import pytest
from packet_scans import our_returns, scans_of

from acres_lidar_ros.packets.formats import PcapRecorder, default_addresses, packet_encoder
from acres_lidar_ros.packets.velodyne import DATA_PORT, POSITION_PORT, VLP16
from acres_lidar_ros.sensor.emitters import FiringPattern

vd = pytest.importorskip("velodyne_decoder", reason="velodyne-decoder (pip install velodyne-decoder) reads the packets")
dpkt = pytest.importorskip("dpkt", reason="dpkt comes with velodyne-decoder")

#: Azimuth: our block azimuth is rounded to 0.01 deg (0.005), velodyne-decoder rounds its
#: interpolated azimuth again (0.005) and takes the head's rate from two rounded azimuths (0.01)
#: 5 block pairs (dual) or 11 blocks apart, applied over at most 90 us of a 553 us span.
AZIMUTH_TOLERANCE_DEG = 0.005 + 0.005 + 0.01 * 90 / 553
RANGE_TOLERANCE_M = 0.001 + 1e-5  # half the 2 mm step, plus float32


def _calibration(config) -> object:
    """The sensors file's lasers as a velodyne-decoder calibration (elevation, vertical offset)."""
    cells = FiringPattern.from_config(config).cells(0)
    lines = [f"num_lasers: {cells.elevation_rad.shape[1]}", "distance_resolution: 0.002", "lasers:"]
    for laser, (elevation, origin) in enumerate(zip(cells.elevation_rad[0], cells.origin_sensor_m[0])):
        lines += [
            f"  - laser_id: {laser}",
            "    rot_correction: 0.0",
            f"    vert_correction: {float(elevation)!r}",
            f"    vert_offset_correction: {float(origin[2])!r}",
        ]
    return vd.Calibration.from_string("\n".join(lines) + "\n")


def _write(tmp_path, sensor, return_mode=None):
    config, scans = scans_of(sensor, return_mode)
    path = tmp_path / "packets.pcap"
    with PcapRecorder(path, packet_encoder(sensor, config), default_addresses(sensor)) as recorder:
        for scan in scans:
            recorder.write_scan(scan)
    return config, scans, path


@pytest.mark.parametrize(
    "sensor, return_mode",
    [("vlp16", None), ("vlp16", "strongest"), ("hdl32e", None), ("hdl32e", "last")],
)
def test_velodyne_decoder_gives_our_points(tmp_path, sensor, return_mode):
    config, scans, path = _write(tmp_path, sensor, return_mode)
    model = vd.Model.VLP16 if sensor == "vlp16" else vd.Model.HDL32E
    decoder_config = vd.Config(model=model, calibration=_calibration(config))
    decoder_config.min_range, decoder_config.max_range = 0.0, 1000.0
    clouds = list(vd.read_pcap(str(path), decoder_config))
    decoded = np.concatenate([cloud for _, cloud in clouds])
    times = np.concatenate([cloud[:, vd.PointField.time].astype(np.float64) + stamp.device for stamp, cloud in clouds])
    ours = our_returns(scans)
    assert decoded.shape[0] == ours["cell"].size > 10_000

    # Each decoded point's firing: the cell of its laser with the nearest firing time.
    pattern = FiringPattern.from_config(config)
    lasers = pattern.emitters
    elevation = pattern.cells(0).elevation_rad[0]
    laser_of_ring = np.argsort(elevation, kind="stable")
    laser = laser_of_ring[decoded[:, vd.PointField.ring].astype(int)]
    cell_time = np.concatenate([s.stamp_ns * 1e-9 + s.cell_time_offset_s for s in scans])
    cell_laser = np.tile(np.arange(lasers), len(scans) * pattern.ticks)
    key = cell_laser * 1e4 + cell_time
    order = np.argsort(key)
    query = laser * 1e4 + times
    at = np.clip(np.searchsorted(key[order], query), 1, order.size - 1)
    nearer = np.where(np.abs(key[order][at] - query) < np.abs(key[order][at - 1] - query), at, at - 1)
    decoded_cell = order[nearer]
    our_cell = ours["scan"] * pattern.ticks * lasers + ours["cell"]
    origin = np.tile(pattern.cells(0).origin_sensor_m[0], (len(scans) * pattern.ticks, 1))

    mine = np.lexsort((ours["range_m"], our_cell))
    theirs = np.lexsort((np.linalg.norm(decoded[:, :3] - origin[decoded_cell], axis=1), decoded_cell))
    assert np.array_equal(our_cell[mine], decoded_cell[theirs])  # the same returns, one for one
    ours_v = ours["xyz"][mine] - origin[our_cell[mine]]
    theirs_v = decoded[theirs, :3].astype(np.float64) - origin[decoded_cell[theirs]]
    range_ours, range_theirs = np.linalg.norm(ours_v, axis=1), np.linalg.norm(theirs_v, axis=1)
    assert np.abs(range_theirs - range_ours).max() <= RANGE_TOLERANCE_M + 1e-6 * range_ours.max()
    azimuth_error = np.degrees(
        np.angle(np.exp(1j * (np.arctan2(theirs_v[:, 1], theirs_v[:, 0]) - np.arctan2(ours_v[:, 1], ours_v[:, 0]))))
    )
    assert np.abs(azimuth_error).max() <= AZIMUTH_TOLERANCE_DEG
    elevation_error = np.degrees(np.arcsin(theirs_v[:, 2] / range_theirs) - np.arcsin(ours_v[:, 2] / range_ours))
    assert np.abs(elevation_error).max() < 1e-4
    assert np.abs(times[theirs] - ours["time_s"][mine]).max() < 1e-6  # microsecond timestamps
    assert np.array_equal(decoded[theirs, vd.PointField.intensity].astype(int), ours["intensity"][mine])


def test_pcap_frames_and_position_packets(tmp_path):
    config, scans, path = _write(tmp_path, "vlp16")
    with open(path, "rb") as handle:
        records = list(dpkt.pcap.Reader(handle))
    ports, sizes, stamps, positions = [], [], [], []
    for stamp, frame in records:
        ip = dpkt.ethernet.Ethernet(frame).data
        assert isinstance(ip, dpkt.ip.IP) and ip.len == len(frame) - 14
        assert dpkt.in_cksum(bytes(frame[14:34])) == 0  # a valid IPv4 header checksum
        assert (ip.src, ip.dst) == (bytes([192, 168, 1, 201]), bytes([192, 168, 1, 100]))
        udp = ip.data
        ports.append(udp.dport)
        sizes.append(len(udp.data))
        stamps.append(stamp)
        if udp.dport == POSITION_PORT:
            positions.append((stamp, vd.TelemetryPacket(bytes(udp.data))))
    assert np.all(np.diff(stamps) >= 0)  # capture times in send order
    data = np.array(ports) == DATA_PORT
    assert set(ports) == {DATA_PORT, POSITION_PORT}
    assert set(np.array(sizes)[data]) == {1206} and set(np.array(sizes)[~data]) == {512}
    # Dual return (the file's mode): 12 firing sequences a packet; 1809 of them give 151 packets a scan,
    # the last one holding 9.
    assert config.return_mode == "dual_strongest_last" and data.sum() == 3 * 151
    packet_s = 12 * VLP16.sequence_s
    assert len(positions) == pytest.approx(3 * config.period_s / (14 * packet_s), abs=1)
    for stamp, telemetry in positions:
        assert telemetry.usec_since_toh == round(stamp * 1e6) % 3_600_000_000
        assert telemetry.nmea_sentence == ""  # no GPS attached


def test_a_sensor_file_with_another_pattern_is_refused(tmp_path):
    from acres_lidar_ros.errors import ConfigError

    config, _ = scans_of("vlp16", count=1)
    other = config.with_overrides({"emitters": None, "rings": 16, "columns": 1800})
    with pytest.raises(ConfigError, match="VLP-16 packet needs 16 lasers fired 2.304 us apart"):
        packet_encoder("vlp16", other)
