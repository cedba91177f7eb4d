"""``acres-lidar dataset --config DATASET.json --out DIR``: many drives as shards on Ray.

Each shard (one combination of tour, seed, weather, sensor and point type, ``config.dataset``)
is one Ray task that records its drive with ``apps.recorder.record_drive``, the function behind
``acres-lidar record``, so a shard's directory holds exactly what ``record`` writes for the same
drive (its ``config.json`` ``run`` block says how it was launched: here the shard's spec) plus
``shard.json``: the spec, the seed, the figures and a sha256 checksum of every other file.

Layout of ``DIR``::

    dataset.json        the dataset file as read, and its path
    manifest.json       every shard: status, spec, seed, drawn world, sequence, figures, checksum, or the error
    shards/<shard id>/  finished shards (record's files + shard.json, + boxes.json with drawn vehicles)
    semantic_kitti/, kitti_objects/  the layouts of ``"layouts"`` (``apps.cmd_export``), sequence NN a shard
    .partial/           shards being written; a directory here is never a finished shard
    .attempts/          one line per attempt at each shard (the manifest's ``attempts``)

A shard's layouts are written (each sequence whole, by a rename) before the shard is renamed into
``shards/``, so a finished shard always has its layouts.

A shard is written into ``.partial/<id>.<random>`` and renamed into ``shards/`` once whole, so a
run that is killed leaves no half shard under ``shards/``. Running the command again skips the
finished shards and redoes the others from scratch (their partial directories are removed first).

Failures: Ray retries a shard whose task raised or whose worker died (``max_retries`` and
``retry_exceptions``) ``--retries`` times (default ``RETRIES``); a shard that still fails is
``"failed"`` in the manifest with its error, the command names it on stderr and exits 1.

Ray: by default the command starts a local Ray instance of ``--workers`` CPUs, listening on
127.0.0.1 only (``_local_only``), and stops it at the end; ``--ray-address ADDR`` joins a running cluster instead (docs/datasets.md). Ctrl-C (or
SIGTERM) cancels the shards in work, writes the manifest (them as ``"stopped"``) and exits 130
(143); a rerun goes on from there.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import json
import os
import resource
import shutil
import socket
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acres_lidar_ros.config.dataset_file import Dataset, ShardSpec, load_dataset
from acres_lidar_ros.errors import ConfigError, OutputError

if TYPE_CHECKING:
    from acres_lidar_ros.scene.scene_model import Scene

RETRIES = 2  # Ray runs a failing shard at most 1 + RETRIES times
SHARD_FILE = "shard.json"
BOXES_FILE = "boxes.json"  # a shard's drawn vehicles (box-tracks format)
#: Set for a local Ray: on Linux Ray takes "localhost" for the machine's outward address unless
#: told it is no cluster (ray._private.services.get_node_ip_address); with it every GCS, raylet
#: and worker server listens on 127.0.0.1 only (docs/datasets.md).
RAY_LOCAL_ONLY_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
ADDRESS_TIMEOUT_S = 3.0


# --- one shard (runs in a Ray worker) --------------------------------------------------------
def shard_scene(scene_source: str, farm_seed: int | None, world: dict) -> Scene:
    """A shard's scene: the built-in farm of ``farm_seed`` with its drawn crops and wetness
    (``world``: ``crop_growth``, ``harvested``, ``soil_wetness``), or a scene file."""
    from acres_lidar_ros.scene.farm_v1 import build_default_farm
    from acres_lidar_ros.scene.farm_variation import vary_farm
    from acres_lidar_ros.scene.scene_file import load_scene

    if scene_source != "default":
        return load_scene(Path(scene_source))
    scene = build_default_farm(seed=farm_seed or 0)
    if world:
        scene = vary_farm(scene, world.get("crop_growth"), world.get("harvested"), world.get("soil_wetness"))
    return scene


@functools.lru_cache(maxsize=2)
def _tracer(scene_source: str, farm_seed: int | None, world_json: str, threads: int):
    """The shard's scene (``shard_scene``) and its Embree structure, built once per worker and world."""
    from acres_lidar_ros.tracing.trace import Tracer

    scene = shard_scene(scene_source, farm_seed, json.loads(world_json))
    return scene, Tracer(scene, nthreads=threads)


def _cpu_s() -> float:
    """CPU seconds of this process so far, every thread (user + system)."""
    t = os.times()
    return t.user + t.system


def sequence_names(count: int) -> list[str]:
    """The layouts' sequence name of each shard, in dataset order: ``00``, ``01``, ... (two digits
    or more, as many as the last one needs)."""
    digits = max(2, len(str(max(count - 1, 0))))
    return [f"{k:0{digits}d}" for k in range(count)]


def check_dataset(dataset: Dataset) -> None:
    """What ``load_dataset`` cannot check from the config layer: each point type with the labels
    (``point_types.labelled_point_type``), the layouts' point types and the boxes file."""
    from acres_lidar_ros.outputs.point_types import labelled_point_type, point_profile

    path = str(dataset.path)
    for i, pt in enumerate(dict.fromkeys(s.point_type for s in dataset.shards)):
        what = f"dataset file {path!r}: drives.point_types[{i}] ="
        profile = labelled_point_type(point_profile(pt, what), dataset.shards[0].labels, what)
        if dataset.shards[0].layouts and profile.name not in ("XYZI", "XYZIRT", "XYZIRT_labels"):
            raise ConfigError(
                f"{what} {pt!r}: the layouts {list(dataset.shards[0].layouts)} are made from the organised PCD "
                "files; allowed with layouts: XYZI, XYZIRT"
            )
    if dataset.shards[0].packets is not None:
        from acres_lidar_ros.config.sensors import load_sensor_config
        from acres_lidar_ros.packets.formats import packet_encoder

        for i, sensor in enumerate(dict.fromkeys(s.sensor for s in dataset.shards)):
            try:
                packet_encoder(sensor, load_sensor_config(sensor))
            except ConfigError as exc:
                raise ConfigError(
                    f"dataset file {path!r}: drives.sensors[{i}] = {sensor!r} with packets: {exc}"
                ) from exc
    boxes = dataset.shards[0].boxes
    if boxes is not None:
        from acres_lidar_ros.errors import SceneError
        from acres_lidar_ros.scene.box_tracks import load_box_tracks

        try:
            load_box_tracks(boxes)
        except SceneError as exc:
            raise ConfigError(f"dataset file {path!r}: boxes: {exc}") from exc


def shard_checksum(shard_dir: Path) -> str:
    """sha256 over every file of a shard except ``shard.json``: relative path, NUL, bytes, sorted."""
    digest = hashlib.sha256()
    for path in sorted(p for p in Path(shard_dir).rglob("*") if p.is_file() and p.name != SHARD_FILE):
        digest.update(path.relative_to(shard_dir).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


def record_shard(spec: ShardSpec, out_dir: str, threads: int = 1, sequence: str | None = None) -> dict:
    """Record one shard into ``out_dir/shards/<id>`` (via ``.partial``), and its layouts as
    sequence ``sequence``; returns its ``shard.json``."""
    import numba
    import numpy as np

    from acres_lidar_ros import cores
    from acres_lidar_ros.apps.cmd_export import export_run
    from acres_lidar_ros.apps.cmd_record import record_drive
    from acres_lidar_ros.apps.labels_cli import run_point_type
    from acres_lidar_ros.apps.packet_flags import recorded_packet_sink
    from acres_lidar_ros.body.self_returns import sensor_self_table
    from acres_lidar_ros.config.sensors import load_sensor_config
    from acres_lidar_ros.outputs.json_files import write_json
    from acres_lidar_ros.outputs.tum import read_tum
    from acres_lidar_ros.runtime.startup import freeze_startup_objects
    from acres_lidar_ros.scan.scan_types import ScanOptions
    from acres_lidar_ros.scan.scanner import Scanner
    from acres_lidar_ros.scene.box_tracks import BoxTracks, load_box_tracks
    from acres_lidar_ros.scene.farm_variation import vehicle_tracks
    from acres_lidar_ros.scene.tour import default_tour
    from acres_lidar_ros.sensor.poses import PoseHistory

    started_s, started_cpu, started_thread = time.perf_counter(), _cpu_s(), time.thread_time()
    root = Path(out_dir)
    final = root / "shards" / spec.shard_id
    if (final / SHARD_FILE).is_file():
        return json.loads((final / SHARD_FILE).read_text())
    (root / ".attempts").mkdir(exist_ok=True)
    with open(root / ".attempts" / f"{spec.shard_id}.log", "a") as log:  # one line per attempt
        log.write(f"{time.strftime('%FT%TZ')} pid {os.getpid()} on {socket.gethostname()}\n")
    for old in (root / ".partial").glob(f"{spec.shard_id}.*"):
        shutil.rmtree(old, ignore_errors=True)  # a half-written attempt: redone from scratch
    partial = root / ".partial" / f"{spec.shard_id}.{uuid.uuid4().hex[:12]}"
    # The worker's share of the cores: numba's pool, the passes' parts (cores.py) and Embree's casts.
    numba.set_num_threads(max(1, min(threads, numba.config.NUMBA_NUM_THREADS)))  # type: ignore[attr-defined]
    cores.set_parts(min(threads, cores.DEFAULT_PARTS))
    config = load_sensor_config(spec.sensor)
    world = {k: spec.drawn[k] for k in ("crop_growth", "harvested", "soil_wetness") if k in spec.drawn}
    scene_s = time.perf_counter()
    scene, tracer = _tracer(spec.scene, spec.farm_seed, json.dumps(world, sort_keys=True), threads)
    scene_s = time.perf_counter() - scene_s
    options = ScanOptions(
        seed=spec.seed, rain_mm_per_h=spec.rain_mm_per_h, visibility_m=spec.visibility_m, truth=spec.truth
    )
    self_table = sensor_self_table(config) if options.self_returns else None
    scanner = Scanner(config, options=options, tracer=tracer, self_table=self_table)
    if spec.tour == "default":
        times, positions, quaternions = default_tour(scene)
        trajectory = PoseHistory.from_arrays(times, positions, quaternions, where="built-in tour")
    else:
        times, positions, quaternions = read_tum(Path(spec.tour))
        trajectory = PoseHistory.from_arrays(times, positions, quaternions, where=spec.tour)
    tracks = load_box_tracks(spec.boxes) if spec.boxes is not None else None
    t_end = trajectory.end_s if spec.duration_s is None else min(trajectory.end_s, trajectory.start_s + spec.duration_s)
    drawn_boxes = None
    if spec.drawn.get("vehicles"):
        start_xy = trajectory.transforms(np.array([trajectory.start_s]))[0][:2, 3]
        drawn_boxes = vehicle_tracks(scene, start_xy, trajectory.start_s, t_end + 1.0, spec.drawn["vehicles"])
        tracks = BoxTracks.from_dict(drawn_boxes, where="drawn vehicles")
    freeze_startup_objects()
    summary = record_drive(
        scanner,
        trajectory,
        partial,
        duration_s=spec.duration_s,
        profile=run_point_type(spec.point_type, spec.labels),
        files=spec.files,
        boxes_at=None if tracks is None else tracks.boxes_at,
        run={"command": "dataset", "shard": spec.shard_id, **spec.as_dict()},
        labels=spec.labels,
        vehicle_object_ids=() if tracks is None else [t.object_id for t in tracks.tracks],
        packets=None if spec.packets is None else recorded_packet_sink(spec.packets, spec.sensor, config),
    )
    if drawn_boxes is not None:  # the drawn vehicles as a box-tracks file: the shard exports alone
        write_json(partial / BOXES_FILE, drawn_boxes)
    if spec.layouts:
        kitti_type = next((v["kitti_type"] for v in spec.drawn.get("vehicles", ())), "Car")
        export_run(partial, root, spec.layouts, sequence or "00", tracks, kitti_type)
    info = {
        "shard": spec.shard_id,
        "sequence": sequence,
        "config": spec.as_dict(),
        "seed": spec.seed,
        "drawn": spec.drawn,
        "figures": {
            "scans": summary.scans,
            "points": summary.points,
            "packets": summary.packets,
            "sim_seconds": summary.sim_seconds,
            "seconds": summary.seconds,
            "real_time_factor": summary.real_time_factor,
            "worker_peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,  # KiB on Linux
            "wall_s": time.perf_counter() - started_s,
            "cpu_s": _cpu_s() - started_cpu,
            "thread_cpu_s": time.thread_time() - started_thread,  # the shard's own thread: its critical path
            "scene_s": scene_s,
            "worker_cpu_s": _cpu_s(),
            "threads": threads,
        },
        "checksum": shard_checksum(partial),
        "worker_pid": os.getpid(),
    }
    write_json(partial / SHARD_FILE, info)
    final.parent.mkdir(parents=True, exist_ok=True)
    os.rename(partial, final)  # whole or not at all
    return info


# --- the driver -------------------------------------------------------------------------------
def check_ray_address(address: str) -> None:
    """Refuse an address where nothing listens (connection refused, no route, bad name) at once."""
    hostport = address.split("://", 1)[-1]
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ConfigError(f"--ray-address {address!r}: expected HOST:PORT (the head node's GCS, e.g. 10.0.0.5:6379)")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=ADDRESS_TIMEOUT_S):
            pass
    except OSError as exc:
        raise ConfigError(
            f"--ray-address {address!r}: no Ray cluster reachable there ({exc.strerror or exc}); start one with "
            "'ray start --head' and give its address, or leave --ray-address out to run on a local Ray"
        ) from exc


def _prepare_out(dataset: Dataset, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    stored = out / "dataset.json"
    record = {"path": str(dataset.path), "dataset": dataset.raw}
    if stored.exists():
        try:
            previous = json.loads(stored.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise OutputError(f"{stored}: unreadable ({exc}); give a new --out directory") from exc
        if previous.get("dataset") != dataset.raw:
            raise OutputError(
                f"--out {out}: holds another dataset ({previous.get('path')}); give a new --out or the same dataset file"
            )
    elif any(p.name not in (".partial", ".attempts", "shards") for p in out.iterdir()):
        raise OutputError(f"--out {out}: exists, is not empty and is not a dataset directory; give a new --out path")
    else:
        from acres_lidar_ros.outputs.files import atomic_write

        atomic_write(stored, (json.dumps(record, indent=2, sort_keys=True) + "\n").encode())


def _write_manifest(out: Path, entries: list[dict], retries: int) -> Path:
    counts = {status: sum(e["status"] == status for e in entries) for status in ("done", "failed")}
    stopped = sum(e["status"] == "stopped" for e in entries)
    if stopped:
        counts["stopped"] = stopped
    manifest = {"shards": entries, "counts": counts, "retries": retries, "written_utc": time.strftime("%FT%TZ")}
    tmp = out / f".manifest.{uuid.uuid4().hex[:8]}.json"
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, out / "manifest.json")  # the manifest is rewritten by every run, whole
    return out / "manifest.json"


def _attempts(out: Path, spec: ShardSpec) -> int:
    """Attempts at a shard so far, all runs together (``.attempts/<id>.log``; on a cluster, where
    ``DIR`` is shared storage)."""
    log = out / ".attempts" / f"{spec.shard_id}.log"
    return len(log.read_text().splitlines()) if log.is_file() else 0


def _error_text(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None)
    text = str(cause if cause is not None else exc).strip()
    return text.splitlines()[-1] if text else type(exc).__name__


def run_dataset(
    dataset: Dataset,
    out: Path,
    ray_address: str | None = None,
    workers: int | None = None,
    retries: int = RETRIES,
    progress: bool = True,
    should_stop: Callable[[], bool] | None = None,
) -> tuple[dict, list[dict]]:
    """Run every unfinished shard on Ray; returns ``(counts, manifest entries)``.

    ``should_stop()`` is asked twice a second; once it is true the shards not yet finished are
    cancelled and listed as ``"stopped"`` (a rerun does them)."""
    out = Path(out).resolve()
    if ray_address is not None:
        check_ray_address(ray_address)
    _prepare_out(dataset, out)
    finished = {s.shard_id: out / "shards" / s.shard_id / SHARD_FILE for s in dataset.shards}
    results: dict[str, dict] = {}
    pending = []
    for spec in dataset.shards:
        if finished[spec.shard_id].is_file():
            results[spec.shard_id] = {
                "status": "done",
                "resumed": True,
                **json.loads(finished[spec.shard_id].read_text()),
            }
        else:
            pending.append(spec)
    sequences = dict(zip((s.shard_id for s in dataset.shards), sequence_names(len(dataset.shards))))
    if pending:
        results.update(
            _run_on_ray(
                pending, out, ray_address, workers, retries, progress, len(dataset.shards), should_stop, sequences
            )
        )
    entries = [
        results.get(s.shard_id)
        or {"status": "stopped", "shard": s.shard_id, "config": s.as_dict(), "seed": s.seed, "drawn": s.drawn}
        for s in dataset.shards
    ]
    for entry in entries:
        entry["sequence"] = sequences[entry["shard"]]
    _write_manifest(out, entries, retries)
    counts = {
        "done": sum(e["status"] == "done" for e in entries),
        "failed": sum(e["status"] == "failed" for e in entries),
    }
    counts["resumed"] = sum(bool(e.get("resumed")) for e in entries)
    counts["stopped"] = sum(e["status"] == "stopped" for e in entries)
    return counts, entries


def worker_threads(ray_address: str | None, workers: int | None) -> int:
    """Threads of each shard: on a local Ray of ``workers`` CPUs, this machine's cores shared
    between them (2 cores, 1 worker: 2 threads; 2 workers: 1 each); on a cluster 1, as each
    node runs one shard per CPU."""
    cores = os.cpu_count() or 1
    if ray_address is not None:
        return 1
    return max(1, cores // (workers or cores))


@contextlib.contextmanager
def _local_only(ray: Any):
    """While a local Ray starts: its node address is 127.0.0.1 and its processes (which inherit
    the environment) listen there only. Ray reads ``RAY_LOCAL_ONLY_ENV`` once, at import, into
    ``ray_constants.ENABLE_RAY_CLUSTER``: both are set here and put back afterwards, so a later
    ``--ray-address`` run in the same process joins a cluster as usual."""
    from ray._private import ray_constants

    before_env, before = os.environ.get(RAY_LOCAL_ONLY_ENV), ray_constants.ENABLE_RAY_CLUSTER
    os.environ[RAY_LOCAL_ONLY_ENV] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = before
        if before_env is None:
            os.environ.pop(RAY_LOCAL_ONLY_ENV, None)
        else:
            os.environ[RAY_LOCAL_ONLY_ENV] = before_env


def _run_on_ray(
    pending, out, ray_address, workers, retries, progress, total, should_stop, sequences
) -> dict[str, dict]:
    try:
        import ray
    except ImportError as exc:
        raise ConfigError(f"dataset needs Ray ({exc}); install it with pip install 'acres_lidar_ros[dataset]'") from exc
    from tqdm import tqdm

    started = time.perf_counter()
    try:
        if ray_address is None:
            with _local_only(ray):
                ray.init(
                    address="local",
                    num_cpus=workers or os.cpu_count() or 1,
                    include_dashboard=False,
                    log_to_driver=False,
                    configure_logging=False,
                    _node_ip_address="127.0.0.1",
                )
        else:
            ray.init(address=ray_address, log_to_driver=False, configure_logging=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        where = "a local Ray" if ray_address is None else f"the Ray cluster at --ray-address {ray_address!r}"
        raise ConfigError(f"cannot start or join {where}: {exc}") from exc
    results: dict[str, dict] = {}
    bar = tqdm(total=total, initial=total - len(pending), unit="shard", file=sys.stderr, disable=not progress)
    try:
        task = ray.remote(record_shard).options(num_cpus=1, max_retries=retries, retry_exceptions=True)
        threads = worker_threads(ray_address, workers)
        refs = {task.remote(spec, str(out), threads, sequences[spec.shard_id]): spec for spec in pending}
        submitted = time.perf_counter()
        waiting = list(refs)
        while waiting:
            if should_stop is not None and should_stop():
                for ref in waiting:
                    ray.cancel(ref, force=True)
                break
            ready, waiting = ray.wait(waiting, num_returns=1, timeout=0.5)
            if not ready:
                continue
            spec = refs[ready[0]]
            try:
                results[spec.shard_id] = {"status": "done", "resumed": False, **ray.get(ready[0])}
                results[spec.shard_id]["attempts"] = _attempts(out, spec)
                results[spec.shard_id]["done_after_s"] = time.perf_counter() - started  # Ray's start included
                results[spec.shard_id]["done_after_submit_s"] = time.perf_counter() - submitted
            except Exception as exc:  # a Ray task error or a worker that died, after its retries
                results[spec.shard_id] = {
                    "status": "failed",
                    "shard": spec.shard_id,
                    "config": spec.as_dict(),
                    "seed": spec.seed,
                    "attempts": _attempts(out, spec),
                    "error": f"shard {spec.shard_id} failed after {_attempts(out, spec)} attempts: {_error_text(exc)}",
                }
            bar.update(1)
    finally:
        bar.close()
        ray.shutdown()
    return results


# --- the command ------------------------------------------------------------------------------
def add_dataset_parser(sub: Any) -> argparse.ArgumentParser:
    parser = sub.add_parser("dataset", help="record many drives as shards on Ray (docs/datasets.md)")
    parser.add_argument("--config", type=Path, required=True, metavar="DATASET.json", help="the dataset file")
    parser.add_argument("--out", type=Path, required=True, help="dataset directory (new, or one to resume)")
    parser.add_argument("--ray-address", metavar="ADDR", help="join the Ray cluster at HOST:PORT (default: local Ray)")
    parser.add_argument("--workers", type=int, metavar="N", help="CPUs of the local Ray (default: all cores)")
    parser.add_argument(
        "--retries", type=int, default=RETRIES, help=f"runs of a failing shard after the first (default {RETRIES})"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    from acres_lidar_ros.apps.cmd_export import add_export_parser

    add_export_parser(sub)  # the layouts of one record run: here, to keep apps.cli short
    return parser


def cmd_dataset(args: argparse.Namespace) -> int:
    """``dataset``, or ``export`` (``apps.cmd_export``), by ``args.command``."""
    if args.command == "export":
        from acres_lidar_ros.apps.cmd_export import cmd_export

        return cmd_export(args)
    if args.workers is not None and not 1 <= args.workers <= 4096:
        raise ConfigError(f"--workers {args.workers}: expected an integer from 1 to 4096")
    if not 0 <= args.retries <= 100:
        raise ConfigError(f"--retries {args.retries}: expected an integer from 0 to 100")
    dataset = load_dataset(args.config)
    check_dataset(dataset)
    started = time.perf_counter()
    stop = getattr(args, "_stop", None)
    counts, entries = run_dataset(
        dataset,
        args.out,
        args.ray_address,
        args.workers,
        args.retries,
        progress=not args.no_progress,
        should_stop=None if stop is None else (lambda: stop.requested is not None),
    )
    minutes = (time.perf_counter() - started) / 60.0
    ran = counts["done"] - counts["resumed"]
    rate = f", {ran / minutes:.1f} shards per minute" if ran and minutes > 0 else ""
    print(
        f"{counts['done']} of {len(entries)} shards done ({counts['resumed']} already there), "
        f"{counts['failed']} failed, {counts['stopped']} stopped{rate} -> {args.out}"
    )
    fresh = [e for e in entries if e["status"] == "done" and not e.get("resumed")]
    if fresh:
        first = min(e["done_after_s"] for e in fresh)
        peak = max(e["figures"].get("worker_peak_rss_mib", 0.0) for e in fresh)
        print(f"first shard done {first:.1f} s after Ray's start; worker peak memory {peak:.0f} MiB")
    for entry in entries:
        if entry["status"] == "failed":
            print(f"acres-lidar dataset: {entry['error']}", file=sys.stderr)
    return 1 if counts["failed"] else 0


__all__ = ["RETRIES", "add_dataset_parser", "cmd_dataset", "record_shard", "run_dataset", "shard_checksum"]
