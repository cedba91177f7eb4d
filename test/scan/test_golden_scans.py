"""The core against the golden scans of ``test/golden/``.

The goldens were taken before the radiometry was rewritten (MANIFEST.json records the code they came from); the command that
regenerates them is in ``scripts/make_goldens.py``, which also writes ``MANIFEST.json``: the sha256 of
every file, compared here with the files (a golden changed without its manifest fails). The check,
per case:

* return counts, flags, classes, materials and objects (the discrete fields of a cell) are
  identical on at least 99.99 % of the beams, and every beam that differs is explained: one of
  its echoes has a measured signal within 1e-9 (relative) of the detection threshold;
* on the beams whose discrete fields agree: ranges within 1e-6 m plus 4 float32 ulps of the
  distance (Embree's float32 hit distance differs by an ulp or two between CPUs' instruction
  sets), reflectivity within 1e-6 relative, signal and intensity within one count (they are
  rounded from floats); a beam outside these is explained: it has a ground hit within that
  tolerance of a line of the ground's place-hash grids, where the ulp moves it into the next
  cell (another albedo and micro-slope), and such beams are at most 0.01 %;
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

from acres_lidar_ros.radiometry.echoes import ALBEDO_CELL_M, GROUND_CLASS, MICRO_SLOPE_CELL_M
from acres_lidar_ros.scene.farm_v1 import build_default_farm
from acres_lidar_ros.scene.tour import default_tour
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


def range_tolerance_m(range_m: np.ndarray) -> np.ndarray:
    """1e-6 m plus 4 float32 ulps of each distance: Embree returns the hit distance in float32,
    and CPUs with other instruction sets (AVX-512 against AVX2) round it differently by an ulp or two."""
    return 1e-6 + 4.0 * np.spacing(np.abs(range_m).astype(np.float32)).astype(np.float64)


def record_blocks(sweep) -> list:
    """The column blocks ``sweep`` traces from now on (whole-scan finish included), kept as
    they are traced: finishing consumes them."""
    blocks: list = []
    trace_columns = sweep.trace_columns

    def traced(*args, **kwargs):
        before = {id(block) for block in sweep._blocks}
        trace_columns(*args, **kwargs)
        blocks.extend(block for block in sweep._blocks if id(block) not in before)

    sweep.trace_columns = traced
    return blocks


def hash_line_beams(tracer, blocks) -> np.ndarray:
    """Cells with a ground hit within ``range_tolerance_m`` of its range of a line of the
    ground's place-hash grids (micro-slope and albedo cells, hashed by the hit's x and y): an
    ulp of range there moves the hit into the next cell, with another micro-slope and albedo."""
    cells = []
    for block in blocks:
        hits = block.hits
        origins, directions = tracer.to_scene(block.origins, block.directions)
        range_m = np.where(hits.valid, hits.range_m, 0.0)
        xy = origins[:, None, :2] + range_m[..., None] * directions[:, None, :2]
        margin_m = range_tolerance_m(range_m)
        near = np.zeros(hits.valid.shape, bool)
        for cell_m in (MICRO_SLOPE_CELL_M, ALBEDO_CELL_M):
            q = xy / cell_m
            near |= (np.abs(q - np.round(q)) * cell_m <= margin_m[..., None]).any(axis=-1)
        near &= hits.valid & (hits.class_id == GROUND_CLASS)
        per_cell = near.reshape(len(block.cells), -1).any(axis=1)  # a cell's sub-rays are consecutive rows
        cells.append(block.cells[per_cell])
    return np.concatenate(cells) if cells else np.empty(0, np.int64)


def compare(scanner, scan, golden: dict, echoes, on_hash_lines: np.ndarray) -> tuple[int, int]:
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
    # Continuous fields on the beams that agree: their valid slots line up one to one.
    valid = np.asarray(returns.valid)
    slots = valid & same[:, None]
    golden_at = np.full(valid.shape, -1, np.int64)
    golden_at[golden["valid"]] = np.arange(int(golden["valid"].sum()))
    at = golden_at[slots]
    now_range, then_range = np.asarray(returns.range_m)[slots], golden["range_m"][at]
    off = np.abs(now_range - then_range) > range_tolerance_m(then_range)
    now_rho, then_rho = np.asarray(returns.reflectivity)[slots], golden["reflectivity"][at].astype(np.float64)
    off |= np.abs(now_rho - then_rho) > 1e-12 + 1e-6 * np.abs(then_rho)
    for name in ("signal", "intensity"):
        now, then = np.asarray(getattr(returns, name))[slots].astype(np.int64), golden[name][slots].astype(np.int64)
        off |= np.abs(now - then) > 1
    # Such an ulp moves a ground hit on a line of the place-hash grids into the next cell: another
    # albedo and micro-slope, so another signal and range noise. Those beams only may differ.
    beams_off = np.unique(np.nonzero(slots)[0][off])
    unexplained = np.setdiff1d(beams_off, on_hash_lines)
    assert unexplained.size == 0, (
        f"beams {unexplained[:10].tolist()} differ from the golden in range, reflectivity, signal or intensity "
        f"(largest range difference {np.abs(now_range - then_range).max(initial=0.0):.3g} m), "
        "not on a line of the ground's place-hash grids"
    )
    assert beams_off.size <= 1e-4 * n_beams
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
        sweep = scanner.start_sweep(stamp_ns)
        blocks = record_blocks(sweep)
        scan = sweep.finish(tour)  # as scanner.scan_echoes
        compare(scanner, scan, golden, sweep.echoes, hash_line_beams(farm[1], blocks))


@pytest.mark.parametrize("name", ["polaris_rain_seed3", "default_foliage_seed0"])
def test_scans_traced_in_column_blocks_match_the_goldens_too(name, farm):
    """The node's path: a sweep traced block by block as poses arrive, finished after the stamp."""
    case = next(c for c in goldens.CASES if c[0] == name)
    scanner, tour, stamps_ns = _scanner(case, farm)
    times_s, positions, quaternions = default_tour(farm[0], layout="v1")
    for stamp_ns, golden in zip(stamps_ns, goldens.load_golden(GOLDEN / f"{name}.npz")):
        sweep = scanner.start_sweep(stamp_ns)
        blocks = record_blocks(sweep)
        for cut in np.quantile(sweep.firing_time_s, [0.2, 0.45, 0.7, 0.9]):
            covered = times_s <= cut
            sweep.trace_covered(PoseHistory.from_arrays(times_s[covered], positions[covered], quaternions[covered]))
        compare(scanner, sweep.finish(tour), golden, sweep.echoes, hash_line_beams(farm[1], blocks))


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
