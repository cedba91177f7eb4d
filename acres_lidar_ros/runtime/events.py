"""What the node loop tells its caller to log, and the throttle of repeated lines.

``Event`` is one log line with a stable ``kind`` (the key the node throttles by and the tests
assert); ``LogThrottle`` lets one line per kind through per period and says how many it held back:
the next line of that kind carries the count since the previous one, and a kind that stops
still gets a closing line with its count once its period is over (``LogThrottle.filter``).
``Clock`` is the injected time source every class of ``runtime`` takes: a callable returning ns.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from acres_lidar_ros.units import NS_PER_S

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
    """One log line per event kind per ``period_s`` (the node's throttle for repeated warnings),
    and nothing lost: ``filter`` adds to each line the number of lines of its kind held back since
    the previous one, and gives a summary line for a kind whose held-back lines are older than the
    period (so the last few of a burst are reported even if no line of that kind follows).

    ``clock`` returns ns (default: the monotonic wall clock, so a paused sim clock still logs).
    """

    def __init__(self, period_s: float = 5.0, clock: Clock = time.monotonic_ns) -> None:
        self.period_ns = int(round(period_s * NS_PER_S))
        self.clock = clock
        self._last: dict[str, int] = {}
        self.suppressed: dict[str, int] = {}
        """Lines held back per kind since the last line of that kind."""
        self._held: dict[str, Event] = {}  # the newest held-back event per kind

    def allow(self, kind: str) -> bool:
        """Whether a line of ``kind`` may go out now (counted in ``suppressed`` if not)."""
        now = int(self.clock())
        last = self._last.get(kind)
        if last is not None and now - last < self.period_ns:
            self.suppressed[kind] = self.suppressed.get(kind, 0) + 1
            return False
        self._last[kind] = now
        return True

    def filter(self, events: list[Event] | tuple[Event, ...]) -> list[Event]:
        """The lines to log of ``events``: every debug line; of the others one per kind per
        period, each with the count of its kind held back since the previous line; then the
        summary lines ``due`` now."""
        out: list[Event] = []
        for event in events:
            if event.level == "debug":
                out.append(event)
                continue
            last = self._last.get(event.kind)
            held = self.suppressed.get(event.kind, 0)
            if not self.allow(event.kind):
                self._held[event.kind] = event
                continue
            self.suppressed.pop(event.kind, None)
            self._held.pop(event.kind, None)
            if held and last is not None:
                ago_s = (self._last[event.kind] - last) / NS_PER_S
                event = replace(
                    event, message=f"{event.message} [{held} more {event.kind!r} in the {ago_s:.1f} s since the last]"
                )
            out.append(event)
        return out + self.due()

    def due(self, force: bool = False) -> list[Event]:
        """Summary lines of the kinds whose held-back lines wait longer than the period (all of
        them with ``force``, at shutdown): ``N more 'kind' in the last X s; the last: ...``."""
        now = int(self.clock())
        out: list[Event] = []
        for kind, event in list(self._held.items()):
            last = self._last[kind]
            if not force and now - last < self.period_ns:
                continue
            count = self.suppressed.pop(kind, 0)
            del self._held[kind]
            self._last[kind] = now
            out.append(
                replace(
                    event,
                    message=f"{count} more {kind!r} in the last {(now - last) / NS_PER_S:.1f} s; the last: {event.message}",
                )
            )
        return out
