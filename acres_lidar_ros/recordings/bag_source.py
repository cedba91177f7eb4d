"""The messages of a recording: rosbag2 (sqlite3 or MCAP) and ROS 1 bags, read with rosbags' ``AnyReader``.

A path is a rosbag2 directory (with ``metadata.yaml``), a run directory of ``acres-lidar record``
(its ``bag/``), or a ROS 1 ``.bag`` file. ``BagSource`` lists the topics, picks the cloud topic
(the one PointCloud2 topic when none is asked for) and yields the decoded clouds, the odometry and
the transforms. Every failure is a ``RecordingError`` naming the file: a missing topic lists the
topics and types found; an unreadable or truncated bag names the file and the byte offset where
its readable part ends.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from acres_lidar_ros.errors import OutputError, RecordingError
from acres_lidar_ros.outputs.pointcloud2 import decode_pointcloud2

POINTCLOUD2 = "sensor_msgs/msg/PointCloud2"
ODOMETRY = "nav_msgs/msg/Odometry"
TF_MESSAGE = "tf2_msgs/msg/TFMessage"
ROS1_SUFFIX = ".bag"


@dataclass(frozen=True)
class RawCloud:
    """One PointCloud2 of a recording, decoded from its own field list.

    Attributes
    ----------
    stamp_ns : int
        Header stamp, ns.
    frame_id : str
    cloud : (height, width) structured array
        ``outputs.pointcloud2.decode_pointcloud2`` of the message.
    source : str
        The bag it came from.
    """

    stamp_ns: int
    frame_id: str
    cloud: np.ndarray
    source: str


@dataclass(frozen=True)
class TransformSamples:
    """The samples of one transform ``parent -> child`` (maps child coordinates into the parent).

    times_s (n,), positions_m (n, 3), quaternions_xyzw (n, 4); ``static`` for ``/tf_static``.
    """

    parent: str
    child: str
    static: bool
    times_s: np.ndarray
    positions_m: np.ndarray
    quaternions_xyzw: np.ndarray


def resolve_bag_path(path: str | os.PathLike[str]) -> Path:
    """The bag of a path: a rosbag2 directory, a run directory's ``bag/``, a ``.bag`` file, or the
    directory of a ``.mcap``/``.db3`` file that has a ``metadata.yaml`` beside it."""
    p = Path(path)
    if p.is_dir():
        if (p / "metadata.yaml").is_file():
            return p
        if (p / "bag" / "metadata.yaml").is_file():
            return p / "bag"
        raise RecordingError(
            f"recording {p}: a directory without metadata.yaml (nor bag/metadata.yaml); allowed: a rosbag2 "
            "directory, a run directory of acres-lidar record, or a ROS 1 .bag file"
        )
    if p.is_file() and p.suffix == ROS1_SUFFIX:
        return p
    if p.is_file() and p.suffix in (".mcap", ".db3") and (p.parent / "metadata.yaml").is_file():
        return p.parent
    if not p.exists():
        raise RecordingError(f"recording {p} does not exist")
    raise RecordingError(
        f"recording {p} is not a bag: allowed a rosbag2 directory (metadata.yaml), a run directory, or a ROS 1 "
        f"{ROS1_SUFFIX} file"
    )


def readable_end(path: Path) -> tuple[int, int]:
    """``(offset, size)``: bytes of the bag's data file that read as complete records, and its size.

    For an MCAP bag the offset is the end of the last complete record (``outputs.bag_repair``);
    otherwise it is not known and the file's size is given for both.
    """
    files = sorted(path.glob("*.mcap")) if path.is_dir() else [path]
    if not files:
        files = sorted(path.glob("*.db3"))
    if not files:
        return 0, 0
    data = files[0]
    size = data.stat().st_size
    if data.suffix != ".mcap":
        return size, size
    from acres_lidar_ros.outputs.bag_repair import readable_prefix_bytes

    try:
        return readable_prefix_bytes(data), size
    except OutputError:
        return 0, size


def _unreadable(path: Path, error: BaseException) -> RecordingError:
    data = path if path.is_file() else next(iter(sorted(path.glob("*.mcap")) + sorted(path.glob("*.db3"))), path)
    offset, size = readable_end(path)
    where = f"{data}" if size == 0 else f"{data} ({size} bytes; readable records end at byte {offset})"
    hint = (
        " - a recording cut short; acres-lidar bag-repair recovers an MCAP's complete chunks" if offset < size else ""
    )
    return RecordingError(f"cannot read bag {where}: {error}{hint}")


class BagSource:
    """The messages of one or more bags, in time order. A context manager.

    Parameters
    ----------
    paths : sequence of path
        Bags (``resolve_bag_path``); several bags are read as one recording.
    """

    def __init__(self, paths: Sequence[str | os.PathLike[str]]) -> None:
        if not paths:
            raise RecordingError("no recording given: expected at least one bag")
        self.paths = [resolve_bag_path(p) for p in paths]
        self._readers: list[Any] = []

    def __enter__(self) -> BagSource:
        from rosbags.highlevel import AnyReader

        from acres_lidar_ros.outputs.pointcloud2 import default_typestore

        for path in self.paths:
            reader = AnyReader([path], default_typestore=default_typestore())
            try:
                reader.open()
            except Exception as error:  # rosbags raises its own errors, struct and OS errors alike
                self.close()
                raise _unreadable(path, error) from error
            self._readers.append(reader)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        readers, self._readers = self._readers, []
        for reader in readers:
            reader.close()

    def _require_open(self) -> None:
        if not self._readers:
            raise RecordingError(f"recording {', '.join(map(str, self.paths))} is not open; use BagSource in a with")

    def topics(self) -> dict[str, tuple[str, int]]:
        """Topic -> (message type, message count), over all bags."""
        self._require_open()
        found: dict[str, tuple[str, int]] = {}
        for reader in self._readers:
            for connection in reader.connections:
                msgtype, count = found.get(connection.topic, (connection.msgtype, 0))
                found[connection.topic] = (msgtype, count + int(connection.msgcount))
        return found

    def describe_topics(self) -> str:
        return ", ".join(f"{t} ({m}, {n})" for t, (m, n) in sorted(self.topics().items())) or "none"

    def topic_of_type(self, msgtype: str, topic: str | None, what: str) -> str:
        """``topic`` when the bags have it with ``msgtype``, else the one topic of that type.

        Raises ``RecordingError`` listing the topics and types found when it is missing, has
        another type, or (``topic`` None) when there is no topic or more than one of that type.
        """
        topics = self.topics()
        names = ", ".join(map(str, self.paths))
        if topic is not None:
            if topic not in topics:
                raise RecordingError(
                    f"recording {names} has no {what} topic {topic!r}; topics found: {self.describe_topics()}"
                )
            if topics[topic][0] != msgtype:
                raise RecordingError(
                    f"recording {names}: topic {topic!r} has type {topics[topic][0]}, expected {msgtype}"
                )
            return topic
        candidates = sorted(t for t, (m, _) in topics.items() if m == msgtype)
        if len(candidates) != 1:
            raise RecordingError(
                f"recording {names} has {len(candidates)} {msgtype} topics, expected one (give the topic); "
                f"topics found: {self.describe_topics()}"
            )
        return candidates[0]

    def _messages(self, topics: set[str]) -> Iterator[tuple[Path, str, Any]]:
        self._require_open()
        for path, reader in zip(self.paths, self._readers, strict=True):
            connections = [c for c in reader.connections if c.topic in topics]
            if not connections:
                continue
            try:
                for connection, _t, raw in reader.messages(connections=connections):
                    yield path, connection.topic, reader.deserialize(raw, connection.msgtype)
            except RecordingError:
                raise
            except Exception as error:  # a chunk cut short or a broken message
                raise _unreadable(path, error) from error

    def clouds(self, topic: str) -> Iterator[RawCloud]:
        """The decoded clouds of ``topic`` in bag order."""
        for path, _topic, message in self._messages({topic}):
            try:
                cloud = decode_pointcloud2(message)
            except OutputError as error:
                raise RecordingError(f"bag {path}, topic {topic}: {error}") from error
            stamp = message.header.stamp
            yield RawCloud(
                int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec), message.header.frame_id, cloud, str(path)
            )

    def odometry(self, topic: str) -> TransformSamples:
        """The poses of a nav_msgs/Odometry topic (header frame -> child frame), by header stamp."""
        times, positions, quats, frames = [], [], [], set()
        for _path, _topic, m in self._messages({topic}):
            frames.add((m.header.frame_id, m.child_frame_id))
            times.append(m.header.stamp.sec + m.header.stamp.nanosec * 1e-9)
            p, q = m.pose.pose.position, m.pose.pose.orientation
            positions.append((p.x, p.y, p.z))
            quats.append((q.x, q.y, q.z, q.w))
        if len(frames) > 1:
            raise RecordingError(f"odometry topic {topic} changes frames: {sorted(frames)}; expected one pair")
        parent, child = frames.pop() if frames else ("", "")
        return _samples(parent, child, False, times, positions, quats)

    def transforms(self, topics: Sequence[str]) -> list[TransformSamples]:
        """Every transform of the tf2_msgs/TFMessage ``topics`` present, grouped by (parent, child)."""
        present = set(self.topics())
        wanted = {t for t in topics if t in present}
        series: dict[tuple[str, str, bool], tuple[list, list, list]] = {}
        for _path, topic, message in self._messages(wanted):
            static = topic.endswith("tf_static")
            for tr in message.transforms:
                key = (tr.header.frame_id, tr.child_frame_id, static)
                t_list, p_list, q_list = series.setdefault(key, ([], [], []))
                t, r = tr.transform.translation, tr.transform.rotation
                t_list.append(tr.header.stamp.sec + tr.header.stamp.nanosec * 1e-9)
                p_list.append((t.x, t.y, t.z))
                q_list.append((r.x, r.y, r.z, r.w))
        return [_samples(parent, child, static, *lists) for (parent, child, static), lists in series.items()]


def _samples(parent: str, child: str, static: bool, times: list, positions: list, quats: list) -> TransformSamples:
    t = np.asarray(times, dtype=np.float64).reshape(-1)
    order = np.argsort(t, kind="stable")
    t = t[order]
    keep = np.concatenate([[True], np.diff(t) > 0]) if t.size else np.zeros(0, bool)  # repeated stamps: the first
    idx = order[keep]
    return TransformSamples(
        parent,
        child,
        static,
        t[keep],
        np.asarray(positions, dtype=np.float64).reshape(-1, 3)[idx],
        np.asarray(quats, dtype=np.float64).reshape(-1, 4)[idx],
    )
