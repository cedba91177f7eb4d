"""Mechanical noise: errors of each firing's direction and origin (seed 004, "Mechanical noise").

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
"MECHNOIS"). So nothing is drawn from the seed-000 PCG32 noise stream (nor the rain stream),
which stays aligned whatever the mechanical noise is; a scan's errors depend on its seed, its
number and the beam alone, not on the order or the blocks the sweep traces its columns in; and
the same seed gives bit-identical scans.

**The rotation.** The error turns the beam, with all its sub-rays, as a rigid body: first by
the elevation error about the horizontal axis ``(sin phi, -cos phi, 0)`` (``phi``: the nominal
azimuth of the beam in the sensor frame), which raises the beam, then by the azimuth error about
the sensor's ``z`` axis, counter-clockwise seen from above. The origin error is added to the ray
origin in the sensor frame. With every mean and standard deviation 0 (the default; seed 000 has
no mechanical noise) the rays are not touched at all.
"""

from __future__ import annotations

import numpy as np

from acres_lidar_ros.config.limits import MechanicalNoiseConfig
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
    d = np.asarray(beam_directions_sensor, dtype=np.float64)
    phi = np.arctan2(d[:, 1], d[:, 0])
    hx, hy = np.sin(phi), -np.cos(phi)
    c, s = np.cos(elevation_rad), np.sin(elevation_rad)
    n = d.shape[0]
    # Rodrigues about the unit axis (hx, hy, 0): R = c I + s [h]x + (1 - c) h h^T.
    r_h = np.empty((n, 3, 3))
    r_h[:, 0, 0] = c + (1 - c) * hx * hx
    r_h[:, 0, 1] = (1 - c) * hx * hy
    r_h[:, 0, 2] = s * hy
    r_h[:, 1, 0] = (1 - c) * hx * hy
    r_h[:, 1, 1] = c + (1 - c) * hy * hy
    r_h[:, 1, 2] = -s * hx
    r_h[:, 2, 0] = -s * hy
    r_h[:, 2, 1] = s * hx
    r_h[:, 2, 2] = c
    ca, sa = np.cos(azimuth_rad), np.sin(azimuth_rad)
    r_z = np.zeros((n, 3, 3))
    r_z[:, 0, 0] = ca
    r_z[:, 0, 1] = -sa
    r_z[:, 1, 0] = sa
    r_z[:, 1, 1] = ca
    r_z[:, 2, 2] = 1.0
    return r_z @ r_h


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
    # The error rotation in the world: R_ws R_err R_ws^T.
    world = R_world_sensor @ rotation @ np.swapaxes(R_world_sensor, 1, 2)
    directions = np.einsum("nij,nsj->nsi", world, directions_world.reshape(n, per, 3)).reshape(rows, 3)
    shift = np.einsum("nij,nj->ni", R_world_sensor, origin)
    origins = (origins_world.reshape(n, per, 3) + shift[:, None, :]).reshape(rows, 3)
    return origins, directions


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
