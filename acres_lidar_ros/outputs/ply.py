"""All returns of a scan as a binary little-endian PLY file (spec "Point File").

One ``vertex`` element with the ``PLY_POINT`` properties (31 bytes per point), or with
``labels`` the ``PLY_POINT_LABELS`` ones (``instance`` uint32 added: 35 bytes), the header derived
from the dtype. Comments carry the scan number, stamp and frame.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from acres_lidar_ros.errors import OutputError
from acres_lidar_ros.outputs.files import atomic_write
from acres_lidar_ros.outputs.layouts import all_returns
from acres_lidar_ros.outputs.shaping import ShapedScan, as_shaped
from acres_lidar_ros.scan.scan_types import Scan

_PLY_TYPE_OF_SCALAR = {
    ("i", 1): "char",
    ("u", 1): "uchar",
    ("i", 2): "short",
    ("u", 2): "ushort",
    ("i", 4): "int",
    ("u", 4): "uint",
    ("f", 4): "float",
    ("f", 8): "double",
}
# Reader: both the PLY 1.0 names and the sized aliases.
_SCALAR_OF_PLY_TYPE = {name: f"{kind}{size}" for (kind, size), name in _PLY_TYPE_OF_SCALAR.items()} | {
    "int8": "i1",
    "uint8": "u1",
    "int16": "i2",
    "uint16": "u2",
    "int32": "i4",
    "uint32": "u4",
    "float32": "f4",
    "float64": "f8",
}


def encode_ply(points: np.ndarray, comments: tuple[str, ...] = ()) -> bytes:
    """Binary little-endian PLY 1.0 bytes of a 1-D structured array (one vertex per record)."""
    points = np.ascontiguousarray(points)
    if points.ndim != 1 or points.dtype.names is None:
        raise OutputError(f"PLY points need a 1-D structured array, got {points.shape} {points.dtype}")
    lines = ["ply", "format binary_little_endian 1.0"]
    lines += [f"comment {text}" for text in comments]
    lines.append(f"element vertex {len(points)}")
    for name in points.dtype.names:
        scalar = points.dtype[name]
        ply_type = _PLY_TYPE_OF_SCALAR.get((scalar.kind, scalar.itemsize))
        if ply_type is None or scalar.shape or scalar != scalar.newbyteorder("<"):
            raise OutputError(f"field {name!r} of type {scalar} has no little-endian PLY scalar type")
        lines.append(f"property {ply_type} {name}")
    lines.append("end_header\n")
    return "\n".join(lines).encode("ascii") + points.tobytes()


def write_ply(path: str | os.PathLike[str], scan: Scan | ShapedScan, labels: bool = False) -> Path:
    """Write every return of the scan (``layouts.all_returns``, with ``labels`` their instance
    labels too) to a new PLY file (atomic); a ``ShapedScan``'s points in its frame and coordinates."""
    shaped = as_shaped(scan)
    comments = (
        "acres_lidar_ros point file",
        f"scan_index {shaped.scan.index}",
        f"stamp_ns {shaped.stamp_ns}",
        f"frame_id {shaped.frame_id}",
    )
    return atomic_write(path, encode_ply(all_returns(shaped, labels), comments))


def read_ply(path: str | os.PathLike[str]) -> np.ndarray:
    """Read the vertex element of a binary little-endian PLY file.

    Returns
    -------
    (n,) structured array with the file's vertex properties, in file order.

    Raises
    ------
    OutputError
        Not a binary little-endian PLY, a list property, other elements before the vertices, or
        too few data bytes; the message names the path.
    """
    path = Path(path)
    blob = path.read_bytes()
    end = blob.find(b"end_header")
    if not blob.startswith(b"ply") or end < 0:
        raise OutputError(f"PLY {path}: not a PLY file (no 'ply' magic or no end_header)")
    data_start = blob.index(b"\n", end) + 1
    lines = blob[:end].decode("ascii", errors="replace").splitlines()
    fmt, count, fields, element = None, None, [], None
    for line in lines[1:]:
        words = line.split()
        if not words or words[0] in ("comment", "obj_info"):
            continue
        if words[0] == "format":
            fmt = words[1]
        elif words[0] == "element":
            if element == "vertex":
                break  # elements after the vertices do not change the vertex bytes
            element, count = words[1], int(words[2])
            if element != "vertex":
                raise OutputError(f"PLY {path}: element {element!r} before vertex is not supported")
        elif words[0] == "property" and element == "vertex":
            if words[1] == "list" or words[1] not in _SCALAR_OF_PLY_TYPE:
                raise OutputError(f"PLY {path}: property {' '.join(words[1:])!r} is not a scalar")
            fields.append((words[2], "<" + _SCALAR_OF_PLY_TYPE[words[1]]))
    if fmt != "binary_little_endian" or count is None:
        raise OutputError(f"PLY {path}: format {fmt!r} with vertex count {count}; need binary_little_endian")
    dtype = np.dtype(fields)
    if len(blob) - data_start < count * dtype.itemsize:
        raise OutputError(f"PLY {path}: {len(blob) - data_start} data bytes, {count} vertices need more")
    return np.frombuffer(blob, dtype=dtype, count=count, offset=data_start).copy()
