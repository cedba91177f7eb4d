"""Drives of a user's scene: waypoint files, and poses checked against the terrain.

A waypoint file (``acres-lidar trajectory --waypoints``) is a CSV of ``x_m,y_m`` rows in the
scene frame: one header line without numbers may come first, lines starting with ``#`` and blank
lines are skipped (docs/scene_format.md, "Drives").
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from acres_lidar_ros.config.input_files import read_regular_file
from acres_lidar_ros.errors import SceneError
from acres_lidar_ros.scene import scene_limits
from acres_lidar_ros.scene.scene_model import Scene

#: Largest waypoint file, bytes, and most waypoints.
MAX_WAYPOINT_FILE_BYTES = 16 << 20
MAX_WAYPOINTS = 100_000
#: A base_footprint pose more than this below the terrain under it is underground (its scans see
#: the ground from below: a few percent of the points), m.
BELOW_GROUND_TOLERANCE_M = 0.05
#: A base_footprint pose more than this above the terrain under it flies, m.
ABOVE_GROUND_TOLERANCE_M = 2.0


def read_waypoints(path: str | os.PathLike[str]) -> np.ndarray:
    """(n, 2) float64 waypoints [x_m, y_m] of a CSV file (module docstring).

    Raises
    ------
    SceneError
        A missing or unreadable file, a row without two finite numbers within the scene's
        limit, fewer than 2 or more than ``MAX_WAYPOINTS`` rows; the message names the file and
        the line.
    """
    path = Path(path)
    if not path.exists():
        raise SceneError(f"waypoint file {str(path)!r} does not exist")
    data = read_regular_file(path, "waypoint file", MAX_WAYPOINT_FILE_BYTES, SceneError)
    try:
        lines = data.decode("utf-8").splitlines()
    except UnicodeDecodeError as err:
        raise SceneError(f"waypoint file {str(path)!r}: byte {err.start} is not UTF-8: expected a CSV text") from err
    rows: list[tuple[float, float]] = []
    top = scene_limits.MAX_SCENE_NUMBER
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        cells = [c.strip() for c in text.split(",")]
        try:
            values = [float(c) for c in cells]
        except ValueError:
            if not rows and number == _first_content_line(lines):
                continue  # a header such as "x_m,y_m"
            raise SceneError(
                f"waypoint file {str(path)!r} line {number}: {text[:80]!r}: expected two numbers x_m,y_m"
            ) from None
        if len(values) != 2 or not all(np.isfinite(v) and abs(v) <= top for v in values):
            raise SceneError(
                f"waypoint file {str(path)!r} line {number}: {text[:80]!r}: expected two finite numbers "
                f"x_m,y_m within {top:g} m"
            )
        rows.append((values[0], values[1]))
        if len(rows) > MAX_WAYPOINTS:
            raise SceneError(f"waypoint file {str(path)!r}: more than {MAX_WAYPOINTS} waypoints: the limit")
    if len(rows) < 2:
        raise SceneError(f"waypoint file {str(path)!r} has {len(rows)} waypoints: a drive needs 2 or more")
    return np.array(rows, dtype=np.float64)


def _first_content_line(lines: list[str]) -> int:
    for number, line in enumerate(lines, start=1):
        if line.strip() and not line.strip().startswith("#"):
            return number
    return 0


@dataclass(frozen=True)
class GroundCheck:
    """Poses against the terrain under them (``check_ground``).

    Attributes
    ----------
    clearance_m : (n,) float64
        Each pose's z minus the terrain height at its (x, y).
    below, above : (n,) bool
        Poses more than ``BELOW_GROUND_TOLERANCE_M`` below, or ``ABOVE_GROUND_TOLERANCE_M``
        above, the terrain.
    """

    clearance_m: np.ndarray
    below: np.ndarray
    above: np.ndarray

    def warnings(self, positions_m: np.ndarray, what: str, times_s: np.ndarray | None = None) -> list[str]:
        """One line per kind of fault: how many poses, the first one, the terrain height there."""
        lines = []
        for mask, side, limit in (
            (self.below, "below", BELOW_GROUND_TOLERANCE_M),
            (self.above, "above", ABOVE_GROUND_TOLERANCE_M),
        ):
            if not mask.any():
                continue
            i = int(np.argmax(mask))
            x, y, z = (float(v) for v in positions_m[i])
            ground = z - float(self.clearance_m[i])
            at = "" if times_s is None else f" (first at t = {float(times_s[i]):.3f} s)"
            count = f"{int(mask.sum())} of {len(mask)} poses are" if len(mask) > 1 else "the pose is"
            lines.append(
                f"{what}: {count} more than {limit:g} m {side} the terrain{at}: base_footprint z = {z:.3f} m at "
                f"(x, y) = ({x:.2f}, {y:.2f}) where the terrain is at z = {ground:.3f} m ({z - ground:+.3f} m)"
            )
        return lines


def check_ground(scene: Scene, positions_m: np.ndarray) -> GroundCheck:
    """The clearance of base_footprint poses (n, 3) over the scene's terrain."""
    p = np.asarray(positions_m, float).reshape(-1, 3)
    clearance = p[:, 2] - np.asarray(scene.height_at(p[:, 0], p[:, 1]), float)
    return GroundCheck(clearance, clearance < -BELOW_GROUND_TOLERANCE_M, clearance > ABOVE_GROUND_TOLERANCE_M)
