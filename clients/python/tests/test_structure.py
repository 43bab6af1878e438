"""The package's modules import each other without a loop (``TYPE_CHECKING`` and function-level imports too)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "circuitlog"


def _imports(path: Path) -> set[str]:
    """The package modules ``path`` imports, anywhere in it: ``from . import _x`` and ``from ._x import y``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module is None:
                found.update(alias.name for alias in node.names)
            else:
                found.add(node.module.split(".")[0])
    return found


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A loop of imports, as the modules along it, or None."""
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> list[str] | None:
        if module in path:
            return [*path[path.index(module) :], module]
        if module in done:
            return None
        for target in sorted(graph.get(module, ())):
            loop = visit(target, [*path, module])
            if loop is not None:
                return loop
        done.add(module)
        return None

    for module in sorted(graph):
        loop = visit(module, [])
        if loop is not None:
            return loop
    return None


def test_no_module_of_the_package_imports_one_that_imports_it_back() -> None:
    graph = {path.stem: _imports(path) - {"__init__"} for path in PACKAGE.glob("*.py") if path.stem != "__init__"}
    assert graph["_sync"] and graph["_async"]  # read what is there, not an empty folder
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_the_cycle_check_finds_a_loop() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
