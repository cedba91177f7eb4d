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

DEFAULT_PARTS = max(1, min(2, os.cpu_count() or 1))
"""Parts a large pass is split into unless told otherwise: the cores, at most two."""
PARTS = DEFAULT_PARTS
"""Parts a large pass is split into now (``set_parts``)."""
MAX_PARTS = 64

_POOL: list[ThreadPoolExecutor] = []
_POOL_SIZE = [0]  # the pool's threads
# A forked child has none of its parent's threads: it makes its own pool on first use.
os.register_at_fork(after_in_child=_POOL.clear)


def _pool() -> ThreadPoolExecutor:
    if not _POOL:
        _POOL.append(ThreadPoolExecutor(max_workers=PARTS, thread_name_prefix="acres-radiometry"))
        _POOL_SIZE[0] = PARTS
    return _POOL[0]


def set_parts(parts: int) -> int:
    """Split the large passes into ``parts`` (1 to ``MAX_PARTS``) from now on; returns the parts
    before. A process that shares the cores with others (a dataset worker beside its siblings)
    takes its share: with one part every pass runs in the calling thread. No result changes.
    (Callers check their users' input: ``cores`` may not import ``errors``, of its rank, and raises
    ValueError.)"""
    global PARTS
    if isinstance(parts, bool) or not isinstance(parts, int) or not 1 <= parts <= MAX_PARTS:
        raise ValueError(f"parts = {parts!r}: expected an integer from 1 to {MAX_PARTS}")
    before, PARTS = PARTS, parts
    if _POOL and _POOL_SIZE[0] < parts:  # a larger pool on next use
        _POOL.pop().shutdown(wait=True)
    return before


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
