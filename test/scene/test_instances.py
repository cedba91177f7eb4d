"""Instance labels: every object type gets its id, the body and the clutter
theirs, and the ids of a scene file and seed never change."""

from __future__ import annotations

import json

import numpy as np
import pytest

from acres_lidar_ros.body.self_returns import sensor_self_table
from acres_lidar_ros.config.material_table import CLASS_ID
from acres_lidar_ros.config.sensors import load_sensor_config
from acres_lidar_ros.errors import SceneError
from acres_lidar_ros.scan.scan_types import ScanOptions
from acres_lidar_ros.scan.scanner import Scanner
from acres_lidar_ros.scene.boxes import VehicleBox
from acres_lidar_ros.scene.builder import SceneBuilder
from acres_lidar_ros.scene.farm_v1 import build_default_farm
from acres_lidar_ros.scene.grids import TerrainGrid
from acres_lidar_ros.scene.instances import (
    BODY_INSTANCE,
    CLUTTER_INSTANCE,
    NO_INSTANCE,
    OBJECT_TYPE_ID,
    OBJECT_TYPES,
    VEHICLE_INSTANCE_BASE,
    instance_table,
    vehicle_instance,
)
from acres_lidar_ros.scene.scene_file import load_scene
from acres_lidar_ros.scene.tour import default_tour
from acres_lidar_ros.sensor.poses import PoseHistory
from acres_lidar_ros.tracing.trace import Tracer

GROUND_Z_M = 0.0


def builder() -> SceneBuilder:
    return SceneBuilder(TerrainGrid([-60.0, -60.0], 4.0, np.full((31, 31), GROUND_Z_M)))


def square_mesh(x_m: float, y_m: float, z_m: float) -> tuple[np.ndarray, np.ndarray]:
    """A 2 m horizontal square at height ``z_m`` about ``(x_m, y_m)``."""
    v = np.array([[-1, -1, 0], [1, -1, 0], [1, 1, 0], [-1, 1, 0]], float) + [x_m, y_m, z_m]
    return v, np.array([[0, 1, 2], [0, 2, 3]])


def test_each_object_type_gets_its_own_id_in_its_hits():
    b = builder()
    ids = {
        "mesh": b.add_mesh(*square_mesh(-40.0, 0.0, 3.0), "building", name="roof"),
        "box": b.add_box([-30.0, 0.0], [2.0, 2.0, 2.0], "building"),
        "cylinder": b.add_cylinder([-20.0, 0.0], 1.0, 3.0, "silo"),
        "tree": b.add_tree([-10.0, 0.0], 8.0, trunk_radius_m=0.3),
        "shrub": b.add_shrub([0.0, 0.0], 1.5),
        "crop_field": b.add_crop_field([8.0, -2.0], (3, 4), "corn", 2.0, 1.0),
        "mud_clod": b.add_mud_clod([20.0, 0.0], [1.0, 1.0, 0.3]),
        "ground_cover": b.add_ground_cover([30.0, 0.0], [2.0, 2.0, 0.3]),
    }
    scene = b.build()
    assert sorted(ids.values()) == list(range(1, len(ids) + 1))  # in the order they were added
    assert [OBJECT_TYPES[t] for t in scene.object_type] == ["terrain", *ids]
    tracer = Tracer(scene)
    # Straight down on each object's middle, and on bare ground.
    xs = {"mesh": -40.0, "box": -30.0, "cylinder": -20.0, "shrub": 0.0, "crop_field": 10.0, "mud_clod": 20.0}
    xs |= {"ground_cover": 30.0, "tree": -10.0}
    names = list(xs)
    # (y 0.6: the crop ray is on no edge between two cells)
    origins = np.array([[xs[n], 0.6 if n == "crop_field" else 0.0, 20.0] for n in names] + [[45.0, 0.0, 20.0]])
    down = np.tile([0.0, 0.0, -1.0], (len(origins), 1))
    hits = tracer.trace(origins, down, 100.0, 4, 0.25, 0.003)
    for row, name in enumerate(names):
        assert hits.instance[row, 0] == ids[name], name
    assert hits.instance[-1, 0] == 0 and hits.class_id[-1, 0] == CLASS_ID["ground"]
    assert hits.instance.dtype == np.uint32
    assert (hits.instance[~hits.valid] == NO_INSTANCE).all()
    # The tree's crown and trunk share its id: sideways through the crown to the trunk.
    side = tracer.trace(np.array([[-20.0, 0.0, 4.0]]), np.array([[1.0, 0.0, 0.0]]), 100.0, 4, 0.25, 0.003)
    assert side.class_id[0, :2].tolist() == [CLASS_ID["tree"], CLASS_ID["tree_trunk"]]
    assert side.instance[0, :2].tolist() == [ids["tree"], ids["tree"]]
    # The table: one row per object, the tree's class is tree.
    table = instance_table(scene)
    assert table.instance.tolist() == list(range(len(ids) + 1))
    assert table.class_id[ids["tree"]] == CLASS_ID["tree"] and table.name[ids["mesh"]] == "roof"


def test_a_vehicle_box_gets_one_id_per_track_apart_from_the_scene():
    scene = builder().build()
    boxes = [
        VehicleBox([10.0, 0.0, 1.0], [0.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0], object_id=0),
        VehicleBox([10.0, 10.0, 1.0], [0.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0], object_id=101),
    ]
    origins = np.zeros((2, 3)) + [0.0, 0.0, 1.0]
    d = np.array([[1.0, 0.0, 0.0], [np.sqrt(0.5), np.sqrt(0.5), 0.0]])
    hits = Tracer(scene).trace(origins, d, 100.0, 2, 0.25, 0.003, boxes=boxes)
    assert hits.instance[:, 0].tolist() == [2**31, 2**31 + 101]
    assert hits.class_id[:, 0].tolist() == [CLASS_ID["vehicle"]] * 2
    table = instance_table(scene, [0, 101], body=True, clutter=True)
    rows = table.rows()
    assert rows["columns"] == ["instance", "name", "class", "type"]
    assert rows["rows"] == [
        [0, "terrain", "ground", "terrain"],
        [2**31, "vehicle_0", "vehicle", "vehicle_box"],
        [2**31 + 101, "vehicle_101", "vehicle", "vehicle_box"],
        [2**32 - 3, "clutter", "precipitation", "clutter"],
        [2**32 - 2, "body", "vehicle", "body"],
    ]
    json.dumps(rows)  # plain JSON types
    assert vehicle_instance(7) == VEHICLE_INSTANCE_BASE + 7
    for bad in (-1, 2**31, 1.5, True):
        with pytest.raises(SceneError, match="object_id"):
            vehicle_instance(bad)


@pytest.fixture(scope="module")
def farm_scan():
    """One Polaris scan of the built-in farm in rain (clutter) with the body's self returns."""
    scene = build_default_farm(seed=0)
    config = load_sensor_config("polaris")
    table = sensor_self_table(config)
    assert table is not None
    scanner = Scanner(config, scene, ScanOptions(seed=0, rain_mm_per_h=10.0, visibility_m=2000.0), self_table=table)
    tour = PoseHistory.from_arrays(*default_tour(scene))
    return scene, scanner.scan(tour, int(round((tour.start_s + 0.1) * 1e9)))


def test_every_return_of_a_scan_is_labelled_body_and_clutter_with_their_own_ids(farm_scan):
    scene, scan = farm_scan
    r = scan.returns
    assert r.instance.dtype == np.uint32 and r.instance.shape == r.valid.shape
    assert (r.instance[~r.valid] == NO_INSTANCE).all()
    inst, cls = r.instance[r.valid], r.class_id[r.valid]
    clutter = cls == CLASS_ID["precipitation"]
    body = inst == BODY_INSTANCE
    assert clutter.sum() > 100 and body.sum() > 100  # the case has both
    assert (inst[clutter] == CLUTTER_INSTANCE).all() and (cls[body] == CLASS_ID["vehicle"]).all()
    # Every other return comes from a scene object of the point's class (a trunk's tree).
    scene_points = ~clutter & ~body
    objects = inst[scene_points]
    assert objects.max() < len(scene.object_names)
    object_class = scene.object_class[objects]
    point_class = cls[scene_points]
    trunk = point_class == CLASS_ID["tree_trunk"]
    assert (object_class[~trunk] == point_class[~trunk]).all()
    assert (object_class[trunk] == CLASS_ID["tree"]).all()
    assert len(np.unique(objects)) > 10


def test_the_farm_labels_every_object_type_it_builds():
    scene = build_default_farm(seed=0)
    types = set(np.unique(scene.object_type).tolist())
    for name in ("terrain", "box", "tree", "shrub", "crop_field"):
        assert OBJECT_TYPE_ID[name] in types, name
    # Every triangle's id is an object of the triangle's class (trunks belong to trees).
    tri_class = scene.triangle_class
    obj_class = scene.object_class[scene.triangle_instance]
    trunk = tri_class == CLASS_ID["tree_trunk"]
    assert (obj_class[~trunk] == tri_class[~trunk]).all() and (obj_class[trunk] == CLASS_ID["tree"]).all()
    assert (scene.object_class[scene.crops.instance] == scene.crops.class_id).all()


def test_ids_are_stable_for_a_scene_file_and_a_seed(tmp_path):
    a, b = build_default_farm(seed=3), build_default_farm(seed=3)
    for name in ("triangle_instance", "object_class", "object_type"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert a.object_names == b.object_names and np.array_equal(a.crops.instance, b.crops.instance)
    path = tmp_path / "scene.json"
    objects = [
        {"type": "box", "name": "shed", "class": "building", "base_xy_m": [5, 5], "size_m": [2, 2, 2]},
        {"type": "tree", "base_xy_m": [-5, 5], "height_m": 6},
        {"type": "shrub", "name": "hedge", "base_xy_m": [0, -5], "height_m": 1},
    ]
    terrain = {"origin_xy_m": [-20, -20], "cell_m": 4, "height_m": [[0.0] * 11] * 11}
    path.write_text(json.dumps({"format": "acres_lidar_scene", "version": 1, "terrain": terrain, "objects": objects}))
    first, again = load_scene(path), load_scene(path)
    assert first.object_names == again.object_names == ("terrain", "shed", "tree_2", "hedge")
    assert np.array_equal(first.triangle_instance, again.triangle_instance)
    assert [OBJECT_TYPES[t] for t in first.object_type] == ["terrain", "box", "tree", "shrub"]


def test_the_same_seed_gives_the_same_labels_scan_to_scan(farm_scan):
    scene, scan = farm_scan
    config = load_sensor_config("polaris")
    scanner = Scanner(
        config,
        scene,
        ScanOptions(seed=0, rain_mm_per_h=10.0, visibility_m=2000.0),
        self_table=sensor_self_table(config),
    )
    tour = PoseHistory.from_arrays(*default_tour(scene))
    again = scanner.scan(tour, scan.stamp_ns)
    assert np.array_equal(again.returns.instance, scan.returns.instance)
