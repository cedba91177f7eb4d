"""acres-lidar dataset: shards on a local Ray, bit-identical to record, resumable, failures reported.

The drives are 0.1 s long (one or two Polaris scans) so that Ray's start-up dominates; the module runs
one 4-shard dataset on 2 local workers and compares the other runs with it.
"""

import contextlib
import ipaddress
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from acres_lidar_ros.apps import cli
from acres_lidar_ros.apps.cmd_dataset import BOXES_FILE, SHARD_FILE, shard_checksum, shard_scene
from acres_lidar_ros.config.dataset_file import load_dataset
from acres_lidar_ros.errors import ConfigError

DRIVES = {
    "tours": ["default"],
    "farm_seeds": [0, 1],
    "seeds": [0],
    "weather": [{"name": "clear"}, {"name": "rain", "rain_mm_per_h": 20}],
    "sensors": ["polaris"],
    "point_types": ["XYZI"],
}
OUTPUTS = {
    "labels": True,
    "truth": True,
    "packets": "pcap",
    "layouts": ["semantic_kitti", "kitti_objects"],
    "vary": {"seed": 3, "vehicles": {"count": {"integers": [1, 2]}, "distance_m": {"uniform": [10, 18]}}},
}


def write_dataset(directory: Path, drives=None, **top) -> Path:
    path = directory / "dataset.json"
    top = top if top or drives is not None else OUTPUTS
    path.write_text(json.dumps({"drives": drives or DRIVES, "duration_s": 0.1, "files": "pcd", **top}))
    return path


def run_cli(*argv) -> int:
    return cli.main(list(argv))


def listening_sockets(root_pid: int) -> set[tuple[str, int, int]]:
    """(local address, port, pid) of every TCP socket listening in ``root_pid`` and its descendants
    (``/proc``: the process tree, each one's socket inodes, ``/proc/net/tcp`` and ``tcp6``)."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
    tree, grew = {root_pid}, True
    while grew:
        more = {pid for pid, parent in parents.items() if parent in tree} - tree
        tree |= more
        grew = bool(more)
    inodes = {}
    for pid in tree:
        with contextlib.suppress(OSError):
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with contextlib.suppress(OSError):
                    target = os.readlink(fd)
                    if target.startswith("socket:["):
                        inodes[int(target[8:-1])] = pid
    found = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and int(fields[9]) in inodes:  # 0A: LISTEN
                address, port = fields[1].split(":")
                raw = bytes.fromhex(address)
                words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))  # host-order words
                found.add((str(ipaddress.ip_address(words)), int(port, 16), inodes[int(fields[9])]))
    return found


def is_loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    mapped = getattr(ip, "ipv4_mapped", None)
    return (mapped or ip).is_loopback


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """The 4-shard dataset run once on 2 local workers: (dataset file, out dir, manifest, the
    listening sockets of this process's tree seen while it ran)."""
    root = tmp_path_factory.mktemp("dataset")
    config = write_dataset(root)
    out = root / "out"
    seen: set = set()
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.5):
            seen.update(listening_sockets(os.getpid()))

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        assert run_cli("dataset", "--config", str(config), "--out", str(out), "--workers", "2", "--no-progress") == 0
    finally:
        done.set()
        watcher.join()
    return config, out, json.loads((out / "manifest.json").read_text()), seen


def _pcap_ports(path: Path) -> np.ndarray:
    """The UDP destination port of each record of a classic pcap of Ethernet + IPv4 + UDP frames."""
    data = path.read_bytes()
    ports, at = [], 24
    while at < len(data):
        length = int.from_bytes(data[at + 8 : at + 12], "little")
        ports.append(int.from_bytes(data[at + 16 + 36 : at + 16 + 38], "big"))
        at += 16 + length
    return np.array(ports)


def test_a_local_ray_listens_on_loopback_only(finished):
    *_, seen = finished
    assert len({pid for _, _, pid in seen}) >= 3, seen  # the GCS, the raylet and the workers were seen
    assert all(is_loopback(address) for address, _, _ in seen), sorted(seen)


def test_farm_seed_0_shards_are_bit_identical_to_record(finished, tmp_path):
    config, out, manifest, _ = finished
    assert manifest["counts"] == {"done": 4, "failed": 0}
    # The shards ran in Ray's worker processes, never more than the two CPUs given (Ray may hand all
    # four to one worker when they are short), and not in this process.
    pids = {entry["worker_pid"] for entry in manifest["shards"]}
    assert 1 <= len(pids) <= 2 and os.getpid() not in pids, pids
    assert not any((out / ".partial").iterdir())
    assert [e["sequence"] for e in manifest["shards"]] == ["00", "01", "02", "03"]
    for entry in manifest["shards"]:
        spec = entry["config"]
        shard = out / "shards" / entry["shard"]
        assert entry["checksum"] == shard_checksum(shard)
        assert entry["seed"] == spec["seed"] and entry["attempts"] == 1
        assert 1 <= len(entry["drawn"]["vehicles"]) <= 2 and (shard / BOXES_FILE).is_file()
        if spec["farm_seed"] != 0:  # record builds farm 0 only
            continue
        argv = ["record", "--seed", str(spec["seed"]), "--rain", str(spec["rain_mm_per_h"]), "--duration", "0.1"]
        argv += ["--labels", "--truth", "--boxes", str(shard / BOXES_FILE), "--packets", "pcap"]
        alone = tmp_path / entry["shard"]
        assert (
            run_cli(*argv, "--files", "pcd", "--point-type", spec["point_type"], "--out", str(alone), "--no-progress")
            == 0
        )
        files = sorted(p.relative_to(alone) for p in alone.rglob("*") if p.is_file())
        assert sorted(p.relative_to(shard) for p in shard.rglob("*") if p.is_file()) == sorted(
            files + [Path(SHARD_FILE), Path(BOXES_FILE)]
        )
        scans = entry["figures"]["scans"]
        assert len([f for f in files if f.suffix == ".pcd"]) == scans >= 1 and Path("bag/bag.mcap") in files
        assert len([f for f in files if f.name.endswith(".truth.npz")]) == scans
        # The scan due at the start sweeps before 0 s and has no packets; each other one is 150
        # MSOPs of 12 of its 1800 columns (docs/packets.md), beside the DIFOPs.
        ports = _pcap_ports(shard / "packets.pcap")
        assert entry["figures"]["packets"] == ports.size and np.sum(ports == 6699) == 150 * (scans - 1) > 0
        for name in files:
            if name == Path("config.json"):  # its "run" block says how each was launched
                a, b = json.loads((alone / name).read_text()), json.loads((shard / name).read_text())
                assert a["sensors"] == b["sensors"] and a["options"] == b["options"]
                assert b["run"]["shard"] == entry["shard"] and b["run"]["seed"] == spec["seed"]
            else:
                assert (alone / name).read_bytes() == (shard / name).read_bytes(), name


def test_each_farm_seed_is_its_own_world(finished):
    _, out, manifest, _ = finished
    by_farm = {}
    for entry in manifest["shards"]:
        shard = out / "shards" / entry["shard"]
        assert json.loads((shard / "config.json").read_text())["run"]["farm_seed"] == entry["config"]["farm_seed"]
        rows = [json.loads(line) for line in (shard / "lidar.jsonl").read_text().splitlines()]
        by_farm.setdefault(entry["config"]["farm_seed"], []).append(rows[0]["sensor_pose"]["position_m"][2])
    # The tour is draped on each farm's own terrain: the sensor's height differs between the farms.
    assert abs(by_farm[0][0] - by_farm[1][0]) > 1e-3


def test_a_shards_drawn_world_is_its_scene():
    world = {"crop_growth": {"corn_field": 0.2}, "harvested": {"potato_field": 1.0}, "soil_wetness": -1.0}
    scene = shard_scene("default", 4, world)
    names = np.asarray(scene.object_names, dtype=object)[scene.crops.instance]
    height = scene.crops.cell_top_z_m - scene.crops.cell_base_z_m
    corn = height[names == "corn_field"]
    # The spec's h_max = h_crop (0.03 + 0.97 G): corn 2.6 m at G 0.2; potato 0.6 m at its own 0.25, all harvested (3 %).
    assert np.isclose(corn, 2.6 * (0.03 + 0.97 * 0.2)).mean() > 0.9
    np.testing.assert_allclose(height[names == "potato_field"], 0.03 * 0.6 * (0.03 + 0.97 * 0.25), rtol=1e-9)
    assert scene.soil_wetness.values.max() == 0.0


def _poses(rows) -> np.ndarray:
    from scipy.spatial.transform import Rotation

    out = np.tile(np.eye(4), (len(rows), 1, 1))
    for T, row in zip(out, rows):
        T[:3, :3] = Rotation.from_quat(row["sensor_pose"]["quaternion_xyzw"]).as_matrix()
        T[:3, 3] = row["sensor_pose"]["position_m"]
    return out


def test_each_shard_is_a_semantic_kitti_sequence_pykitti_reads(finished):
    pykitti = pytest.importorskip("pykitti", reason="pykitti (the test extra) is the external reader")
    from acres_lidar_ros.config.material_table import CLASS_NAMES
    from acres_lidar_ros.outputs.kitti_formats import CLASS_TO_SEMANTIC_KITTI
    from acres_lidar_ros.outputs.pcd import read_pcd
    from acres_lidar_ros.scene.instances import BODY_INSTANCE

    _, out, manifest, _ = finished
    for entry in manifest["shards"]:
        shard = out / "shards" / entry["shard"]
        rows = [json.loads(line) for line in (shard / "lidar.jsonl").read_text().splitlines()]
        sequence = pykitti.odometry(str(out / "semantic_kitti"), entry["sequence"])
        assert len(sequence) == len(sequence.velo_files) == len(rows) == entry["figures"]["scans"]
        assert [t.total_seconds() for t in sequence.timestamps] == pytest.approx(
            [(r["stamp_ns"] - rows[0]["stamp_ns"]) * 1e-9 for r in rows], abs=1e-9
        )
        T = _poses(rows)
        Tr = sequence.calib.T_cam0_velo
        lidar_poses = [np.linalg.inv(Tr) @ P @ Tr for P in sequence.poses]  # the camera poses back in the LiDAR
        np.testing.assert_allclose(lidar_poses, np.linalg.inv(T[0]) @ T, atol=1e-7)
        for k, row in enumerate(rows):
            cloud = read_pcd(shard / row["files"][0]).ravel()
            cloud = cloud[np.isfinite(cloud["x"])]
            velo = sequence.get_velo(k)
            np.testing.assert_array_equal(velo[:, :3], np.column_stack([cloud["x"], cloud["y"], cloud["z"]]))
            np.testing.assert_allclose(velo[:, 3], cloud["intensity"] / 255.0, rtol=1e-6)
            words = np.fromfile(Path(sequence.sequence_path) / "labels" / f"{k:06d}.label", dtype="<u4")
            expected = [CLASS_TO_SEMANTIC_KITTI[CLASS_NAMES[c]] for c in cloud["class"]]
            expected = np.where(cloud["instance"] == BODY_INSTANCE, 0, expected)
            np.testing.assert_array_equal(words & 0xFFFF, expected)  # semantic: the low 16 bits
            vehicles = words[(words & 0xFFFF) == 20] >> 16  # instance: the high 16 bits
            assert vehicles.size == 0 or vehicles.min() >= 1


def test_the_vehicles_points_lie_in_their_kitti_object_boxes(finished):
    from scipy.spatial.transform import Rotation

    from acres_lidar_ros.outputs.pcd import read_pcd
    from acres_lidar_ros.scene.box_tracks import load_box_tracks
    from acres_lidar_ros.scene.instances import vehicle_instance

    _, out, manifest, _ = finished
    checked = 0
    for entry in manifest["shards"]:
        shard = out / "shards" / entry["shard"]
        rows = [json.loads(line) for line in (shard / "lidar.jsonl").read_text().splitlines()]
        tracks = load_box_tracks(shard / BOXES_FILE)
        objects = out / "kitti_objects" / "sequences" / entry["sequence"]
        for k, (row, T_world_lidar) in enumerate(zip(rows, _poses(rows))):
            cloud = read_pcd(shard / row["files"][0]).ravel()
            label_2 = (objects / "label_2" / f"{k:06d}.txt").read_text().splitlines()
            lidar = [line.split() for line in (objects / "label_lidar" / f"{k:06d}.txt").read_text().splitlines()]
            boxes = tracks.boxes_at(row["stamp_ns"] * 1e-9)
            assert len(label_2) == len(lidar) == len(boxes) == len(entry["drawn"]["vehicles"])
            for box, label in zip(boxes, lidar):
                # The box in the LiDAR frame, from the world box and the sensor pose of lidar.jsonl.
                T_lidar_world = np.linalg.inv(T_world_lidar)
                R = T_lidar_world[:3, :3] @ Rotation.from_quat(box.quaternion_xyzw).as_matrix()
                centre = T_lidar_world[:3, :3] @ box.centre_m + T_lidar_world[:3, 3]
                x, y, z, dx, dy, dz, heading = (float(v) for v in label[:7])
                assert label[7] == "Car" and label_2[0].startswith("Car ")
                np.testing.assert_allclose([x, y, z], centre, atol=1e-4)
                np.testing.assert_allclose([dx, dy, dz], 2 * box.half_extents_m, atol=1e-4)
                assert abs(heading - np.arctan2(R[1, 0], R[0, 0])) < 1e-4  # the box's yaw in the LiDAR frame
                mine = cloud[cloud["instance"] == vehicle_instance(box.object_id)]
                if len(mine) < 10:
                    continue  # hidden or out of range in this scan
                local = (np.column_stack([mine["x"], mine["y"], mine["z"]]) - centre) @ R  # box coordinates
                inside = (np.abs(local) <= box.half_extents_m + 0.05).all(axis=1)
                assert inside.mean() > 0.99
                checked += 1
    assert checked >= 1


def test_a_rerun_redoes_only_a_half_written_shard(finished, tmp_path):
    config, out, manifest, _ = finished
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
    # The same bits whatever a worker's share of the cores: 2 workers took half of them each, the
    # rerun's one worker all of them (numba's pool, the passes' parts and Embree's threads).
    cores = os.cpu_count() or 1
    assert {e["figures"]["threads"] for e in manifest["shards"]} == {max(1, cores // 2)}
    assert [e["figures"]["threads"] for e in again["shards"] if e["shard"] == victim] == [cores]
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
    config, _, manifest, _ = finished
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
    drives = dict(DRIVES, tours=["default", "broken.tum"], farm_seeds=[0], weather=[{"name": "clear"}])
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
    assert failed["attempts"] == 2 and failed["shard"].startswith("broken-f0-s0-clear")
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
        (dict(DRIVES, weather=[{"rain_mm_per_h": -1}]), "drives.weather[0].rain_mm_per_h = -1"),
        (dict(DRIVES, colour=["red"]), "drives.colour: unknown key; allowed: tours, farm_seeds, seeds"),
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


@pytest.mark.parametrize(
    ("top", "message"),
    [
        (
            {"drives": dict(DRIVES, point_types=["XYZ"])},
            "drives.point_types[0] = 'XYZ' is not a point type; allowed: XYZI",
        ),
        (
            {"drives": dict(DRIVES, point_types=["velodyne"]), "labels": True},
            "drives.point_types[0] = 'velodyne' with labels: labels publish the XYZIRT_labels layout",
        ),
        (
            {"drives": dict(DRIVES, sensors=["polaris", "pandar_xt32"]), "packets": "pcap"},
            "drives.sensors[1] = 'pandar_xt32' with packets: --packets: sensor pandar_xt32 has no packet format; "
            "the sensors with one are polaris",
        ),
        ({"packets": "udp"}, "packets = 'udp': allowed: pcap, bag"),
        (
            {"drives": dict(DRIVES, point_types=["ouster"]), "layouts": ["kitti_objects"]},
            "drives.point_types[0] = 'ouster': the layouts ['kitti_objects'] are made from the organised PCD files",
        ),
    ],
)
def test_point_types_are_checked_with_the_labels_and_layouts(tmp_path, capsys, top, message):
    config = write_dataset(tmp_path, **top)
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
    _, out, _, _ = finished
    other = write_dataset(tmp_path, dict(DRIVES, seeds=[7]))
    assert run_cli("dataset", "--config", str(other), "--out", str(out)) == 2
    assert "holds another dataset" in capsys.readouterr().err


def test_export_of_a_shard_alone_writes_its_sequence_of_the_dataset(finished, tmp_path):
    """``acres-lidar export --run`` of one shard (a record run with its drawn boxes.json) writes
    byte for byte the sequence the dataset wrote for it, which pykitti read above."""
    _, out, manifest, _ = finished
    entry = manifest["shards"][2]
    alone = tmp_path / "alone"
    argv = ["export", "--run", str(out / "shards" / entry["shard"]), "--out", str(alone)]
    assert (
        run_cli(*argv, "--layout", "semantic_kitti", "--layout", "kitti_objects", "--sequence", entry["sequence"]) == 0
    )
    for layout in ("semantic_kitti", "kitti_objects"):
        ours, theirs = alone / layout / "sequences" / entry["sequence"], out / layout / "sequences" / entry["sequence"]
        names = sorted(p.relative_to(theirs) for p in theirs.rglob("*") if p.is_file())
        assert sorted(p.relative_to(ours) for p in ours.rglob("*") if p.is_file()) == names and len(names) >= 8
        assert all((ours / n).read_bytes() == (theirs / n).read_bytes() for n in names), layout
    for name in ("class_map.json", f"poses/{entry['sequence']}.txt"):
        assert (alone / "semantic_kitti" / name).read_bytes() == (out / "semantic_kitti" / name).read_bytes()
