"""A progress line for a long command step: one line that rewrites itself on a terminal, plain lines in a
log (``acres-lidar calibrate``; docs/calibration.md, "Calibration").

On a terminal (``stream.isatty()``) each update rewrites the line (a carriage return, the text, the rest of the old
line cleared) at most every ``tty_interval_s``; otherwise a plain line is printed when a step starts,
when it ends (``done == total``) and at most every ``log_interval_s`` in between, so a log file holds a
few readable lines, not carriage returns. The clock is injected (``time.monotonic`` by default).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TextIO

TTY_INTERVAL_S = 0.2
LOG_INTERVAL_S = 10.0
BAR_WIDTH = 24


def progress_text(step: str, done: int, total: int) -> str:
    """``step: done / total [#####.....]  40 %``, or ``step: done`` when the total is unknown (0)."""
    if total <= 0:
        return f"{step}: {done}"
    share = min(max(done / total, 0.0), 1.0)
    filled = int(round(share * BAR_WIDTH))
    return f"{step}: {done} / {total} [{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {100 * share:3.0f} %"


class ProgressLine:
    """``update(step, done, total)`` as a command's steps go on; ``close()`` at the end."""

    def __init__(
        self,
        stream: TextIO,
        clock: Callable[[], float] = time.monotonic,
        tty_interval_s: float = TTY_INTERVAL_S,
        log_interval_s: float = LOG_INTERVAL_S,
    ) -> None:
        self.stream = stream
        self.clock = clock
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.interval_s = tty_interval_s if self.tty else log_interval_s
        self._step: str | None = None
        self._last_s = -float("inf")
        self._width = 0  # of the line on the terminal, to clear what a shorter one leaves

    def update(self, step: str, done: int, total: int = 0) -> None:
        now = self.clock()
        new_step = step != self._step
        finished = total > 0 and done >= total
        if not (new_step or finished or now - self._last_s >= self.interval_s):
            return
        text = progress_text(step, done, total)
        if self.tty:
            if new_step and self._step is not None:
                self.stream.write("\n")  # the previous step's last line stays
                self._width = 0
            self.stream.write("\r" + text + " " * max(self._width - len(text), 0))
            self._width = len(text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()
        self._step, self._last_s = step, now

    def close(self) -> None:
        """End the terminal's line (nothing to do in a log)."""
        if self.tty and self._step is not None:
            self.stream.write("\n")
            self.stream.flush()
        self._step = None
