"""The per-cell truth of a scan as one dtype: the ``.truth.npz`` file and the ``/lidar/truth`` cloud.

``TRUTH_POINT`` is the contract (docs/outputs.md, "Cell truth"): one packed little-endian record
per cell, organised as the spec's cloud (height = columns, width = rings, cell ``c N_r + r``).
The PointCloud2 of the ``/lidar/truth`` topic takes its ``PointField`` list from it
(``pointcloud2.pointcloud2_message``), and the file holds the same array.

File ``<session>/lidar/scan_<time>.truth.npz`` (numpy's compressed ``.npz``, no pickles):

=================  ==================  ===================================================
array              dtype, shape        contents
=================  ==================  ===================================================
``cells``          TRUTH_POINT,        the records, (columns, rings)
                   (N_c, N_r)
``reason_names``   str, (7,)           name of each reason code (``radiometry.truth``)
``class_names``    str                 name of each class number
``material_names`` str                 name of each material number
``stamp_ns``       int64, ()           the scan stamp, ns
``scan_index``     int64, ()           the scan's number in its run
``frame_id``       str, ()             frame of x, y, z
``layout``         str, ()             ``TRUTH_LAYOUT``, the layout's name and version
=================  ==================  ===================================================
"""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path
from typing import Any, NamedTuple

import numba
import numpy as np

from acres_lidar_ros.config.material_table import CLASS_NAMES, MATERIAL_NAMES
from acres_lidar_ros.errors import OutputError
from acres_lidar_ros.outputs.files import atomic_write
from acres_lidar_ros.radiometry.cell_truth import REASON_NAMES, CellTruth
from acres_lidar_ros.scan.scan_types import Scan

TRUTH_LAYOUT = "acres_lidar_truth/1"

TRUTH_POINT = np.dtype(
    [
        ("x", "<f4"),
        ("y", "<f4"),
        ("z", "<f4"),
        ("range_m", "<f4"),
        ("incidence_rad", "<f4"),
        ("signal_counts", "<f4"),
        ("threshold_counts", "<f4"),
        ("instance", "<u4"),
        ("class", "u1"),
        ("material", "u1"),
        ("reason", "u1"),
    ]
)
"""Packed (35 bytes): the noise-free point in the sensor frame (m), ``R_e`` (m), ``theta`` (rad),
``S`` and ``S_T`` (counts), the instance, class and material of the strongest contribution, and the
reason code. NaN floats where a cell has no deciding echo (``radiometry.truth``)."""

_ARRAYS = ("cells", "reason_names", "class_names", "material_names", "stamp_ns", "scan_index", "frame_id", "layout")


class TruthFile(NamedTuple):
    """A ``.truth.npz`` file as read back (``read_truth_npz``)."""

    cells: np.ndarray
    reason_names: tuple[str, ...]
    class_names: tuple[str, ...]
    material_names: tuple[str, ...]
    stamp_ns: int
    scan_index: int
    frame_id: str


def scan_truth(scan: Scan) -> CellTruth:
    """``scan.truth``; ``OutputError`` when the scan was traced without ``ScanOptions.truth``."""
    if scan.truth is None or scan.truth.points_sensor is None:
        raise OutputError(f"scan {scan.index} has no cell truth: trace it with ScanOptions(truth=True) (--truth)")
    return scan.truth


def truth_cloud(scan: Scan) -> np.ndarray:
    """(columns, rings) ``TRUTH_POINT`` array of a scan's cell truth (cell ``c N_r + r``)."""
    truth = scan_truth(scan)
    cloud = np.empty(scan.columns * scan.rings, TRUTH_POINT)
    points = truth.points_sensor if truth.points_sensor is not None else np.full((cloud.size, 3), np.nan)
    _fill_truth(cloud.view(_TRUTH_POINT_FILL), points, truth.arrays())
    return cloud.reshape(scan.columns, scan.rings)


def _fill_dtype(dtype: np.dtype) -> np.dtype:
    """``dtype`` with "class" (a Python keyword, no attribute in compiled code) named class_id."""
    assert dtype.names is not None and dtype.fields is not None
    fields = dtype.fields
    return np.dtype(
        {
            "names": [("class_id" if n == "class" else n) for n in dtype.names],
            "formats": [fields[n][0] for n in dtype.names],
            "offsets": [fields[n][1] for n in dtype.names],
            "itemsize": dtype.itemsize,
        }
    )


_TRUTH_POINT_FILL = _fill_dtype(TRUTH_POINT)


@numba.njit(cache=True, nogil=True)
def _fill_truth(cloud, points, truth):
    """Every record of the truth cloud from ``points`` and ``truth`` (a ``CellTruthArrays``) in one
    pass (float64 fields rounded to float32 as numpy casts)."""
    for i in range(cloud.shape[0]):
        record = cloud[i]
        record.x = points[i, 0]
        record.y = points[i, 1]
        record.z = points[i, 2]
        record.range_m = truth.range_m[i]
        record.incidence_rad = truth.incidence_rad[i]
        record.signal_counts = truth.signal_counts[i]
        record.threshold_counts = truth.threshold_counts[i]
        record.instance = truth.instance[i]
        record.class_id = truth.class_id[i]
        record.material = truth.material_id[i]
        record.reason = truth.reason[i]


def truth_file_name(stem: str) -> str:
    """``<stem>.truth.npz``: the truth file beside a scan's point files (``files.scan_file_stem``)."""
    return f"{stem}.truth.npz"


def write_truth_npz(path: str | os.PathLike[str], scan: Scan) -> Path:
    """Write a scan's truth file (layout in the module notes), whole or not at all.

    Raises
    ------
    OutputError
        The scan has no truth, the file exists, or the write failed.
    """
    arrays: dict[str, Any] = {
        "cells": truth_cloud(scan),
        "reason_names": np.array(REASON_NAMES),
        "class_names": np.array(CLASS_NAMES),
        "material_names": np.array(MATERIAL_NAMES),
        "stamp_ns": np.int64(scan.stamp_ns),
        "scan_index": np.int64(scan.index),
        "frame_id": np.array(scan.frame_id),
        "layout": np.array(TRUTH_LAYOUT),
    }
    return atomic_write(path, lambda handle: np.savez_compressed(handle, **arrays))


def read_truth_npz(path: str | os.PathLike[str]) -> TruthFile:
    """Read a ``.truth.npz`` file back, checking its layout.

    Raises
    ------
    OutputError
        The file is missing or no ``.npz``, lacks an array, or holds another layout.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            missing = [name for name in _ARRAYS if name not in npz.files]
            if missing:
                raise OutputError(f"{path}: no array {missing[0]!r}; a truth file holds {', '.join(_ARRAYS)}")
            arrays = {name: npz[name] for name in _ARRAYS}
    except (OSError, ValueError, zipfile.BadZipFile) as error:
        raise OutputError(f"{path}: not a readable .npz truth file ({error})") from error
    if str(arrays["layout"]) != TRUTH_LAYOUT or arrays["cells"].dtype != TRUTH_POINT:
        raise OutputError(
            f"{path}: layout {str(arrays['layout'])!r} with dtype {arrays['cells'].dtype}; expected {TRUTH_LAYOUT}"
        )
    return TruthFile(
        cells=arrays["cells"],
        reason_names=tuple(str(v) for v in arrays["reason_names"]),
        class_names=tuple(str(v) for v in arrays["class_names"]),
        material_names=tuple(str(v) for v in arrays["material_names"]),
        stamp_ns=int(arrays["stamp_ns"]),
        scan_index=int(arrays["scan_index"]),
        frame_id=str(arrays["frame_id"]),
    )
