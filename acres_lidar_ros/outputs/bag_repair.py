"""Rebuild a rosbag2 MCAP bag that lost its end: what ``ros2 bag reindex`` does, for our bags.

A recording killed (SIGKILL, a power cut) or stopped by a full disk leaves its MCAP file without
the summary section and footer, and the bag directory without ``metadata.yaml``; rosbags and the
mcap reader both refuse it. Everything the recorder flushed (``BagWriter.flush``, once per scan)
lies in complete chunks, though. ``repair_bag`` reads the records in file order with the mcap
package's ``StreamReader`` up to the first incomplete or unreadable record, writes them into a
new bag with rosbags' ``Writer`` (chunks, indexes, summary, statistics and ``metadata.yaml``),
and only then moves the new file and metadata over the old ones. Repairing twice does nothing
more; a repair stopped midway leaves the old bag as it was (its leftover folder is removed by
the next run).
"""

from __future__ import annotations

import os
import shutil
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acres_lidar_ros.errors import OutputError

METADATA_NAME = "metadata.yaml"


@dataclass
class BagRepair:
    """What ``repair_bag`` found and did.

    ``repaired`` is False for a bag that was readable as it was (nothing written).
    ``message_counts`` maps topic -> messages in the bag afterwards; ``dropped_bytes`` is the
    length of the unreadable end (an unfinished chunk or summary), ``stop_reason`` why reading
    stopped there.
    """

    path: Path
    repaired: bool
    message_counts: dict[str, int] = field(default_factory=dict)
    dropped_bytes: int = 0
    stop_reason: str = ""

    def line(self) -> str:
        counts = ", ".join(f"{count} {topic}" for topic, count in sorted(self.message_counts.items()))
        if not self.repaired:
            return f"bag {self.path}: readable as it is ({counts or 'no messages'})"
        dropped = f"; dropped the last {self.dropped_bytes} bytes ({self.stop_reason})" if self.dropped_bytes else ""
        return f"bag {self.path}: rebuilt summary and {METADATA_NAME} ({counts or 'no messages'}){dropped}"


def repair_folder(path: Path) -> Path:
    """The temporary folder a repair of the bag at ``path`` builds its new bag in."""
    return path.parent / f".{path.name}.repair"


def bag_file(path: Path) -> Path:
    """The single ``.mcap`` file of the bag directory ``path``."""
    if not path.is_dir():
        raise OutputError(f"bag {path} is not a directory")
    files = sorted(path.glob("*.mcap"))
    if len(files) != 1:
        found = ", ".join(f.name for f in files) or "none"
        raise OutputError(f"bag {path} must hold exactly one .mcap file to be repaired; found {found}")
    return files[0]


def bag_is_readable(path: Path) -> tuple[bool, dict[str, int]]:
    """Whether rosbags opens the bag and the MCAP has its summary; with the topic counts."""
    from mcap.exceptions import McapError
    from mcap.reader import make_reader
    from rosbags.rosbag2 import Reader
    from rosbags.rosbag2.errors import ReaderError

    if not (path / METADATA_NAME).is_file():
        return False, {}
    try:
        with Reader(path) as reader:
            counts = {connection.topic: connection.msgcount for connection in reader.connections}
        with bag_file(path).open("rb") as stream:
            if make_reader(stream).get_summary() is None:
                return False, {}
    except (ReaderError, McapError, OSError, ValueError, struct.error):
        return False, {}
    return True, counts


def _records(stream: Any, stop: dict[str, Any]) -> Iterator[Any]:
    """Schema, Channel and Message records of the data section, in file order, up to the first
    unreadable record; ``stop`` gets its ``offset`` (bytes known good) and ``reason``."""
    from mcap.exceptions import McapError
    from mcap.records import Channel, Chunk, DataEnd, Message, MessageIndex, Schema
    from mcap.stream_reader import StreamReader, breakup_chunk

    reader = StreamReader(stream, emit_chunks=True)
    records = reader.records
    stop["offset"] = 0
    while True:
        try:
            record = next(records)
            inner = breakup_chunk(record) if isinstance(record, Chunk) else [record]
        except StopIteration:
            stop["reason"] = "end of file"
            return
        except (McapError, struct.error, ValueError, EOFError) as error:
            stop["reason"] = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
            return
        if isinstance(record, DataEnd):
            stop["offset"] = stream.tell()
            stop["reason"] = "end of data"
            return
        for item in inner:
            if isinstance(item, (Schema, Channel, Message)):
                yield item
        if not isinstance(record, MessageIndex):
            stop["offset"] = stream.tell()


def readable_prefix_bytes(mcap_file: Path) -> int:
    """Bytes at the start of an MCAP file that read as complete records (the whole data section of
    a finished file; up to the last complete chunk of one cut short)."""
    stop: dict[str, Any] = {}
    try:
        with Path(mcap_file).open("rb") as stream:
            for _ in _records(stream, stop):
                pass
    except OSError as error:
        raise OutputError(f"cannot read {mcap_file}: {error}") from error
    return int(stop.get("offset", 0))


def _connection_args(schema: Any, channel: Any, typestore: Any) -> dict[str, Any]:
    """rosbags ``add_connection`` keywords of an MCAP channel and its schema."""
    from rosbags.rosbag2.metadata import parse_qos
    from rosbags.typesys import get_types_from_msg

    msgtype = schema.name
    msgdef = schema.data.decode("utf-8")
    if msgtype not in typestore.fielddefs:
        try:
            typestore.register(get_types_from_msg(msgdef, msgtype))
        except Exception as error:
            raise OutputError(f"channel {channel.topic}: cannot read the definition of {msgtype}: {error}") from error
    return {
        "topic": channel.topic,
        "msgtype": msgtype,
        "msgdef": msgdef,
        "rihs01": typestore.hash_rihs01(msgtype),
        "serialization_format": channel.message_encoding,
        "offered_qos_profiles": parse_qos(channel.metadata.get("offered_qos_profiles", "")),
    }


def repair_bag(path: str | os.PathLike[str], typestore: Any = None) -> BagRepair:
    """Make the bag at ``path`` readable again, keeping every message of its complete chunks.

    Parameters
    ----------
    path : path
        A rosbag2 MCAP bag directory with one ``.mcap`` file.
    typestore : rosbags Typestore, optional
        Types for the message hashes; default ROS 2 Jazzy. Types it lacks are read from the
        bag's schemas.

    Raises
    ------
    OutputError
        Not a bag directory, not an MCAP file, or too little free space for the new copy (it needs
        about the size of the old file).
    """
    from rosbags.rosbag2 import StoragePlugin, Writer

    from acres_lidar_ros.outputs.pointcloud2 import default_typestore

    path = Path(path)
    work = repair_folder(path)
    if work.exists():
        shutil.rmtree(work)  # left by a repair that was stopped
    (path / f"{METADATA_NAME}.tmp").unlink(missing_ok=True)  # left by rosbags' writer
    mcap = bag_file(path)
    readable, counts = bag_is_readable(path)
    if readable:
        return BagRepair(path, repaired=False, message_counts=counts)
    size = mcap.stat().st_size
    free = shutil.disk_usage(path).free
    if free < size + (1 << 20):
        raise OutputError(
            f"repairing bag {path} needs about {size / 2**20 + 1:.1f} MiB free on its disk for the new copy; "
            f"{free / 2**20:.1f} MiB are free"
        )
    typestore = default_typestore() if typestore is None else typestore
    schemas: dict[int, Any] = {}
    channels: dict[int, Any] = {}
    connections: dict[int, Any] = {}
    counts = {}
    stop: dict[str, Any] = {}
    new_bag = work / mcap.stem
    work.mkdir()
    try:
        writer = Writer(new_bag, version=9, storage_plugin=StoragePlugin.MCAP)
        writer.open()
        try:
            with mcap.open("rb") as stream:
                for record in _records(stream, stop):
                    kind = type(record).__name__
                    if kind == "Schema":
                        schemas[record.id] = record
                    elif kind == "Channel":
                        channels[record.id] = record
                    elif record.channel_id not in connections:
                        channel = channels.get(record.channel_id)
                        if channel is None or channel.schema_id not in schemas:
                            raise OutputError(f"bag {mcap}: message of channel {record.channel_id} has no definition")
                        args = _connection_args(schemas[channel.schema_id], channel, typestore)
                        connections[record.channel_id] = writer.add_connection(**args)
                        counts[channel.topic] = 0
                    if kind == "Message":
                        writer.write(connections[record.channel_id], record.log_time, record.data)
                        counts[channels[record.channel_id].topic] += 1
            writer.close()
        except BaseException:
            writer.abort()
            raise
        os.replace(new_bag / mcap.name, mcap)
        os.replace(new_bag / METADATA_NAME, path / METADATA_NAME)
    except OSError as error:
        raise OutputError(f"cannot repair bag {path}: {error}") from error
    finally:
        shutil.rmtree(work, ignore_errors=True)
    dropped = 0 if stop.get("reason") == "end of data" else max(0, size - int(stop.get("offset", 0)))
    return BagRepair(path, True, counts, dropped_bytes=dropped, stop_reason=stop.get("reason", ""))
