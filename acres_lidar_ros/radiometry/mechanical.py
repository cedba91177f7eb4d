"""Mechanical noise: errors of each firing's direction and origin (the attribute list, "Mechanical noise").

Each firing (a beam of one scan) gets an azimuth error, an elevation error and an origin error
``(x, y, z)``, each ``mean + std z`` with a standard normal ``z`` of its own. The traced rays take
the errors; the reported point does not: the sensor places its point with the range it measured
along its nominal direction from its nominal origin, as a real sensor that does not know its own
error does. So the noise shows up as points that are off by the distance between where the beam
went and where the sensor thinks it went.

**The generator.** The numbers come from a hash, never from a stream: ``z`` of firing (scan
``s``, beam ``c``) and component ``k`` (0 azimuth, 1 elevation, 2 to 4 origin x, y, z) is
``noise.keyed_normal(term, s, c, k)``: ``hash_normal(mix(((s << 24) | (c << 3) | k) xor term))``
with ``term = mix(mix(seed * 0x632be59bd9b4e019) xor 0x4d4543484e4f4953)`` (the tag spells
"MECHNOIS"). So nothing is drawn from the spec's PCG32 noise stream (nor the rain stream),
which stays aligned whatever the mechanical noise is; a scan's errors depend on its seed, its
number and the beam alone, not on the order or the blocks the sweep traces its columns in; and
the same seed gives bit-identical scans.

**The rotation.** The error turns the beam, with all its sub-rays, as a rigid body: first by
the elevation error about the horizontal axis ``(sin phi, -cos phi, 0)`` (``phi``: the nominal
azimuth of the beam in the sensor frame), which raises the beam, then by the azimuth error about
the sensor's ``z`` axis, counter-clockwise seen from above. The origin error is added to the ray
origin in the sensor frame. With every mean and standard deviation 0 (the default; the spec has
no mechanical noise) the rays are not touched at all.
"""

from __future__ import annotations

import numba
import numpy as np

from acres_lidar_ros.config.window_rules import MechanicalNoiseConfig
from acres_lidar_ros.radiometry.noise import MASK64, PLACE_SEED_MUL, keyed_normal, mix64

MECHANICAL_TAG = 0x4D4543484E4F4953
"""The tag of the mechanical noise's hash ("MECHNOIS" in ASCII)."""
COMPONENTS = 5
"""Normals of one firing: azimuth, elevation, origin x, y, z."""


def mechanical_seed_term(seed: int) -> int:
    """``mix(mix(seed * 0x632be59bd9b4e019) xor MECHANICAL_TAG)``: the key of a run's errors."""
    return int(mix64(int(mix64((int(seed) * PLACE_SEED_MUL) & MASK64)) ^ MECHANICAL_TAG))


def firing_errors(
    noise: MechanicalNoiseConfig, seed: int, scan_index: int, cells: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The errors of the given beams' firings in one scan.

    Parameters
    ----------
    noise : MechanicalNoiseConfig
    seed : int
        The run's seed.
    scan_index : int
        The scan's number in its run (>= 0).
    cells : (n,) int
        The beams (cells ``c N_r + r``), < 2^21.

    Returns
    -------
    azimuth_rad, elevation_rad : (n,) float64
    origin_m : (n, 3) float64
        Sensor frame.
    """
    cells = np.asarray(cells, dtype=np.int64)
    z = keyed_normal(mechanical_seed_term(seed), int(scan_index), cells[:, None], np.arange(COMPONENTS)[None, :])
    azimuth = noise.azimuth_mean_rad + noise.azimuth_std_rad * z[:, 0]
    elevation = noise.elevation_mean_rad + noise.elevation_std_rad * z[:, 1]
    origin = noise.origin_mean_m[None, :] + noise.origin_std_m[None, :] * z[:, 2:]
    return azimuth, elevation, origin


def error_rotations(
    beam_directions_sensor: np.ndarray, azimuth_rad: np.ndarray, elevation_rad: np.ndarray
) -> np.ndarray:
    """The rotation of each beam by its errors (module notes), in the sensor frame: (n, 3, 3).

    ``Rz(azimuth) R_h(elevation)`` with ``h = (sin phi, -cos phi, 0)`` and ``phi`` the azimuth of
    the nominal direction ``beam_directions_sensor`` (n, 3)."""
    d = np.ascontiguousarray(beam_directions_sensor, dtype=np.float64)
    return _error_rotations(
        d, np.ascontiguousarray(azimuth_rad, dtype=np.float64), np.ascontiguousarray(elevation_rad, dtype=np.float64)
    )


@numba.njit(cache=True, nogil=True)
def _error_rotations(d, azimuth, elevation):
    """``Rz(azimuth) R_h(elevation)`` of each beam, compiled (see ``error_rotations``)."""
    n = d.shape[0]
    out = np.empty((n, 3, 3))
    for i in range(n):
        phi = np.arctan2(d[i, 1], d[i, 0])
        hx, hy = np.sin(phi), -np.cos(phi)
        c, s = np.cos(elevation[i]), np.sin(elevation[i])
        # Rodrigues about the unit axis (hx, hy, 0): R_h = c I + s [h]x + (1 - c) h h^T.
        h00, h01, h02 = c + (1 - c) * hx * hx, (1 - c) * hx * hy, s * hy
        h10, h11, h12 = (1 - c) * hx * hy, c + (1 - c) * hy * hy, -s * hx
        h20, h21, h22 = -s * hy, s * hx, c
        ca, sa = np.cos(azimuth[i]), np.sin(azimuth[i])
        out[i, 0, 0], out[i, 0, 1], out[i, 0, 2] = ca * h00 - sa * h10, ca * h01 - sa * h11, ca * h02 - sa * h12
        out[i, 1, 0], out[i, 1, 1], out[i, 1, 2] = sa * h00 + ca * h10, sa * h01 + ca * h11, sa * h02 + ca * h12
        out[i, 2, 0], out[i, 2, 1], out[i, 2, 2] = h20, h21, h22
    return out


def perturbed_rays(
    origins_world: np.ndarray,
    directions_world: np.ndarray,
    R_world_sensor: np.ndarray,
    beam_directions_sensor: np.ndarray,
    errors: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> tuple[np.ndarray, np.ndarray]:
    """The rays of ``n`` beams of ``S`` sub-rays each after their firings' errors.

    Parameters
    ----------
    origins_world, directions_world : (n * S, 3) float64
        Sub-ray ``j`` of beam ``i`` is row ``i * S + j``.
    R_world_sensor : (n, 3, 3) float64
        The sensor's rotation at each beam's firing.
    beam_directions_sensor : (n, 3) float64
        Nominal beam directions in the sensor frame.
    errors : firing_errors' (azimuth_rad, elevation_rad, origin_m) of the beams

    Returns
    -------
    Two new (n * S, 3) float64 arrays (the inputs are not changed).
    """
    azimuth, elevation, origin = errors
    n = R_world_sensor.shape[0]
    rows = origins_world.shape[0]
    if n == 0 or rows % n:
        raise ValueError(f"{rows} rays do not split into sub-rays of {n} beams")
    per = rows // n
    rotation = error_rotations(beam_directions_sensor, azimuth, elevation)
    return _turned_rays(
        np.ascontiguousarray(R_world_sensor, dtype=np.float64),
        rotation,
        np.ascontiguousarray(origin, dtype=np.float64),
        np.ascontiguousarray(origins_world, dtype=np.float64),
        np.ascontiguousarray(directions_world, dtype=np.float64),
        per,
    )


@numba.njit(cache=True, nogil=True)
def _turned_rays(R_ws, rotation, origin_error, origins, directions, per):
    """Each beam's sub-rays turned by ``R_ws R_err R_ws^T`` (the error rotation in the world) and
    moved by ``R_ws e_o``, in one compiled pass: (rows, 3) origins and directions."""
    n = R_ws.shape[0]
    out_o = np.empty_like(origins)
    out_d = np.empty_like(directions)
    world = np.empty((3, 3))
    for i in range(n):
        R, E = R_ws[i], rotation[i]
        for a in range(3):
            for b in range(3):
                acc = 0.0
                for k in range(3):
                    for m in range(3):
                        acc += R[a, k] * E[k, m] * R[b, m]
                world[a, b] = acc
        sx = R[0, 0] * origin_error[i, 0] + R[0, 1] * origin_error[i, 1] + R[0, 2] * origin_error[i, 2]
        sy = R[1, 0] * origin_error[i, 0] + R[1, 1] * origin_error[i, 1] + R[1, 2] * origin_error[i, 2]
        sz = R[2, 0] * origin_error[i, 0] + R[2, 1] * origin_error[i, 1] + R[2, 2] * origin_error[i, 2]
        for j in range(i * per, (i + 1) * per):
            dx, dy, dz = directions[j, 0], directions[j, 1], directions[j, 2]
            for a in range(3):
                out_d[j, a] = world[a, 0] * dx + world[a, 1] * dy + world[a, 2] * dz
            out_o[j, 0] = origins[j, 0] + sx
            out_o[j, 1] = origins[j, 1] + sy
            out_o[j, 2] = origins[j, 2] + sz
    return out_o, out_d


def block_rays(
    noise: MechanicalNoiseConfig,
    seed: int,
    scan_index: int,
    cells: np.ndarray,
    R_world_sensor: np.ndarray,
    beam_directions_sensor: np.ndarray,
    origins_world: np.ndarray,
    directions_world: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """The rays a block of beams traces: the nominal ones as they are without mechanical noise
    (nothing is computed then), else ``perturbed_rays`` with each firing's ``firing_errors``.

    Parameters
    ----------
    noise, seed, scan_index : as ``firing_errors``
    cells : (n,) int
        The block's beams, in the order of its rays.
    R_world_sensor : (m, 3, 3) float64
        The sensor's rotation at the firings, one per group of ``n / m`` consecutive beams (a
        column's rings, or one per beam).
    beam_directions_sensor : (cells, 3) float64
        Every beam's nominal direction in the sensor frame (indexed by ``cells``).
    origins_world, directions_world : (n * S, 3) float64
        The nominal rays, as ``perturbed_rays`` takes them.
    """
    if not noise.active:
        return origins_world, directions_world
    cells = np.asarray(cells, dtype=np.int64)
    groups = R_world_sensor.shape[0]
    if groups == 0 or cells.size % groups:
        raise ValueError(f"{cells.size} beams do not split into {groups} groups")
    rotation = np.repeat(R_world_sensor, cells.size // groups, axis=0)
    errors = firing_errors(noise, seed, scan_index, cells)
    return perturbed_rays(origins_world, directions_world, rotation, beam_directions_sensor[cells], errors)
