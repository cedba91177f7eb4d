#!/usr/bin/env python3
"""Does a LiDAR odometry that no one here wrote track a recorded drive? KISS-ICP on a run directory.

    .venv/bin/pip install kiss-icp          # a check tool, not a dependency of the package
    .venv/bin/acres-lidar record --point-type XYZIRT --out runs/tour
    .venv/bin/python scripts/odometry_check.py runs/tour

Reads the run's rosbag2 (``bag/``): every ``/lidar/points`` cloud (XYZIRT: x, y, z and the
absolute ``timestamp`` of each point), the LiDAR mount from ``/tf_static`` (base_footprint ->
the cloud's frame), and the ground truth ``trajectory_gt.tum`` (base_footprint in the world,
100 Hz). Each cloud's finite points go to KISS-ICP's ``register_frame`` with their timestamps,
so KISS-ICP deskews them itself; its ``min_range`` is 2 m (the vehicle's own body stays out),
everything else is KISS-ICP's default (``max_range`` 100 m, voxel 1 m).

KISS-ICP deskews a scan to its last point, so its pose of scan k is the LiDAR at the latest
point time of scan k. The ground truth LiDAR pose at that time (base_footprint interpolated,
times the mount) is compared with KISS-ICP's, both expressed from the first scan's LiDAR pose:

* ``drift_percent``: distance between the two positions at the last scan, % of the LiDAR's path
  length (ground truth);
* ``max_yaw_error_deg``: the largest yaw difference (heading about world z) over every scan;
* ``max_position_error_m``, ``max_rotation_error_deg``: the worst position and full-rotation
  differences over every scan.

Prints one line per ~10 s of the drive and the figures as one JSON line; ``--tum FILE`` writes
KISS-ICP's LiDAR poses in the world (TUM). Exit 0 when ``drift_percent <= --max-drift-percent``
(2) and ``max_yaw_error_deg <= --max-yaw-deg`` (2), else 1; 2 for a run it cannot read.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from scipy.spatial.transform import Rotation, Slerp


def _kiss(min_range_m: float, max_range_m: float, deskew: bool):
    try:
        from kiss_icp.config import load_config
        from kiss_icp.kiss_icp import KissICP
    except ImportError as err:
        raise SystemExit(
            f"odometry_check: kiss-icp is not installed ({err}); `.venv/bin/pip install kiss-icp`"
        ) from err
    config = load_config(None)
    config.data.min_range = min_range_m
    config.data.max_range = max_range_m
    config.data.deskew = deskew
    config.mapping.voxel_size = max_range_m / 100.0  # KISS-ICP's own default for this max_range
    return KissICP(config), config


def _matrix(position, quaternion_xyzw) -> np.ndarray:
    t = np.eye(4)
    t[:3, :3] = Rotation.from_quat(quaternion_xyzw).as_matrix()
    t[:3, 3] = position
    return t


def _read_bag(bag_dir: Path, topic: str):
    """Yields ``("mount", T_base_lidar)`` once and ``("cloud", points (n, 3), timestamps (n,))``."""
    from rosbags.highlevel import AnyReader

    from acres_lidar_ros.outputs.pointcloud2 import decode_pointcloud2

    with AnyReader([bag_dir]) as reader:
        mount = [c for c in reader.connections if c.topic == "/tf_static"]
        for connection, _, raw in reader.messages(connections=mount):
            for tf in reader.deserialize(raw, connection.msgtype).transforms:
                q, p = tf.transform.rotation, tf.transform.translation
                yield "mount", tf.child_frame_id, _matrix([p.x, p.y, p.z], [q.x, q.y, q.z, q.w])
        clouds = [c for c in reader.connections if c.topic == topic]
        if not clouds:
            raise SystemExit(f"odometry_check: {bag_dir} has no {topic} topic")
        for connection, _, raw in reader.messages(connections=clouds):
            message = reader.deserialize(raw, connection.msgtype)
            cloud = decode_pointcloud2(message).reshape(-1)
            if "timestamp" not in (cloud.dtype.names or ()):
                raise SystemExit(
                    f"odometry_check: {topic} has fields {cloud.dtype.names}; record with --point-type XYZIRT"
                )
            xyz = np.column_stack([cloud["x"], cloud["y"], cloud["z"]]).astype(np.float64)
            keep = np.all(np.isfinite(xyz), axis=1)
            yield "cloud", message.header.frame_id, (xyz[keep], cloud["timestamp"][keep].astype(np.float64))


def _yaw(rotations: np.ndarray) -> np.ndarray:
    return np.arctan2(rotations[:, 1, 0], rotations[:, 0, 0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path, help="run directory of `acres-lidar record` (bag/, trajectory_gt.tum)")
    parser.add_argument("--topic", default="/lidar/points")
    parser.add_argument("--min-range", type=float, default=2.0, help="KISS-ICP data.min_range, m (default 2)")
    parser.add_argument("--max-range", type=float, default=100.0, help="KISS-ICP data.max_range, m (default 100)")
    parser.add_argument("--max-drift-percent", type=float, default=2.0)
    parser.add_argument("--max-yaw-deg", type=float, default=2.0)
    parser.add_argument("--no-deskew", action="store_true", help="turn KISS-ICP's deskewing off (for comparison)")
    parser.add_argument("--max-scans", type=int, help="only the first N scans (a quicker look at the start)")
    parser.add_argument("--tum", type=Path, help="write KISS-ICP's LiDAR poses in the world here (TUM)")
    args = parser.parse_args(argv)

    from acres_lidar_ros.errors import AcresLidarError
    from acres_lidar_ros.outputs.tum import read_tum, write_tum

    try:
        gt_t, gt_p, gt_q = read_tum(args.run / "trajectory_gt.tum")
    except (AcresLidarError, OSError) as err:
        print(f"odometry_check: {err}", file=sys.stderr)
        return 2
    gt_slerp = Slerp(gt_t, Rotation.from_quat(gt_q))
    odometry, config = _kiss(args.min_range, args.max_range, not args.no_deskew)
    mounts: dict[str, np.ndarray] = {}
    stamps, estimates, points_used = [], [], []
    started = time.perf_counter()
    for kind, frame, payload in _read_bag(args.run / "bag", args.topic):
        if kind == "mount":
            mounts[frame] = payload
            continue
        xyz, timestamps = payload
        odometry.register_frame(xyz, timestamps)
        stamps.append(float(timestamps.max()))
        estimates.append(odometry.last_pose.copy())
        points_used.append(len(xyz))
        if args.max_scans is not None and len(stamps) >= args.max_scans:
            break
        if len(stamps) % 100 == 0:
            print(f"  scan {len(stamps)}: t = {stamps[-1] - gt_t[0]:.1f} s", file=sys.stderr)
    wall_s = time.perf_counter() - started
    if not stamps:
        print(f"odometry_check: no clouds on {args.topic}", file=sys.stderr)
        return 2
    if frame not in mounts:
        print(f"odometry_check: /tf_static has no transform to the cloud frame {frame!r}", file=sys.stderr)
        return 2
    t_base_lidar = mounts[frame]
    t = np.clip(np.array(stamps), gt_t[0], gt_t[-1])
    base = np.repeat(np.eye(4)[None], len(t), axis=0)
    base[:, :3, :3] = gt_slerp(t).as_matrix()
    base[:, :3, 3] = np.column_stack([np.interp(t, gt_t, gt_p[:, k]) for k in range(3)])
    gt_lidar = base @ t_base_lidar
    est_lidar = gt_lidar[0] @ np.array(estimates)  # KISS-ICP's poses from the first scan's true pose
    position_error = np.linalg.norm(est_lidar[:, :3, 3] - gt_lidar[:, :3, 3], axis=1)
    path_m = float(np.linalg.norm(np.diff(gt_lidar[:, :3, 3], axis=0), axis=1).sum())
    yaw_error = np.rad2deg(np.angle(np.exp(1j * (_yaw(est_lidar[:, :3, :3]) - _yaw(gt_lidar[:, :3, :3])))))
    relative = np.einsum("nji,njk->nik", gt_lidar[:, :3, :3], est_lidar[:, :3, :3])
    rotation_error = np.rad2deg(Rotation.from_matrix(relative).magnitude())
    step = max(1, len(t) // 12)
    for k in list(range(0, len(t), step)) + [len(t) - 1]:
        print(
            f"  t {t[k] - t[0]:6.1f} s  path {np.linalg.norm(np.diff(gt_lidar[: k + 1, :3, 3], axis=0), axis=1).sum():6.1f} m"
            f"  position error {position_error[k]:6.2f} m  yaw error {yaw_error[k]:+6.2f} deg",
            file=sys.stderr,
        )
    figures = {
        "scans": len(t),
        "duration_s": round(float(t[-1] - t[0]), 2),
        "path_m": round(path_m, 2),
        "final_position_error_m": round(float(position_error[-1]), 3),
        "drift_percent": round(100.0 * float(position_error[-1]) / path_m, 3) if path_m > 0 else None,
        "max_position_error_m": round(float(position_error.max()), 3),
        "max_yaw_error_deg": round(float(np.abs(yaw_error).max()), 3),
        "max_yaw_error_at_s": round(float(t[np.argmax(np.abs(yaw_error))] - t[0]), 2),
        "final_yaw_error_deg": round(float(yaw_error[-1]), 3),
        "max_rotation_error_deg": round(float(rotation_error.max()), 3),
        "median_points_per_scan": int(np.median(points_used)),
        "kiss_icp": {
            "min_range_m": config.data.min_range,
            "max_range_m": config.data.max_range,
            "voxel_size_m": config.mapping.voxel_size,
            "deskew": config.data.deskew,
        },
        "kiss_icp_wall_s": round(wall_s, 1),
    }
    figures["passed"] = bool(
        figures["drift_percent"] is not None
        and figures["drift_percent"] <= args.max_drift_percent
        and figures["max_yaw_error_deg"] <= args.max_yaw_deg
    )
    if args.tum is not None:
        write_tum(args.tum, t, est_lidar[:, :3, 3], Rotation.from_matrix(est_lidar[:, :3, :3]).as_quat())
    print(json.dumps(figures))
    return 0 if figures["passed"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
