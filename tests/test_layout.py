"""The package's shape: one owner per role means no module imports its way back to itself."""

from __future__ import annotations

import ast
from pathlib import Path

import a3c

PACKAGE = Path(a3c.__file__).parent


def _imports(path: Path) -> set[str]:
    """a3c modules `path` imports when it is loaded: module level, outside TYPE_CHECKING."""
    found = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        for inner in ast.walk(node):
            if isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef):
                break
            if isinstance(inner, ast.ImportFrom) and (inner.module or "").startswith("a3c."):
                found.add(inner.module.split(".")[1])
            elif isinstance(inner, ast.Import):
                found |= {a.name.split(".")[1] for a in inner.names if a.name.startswith("a3c.")}
    return found


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> list[str] | None:
        if module in path:
            return [*path[path.index(module) :], module]
        if module in done:
            return None
        for imported in sorted(graph.get(module, ())):
            found = visit(imported, [*path, module])
            if found:
                return found
        done.add(module)
        return None

    for module in sorted(graph):
        found = visit(module, [])
        if found:
            return found
    return None


def test_no_module_imports_itself_through_others() -> None:
    graph = {path.stem: _imports(path) for path in PACKAGE.glob("*.py")}
    assert graph["trainer"] >= {"supervisor", "reporting", "distributed"}  # the walk sees imports
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
