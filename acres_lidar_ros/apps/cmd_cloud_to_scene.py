"""``acres-lidar cloud-to-scene``: a point-cloud map (PCD, PLY, LAS/LAZ) to a scene folder: the
ground as ``terrain.npy``, the objects as columns in ``objects.ply``, ``scene.json`` naming both,
and ``coverage.json`` (``scene.cloud_surface``)."""

from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


def add_cloud_to_scene_parser(sub: argparse._SubParsersAction) -> None:
    """``acres-lidar cloud-to-scene`` and its options."""
    parser = sub.add_parser("cloud-to-scene", help="a point-cloud map (pcd, ply, las, laz) to a scene folder")
    parser.add_argument("--cloud", required=True, type=Path, metavar="FILE", help="the map: .pcd, .ply, .las, .laz")
    parser.add_argument("--cell", type=float, default=0.5, metavar="M", help="grid cell, m (default 0.5)")
    parser.add_argument(
        "--min-height", type=float, default=0.3, metavar="M", help="objects: points this far above the ground, m"
    )
    parser.add_argument("--class", dest="object_class", default="other", help="class of the object columns")
    parser.add_argument("--out", required=True, type=Path, metavar="DIR", help="new scene folder")


def mesh_ply_bytes(vertices_m: np.ndarray, triangles: np.ndarray) -> bytes:
    """A binary little-endian PLY of a triangle mesh (float64 vertices, int32 faces)."""
    import numpy as np

    header = (
        "ply\nformat binary_little_endian 1.0\n"
        f"element vertex {len(vertices_m)}\nproperty double x\nproperty double y\nproperty double z\n"
        f"element face {len(triangles)}\nproperty list uchar int vertex_indices\nend_header\n"
    ).encode("ascii")
    faces = np.zeros(len(triangles), dtype=[("n", "u1"), ("v", "<i4", (3,))])
    faces["n"], faces["v"] = 3, triangles
    return header + np.ascontiguousarray(vertices_m, "<f8").tobytes() + faces.tobytes()


def cmd_cloud_to_scene(args: argparse.Namespace) -> int:
    """Read the cloud, make its surfaces, write the scene folder whole, print the coverage."""
    import numpy as np

    from acres_lidar_ros.config.material_table import CLASS_NAMES
    from acres_lidar_ros.errors import ConfigError
    from acres_lidar_ros.outputs.files import atomic_write, make_directory, refuse_existing
    from acres_lidar_ros.scene.cloud_surface import cloud_surface, read_cloud

    if args.object_class not in CLASS_NAMES:
        raise ConfigError(f"--class {args.object_class!r}: allowed: {', '.join(CLASS_NAMES)}")
    if not (np.isfinite(args.min_height) and args.min_height > 0):
        raise ConfigError(f"--min-height {args.min_height}: expected a height > 0 m")
    refuse_existing(args.out)
    surface = cloud_surface(read_cloud(args.cloud), args.cell, args.min_height, f"point cloud {args.cloud}")
    make_directory(args.out)
    buffer = io.BytesIO()
    np.save(buffer, surface.ground_m)
    atomic_write(args.out / "terrain.npy", buffer.getvalue())
    terrain = {"origin_xy_m": surface.origin_xy_m.tolist(), "cell_m": surface.cell_m, "height_m": "terrain.npy"}
    objects = []
    vertices, triangles = surface.columns_mesh()
    if len(triangles):
        atomic_write(args.out / "objects.ply", mesh_ply_bytes(vertices, triangles))
        objects.append({"type": "mesh", "path": "objects.ply", "class": args.object_class, "base_xy_m": [0, 0],
                        "base_z_m": 0, "name": "cloud_objects"})  # fmt: skip
    report = {"cloud": str(args.cloud), "method": "lowest point per cell; columns of points above", **surface.report()}
    atomic_write(args.out / "coverage.json", (json.dumps(report, indent=1) + "\n").encode())
    scene = {"format": "acres_lidar_scene", "version": 1, "terrain": terrain, "objects": objects}
    atomic_write(args.out / "scene.json", (json.dumps(scene, indent=1) + "\n").encode())
    print(json.dumps(report), file=sys.stdout)
    print(f"-> {args.out / 'scene.json'}", file=sys.stdout)
    return 0
