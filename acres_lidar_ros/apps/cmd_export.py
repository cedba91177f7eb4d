"""``acres-lidar export --run RUN_DIR --layout semantic_kitti --out DIR``: a ``record`` run in the
layouts training code reads (``outputs.kitti_formats``; ``acres-lidar dataset`` writes its shards
the same way, with ``"layouts"``).

From the run it reads ``lidar.jsonl`` (each scan's stamp, sensor pose and files), the PCD files
(the primary return of each beam; the beams without one are left out), ``trajectory_gt.tum``
(the mount, for the object calib) and, for ``kitti_objects``, the other vehicles' box tracks
(``--boxes``, default the run's own ``--boxes`` file, or a dataset shard's ``boxes.json``). It writes, for sequence ``NN``
(``--sequence``, default ``00``)::

    DIR/semantic_kitti/sequences/NN/velodyne/000000.bin, labels/000000.label, poses.txt,
                                    calib.txt, times.txt, instances.json
    DIR/semantic_kitti/class_map.json, poses/NN.txt (poses.txt where KITTI odometry keeps it)
    DIR/kitti_objects/sequences/NN/velodyne/000000.bin, label_2/000000.txt,
                                   label_lidar/000000.txt, calib/000000.txt

A sequence is written into a hidden directory beside it and renamed into place once whole.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acres_lidar_ros.errors import ConfigError, OutputError

if TYPE_CHECKING:
    import numpy as np

LAYOUT_CHOICES = ("semantic_kitti", "kitti_objects")
INTENSITY_FULL_SCALE = 255.0  # the PCD intensity (0 to 255) -> KITTI remission (0 to 1)
FRAME_DIGITS = 6


def _pose_matrix(pose: dict) -> np.ndarray:
    import numpy as np
    from scipy.spatial.transform import Rotation

    T = np.eye(4)
    T[:3, :3] = Rotation.from_quat(pose["quaternion_xyzw"]).as_matrix()
    T[:3, 3] = pose["position_m"]
    return T


def _read_run(run_dir: Path) -> tuple[dict, list[dict]]:
    try:
        config = json.loads((run_dir / "config.json").read_text())
        rows = [json.loads(line) for line in (run_dir / "lidar.jsonl").read_text().splitlines() if line.strip()]
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(
            f"--run {run_dir}: not a record run ({exc}); expected config.json and lidar.jsonl from acres-lidar record"
        ) from exc
    lidar = config.get("sensors", {}).get("lidar", {})
    if lidar.get("output_frame", "sensor") != "sensor" or lidar.get("coordinates", "cartesian") != "cartesian":
        raise ConfigError(
            f"--run {run_dir}: lidar.output_frame = {lidar.get('output_frame')!r}, lidar.coordinates = "
            f"{lidar.get('coordinates')!r}: the KITTI layouts need the points in the sensor frame, Cartesian"
        )
    if not rows:
        raise ConfigError(f"--run {run_dir}: lidar.jsonl lists no scan; nothing to export")
    return config, rows


def _pcd_of(run_dir: Path, row: dict) -> Path:
    names = [n for n in row["files"] if n.endswith(".pcd")]
    if not names:
        raise ConfigError(
            f"--run {run_dir}: scan {row['scan_index']} has no PCD file (files: {row['files']}); "
            "record with --files pcd or both to export it"
        )
    return run_dir / names[0]


def _mount(run_dir: Path, row: dict) -> np.ndarray:
    """T_lidar_base: the base pose (trajectory_gt.tum) and the sensor pose at the scan's last firing."""
    import numpy as np

    from acres_lidar_ros.outputs.tum import read_tum
    from acres_lidar_ros.sensor.poses import PoseHistory

    times, positions, quaternions = read_tum(run_dir / "trajectory_gt.tum")
    history = PoseHistory.from_arrays(times, positions, quaternions, where=str(run_dir / "trajectory_gt.tum"))
    t = min(max(row["sweep"]["last_firing_time_s"], history.start_s), history.end_s)
    return np.linalg.inv(_pose_matrix(row["sensor_pose"])) @ history.transforms(np.array([t]))[0]


def _boxes_in_lidar(tracks: Any, t_s: float, T_world_lidar: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, float]]:
    """(centre, length/width/height, heading) in the LiDAR frame of each box at ``t_s``."""
    import numpy as np
    from scipy.spatial.transform import Rotation

    out = []
    T_lidar_world = np.linalg.inv(T_world_lidar)
    for box in tracks.boxes_at(t_s) if tracks is not None else ():
        R = T_lidar_world[:3, :3] @ Rotation.from_quat(box.quaternion_xyzw).as_matrix()
        centre = T_lidar_world[:3, :3] @ np.asarray(box.centre_m) + T_lidar_world[:3, 3]
        out.append((centre, 2.0 * np.asarray(box.half_extents_m, float), float(np.arctan2(R[1, 0], R[0, 0]))))
    return out


def _fresh(final: Path) -> Path:
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.parent / f".{final.name}.{uuid.uuid4().hex[:12]}"
    for sub in ("velodyne", "labels", "label_2", "label_lidar", "calib"):
        (tmp / sub).mkdir(parents=True, exist_ok=True)
    return tmp


def _publish(tmp: Path, final: Path, keep: tuple[str, ...]) -> None:
    for sub in ("velodyne", "labels", "label_2", "label_lidar", "calib"):
        if sub not in keep:
            (tmp / sub).rmdir()
    if final.exists():
        shutil.rmtree(final)  # an earlier, unfinished attempt of this shard
    os.rename(tmp, final)


def export_run(
    run_dir: Path,
    out_dir: Path,
    layouts: tuple[str, ...],
    sequence: str = "00",
    tracks: Any = None,
    kitti_type: str = "Car",
) -> dict[str, Path]:
    """Write ``layouts`` of the record run ``run_dir`` as sequence ``sequence`` under ``out_dir``;
    returns each layout's sequence directory. ``tracks``: the other vehicles' ``BoxTracks``."""
    import numpy as np

    from acres_lidar_ros.config.material_table import CLASS_NAMES
    from acres_lidar_ros.outputs import kitti_formats as kf
    from acres_lidar_ros.outputs.files import atomic_write
    from acres_lidar_ros.outputs.pcd import read_pcd
    from acres_lidar_ros.scene.instances import BODY_INSTANCE, NO_INSTANCE

    run_dir, out_dir = Path(run_dir), Path(out_dir)
    _, rows = _read_run(run_dir)
    semantic_of_class = kf.semantic_labels(CLASS_NAMES)
    finals = {layout: out_dir / layout / "sequences" / sequence for layout in layouts}
    tmps = {layout: _fresh(final) for layout, final in finals.items()}
    sem, obj = tmps.get("semantic_kitti"), tmps.get("kitti_objects")
    instance_ids: dict[int, int] = {}  # our uint32 instance -> the sequence's 16-bit id, by first appearance
    poses = []
    T_lidar_base = _mount(run_dir, rows[0])
    for k, row in enumerate(rows):
        name = f"{k:0{FRAME_DIGITS}d}"
        cloud = read_pcd(_pcd_of(run_dir, row)).ravel()
        valid = np.isfinite(cloud["x"]) & np.isfinite(cloud["y"]) & np.isfinite(cloud["z"])
        cloud = cloud[valid]
        xyz = np.column_stack([cloud["x"], cloud["y"], cloud["z"]])
        remission = np.clip(np.asarray(cloud["intensity"], np.float32) / INTENSITY_FULL_SCALE, 0.0, 1.0)
        velodyne = kf.velodyne_bytes(xyz, remission)
        first = tmps[layouts[0]] / "velodyne" / f"{name}.bin"
        atomic_write(first, velodyne)
        for layout in layouts[1:]:
            os.link(first, tmps[layout] / "velodyne" / f"{name}.bin")  # the same bytes, once on the disk
        if sem is not None:
            if cloud.dtype.names is None or "class" not in cloud.dtype.names:
                raise ConfigError(f"--run {run_dir}: its PCD files have no labels; record with --labels to export them")
            instance = np.asarray(cloud["instance"], np.uint32)
            semantic = semantic_of_class[np.asarray(cloud["class"], np.intp)]
            semantic = np.where(instance == BODY_INSTANCE, 0, semantic).astype(np.uint16)  # the own vehicle
            thing = ~np.isin(semantic, list(kf.STUFF_LABELS)) & (instance != NO_INSTANCE) & (instance != BODY_INSTANCE)
            for value in np.unique(instance[thing]).tolist():
                instance_ids.setdefault(int(value), len(instance_ids) + 1)
            if len(instance_ids) > kf.MAX_INSTANCE_ID:
                raise OutputError(f"--run {run_dir}: more than {kf.MAX_INSTANCE_ID} instances in one sequence")
            keys = np.array(sorted(instance_ids), np.uint32)
            local = np.zeros(len(instance), np.uint16)
            if len(keys):
                ids = np.array([instance_ids[int(v)] for v in keys], np.uint16)
                local[thing] = ids[np.searchsorted(keys, instance[thing])]
            atomic_write(sem / "labels" / f"{name}.label", kf.label_bytes(semantic, local))
        T_world_lidar = _pose_matrix(row["sensor_pose"])
        poses.append(T_world_lidar)
        if obj is not None:
            boxes = _boxes_in_lidar(tracks, row["stamp_ns"] * 1e-9, T_world_lidar)
            atomic_write(
                obj / "label_2" / f"{name}.txt", "".join(kf.object_line(kitti_type, *b) + "\n" for b in boxes).encode()
            )
            atomic_write(
                obj / "label_lidar" / f"{name}.txt",
                "".join(kf.lidar_box_line(kitti_type, *b) + "\n" for b in boxes).encode(),
            )
            atomic_write(obj / "calib" / f"{name}.txt", kf.object_calib_text(T_lidar_base).encode())
    if sem is not None:
        stamps = np.array([row["stamp_ns"] for row in rows], np.int64)
        pose_text = kf.pose_lines(kf.camera_poses(np.array(poses))).encode()
        atomic_write(sem / "poses.txt", pose_text)
        (out_dir / "semantic_kitti" / "poses").mkdir(parents=True, exist_ok=True)  # KITTI odometry's place
        atomic_write(out_dir / "semantic_kitti" / "poses" / f"{sequence}.txt", pose_text, overwrite=True)
        atomic_write(sem / "times.txt", kf.times_lines((stamps - stamps[0]) * 1e-9).encode())
        atomic_write(sem / "calib.txt", kf.odometry_calib_text().encode())
        table = {"columns": ["id", "instance"], "rows": [[i, v] for v, i in instance_ids.items()]}
        atomic_write(sem / "instances.json", (json.dumps(table) + "\n").encode())
        class_map = {
            "labels": {str(k): v for k, v in kf.SEMANTIC_KITTI_LABELS.items()},
            "classes": {n: int(semantic_of_class[i]) for i, n in enumerate(CLASS_NAMES)},
            "body": 0,
        }
        atomic_write(
            out_dir / "semantic_kitti" / "class_map.json",
            (json.dumps(class_map, indent=2) + "\n").encode(),
            overwrite=True,
        )
    keep = {"semantic_kitti": ("velodyne", "labels"), "kitti_objects": ("velodyne", "label_2", "label_lidar", "calib")}
    for layout in layouts:
        _publish(tmps[layout], finals[layout], keep[layout])
    return finals


def add_export_parser(sub: Any) -> argparse.ArgumentParser:
    parser = sub.add_parser(
        "export", help="a record run in the SemanticKITTI or KITTI object layout (docs/datasets.md)"
    )
    parser.add_argument(
        "--run", type=Path, required=True, metavar="RUN_DIR", help="a directory acres-lidar record wrote"
    )
    parser.add_argument("--layout", choices=LAYOUT_CHOICES, action="append", required=True, help="repeat for both")
    parser.add_argument("--out", type=Path, required=True, help="dataset root (the layouts' folders go inside)")
    parser.add_argument(
        "--sequence", default="00", metavar="NN", help="sequence number, two digits or more (default 00)"
    )
    parser.add_argument(
        "--boxes", type=Path, metavar="FILE", help="box tracks (default: the run's record --boxes file)"
    )
    parser.add_argument("--kitti-type", default="Car", help="KITTI object type of the boxes (default Car)")
    return parser


def cmd_export(args: argparse.Namespace) -> int:
    from acres_lidar_ros.config.dataset_draws import KITTI_TYPES
    from acres_lidar_ros.scene.box_tracks import load_box_tracks

    if not (args.sequence.isdigit() and len(args.sequence) >= 2):
        raise ConfigError(f"--sequence {args.sequence!r}: expected two digits or more, e.g. 00 or 07")
    if args.kitti_type not in KITTI_TYPES:
        raise ConfigError(f"--kitti-type {args.kitti_type!r}: allowed: {', '.join(KITTI_TYPES)}")
    layouts = tuple(dict.fromkeys(args.layout))
    config, _ = _read_run(args.run)
    boxes = args.boxes or config.get("run", {}).get("boxes")
    if boxes is None and (args.run / "boxes.json").is_file():  # a dataset shard's drawn vehicles
        boxes = args.run / "boxes.json"
    tracks = load_box_tracks(boxes) if boxes and "kitti_objects" in layouts else None
    finals = export_run(args.run, args.out, layouts, args.sequence, tracks, args.kitti_type)
    for layout, final in finals.items():
        print(f"{layout}: {len(list((final / 'velodyne').iterdir()))} scans -> {final}")
    return 0


__all__ = ["LAYOUT_CHOICES", "add_export_parser", "cmd_export", "export_run"]
