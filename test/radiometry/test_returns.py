"""The nearest-hit (no radiometry) returns on hand-made hits."""

import numpy as np

from acres_lidar_ros.radiometry.returns import FLAG_FIRST, FLAG_LAST, FLAG_STRONGEST, nearest_hit_returns
from acres_lidar_ros.scene.instances import NO_INSTANCE
from acres_lidar_ros.tracing.hits import Hits


def make_hits(ranges, classes):
    ranges = np.array(ranges, float)
    hits = Hits.empty(*ranges.shape)
    valid = np.isfinite(ranges)
    hits.range_m[:] = ranges
    hits.valid[:] = valid
    hits.class_id[:] = np.where(valid, classes, 0)
    hits.material_id[:] = np.where(valid, np.array(classes) % 17, 0)
    hits.instance[:] = np.where(valid, 100 + np.arange(ranges.size).reshape(ranges.shape), NO_INSTANCE)
    return hits


def test_nearest_in_window_over_two_sub_rays():
    inf = np.inf
    # Beam 0: sub-ray 0 has 0.1 (below the window) then 5; sub-ray 1 has 4 -> 4 wins.
    # Beam 1: everything outside the window (0.1 and 70 with a 60 m range) -> no return.
    # Beam 2: sub-ray 0 empty; sub-ray 1 has 7 then 9 -> 7.
    ranges = [[0.1, 5.0, inf], [4.0, 6.0, inf], [0.1, 70.0, inf], [inf, inf, inf], [inf, inf, inf], [7.0, 9.0, inf]]
    classes = [[1, 2, 0], [3, 4, 0], [5, 6, 0], [0, 0, 0], [0, 0, 0], [7, 8, 0]]
    rho = np.linspace(0.05, 0.85, 17)
    r = nearest_hit_returns(make_hits(ranges, classes), np.array([0.5, 0.5]), 0.5, 60.0, rho)
    assert r.valid[:, 0].tolist() == [True, False, True]
    np.testing.assert_array_equal(r.range_m[[0, 2], 0], [4.0, 7.0])
    assert np.isnan(r.range_m[1, 0])
    assert r.class_id[:, 0].tolist() == [3, 0, 7]
    assert r.instance[:, 0].tolist() == [100 + 3, NO_INSTANCE, 100 + 15]
    assert r.intensity[:, 0].tolist() == [round(100 * rho[3]), 0, round(100 * rho[7])]
    assert r.return_flags[:, 0].tolist() == [
        FLAG_FIRST | FLAG_STRONGEST | FLAG_LAST,
        0,
        FLAG_FIRST | FLAG_STRONGEST | FLAG_LAST,
    ]
    assert r.num_returns.tolist() == [1, 0, 1]


def test_select_returns_takes_the_first_of_equal_maxima_and_merges_a_named_echo():
    from acres_lidar_ros.radiometry.returns import FLAG_SECOND_STRONGEST, select_returns

    # Three beams one after the other: S' = [3, 5, 5, 1 | 2 | 4, 1, 4, 6].
    measured = np.array([3.0, 5.0, 5.0, 1.0, 2.0, 4.0, 1.0, 4.0, 6.0])
    starts, lengths = np.array([0, 4, 5]), np.array([4, 1, 4])
    chosen, flags = select_returns("strongest", measured, starts, lengths)
    assert chosen.tolist() == [[1], [4], [8]]  # the first of the two 5s
    assert flags.tolist() == [[FLAG_STRONGEST]] * 3
    chosen, flags = select_returns("dual_strongest_last", measured, starts, lengths)
    # Beam 0: strongest 1, last 3. Beam 1: one echo, both functions. Beam 2: the strongest is the
    # last, so the second strongest joins: the first of the two 4s.
    assert chosen.tolist() == [[1, 3, -1], [4, -1, -1], [5, 8, -1]]
    assert flags.tolist() == [
        [FLAG_STRONGEST, FLAG_LAST, 0],
        [FLAG_STRONGEST | FLAG_LAST, 0, 0],
        [FLAG_SECOND_STRONGEST, FLAG_STRONGEST | FLAG_LAST, 0],
    ]
    chosen, flags = select_returns("triple_first_strongest_last", measured, starts, lengths)
    assert chosen.tolist() == [[0, 1, 3], [4, -1, -1], [5, 8, -1]]
    assert flags.tolist() == [
        [FLAG_FIRST, FLAG_STRONGEST, FLAG_LAST],
        [FLAG_FIRST | FLAG_STRONGEST | FLAG_LAST, 0, 0],
        [FLAG_FIRST, FLAG_STRONGEST | FLAG_LAST, 0],
    ]


def test_select_returns_refuses_an_unknown_mode():
    import pytest

    from acres_lidar_ros.errors import ConfigError
    from acres_lidar_ros.radiometry.returns import select_returns

    with pytest.raises(ConfigError, match="return_mode = 'loudest'.*strongest"):
        select_returns("loudest", np.ones(1), np.zeros(1, np.int64), np.ones(1, np.int64))
