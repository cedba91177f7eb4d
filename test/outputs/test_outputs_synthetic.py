"""A synthetic ``Scan`` built from seeded random arrays, for the output tests.

The outputs tests must not depend on the tracer, so this module builds scans directly from
numpy: some beams without a return, some with 1 to 3 returns in range order with return flags,
and some multi-return beams without the strongest flag (their primary return is the first).
The tests here check that the fixture really has those cases, so the other tests cover them.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial.transform import Rotation

from acres_lidar_ros.radiometry.returns import FLAG_FIRST, FLAG_LAST, FLAG_SECOND_STRONGEST, FLAG_STRONGEST, Returns
from acres_lidar_ros.scan.scan_types import Scan
from acres_lidar_ros.scene.instances import NO_INSTANCE

STAMP_NS = 1_700_000_123_456_789_012
PERIOD_S = 0.1


def make_scan(
    seed: int = 0,
    columns: int = 12,
    rings: int = 5,
    slots: int = 3,
    stamp_ns: int = STAMP_NS,
    period_s: float = PERIOD_S,
) -> Scan:
    """A scan of ``columns * rings`` beams with up to ``slots`` (>= 3) returns each."""
    rng = np.random.default_rng(seed)
    n = columns * rings
    num = rng.choice(4, size=n, p=[0.25, 0.35, 0.25, 0.15])
    num[:4] = [0, 1, 2, 3]  # every case at least once
    slot = np.arange(slots)
    valid = slot[None, :] < num[:, None]

    range_m = np.sort(rng.uniform(0.3, 90.0, size=(n, slots)), axis=1)
    range_m = np.where(valid, range_m, np.nan)
    direction = rng.normal(size=(n, 3))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    points_sensor = range_m[:, :, None] * direction[:, None, :]

    signal = np.where(valid, rng.integers(1, 65536, size=(n, slots)), 0).astype(np.uint16)
    by_signal = np.argsort(np.where(valid, -signal.astype(np.int64), 1), axis=1, kind="stable")
    strongest, second = by_signal[:, 0], by_signal[:, 1]
    rows = np.arange(n)
    flags = np.zeros((n, slots), np.uint8)
    has = num > 0
    flags[rows[has], 0] |= FLAG_FIRST
    flags[rows[has], num[has] - 1] |= FLAG_LAST
    keep_strongest = has & (rng.random(n) < 0.75)
    keep_strongest[2:4] = [False, True]  # beam 2 (two returns) has no strongest flag
    flags[rows[keep_strongest], strongest[keep_strongest]] |= FLAG_STRONGEST
    three = num == 3
    flags[rows[three], second[three]] |= FLAG_SECOND_STRONGEST

    returns = Returns(
        range_m=range_m,
        valid=valid,
        reflectivity=np.where(valid, rng.uniform(0.0, 1.5, size=(n, slots)), 0.0),
        signal=signal,
        intensity=np.where(valid, rng.integers(0, 256, size=(n, slots)), 0).astype(np.uint8),
        class_id=np.where(valid, rng.integers(0, 14, size=(n, slots)), 0).astype(np.uint8),
        material_id=np.where(valid, rng.integers(0, 17, size=(n, slots)), 0).astype(np.uint8),
        # Instance labels spread over the uint32 range (the high bit too: vehicle boxes, body).
        instance=np.where(valid, rng.integers(0, 50, size=(n, slots)) * 85899345, NO_INSTANCE).astype(np.uint32),
        return_flags=flags,
    )
    # Clockwise sweep starting at column 3: dt_c in [-T, 0), not monotonic in c.
    time_offset_s = -period_s + period_s * ((np.arange(columns) - 3) % columns) / columns
    yaw_rad = 0.4 + 0.5 * time_offset_s
    T_world_sensor = np.tile(np.eye(4), (columns, 1, 1))
    T_world_sensor[:, :3, :3] = Rotation.from_euler("z", yaw_rad[:, None]).as_matrix()
    T_world_sensor[:, :3, 3] = np.stack(
        [10.0 + 2.0 * time_offset_s, -3.0 + 0.5 * time_offset_s, np.full(columns, 2.039)], axis=1
    )
    return Scan(
        index=7,
        stamp_ns=stamp_ns,
        columns=columns,
        rings=rings,
        returns=returns,
        points_sensor=points_sensor,
        time_offset_s=time_offset_s,
        ring_rank=rng.permutation(rings).astype(np.uint16),
        T_world_sensor=T_world_sensor,
        frame_id="lidar",
        weather={"rain_mm_per_h": 2.5, "visibility_m": 800.0},
    )


def test_fixture_has_every_beam_case():
    scan = make_scan()
    valid = scan.returns.valid
    num = valid.sum(axis=1)
    assert set(np.unique(num)) == {0, 1, 2, 3}
    strongest = (scan.returns.return_flags & FLAG_STRONGEST) != 0
    assert np.any((num >= 2) & ~strongest.any(axis=1)), "needs a multi-return beam without strongest"
    assert np.any((num >= 2) & ~strongest[:, 0] & strongest.any(axis=1)), "needs a strongest after the first"


def test_fixture_returns_packed_in_range_order_with_one_first_and_last():
    scan = make_scan(seed=3)
    valid = scan.returns.valid
    assert np.all(valid[:, :-1] >= valid[:, 1:]), "valid slots must be packed to the front"
    r = scan.returns.range_m
    both = valid[:, 1:] & valid[:, :-1]
    assert np.all(r[:, 1:][both] > r[:, :-1][both])
    flags = scan.returns.return_flags
    has = valid.any(axis=1)
    assert np.all(((flags & FLAG_FIRST) != 0).sum(axis=1) == has)
    assert np.all(((flags & FLAG_LAST) != 0).sum(axis=1) == has)
    assert np.all(flags[~valid] == 0)
    assert np.all(np.isnan(scan.points_sensor[~valid]))
    np.testing.assert_allclose(np.linalg.norm(scan.points_sensor[valid], axis=1), r[valid])
