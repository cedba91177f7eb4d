"""What the node loop tells its caller to log, and the throttle of repeated lines.

``Event`` is one log line with a stable ``kind`` (the key the node throttles by and the tests
assert); ``LogThrottle`` lets one line per kind through per period. ``Clock`` is the injected
time source every class of ``runtime`` takes: a callable returning ns.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

NS_PER_S = 1_000_000_000

Clock = Callable[[], int]


@dataclass(frozen=True)
class Event:
    """Something the node logs: ``level`` is ``debug``, ``info``, ``warn`` or ``error``.

    ``kind`` is a stable key (``dropped_busy``, ``late``, ``extrapolate``, ``no_pose``,
    ``clock_jump_back``, ...) that the node uses to throttle repeated lines and the tests assert.
    """

    level: str
    kind: str
    message: str
    scan_index: int | None = None


class LogThrottle:
    """One log line per event kind per ``period_s`` (the node's throttle for repeated warnings).

    ``clock`` returns ns (default: the monotonic wall clock, so a paused sim clock still logs).
    """

    def __init__(self, period_s: float = 5.0, clock: Clock = time.monotonic_ns) -> None:
        self.period_ns = int(round(period_s * NS_PER_S))
        self.clock = clock
        self._last: dict[str, int] = {}
        self.suppressed: dict[str, int] = {}

    def allow(self, kind: str) -> bool:
        now = int(self.clock())
        last = self._last.get(kind)
        if last is not None and now - last < self.period_ns:
            self.suppressed[kind] = self.suppressed.get(kind, 0) + 1
            return False
        self._last[kind] = now
        return True
