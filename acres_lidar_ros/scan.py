"""One LiDAR scan: its returns, points and timing (the ``Scan`` every output is made from).

Cells are organised as the real driver lays them out: cell = column x rings + ring.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from acres_lidar_ros.returns import Returns


@dataclass(frozen=True)
class Scan:
    """A finished scan.

    Attributes
    ----------
    index : int
        Scan number in its run, from 0.
    stamp_ns : int
        Scan stamp, ns: the end of the sweep (the last column fires at ``stamp + dt_c`` < stamp).
    columns, rings : int
        ``N_c`` and ``N_r``.
    returns : Returns of shape (columns * rings, R)
    points_sensor : (columns * rings, R, 3) float64
        Point ``p = R d + o`` in the sensor frame at its column's firing time, m; NaN where the
        slot has no return.
    time_offset_s : (columns,) float64
        ``dt_c``: firing time of column ``c`` minus the stamp, s (``-T <= dt_c < 0``; 0 without
        motion distortion).
    ring_rank : (rings,) uint16
        Rank of each ring's elevation, 0 = lowest (rslidar_sdk's ``ring`` field).
    T_world_sensor : (columns, 4, 4) float64
        Sensor pose at each column's firing time (maps sensor coordinates into the world).
    frame_id : str
        Frame name of the cloud.
    weather : dict
        ``rain_mm_per_h`` and ``visibility_m`` the scan was traced with.
    """

    index: int
    stamp_ns: int
    columns: int
    rings: int
    returns: Returns
    points_sensor: np.ndarray
    time_offset_s: np.ndarray
    ring_rank: np.ndarray
    T_world_sensor: np.ndarray
    frame_id: str = "lidar"
    weather: dict = field(default_factory=dict)

    @property
    def stamp_s(self) -> float:
        return self.stamp_ns * 1e-9

    @property
    def cell_column(self) -> np.ndarray:
        """(columns * rings,) uint16: column of each cell."""
        return np.repeat(np.arange(self.columns, dtype=np.uint16), self.rings)

    @property
    def cell_ring(self) -> np.ndarray:
        """(columns * rings,) uint16: ring (driver index) of each cell."""
        return np.tile(np.arange(self.rings, dtype=np.uint16), self.columns)
