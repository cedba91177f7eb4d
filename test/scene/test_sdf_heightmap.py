"""A Gazebo ``<heightmap>`` as the scene's terrain (docs/scene_format.md, "Gazebo heightmaps"): small
worlds written here, their heightmap's nodes placed as gz-common's ``ImageHeightmap``/``Dem`` and
Ogre's terrain place them (written out below from their definition), checked by a beam's range to
1 mm; bad heightmaps refused with the element named."""

from __future__ import annotations

import json

import numpy as np
import pytest

from acres_lidar_ros.errors import SceneError
from acres_lidar_ros.scene.scene_file import load_scene
from acres_lidar_ros.tracing.trace import Tracer

PIL = pytest.importorskip("PIL.Image", reason="pillow (the [test] extra) writes the test images")

SIDE = 17  # 2^4 + 1 nodes
# Pixel (row r, column c) of an 8-bit gray image: brightest (200, not 255) at row 0 (north), column 16 (east).
PIXELS = np.array([[round(200 * (c / 16) * (1 - r / 32)) for c in range(SIDE)] for r in range(SIDE)], np.uint8)
SPHERE = (
    '<model name="ball"><pose>0 0 10 0 0 0</pose><link name="l"><visual name="v">'
    "<geometry><sphere><radius>0.5</radius></sphere></geometry></visual></link></model>"
)


def heightmap_model(uri="hill.png", size="32 32 4", pos="1 2 0.5", pose="10 -5 1 0 0 0", extra=""):
    return f"""<model name="hill"><static>true</static><pose>{pose}</pose>
      <link name="link"><visual name="ground"><pose>0 0 0.25 0 0 0</pose><geometry><heightmap>
        <uri>{uri}</uri><size>{size}</size><pos>{pos}</pos>{extra}
        <texture><diffuse>d.png</diffuse><normal>n.png</normal><size>1</size></texture>
      </heightmap></geometry></visual></link></model>"""


def write(tmp_path, models, objects=None, terrain=None, pixels=PIXELS, image="hill.png"):
    PIL.fromarray(pixels).save(tmp_path / image)
    (tmp_path / "world.sdf").write_text(
        f'<?xml version="1.0" ?>\n<sdf version="1.9"><world name="w">{models}</world></sdf>\n'
    )
    path = tmp_path / "scene.json"
    doc = {"terrain": terrain or {"sdf_heightmap": "world.sdf"}, "objects": objects or []}
    path.write_text(json.dumps(doc))
    return path


def down_range_m(tracer, x, y, top_m=50.0) -> float:
    return float(tracer.cast_bare(np.array([[x, y, top_m]]), np.array([[0.0, 0.0, -1.0]]))[0])


def node(r, c, centre=(11.0, -3.0, 1.75), size=(32.0, 32.0, 4.0), top=200.0, pixels=PIXELS):
    """Gazebo's node (row r, column c) of a SIDE x SIDE image: x, y evenly over the size about the
    centre (model pose + visual pose + <pos>), row 0 at +y; z = size_z v / v_max above the centre."""
    step = size[0] / (SIDE - 1)
    x = centre[0] - size[0] / 2 + c * step
    y = centre[1] + size[1] / 2 - r * step
    return np.array([x, y, centre[2] + size[2] * pixels[r, c] / top])


def test_a_beam_at_a_heightmap_node_hits_at_the_geometric_range(tmp_path):
    # As Gazebo classic's worlds/heightmap.world: a sun included (no visuals, skipped) beside the heightmap.
    sun = "<include><uri>model://sun</uri></include>"
    path = write(
        tmp_path,
        sun + heightmap_model() + SPHERE,
        objects=[{"type": "sdf_world", "path": "world.sdf", "skip": ["sun"]}],
        terrain={"sdf_heightmap": "world.sdf", "skip": ["sun"]},
    )
    scene = load_scene(path)
    tracer = Tracer(scene)
    # Centre: model (10, -5, 1) + visual (0, 0, 0.25) + <pos> (1, 2, 0.5) = (11, -3, 1.75); 2 m cells.
    np.testing.assert_allclose(scene.terrain.origin_xy_m, [-5.0, -19.0])
    assert scene.terrain.cell_m == pytest.approx(2.0)
    for r, c in [(3, 5), (1, 15), (12, 1), (8, 8)]:
        p = node(r, c)
        assert down_range_m(tracer, p[0], p[1]) == pytest.approx(50.0 - p[2], abs=1e-3), (r, c)
    # Along a grid edge the ground is straight between its nodes (whatever the cell's diagonal).
    a, b = node(3, 5), node(3, 6)
    assert down_range_m(tracer, (a[0] + b[0]) / 2, a[1]) == pytest.approx(50.0 - (a[2] + b[2]) / 2, abs=1e-3)
    # A slanted beam from a sensor 20 m up onto a node: the range is the distance to it.
    origin, target = np.array([6.0, 4.0, 20.0]), node(4, 9)
    d = (target - origin) / np.linalg.norm(target - origin)
    assert float(tracer.cast_bare(origin[None], d[None])[0]) == pytest.approx(np.linalg.norm(target - origin), abs=1e-3)
    # The brightest pixel stands <size> z above the centre; the world's heightmap visual is the ground,
    # not an object, and its sphere is an object.
    assert scene.terrain.height_m.max() == pytest.approx(1.75 + 4.0)
    assert scene.object_names[1:] == ("ball::l",)
    assert down_range_m(tracer, 0.0, 0.0, 20.0) == pytest.approx(9.5, abs=1e-3)
    # An RGB image (as gz-sim's heightmap_bowl.png) is read by its first channel: the same ground.
    (tmp_path / "rgb").mkdir()
    rgb = load_scene(write(tmp_path / "rgb", heightmap_model(), pixels=np.dstack([PIXELS, PIXELS // 2, PIXELS // 3])))
    np.testing.assert_array_equal(rgb.terrain.height_m, scene.terrain.height_m)


def test_sampling_interpolates_between_the_pixels_and_a_dem_keeps_its_elevations(tmp_path):
    pixels = PIXELS.copy()
    pixels[5, 9] = 180  # a bump, so that the mean of four pixels is not that of a diagonal pair
    path = write(tmp_path, heightmap_model(extra="<sampling>2</sampling>"), pixels=pixels)
    tracer = Tracer(load_scene(path))
    # Sampling 2: 33 nodes a side at 1 m; the node at a pixel cell's centre is the mean of its four pixels.
    corners = [node(r, c, pixels=pixels) for r in (5, 6) for c in (9, 10)]
    x, y = np.mean([p[0] for p in corners]), np.mean([p[1] for p in corners])
    assert down_range_m(tracer, x, y) == pytest.approx(50.0 - np.mean([p[2] for p in corners]), abs=1e-3)
    tifffile = pytest.importorskip("tifffile", reason="tifffile (the [dem] extra) reads GeoTIFF DEMs")
    elevation = 100.0 + 8.0 * PIXELS[:9, :9].astype(np.float32) / 200.0  # 9 x 9 nodes, 100 .. 104 m
    tifffile.imwrite(tmp_path / "dem.tif", elevation)
    (tmp_path / "dem.sdf").write_text(
        f'<sdf version="1.9"><world name="w">{heightmap_model("dem.tif", "16 16 2", "0 0 -100", "0 0 0 0 0 0")}'
        "</world></sdf>"
    )
    (tmp_path / "dem.json").write_text(json.dumps({"terrain": {"sdf_heightmap": "dem.sdf"}}))
    tracer = Tracer(load_scene(tmp_path / "dem.json"))
    # Gazebo's DEM: e_min + (e - e_min) size_z / (e_max - e_min) above <pos> z (-100) and the visual's 0.25 m.
    low, high = float(elevation.min()), float(elevation.max())
    assert (low, high) == (100.0, 104.0)
    for r, c in [(2, 3), (6, 7)]:
        x, y = -8.0 + 2.0 * c, 8.0 - 2.0 * r
        z = low + (float(elevation[r, c]) - low) * 2.0 / (high - low) - 100.0 + 0.25
        assert down_range_m(tracer, x, y) == pytest.approx(50.0 - z, abs=1e-3)


@pytest.mark.parametrize(
    "models, terrain, objects, pixels, match",
    [
        (heightmap_model("gone.png"), None, None, PIXELS, r"<heightmap> <uri> = 'gone.png': .*gone.png does not exist"),
        (
            heightmap_model(),
            None,
            None,
            PIXELS[:, :9],
            r"hill.png is 9 x 17; a Gazebo heightmap is square with 2\^n \+ 1",
        ),
        (heightmap_model(), None, None, PIXELS[:16, :16], r"is 16 x 16; a Gazebo heightmap is square with 2\^n \+ 1"),
        (heightmap_model(size="32 16 4"), None, None, PIXELS, r"<size> = \[32.0, 16.0, 4.0\]: x and y differ"),
        (heightmap_model(size="32 32"), None, None, PIXELS, r"<size> = '32 32': must be 3 finite numbers"),
        (heightmap_model(uri="hill.bmp"), None, None, PIXELS, r"<uri> = 'hill.bmp': a heightmap here is an image"),
        (heightmap_model(extra="<sampling>0</sampling>"), None, None, PIXELS, r"<sampling> = '0': must be an integer"),
        (heightmap_model(pose="0 0 0 0 0 0.3"), None, None, PIXELS, r"pose turns it; the terrain grid is axis-aligned"),
        (heightmap_model() + heightmap_model().replace('"hill"', '"hill2"'), None, None, PIXELS, r"has 2 <heightmap>"),
        (SPHERE, None, None, PIXELS, r"has 0 <heightmap> visuals"),
        (
            heightmap_model(),
            {"origin_xy_m": [-50, -50], "cell_m": 100, "height_m": [[0, 0], [0, 0]], "skip": ["sun"]},
            None,
            PIXELS,
            r"terrain.model_path and terrain.skip apply to terrain.sdf_heightmap only",
        ),
        (
            heightmap_model(),
            {"sdf_heightmap": "world.sdf", "cell_m": 2},
            None,
            PIXELS,
            r"terrain.sdf_heightmap places the ground itself .*leave out terrain.cell_m",
        ),
        (
            heightmap_model(),
            {"origin_xy_m": [-50, -50], "cell_m": 100, "height_m": [[0, 0], [0, 0]]},
            [{"type": "sdf_world", "path": "world.sdf"}],
            PIXELS,
            r"objects\[0\].path = 'world.sdf': .*<heightmap>: a heightmap is the ground: give this world as the "
            r"scene file's terrain.sdf_heightmap",
        ),
    ],
)
def test_bad_heightmaps_name_the_file_and_element(tmp_path, models, terrain, objects, pixels, match):
    path = write(tmp_path, models, objects, terrain, pixels)
    with pytest.raises(SceneError, match=match) as info:
        load_scene(path)
    assert str(path) in str(info.value)
    if terrain is None:  # the key, the SDF file and the element named
        assert "terrain.sdf_heightmap = 'world.sdf'" in str(info.value)
        assert "world.sdf" in str(info.value)
