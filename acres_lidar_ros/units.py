"""Unit conversions shared by every layer (rank 0, beside ``errors``): integer nanoseconds.

Exact integers for stamps and due times (``stamp_ns``, ``period_ns``); a float time in seconds
is ``stamp_ns / NS_PER_S`` where it leaves the integer domain.
"""

NS_PER_S = 1_000_000_000
"""Nanoseconds per second."""

NS_PER_MS = 1_000_000
"""Nanoseconds per millisecond."""
