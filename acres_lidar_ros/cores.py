"""The machine's cores for the passes whose items are independent (sub-rays, beams, echoes).

The compiled passes release the GIL (``nogil``) and so do numpy's loops over large arrays, so a
pass over ``n`` independent items runs as up to two parts in threads. The split never changes a
result: each item is computed from its own inputs by the same code, whichever part holds it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import TypeVar

import numpy as np

_T = TypeVar("_T")

PARTS = max(1, min(2, os.cpu_count() or 1))
"""Parts a large pass is split into: the cores, at most two."""

_POOL: list[ThreadPoolExecutor] = []
# A forked child has none of its parent's threads: it makes its own pool on first use.
os.register_at_fork(after_in_child=_POOL.clear)


def _pool() -> ThreadPoolExecutor:
    if not _POOL:
        _POOL.append(ThreadPoolExecutor(max_workers=PARTS, thread_name_prefix="acres-radiometry"))
    return _POOL[0]


def split_bounds(n: int, min_per_part: int) -> np.ndarray:
    """(parts + 1,) int64 bounds of consecutive parts of ``n`` items: one part when ``n`` is below
    ``2 * min_per_part`` (a thread costs more than it saves on a small pass)."""
    parts = max(1, min(PARTS, n // max(1, min_per_part)))
    return np.linspace(0, n, parts + 1).astype(np.int64)


def map_parts(run: Callable[[int, int], _T], bounds: np.ndarray) -> list[_T]:
    """``run(lo, hi)`` of each part ``[bounds[i], bounds[i + 1])``; results in part order (an
    exception of a part is raised here, after every part has ended).

    With several parts the first runs in the calling thread and the others in the pool's: the
    caller works instead of waiting, and one thread fewer is woken (on an idle virtual machine a
    woken thread also starts on a cold core)."""
    if bounds.size <= 2:
        return [run(int(bounds[0]), int(bounds[-1]))]
    edges = [int(b) for b in bounds]
    others = [_pool().submit(run, lo, hi) for lo, hi in zip(edges[1:-1], edges[2:], strict=True)]
    try:
        first = run(edges[0], edges[1])
    finally:
        wait(others)
    return [first, *(future.result() for future in others)]


def in_background(run: Callable[..., _T], *args: object) -> Future[_T]:
    """``run(*args)`` in one of the pool's threads while the caller goes on (for compiled passes
    that release the GIL); on one core it runs here, before this returns."""
    if PARTS < 2:
        done: Future[_T] = Future()
        done.set_result(run(*args))
        return done
    return _pool().submit(run, *args)
