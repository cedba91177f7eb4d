"""atomic_write: all or nothing, synced before it is named, never over an existing file unless asked."""

from __future__ import annotations

import os
import stat

import pytest

from acres_lidar_ros.errors import OutputError
from acres_lidar_ros.outputs.files import atomic_write, scan_file_stem


def test_writes_bytes(tmp_path):
    path = atomic_write(tmp_path / "a.bin", b"\x00\x01abc")
    assert path.read_bytes() == b"\x00\x01abc"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.bin"]


def test_writes_through_a_callback(tmp_path):
    atomic_write(tmp_path / "b.txt", lambda handle: (handle.write(b"one\n"), handle.write(b"two\n")))
    assert (tmp_path / "b.txt").read_text() == "one\ntwo\n"


def test_refuses_to_overwrite_and_names_the_path(tmp_path):
    target = tmp_path / "scan.pcd"
    target.write_bytes(b"old")
    with pytest.raises(OutputError, match="scan.pcd.*exists"):
        atomic_write(target, b"new")
    assert target.read_bytes() == b"old"


@pytest.mark.parametrize("error", [RuntimeError("disk on fire"), KeyboardInterrupt()])
def test_error_midway_leaves_no_file(tmp_path, error):
    def half_then_fail(handle):
        handle.write(b"half of a file")
        raise error

    with pytest.raises(type(error)):
        atomic_write(tmp_path / "c.ply", half_then_fail)
    assert list(tmp_path.iterdir()) == []


def test_missing_directory_is_named(tmp_path):
    with pytest.raises(OutputError, match="nowhere"):
        atomic_write(tmp_path / "nowhere" / "d.bin", b"x")


def test_scan_file_stem_is_the_stamp_in_microseconds():
    assert scan_file_stem(1_700_000_123_456_789_012) == "scan_1700000123456789"
    with pytest.raises(OutputError, match="-5"):
        scan_file_stem(-5)


def test_overwrite_replaces_whole_and_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "table.f32"
    target.write_bytes(b"old")
    assert atomic_write(target, b"new bytes", overwrite=True) == target
    assert target.read_bytes() == b"new bytes"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["table.f32"]


def test_a_failed_overwrite_keeps_the_old_file(tmp_path):
    target = tmp_path / "table.f32"
    target.write_bytes(b"old")

    def fail(handle):
        handle.write(b"half")
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError):
        atomic_write(target, fail, overwrite=True)
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["table.f32"]


@pytest.mark.parametrize("overwrite", [False, True])
def test_the_bytes_are_synced_before_the_name_appears(tmp_path, monkeypatch, overwrite):
    """A power cut after the rename must not leave a named but empty file: fsync comes first."""
    target = tmp_path / "scan.pcd"
    if overwrite:
        target.write_bytes(b"old")
    seen = []
    real_fsync = os.fsync

    def fsync(fd):
        if stat.S_ISREG(os.fstat(fd).st_mode):
            seen.append((os.fstat(fd).st_size, target.read_bytes() if target.exists() else None))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    atomic_write(target, b"0123456789", overwrite=overwrite)
    assert seen == [(10, b"old" if overwrite else None)]
    assert target.read_bytes() == b"0123456789"
