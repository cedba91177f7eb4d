"""A cloud as a binary PCD 0.7 file (spec "Organised Cloud").

The spec's file is the organised ``XYZI`` cloud: WIDTH is the number of rings and HEIGHT the
number of columns; cell ``c * rings + r`` holds x, y, z and intensity as float32; a beam without
a return has NaN x, y, z and intensity 0. Any other layout of ``outputs.layouts`` is written
with its own fields (padding dropped), WIDTH and HEIGHT. The header is derived from the dtype.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from acres_lidar_ros.errors import OutputError
from acres_lidar_ros.outputs.files import atomic_write
from acres_lidar_ros.outputs.layouts import organised_cloud
from acres_lidar_ros.scan.scan_types import Scan

_PCD_TYPE_OF_KIND = {"f": "F", "i": "I", "u": "U"}
_KIND_OF_PCD_TYPE = {"F": "f", "I": "i", "U": "u"}


def encode_pcd(cloud: np.ndarray) -> bytes:
    """Binary PCD 0.7 bytes of a cloud.

    Parameters
    ----------
    cloud : (H, W) structured array of scalar numeric fields (e.g. ``XYZI``)
        H = PCD HEIGHT, W = PCD WIDTH (columns and rings for the spec's organised cloud).
    """
    cloud = np.ascontiguousarray(cloud)
    if cloud.ndim != 2 or cloud.dtype.names is None:
        raise OutputError(f"a PCD cloud needs a (height, width) structured array, got {cloud.shape} {cloud.dtype}")
    height, width = cloud.shape
    names = cloud.dtype.names
    scalars = [cloud.dtype[name] for name in names]
    for name, scalar in zip(names, scalars):
        if scalar.kind not in _PCD_TYPE_OF_KIND or scalar.shape or scalar != scalar.newbyteorder("<"):
            raise OutputError(f"field {name!r} of type {scalar} cannot be a little-endian PCD scalar")
    packed = np.dtype([(name, scalar) for name, scalar in zip(names, scalars)])  # no padding
    header = "\n".join(
        [
            "# .PCD v0.7 - Point Cloud Data file format",
            "VERSION 0.7",
            "FIELDS " + " ".join(names),
            "SIZE " + " ".join(str(s.itemsize) for s in scalars),
            "TYPE " + " ".join(_PCD_TYPE_OF_KIND[s.kind] for s in scalars),
            "COUNT " + " ".join("1" for _ in scalars),
            f"WIDTH {width}",
            f"HEIGHT {height}",
            "VIEWPOINT 0 0 0 1 0 0 0",
            f"POINTS {width * height}",
            "DATA binary",
            "",
        ]
    )
    body = cloud.astype(packed) if packed != cloud.dtype else cloud
    return header.encode("ascii") + body.tobytes()


def write_pcd(path: str | os.PathLike[str], scan: Scan, cloud: np.ndarray | None = None) -> Path:
    """Write a cloud of the scan to a new binary PCD file (atomic, no overwrite).

    ``cloud``: the cloud to write (``layouts.point_cloud``); default the spec's organised ``XYZI``.
    """
    return atomic_write(path, encode_pcd(organised_cloud(scan, "XYZI") if cloud is None else cloud))


def read_pcd(path: str | os.PathLike[str]) -> np.ndarray:
    """Read a binary PCD file.

    Returns
    -------
    (HEIGHT, WIDTH) structured array, one field per FIELDS entry (sub-array when COUNT > 1).

    Raises
    ------
    OutputError
        Not a PCD, a header line missing or malformed, a DATA kind other than binary, or too
        few data bytes; the message names the path.
    """
    path = Path(path)
    blob = path.read_bytes()
    header: dict[str, list[str]] = {}
    offset = 0
    while True:
        end = blob.find(b"\n", offset)
        if end < 0:
            raise OutputError(f"PCD {path}: header ends before a DATA line")
        line = blob[offset:end].decode("ascii", errors="replace").strip()
        offset = end + 1
        if not line or line.startswith("#"):
            continue
        key, *values = line.split()
        header[key.upper()] = values
        if key.upper() == "DATA":
            break
    try:
        names = header["FIELDS"]
        sizes = [int(v) for v in header["SIZE"]]
        types = header["TYPE"]
        counts = [int(v) for v in header.get("COUNT", ["1"] * len(names))]
        width, height = int(header["WIDTH"][0]), int(header["HEIGHT"][0])
        data_kind = header["DATA"][0]
    except (KeyError, IndexError, ValueError) as error:
        raise OutputError(f"PCD {path}: malformed or missing header line ({error!r})") from error
    if not len(names) == len(sizes) == len(types) == len(counts):
        raise OutputError(f"PCD {path}: FIELDS, SIZE, TYPE and COUNT have different lengths")
    if data_kind != "binary":
        raise OutputError(f"PCD {path}: DATA {data_kind} is not supported; allowed: binary")
    formats = []
    for name, size, kind, count in zip(names, sizes, types, counts):
        if kind not in _KIND_OF_PCD_TYPE:
            raise OutputError(f"PCD {path}: field {name!r} has TYPE {kind}; allowed F, I, U")
        scalar = np.dtype(f"<{_KIND_OF_PCD_TYPE[kind]}{size}")
        formats.append((name, scalar) if count == 1 else (name, scalar, (count,)))
    dtype = np.dtype(formats)
    n_points = width * height
    if len(blob) - offset < n_points * dtype.itemsize:
        raise OutputError(
            f"PCD {path}: {len(blob) - offset} data bytes, {n_points} points of {dtype.itemsize} bytes need more"
        )
    return np.frombuffer(blob, dtype=dtype, count=n_points, offset=offset).reshape(height, width).copy()
