"""The project's habits that a reader of the source can check: public functions carry type hints.

ruff (lint and format) and mypy run in ``.ci/run``; mypy checks the hints it is given but does
not ask for them, so this test reads every function of the package from the source (AST) and
fails on a public one (its name and its class's name without a leading underscore, or
``__init__`` and the protocol methods callers use) with an unannotated parameter or no return
annotation. It also reads every ``from acres_lidar_ros.x.y import name`` of the package and the tests
and fails where ``name`` is one that module only imports: each name has one import path, the module
that defines it (a package's ``__init__`` may gather names; a module does not pass them on).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "acres_lidar_ros"
TESTS = Path(__file__).resolve().parents[1]
PUBLIC_DUNDERS = {"__init__", "__call__", "__enter__", "__exit__", "__getitem__", "__len__", "__iter__"}


def _is_public(name: str) -> bool:
    return name in PUBLIC_DUNDERS or not name.startswith("_")


def unannotated(source: str, where: str = "<source>") -> list[str]:
    """``where:line name (what is missing)`` of every public function of ``source`` that lacks a hint."""
    found = []

    def visit(node: ast.AST, owner: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                if not child.name.startswith("_"):
                    visit(child, child.name)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) and _is_public(child.name):
                args = child.args
                params = [*args.posonlyargs, *args.args, *args.kwonlyargs]
                if (
                    owner is not None
                    and params
                    and not any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in child.decorator_list)
                ):
                    params = params[1:]  # self or cls
                params += [a for a in (args.vararg, args.kwarg) if a is not None]
                missing = [a.arg for a in params if a.annotation is None]
                if child.returns is None:
                    missing.append("return")
                if missing:
                    name = f"{owner}.{child.name}" if owner else child.name
                    found.append(f"{where}:{child.lineno} {name} ({', '.join(missing)})")

    visit(ast.parse(source), None)
    return found


def test_public_functions_have_type_hints():
    missing = []
    for path in sorted(ROOT.rglob("*.py")):
        missing += unannotated(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT.parent)))
    assert missing == [], "public functions without type hints:\n" + "\n".join(missing)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def f(x: int) -> int:\n    return x", []),
        ("def f(x) -> int:\n    return 1", ["<source>:1 f (x)"]),
        ("def f(x: int):\n    return 1", ["<source>:1 f (return)"]),
        ("def f(*args, **kw: int) -> None:\n    pass", ["<source>:1 f (args)"]),
        ("def _private(x):\n    pass", []),
        ("class A:\n    def m(self, x: int) -> None:\n        pass", []),
        ("class A:\n    def __init__(self, x):\n        pass", ["<source>:2 A.__init__ (x, return)"]),
        ("class A:\n    @staticmethod\n    def s(x: int):\n        pass", ["<source>:3 A.s (return)"]),
        ("class _Hidden:\n    def m(self, x):\n        pass", []),
        ("def f() -> None:\n    def inner(x):\n        pass", []),
    ],
)
def test_the_rule_itself_tells_hinted_from_unhinted(source, expected):
    assert unannotated(source) == expected


def imported_only(module_source: str) -> set[str]:
    """The names a module's top level imports and does not define again."""
    tree = ast.parse(module_source)
    imported: set[str] = set()
    defined: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imported |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defined |= {t.id for t in targets if isinstance(t, ast.Name)}
    return imported - defined


def passed_on_imports(source: str, where: str, module_names: dict[str, set[str]]) -> list[str]:
    """``where:line module.name`` of each import of a name that ``module`` only imports."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module in module_names:
            found += [
                f"{where}:{node.lineno} {node.module}.{a.name}"
                for a in node.names
                if a.name in module_names[node.module]
            ]
    return found


def test_each_name_is_imported_from_the_module_that_defines_it():
    # A package's __init__ counts as its package: ``from acres_lidar_ros.scan import Scanner`` would be
    # a second path to scan.scanner's name. The top package's API is loaded on first use (PEP 562), so
    # its __init__ imports nothing at its top level and passes the rule.
    modules = {
        ".".join(path.relative_to(ROOT.parent).with_suffix("").parts).removesuffix(".__init__"): imported_only(
            path.read_text(encoding="utf-8")
        )
        for path in ROOT.rglob("*.py")
    }
    found = []
    users = [*ROOT.rglob("*.py"), *TESTS.rglob("*.py"), *(ROOT.parent / "scripts").rglob("*.py")]
    for path in sorted([*users, *(ROOT.parent / "launch").rglob("*.py")]):
        found += passed_on_imports(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT.parent)), modules)
    assert found == [], "names imported from a module that only imports them:\n" + "\n".join(found)


def test_the_import_rule_tells_a_passed_on_name_from_a_defined_one():
    module = (
        "from numpy import pi\nfrom math import tau as tau\nfrom os import sep\nsep = '/'\ndef f() -> None:\n    pass\n"
    )
    assert imported_only(module) == {"pi", "tau"}
    user = "from pkg.m import f, sep\nfrom pkg.m import pi\nfrom other import pi\n"
    assert passed_on_imports(user, "u.py", {"pkg.m": imported_only(module)}) == ["u.py:2 pkg.m.pi"]
