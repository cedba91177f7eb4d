"""TUM trajectories: round trip, and the reader's checks name the line and the value."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.transform import Rotation

from acres_lidar_ros.errors import OutputError, PoseError
from acres_lidar_ros.outputs.tum import encode_tum, read_tum, write_tum


def _poses(n, seed=0):
    rng = np.random.default_rng(seed)
    times_s = 1_700_000_000.0 + np.cumsum(rng.uniform(0.001, 0.2, n))
    positions_m = rng.uniform(-500, 500, (n, 3))
    quaternions_xyzw = Rotation.random(n, random_state=seed).as_quat()
    return times_s, positions_m, quaternions_xyzw


def test_round_trip(tmp_path):
    poses = _poses(50)
    back = read_tum(write_tum(tmp_path / "traj.tum", *poses))
    for got, expected in zip(back, poses):
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-8)
    data_lines = [line for line in (tmp_path / "traj.tum").read_text().splitlines() if not line.startswith("#")]
    assert len(data_lines) == 50 and all(len(line.split()) == 8 for line in data_lines)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 20), st.integers(0, 2**31 - 1))
def test_round_trip_any_trajectory(n, seed):
    poses = _poses(n, seed)
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "t.tum"
        path.write_bytes(encode_tum(*poses))
        back = read_tum(path)
    np.testing.assert_allclose(back[0], poses[0], atol=1e-8, rtol=0)
    np.testing.assert_allclose(back[2], poses[2], atol=1e-8, rtol=0)


GOOD = "1.0 0 0 0 0 0 0 1\n"


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (GOOD + "# comment\n2.0 0 nan 0 0 0 0 1\n", r"line 3.*nan.*finite"),
        (GOOD + "\n1.0 1 0 0 0 0 0 1\n", r"line 3: time 1\.0 s does not increase"),
        (GOOD + "0.5 1 0 0 0 0 0 1\n", r"line 2: time 0\.5"),
        (GOOD + "2.0 0 0 0 0 0 0.5 0.5\n", r"line 2: quaternion \[0\.0, 0\.0, 0\.5, 0\.5\] has norm 0\.7071"),
        (GOOD + "2.0 0 0 0 0 0 1\n", r"line 2: .*not 8 numbers"),
        (GOOD + "2.0 0 0 zero 0 0 0 1\n", r"line 2: .*zero"),
    ],
)
def test_reader_rejects_with_line_and_value(tmp_path, text, match):
    path = tmp_path / "bad.tum"
    path.write_text(text)
    with pytest.raises(PoseError, match=match) as info:
        read_tum(path)
    assert "bad.tum" in str(info.value)


def test_writer_refuses_bad_poses_and_existing_files(tmp_path):
    times_s, positions_m, quaternions_xyzw = _poses(3)
    quaternions_xyzw[1] *= 2
    with pytest.raises(PoseError, match="line 2: quaternion"):
        write_tum(tmp_path / "a.tum", times_s, positions_m, quaternions_xyzw)
    assert not (tmp_path / "a.tum").exists()
    with pytest.raises(PoseError, match=r"\(3, 3\)"):
        write_tum(tmp_path / "a.tum", times_s, positions_m, quaternions_xyzw[:, :3])
    write_tum(tmp_path / "b.tum", *_poses(2))
    with pytest.raises(OutputError, match="b.tum"):
        write_tum(tmp_path / "b.tum", *_poses(2))
