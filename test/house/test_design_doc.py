"""docs/design.md's layer table lists every module of the package, and no module that is gone."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ROW = re.compile(r"\| \d+ \| `([a-z_]+)(?:/|\.py)` \|([^|]*)\|")


def listed_modules(design: str) -> dict[str, set[str]]:
    """Layer folder -> the module names in its row's modules column."""
    rows: dict[str, set[str]] = {}
    for line in design.splitlines():
        m = ROW.match(line)
        if m:
            rows[m.group(1)] = set(re.findall(r"`([a-z_0-9]+)`", m.group(2)))
    return rows


def tree_modules(package: Path) -> dict[str, set[str]]:
    """Layer folder -> its modules (``__init__`` left out); top-level modules are layers of their own."""
    layers: dict[str, set[str]] = {}
    for path in package.rglob("*.py"):
        parts = path.relative_to(package).parts
        if path.name == "__init__.py":
            continue
        if len(parts) == 1:
            layers.setdefault(path.stem, set())
        else:
            layers.setdefault(parts[0], set()).add(path.stem)
    return layers


def test_the_design_table_lists_every_module_of_the_tree():
    rows = listed_modules((REPO / "docs" / "design.md").read_text())
    tree = tree_modules(REPO / "acres_lidar_ros")
    problems = []
    for layer in sorted(set(tree) | set(rows)):
        if layer not in rows:
            problems.append(f"layer {layer}/ has no row")
            continue
        if layer not in tree:
            problems.append(f"row {layer} names no folder or module of the package")
            continue
        for name in sorted(tree[layer] - rows[layer]):
            problems.append(f"{layer}/{name}.py is not in its row")
        for name in sorted(rows[layer] - tree[layer]):
            problems.append(f"{layer}'s row lists {name}, which is not in {layer}/")
    assert not problems, "docs/design.md, the layer table:\n" + "\n".join(problems)


def test_the_reader_finds_a_missing_and_a_stale_module(tmp_path):
    """The comparison on a small made-up tree and table, so that it can fail."""
    package = tmp_path / "acres_lidar_ros"
    (package / "scan").mkdir(parents=True)
    for name in ("__init__", "sweep", "scanner"):
        (package / "scan" / f"{name}.py").write_text("")
    (package / "errors.py").write_text("")
    table = "| 0 | `errors.py` | | errors |\n| 6 | `scan/` | `sweep`, `old` | scans |\n"
    assert tree_modules(package) == {"scan": {"sweep", "scanner"}, "errors": set()}
    assert listed_modules(table) == {"errors": set(), "scan": {"sweep", "old"}}
