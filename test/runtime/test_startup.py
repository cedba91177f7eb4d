"""Start-up tuning shared by the node and the command line."""

from __future__ import annotations

import sys

from acres_lidar_ros.runtime.startup import GIL_SWITCH_INTERVAL_S, gil_switch_interval


def test_freeze_startup_objects_takes_them_out_of_full_collections():
    # Objects alive at the call are frozen (a full collection no longer walks them); objects
    # made afterwards are still collected.
    import gc

    from acres_lidar_ros.runtime.startup import freeze_startup_objects

    class Cycle:
        pass

    try:
        frozen = freeze_startup_objects()
        assert frozen > 1000
        # Frozen objects are still freed by reference counting (other threads of the test process
        # may drop some), so the count can only fall from what the call reported.
        assert 0 < gc.get_freeze_count() <= frozen
        a = Cycle()
        a.self = a
        del a
        assert gc.collect() >= 1  # the later cycle is found and freed
    finally:
        gc.unfreeze()


def test_gil_switch_interval_is_set_for_the_block_and_restored():
    before = sys.getswitchinterval()
    with gil_switch_interval():
        assert sys.getswitchinterval() == GIL_SWITCH_INTERVAL_S
    assert sys.getswitchinterval() == before
