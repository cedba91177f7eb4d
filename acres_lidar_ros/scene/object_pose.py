"""The pose keys of a scene file's objects (docs/scene_format.md, "Object poses").

An object's orientation is one of ``yaw_deg`` (about +z), ``rpy_deg`` [roll, pitch, yaw] (ROS's
fixed-axis convention: ``R = Rz(yaw) Ry(pitch) Rx(roll)``, as URDF and SDF poses) or
``quaternion_xyzw`` [x, y, z, w]. A mesh also takes ``up_axis`` (``z``, or ``y`` for files
exported Y-up, as glTF always is and Blender's OBJ exporter is by default) and ``scale``, one
number or [sx, sy, sz] along the object's own axes after the up-axis turn. A mesh vertex ``v`` of
the file lands at ``base + R (s * (U v))``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from acres_lidar_ros.errors import SceneError
from acres_lidar_ros.scene.boxes import QUATERNION_NORM_TOLERANCE, rotation_from_quaternion_xyzw
from acres_lidar_ros.scene.shapes import rotation_z

if TYPE_CHECKING:
    from acres_lidar_ros.scene.scene_file import _Reader

#: The pose keys of any object that can turn in 3-D (mesh, box, cylinder), at most one of them.
ORIENTATION_KEYS = ("yaw_deg", "rpy_deg", "quaternion_xyzw")
#: ``up_axis`` -> the turn from the file's axes to the scene's (z up). Y-up to Z-up is +90 deg
#: about x: the file's +y (up) becomes +z and its +z (glTF's forward, towards the viewer) -y,
#: as Blender's glTF importer turns (x, y, z) into (x, -z, y).
UP_AXIS_TURN: dict[str, np.ndarray] = {
    "z": np.eye(3),
    "y": np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]]),
}


def rotation_rpy(roll_rad: float, pitch_rad: float, yaw_rad: float) -> np.ndarray:
    """(3, 3) float64 ``Rz(yaw) Ry(pitch) Rx(roll)``: roll about x, then pitch about y, then yaw
    about z, all about the fixed axes (URDF's ``rpy``, SDF's ``<pose>``, tf2's ``setRPY``)."""
    cr, sr = math.cos(roll_rad), math.sin(roll_rad)
    cp, sp = math.cos(pitch_rad), math.sin(pitch_rad)
    rx = np.array([[1.0, 0.0, 0.0], [0.0, cr, -sr], [0.0, sr, cr]])
    ry = np.array([[cp, 0.0, sp], [0.0, 1.0, 0.0], [-sp, 0.0, cp]])
    return rotation_z(yaw_rad) @ ry @ rx


def read_orientation(r: _Reader, obj: dict, key: str) -> tuple[float, np.ndarray | None]:
    """(yaw_rad, rotation): ``rotation`` is None for a yaw-only pose (the objects of version 1 keep
    their exact arithmetic), else the (3, 3) rotation of ``rpy_deg`` or ``quaternion_xyzw``."""
    given = [k for k in ORIENTATION_KEYS if k in obj]
    if len(given) > 1:
        raise SceneError(
            f"{r.path}: {key}: {' and '.join(given)} are both given; give one of {', '.join(ORIENTATION_KEYS)}"
        )
    if "rpy_deg" in obj:
        rpy = r.vector(obj, "rpy_deg", key, 3)
        return 0.0, rotation_rpy(*(math.radians(float(v)) for v in rpy))
    if "quaternion_xyzw" in obj:
        value = obj["quaternion_xyzw"]
        q = r.vector(obj, "quaternion_xyzw", key, 4)
        norm = float(np.linalg.norm(q))
        if abs(norm - 1.0) > QUATERNION_NORM_TOLERANCE:
            raise r.fail(
                f"{key}.quaternion_xyzw",
                value,
                f"has norm {norm:.9g}: must be a unit quaternion [x, y, z, w] (norm 1 within {QUATERNION_NORM_TOLERANCE})",
            )
        return 0.0, rotation_from_quaternion_xyzw(q)
    return math.radians(r.number(obj, "yaw_deg", key, default=0.0)), None


def read_mesh_placement(r: _Reader, obj: dict, key: str) -> MeshPlacement:
    """The up axis, scale and rotation of a mesh object (module docstring)."""
    yaw, rotation = read_orientation(r, obj, key)
    up = obj.get("up_axis", "z")
    if not isinstance(up, str) or up not in UP_AXIS_TURN:
        raise r.fail(f"{key}.up_axis", up, f"allowed: {', '.join(UP_AXIS_TURN)} (the file's up axis)")
    return MeshPlacement(up, _scale(r, obj, key), rotation_z(yaw) if rotation is None else rotation)


@dataclass(frozen=True)
class MeshPlacement:
    """``up_axis``, ``scale_xyz`` (3,) and ``rotation`` (3, 3) of a mesh object."""

    up_axis: str
    scale_xyz: np.ndarray
    rotation: np.ndarray

    def apply(self, vertices_file: np.ndarray, base_m: np.ndarray) -> np.ndarray:
        """(v, 3) float64 scene positions ``base + R (s * (U v))`` of the file's vertices."""
        v = np.asarray(vertices_file, float)
        if self.up_axis != "z":
            v = v @ UP_AXIS_TURN[self.up_axis].T
        return (self.scale_xyz * v) @ self.rotation.T + base_m

    def describe(self) -> str:
        return f"scale {self.scale_xyz.tolist()}, up_axis {self.up_axis!r}"


def _scale(r: _Reader, obj: dict, key: str) -> np.ndarray:
    value: Any = obj.get("scale", 1.0)
    if isinstance(value, list):
        return r.vector(obj, "scale", key, 3, positive=True)
    return np.full(3, r.number(obj, "scale", key, default=1.0, low=0.0, low_open=True))
