"""What the NodeLoop and scheduler tests share: a manual clock and a flat world to trace."""

from __future__ import annotations

import numpy as np

from acres_lidar_ros.scene.builder import SceneBuilder
from acres_lidar_ros.scene.grids import TerrainGrid
from acres_lidar_ros.tracing.trace import Tracer

MS = 1_000_000
IDENTITY = (0.0, 0.0, 0.0, 1.0)


class ManualClock:
    """A clock the test sets by hand (``now_ns``): the loop's injected clock."""

    def __init__(self, now_ns: int = 0) -> None:
        self.now_ns = now_ns

    def __call__(self) -> int:
        return self.now_ns


def flat_plane_tracer(half_m: float = 300.0) -> Tracer:
    """Flat ground at z = 0, ``2 half_m`` square, centred on the origin."""
    return Tracer(SceneBuilder(TerrainGrid(np.array([-half_m, -half_m]), 2 * half_m, np.zeros((2, 2)))).build())
