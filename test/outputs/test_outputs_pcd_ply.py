"""PCD and PLY files: read back with our readers, open3d's and plyfile, checked against the scan's arrays."""

from __future__ import annotations

import numpy as np
import open3d as o3d
import plyfile
import pytest
from test_outputs_synthetic import make_scan

from acres_lidar_ros.errors import OutputError
from acres_lidar_ros.outputs.pcd import read_pcd, write_pcd
from acres_lidar_ros.outputs.ply import read_ply, write_ply
from acres_lidar_ros.radiometry.returns import FLAG_STRONGEST

o3d.utility.set_verbosity_level(o3d.utility.VerbosityLevel.Error)


def _expected_cells(scan):
    """(columns * rings, 4) float64 x, y, z, intensity of each cell, from the scan's arrays."""
    rv = scan.returns
    n = scan.columns * scan.rings
    strongest = rv.valid & ((rv.return_flags & FLAG_STRONGEST) != 0)
    slot = np.where(strongest.any(axis=1), strongest.argmax(axis=1), 0)
    has = rv.valid.any(axis=1)
    xyz = np.where(has[:, None], scan.points_sensor[np.arange(n), slot], np.nan)
    intensity = np.where(has, rv.intensity[np.arange(n), slot], 0)
    return np.column_stack([xyz, intensity]), has


def _expected_returns(scan):
    """Rows of every return in beam then range order: cell index and slot."""
    beam, slot = np.nonzero(scan.returns.valid)
    return beam, slot


def test_pcd_header_is_pcd_0_7_organised(tmp_path):
    scan = make_scan(seed=8, columns=10, rings=6)
    path = write_pcd(tmp_path / "scan.pcd", scan)
    blob = path.read_bytes()
    header = blob[: blob.index(b"DATA binary\n") + len(b"DATA binary\n")].decode().splitlines()
    assert header[1:] == [
        "VERSION 0.7", "FIELDS x y z intensity", "SIZE 4 4 4 4", "TYPE F F F F", "COUNT 1 1 1 1",
        "WIDTH 6", "HEIGHT 10", "VIEWPOINT 0 0 0 1 0 0 0", "POINTS 60", "DATA binary",
    ]  # fmt: skip
    assert len(blob) == len("\n".join(header)) + 1 + 60 * 16


def test_pcd_round_trip_with_own_reader(tmp_path):
    scan = make_scan(seed=9)
    cloud = read_pcd(write_pcd(tmp_path / "scan.pcd", scan))
    expected, has = _expected_cells(scan)
    assert cloud.shape == (scan.columns, scan.rings)
    got = np.stack([cloud[n].reshape(-1).astype(np.float64) for n in ("x", "y", "z", "intensity")], axis=1)
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-5)  # NaN where no return
    assert np.all(np.isnan(got[~has, :3])) and np.all(got[~has, 3] == 0)


def test_pcd_round_trip_with_open3d(tmp_path):
    scan = make_scan(seed=10)
    path = write_pcd(tmp_path / "scan.pcd", scan)
    expected, has = _expected_cells(scan)
    cloud = o3d.t.io.read_point_cloud(str(path))
    positions = cloud.point.positions.numpy().astype(np.float64)
    intensity = cloud.point["intensity"].numpy()[:, 0].astype(np.float64)
    # open3d may drop the NaN cells; compare the finite points, in cell order.
    finite = np.isfinite(positions).all(axis=1)
    if len(positions) == len(expected):
        np.testing.assert_array_equal(finite, has)
    np.testing.assert_allclose(positions[finite], expected[has, :3], rtol=1e-6, atol=1e-5)
    np.testing.assert_allclose(intensity[finite], expected[has, 3])


def test_pcd_reader_names_the_file_on_bad_input(tmp_path):
    bad = tmp_path / "bad.pcd"
    bad.write_bytes(b"VERSION 0.7\nFIELDS x\nSIZE 4\nTYPE F\nCOUNT 1\nWIDTH 2\nHEIGHT 1\nDATA ascii\n1\n2\n")
    with pytest.raises(OutputError, match=r"bad\.pcd.*ascii"):
        read_pcd(bad)
    short = tmp_path / "short.pcd"
    short.write_bytes(b"FIELDS x\nSIZE 4\nTYPE F\nWIDTH 2\nHEIGHT 1\nDATA binary\n\x00\x00\x00\x00")
    with pytest.raises(OutputError, match=r"short\.pcd"):
        read_pcd(short)


def test_pcd_refuses_to_overwrite(tmp_path):
    scan = make_scan()
    write_pcd(tmp_path / "scan.pcd", scan)
    with pytest.raises(OutputError, match="scan.pcd"):
        write_pcd(tmp_path / "scan.pcd", scan)


PLY_TYPES = {  # spec table
    "x": "float", "y": "float", "z": "float", "reflectivity": "float", "signal": "ushort",
    "intensity": "uchar", "ring": "uchar", "column": "ushort", "class": "uchar", "material": "uchar",
    "return_index": "uchar", "num_returns": "uchar", "return_flags": "uchar", "time_offset_s": "float",
}  # fmt: skip


def test_ply_header_has_the_spec_properties_in_order(tmp_path):
    scan = make_scan(seed=11)
    blob = write_ply(tmp_path / "scan.ply", scan).read_bytes()
    header = blob[: blob.index(b"end_header\n")].decode().splitlines()
    assert header[:2] == ["ply", "format binary_little_endian 1.0"]
    n = int(scan.returns.valid.sum())
    assert f"element vertex {n}" in header
    assert [line for line in header if line.startswith("property")] == [
        f"property {t} {k}" for k, t in PLY_TYPES.items()
    ]
    assert len(blob) - (blob.index(b"end_header\n") + len(b"end_header\n")) == 31 * n


def _check_vertices(scan, get):
    """``get(name)`` -> (n,) values of a vertex property from some reader."""
    rv = scan.returns
    beam, slot = _expected_returns(scan)
    column, ring = np.divmod(beam, scan.rings)
    num = rv.valid.sum(axis=1)[beam]
    expected = {
        "x": scan.points_sensor[beam, slot, 0], "y": scan.points_sensor[beam, slot, 1],
        "z": scan.points_sensor[beam, slot, 2], "reflectivity": rv.reflectivity[beam, slot],
        "signal": rv.signal[beam, slot], "intensity": rv.intensity[beam, slot], "ring": ring,
        "column": column, "class": rv.class_id[beam, slot], "material": rv.material_id[beam, slot],
        "return_index": slot + 1, "num_returns": num, "return_flags": rv.return_flags[beam, slot],
        "time_offset_s": scan.time_offset_s[column],
    }  # fmt: skip
    for name, values in expected.items():
        np.testing.assert_allclose(np.asarray(get(name), np.float64), values, rtol=1e-6, atol=1e-6, err_msg=name)


def test_ply_round_trip_with_plyfile(tmp_path):
    scan = make_scan(seed=12)
    path = write_ply(tmp_path / "scan.ply", scan)
    vertex = plyfile.PlyData.read(str(path))["vertex"]
    _check_vertices(scan, lambda name: vertex[name])
    assert vertex.data.dtype.itemsize == 31


def test_ply_round_trip_with_own_reader(tmp_path):
    scan = make_scan(seed=13)
    points = read_ply(write_ply(tmp_path / "scan.ply", scan))
    _check_vertices(scan, lambda name: points[name])


def test_ply_xyz_with_open3d(tmp_path):
    scan = make_scan(seed=14)
    path = write_ply(tmp_path / "scan.ply", scan)
    beam, slot = _expected_returns(scan)
    cloud = o3d.io.read_point_cloud(str(path))
    np.testing.assert_allclose(np.asarray(cloud.points), scan.points_sensor[beam, slot], rtol=1e-6, atol=1e-5)


def test_ply_of_a_scan_without_returns(tmp_path):
    scan = make_scan(seed=15)
    empty = type(scan)(**{**scan.__dict__, "returns": type(scan.returns)(
        **{**scan.returns.__dict__, "valid": np.zeros_like(scan.returns.valid)})})  # fmt: skip
    path = write_ply(tmp_path / "empty.ply", empty)
    assert len(plyfile.PlyData.read(str(path))["vertex"].data) == 0
    assert len(read_ply(path)) == 0


def test_ply_reader_rejects_ascii(tmp_path):
    bad = tmp_path / "ascii.ply"
    bad.write_bytes(b"ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\nend_header\n1.0\n")
    with pytest.raises(OutputError, match=r"ascii\.ply.*binary_little_endian"):
        read_ply(bad)
