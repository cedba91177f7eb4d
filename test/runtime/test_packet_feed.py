"""The node's packet feed: scans reach the sink in order in its own thread, a full feed drops and
counts a scan instead of blocking the node, and a sink's error stops the feed and is kept."""

from __future__ import annotations

import threading

from acres_lidar_ros.runtime.packet_feed import PacketFeed


class Sink:
    def __init__(self, gate=None, fail_on=None):
        self.scans, self.closed, self.gate, self.fail_on = [], False, gate, fail_on

    def write_scan(self, scan, bag=None):
        if self.gate is not None:
            assert self.gate.wait(timeout=10)
        if scan == self.fail_on:
            raise OSError("send failed")
        self.scans.append(scan)
        return 10

    def __exit__(self, *exc):
        self.closed = True


def test_scans_reach_the_sink_in_order_and_close_waits_for_them():
    sink = Sink()
    feed = PacketFeed(sink, depth=8)
    assert all(feed.put(k) for k in range(5))
    feed.close()
    assert sink.scans == [0, 1, 2, 3, 4] and feed.packets == 50 and sink.closed and feed.dropped == 0


def test_a_full_feed_drops_and_counts_instead_of_blocking():
    gate = threading.Event()
    sink = Sink(gate)
    feed = PacketFeed(sink, depth=1)
    accepted = [feed.put(k) for k in range(4)]  # the worker holds one, the queue one more
    gate.set()
    feed.close()
    assert accepted.count(False) == feed.dropped >= 2
    assert sink.scans == [k for k, ok in zip(range(4), accepted) if ok]


def test_an_error_of_the_sink_stops_the_feed_and_is_kept():
    sink = Sink(fail_on=1)
    feed = PacketFeed(sink, depth=4)
    feed.put(0)
    feed.put(1)
    feed.close()
    assert isinstance(feed.error, OSError) and sink.scans == [0]
    assert feed.put(2) is False
