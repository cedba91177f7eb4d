"""Point layouts: byte layout of each dtype, and organised/all-returns clouds of a scan.

Expected values come from the scan's input arrays by plain per-beam Python (a second
implementation), not from ``layouts`` itself.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_outputs_synthetic import STAMP_NS, make_scan

from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.outputs import layouts, point_types
from acres_lidar_ros.radiometry.returns import FLAG_STRONGEST

PLY_SPEC = [  # spec "Point File": name, numpy type, bytes
    ("x", "f4"), ("y", "f4"), ("z", "f4"), ("reflectivity", "f4"), ("signal", "u2"),
    ("intensity", "u1"), ("ring", "u1"), ("column", "u2"), ("class", "u1"), ("material", "u1"),
    ("return_index", "u1"), ("num_returns", "u1"), ("return_flags", "u1"), ("time_offset_s", "f4"),
]  # fmt: skip


def _offsets(dtype):
    return {name: dtype.fields[name][1] for name in dtype.names}


def test_xyzi_is_rslidar_point_xyzi():
    assert point_types.XYZI.itemsize == 16
    assert _offsets(point_types.XYZI) == {"x": 0, "y": 4, "z": 8, "intensity": 12}
    assert all(point_types.XYZI[n] == np.dtype("<f4") for n in point_types.XYZI.names)


def test_xyzirt_is_rslidar_point_xyzirt():
    assert point_types.XYZIRT.itemsize == 26
    assert _offsets(point_types.XYZIRT) == {"x": 0, "y": 4, "z": 8, "intensity": 12, "ring": 16, "timestamp": 18}
    assert point_types.XYZIRT["ring"] == np.dtype("<u2")
    assert point_types.XYZIRT["timestamp"] == np.dtype("<f8")


def test_ply_point_follows_the_spec_table():
    dtype = point_types.PLY_POINT
    assert dtype.itemsize == 31
    assert [(n, dtype[n].newbyteorder("<")) for n in dtype.names] == [(n, np.dtype("<" + t)) for n, t in PLY_SPEC]
    expected_offsets = np.cumsum([0] + [np.dtype(t).itemsize for _, t in PLY_SPEC])[:-1]
    assert list(_offsets(dtype).values()) == list(expected_offsets)
    assert all(dtype[n] == dtype[n].newbyteorder("<") for n in dtype.names)  # little-endian


def _primary_slot(flags_row, valid_row):
    """Reference rule, spec "Organised Cloud": the strongest, else the first."""
    for slot in range(len(valid_row)):
        if valid_row[slot] and flags_row[slot] & FLAG_STRONGEST:
            return slot
    return 0


@pytest.mark.parametrize("point_type", ["XYZI", "XYZIRT"])
def test_organised_cloud_cells(point_type):
    scan = make_scan(seed=1)
    cloud = layouts.organised_cloud(scan, point_type)
    assert cloud.shape == (scan.columns, scan.rings)
    assert cloud.dtype == point_types.POINT_TYPES[point_type]
    flags, valid = scan.returns.return_flags, scan.returns.valid
    for c in range(scan.columns):
        for r in range(scan.rings):
            beam = c * scan.rings + r
            cell = cloud[c, r]
            if not valid[beam].any():
                assert np.isnan(cell["x"]) and np.isnan(cell["y"]) and np.isnan(cell["z"])
                assert cell["intensity"] == 0.0
            else:
                slot = _primary_slot(flags[beam], valid[beam])
                np.testing.assert_allclose(
                    [cell["x"], cell["y"], cell["z"]], scan.points_sensor[beam, slot], rtol=1e-6, atol=1e-5
                )
                assert cell["intensity"] == float(scan.returns.intensity[beam, slot])
            if point_type == "XYZIRT":
                assert cell["ring"] == scan.ring_rank[r]
                expected_s = STAMP_NS / 1e9 + scan.time_offset_s[c]
                assert cell["timestamp"] == pytest.approx(expected_s, abs=1e-6)


def test_primary_return_is_first_without_strongest_flag_and_strongest_otherwise():
    scan = make_scan(seed=1)
    cloud = layouts.organised_cloud(scan, "XYZI").reshape(-1)
    # beam 2: two returns, no strongest flag -> the first; beam 3: three returns with strongest.
    np.testing.assert_allclose(cloud[2]["x"], scan.points_sensor[2, 0, 0], rtol=1e-6)
    strongest_slot = int(np.argmax((scan.returns.return_flags[3] & FLAG_STRONGEST) != 0))
    np.testing.assert_allclose(cloud[3]["x"], scan.points_sensor[3, strongest_slot, 0], rtol=1e-6)


def test_timestamp_keeps_microseconds_at_epoch_scale():
    scan = make_scan(seed=2)
    cloud = layouts.organised_cloud(scan, "XYZIRT")
    # float64 at 1.7e9 s resolves ~0.2 us; the column times must keep their 1/columns spacing.
    seconds = STAMP_NS // 1_000_000_000
    fractional_s = cloud["timestamp"][:, 0] - seconds
    expected_s = (STAMP_NS % 1_000_000_000) / 1e9 + scan.time_offset_s
    np.testing.assert_allclose(fractional_s, expected_s, atol=1e-6)


def test_unknown_point_type_names_the_allowed_ones():
    with pytest.raises(ConfigError, match="XYZRGB.*XYZI, XYZIRT, XYZIRT_labels, velodyne, ouster, nebula"):
        layouts.point_cloud(make_scan(), "XYZRGB")
    with pytest.raises(
        ConfigError, match="'velodyne' is not an rslidar_sdk point type; allowed: XYZI, XYZIRT, XYZIRT_labels"
    ):
        layouts.organised_cloud(make_scan(), "velodyne")


def test_all_returns_lists_every_return_in_beam_then_range_order():
    scan = make_scan(seed=4)
    points = layouts.all_returns(scan)
    rv = scan.returns
    expected = []
    for beam in range(scan.columns * scan.rings):
        slots = [s for s in range(rv.valid.shape[1]) if rv.valid[beam, s]]
        for k, s in enumerate(slots):
            c, r = divmod(beam, scan.rings)
            expected.append(
                (*scan.points_sensor[beam, s], rv.reflectivity[beam, s], rv.signal[beam, s],
                 rv.intensity[beam, s], r, c, rv.class_id[beam, s], rv.material_id[beam, s],
                 k + 1, len(slots), rv.return_flags[beam, s], scan.time_offset_s[c])
            )  # fmt: skip
    expected = np.array(expected, dtype=np.float64)
    assert points.dtype == point_types.PLY_POINT
    assert len(points) == int(rv.valid.sum()) == len(expected)
    got = np.stack([points[name].astype(np.float64) for name in points.dtype.names], axis=1)
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
    assert np.all(np.diff(points["column"].astype(int) * scan.rings + points["ring"]) >= 0)


def test_layouts_do_not_mutate_the_scan():
    scan = make_scan(seed=5)
    before = scan.points_sensor.copy(), scan.returns.return_flags.copy()
    for point_type in point_types.PROFILES:
        layouts.point_cloud(scan, point_type)
    layouts.all_returns(scan)
    np.testing.assert_array_equal(scan.points_sensor, before[0])
    np.testing.assert_array_equal(scan.returns.return_flags, before[1])
