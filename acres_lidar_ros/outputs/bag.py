"""A rosbag2 (MCAP, version 9) of a drive: clouds, transforms, odometry and clock.

Topics (types of ROS 2 Jazzy, rosbags' typestore ``Stores.ROS2_JAZZY``):

========================  =============================  ==========================================
topic                     type                           contents
========================  =============================  ==========================================
``/lidar/points``         sensor_msgs/msg/PointCloud2    the cloud (``point_type``), frame ``lidar``
``/tf_static``            tf2_msgs/msg/TFMessage         base_footprint -> lidar mount (transient
                                                         local, as tf2's static broadcaster)
``/tf``                   tf2_msgs/msg/TFMessage         odom -> base_footprint
``/odom``                 nav_msgs/msg/Odometry          odom -> base_footprint pose and twist
``/clock``                rosgraph_msgs/msg/Clock        simulation time
``/imu/data`` (optional)  sensor_msgs/msg/Imu            the IMU (``imu_topic``), frame ``imu_link``;
                                                         its mount base_footprint -> imu_link joins
                                                         the LiDAR's in the one ``/tf_static`` message
========================  =============================  ==========================================

The bag's receive time of each message is its header stamp (a cloud may give a later one, its
release time). ``BagWriter`` refuses to write into
an existing path and closes the bag on any exception (including ``KeyboardInterrupt``), so what
was written so far stays a readable bag. (rosbags' own context manager aborts on an exception,
which leaves an MCAP without its summary and no metadata.yaml.)

``BagWriter.flush`` ends the MCAP chunk in work and pushes the file to the disk (fsync): what was
written before a flush survives a kill, a power cut or a full disk as complete chunks, which
``outputs.bag_repair`` turns back into a readable bag (summary and ``metadata.yaml``).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Literal

import numpy as np

from acres_lidar_ros.errors import OutputError, PoseError
from acres_lidar_ros.outputs.files import refuse_existing
from acres_lidar_ros.outputs.layouts import default_stamp_ns, point_cloud
from acres_lidar_ros.outputs.point_types import PointProfile, point_profile
from acres_lidar_ros.outputs.pointcloud2 import default_typestore, pointcloud2_message, qos_profile_dict, time_message
from acres_lidar_ros.scan.scan_types import Scan

CLOUD_TOPIC = "/lidar/points"
TF_TOPIC = "/tf"
TF_STATIC_TOPIC = "/tf_static"
ODOM_TOPIC = "/odom"
CLOCK_TOPIC = "/clock"

#: metadata.yaml version: ROS 2 Jazzy's rosbag2 writes 9 (test_ros_tf_bag.py checks it against ``ros2 bag record``).
METADATA_VERSION: Final = 9
# RMW_DURATION_INFINITE as rosbag2 writes it in offered_qos_profiles.
_INFINITE = {"sec": 9_223_372_036, "nsec": 854_775_807}

# Offered QoS of each topic, as plain data (see ``topic_qos``).
TOPIC_QOS: dict[str, dict[str, Any]] = {
    CLOUD_TOPIC: qos_profile_dict(),
    TF_TOPIC: {"reliability": "reliable", "durability": "volatile", "history": "keep_last", "depth": 100},
    TF_STATIC_TOPIC: {"reliability": "reliable", "durability": "transient_local", "history": "keep_last", "depth": 1},
    ODOM_TOPIC: {"reliability": "reliable", "durability": "volatile", "history": "keep_last", "depth": 10},
    CLOCK_TOPIC: {"reliability": "reliable", "durability": "volatile", "history": "keep_last", "depth": 1},
}

IMU_QOS: dict[str, Any] = {"reliability": "reliable", "durability": "volatile", "history": "keep_last", "depth": 400}
"""The IMU topic's offered QoS (a second of samples at 400 Hz)."""

_QUATERNION_TOLERANCE = 1e-6


def rosbags_qos(profile: dict[str, Any]) -> Any:
    """A rosbags ``Qos`` of a plain QoS dict (reliability, durability, history, depth)."""
    from rosbags.interfaces import Qos, QosDurability, QosHistory, QosLiveliness, QosReliability, QosTime

    infinite = QosTime(**_INFINITE)
    return Qos(
        history=QosHistory[profile["history"].upper()],
        depth=int(profile["depth"]),
        reliability=QosReliability[profile["reliability"].upper()],
        durability=QosDurability[profile["durability"].upper()],
        deadline=infinite,
        lifespan=infinite,
        liveliness=QosLiveliness.AUTOMATIC,
        liveliness_lease_duration=infinite,
        avoid_ros_namespace_conventions=False,
    )


def _vector3(name: str, value: Any) -> np.ndarray:
    vector = np.asarray(value, dtype=np.float64)
    if vector.shape != (3,) or not np.all(np.isfinite(vector)):
        raise PoseError(f"{name} must be 3 finite numbers, got {value!r}")
    return vector


def _unit_quaternion(name: str, value: Any) -> np.ndarray:
    quaternion = np.asarray(value, dtype=np.float64)
    if quaternion.shape != (4,) or not np.all(np.isfinite(quaternion)):
        raise PoseError(f"{name} must be 4 finite numbers (x, y, z, w), got {value!r}")
    norm = float(np.linalg.norm(quaternion))
    if abs(norm - 1.0) > _QUATERNION_TOLERANCE:
        raise PoseError(f"{name} {value!r} has norm {norm:.9g}; a rotation needs a unit quaternion")
    return quaternion


class BagWriter:
    """Write a drive to a new rosbag2 MCAP bag directory.

    Parameters
    ----------
    path : str or PathLike
        Bag directory to create; must not exist.
    point_type : PointProfile or str
        Layout of the clouds: one of ``outputs.point_types.PROFILES``, or its name (resolved
        here, once: the writer's ``profile``).
    odom_frame, base_frame, lidar_frame : str
        Frame names: the odometry frame, the vehicle's base_footprint, the LiDAR (cloud) frame.
    cloud_topic : str
        Topic of the clouds (the sensors file's ``lidar.topic``; ``/lidar/points`` by default).
    imu_topic, imu_frame : str or None, str
        With an ``imu_topic``, the bag also has sensor_msgs/Imu messages (``write_imu``) in ``imu_frame``.
    typestore : rosbags Typestore, optional
        Defaults to ``Stores.ROS2_JAZZY``.

    Use as a context manager, or call ``open`` and ``close``.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        point_type: PointProfile | str = "XYZI",
        *,
        odom_frame: str = "odom",
        base_frame: str = "base_footprint",
        lidar_frame: str = "lidar",
        cloud_topic: str = CLOUD_TOPIC,
        imu_topic: str | None = None,
        imu_frame: str = "imu_link",
        typestore: Any = None,
    ) -> None:
        self.path = Path(path)
        self.profile = point_profile(point_type)
        self.odom_frame = odom_frame
        self.base_frame = base_frame
        self.lidar_frame = lidar_frame
        self.cloud_topic = cloud_topic
        self.typestore = default_typestore() if typestore is None else typestore
        self._writer: Any = None
        self._connections: dict[str, Any] = {}
        if cloud_topic in TOPIC_QOS and cloud_topic != CLOUD_TOPIC:
            raise OutputError(f"cloud topic {cloud_topic!r} is one of the bag's other topics: expected another name")
        self.message_counts: dict[str, int] = {self._topic(t): 0 for t in TOPIC_QOS}
        if imu_topic is not None and (imu_topic in TOPIC_QOS or imu_topic == cloud_topic):
            raise OutputError(f"IMU topic {imu_topic!r} is one of the bag's other topics: expected another name")
        self.imu_topic = imu_topic
        self.imu_frame = imu_frame
        if imu_topic is not None:
            self.message_counts[imu_topic] = 0

    def _topic(self, topic: str) -> str:
        """The bag's name of one of the module's topics: the cloud's is ``cloud_topic``."""
        return self.cloud_topic if topic == CLOUD_TOPIC else topic

    # Life cycle ---------------------------------------------------------------------------------

    def open(self) -> BagWriter:
        """Create the bag directory and register the topics."""
        from rosbags.rosbag2 import StoragePlugin, Writer, WriterError

        refuse_existing(self.path)
        writer = Writer(self.path, version=METADATA_VERSION, storage_plugin=StoragePlugin.MCAP)
        try:
            writer.open()
        except (WriterError, OSError) as error:
            raise OutputError(f"cannot create bag {self.path}: {error}") from error
        self._writer = writer
        msgtypes = {
            CLOUD_TOPIC: "sensor_msgs/msg/PointCloud2",
            TF_STATIC_TOPIC: "tf2_msgs/msg/TFMessage",
            TF_TOPIC: "tf2_msgs/msg/TFMessage",
            ODOM_TOPIC: "nav_msgs/msg/Odometry",
            CLOCK_TOPIC: "rosgraph_msgs/msg/Clock",
        }
        try:
            for topic, msgtype in msgtypes.items():
                self._connections[self._topic(topic)] = writer.add_connection(
                    self._topic(topic),
                    msgtype,
                    typestore=self.typestore,
                    offered_qos_profiles=[rosbags_qos(TOPIC_QOS[topic])],
                )
            if self.imu_topic is not None:
                self._connections[self.imu_topic] = writer.add_connection(
                    self.imu_topic,
                    "sensor_msgs/msg/Imu",
                    typestore=self.typestore,
                    offered_qos_profiles=[rosbags_qos(IMU_QOS)],
                )
        except BaseException:
            self.close()
            raise
        return self

    def add_topic(self, topic: str, msgtype: str, qos: dict[str, Any]) -> None:
        """Register one more topic of an open bag (``msgtype`` must be in the typestore; a topic of
        the bag's own is refused)."""
        if self._writer is None:
            raise OutputError(f"bag {self.path} is not open")
        if topic in self._connections:
            raise OutputError(f"topic {topic} is in bag {self.path} already")
        self._connections[topic] = self._writer.add_connection(
            topic, msgtype, typestore=self.typestore, offered_qos_profiles=[rosbags_qos(qos)]
        )
        self.message_counts[topic] = 0

    def write_message(self, topic: str, log_time_ns: int, message: Any) -> None:
        """One message of a topic added with ``add_topic``, received at ``log_time_ns``."""
        self._write(topic, log_time_ns, message)

    def flush(self) -> None:
        """End the MCAP chunk in work and push everything written so far to the disk (fsync).

        After a flush, the messages written so far lie in complete chunks on the disk: a kill, a
        power cut or a full disk later loses none of them (``outputs.bag_repair`` reads them back).
        A flush with nothing new only syncs.
        """
        if self._writer is None:
            raise OutputError(f"bag {self.path} is not open; use BagWriter as a context manager or call open()")
        # rosbags' MCAP storage keeps the chunk in work in memory and ends it past 1 MiB; its
        # close_chunk and bio are the storage writer's own (rosbags.rosbag2.storage_mcap.McapWriter).
        storage = self._writer.storage
        try:
            chunk_bytes, close_chunk, bio = storage.chunk.bio.tell(), storage.close_chunk, storage.bio
        except AttributeError as error:  # another rosbags than setup.py's range
            from importlib.metadata import version

            raise OutputError(
                f"cannot flush bag {self.path}: rosbags {version('rosbags')}'s MCAP writer has no {error.name!r}; "
                "acres_lidar_ros needs rosbags >= 0.11, < 0.12 (pip install 'rosbags>=0.11,<0.12')"
            ) from error
        try:
            if chunk_bytes:
                close_chunk()
            bio.flush()
            os.fsync(bio.fileno())
        except OSError as error:
            raise OutputError(f"cannot write bag {self.path}: {error}") from error

    @property
    def size_bytes(self) -> int:
        """Bytes of the MCAP file written so far (flushed or buffered; 0 when not open)."""
        if self._writer is None or self._writer.storage is None:
            return 0
        return int(self._writer.storage.bio.tell())

    def close(self) -> None:
        """Finish the bag (MCAP summary and metadata.yaml). Closing twice does nothing.

        When finishing fails (a full disk), the bag keeps its flushed chunks and has no
        ``metadata.yaml``; no temporary file is left. ``outputs.bag_repair`` recovers it.
        """
        writer, self._writer = self._writer, None
        if writer is None:
            return
        try:
            writer.close()
        except Exception as error:
            storage = writer.storage
            if storage is not None:
                with contextlib.suppress(Exception):
                    storage.abort()  # closes the file handle
            (self.path / "metadata.yaml.tmp").unlink(missing_ok=True)
            raise OutputError(f"cannot finish bag {self.path}: {error}") from error

    def __enter__(self) -> BagWriter:
        return self.open()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> Literal[False]:
        try:
            self.close()
        except OutputError as error:
            if exc_val is None:
                raise
            exc_val.add_note(f"closing the bag also failed: {error}")
        return False

    # Messages -----------------------------------------------------------------------------------

    def _write(self, topic: str, stamp_ns: int, message: Any) -> None:
        if self._writer is None:
            raise OutputError(f"bag {self.path} is not open; use BagWriter as a context manager or call open()")
        connection = self._connections[topic]
        data = self.typestore.serialize_cdr(message, connection.msgtype)
        self._writer.write(connection, int(stamp_ns), data)
        self.message_counts[topic] += 1

    def _header(self, stamp_ns: int, frame_id: str) -> Any:
        return self.typestore.types["std_msgs/msg/Header"](
            stamp=time_message(stamp_ns, self.typestore), frame_id=frame_id
        )

    def _transform(
        self, stamp_ns: int, parent: str, child: str, position_m: np.ndarray, quaternion_xyzw: np.ndarray
    ) -> Any:
        types = self.typestore.types
        return types["geometry_msgs/msg/TransformStamped"](
            header=self._header(stamp_ns, parent),
            child_frame_id=child,
            transform=types["geometry_msgs/msg/Transform"](
                translation=types["geometry_msgs/msg/Vector3"](*position_m),
                rotation=types["geometry_msgs/msg/Quaternion"](*quaternion_xyzw),
            ),
        )

    def write_static_mount(
        self, stamp_ns: int, position_m: Any, quaternion_xyzw: Any, imu_mount: tuple[Any, Any] | None = None
    ) -> None:
        """Write the LiDAR mount, base_footprint -> lidar, on ``/tf_static`` (with ``imu_mount``,
        the IMU's base_footprint -> imu frame in the same message: a late subscriber of the
        transient-local, depth-1 topic gets both).

        Parameters
        ----------
        stamp_ns : int
        position_m : (3,) float
            Lidar origin in the base_footprint frame, m.
        quaternion_xyzw : (4,) float
            Unit quaternion rotating lidar coordinates into base_footprint.
        imu_mount : ((3,) float, (4,) float), optional
            The IMU's origin and rotation in base_footprint, likewise.
        """
        position_m = _vector3("position_m", position_m)
        quaternion_xyzw = _unit_quaternion("quaternion_xyzw", quaternion_xyzw)
        transforms = [self._transform(stamp_ns, self.base_frame, self.lidar_frame, position_m, quaternion_xyzw)]
        if imu_mount is not None:
            imu_position = _vector3("imu position_m", imu_mount[0])
            imu_quaternion = _unit_quaternion("imu quaternion_xyzw", imu_mount[1])
            transforms.append(self._transform(stamp_ns, self.base_frame, self.imu_frame, imu_position, imu_quaternion))
        self._write(TF_STATIC_TOPIC, stamp_ns, self.typestore.types["tf2_msgs/msg/TFMessage"](transforms=transforms))

    def write_imu(
        self, stamp_ns: int, orientation_xyzw: Any, angular_velocity_rad_s: Any, linear_acceleration_m_s2: Any
    ) -> None:
        """Write one sensor_msgs/Imu sample on ``imu_topic`` in ``imu_frame`` (``sensor.imu``'s
        orientation, body rates and specific force; covariances zero: the simulated truth's
        orientation, the noise model's samples)."""
        if self.imu_topic is None:
            raise OutputError(f"bag {self.path} has no IMU topic: give BagWriter an imu_topic")
        types = self.typestore.types
        message = types["sensor_msgs/msg/Imu"](
            header=self._header(stamp_ns, self.imu_frame),
            orientation=types["geometry_msgs/msg/Quaternion"](
                *_unit_quaternion("imu orientation_xyzw", orientation_xyzw)
            ),
            orientation_covariance=np.zeros(9, np.float64),
            angular_velocity=types["geometry_msgs/msg/Vector3"](*_vector3("angular_velocity", angular_velocity_rad_s)),
            angular_velocity_covariance=np.zeros(9, np.float64),
            linear_acceleration=types["geometry_msgs/msg/Vector3"](
                *_vector3("linear_acceleration", linear_acceleration_m_s2)
            ),
            linear_acceleration_covariance=np.zeros(9, np.float64),
        )
        self._write(self.imu_topic, stamp_ns, message)

    def write_base_pose(
        self,
        stamp_ns: int,
        position_m: Any,
        quaternion_xyzw: Any,
        linear_velocity_m_s: Any,
        angular_velocity_rad_s: Any,
    ) -> None:
        """Write the vehicle pose, odom -> base_footprint, on ``/tf`` and ``/odom``.

        Parameters
        ----------
        stamp_ns : int
        position_m : (3,) float
            base_footprint origin in the odom frame, m.
        quaternion_xyzw : (4,) float
            Unit quaternion rotating base_footprint coordinates into odom.
        linear_velocity_m_s, angular_velocity_rad_s : (3,) float
            Twist in the child frame (base_footprint), as nav_msgs/Odometry defines it.
            Covariances are written as zeros (simulated ground truth).
        """
        types = self.typestore.types
        position_m = _vector3("position_m", position_m)
        quaternion_xyzw = _unit_quaternion("quaternion_xyzw", quaternion_xyzw)
        linear = _vector3("linear_velocity_m_s", linear_velocity_m_s)
        angular = _vector3("angular_velocity_rad_s", angular_velocity_rad_s)
        transform = self._transform(stamp_ns, self.odom_frame, self.base_frame, position_m, quaternion_xyzw)
        self._write(TF_TOPIC, stamp_ns, types["tf2_msgs/msg/TFMessage"](transforms=[transform]))
        odometry = types["nav_msgs/msg/Odometry"](
            header=self._header(stamp_ns, self.odom_frame),
            child_frame_id=self.base_frame,
            pose=types["geometry_msgs/msg/PoseWithCovariance"](
                pose=types["geometry_msgs/msg/Pose"](
                    position=types["geometry_msgs/msg/Point"](*position_m),
                    orientation=types["geometry_msgs/msg/Quaternion"](*quaternion_xyzw),
                ),
                covariance=np.zeros(36, np.float64),
            ),
            twist=types["geometry_msgs/msg/TwistWithCovariance"](
                twist=types["geometry_msgs/msg/Twist"](
                    linear=types["geometry_msgs/msg/Vector3"](*linear),
                    angular=types["geometry_msgs/msg/Vector3"](*angular),
                ),
                covariance=np.zeros(36, np.float64),
            ),
        )
        self._write(ODOM_TOPIC, stamp_ns, odometry)

    def write_clock(self, stamp_ns: int) -> None:
        """Write the simulation time on ``/clock``."""
        clock = self.typestore.types["rosgraph_msgs/msg/Clock"](clock=time_message(stamp_ns, self.typestore))
        self._write(CLOCK_TOPIC, stamp_ns, clock)

    def write_cloud(
        self, stamp_ns: int, cloud: np.ndarray, *, log_time_ns: int | None = None, frame_id: str | None = None
    ) -> None:
        """Write a cloud on ``/lidar/points`` in the lidar frame (or ``frame_id``: a cloud in the
        world or a custom frame, ``shaping.ShapedScan.frame_id``).

        Parameters
        ----------
        stamp_ns : int
            Header stamp, ns (``PointProfile.header_stamp_ns``).
        cloud : (height, width) structured array of the writer's profile
            ``layouts.point_cloud(scan, profile, stamp_ns)``.
        log_time_ns : int, optional
            Bag receive time, ns, e.g. when the scan was released (stamp + processing);
            default ``stamp_ns``.
        """
        cloud = np.asarray(cloud)
        if cloud.dtype not in (self.profile.dtype, self.profile.spherical):
            raise OutputError(
                f"cloud dtype {cloud.dtype} is not the bag's point type {self.profile.name} ({self.profile.dtype}, or "
                "its spherical layout)"
            )
        frame = self.lidar_frame if frame_id is None else frame_id
        message = pointcloud2_message(cloud, frame, stamp_ns, self.typestore)
        self._write(self.cloud_topic, stamp_ns if log_time_ns is None else log_time_ns, message)

    def write_scan(self, scan: Scan, *, stamp_ns: int | None = None, log_time_ns: int | None = None) -> None:
        """Write the scan's cloud (``write_cloud`` of ``point_cloud``).

        ``stamp_ns`` is the header stamp; default ``layouts.default_stamp_ns``.
        """
        if stamp_ns is None:
            stamp_ns = default_stamp_ns(scan, self.profile)
        self.write_cloud(stamp_ns, point_cloud(scan, self.profile, stamp_ns), log_time_ns=log_time_ns)
