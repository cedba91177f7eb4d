"""The files of the KITTI odometry / SemanticKITTI and KITTI object layouts, as their
publishers define them (docs/datasets.md gives the sources).

SemanticKITTI (semantic-kitti-api's README and ``config/semantic-kitti.yaml``; the KITTI odometry
devkit), one sequence ``sequences/NN/``:

* ``velodyne/000000.bin``: the points, ``float32`` x, y, z, remission, little-endian, no header;
* ``labels/000000.label``: one ``uint32`` a point, the semantic label in the low 16 bits and the
  instance id in the high 16 bits;
* ``poses.txt``: per scan the 12 numbers (row-major 3 x 4) of the left camera's pose in the
  first scan's camera frame; ``calib.txt``: ``P0:`` to ``P3:`` (3 x 4) and ``Tr:`` (3 x 4, the
  LiDAR to the camera); ``times.txt``: per scan its time in s from the first.

KITTI object (the object devkit's readme.txt): per scan ``label_2/000000.txt``, one line of 15
values per object: type, truncated, occluded, alpha, the 2D box (left, top, right, bottom),
the dimensions (height, width, length, m), the location (x, y, z in the camera frame, m: the
bottom centre of the box) and rotation_y (about the camera's y axis); ``calib/000000.txt``
with ``P0:`` to ``P3:``, ``R0_rect:`` (3 x 3), ``Tr_velo_to_cam:`` and ``Tr_imu_to_velo:``. The
same boxes in the LiDAR frame go to ``label_lidar/000000.txt`` as OpenPCDet's custom dataset
reads them (docs/CUSTOM_DATASET_TUTORIAL.md): ``x y z dx dy dz heading_angle category_name``,
the box centre, its length (along the heading), width and height and the heading about z
from x.

There is no camera: the camera of these files is a virtual one at the LiDAR, with KITTI's axes
(x right, y down, z forward: ``T_CAM_LIDAR``) and the intrinsics ``K_VIRTUAL`` for an image of
``IMAGE_SIZE_PX``; ``P0`` to ``P3`` are ``K [I | 0]`` (no stereo baseline).
"""

from __future__ import annotations

import numpy as np

from acres_lidar_ros.errors import OutputError

#: SemanticKITTI's labels (semantic-kitti-api config/semantic-kitti.yaml ``labels``).
SEMANTIC_KITTI_LABELS: dict[int, str] = {
    0: "unlabeled",
    1: "outlier",
    10: "car",
    11: "bicycle",
    13: "bus",
    15: "motorcycle",
    16: "on-rails",
    18: "truck",
    20: "other-vehicle",
    30: "person",
    31: "bicyclist",
    32: "motorcyclist",
    40: "road",
    44: "parking",
    48: "sidewalk",
    49: "other-ground",
    50: "building",
    51: "fence",
    52: "other-structure",
    60: "lane-marking",
    70: "vegetation",
    71: "trunk",
    72: "terrain",
    80: "pole",
    81: "traffic-sign",
    99: "other-object",
    252: "moving-car",
    253: "moving-bicyclist",
    254: "moving-person",
    255: "moving-motorcyclist",
    256: "moving-on-rails",
    257: "moving-bus",
    258: "moving-truck",
    259: "moving-other-vehicle",
}

#: Our classes (``config.material_table.CLASS_NAMES``) -> SemanticKITTI label, where they match;
#: a class not listed here becomes ``OTHER_LABEL`` (other-object).
CLASS_TO_SEMANTIC_KITTI: dict[str, int] = {
    "other": 99,
    "ground": 72,  # terrain: the farm's soil, grass, gravel and tracks (no lanes to tell a road by)
    "tree_trunk": 71,
    "building": 50,
    "silo": 52,
    "tree": 70,
    "shrub": 70,
    "corn": 70,
    "soybean": 70,
    "mud_clod": 72,
    "ground_cover": 72,
    "potato": 70,
    "vehicle": 20,
    "precipitation": 1,  # rain and fog clutter: outliers
    "person": 30,
    "pole": 80,
    "fence": 51,
}
OTHER_LABEL = 99
#: Semantic labels of "stuff": their points carry instance 0.
STUFF_LABELS = frozenset({0, 1, 40, 44, 48, 49, 60, 70, 72})
MAX_INSTANCE_ID = 0xFFFF

#: The virtual camera: KITTI's camera axes from the LiDAR's (x forward, y left, z up).
T_CAM_LIDAR = np.array([[0.0, -1.0, 0.0, 0.0], [0.0, 0.0, -1.0, 0.0], [1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]])
IMAGE_SIZE_PX = (1242, 375)
K_VIRTUAL = np.array([[720.0, 0.0, 621.0], [0.0, 720.0, 187.5], [0.0, 0.0, 1.0]])
POINT_FORMAT = np.dtype([("x", "<f4"), ("y", "<f4"), ("z", "<f4"), ("remission", "<f4")])


def semantic_labels(class_names: tuple[str, ...]) -> np.ndarray:
    """SemanticKITTI label of each class id (index into ``class_names``), uint16."""
    return np.array([CLASS_TO_SEMANTIC_KITTI.get(n, OTHER_LABEL) for n in class_names], dtype=np.uint16)


def velodyne_bytes(xyz_m: np.ndarray, remission: np.ndarray) -> bytes:
    """``velodyne/*.bin``: float32 x, y, z, remission per point."""
    points = np.empty(len(xyz_m), POINT_FORMAT)
    points["x"], points["y"], points["z"] = (np.asarray(xyz_m, np.float32)[:, k] for k in range(3))
    points["remission"] = remission
    return points.tobytes()


def label_bytes(semantic: np.ndarray, instance: np.ndarray) -> bytes:
    """``labels/*.label``: uint32 per point, ``semantic | instance << 16``."""
    semantic, instance = np.asarray(semantic, np.uint32), np.asarray(instance, np.uint32)
    if semantic.shape != instance.shape or (semantic > 0xFFFF).any() or (instance > MAX_INSTANCE_ID).any():
        raise OutputError("SemanticKITTI labels: semantic and instance must be 16-bit arrays of the same shape")
    return (semantic | (instance << np.uint32(16))).astype("<u4").tobytes()


def _row(values: np.ndarray) -> str:
    return " ".join(f"{float(v):.9e}" for v in np.ravel(values))


def pose_lines(T_first_each: np.ndarray) -> str:
    """``poses.txt``: each (4, 4) pose of the camera in the first scan's camera frame, 3 x 4 row-major."""
    return "".join(_row(T[:3, :4]) + "\n" for T in T_first_each)


def camera_poses(T_world_lidar: np.ndarray) -> np.ndarray:
    """The camera poses of ``poses.txt`` from the LiDAR's world poses (n, 4, 4):
    ``Tr inv(T_w_l0) T_w_li inv(Tr)``."""
    T_world_lidar = np.asarray(T_world_lidar, np.float64)
    first = np.linalg.inv(T_world_lidar[0])
    return T_CAM_LIDAR @ (first @ T_world_lidar) @ np.linalg.inv(T_CAM_LIDAR)


def times_lines(times_s: np.ndarray) -> str:
    """``times.txt``: one time a line, s."""
    return "".join(f"{float(t):.6e}\n" for t in times_s)


def _projection() -> np.ndarray:
    return np.hstack([K_VIRTUAL, np.zeros((3, 1))])


def odometry_calib_text() -> str:
    """``calib.txt`` of a sequence: ``P0`` to ``P3`` and ``Tr``."""
    lines = [f"P{k}: {_row(_projection())}" for k in range(4)]
    return "\n".join(lines + [f"Tr: {_row(T_CAM_LIDAR[:3])}"]) + "\n"


def object_calib_text(T_lidar_base: np.ndarray) -> str:
    """``calib/*.txt`` of the object layout; ``Tr_imu_to_velo`` is the vehicle base (``base_footprint``)
    in the LiDAR frame."""
    lines = [f"P{k}: {_row(_projection())}" for k in range(4)]
    lines += [f"R0_rect: {_row(np.eye(3))}", f"Tr_velo_to_cam: {_row(T_CAM_LIDAR[:3])}"]
    lines += [f"Tr_imu_to_velo: {_row(np.asarray(T_lidar_base)[:3])}"]
    return "\n".join(lines) + "\n"


def _wrap(angle: float) -> float:
    return float((angle + np.pi) % (2 * np.pi) - np.pi)


def box_corners_m(centre_m: np.ndarray, size_lwh_m: np.ndarray, heading_rad: float) -> np.ndarray:
    """The 8 corners (8, 3) of a box in the LiDAR frame: centre, length/width/height, heading about z."""
    sx, sy, sz = np.asarray(size_lwh_m, float) / 2
    unit = np.array([[a, b, c] for a in (-1, 1) for b in (-1, 1) for c in (-1, 1)], float) * [sx, sy, sz]
    c, s = np.cos(heading_rad), np.sin(heading_rad)
    rotation = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    return np.asarray(centre_m, float) + unit @ rotation.T


def object_line(kitti_type: str, centre_m: np.ndarray, size_lwh_m: np.ndarray, heading_rad: float) -> str:
    """One ``label_2`` line of a box in the LiDAR frame (centre, length/width/height, heading).

    Location: the bottom centre in the camera frame; rotation_y = -heading - pi/2 (a box heading
    along the camera's x axis has rotation_y 0); alpha = rotation_y - atan2(x, z) of the location;
    the 2D box: the corners projected with P2, clipped to the image; truncated: the share of the
    projected box outside the image. A box not wholly in front of the camera has the devkit's
    invalid 2D box (-1 -1 -1 -1) and truncated 1. occluded is 3 (unknown): no image to tell."""
    length, width, height = (float(v) for v in size_lwh_m)
    bottom = np.append(np.asarray(centre_m, float) - [0.0, 0.0, height / 2], 1.0)
    x, y, z = (T_CAM_LIDAR @ bottom)[:3]
    rotation_y = _wrap(-heading_rad - np.pi / 2)
    alpha = _wrap(rotation_y - np.arctan2(x, z))
    corners = (T_CAM_LIDAR[:3, :3] @ box_corners_m(centre_m, size_lwh_m, heading_rad).T).T
    if (corners[:, 2] > 0.1).all():
        uvw = corners @ K_VIRTUAL.T
        uv = uvw[:, :2] / uvw[:, 2:]
        box = np.array([uv[:, 0].min(), uv[:, 1].min(), uv[:, 0].max(), uv[:, 1].max()])
        clipped = np.clip(box, 0.0, [IMAGE_SIZE_PX[0] - 1, IMAGE_SIZE_PX[1] - 1] * 2)
        area = (box[2] - box[0]) * (box[3] - box[1])
        inside = max(clipped[2] - clipped[0], 0.0) * max(clipped[3] - clipped[1], 0.0)
        truncated = 1.0 - inside / area if area > 0 else 1.0
        box = clipped if inside > 0 else np.full(4, -1.0)
    else:
        box, truncated = np.full(4, -1.0), 1.0
    values = [truncated, 3, alpha, *box, height, width, length, x, y, z, rotation_y]
    return f"{kitti_type} " + " ".join(f"{v:d}" if isinstance(v, int) else f"{v:.2f}" for v in values)


def lidar_box_line(kitti_type: str, centre_m: np.ndarray, size_lwh_m: np.ndarray, heading_rad: float) -> str:
    """One ``label_lidar`` line (OpenPCDet's custom format): ``x y z dx dy dz heading category``."""
    values = [*np.asarray(centre_m, float), *np.asarray(size_lwh_m, float), _wrap(heading_rad)]
    return " ".join(f"{v:.4f}" for v in values) + f" {kitti_type}"


__all__ = [
    "CLASS_TO_SEMANTIC_KITTI",
    "IMAGE_SIZE_PX",
    "K_VIRTUAL",
    "SEMANTIC_KITTI_LABELS",
    "STUFF_LABELS",
    "T_CAM_LIDAR",
    "camera_poses",
    "label_bytes",
    "lidar_box_line",
    "object_calib_text",
    "object_line",
    "odometry_calib_text",
    "pose_lines",
    "semantic_labels",
    "times_lines",
    "velodyne_bytes",
]
