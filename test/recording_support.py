"""Recordings with a known truth for the recordings tests: a vehicle driving over flat ground (z = 0).

Each beam of the Polaris sensor that points below the horizon hits the plane at ``t = -o_z / d_z``
(world origin ``o`` and direction ``d`` at its column's firing time); the point is written in the
sensor frame, ``p = t d + o``, as a driver does. The bags are written with rosbags' own writers
(rosbag2 MCAP or sqlite3, ROS 1), so the reader under test meets files it did not write itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.spatial.transform import Rotation

from acres_lidar_ros.config.material_table import CLASS_ID
from acres_lidar_ros.config.sensors import SensorConfig
from acres_lidar_ros.outputs.point_types import XYZI, XYZIRT, XYZIRT_LABELS
from acres_lidar_ros.outputs.pointcloud2 import point_fields
from acres_lidar_ros.sensor.emitters import column_azimuths_rad
from acres_lidar_ros.sensor.pattern import BeamPattern, elevation_rank
from acres_lidar_ros.sensor.timing import column_time_offset

SPEED_M_S = 4.0
YAW_RATE_RAD_S = 0.5
POSE_HZ = 100.0


@dataclass
class Drive:
    times_s: np.ndarray
    positions_m: np.ndarray
    quaternions_xyzw: np.ndarray
    stamps_ns: list[int]
    points_sensor: list[np.ndarray]  # (cells, 3) NaN without a return
    column_time_s: list[np.ndarray]
    T_base_sensor: np.ndarray


def vehicle_pose(t_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Position (n, 3) and rotation matrices (n, 3, 3) of an arc at constant speed and yaw rate."""
    yaw = YAW_RATE_RAD_S * t_s
    r = SPEED_M_S / YAW_RATE_RAD_S
    positions = np.stack([r * np.sin(yaw), r * (1 - np.cos(yaw)), np.zeros_like(yaw)], axis=1)
    return positions, Rotation.from_euler("z", yaw[:, None]).as_matrix()


BODY_COLUMNS = slice(850, 950)
BODY_RANGE_M = 1.0
"""With ``body``: the beams of these columns below -45 deg return from a body 1 m away."""


def ground_drive(config: SensorConfig, stamps_s=(0.2, 0.3, 0.4), end_s: float = 0.6, body: bool = False) -> Drive:
    pattern = BeamPattern.from_config(config, sub_rays=1)
    T_bs = pattern.T_base_sensor
    times = np.arange(0.0, end_s + 1e-9, 1.0 / POSE_HZ)
    positions, rotations = vehicle_pose(times)
    quats = Rotation.from_matrix(rotations).as_quat()
    offsets = column_time_offset(
        column_azimuths_rad(config.columns, config.azimuth_order),
        config.scan_start_azimuth_rad,
        config.spin_direction,
        config.period_s,
    )
    d = pattern.directions_sensor  # (C, R, 3)
    o = pattern.lens_origins_sensor
    points, column_times, stamps = [], [], []
    for stamp_s in stamps_s:
        t_col = stamp_s + offsets
        p_b, R_b = vehicle_pose(t_col)
        R_ws = R_b @ T_bs[:3, :3]
        t_ws = p_b + np.einsum("cij,j->ci", R_b, T_bs[:3, 3])
        d_w = np.einsum("cij,crj->cri", R_ws, d)
        o_w = np.einsum("cij,crj->cri", R_ws, o) + t_ws[:, None, :]
        with np.errstate(divide="ignore", invalid="ignore"):
            t_hit = -o_w[..., 2] / d_w[..., 2]
        hit = (d_w[..., 2] < -1e-3) & (t_hit > config.min_range_m) & (t_hit < 60.0)
        p = t_hit[..., None] * d + o
        p[~hit] = np.nan
        if body:
            low = np.asarray(config.elevations_rad) < np.deg2rad(-45.0)
            p[BODY_COLUMNS, low] = BODY_RANGE_M * d[BODY_COLUMNS, low] + o[BODY_COLUMNS, low]
        points.append(p.reshape(-1, 3))
        column_times.append(t_col)
        stamps.append(int(round(stamp_s * 1e9)))
    return Drive(times, positions, quats, stamps, points, column_times, T_bs)


def labelled_cloud(config: SensorConfig, drive: Drive, k: int) -> np.ndarray:
    """XYZIRT_labels: ``xyzirt_cloud`` + class ground (vehicle for the body), instance 0."""
    base = xyzirt_cloud(config, drive, k)
    cloud = np.zeros(base.shape, XYZIRT_LABELS)
    for name in XYZIRT.names or ():
        cloud[name] = base[name]
    r = np.linalg.norm(drive.points_sensor[k].reshape(base.shape + (3,)), axis=2)
    cloud["class"] = np.where(r < 1.6, CLASS_ID["vehicle"], CLASS_ID["ground"])
    return cloud


def xyzirt_cloud(config: SensorConfig, drive: Drive, k: int) -> np.ndarray:
    """rslidar_sdk's organised XYZIRT (height = columns, width = rings): ring the elevation rank,
    timestamp the absolute firing time, NaN x, y, z and intensity 0 without a return."""
    columns, rings = config.columns, config.rings
    cloud = np.zeros((columns, rings), XYZIRT)
    p = drive.points_sensor[k].reshape(columns, rings, 3)
    for axis, name in enumerate("xyz"):
        cloud[name] = p[..., axis]
    cloud["intensity"] = np.where(np.isfinite(p[..., 0]), 20.0, 0.0)
    cloud["ring"] = elevation_rank(config.elevations_rad)[None, :]
    cloud["timestamp"] = drive.column_time_s[k][:, None]
    return cloud


def dense_xyzi_cloud(config: SensorConfig, drive: Drive, k: int) -> np.ndarray:
    """rslidar_sdk's XYZI with ``dense_points``: height 1, the returns only, no ring nor time."""
    p = drive.points_sensor[k]
    keep = np.isfinite(p[:, 0])
    cloud = np.zeros((1, int(keep.sum())), XYZI)
    for axis, name in enumerate("xyz"):
        cloud[name] = p[keep, axis]
    cloud["intensity"] = 20.0
    return cloud


def _messages(typestore, config: SensorConfig, drive: Drive, clouds: list[np.ndarray], frame: str):
    types = typestore.types

    def header(t_ns: int, frame_id: str):
        sec, nsec = divmod(int(t_ns), 1_000_000_000)
        Header = types["std_msgs/msg/Header"]
        extra = {"seq": 0} if "seq" in Header.__dataclass_fields__ else {}
        return Header(stamp=types["builtin_interfaces/msg/Time"](sec=sec, nanosec=nsec), frame_id=frame_id, **extra)

    def cloud_message(t_ns: int, cloud: np.ndarray):
        field = types["sensor_msgs/msg/PointField"]
        height, width = cloud.shape
        return types["sensor_msgs/msg/PointCloud2"](
            header=header(t_ns, frame),
            height=height,
            width=width,
            fields=[field(name=n, offset=o, datatype=c, count=k) for n, o, c, k in point_fields(cloud.dtype)],
            is_bigendian=False,
            point_step=cloud.dtype.itemsize,
            row_step=width * cloud.dtype.itemsize,
            data=np.ascontiguousarray(cloud).view(np.uint8).reshape(-1).copy(),
            is_dense=bool(height == 1),
        )

    def transform(t_ns, parent, child, position, quat):
        return types["geometry_msgs/msg/TransformStamped"](
            header=header(t_ns, parent),
            child_frame_id=child,
            transform=types["geometry_msgs/msg/Transform"](
                translation=types["geometry_msgs/msg/Vector3"](*position),
                rotation=types["geometry_msgs/msg/Quaternion"](*quat),
            ),
        )

    mount_q = Rotation.from_matrix(drive.T_base_sensor[:3, :3]).as_quat()
    out = [
        (
            "/tf_static",
            "tf2_msgs/msg/TFMessage",
            0,
            types["tf2_msgs/msg/TFMessage"](
                transforms=[transform(0, "base_footprint", frame, drive.T_base_sensor[:3, 3], mount_q)]
            ),
        )
    ]
    for t, p, q in zip(drive.times_s, drive.positions_m, drive.quaternions_xyzw, strict=True):
        t_ns = int(round(t * 1e9))
        odom = types["nav_msgs/msg/Odometry"](
            header=header(t_ns, "odom"),
            child_frame_id="base_footprint",
            pose=types["geometry_msgs/msg/PoseWithCovariance"](
                pose=types["geometry_msgs/msg/Pose"](
                    position=types["geometry_msgs/msg/Point"](*p),
                    orientation=types["geometry_msgs/msg/Quaternion"](*q),
                ),
                covariance=np.zeros(36),
            ),
            twist=types["geometry_msgs/msg/TwistWithCovariance"](
                twist=types["geometry_msgs/msg/Twist"](
                    linear=types["geometry_msgs/msg/Vector3"](0.0, 0.0, 0.0),
                    angular=types["geometry_msgs/msg/Vector3"](0.0, 0.0, 0.0),
                ),
                covariance=np.zeros(36),
            ),
        )
        out.append(("/odom", "nav_msgs/msg/Odometry", t_ns, odom))
        out.append(
            (
                "/tf",
                "tf2_msgs/msg/TFMessage",
                t_ns,
                types["tf2_msgs/msg/TFMessage"](transforms=[transform(t_ns, "odom", "base_footprint", p, q)]),
            )
        )
    for stamp_ns, cloud in zip(drive.stamps_ns, clouds, strict=True):
        out.append(("/rslidar_points", "sensor_msgs/msg/PointCloud2", stamp_ns, cloud_message(stamp_ns, cloud)))
    return sorted(out, key=lambda m: m[2])


def write_rosbag2(path: Path, config, drive, clouds, storage: str = "mcap", frame: str = "rslidar") -> Path:
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    typestore = get_typestore(Stores.ROS2_JAZZY)
    plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
    with Writer(path, version=9, storage_plugin=plugin) as writer:
        connections = {}
        for topic, msgtype, t_ns, message in _messages(typestore, config, drive, clouds, frame):
            if topic not in connections:
                connections[topic] = writer.add_connection(topic, msgtype, typestore=typestore)
            writer.write(connections[topic], t_ns, typestore.serialize_cdr(message, msgtype))
    return path


def write_ros1(path: Path, config, drive, clouds, frame: str = "rslidar") -> Path:
    from rosbags.rosbag1 import Writer
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    typestore = get_typestore(Stores.ROS1_NOETIC)
    # ROS 1's tf2_msgs/TFMessage (rosbags' Noetic store lacks it): geometry_msgs/TransformStamped[] transforms
    typestore.register(get_types_from_msg("geometry_msgs/TransformStamped[] transforms", "tf2_msgs/msg/TFMessage"))
    with Writer(path) as writer:
        connections = {}
        for topic, msgtype, t_ns, message in _messages(typestore, config, drive, clouds, frame):
            if topic not in connections:
                connections[topic] = writer.add_connection(topic, msgtype, typestore=typestore)
            writer.write(connections[topic], max(t_ns, 1), typestore.serialize_ros1(message, msgtype))
    return path


def two_surface_scene(half_m: float = 120.0):
    """Flat ground at z = 0: grass, with an asphalt road 8 m wide along the x axis."""
    from acres_lidar_ros.scene.builder import SceneBuilder
    from acres_lidar_ros.scene.grids import TerrainGrid

    terrain = TerrainGrid(np.array([-half_m, -half_m]), 2 * half_m, np.zeros((2, 2)))
    road = np.array([[-half_m, -4.0], [half_m, -4.0], [half_m, 4.0], [-half_m, 4.0]])
    return SceneBuilder(terrain, polygons=[(road, "asphalt")]).build()


def simulated_drive(path: Path, config: SensorConfig, scene, scans: int, speed_m_s: float = 3.0) -> Path:
    """A run of ``scans`` scans of the simulator (``config``, its self-return table) driving along the
    road at ``speed_m_s``, written as ``acres-lidar record`` writes its bag (XYZIRT, /odom, /tf_static)."""
    from acres_lidar_ros.body.self_returns import sensor_self_table
    from acres_lidar_ros.outputs.bag import BagWriter
    from acres_lidar_ros.scan.scanner import Scanner
    from acres_lidar_ros.sensor.pattern import mount_rotation
    from acres_lidar_ros.sensor.poses import PoseHistory
    from acres_lidar_ros.tracing.trace import Tracer

    end_s = 0.1 * scans + 0.3
    times = np.arange(0.0, end_s, 0.01)
    positions = np.stack([-20.0 + speed_m_s * times, 0.5 * np.sin(0.3 * times), np.zeros_like(times)], axis=1)
    quats = Rotation.from_euler("z", 0.05 * np.sin(0.5 * times)[:, None]).as_quat()
    history = PoseHistory.from_arrays(times, positions, quats)
    scanner = Scanner(config, tracer=Tracer(scene), self_table=sensor_self_table(config))
    mount_q = Rotation.from_matrix(mount_rotation(config.rpy_rad)).as_quat()
    with BagWriter(path, "XYZIRT", lidar_frame=config.frame_id) as bag:
        bag.write_static_mount(0, config.position_flu_m, mount_q)
        for t, p, q in zip(times, positions, quats, strict=True):
            bag.write_base_pose(int(round(t * 1e9)), p, q, np.zeros(3), np.zeros(3))
        for k in range(scans):
            bag.write_scan(scanner.scan(history, int(round((0.2 + 0.1 * k) * 1e9)), index=k))
    return path
