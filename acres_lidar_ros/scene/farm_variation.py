"""Worlds that vary: the built-in farm with other crop growth, harvest and soil wetness, and
other vehicles driving straight lines (``acres-lidar dataset``'s ``vary`` block).

``vary_farm`` changes a built farm (``farm_v2.build_farm_v2``) without rebuilding it:

* crop growth ``G``: every crop cell's height above the ground is scaled by
  ``h_max(G) / h_max(G_farm)`` with the spec's ``h_max = h_crop (0.03 + 0.97 G)``
  (``scene_model.crop_box_height_m``), so standing, crushed and harvested cells keep their
  fractions of ``h_max``;
* harvest: the patches of a field whose centre lies in the first ``fraction`` of the field's
  west-east extent become harvested cells (3 % of ``h_max``, ``CROP_CELL_HEIGHT_FRACTION``),
  as a field the combine has worked from its west edge;
* soil wetness: ``delta`` is added to the wetness map and the sum kept in [0, 1], the range of a
  wetness.

``vehicle_tracks`` gives the box tracks (``box_tracks.BoxTracks``) of drawn vehicles: each
starts ``distance_m`` from the sensor's first position at ``bearing_deg`` (from east,
anticlockwise), drives at ``speed_m_s`` towards ``heading_deg`` and sits on the terrain
(z = the ground under its centre + its half height, sampled every ``TRACK_STEP_S``).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from acres_lidar_ros.errors import SceneError
from acres_lidar_ros.scene.box_tracks import BoxTracks
from acres_lidar_ros.scene.farm_v2_ground import FIELDS
from acres_lidar_ros.scene.grids import CellGrid
from acres_lidar_ros.scene.scene_model import CROP_CELL_HEIGHT_FRACTION, CROP_HARVESTED, Scene, crop_box_height_m

TRACK_STEP_S = 0.1


def vary_farm(
    scene: Scene,
    crop_growth: dict[str, float] | None = None,
    harvested: dict[str, float] | None = None,
    soil_wetness: float | None = None,
) -> Scene:
    """The built-in farm ``scene`` with the crop fields' growth and harvested fraction (by field
    name) and the soil wetness offset; ``SceneError`` for a field it does not have."""
    crop_growth, harvested = crop_growth or {}, harvested or {}
    fields = {f.name: f for f in FIELDS if f.crop is not None}
    for name in list(crop_growth) + list(harvested):
        if name not in fields or name not in scene.object_names:
            raise SceneError(
                f"crop field {name!r}: not a crop field of the built-in farm; allowed: {', '.join(fields)}"
            )
    crops = scene.crops
    base, top = crops.cell_base_z_m, crops.cell_top_z_m.copy()
    names = np.asarray(scene.object_names, dtype=object)[crops.instance]
    for name, field in fields.items():
        patches = names == name
        if name in crop_growth:
            ratio = crop_box_height_m(field.crop_height_m, crop_growth[name]) / crop_box_height_m(
                field.crop_height_m, field.growth
            )
            top[patches] = base[patches] + (top[patches] - base[patches]) * ratio
        if harvested.get(name, 0.0) > 0.0:
            x0, _, x1, _ = field.rect
            cut = patches & ((crops.centre_xy_m[:, 0] - x0) / (x1 - x0) < harvested[name])
            h_max = crop_box_height_m(field.crop_height_m, crop_growth.get(name, field.growth))
            top[cut] = base[cut] + h_max * CROP_CELL_HEIGHT_FRACTION[CROP_HARVESTED]
    wetness = scene.soil_wetness
    if soil_wetness is not None and soil_wetness != 0.0:
        values = np.clip(wetness.values + float(soil_wetness), 0.0, 1.0)
        wetness = CellGrid(wetness.origin_xy_m, wetness.cell_m, values, wetness.fill)
    return replace(scene, crops=replace(crops, cell_top_z_m=top), soil_wetness=wetness)


def vehicle_tracks(scene: Scene, start_xy_m: np.ndarray, t0_s: float, t1_s: float, vehicles: list[dict]) -> dict:
    """The box-tracks file (``box_tracks`` format, as a dict) of ``vehicles`` (``config.dataset_draws``
    entries) from ``t0_s`` to ``t1_s``; ``BoxTracks.from_dict`` reads it."""
    n = max(2, int(math.ceil((t1_s - t0_s) / TRACK_STEP_S)) + 1)
    times = t0_s + (t1_s - t0_s) * np.arange(n) / (n - 1)
    tracks: list[dict[str, Any]] = []
    for v in vehicles:
        bearing, heading = math.radians(v["bearing_deg"]), math.radians(v["heading_deg"])
        start = np.asarray(start_xy_m, float) + v["distance_m"] * np.array([math.cos(bearing), math.sin(bearing)])
        xy = start + np.outer(v["speed_m_s"] * (times - t0_s), [math.cos(heading), math.sin(heading)])
        half = [float(h) for h in v["half_extents_m"]]
        z = scene.height_at(xy[:, 0], xy[:, 1]) + half[2]
        quaternion = [0.0, 0.0, math.sin(heading / 2), math.cos(heading / 2)]
        samples = [
            {"t_s": float(t), "centre_m": [float(x), float(y), float(h)], "quaternion_xyzw": quaternion}
            | {"half_extents_m": half}
            for t, (x, y), h in zip(times, xy, z)
        ]
        tracks.append({"object_id": int(v["object_id"]), "samples": samples})
    data = {"tracks": tracks}
    BoxTracks.from_dict(data, where="drawn vehicles")  # the file's own checks
    return data


__all__ = ["TRACK_STEP_S", "vary_farm", "vehicle_tracks"]
