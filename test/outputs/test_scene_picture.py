"""``acres-lidar scene-preview`` and its traced top view (outputs/scene_picture.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from acres_lidar_ros.apps import cli
from acres_lidar_ros.config.material_table import CLASS_ID
from acres_lidar_ros.outputs.scene_picture import top_classes
from acres_lidar_ros.outputs.tum import write_tum
from acres_lidar_ros.scene.scene_file import load_scene


@pytest.fixture()
def yard(tmp_path):
    doc = {
        "terrain": {"origin_xy_m": [-20, -20], "cell_m": 40, "height_m": [[0, 0], [0, 0]]},
        "objects": [
            {"type": "box", "class": "building", "base_xy_m": [5, 5], "size_m": [4, 2, 3], "name": "shed"},
            {"type": "cylinder", "class": "pole", "base_xy_m": [-10, 0], "radius_m": 1.0, "height_m": 4},
        ],
    }
    path = tmp_path / "yard.json"
    path.write_text(json.dumps(doc))
    return path


def test_the_top_view_traces_the_class_and_height_of_the_top_surface(yard):
    scene = load_scene(yard)
    # 40 px over 40 m: pixel (row i, column j) is centred at (-19.5 + j, 19.5 - i).
    classes, height = top_classes(scene, np.array([0.0, 0.0]), 20.0, 40)
    row, col = lambda y: int(19.5 - y), lambda x: int(x + 19.5)
    assert classes[row(5.5), col(5.5)] == CLASS_ID["building"] and height[row(5.5), col(5.5)] == pytest.approx(3.0)
    assert classes[row(5.5), col(7.5)] == CLASS_ID["ground"]  # the shed is 4 m along x: from 3 to 7
    assert classes[row(0.5), col(-9.5)] == CLASS_ID["pole"] and height[row(0.5), col(-9.5)] == pytest.approx(4.0)
    assert (classes == CLASS_ID["building"]).sum() == 4 * 2


def test_scene_preview_writes_a_picture_with_the_trajectory(tmp_path, capsys, yard):
    image = pytest.importorskip("PIL.Image", reason="Pillow reads the picture back")
    drive = tmp_path / "drive.tum"
    t = np.arange(3) * 0.5
    write_tum(drive, t, np.c_[t * 10 - 5, np.zeros((3, 2))], np.tile([0.0, 0.0, 0.0, 1.0], (3, 1)))
    out = tmp_path / "top.png"
    code = cli.main(
        ["scene-preview", "--scene", str(yard), "--trajectory", str(drive), "--size", "300", "--out", str(out)]
    )
    assert code == 0, capsys.readouterr().err
    with image.open(out) as picture:
        assert picture.size == (300, 300)
    assert cli.main(["scene-preview", "--scene", str(yard), "--out", str(out)]) == 2  # never overwritten
    assert "exists" in capsys.readouterr().err
