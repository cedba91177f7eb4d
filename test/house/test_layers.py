"""Layers point inward, read from the source (AST), and nothing below the node layer imports rclpy.

Each module belongs to a layer: a subpackage of ``acres_lidar_ros`` (``config``, ``sensor``, ...) or one of
the top-level modules (``errors``, ``scan``). A module may import its own layer and any layer of a lower
rank; layers of the same rank (``sensor`` and ``scene``; ``ros`` and ``apps``) do not import each other.
No two modules import each other, directly or around a longer cycle.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = "acres_lidar_ros"
ROOT = Path(__file__).resolve().parents[2] / PACKAGE

#: layer -> rank; lower ranks are inner. The order is the one docs/design.md draws.
LAYER_RANK = {
    "errors": 0,
    "cores": 0,
    "config": 1,
    "sensor": 2,
    "scene": 2,
    "tracing": 3,
    "radiometry": 4,
    "body": 5,
    "scan": 6,
    "outputs": 7,
    "runtime": 8,
    "ros": 9,
    "apps": 9,
}
ROS_LAYERS = {"ros"}
ROS_PACKAGES = ("rclpy", "tf2_ros", "launch", "launch_ros", "rosidl_runtime_py")
MAX_MODULE_LINES = 600


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def layer_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "package"


def is_type_checking_block(node: ast.AST) -> bool:
    """``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``): imports there are for annotations only."""
    if not isinstance(node, ast.If):
        return False
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def runtime_nodes(tree: ast.AST):
    """Every node of ``tree`` except those in the body of an ``if TYPE_CHECKING:`` block, which never runs.

    Annotations may name a type of any layer; only imports that execute are edges of the layer graph.
    """
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        if is_type_checking_block(node):
            assert isinstance(node, ast.If)
            stack.extend(node.orelse)
            stack.append(node.test)
            continue
        stack.extend(ast.iter_child_nodes(node))


def imported_modules(path: Path, known: set[str]) -> set[str]:
    """Project modules imported where the code runs in ``path`` (top-level or inside functions)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in runtime_nodes(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            if name.startswith(PACKAGE + ".") and name in known:
                found.add(name)
    return found


def third_party_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


SOURCES = {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}
GRAPH = {name: imported_modules(path, set(SOURCES)) - {name} for name, path in SOURCES.items()}


def test_every_module_has_a_layer():
    unknown = sorted(m for m in SOURCES if m != PACKAGE and layer_of(m) not in LAYER_RANK)
    assert unknown == [], f"modules outside the layer table: {unknown}"


def test_imports_point_inward():
    wrong = []
    for module, targets in GRAPH.items():
        if module == PACKAGE:
            continue
        here = layer_of(module)
        for target in targets:
            there = layer_of(target)
            if there == "package" or there == here:
                continue
            if LAYER_RANK[there] >= LAYER_RANK[here]:
                wrong.append(f"{module} ({here}) imports {target} ({there})")
    assert wrong == [], "\n".join(sorted(wrong))


def test_no_import_cycles():
    # Tarjan's strongly connected components; any component of two or more modules is a cycle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in GRAPH[node]:
            # a package's __init__ importing its own modules is not a cycle of ideas
            if target not in GRAPH or target.startswith(node + "."):
                continue
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in GRAPH:
        if module not in index:
            visit(module)
    assert cycles == [], f"import cycles: {cycles}"


def test_only_the_ros_layer_imports_ros_packages():
    wrong = sorted(
        f"{module} imports {sorted(third_party_imports(path) & set(ROS_PACKAGES))}"
        for module, path in SOURCES.items()
        if layer_of(module) not in ROS_LAYERS and third_party_imports(path) & set(ROS_PACKAGES)
    )
    assert wrong == [], wrong


def test_modules_stay_readable_in_size():
    long = sorted(
        f"{m}: {len(p.read_text().splitlines())} lines"
        for m, p in SOURCES.items()
        if len(p.read_text().splitlines()) > MAX_MODULE_LINES
    )
    assert long == [], long


@pytest.mark.parametrize(
    "source, target, expected",
    [
        ("acres_lidar_ros.config.schema", "acres_lidar_ros.scan", True),
        ("acres_lidar_ros.scene.scene_model", "acres_lidar_ros.sensor.poses", True),
        ("acres_lidar_ros.apps.cli", "acres_lidar_ros.ros.node", True),
        ("acres_lidar_ros.apps.cli", "acres_lidar_ros.scan", False),
        ("acres_lidar_ros.radiometry.equations", "acres_lidar_ros.radiometry.noise", False),
    ],
)
def test_the_rule_itself_tells_wrong_from_right(source, target, expected):
    # The checker must be able to fail: a hand-made wrong edge is reported, a right one is not.
    here, there = layer_of(source), layer_of(target)
    is_wrong = here != there and there != "package" and LAYER_RANK[there] >= LAYER_RANK[here]
    assert is_wrong is expected


def test_importing_everything_but_the_node_layer_does_not_import_rclpy():
    modules = sorted(m for m in SOURCES if layer_of(m) not in ROS_LAYERS)
    code = (
        "import sys, importlib\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {ROS_PACKAGES!r})\n"
        "print(bad); sys.exit(1 if bad else 0)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_imports_under_type_checking_are_not_edges(tmp_path):
    # The real reader on a hand-made module: an annotation-only import is no edge, a runtime one is.
    source = tmp_path / "probe.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "import typing\n"
        "if TYPE_CHECKING:\n"
        "    from acres_lidar_ros.ros.node import LidarNode\n"
        "if typing.TYPE_CHECKING:\n"
        "    import acres_lidar_ros.apps.cli\n"
        "else:\n"
        "    import acres_lidar_ros.scan\n"
        "def f():\n"
        "    from acres_lidar_ros.outputs import layouts\n"
    )
    known = {
        "acres_lidar_ros.ros.node",
        "acres_lidar_ros.apps.cli",
        "acres_lidar_ros.scan",
        "acres_lidar_ros.outputs.layouts",
    }
    assert imported_modules(source, known) == {"acres_lidar_ros.scan", "acres_lidar_ros.outputs.layouts"}
