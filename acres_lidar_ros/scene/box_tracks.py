"""Tracks of other vehicles as oriented boxes over time (``acres-lidar record --boxes FILE``).

File format (JSON, world frame, SI units)::

    {
      "_comment": "keys starting with _ are comments",
      "tracks": [
        {
          "object_id": 101,
          "samples": [
            {"t_s": 0.0, "centre_m": [12.0, 3.0, 0.9], "quaternion_xyzw": [0, 0, 0, 1],
             "half_extents_m": [2.0, 0.8, 0.9]},
            {"t_s": 4.0, "centre_m": [20.0, 3.0, 0.9], "quaternion_xyzw": [0, 0, 0.3826834, 0.9238795],
             "half_extents_m": [2.0, 0.8, 0.9]}
          ]
        }
      ]
    }

* ``object_id``: the track's number (an integer 0 to 2147483631, unique in the file); its hits
  have class vehicle (12), material vehicle (14) and the instance label 2147483648 + object_id
  (``instances.vehicle_instance``: one id per track, apart from the scene's objects).
* ``samples``: at least one, with strictly increasing ``t_s`` (the run's time, s, the clock of
  the trajectory); ``centre_m`` the box centre in the world; ``quaternion_xyzw`` turns box
  coordinates into the world (unit within 1e-3, normalised on loading); ``half_extents_m`` the
  half sizes along the box axes (each > 0).

At a time ``t`` a track gives a box when ``t_first <= t <= t_last``: between two samples the centre
and the half extents are linear in time and the orientation is the slerp of the two quaternions
(ACRES Core's ``FAcresLidarBox`` per scan). Outside its span a track has no box, so a one-sample
track exists only at its own instant; give a parked vehicle two samples spanning the run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy.spatial.transform import Rotation, Slerp

from acres_lidar_ros.config.input_files import MAX_BOX_TRACKS_FILE_BYTES, load_json_file
from acres_lidar_ros.errors import SceneError
from acres_lidar_ros.scene.boxes import VehicleBox
from acres_lidar_ros.scene.instances import MAX_VEHICLE_OBJECT_ID

UNIT_QUATERNION_TOLERANCE = 1e-3
SAMPLE_KEYS = ("t_s", "centre_m", "quaternion_xyzw", "half_extents_m")
TRACK_KEYS = ("object_id", "samples")
#: Largest |t_s| (s) and |coordinate| or half extent (m) of a sample: beyond them the box
#: does not survive the float32 of the trace or the nanosecond stamps of a run.
MAX_TIME_S = 1e9
MAX_LENGTH_M = 1e6


@dataclass(frozen=True)
class BoxTrack:
    """One box over time.

    Attributes
    ----------
    object_id : int
    times_s : (n,) float64, strictly increasing
    centres_m : (n, 3) float64
    quaternions_xyzw : (n, 4) float64, unit
    half_extents_m : (n, 3) float64, > 0
    """

    object_id: int
    times_s: np.ndarray
    centres_m: np.ndarray
    quaternions_xyzw: np.ndarray
    half_extents_m: np.ndarray

    def box_at(self, t_s: float) -> VehicleBox | None:
        """The interpolated box at ``t_s``, or None outside ``[times_s[0], times_s[-1]]``."""
        t = float(t_s)
        if not self.times_s[0] <= t <= self.times_s[-1]:
            return None
        if len(self.times_s) == 1:
            return VehicleBox(self.centres_m[0], self.quaternions_xyzw[0], self.half_extents_m[0], self.object_id)
        i = min(int(np.searchsorted(self.times_s, t, side="right")) - 1, len(self.times_s) - 2)
        t0, t1 = self.times_s[i], self.times_s[i + 1]
        lam = (t - t0) / (t1 - t0)
        centre = (1.0 - lam) * self.centres_m[i] + lam * self.centres_m[i + 1]
        half = (1.0 - lam) * self.half_extents_m[i] + lam * self.half_extents_m[i + 1]
        slerp = Slerp([0.0, 1.0], Rotation.from_quat(self.quaternions_xyzw[i : i + 2]))
        q = slerp([lam]).as_quat()[0]
        return VehicleBox(centre, q / np.linalg.norm(q), half, self.object_id)


@dataclass(frozen=True)
class BoxTracks:
    """All tracks of a file.

    Attributes
    ----------
    tracks : tuple[BoxTrack, ...], in file order
    path : Path or None
    """

    tracks: tuple[BoxTrack, ...]
    path: Path | None = None

    def boxes_at(self, t_s: float) -> list[VehicleBox]:
        """The boxes present at ``t_s`` (tracks outside their span are absent), in file order."""
        boxes = (track.box_at(t_s) for track in self.tracks)
        return [box for box in boxes if box is not None]

    @property
    def span_s(self) -> tuple[float, float]:
        """Earliest and latest sample time of all tracks (NaN, NaN without tracks)."""
        if not self.tracks:
            return (math.nan, math.nan)
        return (min(float(t.times_s[0]) for t in self.tracks), max(float(t.times_s[-1]) for t in self.tracks))

    @classmethod
    def from_dict(cls, data: Any, where: str = "box tracks", path: Path | None = None) -> BoxTracks:
        """Validate a parsed file (see the module docstring); ``SceneError`` naming ``where``."""
        if not isinstance(data, dict) or not isinstance(data.get("tracks"), list):
            raise SceneError(f"{where}: expected an object with a list 'tracks' (and keys starting with _ as comments)")
        unknown = {k for k in data if not k.startswith("_")} - {"tracks"}
        if unknown:
            raise SceneError(f"{where}: unknown key(s) {sorted(unknown)}; allowed: tracks")
        tracks: list[BoxTrack] = []
        seen: set[int] = set()
        for k, entry in enumerate(data["tracks"]):
            track = _track(entry, f"{where}: tracks[{k}]")
            if track.object_id in seen:
                raise SceneError(
                    f"{where}: tracks[{k}]: object_id {track.object_id} appears twice; expected unique ids"
                )
            seen.add(track.object_id)
            tracks.append(track)
        return cls(tuple(tracks), path)


def _numbers(value: Any, count: int, where: str, limit: float = MAX_LENGTH_M) -> np.ndarray:
    # Compared before the float conversion: a huge integer is refused, never an OverflowError.
    if (
        not isinstance(value, list)
        or len(value) != count
        or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and -limit <= v <= limit for v in value)
    ):
        raise SceneError(f"{where} = {_short(value)}: expected {count} finite numbers from {-limit:g} to {limit:g}")
    return np.asarray(value, dtype=np.float64)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:40]}...({len(text)} characters)"


def _track(entry: Any, where: str) -> BoxTrack:
    if not isinstance(entry, dict):
        raise SceneError(f"{where} = {_short(entry)}: expected an object with object_id and samples")
    unknown = sorted(k for k in entry if not k.startswith("_") and k not in TRACK_KEYS)
    if unknown:
        raise SceneError(f"{where}.{unknown[0]}: unknown key; allowed: {', '.join(TRACK_KEYS)}")
    object_id = entry.get("object_id")
    if isinstance(object_id, bool) or not isinstance(object_id, int) or not 0 <= object_id <= MAX_VEHICLE_OBJECT_ID:
        raise SceneError(f"{where}.object_id = {_short(object_id)}: expected an integer 0 to {MAX_VEHICLE_OBJECT_ID}")
    where = f"{where} (object_id {object_id})"
    samples = entry.get("samples")
    if not isinstance(samples, list) or not samples:
        raise SceneError(f"{where}.samples: expected a non-empty list of samples")
    times: list[float] = []
    centres: list[np.ndarray] = []
    quats: list[np.ndarray] = []
    halves: list[np.ndarray] = []
    for i, sample in enumerate(samples):
        at = f"{where}.samples[{i}]"
        if not isinstance(sample, dict):
            raise SceneError(f"{at} = {_short(sample)}: expected an object with {', '.join(SAMPLE_KEYS)}")
        keys = {k for k in sample if not k.startswith("_")}
        if keys != set(SAMPLE_KEYS):
            extra, missing = sorted(keys - set(SAMPLE_KEYS)), sorted(set(SAMPLE_KEYS) - keys)
            problem = f"unknown key {extra[0]!r}" if extra else f"missing key {missing[0]!r}"
            raise SceneError(f"{at}: {problem}; expected exactly {', '.join(SAMPLE_KEYS)}")
        t = float(_numbers([sample["t_s"]], 1, f"{at}.t_s", MAX_TIME_S)[0])
        if times and t <= times[-1]:
            raise SceneError(
                f"{at}.t_s = {t!r} is not after the previous sample's {times[-1]!r}; expected strictly increasing times"
            )
        q = _numbers(sample["quaternion_xyzw"], 4, f"{at}.quaternion_xyzw")
        norm = float(np.linalg.norm(q))
        if abs(norm - 1.0) > UNIT_QUATERNION_TOLERANCE:
            raise SceneError(
                f"{at}.quaternion_xyzw = {q.tolist()} has norm {norm:.6g}; expected a unit quaternion "
                f"(norm within {UNIT_QUATERNION_TOLERANCE} of 1)"
            )
        half = _numbers(sample["half_extents_m"], 3, f"{at}.half_extents_m")
        if (half <= 0).any():
            raise SceneError(f"{at}.half_extents_m = {half.tolist()}: expected three half extents > 0 m")
        times.append(t)
        centres.append(_numbers(sample["centre_m"], 3, f"{at}.centre_m"))
        quats.append(q / norm)
        halves.append(half)
    return BoxTrack(object_id, np.array(times), np.array(centres), np.array(quats), np.array(halves))


def load_box_tracks(path: str | Path) -> BoxTracks:
    """Read and validate a box-track file.

    Raises
    ------
    SceneError
        The file cannot be read or is not JSON; a track lacks ``object_id`` or samples, or
        repeats an id; a sample has times that do not increase, a non-positive half extent, a
        quaternion whose norm is not 1 within 1e-3, or a malformed number (the message names
        the file, the track, the sample and the value).
    """
    path = Path(path)
    data = load_json_file(path, "box tracks", MAX_BOX_TRACKS_FILE_BYTES, SceneError)
    return BoxTracks.from_dict(data, f"box tracks {str(path)!r}", path)
