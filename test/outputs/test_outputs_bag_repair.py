"""Bags cut at any byte (a kill, a power cut, a full disk) come back with every flushed message."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from mcap.reader import make_reader
from rosbags.rosbag2 import Reader
from test_outputs_synthetic import STAMP_NS, make_scan

from acres_lidar_ros.apps.cmd_bag_repair import remove_temporary_files, repair_run
from acres_lidar_ros.errors import OutputError
from acres_lidar_ros.outputs.bag import BagWriter
from acres_lidar_ros.outputs.bag_repair import bag_is_readable, repair_bag
from acres_lidar_ros.outputs.files import atomic_write
from acres_lidar_ros.outputs.json_files import trim_jsonl

N_SCANS = 6
PERIOD_NS = 100_000_000


def _write_flushed_bag(path):
    """A bag of N_SCANS clouds, each with odometry, flushed after each cloud.

    Returns the bag, its MCAP bytes, and per scan (file size after its flush, {topic: count} so far).
    """
    flushed = []
    counts = {"/tf_static": 0, "/clock": 0, "/tf": 0, "/odom": 0, "/lidar/points": 0}
    with BagWriter(path / "bag") as bag:
        bag.write_static_mount(STAMP_NS, (2.5, 0.0, 2.0), (0.0, 0.0, 0.0, 1.0))
        counts["/tf_static"] += 1
        for k in range(N_SCANS):
            stamp_ns = STAMP_NS + k * PERIOD_NS
            for j in range(3):
                bag.write_clock(stamp_ns - (3 - j) * 10_000_000)
                bag.write_base_pose(stamp_ns, (k, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0), (1.0, 0.0, 0.0), (0.0, 0.0, 0.0))
            counts["/clock"] += 3
            counts["/tf"] += 3
            counts["/odom"] += 3
            bag.write_scan(make_scan(seed=k, stamp_ns=stamp_ns))
            counts["/lidar/points"] += 1
            bag.flush()
            flushed.append(((path / "bag" / "bag.mcap").stat().st_size, dict(counts)))
        bag.write_clock(STAMP_NS + N_SCANS * PERIOD_NS)  # after the last flush: may be lost
    data = (path / "bag" / "bag.mcap").read_bytes()
    return path / "bag", data, flushed


def _messages_rosbags(bag):
    with Reader(bag) as reader:
        return [(c.topic, t, hashlib.sha1(raw).hexdigest()) for c, t, raw in reader.messages()]


def _messages_mcap(bag):
    with open(bag / "bag.mcap", "rb") as handle:
        reader = make_reader(handle)
        assert reader.get_summary() is not None
        return [(ch.topic, m.log_time, hashlib.sha1(m.data).hexdigest()) for _, ch, m in reader.iter_messages()]


def _counts(messages):
    out = {}
    for topic, _, _ in messages:
        out[topic] = out.get(topic, 0) + 1
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    path = tmp_path_factory.mktemp("reference")
    bag, data, flushed = _write_flushed_bag(path)
    return data, flushed, _messages_rosbags(bag)


def _cut_bag(tmp_path, data, cut, tail=b""):
    bag = tmp_path / "run" / "bag"
    bag.mkdir(parents=True)
    (bag / "bag.mcap").write_bytes(data[:cut] + tail)
    return bag


def _expected_after_cut(flushed, cut):
    """Topic counts of the messages flushed before byte ``cut`` (the independent expectation)."""
    done = [counts for size, counts in flushed if size <= cut]
    return {t: n for t, n in done[-1].items() if n} if done else {}


def _check_cut(got, messages, flushed, cut):
    """Every message flushed before ``cut`` is back, in order and byte for byte; past the last flush
    only the final /clock may come back too (it lies in the chunk the close wrote)."""
    assert got == messages[: len(got)]
    expected = _expected_after_cut(flushed, cut)
    if cut < flushed[-1][0]:
        assert _counts(got) == expected
    else:
        assert _counts(got) in (expected, _counts(messages))


def test_a_finished_bag_is_left_as_it_is(tmp_path, reference):
    data, _, messages = reference
    bag = _cut_bag(tmp_path, data, len(data))
    assert not bag_is_readable(bag)[0]  # no metadata.yaml yet: rebuilt from the complete file
    result = repair_bag(bag)
    assert result.repaired and result.dropped_bytes == 0
    assert _messages_rosbags(bag) == messages == _messages_mcap(bag)
    before = (bag / "bag.mcap").read_bytes(), (bag / "metadata.yaml").read_bytes()
    again = repair_bag(bag)
    assert not again.repaired and again.message_counts == _counts(messages)
    assert ((bag / "bag.mcap").read_bytes(), (bag / "metadata.yaml").read_bytes()) == before


@pytest.mark.parametrize("where", ["header", "first_chunk", "between", "mid_chunk", "summary", "footer"])
def test_a_cut_bag_keeps_every_flushed_message(tmp_path, reference, where):
    data, flushed, messages = reference
    sizes = [size for size, _ in flushed]
    cut = {
        "header": 5,
        "first_chunk": sizes[0] // 2,
        "between": sizes[2],
        "mid_chunk": (sizes[3] + sizes[4]) // 2,
        "summary": (sizes[-1] + len(data)) // 2,
        "footer": len(data) - 3,
    }[where]
    bag = _cut_bag(tmp_path, data, cut)
    result = repair_run(tmp_path / "run")
    got_rosbags = _messages_rosbags(bag)
    _check_cut(got_rosbags, messages, flushed, cut)
    assert got_rosbags == _messages_mcap(bag)
    assert any("rebuilt" in line for line in result)
    assert not list((tmp_path / "run").rglob("*.repair")) and not list((tmp_path / "run").rglob("*.tmp"))


def test_random_cuts_and_a_zero_tail(tmp_path, reference):
    data, flushed, messages = reference
    rng = np.random.default_rng(11)
    for trial, cut in enumerate(rng.integers(0, len(data), size=8)):
        tail = b"\0" * int(rng.integers(0, 5000)) if trial % 2 else b""  # a power cut's tail of zeros
        run = tmp_path / f"t{trial}"
        bag = run / "bag"
        bag.mkdir(parents=True)
        (bag / "bag.mcap").write_bytes(data[: int(cut)] + tail)
        repair_run(run)
        _check_cut(_messages_rosbags(bag), messages, flushed, int(cut))


def test_repair_refuses_without_room_and_names_the_space(tmp_path, reference, monkeypatch):
    data, _, _ = reference
    bag = _cut_bag(tmp_path, data, len(data) // 2)
    usage = shutil.disk_usage(bag)
    monkeypatch.setattr(shutil, "disk_usage", lambda _path: usage._replace(free=1000))
    with pytest.raises(OutputError, match=r"needs about .* MiB free .* 0\.0 MiB are free"):
        repair_bag(bag)
    assert (bag / "bag.mcap").read_bytes() == data[: len(data) // 2]  # untouched


def test_repair_names_what_is_not_a_bag(tmp_path):
    with pytest.raises(OutputError, match="not a directory"):
        repair_run(tmp_path / "missing")
    with pytest.raises(OutputError, match="no bag found"):
        repair_run(tmp_path)


def test_trim_jsonl_cuts_back_to_the_last_complete_row(tmp_path):
    path = tmp_path / "lidar.jsonl"
    rows = [json.dumps({"scan_index": k, "stamp_ns": k * 100}) + "\n" for k in range(4)]
    whole = "".join(rows).encode()
    path.write_bytes(whole)
    assert trim_jsonl(path) == 0 and path.read_bytes() == whole
    for tail in (b'{"scan_index": 4, "sta', b"\0" * 300, b'{"scan_index": 4}\n\0\0\0', b"[1, 2]\n"):
        path.write_bytes(whole + tail)
        good = whole + (b'{"scan_index": 4}\n' if tail.startswith(b'{"scan_index": 4}\n') else b"")
        assert trim_jsonl(path) == len(whole) + len(tail) - len(good)
        assert path.read_bytes() == good


def test_stray_temporary_files_are_removed_and_outputs_kept(tmp_path):
    (tmp_path / "lidar").mkdir()
    (tmp_path / "bag").mkdir()
    keep = [tmp_path / "lidar" / "scan_1.pcd", tmp_path / "lidar.jsonl", tmp_path / "bag" / "bag.mcap"]
    stray = [tmp_path / "lidar" / ".scan_1.pcd.ab12cd.tmp", tmp_path / "bag" / "metadata.yaml.tmp"]
    for path in keep + stray:
        path.write_bytes(b"x")
    (tmp_path / ".bag.repair").mkdir()
    removed = remove_temporary_files(tmp_path)
    assert sorted(removed) == sorted([*stray, tmp_path / ".bag.repair"])
    assert all(path.exists() for path in keep)


def test_atomic_write_killed_midway_leaves_no_file(tmp_path):
    """A writer SIGKILLed in the middle of a file leaves neither the file nor a temporary one."""
    script = textwrap.dedent(
        f"""
        import sys, time
        from acres_lidar_ros.outputs.files import atomic_write
        def slow(handle):
            handle.write(b"x" * 100000)
            handle.flush()
            print("writing", flush=True)
            time.sleep(60)
        atomic_write({str(tmp_path / "scan.pcd")!r}, slow)
        """
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "writing"
        assert os.listdir(tmp_path) == []  # no name while it is written
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    assert os.listdir(tmp_path) == []


def test_atomic_write_publishes_whole_files_only(tmp_path):
    atomic_write(tmp_path / "a.bin", b"abc")
    assert (tmp_path / "a.bin").read_bytes() == b"abc"
    with pytest.raises(OutputError, match="exists already"):
        atomic_write(tmp_path / "a.bin", b"other")
    assert (tmp_path / "a.bin").read_bytes() == b"abc"
    assert sorted(os.listdir(tmp_path)) == ["a.bin"]
