"""Trajectories in the TUM format: one pose a line, ``t x y z qx qy qz qw``.

``t`` in seconds, position in metres, orientation a unit quaternion (x, y, z, w) rotating the
body's coordinates into the trajectory's frame. Lines starting with ``#`` and blank lines are
comments. Writer and reader check the same rules and raise ``PoseError`` naming the line (or
row) and the value: finite numbers, strictly increasing times, unit quaternions.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np

from acres_lidar_ros.config.input_files import read_regular_file
from acres_lidar_ros.errors import OutputError, PoseError
from acres_lidar_ros.outputs.files import atomic_write
from acres_lidar_ros.sensor.poses import first_bad_pose

QUATERNION_NORM_TOLERANCE = 1e-4  # TUM files of other tools often carry 6 decimals
MAX_TUM_FILE_BYTES = 256 << 20  # about 3 million poses; only a regular file is read


def _validate(
    times_s: np.ndarray, positions_m: np.ndarray, quaternions_xyzw: np.ndarray, line_numbers: np.ndarray, where: str
) -> None:
    """Raise ``PoseError`` at the first bad row (named by ``line_numbers``), by the pose history's rules."""
    bad = first_bad_pose(times_s, positions_m, quaternions_xyzw, QUATERNION_NORM_TOLERANCE)
    if bad is None:
        return
    kind, i = bad
    if kind == "not_finite":
        values = np.concatenate([[times_s[i]], positions_m[i], quaternions_xyzw[i]]).tolist()
        raise PoseError(f"{where} line {line_numbers[i]}: values {values} are not all finite")
    if kind == "not_increasing":
        raise PoseError(
            f"{where} line {line_numbers[i]}: time {float(times_s[i])!r} s does not increase "
            f"(previous {float(times_s[i - 1])!r} s); times must be strictly increasing"
        )
    raise PoseError(
        f"{where} line {line_numbers[i]}: quaternion {quaternions_xyzw[i].tolist()} has norm "
        f"{np.linalg.norm(quaternions_xyzw[i]):.9g}; allowed 1 +- {QUATERNION_NORM_TOLERANCE}"
    )


def encode_tum(times_s: np.ndarray, positions_m: np.ndarray, quaternions_xyzw: np.ndarray) -> bytes:
    """TUM text of ``n`` poses.

    Parameters
    ----------
    times_s : (n,) float64
        Strictly increasing, s.
    positions_m : (n, 3) float64
    quaternions_xyzw : (n, 4) float64
        Unit quaternions.
    """
    times_s = np.asarray(times_s, dtype=np.float64).reshape(-1)
    positions_m = np.asarray(positions_m, dtype=np.float64)
    quaternions_xyzw = np.asarray(quaternions_xyzw, dtype=np.float64)
    n = len(times_s)
    if positions_m.shape != (n, 3) or quaternions_xyzw.shape != (n, 4):
        raise PoseError(
            f"TUM poses need times (n,), positions (n, 3), quaternions (n, 4); got {times_s.shape}, "
            f"{positions_m.shape}, {quaternions_xyzw.shape}"
        )
    _validate(times_s, positions_m, quaternions_xyzw, np.arange(1, n + 1), "pose")
    text = io.StringIO()
    text.write("# t x y z qx qy qz qw\n")
    np.savetxt(text, np.column_stack([times_s, positions_m, quaternions_xyzw]), fmt="%.9f")
    return text.getvalue().encode("ascii")


def write_tum(
    path: str | os.PathLike[str], times_s: np.ndarray, positions_m: np.ndarray, quaternions_xyzw: np.ndarray
) -> Path:
    """Write poses to a new TUM file (atomic, no overwrite). Line 1 is a comment header."""
    return atomic_write(path, encode_tum(times_s, positions_m, quaternions_xyzw))


def read_tum(path: str | os.PathLike[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Read a TUM file.

    Returns
    -------
    times_s : (n,) float64
    positions_m : (n, 3) float64
    quaternions_xyzw : (n, 4) float64

    Raises
    ------
    PoseError
        A line without 8 numbers, a NaN or infinite value, a time not after the previous one, or
        a quaternion whose norm is not 1; the message names the path, the line and the value.
    OutputError
        The file cannot be read.
    """
    path = Path(path)
    data = read_regular_file(path, "TUM file", MAX_TUM_FILE_BYTES, OutputError)
    try:
        lines = data.decode("utf-8").splitlines()
    except UnicodeDecodeError as error:
        raise OutputError(
            f"cannot read TUM file {path}: byte 0x{data[error.start]:02x} at offset {error.start} is not UTF-8"
        ) from error
    numbered = [
        (i + 1, line.split()) for i, line in enumerate(lines) if line.strip() and not line.lstrip().startswith("#")
    ]
    rows = np.empty((len(numbered), 8), dtype=np.float64)
    for row, (line_number, words) in enumerate(numbered):
        try:
            if len(words) != 8:
                raise ValueError(f"{len(words)} values")
            rows[row] = [float(word) for word in words]
        except ValueError as error:
            raise PoseError(
                f"{path} line {line_number}: {' '.join(words)!r} is not 8 numbers 't x y z qx qy qz qw' ({error})"
            ) from error
    line_numbers = np.array([line_number for line_number, _ in numbered], dtype=np.int64)
    _validate(rows[:, 0], rows[:, 1:4], rows[:, 4:8], line_numbers, str(path))
    return rows[:, 0].copy(), rows[:, 1:4].copy(), rows[:, 4:8].copy()
