"""Shapes of farm things for the built-in farms: buildings on sloping ground, machinery, bales.

Meshes are ``(vertices_m (v, 3) float64, triangles (t, 3) int64)`` in the thing's own frame
(x forward, z up, the ground at z = 0) until ``place`` puts them in the world.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from acres_lidar_ros.scene import shapes
from acres_lidar_ros.scene.builder import SceneBuilder

Mesh = tuple[np.ndarray, np.ndarray]


def sunk_box(
    b: SceneBuilder,
    centre_xy: tuple[float, float],
    size: tuple[float, float, float],
    yaw: float,
    cls: str,
    roof: float = 0.0,
    name: str | None = None,
    material: str | None = None,
) -> int:
    """Box standing on the lowest ground under its footprint, sunk 0.3 m into the ground."""
    c, s = np.cos(yaw), np.sin(yaw)
    kx = np.array([-1, 1, 1, -1]) * size[0] / 2
    ky = np.array([-1, -1, 1, 1]) * size[1] / 2
    z = b.terrain.height_at(centre_xy[0] + c * kx - s * ky, centre_xy[1] + s * kx + c * ky)
    top = float(z.max()) + size[2]
    base = float(z.min()) - 0.3
    return b.add_box(centre_xy, [size[0], size[1], top - base], cls, yaw, material, roof, base, name)


def parts_mesh(parts: list[Mesh]) -> Mesh:
    offsets = np.cumsum([0] + [len(v) for v, _ in parts])
    return np.vstack([v for v, _ in parts]), np.vstack([t + o for (_, t), o in zip(parts, offsets)])


def box_part(centre_m: ArrayLike, size_m: ArrayLike) -> Mesh:
    """Box of ``size_m`` centred at ``centre_m`` (local frame)."""
    size = np.asarray(size_m, float)
    v, t = shapes.box(size)
    return v + np.asarray(centre_m, float) - [0.0, 0.0, size[2] / 2], t


def wheel_part(centre_m: ArrayLike, radius_m: float, width_m: float, segments: int = 16) -> Mesh:
    """Cylinder with its axis along local y, centred at ``centre_m``."""
    v, t = shapes.cylinder(radius_m, width_m, segments)
    v = v[:, [0, 2, 1]] - [0.0, width_m / 2, 0.0]  # z axis -> y axis
    return v + np.asarray(centre_m, float), t[:, ::-1]  # swapping two axes mirrors: keep outward


def place(mesh: Mesh, xy_m: ArrayLike, yaw_rad: float, z_m: float) -> Mesh:
    """``mesh`` turned by ``yaw_rad`` about z and moved to world ``(x, y, z_m)``."""
    v, t = mesh
    x, y = np.asarray(xy_m, float)
    return v @ shapes.rotation_z(yaw_rad).T + [x, y, z_m], t


def tractor() -> Mesh:
    return parts_mesh(
        [
            box_part([0.2, 0.0, 1.15], [3.2, 1.1, 0.9]),  # chassis
            box_part([1.4, 0.0, 1.75], [1.6, 0.95, 0.5]),  # bonnet
            box_part([-0.6, 0.0, 2.4], [1.5, 1.5, 1.6]),  # cab
            wheel_part([-0.8, 0.95, 0.85], 0.85, 0.6),
            wheel_part([-0.8, -0.95, 0.85], 0.85, 0.6),
            wheel_part([1.5, 0.85, 0.5], 0.5, 0.4),
            wheel_part([1.5, -0.85, 0.5], 0.5, 0.4),
        ]
    )


def combine() -> Mesh:
    return parts_mesh(
        [
            box_part([0.0, 0.0, 2.2], [6.0, 3.0, 2.6]),  # body
            box_part([-0.8, 0.0, 3.9], [3.0, 2.8, 0.8]),  # grain tank
            box_part([2.2, 0.0, 4.3], [1.6, 1.8, 1.6]),  # cab
            box_part([4.0, 0.0, 0.8], [1.6, 6.0, 1.0]),  # header
            wheel_part([1.8, 1.6, 0.85], 0.85, 0.7),
            wheel_part([1.8, -1.6, 0.85], 0.85, 0.7),
            wheel_part([-2.2, 1.4, 0.55], 0.55, 0.45),
            wheel_part([-2.2, -1.4, 0.55], 0.55, 0.45),
        ]
    )


def grain_cart() -> Mesh:
    return parts_mesh(
        [
            box_part([0.0, 0.0, 1.85], [5.0, 2.4, 1.7]),  # tub
            box_part([3.2, 0.0, 0.7], [1.6, 0.2, 0.15]),  # drawbar
            wheel_part([0.0, 1.35, 0.65], 0.65, 0.5),
            wheel_part([0.0, -1.35, 0.65], 0.65, 0.5),
        ]
    )


def round_bale(radius_m: float = 0.75, length_m: float = 1.2, sunk_m: float = 0.03) -> Mesh:
    """A round bale lying on the ground, its axis along y, sunk ``sunk_m`` into it."""
    v, t = shapes.cylinder(radius_m, length_m, 20)
    return v[:, [0, 2, 1]] - [0.0, length_m / 2, sunk_m - radius_m], t[:, ::-1]
