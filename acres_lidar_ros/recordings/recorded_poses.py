"""The vehicle's poses and the LiDAR mount of a recording: from ``/odom``, ``/tf`` or a TUM file; the mount from
``/tf_static`` or the sensors file (docs/calibration.md, "Recordings").

``tf_chain`` walks the transforms from the cloud's frame up to the root of the tree: the static
transforms nearest the cloud frame make the mount (base frame -> cloud frame); the first transform
that changes over time is the vehicle's pose (world -> base frame), composed with the static
transforms above it and, for a longer chain, the other moving ones interpolated at its times.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.spatial.transform import Rotation

from acres_lidar_ros.errors import RecordingError
from acres_lidar_ros.outputs.tum import read_tum
from acres_lidar_ros.recordings.bag_source import TransformSamples
from acres_lidar_ros.sensor.poses import PoseHistory

POSE_SOURCES = ("odom", "tf")
MAX_CHAIN = 16


@dataclass(frozen=True)
class VehiclePoses:
    """base_footprint (``child``) in the world (``parent``) over time, and where they came from."""

    parent: str
    child: str
    history: PoseHistory
    source: str


def matrix(position_m: np.ndarray, quaternion_xyzw: np.ndarray) -> np.ndarray:
    """(..., 4, 4) transforms of positions (..., 3) and unit quaternions (..., 4)."""
    position_m = np.asarray(position_m, dtype=np.float64)
    T = np.zeros(position_m.shape[:-1] + (4, 4))
    T[..., :3, :3] = (
        Rotation.from_quat(np.asarray(quaternion_xyzw).reshape(-1, 4))
        .as_matrix()
        .reshape(position_m.shape[:-1] + (3, 3))
    )
    T[..., :3, 3] = position_m
    T[..., 3, 3] = 1.0
    return T


def _history(samples: TransformSamples, where: str) -> PoseHistory:
    return PoseHistory.from_arrays(samples.times_s, samples.positions_m, samples.quaternions_xyzw, where=where)


def _at(samples: TransformSamples, times_s: np.ndarray) -> np.ndarray:
    if samples.static or len(samples.times_s) == 1:
        return np.broadcast_to(matrix(samples.positions_m[-1], samples.quaternions_xyzw[-1]), (len(times_s), 4, 4))
    positions, rotations = _history(samples, f"/tf {samples.parent} -> {samples.child}").interpolate(times_s)
    T = np.zeros((len(times_s), 4, 4))
    T[:, :3, :3], T[:, :3, 3], T[:, 3, 3] = rotations, positions, 1.0
    return T


def tf_chain(transforms: list[TransformSamples], cloud_frame: str) -> tuple[np.ndarray, str, VehiclePoses | None]:
    """The mount and the vehicle poses from a recording's transforms.

    Returns
    -------
    T_base_sensor : (4, 4) the static transforms from the cloud frame up to the first moving one
    base_frame : str, the frame the mount is given in
    poses : VehiclePoses of ``base_frame`` in the root frame, or None when no transform above moves
    """
    by_child: dict[str, TransformSamples] = {}
    for samples in transforms:
        if samples.child in by_child and by_child[samples.child].static and not samples.static:
            continue  # a frame on /tf_static and /tf: the static one
        by_child[samples.child] = samples
    if cloud_frame not in by_child:
        known = ", ".join(sorted(f"{s.parent} -> {s.child}" for s in transforms)) or "none"
        raise RecordingError(
            f"the clouds' frame {cloud_frame!r} is in no transform of the recording; transforms found: {known}"
        )
    chain: list[TransformSamples] = []
    frame = cloud_frame
    while frame in by_child and len(chain) < MAX_CHAIN:
        chain.append(by_child[frame])
        frame = by_child[frame].parent
    T_base_sensor = np.eye(4)
    k = 0
    while k < len(chain) and (chain[k].static or len(chain[k].times_s) == 1):
        T_base_sensor = matrix(chain[k].positions_m[-1], chain[k].quaternions_xyzw[-1]) @ T_base_sensor
        k += 1
    base_frame = chain[k - 1].parent if k else cloud_frame
    if k == len(chain):
        return T_base_sensor, base_frame, None
    moving = chain[k]
    times = moving.times_s
    T = np.broadcast_to(np.eye(4), (len(times), 4, 4)).copy()
    for samples in chain[k:]:
        T = _at(samples, times) @ T
    quats = Rotation.from_matrix(T[:, :3, :3]).as_quat()
    history = PoseHistory.from_arrays(times, T[:, :3, 3], quats, where=f"/tf {chain[-1].parent} -> {base_frame}")
    return T_base_sensor, base_frame, VehiclePoses(chain[-1].parent, base_frame, history, "tf")


def odometry_poses(samples: TransformSamples, topic: str) -> VehiclePoses:
    if len(samples.times_s) == 0:
        raise RecordingError(f"odometry topic {topic} has no messages")
    return VehiclePoses(samples.parent, samples.child, _history(samples, f"odometry {topic}"), f"odom {topic}")


def tum_poses(path: str | os.PathLike[str]) -> VehiclePoses:
    times, positions, quats = read_tum(path)
    return VehiclePoses(
        "world", "base_footprint", PoseHistory.from_arrays(times, positions, quats, str(path)), str(path)
    )


def pose_source_kind(poses: str) -> str:
    """``odom``, ``tf`` or ``tum`` of the ``--poses`` value (a TUM file's path)."""
    if poses in POSE_SOURCES:
        return poses
    if Path(poses).suffix == ".tum" or Path(poses).is_file():
        return "tum"
    raise RecordingError(f"poses {poses!r}: allowed odom, tf or a TUM file (t x y z qx qy qz qw)")


def firing_poses(poses: VehiclePoses, T_base_sensor: np.ndarray, times_s: np.ndarray) -> np.ndarray:
    """(n, 4, 4) ``T_world_sensor`` at ``times_s``: the vehicle pose interpolated as the node does
    (linear position, slerp rotation), times the mount."""
    positions, rotations = poses.history.interpolate(np.asarray(times_s, dtype=np.float64))
    T = np.zeros((len(positions), 4, 4))
    T[:, :3, :3], T[:, :3, 3], T[:, 3, 3] = rotations, positions, 1.0
    return T @ T_base_sensor
