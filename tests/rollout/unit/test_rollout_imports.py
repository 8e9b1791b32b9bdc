"""The rollout engine's modules import each other without a cycle (issue 14: rollback used to be a
mixin that imported the engine back); every import counts, ``TYPE_CHECKING`` ones included."""

from __future__ import annotations

import ast
from pathlib import Path

import lwsflow.controller as controller_pkg

ROOT = Path(controller_pkg.__file__).parent


def _module(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = [p for p in rel.parts if p != "__init__"]
    return ".".join(["lwsflow.controller", *parts])


def _graph() -> dict[str, set[str]]:
    files = {_module(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in files}
    for mod, path in files.items():
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            graph[mod] |= {n for n in names if n in files and n != mod}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    seen: set[str] = set()
    path: list[str] = []

    def visit(m: str) -> list[str]:
        if m in path:
            return [*path[path.index(m):], m]
        if m in seen:
            return []
        seen.add(m)
        path.append(m)
        for dep in sorted(graph[m]):
            if found := visit(dep):
                return found
        path.pop()
        return []

    for m in sorted(graph):
        if found := visit(m):
            return found
    return []


def test_controller_has_no_import_cycle() -> None:
    graph = _graph()
    assert "lwsflow.controller.rollout.engine" in graph["lwsflow.controller.rollout.ds"]
    assert _cycle(graph) == []


def test_cycle_finder_finds_one() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
