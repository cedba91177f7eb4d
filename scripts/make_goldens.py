#!/usr/bin/env python3
"""Write the golden scans of ``test/golden/``: the results the radiometry must keep (docs/tests.md).

The goldens were taken from the code *before* radiometry was rewritten (commit ``d376a36``, the
flat layout ``acres_lidar_ros.scan``, ``acres_lidar_ros.config`` ...), so that the new core is
checked against what the old one gave, not against itself. To regenerate them exactly:

    git -C /work/main worktree add --detach /tmp/golden-old d376a36
    cp config/polaris_lidar_self.f32 /tmp/golden-old/config/   # today's body table: an input, not the code
    cd /tmp/golden-old && python3 -m venv .venv && .venv/bin/pip install -q -e .
    .venv/bin/python /path/to/this/checkout/scripts/make_goldens.py --out /path/to/this/checkout/test/golden

The script runs against either layout (it imports the flat one when the layered one is
missing), so it can also be run on a later commit to see what changed; the committed files
must come from ``d376a36``. ``test/scan/test_golden_scans.py`` reads the cases from the same
``CASES`` table (this file is importable).

``MANIFEST.json`` records the commit the files were made from and the sha256 of every file; the
script writes it after the files, and the golden test compares each file's digest with it, so a
golden changed without its manifest (or a manifest edited by hand) fails. To see whether the
files on disk match their manifest without regenerating anything:

    python scripts/make_goldens.py --check test/golden

Each case is one run of one ``Scanner`` (the noise streams carry over between its scans, so a
case is taken in order): a sensor, options, a seed and the tour times of its scan stamps. Per
scan the file holds, per beam and return slot, what the check compares: ``valid``, ``flags``,
``class_id``, ``material_id``, ``object_id``, ``signal``, ``intensity``, and for the valid
slots only ``range_m`` (float64, stored byte-planar: the eight bytes of every value one plane
after the other, which compresses a fifth better) and ``reflectivity`` (float32, the check's
tolerance on it is relative 1e-6). ``load_golden`` reads a file back into these arrays.

``object_id`` is d376a36's int32 label: the scene object's id, -1 where none and for rain and fog,
-2 for the body. Later code labels with ``Returns.instance`` (uint32, ``scene.instances``);
``object_id_of`` gives the old label of its returns, which is what the check compares.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

DEFAULT_SPEC_NUMBERS = str(
    Path(__file__).resolve().parents[1] / "test" / "golden" / "sensors_default_spec_numbers.json"
)
"""The default sensor with the spec's numbers instead of the default spectra of leaves and soils
(docs/materials.md): the same sensor as "default" at d376a36."""

# (name, sensor, overrides, options, seed, stamps as seconds after the tour's start)
CASES: tuple[tuple[str, str, dict, dict, int, tuple[float, ...]], ...] = (
    ("polaris_farm_seed0", "polaris", {}, {}, 0, (0.1, 0.2, 14.3)),
    ("polaris_farm_seed7", "polaris", {}, {}, 7, (21.7, 33.0, 47.5)),
    ("polaris_rain_seed0", "polaris", {}, {"rain_mm_per_h": 10.0, "visibility_m": 2000.0}, 0, (0.1, 9.0, 27.4)),
    ("polaris_rain_seed3", "polaris", {}, {"rain_mm_per_h": 10.0, "visibility_m": 2000.0}, 3, (40.2, 61.9, 62.0)),
    ("default_foliage_seed0", DEFAULT_SPEC_NUMBERS, {}, {}, 0, (0.1, 3.3, 12.0, 25.5)),
    ("default_foliage_seed11", DEFAULT_SPEC_NUMBERS, {}, {}, 11, (18.0, 36.6, 44.4)),
    ("default_first_last_seed5", DEFAULT_SPEC_NUMBERS, {"return_mode": "dual_first_last"}, {}, 5, (8.8, 30.1, 52.3)),
)
"""The runs: 6 Polaris scans on the farm, 6 Polaris scans in rain 10 mm/h with 2 km visibility and
10 scans of the default 7-sub-ray sensor (dual returns) among the farm's trees and crops."""

FIELDS = ("valid", "return_flags", "class_id", "material_id", "object_id", "signal", "intensity")


def _api():
    """(load_sensor_config, Scanner, ScanOptions, PoseHistory, build_default_farm, default_tour)."""
    from acres_lidar_ros.scene.farm_v1 import build_default_farm
    from acres_lidar_ros.scene.tour import default_tour

    try:
        from acres_lidar_ros.config.sensors import load_sensor_config
        from acres_lidar_ros.scan.scan_types import ScanOptions
        from acres_lidar_ros.scan.scanner import Scanner
        from acres_lidar_ros.sensor.poses import PoseHistory
    except ImportError:  # the flat layout of d376a36
        from acres_lidar_ros.poses import PoseHistory

        from acres_lidar_ros.config import load_sensor_config
        from acres_lidar_ros.scan.scan_types import ScanOptions
        from acres_lidar_ros.scan.scanner import Scanner
    return load_sensor_config, Scanner, ScanOptions, PoseHistory, build_default_farm, default_tour


def first_farm(function, *args, **kwargs):
    """``function`` (``build_default_farm`` or ``default_tour``) on the first farm, layout "v1".

    The goldens are scans of the first farm: since the default became layout "v2" the script
    asks for "v1" by name; the commits before the layouts (d376a36) have only that farm."""
    if "layout" in inspect.signature(function).parameters:
        kwargs["layout"] = "v1"
    return function(*args, **kwargs)


def case_scanner(case, scene=None):
    """The scanner of one case, its tour and the stamps (ns) of its scans."""
    load_sensor_config, Scanner, ScanOptions, PoseHistory, build_default_farm, default_tour = _api()
    _, sensor, overrides, options, seed, stamps_s = case
    if scene is None:
        scene = first_farm(build_default_farm, seed=0)
    config = load_sensor_config(sensor)
    if overrides:
        config = config.with_overrides(overrides)
    try:  # since 4b45c98 the scanner is given its self-return table; before, it loaded it
        from acres_lidar_ros.body.self_returns import sensor_self_table
    except ImportError:
        table = {}
    else:
        table = {"self_table": sensor_self_table(config)}
    scanner = Scanner(config, scene, options=ScanOptions(seed=seed, **options), **table)
    times, positions, quaternions = first_farm(default_tour, scene)
    tour = PoseHistory.from_arrays(times, positions, quaternions)
    stamps_ns = [int(round((tour.start_s + t) * 1e9)) for t in stamps_s]
    return scanner, tour, stamps_ns


def object_id_of(returns) -> np.ndarray:
    """(n, R) int32: d376a36's ``object_id`` of the returns (see the module notes)."""
    if hasattr(returns, "object_id"):
        return np.asarray(returns.object_id)
    from acres_lidar_ros.scene.instances import BODY_INSTANCE

    instance = np.asarray(returns.instance, np.uint32)
    scene_object = instance < 2**31  # the scene's objects; none, clutter and the body are above
    return np.where(scene_object, instance, np.where(instance == BODY_INSTANCE, -2, -1)).astype(np.int32)


def scan_record(scan) -> dict[str, np.ndarray]:
    """What the golden check compares of one ``Scan`` (as stored: see the module notes)."""
    returns = scan.returns
    record = {name: np.asarray(getattr(returns, name)) for name in FIELDS if name != "object_id"}
    record["object_id"] = object_id_of(returns)
    range_m = np.ascontiguousarray(np.asarray(returns.range_m, dtype=np.float64)[returns.valid])
    record["range_m_planes"] = np.ascontiguousarray(range_m.view(np.uint8).reshape(-1, 8).T)
    record["reflectivity"] = np.asarray(returns.reflectivity, dtype=np.float64)[returns.valid].astype(np.float32)
    return record


def load_golden(path: Path) -> list[dict[str, np.ndarray]]:
    """The scans of one golden file, in order: each a dict of ``FIELDS``, ``range_m`` (float64,
    the valid slots in C order) and ``reflectivity`` (float32, the same slots)."""
    with np.load(path) as data:
        arrays = {name: data[name] for name in data.files}
    scans = []
    k = 0
    while f"scan{k}_valid" in arrays:
        scan = {name: arrays[f"scan{k}_{name}"] for name in FIELDS + ("reflectivity",)}
        planes = arrays[f"scan{k}_range_m_planes"]
        scan["range_m"] = np.ascontiguousarray(planes.T).view(np.float64).reshape(-1)
        scans.append(scan)
        k += 1
    return scans


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes, as ``MANIFEST.json`` records it."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_manifest(out: Path, names: list[str], commit: str) -> dict:
    """Write ``out/MANIFEST.json``: ``commit`` and the sha256 of ``out/<name>.npz`` for each name.

    Written whole (a temporary file renamed over the old one); returns what it wrote."""
    manifest = {"commit": commit, "sha256": {name: file_sha256(out / f"{name}.npz") for name in names}}
    partial = out / "MANIFEST.json.partial"
    partial.write_text(json.dumps(manifest, indent=1) + "\n")
    partial.replace(out / "MANIFEST.json")
    return manifest


def manifest_mismatches(folder: Path, names: list[str]) -> list[str]:
    """Why the golden files of ``folder`` do not match its ``MANIFEST.json`` (empty when they do):
    a case the manifest does not list or lists twice, a missing file, a file whose sha256 differs."""
    manifest = json.loads((folder / "MANIFEST.json").read_text())
    recorded = manifest.get("sha256", {})
    problems = [f"{name}: not in MANIFEST.json" for name in names if name not in recorded]
    problems += [f"{name}: in MANIFEST.json but not a case" for name in recorded if name not in names]
    for name in names:
        path = folder / f"{name}.npz"
        if name not in recorded:
            continue
        if not path.is_file():
            problems.append(f"{path.name}: missing")
        elif (digest := file_sha256(path)) != recorded[name]:
            problems.append(f"{path.name}: sha256 {digest[:12]}..., MANIFEST.json has {recorded[name][:12]}...")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--out", type=Path, help="folder for the .npz files (test/golden)")
    mode.add_argument("--check", type=Path, metavar="FOLDER", help="only compare FOLDER's files with its manifest")
    args = parser.parse_args(argv)
    names = [case[0] for case in CASES]
    if args.check is not None:
        problems = manifest_mismatches(args.check, names)
        for problem in problems:
            print(problem, file=sys.stderr)
        print(f"{args.check}: {'does not match' if problems else 'matches'} its MANIFEST.json", file=sys.stderr)
        return 1 if problems else 0
    _, _, _, _, build_default_farm, _ = _api()
    scene = first_farm(build_default_farm, seed=0)
    args.out.mkdir(parents=True, exist_ok=True)
    for case in CASES:
        scanner, tour, stamps_ns = case_scanner(case, scene)
        arrays = {}
        for k, stamp_ns in enumerate(stamps_ns):
            scan = scanner.scan(tour, stamp_ns)
            for name, value in scan_record(scan).items():
                arrays[f"scan{k}_{name}"] = value
        path = args.out / f"{case[0]}.npz"
        partial = path.with_suffix(".npz.partial")
        with open(partial, "wb") as handle:
            np.savez_compressed(handle, **arrays)
        partial.replace(path)
        print(f"{path}: {len(stamps_ns)} scans, {path.stat().st_size / 1e6:.2f} MB", file=sys.stderr)
    import acres_lidar_ros

    source = Path(acres_lidar_ros.__file__).resolve().parent
    commit = subprocess.run(
        ["git", "-C", str(source), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    write_manifest(args.out, names, commit)
    return 0


if __name__ == "__main__":
    sys.exit(main())
