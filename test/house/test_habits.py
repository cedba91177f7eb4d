"""The project's habits that a reader of the source can check: public functions carry type hints.

ruff (lint and format) and mypy run in ``.ci/run``; mypy checks the hints it is given but does
not ask for them, so this test reads every function of the package from the source (AST) and
fails on a public one (its name and its class's name without a leading underscore, or
``__init__`` and the protocol methods callers use) with an unannotated parameter or no return
annotation.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "acres_lidar_ros"
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
