"""The classes beyond the spec's table (docs/scene_format.md, "Classes"): numbered after the
spec's 0 to 13, which do not move, each with a material of the spec's table and no foliage."""

from __future__ import annotations

import json

import numpy as np

from acres_lidar_ros.config.material_table import (
    CLASS_ID,
    CLASS_NAMES,
    IS_FOLIAGE_CLASS,
    MATERIAL_ID,
    MATERIAL_OF_CLASS,
    SPEC_CLASS_NAMES,
    USER_CLASS_NAMES,
)
from acres_lidar_ros.scene.scene_file import load_scene

#: The spec's "Materials" table (class number, class), as the specification writes it.
SPEC_TABLE = {
    0: "other", 1: "ground", 2: "tree_trunk", 3: "building", 4: "silo", 5: "tree", 6: "shrub", 7: "corn",
    8: "soybean", 9: "mud_clod", 10: "ground_cover", 11: "potato", 12: "vehicle", 13: "precipitation",
}  # fmt: skip


def test_the_spec_numbers_stay_and_the_user_classes_follow():
    assert tuple(SPEC_TABLE[k] for k in range(len(SPEC_TABLE))) == SPEC_CLASS_NAMES
    assert all(CLASS_ID[name] == k for k, name in SPEC_TABLE.items())
    assert CLASS_NAMES[len(SPEC_CLASS_NAMES) :] == USER_CLASS_NAMES
    assert {"person", "animal", "pole", "fence"} <= set(USER_CLASS_NAMES)
    for name in USER_CLASS_NAMES:
        assert MATERIAL_OF_CLASS[CLASS_ID[name]] >= 0 and not IS_FOLIAGE_CLASS[CLASS_ID[name]]


def test_a_scene_file_places_the_new_classes(tmp_path):
    flat = {"origin_xy_m": [-20, -20], "cell_m": 40, "height_m": [[0, 0], [0, 0]]}
    objects = [
        {"type": "box", "class": "person", "base_xy_m": [5, 0], "size_m": [0.4, 0.3, 1.8]},
        {"type": "cylinder", "class": "pole", "base_xy_m": [8, 0], "radius_m": 0.1, "height_m": 4},
        {"type": "box", "class": "fence", "base_xy_m": [0, 8], "size_m": [10, 0.05, 1.2]},
    ]
    path = tmp_path / "scene.json"
    path.write_text(json.dumps({"terrain": flat, "objects": objects}))
    scene = load_scene(path)
    for oid, (name, material) in enumerate([("person", "other"), ("pole", "metal_bin"), ("fence", "bark")], start=1):
        mine = scene.triangle_instance == oid
        assert set(scene.triangle_class[mine].tolist()) == {CLASS_ID[name]}
        assert set(scene.triangle_material[mine].tolist()) == {MATERIAL_ID[material]}
    assert int(np.max(scene.triangle_class)) == CLASS_ID["fence"] == 17
