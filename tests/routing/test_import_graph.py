"""`locus.routing` imports in one direction: no module imports one that imports it back, at the
top of the file or deferred inside a function (a deferred import hides a circle; it does not
break it). Imports under `if TYPE_CHECKING:` are for the type checker only and are left out."""

from __future__ import annotations

import ast
from pathlib import Path

ROUTING = Path(__file__).resolve().parents[2] / "src" / "locus" / "routing"


def _runtime_imports(path: Path) -> set[str]:
    """The `locus.routing` modules `path` imports at run time (deferred imports included)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped |= {id(child) for child in ast.walk(node)}
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "locus.routing":  # `from locus.routing import module`
                found |= {
                    alias.name for alias in node.names if (ROUTING / f"{alias.name}.py").exists()
                }
            elif node.module.startswith("locus.routing."):
                found.add(node.module.split(".")[2])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("locus.routing."):
                    found.add(alias.name.split(".")[2])
    return found - {path.stem}


def _graph() -> dict[str, set[str]]:
    return {
        path.stem: _runtime_imports(path)
        for path in ROUTING.glob("*.py")
        if path.name != "__init__.py"
    }


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of `graph`, as the modules along it; None where there is none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for imported in sorted(graph.get(module, ())):
            if state.get(imported) == 1:
                return [*path[path.index(imported) :], imported]
            if imported not in state and (found := visit(imported)):
                return found
        path.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state and (found := visit(module)):
            return found
    return None


def test_routing_has_no_import_circle() -> None:
    circle = _cycle(_graph())
    assert circle is None, f"locus.routing imports in a circle: {' -> '.join(circle)}"


def test_the_check_finds_a_circle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
    graph = _graph()
    assert "stack" in graph["stacked"] and "stacked" in graph["router_artifact"]
