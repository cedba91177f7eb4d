"""The named argument groups of the tracer's compiled passes (``trace_kernel``, ``crop_walk``).

``trace.Tracer`` builds one ``SceneTables`` and one ``TraceParams`` from its scene and fills in
the per-call fields with ``_replace``; numba compiles them as typed tuples, so each pass reads a
field by its name and no position has to match by hand.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class SceneTables(NamedTuple):
    """Scene lookups: per primitive of the first cast (triangles, crop boxes, one miss entry),
    per class, per crop patch; the ground grids; the range limits of the call; the crop walk's
    links (``crop_walk.crop_links``)."""

    tri_class: np.ndarray  # (prims,) uint8
    tri_material: np.ndarray  # (prims,) int16
    tri_instance: np.ndarray  # (prims,) uint32
    tri_closed: np.ndarray  # (prims,) bool: a closed proxy's triangle
    is_foliage: np.ndarray  # (classes,) bool
    crop_class: np.ndarray  # (patches,) uint8
    crop_material: np.ndarray  # (patches,) uint8
    crop_instance: np.ndarray  # (patches,) uint32
    cell_xs: np.ndarray  # crop cell edges along the patch's x from its corner, m
    cell_ys: np.ndarray  # along its y, m
    patch_centre: np.ndarray  # (patches, 3) about the local origin, m
    patch_cos: np.ndarray  # (patches,) cos of the patch's yaw
    patch_sin: np.ndarray  # (patches,) sin of the patch's yaw
    patch_base: np.ndarray  # (patches, cells) local base heights, m
    patch_top: np.ndarray  # (patches, cells) local top heights, m
    ground_grids: tuple  # (cover, polygon, pond, soil_wetness) padded values
    grid_numbers: np.ndarray  # (4, 5) the grids' index numbers
    limit: np.ndarray  # the range limit, per sub-ray or one value, m
    limit_next: np.ndarray  # nextafter(limit, inf)
    local_origin: np.ndarray  # (3,) the tracer's local origin, m
    neighbour: np.ndarray  # (patches, 4) the crop walk's neighbour patches
    box_lo_z: np.ndarray  # the crop boxes' bottom, m
    box_hi_z: np.ndarray  # the crop boxes' top, m


class TraceParams(NamedTuple):
    """The numbers of one trace call: its own (``k`` ... ``pond_threshold_m``, ``start_m``) and the
    tracer's constants."""

    k: int  # hit slots per sub-ray
    foliage_solid: bool
    per_ray_limit: int  # 1: ``SceneTables.limit`` holds one value per sub-ray
    continue_step_m: float
    pond_threshold_m: float
    miss: int  # the miss entry of the first cast's tables
    first_box: int  # the first crop box primitive
    last_crop_prim: int  # the last crop box triangle
    start_m: float  # where a ray starts, m
    crop_step_m: float
    exit_step_m: float
    crop_cos: float  # |cos theta| of a crop hit
    ground_class: int
    mud_class: int
    grass: int
    soil: int
    water: int
    no_polygon: int
    wetness_per_depth: float
