"""The ground of the built-in farm, layout "v2": a 0.5 m terrain grid with relief at every scale,
its cover, surface polygons and water model (``farm_v2`` puts the objects on it).

World frame: x east, y north, metres; the origin is the centre of the farmyard. Everything is
computed on whole grids (numpy, scipy); the only loops run over a handful of fields and stops.

Relief, from large to small:

* elevation change across the farm: a tilt of about 1.5 % up to the north-east and a broad swell,
  about 12 m from the lowest to the highest corner;
* field undulation: smooth noise of 0.1-0.3 m over 15-40 m;
* roughness: 2-3 cm over 1-2 m (clods, tussocks, gravel), none on the carriageway; potholes in the yard;
* furrows (ridges 2 m apart, 5 cm high, north-south) in the tilled open field, tramlines (wheel-track pairs
  every 24 m, 5 cm deep) in the crop fields;
* the farm track: two ruts 7 cm deep 2 m apart (a tractor's wheel track), with a grassy hump between them;
* the road: a 6.5 m asphalt carriageway on a 0.3 m embankment with a 2.5 % crown, gravel
  shoulders and ditches 0.55 m deep on both sides (filled where tracks cross);
* the farmyard: a level pad with a 0.5 % drainage fall, blended into the fields over 12 m;
* a dug pond with a level floor.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import ndimage
from scipy.spatial import cKDTree

from acres_lidar_ros.config.material_table import MATERIAL_ID
from acres_lidar_ros.scene.grids import CellGrid, TerrainGrid
from acres_lidar_ros.scene.tour import TOUR_V2_WAYPOINTS_XY_M, rounded_path

HALF_SIZE_M = 192.0
TERRAIN_CELL_M = 0.5
COVER_CELL_M = 0.5
WATER_CELL_M = 1.0

YARD_RECT_M = (-35.0, -25.0, 35.0, 25.0)  # x0, y0, x1, y1
YARD_BLEND_M = 12.0
YARD_ROUGH = 1.0
YARD_POTHOLE_DEPTH_M = 0.08
ROAD_X_M = -55.0  # north-south road centreline
ROAD_HALF_WIDTH_M = 3.25
SHOULDER_M = 1.0
#: Road cross-section: distance from the centreline (m) -> height above the smoothed ground (m).
ROAD_SECTION_D_M = np.array([0.0, 3.25, 4.25, 5.0, 6.5, 8.0, 10.0])
ROAD_SECTION_Z_M = np.array([0.38, 0.30, 0.26, 0.0, -0.55, 0.0, 0.0])
DITCH_D_M = (4.6, 8.4)  # the ditch part of the section (filled from its inner edge where tracks cross)
TRACK_HALF_WIDTH_M = 1.8
RUT_OFFSET_M = 1.0
RUT_DEPTH_M = 0.07
RUT_HALF_WIDTH_M = 0.3
POND_CENTRE_XY_M = np.array([-120.0, -70.0])
POND_RADIUS_M = 14.0
POND_DEPTH_M = 0.9


@dataclass(frozen=True)
class Field:
    """A rectangular field ``rect`` (x0, y0, x1, y1) with a crop or, for ``crop`` None, tilled soil."""

    name: str
    rect: tuple[float, float, float, float]
    crop: str | None = None
    crop_height_m: float = 0.0
    growth: float = 0.0


FIELDS = (
    Field("open_field", (40.0, -150.0, 150.0, -4.5)),
    Field("corn_field", (40.0, 6.0, 83.5, 62.0), "corn", 2.6, 0.85),
    Field("soybean_field", (-44.0, 32.0, 34.0, 63.0), "soybean", 0.9, 0.45),
    Field("potato_field", (-150.0, 8.0, -66.0, 62.0), "potato", 0.6, 0.25),
)
TRAMLINE_SPACING_M = 24.0
TRAMLINE_HALF_GAUGE_M = 0.9
FURROW_PERIOD_M = 2.0


def _smoothstep(u: np.ndarray) -> np.ndarray:
    u = np.clip(u, 0.0, 1.0)
    return u * u * (3.0 - 2.0 * u)


def _noise(rng: np.random.Generator, gx: np.ndarray, gy: np.ndarray, spacing_m: float, std_m: float) -> np.ndarray:
    """Smooth random relief: normal values on a lattice ``spacing_m`` apart, cubic-interpolated."""
    n = int(np.ceil(2 * HALF_SIZE_M / spacing_m)) + 4
    lattice = rng.normal(0.0, std_m, (n, n))
    u = (gx + HALF_SIZE_M) / spacing_m + 1.5
    v = (gy + HALF_SIZE_M) / spacing_m + 1.5
    return ndimage.map_coordinates(lattice, [v.ravel(), u.ravel()], order=3, mode="reflect").reshape(gx.shape)


def _rect_distance(gx: np.ndarray, gy: np.ndarray, rect: tuple[float, float, float, float]) -> np.ndarray:
    """Distance outside an axis-aligned rectangle, m (0 inside)."""
    x0, y0, x1, y1 = rect
    dx = np.maximum(np.maximum(x0 - gx, gx - x1), 0.0)
    dy = np.maximum(np.maximum(y0 - gy, gy - y1), 0.0)
    return np.hypot(dx, dy)


def _inside(gx: np.ndarray, gy: np.ndarray, rect: tuple[float, float, float, float]) -> np.ndarray:
    x0, y0, x1, y1 = rect
    return (gx >= x0) & (gx <= x1) & (gy >= y0) & (gy <= y1)


def track_centreline_xy_m() -> np.ndarray:
    """(n, 2) points every 5 cm along the farm tracks: the tour's path outside the yard and off the road."""
    xy, _ = rounded_path(TOUR_V2_WAYPOINTS_XY_M)
    on_road = np.abs(xy[:, 0] - ROAD_X_M) < 0.5
    in_yard = _inside(xy[:, 0], xy[:, 1], YARD_RECT_M)
    return xy[~on_road & ~in_yard]


def _regional(x: np.ndarray, y: np.ndarray, phase: np.ndarray) -> np.ndarray:
    """Elevation change across the farm: tilt and a broad swell, m."""
    return (
        0.016 * x
        + 0.011 * y
        + 1.6 * np.sin(2 * np.pi * x / 520.0 + phase[0]) * np.cos(2 * np.pi * y / 430.0 + phase[1])
        + 0.8 * np.sin(2 * np.pi * (x - y) / 260.0 + phase[2])
    )


@dataclass(frozen=True)
class Ground:
    terrain: TerrainGrid
    cover: CellGrid
    polygons: list[tuple[np.ndarray, str]]
    pond_depth: CellGrid
    soil_wetness: CellGrid
    track_distance_m: np.ndarray  # (ny, nx) at the terrain nodes
    """Distance of each terrain node from the nearest track centreline, m."""


def build_ground(rng: np.random.Generator) -> Ground:
    """Terrain, cover, polygons and water of the v2 farm; deterministic in ``rng``'s state."""
    n = int(round(2 * HALF_SIZE_M / TERRAIN_CELL_M)) + 1
    xs = -HALF_SIZE_M + TERRAIN_CELL_M * np.arange(n)
    gx, gy = np.meshgrid(xs, xs)
    phase = rng.uniform(0.0, 2.0 * np.pi, 3)
    regional = _regional(gx, gy, phase)
    swell = _noise(rng, gx, gy, 40.0, 0.22)  # decimetres over tens of metres
    undulation = swell + _noise(rng, gx, gy, 15.0, 0.08)
    rough = _noise(rng, gx, gy, 2.0, 0.025) + _noise(rng, gx, gy, 1.0, 0.012)

    # Fields: furrows in the tilled field, tramlines in the crop fields.
    relief = np.zeros_like(gx)
    for f in FIELDS:
        inside = _inside(gx, gy, f.rect)
        fade = _smoothstep(np.minimum.reduce([gx - f.rect[0], f.rect[2] - gx, gy - f.rect[1], f.rect[3] - gy]) / 3.0)
        if f.crop is None:
            # Tilled north-south, across the farm track along its north edge.
            relief += np.where(inside, 0.025 * np.cos(2 * np.pi * gx / FURROW_PERIOD_M) * fade, 0.0)
        else:
            # Tramlines along y, every 24 m across x from 12 m in.
            u = np.mod(gx - f.rect[0] - 12.0 + TRAMLINE_SPACING_M / 2, TRAMLINE_SPACING_M) - TRAMLINE_SPACING_M / 2
            wheel = np.exp(-(((np.abs(u) - TRAMLINE_HALF_GAUGE_M) / 0.25) ** 2))
            relief -= np.where(inside, 0.05 * wheel * fade, 0.0)
    h = regional + undulation + rough + relief

    # Farm tracks: smoothed ground (the swell only) with two ruts and a hump between them.
    track_xy = track_centreline_xy_m()
    d_track, _ = cKDTree(track_xy).query(np.column_stack([gx.ravel(), gy.ravel()]), distance_upper_bound=12.0)
    d_track = np.minimum(d_track, 12.0).reshape(gx.shape)
    ruts = -RUT_DEPTH_M * np.exp(-(((d_track - RUT_OFFSET_M) / RUT_HALF_WIDTH_M) ** 2)) + 0.02 * np.exp(
        -((d_track / 0.3) ** 2)
    )
    w_track = _smoothstep((TRACK_HALF_WIDTH_M + 2.0 - d_track) / 2.0)
    h = (1 - w_track) * h + w_track * (regional + swell + 0.5 * rough + ruts)

    # The farmyard: a gravel pad falling 0.5 % to the south, as rough as the fields, with potholes.
    potholes = -YARD_POTHOLE_DEPTH_M * _smoothstep((_noise(rng, gx, gy, 1.5, 1.0) - 1.2) / 0.8)
    yard_z = _regional(np.zeros(1), np.zeros(1), phase)[0] + swell[n // 2, n // 2] + 0.005 * gy
    yard_z = yard_z + YARD_ROUGH * rough + potholes
    w_yard = _smoothstep(1.0 - _rect_distance(gx, gy, YARD_RECT_M) / YARD_BLEND_M)
    h = (1 - w_yard) * h + w_yard * yard_z

    # The road: embankment, crown, shoulders and ditches over the smoothed ground.
    d_road = np.abs(gx - ROAD_X_M)
    section = np.interp(d_road, ROAD_SECTION_D_M, ROAD_SECTION_Z_M)
    ditch = d_road > DITCH_D_M[0]  # the ditch and its outer bank
    crossing = _smoothstep((TRACK_HALF_WIDTH_M + 3.0 - d_track) / 2.0)  # culverts under the tracks
    section = np.where(ditch, section * (1 - crossing) + crossing * ROAD_SECTION_Z_M[2], section)
    verge_rough = np.where(d_road > ROAD_HALF_WIDTH_M + SHOULDER_M, rough, 0.0)
    w_road = _smoothstep((ROAD_SECTION_D_M[-1] - d_road) / (ROAD_SECTION_D_M[-1] - ROAD_SECTION_D_M[-2]))
    # Level across, following the smoothed ground along its centreline.
    j_road = int(round((ROAD_X_M + HALF_SIZE_M) / TERRAIN_CELL_M))
    along = regional[:, j_road : j_road + 1] + swell[:, j_road : j_road + 1]
    h = (1 - w_road) * h + w_road * (along + section + verge_rough)

    # The pond: a level floor (the lowest rim ground less the depth), blended over 6 m.
    r_pond = np.hypot(gx - POND_CENTRE_XY_M[0], gy - POND_CENTRE_XY_M[1])
    rim_z = h[r_pond <= POND_RADIUS_M + 2.0].min()
    w_pond = _smoothstep((POND_RADIUS_M + 6.0 - r_pond) / 6.0)
    h = (1 - w_pond) * h + w_pond * np.minimum(h, rim_z - POND_DEPTH_M * _smoothstep((POND_RADIUS_M - r_pond) / 4.0))
    origin = np.array([-HALF_SIZE_M, -HALF_SIZE_M])
    terrain = TerrainGrid(origin, TERRAIN_CELL_M, h)

    cover = _cover(d_track)
    pond, wet = _water(rng, terrain, rim_z)
    return Ground(terrain, cover, _polygons(), pond, wet, d_track)


def _cover(d_track: np.ndarray) -> CellGrid:
    """Cover on 0.5 m cells: grass; soil in the fields and on the wheel tracks of the farm tracks."""
    n = int(round(2 * HALF_SIZE_M / COVER_CELL_M))
    centres = -HALF_SIZE_M + COVER_CELL_M * (np.arange(n) + 0.5)
    gx, gy = np.meshgrid(centres, centres)
    cover = np.full(gx.shape, MATERIAL_ID["grass"], np.uint8)
    for f in FIELDS:
        cover[_inside(gx, gy, f.rect)] = MATERIAL_ID["soil"]
    # Node distances at the cell's lower-left node: close enough at 0.5 m for a material map.
    d = d_track[:n, :n]
    cover[(d > 0.35) & (d < 1.35)] = MATERIAL_ID["soil"]
    return CellGrid(np.array([-HALF_SIZE_M, -HALF_SIZE_M]), COVER_CELL_M, cover)


def _rect(x0: float, y0: float, x1: float, y1: float) -> np.ndarray:
    return np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], float)


def _polygons() -> list[tuple[np.ndarray, str]]:
    half = HALF_SIZE_M
    x0, y0, x1, y1 = YARD_RECT_M
    shoulder = ROAD_HALF_WIDTH_M + SHOULDER_M
    return [
        (_rect(x0 - 3.0, y0 - 3.0, x1 + 3.0, y1 + 3.0), "gravel"),  # yard apron
        (_rect(-12.0, 8.0, 12.0, 25.0), "concrete"),  # in front of the machine shed
        (_rect(ROAD_X_M - shoulder, -half, ROAD_X_M + shoulder, half), "gravel"),  # shoulders
        (_rect(ROAD_X_M - ROAD_HALF_WIDTH_M, -half, ROAD_X_M + ROAD_HALF_WIDTH_M, half), "asphalt"),
        (_rect(ROAD_X_M + shoulder, -2.0, x0 - 3.0, 2.0), "gravel"),  # yard entrance from the road
    ]


def _water(rng: np.random.Generator, terrain: TerrainGrid, rim_z: float) -> tuple[CellGrid, CellGrid]:
    """Pond depth (the pond and a few centimetres in the ditch bottoms) and soil wetness, 1 m cells."""
    n = int(round(2 * HALF_SIZE_M / WATER_CELL_M))
    centres = -HALF_SIZE_M + WATER_CELL_M * (np.arange(n) + 0.5)
    gx, gy = np.meshgrid(centres, centres)
    z = terrain.height_at(gx, gy)
    r = np.hypot(gx - POND_CENTRE_XY_M[0], gy - POND_CENTRE_XY_M[1])
    depth = np.where(r < POND_RADIUS_M + 3.0, np.clip(rim_z - 0.15 - z, 0.0, None), 0.0)
    d = np.abs(gx - ROAD_X_M)
    ditch_bottom = np.abs(d - 0.5 * (DITCH_D_M[0] + DITCH_D_M[1])) < 0.6
    standing = _noise(rng, gx, gy, 20.0, 1.0) > 0.3  # water in parts of the ditches
    depth = np.where(ditch_bottom & standing, np.maximum(depth, 0.04), depth)
    wet = 0.3 + 0.12 * _noise(rng, gx, gy, 30.0, 1.0)
    wet = np.where(np.abs(d - 6.5) < 2.0, 0.85, wet)
    wet = np.clip(wet + 0.5 * np.exp(-(((r - POND_RADIUS_M) / 6.0) ** 2)), 0.0, 1.0)
    origin = np.array([-HALF_SIZE_M, -HALF_SIZE_M])
    return CellGrid(origin, WATER_CELL_M, depth), CellGrid(origin, WATER_CELL_M, wet)
