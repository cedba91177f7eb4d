"""The ROS-free halves of two TF-dependent inputs: the lidar mount and other vehicles' markers.

``mount_overrides`` turns a TF mount base_footprint -> lidar into sensors-file overrides;
``boxes_from_markers`` turns ``visualization_msgs/Marker`` CUBEs into ``VehicleBox`` es.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
from scipy.spatial.transform import Rotation

from acres_lidar_ros.errors import PoseError, SceneError
from acres_lidar_ros.runtime.events import Event
from acres_lidar_ros.scene.boxes import VehicleBox


def mount_overrides(
    translation_m: Sequence[float],
    quaternion_xyzw: Sequence[float],
    position_flu_m: Sequence[float] | np.ndarray,
    rpy_rad: Sequence[float] | np.ndarray,
    tolerance_m: float = 1e-4,
    tolerance_rad: float = 1e-5,
) -> dict[str, list[float]] | None:
    """Sensors-file overrides for a TF mount base_footprint -> lidar, or None if it already matches.

    Returns ``{"position_flu_m": [...], "rpy_deg": [...]}`` (R = Rz Ry Rx, scipy's extrinsic
    ``xyz``, the URDF convention) when the TF mount differs from the configured one.
    """
    t = np.asarray(translation_m, dtype=np.float64)
    q = np.asarray(quaternion_xyzw, dtype=np.float64)
    if t.shape != (3,) or q.shape != (4,) or not (np.isfinite(t).all() and np.isfinite(q).all()):
        raise PoseError(f"mount transform {t.tolist()} {q.tolist()}: expected 3 + 4 finite numbers")
    rotation = Rotation.from_quat(q)
    configured = Rotation.from_euler("xyz", np.asarray(rpy_rad, dtype=np.float64))
    angle = float((rotation * configured.inv()).magnitude())
    if np.max(np.abs(t - np.asarray(position_flu_m))) <= tolerance_m and angle <= tolerance_rad:
        return None
    return {"position_flu_m": t.tolist(), "rpy_deg": np.degrees(rotation.as_euler("xyz")).tolist()}


def _matrix(position_m: Sequence[float], quaternion_xyzw: Sequence[float]) -> np.ndarray:
    T = np.eye(4)
    T[:3, :3] = Rotation.from_quat(np.asarray(quaternion_xyzw, dtype=np.float64)).as_matrix()
    T[:3, 3] = position_m
    return T


MARKER_CUBE = 1  # visualization_msgs/Marker CUBE
MARKER_ADD = 0  # visualization_msgs/Marker ADD (MODIFY)


def boxes_from_markers(
    markers: Iterable[Any], world_from_frame: Callable[[str], tuple[Sequence[float], Sequence[float]] | None]
) -> tuple[list[VehicleBox], list[Event]]:
    """``VehicleBox`` es of other vehicles from ``visualization_msgs/Marker`` s (any object with
    ``type``, ``action``, ``id``, ``ns``, ``header.frame_id``, ``pose`` and ``scale``).

    CUBE markers with action ADD become boxes; other markers are ignored. ``world_from_frame``
    returns the transform (translation, quaternion xyzw) of a marker's frame into the world (the
    odom frame) at the scan stamp, or None when TF has none: that marker is skipped with an event.
    """
    boxes: list[VehicleBox] = []
    events: list[Event] = []
    cache: dict[str, np.ndarray | None] = {}
    for marker in markers:
        if marker.type != MARKER_CUBE or marker.action != MARKER_ADD:
            continue
        frame = marker.header.frame_id
        if frame not in cache:
            transform = world_from_frame(frame)
            cache[frame] = None if transform is None else _matrix(*transform)
        T_world_frame = cache[frame]
        if T_world_frame is None:
            events.append(
                Event(
                    "warn",
                    "box_no_tf",
                    f"marker {marker.ns!r}/{marker.id} in frame {frame!r} "
                    "skipped: no transform into the world at the scan stamp",
                )
            )
            continue
        o = marker.pose.orientation
        p = marker.pose.position
        try:
            T = T_world_frame @ _matrix((p.x, p.y, p.z), (o.x, o.y, o.z, o.w))
            boxes.append(
                VehicleBox(
                    centre_m=T[:3, 3],
                    quaternion_xyzw=Rotation.from_matrix(T[:3, :3]).as_quat(),
                    half_extents_m=0.5 * np.array([marker.scale.x, marker.scale.y, marker.scale.z], dtype=np.float64),
                    object_id=int(marker.id),
                )
            )
        except (SceneError, ValueError) as exc:
            events.append(Event("warn", "box_invalid", f"marker {marker.ns!r}/{marker.id} skipped: {exc}"))
    return boxes, events
