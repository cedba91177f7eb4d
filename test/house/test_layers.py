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
    "units": 0,
    "config": 1,
    "sensor": 2,
    "scene": 2,
    "tracing": 3,
    "radiometry": 4,
    "body": 5,
    "scan": 6,
    "outputs": 7,
    "packets": 8,
    "runtime": 9,
    "recordings": 9,
    "ros": 10,
    "apps": 10,
}
ROS_LAYERS = {"ros"}
ROS_PACKAGES = ("rclpy", "tf2_ros", "launch", "launch_ros", "rosidl_runtime_py")
MAX_MODULE_LINES = 600


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
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


def sources_of(root: Path) -> dict[str, Path]:
    """module name -> path of every module of the package at ``root`` (a folder named ``acres_lidar_ros``)."""
    return {module_name(p, root): p for p in sorted(root.rglob("*.py"))}


def graph_of(sources: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the project modules it imports where the code runs (itself left out)."""
    return {name: imported_modules(path, set(sources)) - {name} for name, path in sources.items()}


def unlayered(sources: dict[str, Path]) -> list[str]:
    """Modules whose layer is not in the layer table."""
    return sorted(m for m in sources if m != PACKAGE and layer_of(m) not in LAYER_RANK)


def outward_imports(graph: dict[str, set[str]]) -> list[str]:
    """``module (layer) imports target (layer)`` for every import of the same or an outer rank's other layer."""
    wrong = []
    for module, targets in graph.items():
        if module == PACKAGE:
            continue
        here = layer_of(module)
        for target in targets:
            there = layer_of(target)
            if there == "package" or there == here:
                continue
            if LAYER_RANK[there] >= LAYER_RANK[here]:
                wrong.append(f"{module} ({here}) imports {target} ({there})")
    return sorted(wrong)


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import cycle of ``graph``: Tarjan's strongly connected components of two or more modules."""
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
        for target in graph[node]:
            # a package's __init__ importing its own modules is not a cycle of ideas
            if target not in graph or target.startswith(node + "."):
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

    for module in graph:
        if module not in index:
            visit(module)
    return sorted(cycles)


def ros_importers(sources: dict[str, Path]) -> list[str]:
    """Modules outside the ROS layer that import a ROS package, with what they import."""
    return sorted(
        f"{module} imports {sorted(third_party_imports(path) & set(ROS_PACKAGES))}"
        for module, path in sources.items()
        if layer_of(module) not in ROS_LAYERS and third_party_imports(path) & set(ROS_PACKAGES)
    )


def long_modules(sources: dict[str, Path]) -> list[str]:
    """Modules over ``MAX_MODULE_LINES`` lines, with their length."""
    lengths = {m: len(p.read_text().splitlines()) for m, p in sources.items()}
    return sorted(f"{m}: {n} lines" for m, n in lengths.items() if n > MAX_MODULE_LINES)


SOURCES = sources_of(ROOT)
GRAPH = graph_of(SOURCES)


def test_every_module_has_a_layer():
    unknown = unlayered(SOURCES)
    assert unknown == [], f"modules outside the layer table: {unknown}"


def test_imports_point_inward():
    wrong = outward_imports(GRAPH)
    assert wrong == [], "\n".join(wrong)


def test_no_import_cycles():
    cycles = import_cycles(GRAPH)
    assert cycles == [], f"import cycles: {cycles}"


def test_only_the_ros_layer_imports_ros_packages():
    wrong = ros_importers(SOURCES)
    assert wrong == [], wrong


def test_modules_stay_readable_in_size():
    long = long_modules(SOURCES)
    assert long == [], long


def _write_tree(root: Path, files: dict[str, str]) -> dict[str, Path]:
    """A package ``root/acres_lidar_ros`` of the given files (path -> source); its sources."""
    package = root / PACKAGE
    for relative, source in files.items():
        path = package / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        for folder in path.relative_to(package).parents:
            (package / folder / "__init__.py").touch()
        path.write_text(source)
    return sources_of(package)


def test_the_checkers_pass_a_tree_that_keeps_every_rule(tmp_path):
    sources = _write_tree(
        tmp_path,
        {
            "errors.py": "class Error(Exception): ...\n",
            "config/schema.py": "from acres_lidar_ros.errors import Error\n",
            "scan/scanner.py": "import numpy\nfrom acres_lidar_ros.config import schema\n",
            "ros/node.py": "import rclpy\nfrom acres_lidar_ros.scan import scanner\n",
        },
    )
    graph = graph_of(sources)
    assert graph["acres_lidar_ros.scan.scanner"] == {"acres_lidar_ros.config", "acres_lidar_ros.config.schema"}
    assert (unlayered(sources), outward_imports(graph), import_cycles(graph)) == ([], [], [])
    assert (ros_importers(sources), long_modules(sources)) == ([], [])


def test_the_checkers_report_a_tree_that_breaks_each_rule(tmp_path):
    # The real checkers on a small package, one module per broken rule: each is reported, by name.
    sources = _write_tree(
        tmp_path,
        {
            "config/schema.py": "from acres_lidar_ros.scan import scanner\n",  # inner imports outer
            "scan/scanner.py": "def f():\n    from acres_lidar_ros.ros import node\n",  # inside a function
            "sensor/pattern.py": "import acres_lidar_ros.scene.model\n",  # same rank, other layer
            "scene/model.py": "from acres_lidar_ros.scene import walk\n",  # a cycle within one layer
            "scene/walk.py": "from acres_lidar_ros.scene.model import X\n",
            "radiometry/ros_leak.py": "from rclpy.node import Node\n",  # rclpy outside ros/
            "tracing/long.py": "x = 1\n" * (MAX_MODULE_LINES + 1),
            "vision/new.py": "",  # a layer not in the table
            "ros/node.py": "",
        },
    )
    graph = graph_of(sources)
    assert outward_imports(graph) == [
        "acres_lidar_ros.config.schema (config) imports acres_lidar_ros.scan (scan)",
        "acres_lidar_ros.config.schema (config) imports acres_lidar_ros.scan.scanner (scan)",
        "acres_lidar_ros.scan.scanner (scan) imports acres_lidar_ros.ros (ros)",
        "acres_lidar_ros.scan.scanner (scan) imports acres_lidar_ros.ros.node (ros)",
        "acres_lidar_ros.sensor.pattern (sensor) imports acres_lidar_ros.scene.model (scene)",
    ]
    assert import_cycles(graph) == [["acres_lidar_ros.scene.model", "acres_lidar_ros.scene.walk"]]
    assert ros_importers(sources) == ["acres_lidar_ros.radiometry.ros_leak imports ['rclpy']"]
    assert long_modules(sources) == [f"acres_lidar_ros.tracing.long: {MAX_MODULE_LINES + 1} lines"]
    assert unlayered(sources) == ["acres_lidar_ros.vision", "acres_lidar_ros.vision.new"]


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
    assert bool(outward_imports({source: {target}})) is expected


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
