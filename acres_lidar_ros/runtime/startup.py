"""Start-up tuning of a process that must publish on time: the node, ``record``, ``bench``.

Both the ROS node (``ros/``) and the command line (``apps/``) call these; they live here because
those two layers do not import each other and both may import ``runtime``.
"""

from __future__ import annotations

import contextlib
import gc
import sys
from collections.abc import Iterator

GIL_SWITCH_INTERVAL_S = 0.001
"""The GIL switch interval the node runs with (``sys.setswitchinterval``; Python's default is
5 ms). A timer or callback waiting for the GIL while a worker runs Python code waits up to one
interval, which showed as publications up to 5 ms past their release time; with 1 ms they sit
at it. The schedule benchmark runs with it too."""


def freeze_startup_objects() -> int:
    """Put every object alive now out of the garbage collector's reach (``gc.freeze``).

    After start-up a process holds about 120,000 container objects (numba, Open3D, scipy, the
    scene); a full collection walks them all and holds the GIL for about 60 ms on the 2-core
    development machine, long enough to hold up a scan in work by as much. Frozen, they are
    never walked again; objects made later are collected as usual. Call it once the scene is
    loaded and the kernels are warm (the node, ``acres-lidar record`` and ``bench`` and the
    schedule benchmark do). Returns the number of objects frozen.
    """
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


@contextlib.contextmanager
def gil_switch_interval(interval_s: float = GIL_SWITCH_INTERVAL_S) -> Iterator[None]:
    """Run the block with the node's GIL switch interval; the previous one is restored after."""
    previous_s = sys.getswitchinterval()
    sys.setswitchinterval(interval_s)
    try:
        yield
    finally:
        sys.setswitchinterval(previous_s)
