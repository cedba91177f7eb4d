"""Scene data, the scene file format, the built-in farm and its tour."""

from acres_lidar_ros.scene.builder import SceneBuilder
from acres_lidar_ros.scene.farm_v1 import build_default_farm
from acres_lidar_ros.scene.grids import CellGrid, TerrainGrid
from acres_lidar_ros.scene.scene_file import load_scene
from acres_lidar_ros.scene.scene_model import CropPatches, Scene
from acres_lidar_ros.scene.tour import default_tour

__all__ = [
    "CellGrid",
    "CropPatches",
    "Scene",
    "SceneBuilder",
    "TerrainGrid",
    "build_default_farm",
    "default_tour",
    "load_scene",
]
