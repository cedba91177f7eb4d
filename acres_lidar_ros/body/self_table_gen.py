"""Generate a self-return table by tracing a URDF body from the LiDAR (``acres-lidar self-table`` writes it).

The spec's table is measured from recorded scans; without recordings we trace a body model from
the real mount. For every beam of the sensor, seven sub-rays with the spec's pattern and weights
(``BeamPattern.from_config(config, sub_rays=7)``: centre 0.25, six at ``0.35 beta`` with 0.125
each, also for a one-ray sensor) leave the lens centre and meet the URDF's collision geometry
(boxes, cylinders and spheres exactly, meshes through Open3D). The LiDAR link and its children
are not traced: the beams leave through the sensor's own window.

Per sub-ray ``j`` that hits the body at the range ``R_j`` with ``|cos theta_j|``:

* backscatter ``rho_j`` of the body material (``vehicle``) at that incidence (spec Minnaert law
  and specular lobe, ``physics.minnaert_backscatter``), peak factor ``g_j`` of the echo stretch
  with the divergence in the plane of incidence (``physics.in_plane_divergence``);
* a return factor ``a_j`` in [0, 1]: 0 in the blind zone (``R_j < min_range_m``), beyond
  ``range_m`` and beyond ``body_return_max_m`` (default ``BODY_RETURN_MAX_M``, the farthest body
  return of the spec's measured mask, 1.58 m: a sub-ray that meets the body farther is stopped
  without a return, so it blocks); and a grazing ramp ``G(theta) = clamp((theta_none - theta) / (theta_none -
  theta_full), 0, 1)``, 1 up to ``theta_full`` and 0 from ``theta_none``. The spec's radiometry
  alone never loses a body return (the body is within 2 m and the Polaris materials have
  ``k = 0``); the real sensor does lose the near, grazing ones: a beam smeared along a surface
  it skims, next to its own window, gives no return. The two angles are the calibration of this
  loss: ``GRAZING_FULL_DEG`` and ``GRAZING_NONE_DEG`` bring the Polaris body's table to the
  spec's measured counts (see docs/self_returns.md).

The beam's body echo (spec "Echo Formation") has ``rho_e = sum_j w_j a_j rho_j`` and the
``w_j a_j rho_j``-weighted range ``R_e`` and peak factor ``g_e``; its detection probability is
the spec's, analytically: ``P_det = Phi((S - S_T) / sqrt(S + B))`` with ``S`` from the range
equation (ring ``R10``, overlap). The cell then gets

    p_self = P_det sum_j w_j a_j,    p_block = sum_j w_j [hit_j] - p_self,
    range = R_e,    intensity = I(rho_e)  (the spec's intensity byte),

and range and intensity 0 where ``p_self = 0``. ``p_self + p_block`` is the energy fraction of
the beam on the body; the rest of the beam sees the scene.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy.special import ndtr

from acres_lidar_ros.body.self_returns import MOUNT_ANGLE_TOLERANCE_RAD, MOUNT_POSITION_TOLERANCE_M, SelfReturnTable
from acres_lidar_ros.body.urdf import (
    BASE_LINK,
    LIDAR_LINK,
    MAX_URDF_FILE_BYTES,
    MAX_URDF_MESH_BYTES,
    Robot,
    load_urdf,
    rpy_of_rotation,
)
from acres_lidar_ros.config.input_files import check_regular_file, read_regular_file
from acres_lidar_ros.config.material_table import MATERIAL_ID
from acres_lidar_ros.config.sensors import SensorConfig, load_sensor_config
from acres_lidar_ros.errors import ConfigError, SceneError
from acres_lidar_ros.radiometry.equations import (
    detection_threshold,
    footprint_range_spread_m,
    in_plane_divergence,
    intensity_byte,
    minnaert_backscatter,
    pulse_peak_factor,
    signal_counts,
)
from acres_lidar_ros.sensor.pattern import BeamPattern

if TYPE_CHECKING:
    import open3d as o3d

GENERATOR_SUB_RAYS = 7
RAY_START_M = 0.005
"""The spec's GPU rays start 0.5 cm from their origin; the body trace does the same."""
BODY_RETURN_MAX_M = 1.58
"""Farthest body return (spec "Self-Return Mask": returns from the body at 0.26 m to 1.58 m, and a
return nearer than 1.6 m is always the body); farther body hits block without a return."""
GRAZING_FULL_DEG = 47.0
"""Incidence up to which every sub-ray on the body returns (calibration, see module docstring)."""
GRAZING_NONE_DEG = 86.0
"""Incidence from which no sub-ray on the body returns (calibration)."""
STATISTICS_DECIMALS = 4
MOUNT_DECIMALS = 6
"""Decimals of the mount in the table's JSON and in a ``--mount-from-urdf`` overlay (m, deg)."""


@dataclass(frozen=True)
class _Analytic:
    kind: str  # box, cylinder, sphere
    R_frame_shape: np.ndarray  # (3, 3)
    t_frame_shape_m: np.ndarray  # (3,)
    size_m: np.ndarray  # box: half extents; cylinder: (radius, radius, half length); sphere: radius x 3
    link: str


class BodyGeometry:
    """The collision geometry of a robot's links in one frame, traced by rays.

    Boxes, cylinders (axis along the shape's z, centred) and spheres are intersected exactly in
    float64; meshes go into one Open3D ``RaycastingScene`` (float32).

    Parameters
    ----------
    robot : Robot
    frame : str
        Link whose coordinates rays and results use.
    exclude_links : set of str
        Links not traced.
    """

    def __init__(self, robot: Robot, frame: str, exclude_links: AbstractSet[str] = frozenset()) -> None:
        self.frame = frame
        self.shapes: list[_Analytic] = []
        self.links: list[str] = []
        self._mesh_scene: o3d.t.geometry.RaycastingScene | None = None
        mesh_links: list[str] = []
        T_root_frame_inv = np.linalg.inv(robot.T_root_link(frame))
        for collision in robot.collisions:
            if collision.link in exclude_links:
                continue
            T = T_root_frame_inv @ robot.T_root_link(collision.link) @ collision.T_link_shape
            if collision.mesh_path is not None:  # kind "mesh"
                self._add_mesh(collision.mesh_path, T, collision.size_m, collision.link)
                mesh_links.append(collision.link)
                continue
            size = collision.size_m / 2.0 if collision.kind == "box" else collision.size_m.copy()
            if collision.kind == "cylinder":
                size[2] = collision.size_m[2] / 2.0
            self.shapes.append(_Analytic(collision.kind, T[:3, :3], T[:3, 3], size, collision.link))
        self.links = [s.link for s in self.shapes] + mesh_links
        self._mesh_links = mesh_links

    def _add_mesh(self, path: Path, T: np.ndarray, scale: np.ndarray, link: str) -> None:
        import open3d as o3d

        check_regular_file(path, f"mesh of link {link!r}", MAX_URDF_MESH_BYTES, SceneError)
        mesh = o3d.io.read_triangle_mesh(path)
        if len(mesh.triangles) == 0:
            raise SceneError(f"mesh {str(path)!r} of link {link!r} has no triangles (unreadable or empty)")
        vertices = (np.asarray(mesh.vertices) * scale) @ T[:3, :3].T + T[:3, 3]
        triangles = np.asarray(mesh.triangles)
        if self._mesh_scene is None:
            self._mesh_scene = o3d.t.geometry.RaycastingScene()
        cpu = o3d.core.Device("CPU:0")
        self._mesh_scene.add_triangles(
            o3d.core.Tensor(vertices, o3d.core.float32, cpu), o3d.core.Tensor(triangles, o3d.core.uint32, cpu)
        )

    def trace(
        self, origins_m: np.ndarray, directions: np.ndarray, start_m: float = RAY_START_M
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """First body surface of each ray at or beyond ``start_m``.

        Parameters
        ----------
        origins_m : (n, 3) float64, in ``frame``
        directions : (n, 3) float64 unit, in ``frame``

        Returns
        -------
        range_m : (n,) float64, +inf where the ray misses the body
        normal : (n, 3) float64 unit surface normal in ``frame`` (zeros where missed)
        shape_index : (n,) int64, index into ``links`` (-1 where missed)
        """
        o = np.asarray(origins_m, dtype=np.float64)
        d = np.asarray(directions, dtype=np.float64)
        n = len(o)
        best = np.full(n, np.inf)
        normal = np.zeros((n, 3))
        index = np.full(n, -1, np.int64)
        for i, shape in enumerate(self.shapes):
            p = (o - shape.t_frame_shape_m) @ shape.R_frame_shape  # shape coordinates: R^T (o - t)
            q = d @ shape.R_frame_shape
            t, n_shape = _INTERSECT[shape.kind](p, q, shape.size_m, start_m)
            better = t < best
            best = np.where(better, t, best)
            normal = np.where(better[:, None], n_shape @ shape.R_frame_shape.T, normal)
            index = np.where(better, i, index)
        if self._mesh_scene is not None:
            import open3d as o3d

            rays = o3d.core.Tensor(np.hstack([o + start_m * d, d]), o3d.core.float32, o3d.core.Device("CPU:0"))
            hit = self._mesh_scene.cast_rays(rays)
            t = hit["t_hit"].numpy().astype(np.float64) + start_m
            n_mesh = hit["primitive_normals"].numpy().astype(np.float64)
            geometry = hit["geometry_ids"].numpy().astype(np.int64)
            better = np.isfinite(t) & (t < best)
            best = np.where(better, t, best)
            normal = np.where(better[:, None], n_mesh, normal)
            index = np.where(better, len(self.shapes) + np.where(better, geometry, 0), index)
        return best, normal, index


def _box(p: np.ndarray, q: np.ndarray, half: np.ndarray, start: float) -> tuple[np.ndarray, np.ndarray]:
    """Slab test of rays ``p + t q`` against the box ``|x| <= half``; entering (or exit) face."""
    with np.errstate(divide="ignore", invalid="ignore"):
        t1 = (-half - p) / q
        t2 = (half - p) / q
    parallel = q == 0.0
    inside = np.abs(p) <= half
    t_lo = np.where(parallel, np.where(inside, -np.inf, np.inf), np.minimum(t1, t2))
    t_hi = np.where(parallel, np.where(inside, np.inf, -np.inf), np.maximum(t1, t2))
    near_axis, far_axis = t_lo.argmax(axis=1), t_hi.argmin(axis=1)
    rows = np.arange(len(p))
    t_near, t_far = t_lo[rows, near_axis], t_hi[rows, far_axis]
    crosses = (t_near <= t_far) & (t_far >= start)
    entering = t_near >= start
    t = np.where(crosses, np.where(entering, t_near, t_far), np.inf)
    axis = np.where(entering, near_axis, far_axis)
    normal = np.zeros_like(p)
    normal[rows, axis] = -np.sign(q[rows, axis])  # faces the ray
    return t, normal


def _smallest_root(a: np.ndarray, b: np.ndarray, c: np.ndarray, start: float, ok) -> np.ndarray:
    """Smallest root ``t >= start`` of ``a t^2 + b t + c`` for which ``ok(t)`` holds, else inf."""
    disc = b * b - 4.0 * a * c
    real = (disc >= 0.0) & (a > 0.0)
    sq = np.sqrt(np.where(real, disc, 0.0))
    safe_a = np.where(a > 0.0, a, 1.0)
    best = np.full(len(a), np.inf)
    for t in ((-b - sq) / (2.0 * safe_a), (-b + sq) / (2.0 * safe_a)):
        good = real & (t >= start) & ok(t) & (t < best)
        best = np.where(good, t, best)
    return best


def _sphere(p: np.ndarray, q: np.ndarray, size: np.ndarray, start: float) -> tuple[np.ndarray, np.ndarray]:
    radius = size[0]
    a = np.sum(q * q, axis=1)
    t = _smallest_root(a, 2.0 * np.sum(p * q, axis=1), np.sum(p * p, axis=1) - radius**2, start, lambda t: True)
    x = p + np.where(np.isfinite(t), t, 0.0)[:, None] * q
    return t, x / radius


def _cylinder(p: np.ndarray, q: np.ndarray, size: np.ndarray, start: float) -> tuple[np.ndarray, np.ndarray]:
    radius, half_length = size[0], size[2]
    a = q[:, 0] ** 2 + q[:, 1] ** 2
    b = 2.0 * (p[:, 0] * q[:, 0] + p[:, 1] * q[:, 1])
    c = p[:, 0] ** 2 + p[:, 1] ** 2 - radius**2
    t_side = _smallest_root(a, b, c, start, lambda t: np.abs(p[:, 2] + t * q[:, 2]) <= half_length)
    t_cap = np.full(len(p), np.inf)
    cap_sign = np.zeros(len(p))
    for sign in (-1.0, 1.0):
        with np.errstate(divide="ignore", invalid="ignore"):
            t = (sign * half_length - p[:, 2]) / q[:, 2]
        x = p[:, 0] + t * q[:, 0]
        y = p[:, 1] + t * q[:, 1]
        good = np.isfinite(t) & (t >= start) & (x * x + y * y <= radius**2) & (t < t_cap)
        t_cap = np.where(good, t, t_cap)
        cap_sign = np.where(good, sign, cap_sign)
    side = t_side <= t_cap
    t = np.where(side, t_side, t_cap)
    x = p + np.where(np.isfinite(t), t, 0.0)[:, None] * q
    side_normal = np.stack([x[:, 0] / radius, x[:, 1] / radius, np.zeros(len(p))], axis=1)
    cap_normal = np.stack([np.zeros(len(p)), np.zeros(len(p)), cap_sign], axis=1)
    return t, np.where(side[:, None], side_normal, cap_normal)


_INTERSECT = {"box": _box, "sphere": _sphere, "cylinder": _cylinder}


def urdf_mount(robot: Robot, base_link: str = BASE_LINK, lidar_link: str = LIDAR_LINK) -> dict[str, list[float]]:
    """The URDF's mount of ``lidar_link`` on ``base_link`` as sensors-file keys ``position_flu_m``
    and ``rpy_deg`` (rounded to ``MOUNT_DECIMALS``)."""
    T = robot.T_link_link(base_link, lidar_link)
    return {
        "position_flu_m": [round(float(v), MOUNT_DECIMALS) + 0.0 for v in T[:3, 3]],
        "rpy_deg": [round(float(v), MOUNT_DECIMALS) + 0.0 for v in np.rad2deg(rpy_of_rotation(T[:3, :3]))],
    }


def config_mount(config: SensorConfig) -> dict[str, list[float]]:
    """The sensors file's mount, rounded as ``urdf_mount``."""
    return {
        "position_flu_m": [round(float(v), MOUNT_DECIMALS) + 0.0 for v in config.position_flu_m],
        "rpy_deg": [round(float(v), MOUNT_DECIMALS) + 0.0 for v in np.rad2deg(config.rpy_rad)],
    }


def check_mount(
    robot: Robot, config: SensorConfig, lidar_link: str = LIDAR_LINK, base_link: str = BASE_LINK
) -> np.ndarray:
    """``T_base_lidar`` of the URDF; ``ConfigError`` unless it is the sensors file's mount (the
    message gives the URDF's mount as the keys to paste, and ``--mount-from-urdf``)."""
    T = robot.T_link_link(base_link, lidar_link)
    pattern_R = BeamPattern.from_config(config, sub_rays=1).R_base_sensor
    position_error_m = float(np.linalg.norm(T[:3, 3] - config.position_flu_m))
    cos_angle = (np.trace(pattern_R.T @ T[:3, :3]) - 1.0) / 2.0
    angle_error_rad = math.acos(min(1.0, max(-1.0, cos_angle)))
    if position_error_m > MOUNT_POSITION_TOLERANCE_M or angle_error_rad > MOUNT_ANGLE_TOLERANCE_RAD:
        mount = urdf_mount(robot, base_link, lidar_link)
        raise ConfigError(
            f"URDF {str(robot.path)!r}: link {lidar_link!r} is at position_flu_m {mount['position_flu_m']}, "
            f"rpy_deg {mount['rpy_deg']} in {base_link}, {position_error_m:.4f} m and "
            f"{math.degrees(angle_error_rad):.4f} deg from the sensors file's mount "
            f"(position_flu_m {config.position_flu_m.tolist()}, rpy_deg {np.rad2deg(config.rpy_rad).round(4).tolist()}); "
            f"expected the same mount within {MOUNT_POSITION_TOLERANCE_M} m and "
            f"{math.degrees(MOUNT_ANGLE_TOLERANCE_RAD):.4f} deg: the table belongs to one mount. Give --mount-from-urdf "
            "to take the URDF's mount (it writes a sensors overlay with it beside the table), or put these two keys "
            "in a sensors overlay's lidar block"
        )
    return T


def grazing_factor(
    cos_incidence: np.ndarray, full_deg: float = GRAZING_FULL_DEG, none_deg: float = GRAZING_NONE_DEG
) -> np.ndarray:
    """``G(theta) = clamp((theta_none - theta) / (theta_none - theta_full), 0, 1)``."""
    theta_deg = np.degrees(np.arccos(np.clip(np.abs(cos_incidence), 0.0, 1.0)))
    return np.clip((none_deg - theta_deg) / (none_deg - full_deg), 0.0, 1.0)


def self_table_from_body(
    body: BodyGeometry,
    config: SensorConfig,
    grazing_full_deg: float = GRAZING_FULL_DEG,
    grazing_none_deg: float = GRAZING_NONE_DEG,
    body_return_max_m: float = BODY_RETURN_MAX_M,
) -> tuple[SelfReturnTable, dict]:
    """Trace ``body`` (in base_footprint) with every sub-ray of ``config``'s sensor; a sub-ray
    that meets the body beyond ``body_return_max_m`` gives no return (it blocks).

    Returns
    -------
    table : SelfReturnTable (N_c x N_r)
    detail : dict of (N_c * N_r, S) arrays ``hit``, ``range_m``, ``cos_incidence``,
        ``return_factor``, ``beyond_return_max`` (hits that block for their range) and
        (N_c * N_r,) ``detection_probability`` (for tests and statistics)
    """
    if not grazing_full_deg < grazing_none_deg:
        raise ConfigError(f"grazing angles {grazing_full_deg} and {grazing_none_deg} deg: expected full < none")
    if not body_return_max_m > 0.0:
        raise ConfigError(f"body return limit {body_return_max_m!r} m: expected a number > 0 (inf for none)")
    pattern = BeamPattern.from_config(config, sub_rays=GENERATOR_SUB_RAYS)
    n_c, n_r, s = pattern.sub_directions_sensor.shape[:3]
    R, t = pattern.R_base_sensor, pattern.t_base_sensor_m
    directions_base = pattern.sub_directions_sensor.reshape(-1, 3) @ R.T
    lens_base = pattern.lens_origins_sensor @ R.T + t
    origins_base = np.broadcast_to(lens_base[:, :, None, :], (n_c, n_r, s, 3)).reshape(-1, 3)
    range_m, normal, _ = body.trace(origins_base, directions_base)

    hit = np.isfinite(range_m)
    r_hit = np.where(hit, range_m, 0.0)
    cos_inc = np.where(hit, np.abs(np.sum(normal * directions_base, axis=1)), 1.0)
    vehicle = MATERIAL_ID["vehicle"]
    m = config.materials
    rho_bs = minnaert_backscatter(
        cos_inc,
        m.reflectivity[vehicle],
        m.incidence_exponent[vehicle],
        m.specular[vehicle],
        m.specular_width_rad[vehicle],
        m.wet_darkening[vehicle],
        0.0,
    )
    up_base = R[:, 2]
    beta_p = in_plane_divergence(
        normal, directions_base, up_base, config.beam_divergence_rad, config.beam_divergence_v_rad
    )
    g = pulse_peak_factor(config.pulse_length_m, footprint_range_spread_m(r_hit, cos_inc, beta_p))
    in_window = (r_hit >= config.min_range_m) & (r_hit <= min(config.range_m, body_return_max_m))
    a = np.where(hit & in_window, grazing_factor(cos_inc, grazing_full_deg, grazing_none_deg), 0.0)

    shape = (n_c * n_r, s)
    w = pattern.sub_ray_weights[None, :]
    hit, r_hit, cos_inc, rho_bs, g, a = (x.reshape(shape) for x in (hit, r_hit, cos_inc, rho_bs, g, a))
    in_window = in_window.reshape(shape)
    rho_e = (w * (hit & in_window) * rho_bs).sum(axis=1)  # the body echo: sum of P_j = w_j rho_j
    energy = w * a * rho_bs  # P_j of the contributions that return
    returned = energy.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        safe = np.where(returned > 0.0, returned, 1.0)
        range_e = np.where(returned > 0.0, (energy * r_hit).sum(axis=1) / safe, 0.0)
        g_e = np.where(returned > 0.0, (energy * g).sum(axis=1) / safe, 1.0)
    radiometry = config.radiometry
    ring_r10 = np.tile(radiometry.ring_range_at_10pct_m, n_c)
    signal = signal_counts(rho_e, range_e, g_e, radiometry.signal_at_10pct_counts, ring_r10, radiometry.overlap_range_m)
    threshold = detection_threshold(
        radiometry.signal_at_10pct_counts, radiometry.ambient_counts, radiometry.detection_probability_at_spec
    )
    noise_counts = np.sqrt(np.maximum(signal + radiometry.ambient_counts, 1e-12))
    p_detect = np.where(returned > 0.0, ndtr((signal - threshold) / noise_counts), 0.0)

    p_self = (p_detect * (w * a).sum(axis=1)).astype(np.float32)
    p_hit = (w * hit).sum(axis=1).astype(np.float32)
    p_block = np.clip(np.minimum(p_hit - p_self, np.float32(1.0) - p_self), 0.0, None).astype(np.float32)
    returns = p_self > 0
    planes = np.stack(
        [
            p_self,
            np.where(returns, range_e, 0.0),
            np.where(returns, intensity_byte(rho_e).astype(np.float64), 0.0),
            p_block,
        ]
    )
    table = SelfReturnTable.from_planes(planes, n_c, n_r, "generated self-return table")
    detail = {
        "hit": hit,
        "range_m": np.where(hit, r_hit, np.inf),
        "cos_incidence": cos_inc,
        "return_factor": a,
        "detection_probability": p_detect,
        "beyond_return_max": hit & (r_hit > body_return_max_m),
    }
    return table, detail


def table_statistics(table: SelfReturnTable, detail: dict | None = None) -> dict:
    """The spec's statistics of a table ("Self-Return Mask"), rounded for a stable JSON.

    ``cells_with_return`` (p_self > 0) and their ``return_range_min_m`` / ``_max_m``;
    ``cells_blocking`` (p_block > 0); ``cells_always_body`` (p_self = 1);
    ``expected_body_points_per_scan`` (sum of p_self); ``expected_blocked_beams_per_scan``;
    ``nearest_body_range_m`` (nearest sub-ray hit on the body, returned or not, when ``detail``
    is given, else the nearest table range); ``cells_with_return_per_ring``.
    """
    returns = table.p_self > 0
    ranges = table.range_m[returns]
    nd = STATISTICS_DECIMALS

    def r(x: float) -> float:
        return round(float(x), nd)

    nearest = (
        r(detail["range_m"].min())
        if detail is not None and np.isfinite(detail["range_m"]).any()
        else (r(ranges.min()) if len(ranges) else None)
    )
    return {
        "cells": table.cells,
        "columns": table.columns,
        "rings": table.rings,
        "cells_with_return": int(returns.sum()),
        "return_range_min_m": r(ranges.min()) if len(ranges) else None,
        "return_range_max_m": r(ranges.max()) if len(ranges) else None,
        "cells_blocking": int((table.p_block > 0).sum()),
        "cells_always_body": int((table.p_self >= 1.0).sum()),
        "expected_body_points_per_scan": round(float(table.p_self.sum()), 1),
        "expected_blocked_beams_per_scan": round(float(table.p_block.sum()), 1),
        "nearest_body_range_m": nearest,
        "cells_with_return_per_ring": returns.reshape(table.columns, table.rings).sum(axis=0).astype(int).tolist(),
    }


def generate_self_table(
    urdf_path: str | Path,
    config: SensorConfig | str | Path,
    lidar_link: str = LIDAR_LINK,
    base_link: str = BASE_LINK,
    mount_from_urdf: bool = False,
    body_return_max_m: float = BODY_RETURN_MAX_M,
) -> tuple[SelfReturnTable, dict[str, Any]]:
    """Trace the URDF's body from the sensor's mount: the table and its statistics (the content
    of the ``.json`` that ``acres-lidar self-table`` writes beside the table). Writes nothing.

    Parameters
    ----------
    urdf_path : the URDF or xacro file (links ``base_link`` and ``lidar_link`` required)
    config : SensorConfig, or a named sensor / sensors file for ``load_sensor_config``
    lidar_link : the URDF link of the sensor
    base_link : the URDF link of the vehicle frame (the frame of the mount and of the poses)
    mount_from_urdf : take the mount from the URDF instead of checking it against ``config``'s
    body_return_max_m : farthest body return, m (beyond it the body blocks without a return)

    Returns
    -------
    (SelfReturnTable, dict): the table, and ``urdf`` and ``sensor`` (file names), ``table_bytes``,
    the generator's ``sub_rays`` and grazing angles, ``table_statistics``, and what the table was
    made for: ``mount`` (``base_link``, ``lidar_link``, ``position_flu_m``, ``rpy_deg``: the mount
    a sensors file must have to use it) and ``urdf_sha256`` (the body).

    Raises
    ------
    ConfigError (URDF does not parse, lacks a link, its lidar mount differs from the sensors
    file's without ``mount_from_urdf``), SceneError (a mesh is missing).
    """
    urdf_path = Path(urdf_path)
    if not isinstance(config, SensorConfig):
        config = load_sensor_config(config)
    robot = load_urdf(urdf_path)
    for link, option in ((base_link, "--base-link"), (lidar_link, "--lidar-link")):
        if link not in robot.links:
            raise ConfigError(
                f"URDF {str(urdf_path)!r} has no link {link!r} ({option}); links: {', '.join(robot.links)} "
                f"(root: {robot.root})"
            )
    if mount_from_urdf:
        config = config.with_overrides(urdf_mount(robot, base_link, lidar_link))
    check_mount(robot, config, lidar_link, base_link)
    body = BodyGeometry(robot, base_link, exclude_links=robot.descendants(lidar_link))
    table, detail = self_table_from_body(body, config, body_return_max_m=body_return_max_m)
    statistics = {
        "urdf": urdf_path.name,
        "sensor": Path(config.source).name if config.source else "",
        "table_bytes": len(table.to_bytes()),
        "sub_rays": GENERATOR_SUB_RAYS,
        "grazing_full_deg": GRAZING_FULL_DEG,
        "grazing_none_deg": GRAZING_NONE_DEG,
        "body_return_max_m": None if math.isinf(body_return_max_m) else body_return_max_m,  # None: no limit
        "sub_ray_hits_beyond_return_max": int(detail["beyond_return_max"].sum()),
        **table_statistics(table, detail),
        "mount": {"base_link": base_link, "lidar_link": lidar_link, **config_mount(config)},
        "urdf_sha256": hashlib.sha256(read_regular_file(urdf_path, "URDF", MAX_URDF_FILE_BYTES)).hexdigest(),
    }
    return table, statistics
