"""Stop requests of the command line: SIGINT, SIGTERM and SIGHUP set a flag, nothing is raised.

A Python signal handler that raises (the default ``KeyboardInterrupt``) lands wherever the main
thread happens to be: inside a numba-compiled call it turns into ``SystemError: CPUDispatcher(...)
returned a result with an exception set``, inside an import into an ``ImportError``. So the
command line installs ``StopSignals`` first thing: the handlers only note the signal (and say on
stderr that the run is stopping), and the recording loop looks at ``StopSignals.requested``
between scans, finishes the scan in work and closes its files. The process then exits with
``128 + signal``, as a shell reports a process killed by that signal.

A second signal while stopping means "now": the process exits at once with ``128 + signal``
(``os._exit``; the bag is then as after a kill, see ``acres-lidar bag-repair``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from types import FrameType, TracebackType
from typing import Any

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def exit_code(signum: int) -> int:
    """The exit status a shell gives a process ended by ``signum``: ``128 + signum``."""
    return 128 + int(signum)


class StopSignals:
    """Context manager: while inside, SIGINT, SIGTERM and SIGHUP request a stop instead of raising.

    Parameters
    ----------
    prog : str
        Name for the messages on stderr (``acres-lidar record``).

    restore : bool
        Put the previous handlers back on exit (for a caller that goes on running). The program
        itself passes False: a signal while the interpreter shuts down (joining threads, freeing
        the scene) still only sets the flag, instead of Python's KeyboardInterrupt.

    ``requested`` is the first signal's number, or ``None``. Outside the main thread (where Python
    cannot install handlers) the manager installs nothing and ``requested`` stays ``None``.
    """

    def __init__(self, prog: str = "acres-lidar", restore: bool = True) -> None:
        self.prog = prog
        self.restore = restore
        self.requested: int | None = None
        self._previous: dict[int, Any] = {}

    @property
    def name(self) -> str:
        """Name of the requested signal (``SIGTERM``), or ``""``."""
        return signal.Signals(self.requested).name if self.requested is not None else ""

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self.requested is None:
            self.requested = signum
            # os.write, not print: the handler may run while the main thread is inside a print.
            _say(f"{self.prog}: {name} received; finishing the scan in work and closing the files\n")
            return
        _say(f"{self.prog}: second signal ({name}); exiting now without closing the bag\n")
        os._exit(exit_code(signum))

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
            # A process started with these signals blocked (a supervisor, or a test, holding them
            # until the program can take them) gets any that are pending now, through the handlers.
            signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        previous, self._previous = self._previous, {}
        if not self.restore:
            return
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _say(text: str) -> None:
    with contextlib.suppress(OSError):  # stderr closed: the exit status still tells
        os.write(2, text.encode())
