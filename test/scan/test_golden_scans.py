"""The core against the golden scans of ``test/golden/``.

The goldens were taken before the radiometry was rewritten (MANIFEST.json records the code they came from); the command that
regenerates them is in ``scripts/make_goldens.py``, which also writes ``MANIFEST.json``: the sha256 of
every file, compared here with the files (a golden changed without its manifest fails). The check,
per case:

* return counts, flags, classes, materials and objects (the discrete fields of a cell) are
  identical on at least 99.99 % of the beams, and every beam that differs is explained: one of
  its echoes has a measured signal within 1e-9 (relative) of the detection threshold;
* ranges within 1e-6 m, reflectivity within 1e-6 relative, signal and intensity within one count
  (they are rounded from floats), on the beams whose discrete fields agree;
* the same seed gives bit-identical scans run to run, whole or traced in column blocks.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from acres_lidar_ros.scene import build_default_farm, default_tour
from acres_lidar_ros.sensor.poses import PoseHistory
from acres_lidar_ros.tracing.trace import Tracer

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "test" / "golden"
_spec = importlib.util.spec_from_file_location("make_goldens", REPO / "scripts" / "make_goldens.py")
assert _spec is not None and _spec.loader is not None
goldens = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(goldens)

DISCRETE = ("valid", "return_flags", "class_id", "material_id", "object_id")
CASE_NAMES = [case[0] for case in goldens.CASES]


@pytest.fixture(scope="module")
def farm():
    scene = build_default_farm(seed=0, layout="v1")  # the goldens are scans of the first farm
    return scene, Tracer(scene)


def _scanner(case, farm):
    scene, tracer = farm
    scanner, tour, stamps_ns = goldens.case_scanner(case, scene)
    scanner.tracer = tracer  # one acceleration structure for every case
    return scanner, tour, stamps_ns


def near_threshold_beams(scanner, scan, echoes) -> np.ndarray:
    """Cells of ``scan`` with an echo whose measured signal is within 1e-9 (relative) of the
    detection threshold: the only beams allowed to differ from a golden."""
    assert echoes is not None and echoes.index == scan.index
    threshold = scanner.model.detection_threshold_counts
    near = np.abs(echoes.measured_counts - threshold) <= 1e-9 * abs(threshold)
    return np.unique(echoes.cell[near])


def compare(scanner, scan, golden: dict, echoes) -> tuple[int, int]:
    """Assert the golden check on one scan; return (beams, beams that differ)."""
    returns = scan.returns
    n_beams = returns.valid.shape[0]
    same = np.ones(n_beams, bool)
    for name in DISCRETE:
        now = goldens.object_id_of(returns) if name == "object_id" else np.asarray(getattr(returns, name))
        then = golden[name]
        assert now.shape == then.shape, name
        same &= (now == then).all(axis=1)
    differ = np.flatnonzero(~same)
    if differ.size:
        unexplained = np.setdiff1d(differ, near_threshold_beams(scanner, scan, echoes))
        assert unexplained.size == 0, f"beams {unexplained[:10].tolist()} differ from the golden, not at the threshold"
    assert differ.size <= 1e-4 * n_beams
    # Continuous fields on the beams that agree (their valid slots line up one to one).
    valid = returns.valid
    keep = np.repeat(same[:, None], valid.shape[1], axis=1)[valid]
    golden_keep = np.repeat(same[:, None], valid.shape[1], axis=1)[golden["valid"]]
    now_range = np.asarray(returns.range_m)[valid][keep]
    then_range = golden["range_m"][golden_keep]
    np.testing.assert_allclose(now_range, then_range, rtol=0.0, atol=1e-6)
    now_rho = np.asarray(returns.reflectivity)[valid][keep]
    np.testing.assert_allclose(now_rho, golden["reflectivity"][golden_keep].astype(np.float64), rtol=1e-6, atol=1e-12)
    for name in ("signal", "intensity"):
        now, then = np.asarray(getattr(returns, name)).astype(np.int64), golden[name].astype(np.int64)
        assert np.abs(now - then)[same].max(initial=0) <= 1, name
    return n_beams, int(differ.size)


def test_the_goldens_are_those_the_script_wrote():
    manifest = json.loads((GOLDEN / "MANIFEST.json").read_text())
    assert manifest["commit"].startswith("d376a36")
    assert sorted(manifest["sha256"]) == sorted(CASE_NAMES)
    problems = goldens.manifest_mismatches(GOLDEN, CASE_NAMES)
    assert problems == [], (
        "the golden files no longer match test/golden/MANIFEST.json; regenerate both with the command in "
        "scripts/make_goldens.py (python scripts/make_goldens.py --out test/golden), never edit either by hand:\n"
        + "\n".join(problems)
    )
    for name in CASE_NAMES:  # the digest the test compares is that of the file's bytes
        assert manifest["sha256"][name] == hashlib.sha256((GOLDEN / f"{name}.npz").read_bytes()).hexdigest()
    scans = sum(len(goldens.load_golden(GOLDEN / f"{name}.npz")) for name in CASE_NAMES)
    assert scans >= 20


def test_a_golden_changed_without_its_manifest_is_reported(tmp_path):
    # The check on a copy: one byte of a file changed, a file gone, a case missing from the manifest.
    names = CASE_NAMES[:3]
    for name in names:
        shutil.copyfile(GOLDEN / f"{name}.npz", tmp_path / f"{name}.npz")
    written = goldens.write_manifest(tmp_path, names, "0" * 40)
    assert written == json.loads((tmp_path / "MANIFEST.json").read_text())
    assert goldens.manifest_mismatches(tmp_path, names) == []
    assert goldens.main(["--check", str(tmp_path)]) == 1  # the script's check knows all seven cases
    data = bytearray((tmp_path / f"{names[0]}.npz").read_bytes())
    data[len(data) // 2] ^= 0x01
    (tmp_path / f"{names[0]}.npz").write_bytes(bytes(data))
    (tmp_path / f"{names[1]}.npz").unlink()
    problems = goldens.manifest_mismatches(tmp_path, names + ["extra_case"])
    assert [p.split(":")[0] for p in problems] == ["extra_case", f"{names[0]}.npz", f"{names[1]}.npz"]
    assert "missing" in problems[2] and "sha256" in problems[1]


@pytest.mark.parametrize("case", goldens.CASES, ids=CASE_NAMES)
def test_scans_match_the_goldens(case, farm):
    scanner, tour, stamps_ns = _scanner(case, farm)
    golden_scans = goldens.load_golden(GOLDEN / f"{case[0]}.npz")
    assert len(golden_scans) == len(stamps_ns)
    for stamp_ns, golden in zip(stamps_ns, golden_scans):
        scan, echoes = scanner.scan_echoes(tour, stamp_ns)
        compare(scanner, scan, golden, echoes)


@pytest.mark.parametrize("name", ["polaris_rain_seed3", "default_foliage_seed0"])
def test_scans_traced_in_column_blocks_match_the_goldens_too(name, farm):
    """The node's path: a sweep traced block by block as poses arrive, finished after the stamp."""
    case = next(c for c in goldens.CASES if c[0] == name)
    scanner, tour, stamps_ns = _scanner(case, farm)
    times_s, positions, quaternions = default_tour(farm[0], layout="v1")
    for stamp_ns, golden in zip(stamps_ns, goldens.load_golden(GOLDEN / f"{name}.npz")):
        sweep = scanner.start_sweep(stamp_ns)
        for cut in np.quantile(sweep.firing_time_s, [0.2, 0.45, 0.7, 0.9]):
            covered = times_s <= cut
            sweep.trace_covered(PoseHistory.from_arrays(times_s[covered], positions[covered], quaternions[covered]))
        compare(scanner, sweep.finish(tour), golden, sweep.echoes)


def _fields(scan) -> dict[str, bytes]:
    returns = scan.returns
    names = ("range_m", "valid", "reflectivity", "signal", "intensity", "class_id", "material_id", "instance")
    return {name: np.ascontiguousarray(getattr(returns, name)).tobytes() for name in names + ("return_flags",)}


@pytest.mark.parametrize("name", ["polaris_rain_seed0", "default_first_last_seed5"])
def test_the_same_seed_gives_bit_identical_scans_run_to_run(name, farm):
    case = next(c for c in goldens.CASES if c[0] == name)
    runs = []
    for _ in range(2):
        scanner, tour, stamps_ns = _scanner(case, farm)
        runs.append([_fields(scanner.scan(tour, stamp_ns)) for stamp_ns in stamps_ns])
    assert runs[0] == runs[1]
