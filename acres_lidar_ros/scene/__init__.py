"""Scene data, the scene file format, the built-in farm and its tour."""

from acres_lidar_ros.scene.grids import CellGrid, TerrainGrid
from acres_lidar_ros.scene.model import CropPatches, Scene, SceneBuilder

__all__ = ["CellGrid", "TerrainGrid", "CropPatches", "Scene", "SceneBuilder"]
