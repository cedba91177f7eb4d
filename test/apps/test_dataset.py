"""acres-lidar dataset: shards on a local Ray, bit-identical to record, resumable, failures reported.

The drives are 0.1 s long (one or two Polaris scans) so that Ray's start-up dominates; the module runs
one 4-shard dataset on 2 local workers and compares the other runs with it.
"""

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from acres_lidar_ros.apps import cli
from acres_lidar_ros.apps.cmd_dataset import SHARD_FILE, shard_checksum
from acres_lidar_ros.config.dataset_file import load_dataset
from acres_lidar_ros.errors import ConfigError

DRIVES = {
    "tours": ["default"],
    "seeds": {"first": 0, "count": 2},
    "weather": [{"name": "clear"}, {"name": "rain", "rain_mm_per_h": 20}],
    "sensors": ["polaris"],
    "point_types": ["XYZI"],
}


def write_dataset(directory: Path, drives=None, **top) -> Path:
    path = directory / "dataset.json"
    path.write_text(json.dumps({"drives": drives or DRIVES, "duration_s": 0.1, "files": "pcd", **top}))
    return path


def run_cli(*argv) -> int:
    return cli.main(list(argv))


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """The 4-shard dataset run once on 2 local workers: (dataset file, out dir, manifest)."""
    root = tmp_path_factory.mktemp("dataset")
    config = write_dataset(root)
    out = root / "out"
    assert run_cli("dataset", "--config", str(config), "--out", str(out), "--workers", "2", "--no-progress") == 0
    return config, out, json.loads((out / "manifest.json").read_text())


def test_four_shards_on_two_workers_are_bit_identical_to_record(finished, tmp_path):
    config, out, manifest = finished
    assert manifest["counts"] == {"done": 4, "failed": 0}
    # The shards ran in Ray's worker processes, never more than the two CPUs given (Ray may hand all
    # four to one worker when they are short), and not in this process.
    pids = {entry["worker_pid"] for entry in manifest["shards"]}
    assert 1 <= len(pids) <= 2 and os.getpid() not in pids, pids
    assert not any((out / ".partial").iterdir())
    for entry in manifest["shards"]:
        spec = entry["config"]
        shard = out / "shards" / entry["shard"]
        argv = ["record", "--seed", str(spec["seed"]), "--rain", str(spec["rain_mm_per_h"]), "--duration", "0.1"]
        alone = tmp_path / entry["shard"]
        assert (
            run_cli(*argv, "--files", "pcd", "--point-type", spec["point_type"], "--out", str(alone), "--no-progress")
            == 0
        )
        files = sorted(p.relative_to(alone) for p in alone.rglob("*") if p.is_file())
        assert sorted(p.relative_to(shard) for p in shard.rglob("*") if p.is_file()) == sorted(
            files + [Path(SHARD_FILE)]
        )
        scans = entry["figures"]["scans"]
        assert len([f for f in files if f.suffix == ".pcd"]) == scans >= 1 and Path("bag/bag.mcap") in files
        for name in files:
            if name == Path("config.json"):  # its "run" block says how each was launched
                a, b = json.loads((alone / name).read_text()), json.loads((shard / name).read_text())
                assert a["sensors"] == b["sensors"] and a["options"] == b["options"]
                assert b["run"]["shard"] == entry["shard"] and b["run"]["seed"] == spec["seed"]
            else:
                assert (alone / name).read_bytes() == (shard / name).read_bytes(), name
        assert entry["checksum"] == shard_checksum(shard)
        assert entry["seed"] == spec["seed"] and entry["attempts"] == 1


def test_a_rerun_redoes_only_a_half_written_shard(finished, tmp_path):
    config, out, manifest = finished
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    victim = manifest["shards"][1]["shard"]
    kept = {
        e["shard"]: (copy / "shards" / e["shard"] / SHARD_FILE).stat().st_mtime_ns
        for e in manifest["shards"]
        if e["shard"] != victim
    }
    shutil.rmtree(copy / "shards" / victim)
    half = copy / ".partial" / f"{victim}.deadbeef" / "lidar"  # what a killed attempt leaves
    half.mkdir(parents=True)
    (half / "scan_1.pcd").write_bytes(b"half a file")
    assert run_cli("dataset", "--config", str(config), "--out", str(copy), "--workers", "1", "--no-progress") == 0
    again = json.loads((copy / "manifest.json").read_text())
    assert again["counts"] == {"done": 4, "failed": 0}
    assert [e["resumed"] for e in again["shards"]] == [e["shard"] != victim for e in manifest["shards"]]
    assert [e["checksum"] for e in again["shards"]] == [e["checksum"] for e in manifest["shards"]]
    for shard, mtime in kept.items():  # finished shards are not redone
        assert (copy / "shards" / shard / SHARD_FILE).stat().st_mtime_ns == mtime
    assert not (copy / ".partial" / f"{victim}.deadbeef").exists()


def _first_attempt_pid(fifo: Path, proc: subprocess.Popen) -> int:
    """The pid a worker writes as its attempt line into ``fifo``; then ``fifo`` becomes a plain log.

    ``open`` of a FIFO for reading returns once a writer has it open, so this waits on the worker
    itself, not on a clock. A watchdog thread opens the FIFO for writing if the run ends first (or
    after 180 s).
    """

    def unblock() -> None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=180)  # a run that never reaches the shard fails the test, not hangs it
        with contextlib.suppress(OSError):
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)  # fails once the FIFO is replaced
            os.close(fd)

    threading.Thread(target=unblock, daemon=True).start()
    with open(fifo) as handle:
        line = handle.readline()
    plain = fifo.with_suffix(".plain")
    plain.write_text(line)  # the attempt stays counted (manifest "attempts")
    os.replace(plain, fifo)  # later attempts append to a regular file
    assert line.split()[1:2] == ["pid"], f"no attempt line from a worker: {line!r}"
    return int(line.split()[2])


def test_a_killed_worker_is_retried_and_the_dataset_completes(finished, tmp_path):
    config, _, manifest = finished
    out = tmp_path / "out"
    victim = manifest["shards"][0]["shard"]
    (out / ".attempts").mkdir(parents=True)
    fifo = out / ".attempts" / f"{victim}.log"
    os.mkfifo(fifo)  # the worker of this shard blocks on its attempt line until the test reads it
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    command = [sys.executable, "-m", "acres_lidar_ros.apps.cli", "dataset", "--config", str(config)]
    command += ["--out", str(out), "--workers", "2", "--no-progress"]
    proc = subprocess.Popen(command, env=env, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        killed = _first_attempt_pid(fifo, proc)
        os.kill(killed, signal.SIGKILL)  # the worker that has just started writing the shard
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, stderr.decode()[-2000:]
    again = json.loads((out / "manifest.json").read_text())
    assert again["counts"] == {"done": 4, "failed": 0}
    assert [e["checksum"] for e in again["shards"]] == [e["checksum"] for e in manifest["shards"]]
    assert sum(e["attempts"] for e in again["shards"]) >= 5  # the killed attempt was run again
    assert next(e["attempts"] for e in again["shards"] if e["shard"] == victim) >= 2
    assert not any((out / ".partial").iterdir())


def test_a_failing_shard_is_retried_then_reported(tmp_path, capsys):
    bad = tmp_path / "broken.tum"
    bad.write_text("0.0 1 2 3 0 0 0 1\nnot a pose line\n")
    drives = dict(DRIVES, tours=["default", "broken.tum"], seeds=[0], weather=[{"name": "clear"}])
    config = write_dataset(tmp_path, drives)
    out = tmp_path / "out"
    code = run_cli(
        "dataset", "--config", str(config), "--out", str(out), "--workers", "2", "--retries", "1", "--no-progress"
    )
    assert code == 1
    err = capsys.readouterr().err
    manifest = json.loads((out / "manifest.json").read_text())
    good, failed = manifest["shards"]
    assert good["status"] == "done" and failed["status"] == "failed"
    assert failed["attempts"] == 2 and failed["shard"].startswith("broken-s0-clear")
    assert f"shard {failed['shard']} failed after 2 attempts" in failed["error"] and "broken.tum" in failed["error"]
    assert failed["shard"] in err
    assert not (out / "shards" / failed["shard"]).exists()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    ("drives", "message"),
    [
        (
            dict(DRIVES, sensors=["polaris", "lidar_x"]),
            "drives.sensors[1] = 'lidar_x': unknown sensor; allowed: default, polaris",
        ),
        (
            dict(DRIVES, seeds={"first": 0, "count": -2}),
            "drives.seeds.count = -2: expected an integer from 1 to 100000",
        ),
        (dict(DRIVES, tours=["default", "missing.tum"]), "drives.tours[1] = 'missing.tum': the pose file"),
        (dict(DRIVES, point_types=["XYZ"]), "drives.point_types[0] = 'XYZ': allowed: XYZI, XYZIRT"),
        (dict(DRIVES, weather=[{"rain_mm_per_h": -1}]), "drives.weather[0].rain_mm_per_h = -1"),
        (dict(DRIVES, colour=["red"]), "drives.colour: unknown key; allowed: tours, seeds"),
        ({k: v for k, v in DRIVES.items() if k != "tours"}, "drives.tours = None: expected a non-empty list"),
    ],
)
def test_bad_dataset_files_name_the_key_and_what_is_allowed(tmp_path, capsys, drives, message):
    config = write_dataset(tmp_path, drives)
    with pytest.raises(ConfigError, match="dataset file"):
        load_dataset(config)
    assert run_cli("dataset", "--config", str(config), "--out", str(tmp_path / "out")) == 2
    err = capsys.readouterr().err
    assert message in err and str(config) in err
    assert not (tmp_path / "out").exists()


def test_an_unreachable_ray_address_is_refused(tmp_path, capsys):
    config = write_dataset(tmp_path)
    port = _closed_port()
    code = run_cli(
        "dataset", "--config", str(config), "--out", str(tmp_path / "out"), "--ray-address", f"127.0.0.1:{port}"
    )
    assert code == 2
    err = capsys.readouterr().err
    assert f"--ray-address '127.0.0.1:{port}': no Ray cluster reachable there" in err
    assert not (tmp_path / "out").exists()


def test_an_out_dir_of_another_dataset_is_refused(finished, tmp_path, capsys):
    _, out, _ = finished
    other = write_dataset(tmp_path, dict(DRIVES, seeds=[7]))
    assert run_cli("dataset", "--config", str(other), "--out", str(out)) == 2
    assert "holds another dataset" in capsys.readouterr().err
