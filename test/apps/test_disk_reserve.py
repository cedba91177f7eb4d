"""``DiskReserve`` with the free space given (``shutil.disk_usage`` patched): the recorder's
self-stop before a full disk runs here without a tmpfs (the tmpfs tests of
``test_apps_crash_safety.py`` need root with mount rights)."""

from __future__ import annotations

from collections import namedtuple

import pytest

from acres_lidar_ros.apps import disk_reserve
from acres_lidar_ros.apps.disk_reserve import DiskReserve, scan_bytes

MIB = 1 << 20
Usage = namedtuple("Usage", "total used free")


def test_a_scan_is_estimated_from_its_layout_and_files():
    # 57,600 beams of 16-byte XYZI: the bag's cloud, + 16 bytes a beam for the PCD, + 31 bytes a
    # return (3 a beam) for the PLY, + 1 MiB for the preview, odometry and row.
    assert scan_bytes(57_600, 16, "none") == 57_600 * 16 + MIB
    assert scan_bytes(57_600, 16, "pcd") == 57_600 * 32 + MIB
    assert scan_bytes(57_600, 16, "both") == 57_600 * (32 + 93) + MIB


@pytest.mark.parametrize("free_offset, stops", [(0, False), (-1, True)])
def test_the_run_stops_when_the_free_space_is_one_byte_short(tmp_path, monkeypatch, free_offset, stops):
    reserve = DiskReserve(tmp_path, first_scan_bytes=3 * MIB)
    reserve.note_scan(2 * MIB)
    reserve.note_scan(5 * MIB)  # the largest scan so far sets the room a scan in flight needs
    reserve.note_scan(4 * MIB)
    # 2 scans in flight, 40 scans written, 2,000 trajectory samples:
    needed = 2 * 5 * MIB + (MIB + 256 * (40 + 2) + 128 * 2_000)
    assert reserve.needed_bytes(2, 40, 2_000) == needed
    seen = []

    def usage(path):
        seen.append(path)
        return Usage(100 * MIB, 0, needed + free_offset)

    monkeypatch.setattr(disk_reserve.shutil, "disk_usage", usage)
    message = reserve.shortage(2, 40, 2_000)
    assert seen == [tmp_path]
    if not stops:
        assert message is None
    else:
        assert message is not None
        assert f"{(needed - 1) / MIB:.1f} MiB free under {tmp_path}" in message
        assert f"{needed / MIB:.1f} MiB are needed" in message and "stopped after 40 scans" in message


def test_before_any_scan_the_estimate_is_the_room_a_scan_needs(tmp_path, monkeypatch):
    reserve = DiskReserve(tmp_path, first_scan_bytes=3 * MIB)
    assert reserve.needed_bytes(1, 0, 0) == 3 * MIB + MIB + 256
    monkeypatch.setattr(disk_reserve.shutil, "disk_usage", lambda path: Usage(0, 0, 4 * MIB))
    assert reserve.shortage(1, 0, 0) is not None
