"""The node's scans to a packet sink (``packets`` parameter), in a thread of their own.

Live UDP sleeps until each packet's send time (docs/packets.md), so the sink runs beside the node's
loop: ``put`` hands a finished scan over without waiting; with ``depth`` scans already waiting the
scan is dropped and counted (the stream cannot run faster than the sensor). An error of the sink
stops the feed and is kept in ``error`` for the node to report.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from typing import Any


class PacketFeed:
    """Scans -> ``sink.write_scan(scan)`` in a worker thread, at most ``depth`` waiting."""

    def __init__(self, sink: Any, depth: int = 2) -> None:
        self.sink = sink
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self.packets = 0
        self.dropped = 0
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="lidar-packets", daemon=True)
        self._thread.start()

    def put(self, scan: Any) -> bool:
        """Hand ``scan`` over; False (counted in ``dropped``) when the feed is full or stopped."""
        if self.error is not None:
            return False
        try:
            self._queue.put_nowait(scan)
        except queue.Full:
            self.dropped += 1
            return False
        return True

    def _run(self) -> None:
        while True:
            scan = self._queue.get()
            if scan is None:
                return
            try:
                self.packets += self.sink.write_scan(scan)
            except BaseException as error:  # kept for the node; the feed stops
                self.error = error
                return

    def close(self, timeout_s: float = 5.0) -> None:
        """Stop after the scans handed over (waiting at most ``timeout_s``) and close the sink."""
        with contextlib.suppress(queue.Full):
            self._queue.put(None, timeout=timeout_s)
        self._thread.join(timeout=timeout_s)
        self.sink.__exit__(None, None, None)
