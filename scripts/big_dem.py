#!/usr/bin/env python3
"""A 4096 x 4096 GeoTIFF DEM and a scene file over it, for the big-terrain figures of
docs/scene_format.md ("Big terrain"):

    .venv/bin/python scripts/big_dem.py --out runs/big_dem
    .venv/bin/acres-lidar bench --scene runs/big_dem/scene.json --scans 5

The first writes ``dem.tif`` (float32, 1 m pixels, 64 MiB, georeferenced by ModelPixelScale and
ModelTiepoint in a projected CRS in metres, PixelIsArea) and ``scene.json`` (``terrain.dem`` with
``"node_step": 2``, centred on the scene origin by ``origin_xy_m``); the second prints the
scene's build time ("scene: ... generated in"), its Embree structure's, the process's peak memory
and the bare cast of each scan. The ground is smooth hills (a sum of three sines, +-6 m) so that
the built-in tour's poses near the origin see it; it is the same in every run. ``--step`` other
than 2 shows the other steps (1 is refused: 33,538,050 triangles).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

SIDE = 4096
CELL_M = 1.0
# A UTM-like corner, so that origin_xy_m (not the georeferencing) places the DEM near the scene origin.
EAST_M, NORTH_M = 500_000.0, 4_000_000.0
# GeoTIFF keys: GTModelType projected, GTRasterType PixelIsArea, ProjLinearUnits metre.
GEO_KEYS = [1, 1, 0, 3, 1024, 0, 1, 1, 1025, 0, 1, 1, 3076, 0, 1, 9001]


def heights_m() -> np.ndarray:
    """(SIDE, SIDE) float32 heights in raster order (row 0 the north edge)."""
    u = np.arange(SIDE, dtype=np.float64) * CELL_M
    x, y = u[None, :], u[::-1, None]
    h = 3.0 * np.sin(x / 180.0) * np.cos(y / 240.0) + 2.0 * np.sin((x + y) / 95.0) + np.sin(x / 31.0 - y / 47.0)
    return h.astype(np.float32)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="folder for dem.tif and scene.json")
    parser.add_argument("--step", type=int, default=2, help="terrain.node_step of the scene (default 2)")
    args = parser.parse_args()
    import tifffile

    args.out.mkdir(parents=True, exist_ok=True)
    tifffile.imwrite(
        args.out / "dem.tif",
        heights_m(),
        extratags=[
            (33550, 12, 3, (CELL_M, CELL_M, 0.0), False),  # ModelPixelScale
            (33922, 12, 6, (0.0, 0.0, 0.0, EAST_M, NORTH_M, 0.0), False),  # ModelTiepoint
            (34735, 3, len(GEO_KEYS), tuple(GEO_KEYS), False),  # GeoKeyDirectory
        ],
    )
    half = SIDE // 2 * CELL_M
    scene = {
        "format": "acres_lidar_scene",
        "version": 1,
        "terrain": {"dem": "dem.tif", "origin_xy_m": [-half, -half], "node_step": args.step},
    }
    (args.out / "scene.json").write_text(json.dumps(scene, indent=1) + "\n")
    print(
        f"{args.out / 'dem.tif'}: {SIDE} x {SIDE} nodes at {CELL_M:g} m; {args.out / 'scene.json'}: node_step {args.step}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
