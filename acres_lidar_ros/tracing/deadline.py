"""Tracing under a compute deadline (the simulator README, "Deadline Contract").

``trace_until_deadline`` traces rays in a given order until a live deadline,
``start + budget``: a ray is usable only if it completes on or before the deadline. The rays go
to the tracer in chunks (one call per chunk, the tracer's real batched path); all rays of a
chunk complete when the call returns. The first chunk is one ray; each next chunk is sized to
take about ``CHUNK_SHARE`` of the time left at the cost per ray measured on the chunk before, so
chunks shrink to single rays as the deadline nears. The first chunk that completes late is
discarded and its overrun (completion minus deadline) recorded; nothing after it is traced.
This is a hard deadline for the data, not preemption: one call in flight may run past it.

The clock is injected (``clock() -> seconds``), so the ordering and the deadline logic are
tested without the wall clock.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from acres_lidar_ros.errors import ConfigError

CHUNK_SHARE = 0.5  # a chunk is sized to take this share of the time left


@dataclass(frozen=True)
class DeadlineFrame:
    """One frame traced under a deadline.

    Attributes
    ----------
    completed : int
        Rays completed on or before the deadline: ``order[:completed]``.
    discarded : int
        Rays of the chunk that completed late (0 when none did).
    overrun_s : float
        How late that chunk completed, s (0.0 when none was late).
    chunks : int
        Tracer calls whose results are usable.
    results : list
        The tracer's result of each usable chunk, in order.
    """

    completed: int
    discarded: int
    overrun_s: float
    chunks: int
    results: list


def trace_until_deadline(
    trace: Callable[[np.ndarray], Any],
    order: np.ndarray,
    budget_s: float,
    clock: Callable[[], float],
) -> DeadlineFrame:
    """Trace ``order`` (ray indices) with ``trace(indices)`` until ``clock()`` passes the budget.

    ``budget_s`` must be a finite number > 0 (``ConfigError`` otherwise). The deadline is the
    first ``clock()`` reading plus ``budget_s``.
    """
    if not (isinstance(budget_s, (int, float)) and math.isfinite(budget_s) and budget_s > 0):
        raise ConfigError(f"budget = {budget_s!r} s: must be a finite number of seconds > 0")
    order = np.asarray(order, np.int64)
    start = clock()
    deadline = start + float(budget_s)
    results: list = []
    done = 0
    size = 1
    now = start
    while done < len(order):
        chunk = order[done : done + size]
        before = now
        result = trace(chunk)
        now = clock()
        if now > deadline:
            return DeadlineFrame(done, len(chunk), now - deadline, len(results), results)
        results.append(result)
        done += len(chunk)
        per_ray_s = (now - before) / len(chunk)
        left_s = deadline - now
        size = len(order) if per_ray_s <= 0 else max(1, int(CHUNK_SHARE * left_s / per_ray_s))
    return DeadlineFrame(done, 0, 0.0, len(results), results)


__all__ = ["CHUNK_SHARE", "DeadlineFrame", "trace_until_deadline"]
