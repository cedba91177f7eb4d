"""Nothing lost: `acres-lidar record` stopped by signals at random moments, or by a full disk.

A signal lands at a seeded random moment of the recording's own progress, read from its stderr as
it comes (no wall clock): during the start-up (at once, once the scene is built, or once the
progress bar is up, before any scan) or during the drive (once the progress bar reports scan n).
The recorder is started with the stop signals blocked, so one sent before its ``main`` has
installed the handlers is held and delivered to them (as from a supervisor that holds signals
until the program is ready). Every scan the run lists
in ``lidar.jsonl`` (its durable report of completed scans) must be in the
bag, read by rosbags and by the mcap reader: as the bag is after SIGINT, SIGTERM and SIGHUP, after
``acres-lidar bag-repair`` after SIGKILL or a full disk. No traceback, no stray temporary file, and
every PCD whole. ``ACRES_SIGNAL_TRIALS`` (default 2) sets the trials per signal and
``ACRES_SIGNAL_SEED`` (default 0) their moments; run with ``-s`` to see the figures."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory
from rosbags.highlevel import AnyReader

from acres_lidar_ros.apps import cli
from acres_lidar_ros.apps.signals import STOP_SIGNALS, StopSignals, exit_code
from acres_lidar_ros.outputs.bag_repair import bag_is_readable
from acres_lidar_ros.outputs.pcd import read_pcd
from acres_lidar_ros.outputs.pointcloud2 import decode_pointcloud2

TRIALS = int(os.environ.get("ACRES_SIGNAL_TRIALS", "2"))
SEED = int(os.environ.get("ACRES_SIGNAL_SEED", "0"))
DURATION_S = 4.0  # simulated seconds per recording: 40 scans at 10 Hz, ~1.5 s of work
SCANS = 40  # a moment during the drive is after one of these
STARTUP_SHARE = 0.25  # of the trials signal during the start-up, the others during the drive
STARTUP_MARKS = (rb"", rb"^scene: ", rb"0scan \[")  # at once; the scene built; the bar up, no scan yet
SHAPE = (1800, 32)  # Polaris: columns, rings
WATCHDOG_S = 120.0  # a recording still running then is killed and the test fails
SCANS_DONE = re.compile(rb"\b([0-9]+)/[0-9]+ \[")  # tqdm's "n/total [" once n scans are done


def scans_done(stderr: bytes) -> int:
    """The most scans the progress bar has reported so far."""
    return max((int(n) for n in SCANS_DONE.findall(stderr)), default=0)


def startup_mark(pattern: bytes) -> Callable[[bytes], bool]:
    """A moment of the start-up: once ``pattern`` has appeared on the child's stderr."""
    return lambda stderr: re.search(pattern, stderr, re.MULTILINE) is not None


def after_scan(n: int) -> Callable[[bytes], bool]:
    """A moment of the drive: once the progress bar has reported ``n`` scans done."""
    return lambda stderr: scans_done(stderr) >= n


def _command(*args: str) -> list[str]:
    script = Path(sys.executable).with_name("acres-lidar")
    if script.exists():
        return [str(script), *args]
    return [sys.executable, "-m", "acres_lidar_ros.apps.cli", *args]


class Recording:
    """``acres-lidar record`` in a child process, its stderr read as it comes.

    The child starts with SIGINT, SIGTERM and SIGHUP blocked (``StopSignals`` unblocks them once its
    handlers are in), so a signal may be sent from the first instant. ``moment`` is set once
    ``at(stderr so far)`` is true, or when the child ends. A watchdog kills the child's process
    group after ``WATCHDOG_S``, so no wait here can hang.
    """

    def __init__(self, out: Path, at: Callable[[bytes], bool] | None = None, duration_s: float = DURATION_S) -> None:
        args = ("record", "--duration", str(duration_s), "--out", str(out), "--files", "pcd")
        held = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            self.child = subprocess.Popen(
                _command(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
            )
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
        self.pid = self.child.pid
        self._at = at
        self.moment = threading.Event()
        self.timed_out = False
        self._stderr = bytearray()
        self._stdout = b""
        self._readers = [
            threading.Thread(target=self._read_stderr, daemon=True),
            threading.Thread(target=self._read_stdout, daemon=True),
        ]
        for reader in self._readers:
            reader.start()
        self._watchdog = threading.Timer(WATCHDOG_S, self._kill)
        self._watchdog.start()

    def _read_stderr(self) -> None:
        assert self.child.stderr is not None
        while chunk := self.child.stderr.read1(65536):
            self._stderr += chunk
            if self._at is not None and not self.moment.is_set() and self._at(bytes(self._stderr)):
                self.moment.set()
        self.moment.set()  # ended: nothing more to wait for

    def _read_stdout(self) -> None:
        assert self.child.stdout is not None
        self._stdout = self.child.stdout.read()

    def _kill(self) -> None:
        self.timed_out = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)

    def poll(self) -> int | None:
        return self.child.poll()

    def finish(self) -> tuple[int, str]:
        """Wait for the child to end (the watchdog bounds it); its exit code and stderr."""
        code = self.child.wait()
        for reader in self._readers:
            reader.join()
        self._watchdog.cancel()
        stderr = self._stderr.decode(errors="replace")
        if self.timed_out:
            pytest.fail(f"recording did not end within {WATCHDOG_S} s: {stderr}")
        return code, stderr


def _rows(run: Path) -> list[dict]:
    path = run / "lidar.jsonl"
    if not path.exists():
        return []
    data = path.read_text()
    assert data == "" or data.endswith("\n"), "lidar.jsonl does not end on a complete line"
    return [json.loads(line) for line in data.splitlines()]


def _clouds_rosbags(bag: Path) -> dict[int, int]:
    """stamp_ns -> cells with a return, of every /lidar/points message (rosbags)."""
    out = {}
    with AnyReader([bag]) as reader:
        connections = [c for c in reader.connections if c.topic == "/lidar/points"]
        for connection, _, raw in reader.messages(connections=connections):
            msg = reader.deserialize(raw, connection.msgtype)
            stamp_ns = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
            cloud = decode_pointcloud2(msg)
            assert cloud.shape == SHAPE
            out[stamp_ns] = int(np.isfinite(cloud["x"]).sum())
    return out


def _stamps_mcap(bag: Path) -> set[int]:
    (mcap_file,) = bag.glob("*.mcap")
    with open(mcap_file, "rb") as handle:
        reader = make_reader(handle, decoder_factories=[DecoderFactory()])
        assert reader.get_summary() is not None
        return {
            msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
            for _, _, _, msg in reader.iter_decoded_messages(topics=["/lidar/points"])
        }


def _check_run(run: Path, stderr: str, *, repaired: bool) -> tuple[int, int]:
    """Check a stopped run; return (scans listed as complete, of those missing from the bag)."""
    assert "Traceback" not in stderr, stderr
    if not run.exists():
        return 0, 0
    stray = [p for p in run.rglob("*") if p.name.endswith((".tmp", ".repair"))]
    assert not stray, f"stray temporary files {stray}"
    rows = _rows(run)
    for pcd in (run / "lidar").glob("*.pcd"):
        assert read_pcd(pcd).shape == SHAPE  # whole, or it would not be there
    for row in rows:
        for name in row["files"]:
            assert (run / name).is_file(), f"{name} of a completed scan is missing"
    bag = run / "bag"
    if not bag.exists():
        assert not rows
        return 0, 0
    assert bag_is_readable(bag)[0], "bag unreadable" + (" after bag-repair" if repaired else "")
    clouds = _clouds_rosbags(bag)
    stamps_mcap = _stamps_mcap(bag)
    lost = [row["stamp_ns"] for row in rows if row["stamp_ns"] not in clouds or row["stamp_ns"] not in stamps_mcap]
    for row in rows:
        if row["stamp_ns"] in clouds:
            assert clouds[row["stamp_ns"]] == row["beams_with_return"]
    if not repaired:
        assert len(clouds) == len(rows)  # a clean stop writes every scan it traced, with its row
    return len(rows), len(lost)


def _trial(tmp: Path, signum: int, at: Callable[[bytes], bool]) -> tuple[int, int]:
    run = tmp / "run"
    child = Recording(run, at)
    child.moment.wait()  # the seeded moment, or the end; the watchdog bounds the wait
    finished = child.poll() is not None
    if not finished:
        os.kill(child.pid, signum)
    code, stderr = child.finish()
    if finished or code == 0:
        assert code == 0, stderr
    elif signum == signal.SIGKILL:
        assert code == -signal.SIGKILL
    elif code == -signum:
        # Only in the interpreter's last moments, after every bytecode: Python has put the default
        # dispositions back. The run must have been complete by then.
        assert (run / "episode.json").exists() and (run / "bag" / "metadata.yaml").exists(), stderr
    else:
        assert code == exit_code(signum), stderr
        assert signal.Signals(signum).name in stderr
    repaired = signum == signal.SIGKILL and code != 0
    if repaired and (run / "bag").exists():
        assert cli.main(["bag-repair", str(run)]) == 0
    return _check_run(run, stderr, repaired=repaired)


SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL]


@pytest.mark.parametrize("signum", SIGNALS, ids=[s.name for s in SIGNALS])
def test_signals_at_random_moments_lose_no_completed_scan(tmp_path, signum):
    rng = np.random.default_rng([SEED, int(signum)])
    completed = lost = 0
    for trial in range(TRIALS):
        during_drive = trial % 2 == 1 or rng.uniform() > STARTUP_SHARE  # one in two at least
        if during_drive:
            at = after_scan(int(rng.integers(1, SCANS + 1)))
        else:
            at = startup_mark(STARTUP_MARKS[int(rng.integers(len(STARTUP_MARKS)))])
        done, missing = _trial(tmp_path / f"trial{trial}", signum, at)
        completed += done
        lost += missing
    print(f"\n{signal.Signals(signum).name}: {TRIALS} trials, {completed} completed scans, {lost} lost")
    # One trial in two signals during the drive (after scan 1 at the earliest): there were scans to lose.
    assert completed > 0, "no trial left a completed scan: the check saw nothing"
    assert lost == 0


def test_a_second_signal_exits_at_once(tmp_path):
    """README "Output files": a second signal while the recorder stops means "now". SIGINT then
    SIGTERM, sent back to back after scan 3 of a 300-scan recording: the handlers run in signal
    order, so SIGINT asks for the stop and SIGTERM ends the process at once with 128 + 15, long
    before the drive's end and without closing the bag; bag-repair then restores every scan the
    run listed."""
    run = tmp_path / "run"
    child = Recording(run, after_scan(3), duration_s=30.0)
    child.moment.wait()
    assert child.poll() is None
    os.kill(child.pid, signal.SIGINT)
    os.kill(child.pid, signal.SIGTERM)
    code, stderr = child.finish()
    assert code == exit_code(signal.SIGTERM), stderr
    assert "SIGINT received" in stderr and "second signal (SIGTERM); exiting now without closing the bag" in stderr
    assert "Traceback" not in stderr
    rows = _rows(run)
    assert 3 <= len(rows) < 100, len(rows)  # at once: not after the remaining scans
    if (run / "bag").exists():
        assert cli.main(["bag-repair", str(run)]) == 0
    assert _check_run(run, stderr, repaired=True) == (len(rows), 0)


def test_stop_signals_set_a_flag_and_restore_the_handlers():
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    with StopSignals("test") as stop:
        assert stop.requested is None
        os.kill(os.getpid(), signal.SIGTERM)  # to this process: the handler has run when kill returns
        assert stop.requested == signal.SIGTERM and stop.name == "SIGTERM"
    assert {s: signal.getsignal(s) for s in before} == before
    assert exit_code(signal.SIGTERM) == 143 and exit_code(signal.SIGINT) == 130
    try:
        with StopSignals("program", restore=False) as program:
            pass
        os.kill(os.getpid(), signal.SIGINT)  # as the interpreter shuts down: still only the flag
        assert program.requested == signal.SIGINT
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


def _mount_tmpfs(where: Path, size: str) -> None:
    where.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command for the full-disk tmpfs: runs as root with mount rights (.ci/run on CI)")
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True, text=True
    )
    if result.returncode != 0:
        pytest.skip(f"no tmpfs mount here ({result.stderr.strip()}): runs as root with mount rights (.ci/run on CI)")


def _fill(disk: Path) -> None:
    """Take the rest of ``disk``, as another process filling it would."""
    with open(disk / "filler", "wb") as handle:
        try:
            while True:
                handle.write(b"\0" * (1 << 20))
                handle.flush()
        except OSError:
            pass  # ENOSPC: the disk is full


@pytest.fixture
def small_disk(tmp_path):
    disk = tmp_path / "disk"
    _mount_tmpfs(disk, "20m")
    yield disk
    subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def _repair_with_room(run: Path, disk: Path) -> None:
    """bag-repair on the full disk says how much room it needs; with room it succeeds."""
    result = subprocess.run(_command("bag-repair", str(run)), capture_output=True, text=True)
    if result.returncode != 0:
        assert result.returncode == 2 and "MiB free" in result.stderr, result.stderr
        assert "Traceback" not in result.stderr
        (disk / "filler").unlink(missing_ok=True)
        subprocess.run(["mount", "-o", "remount,size=64m", str(disk)], check=True)
        result = subprocess.run(_command("bag-repair", str(run)), capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_a_recording_that_fills_its_disk_stops_with_a_whole_bag(small_disk):
    run = small_disk / "run"
    code, stderr = Recording(run, duration_s=5.0).finish()  # ~75 MB of bag and files for 20 MiB
    assert code == 2, stderr
    assert "disk almost full" in stderr and "MiB free" in stderr, stderr
    rows = _rows(run)
    assert rows, "no scan completed before the disk was full"
    completed, lost = _check_run(run, stderr, repaired=False)  # readable as it is
    print(f"\nfull disk, recorder stops itself (20 MiB tmpfs): {completed} completed scans, {lost} lost")
    assert completed == len(rows) and lost == 0


def test_a_disk_filled_by_another_process_loses_no_completed_scan(small_disk):
    run = small_disk / "run"
    child = Recording(run, after_scan(1), duration_s=5.0)
    child.moment.wait()  # set at the first scan or the end; the watchdog bounds the wait
    _fill(small_disk)
    code, stderr = child.finish()
    assert code == 2, stderr
    assert "No space left on device" in stderr or "disk almost full" in stderr, stderr
    enospc = "No space left on device" in stderr
    repaired = enospc and not (run / "bag" / "metadata.yaml").exists()
    if repaired:  # the bag could not be closed (it may have been, with the room a failed file freed)
        assert "bag-repair" in stderr
        _repair_with_room(run, small_disk)
    completed, lost = _check_run(run, stderr, repaired=True)
    how = "the recorder stopped first"
    if enospc:
        how = "a write failed, " + ("bag repaired" if repaired else "bag closed all the same")
    print(f"\nfull disk, filled by another process ({how}): {completed} completed scans, {lost} lost")
    assert lost == 0


def test_bag_writer_on_a_full_disk_keeps_its_flushed_clouds(small_disk):
    """The write that fills the disk fails with a named error, closing fails too and leaves no
    temporary file; after repair the clouds flushed before are all there."""
    from acres_lidar_ros.errors import OutputError
    from acres_lidar_ros.outputs.bag import BagWriter
    from acres_lidar_ros.outputs.point_types import XYZI

    cloud = np.zeros(SHAPE, XYZI)
    cloud["x"] = np.arange(cloud.size, dtype=np.float32).reshape(SHAPE)
    flushed = []
    bag = BagWriter(small_disk / "bag")
    bag.open()
    with pytest.raises(OutputError, match="No space left on device"):
        for k in range(100):  # 0.9 MB a cloud: the 20 MiB disk is full long before
            bag.write_cloud(k * 100_000_000, cloud)
            bag.flush()
            flushed.append(k * 100_000_000)
    with pytest.raises(OutputError, match="cannot finish bag"):
        bag.close()
    assert sorted(p.name for p in (small_disk / "bag").iterdir()) == ["bag.mcap"]
    subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True)
    assert cli.main(["bag-repair", str(small_disk / "bag")]) == 0
    assert sorted(_clouds_rosbags(small_disk / "bag")) == flushed
    assert sorted(_stamps_mcap(small_disk / "bag")) == flushed


def test_the_cli_module_imports_nothing_heavy_before_main():
    """Until main's first line Python's own SIGINT handler is in place; a Ctrl-C there is a
    KeyboardInterrupt traceback. So importing the CLI module stays light (no numpy, no scene)."""
    code = "import sys, acres_lidar_ros.apps.cli; print(sorted({'numpy', 'scipy', 'numba'} & set(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]", result.stdout
