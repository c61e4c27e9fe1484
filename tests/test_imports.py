"""No import circle among ladder's modules, counting the imports inside functions too.

A function-level import hides a circle from Python at load time, not from the design: each module of
``ladder/`` is parsed with ``ast``, every ``import ladder...`` and ``from ladder... import ...`` anywhere in
it (relative imports included) is an edge, and the graph must have no cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "ladder"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def ladder_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _target(name: str, modules: dict[str, Path]) -> str | None:
    """The ladder module ``name`` is, or the nearest enclosing one (``ladder.x.f`` → ``ladder.x``)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The ladder modules that ``name`` imports, at module level or in any function."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {_target(alias.name, modules) for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from . import x, from .y import z
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            for alias in node.names:  # from ladder.tasks import arithmetic: the submodule, if it is one
                found.add(_target(f"{base}.{alias.name}", modules) if f"{base}.{alias.name}" in modules
                          else _target(base, modules))
    return {m for m in found if m is not None and m != name}


def import_graph() -> dict[str, set[str]]:
    modules = ladder_modules()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as [a, b, ..., a], or None (depth-first search, three colours)."""
    WHITE, GREY, BLACK = 0, 1, 2
    colour = dict.fromkeys(graph, WHITE)
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        colour[node] = GREY
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if colour.get(nxt, BLACK) == GREY:
                return stack[stack.index(nxt):] + [nxt]
            if colour.get(nxt) == WHITE:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        stack.pop()
        colour[node] = BLACK
        return None

    for node in sorted(graph):
        if colour[node] == WHITE:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def test_the_graph_sees_function_level_and_relative_imports():
    graph = import_graph()
    assert "ladder.rungs.grpo" in graph and "ladder.core.update" in graph
    assert "ladder.tasks.tiny_lm" in graph["ladder.tasks.arithmetic"]  # imported inside functions only
    assert "ladder.core.advantages" in graph["ladder.core"]  # from .advantages import ...
    assert "ladder.rungs.grpo.recipe" in graph["ladder.rungs.grpo"]  # a package: from .recipe import ...
    assert "ladder.runtime.runlog" in graph["ladder.rungs.grpo.recipe"]


def test_find_cycle_reports_the_circle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_no_import_cycle_among_ladder_modules():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import circle: " + " → ".join(cycle)
