"""Box tracks of other vehicles: the file format, interpolation in time, and every refusal."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from acres_lidar_ros.errors import SceneError
from acres_lidar_ros.scene.box_tracks import load_box_tracks

S45 = math.sin(math.radians(45.0))  # quaternion of a 90 deg yaw: (0, 0, s45, s45)


def sample(t, centre, q=(0, 0, 0, 1), half=(2.0, 0.8, 0.9)):
    return {"t_s": t, "centre_m": list(centre), "quaternion_xyzw": list(q), "half_extents_m": list(half)}


def write(tmp_path, data, name="tracks.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def two_tracks():
    return {
        "_comment": "a car turning left while it drives, and a trailer that waits",
        "tracks": [
            {
                "object_id": 101,
                "samples": [
                    sample(0.0, (10.0, 0.0, 0.9)),
                    sample(2.0, (14.0, 2.0, 0.9), (0, 0, S45, S45), (2.0, 0.8, 1.1)),
                ],
            },
            {"object_id": 7, "samples": [sample(1.0, (-5.0, 3.0, 1.0)), sample(3.0, (-5.0, 3.0, 1.0))]},
        ],
    }


def test_boxes_interpolate_linearly_and_by_slerp(tmp_path):
    tracks = load_box_tracks(write(tmp_path, two_tracks()))
    assert tracks.span_s == (0.0, 3.0)
    boxes = tracks.boxes_at(0.5)
    assert [b.object_id for b in boxes] == [101]  # the trailer's track starts at 1 s
    car = boxes[0]
    np.testing.assert_allclose(car.centre_m, [11.0, 0.5, 0.9])
    np.testing.assert_allclose(car.half_extents_m, [2.0, 0.8, 0.95])
    # A quarter of the way from yaw 0 to yaw 90 deg: yaw 22.5 deg.
    half_angle = math.radians(22.5) / 2.0
    np.testing.assert_allclose(car.quaternion_xyzw, [0, 0, math.sin(half_angle), math.cos(half_angle)], atol=1e-12)
    np.testing.assert_allclose(
        car.rotation[:, 0], [math.cos(math.radians(22.5)), math.sin(math.radians(22.5)), 0], atol=1e-12
    )


def test_boxes_exist_only_within_their_track_span(tmp_path):
    tracks = load_box_tracks(write(tmp_path, two_tracks()))
    assert [b.object_id for b in tracks.boxes_at(-0.1)] == []
    assert [b.object_id for b in tracks.boxes_at(0.0)] == [101]
    assert [b.object_id for b in tracks.boxes_at(1.5)] == [101, 7]
    ends = tracks.boxes_at(2.0)
    np.testing.assert_allclose(ends[0].centre_m, [14.0, 2.0, 0.9])
    np.testing.assert_allclose(ends[0].quaternion_xyzw, [0, 0, S45, S45], atol=1e-12)
    assert [b.object_id for b in tracks.boxes_at(2.5)] == [7]
    assert [b.object_id for b in tracks.boxes_at(3.0001)] == []


def test_a_single_sample_track_is_there_only_at_its_instant(tmp_path):
    tracks = load_box_tracks(write(tmp_path, {"tracks": [{"object_id": 3, "samples": [sample(4.0, (1, 2, 3))]}]}))
    assert len(tracks.boxes_at(4.0)) == 1 and tracks.boxes_at(3.9) == [] and tracks.boxes_at(4.1) == []


def test_slightly_non_unit_quaternions_are_normalised(tmp_path):
    data = {"tracks": [{"object_id": 1, "samples": [sample(0.0, (0, 0, 0), (0, 0, 0.7071, 0.7071))]}]}
    box = load_box_tracks(write(tmp_path, data)).boxes_at(0.0)[0]
    assert np.linalg.norm(box.quaternion_xyzw) == pytest.approx(1.0, abs=1e-12)


def bad(samples=None, **track):
    entry = {"object_id": 5, "samples": samples if samples is not None else [sample(0.0, (0, 0, 0))]}
    entry.update(track)
    return {"tracks": [entry]}


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (
            bad([sample(0.0, (0, 0, 0)), sample(1.0, (1, 0, 0)), sample(1.0, (2, 0, 0))]),
            r"samples\[2\]\.t_s = 1\.0 is not after the previous sample's 1\.0; expected strictly increasing times",
        ),
        (bad([sample(2.0, (0, 0, 0)), sample(1.0, (1, 0, 0))]), r"samples\[1\]\.t_s = 1\.0 is not after"),
        (
            bad([sample(0.0, (0, 0, 0), half=(2.0, 0.0, 0.9))]),
            r"half_extents_m = \[2\.0, 0\.0, 0\.9\]: expected three half extents > 0",
        ),
        (bad([sample(0.0, (0, 0, 0), half=(2.0, 0.8, -1.0))]), r"expected three half extents > 0"),
        (
            bad([sample(0.0, (0, 0, 0), q=(0, 0, 0, 2))]),
            r"quaternion_xyzw = \[0\.0, 0\.0, 0\.0, 2\.0\] has norm 2; expected a unit quaternion",
        ),
        (bad([sample(0.0, (0, 0, 0), q=(0, 0, 0.1, 0.9))]), r"expected a unit quaternion"),
        (
            bad([sample(0.0, (0, float("nan"), 0))]),
            r"samples\[0\]\.centre_m = \[0, NaN, 0\]: expected 3 finite numbers",
        ),
        (bad([]), r"samples: expected a non-empty list"),
        (bad(object_id="car"), r"object_id = 'car': expected an integer 0 to 2147483631"),
        (
            {"tracks": [{"object_id": 1, "samples": [{"t_s": 0.0, "centre_m": [0, 0, 0]}]}]},
            r"expected exactly t_s, centre_m",
        ),
        ({"boxes": []}, r"expected an object with a list 'tracks'"),
        ({"tracks": [], "frames": 1}, r"unknown key\(s\) \['frames'\]"),
    ],
)
def test_bad_tracks_are_refused_with_the_file_track_and_sample(tmp_path, data, match):
    path = write(tmp_path, data)
    with pytest.raises(SceneError, match=match) as info:
        load_box_tracks(path)
    assert str(path) in str(info.value)


def test_duplicate_ids_unreadable_and_malformed_files(tmp_path):
    twice = {"tracks": [{"object_id": 4, "samples": [sample(0.0, (0, 0, 0))]}] * 2}
    with pytest.raises(SceneError, match="object_id 4 appears twice"):
        load_box_tracks(write(tmp_path, twice))
    (tmp_path / "broken.json").write_text('{"tracks": [')
    with pytest.raises(SceneError, match="is not valid JSON"):
        load_box_tracks(tmp_path / "broken.json")
    with pytest.raises(SceneError, match="cannot be read"):
        load_box_tracks(tmp_path / "absent.json")
