"""The package's import graph: no circles, and the framework never imports a plugin.

kube-scheduler keeps its in-tree registry in plugins/registry.go so that the framework depends on no plugin; the
same holds here (accelsched.plugins.registry, handed to profiles by accelsched.config). Imports inside functions
count (a lazy import is still a circle); imports under ``if TYPE_CHECKING:`` do not, since they never run.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "accelsched"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for other in child.orelse:
                    visit(other)
                continue
            if isinstance(child, ast.Import | ast.ImportFrom):
                found.append(child)
            visit(child)

    visit(tree)
    return found


def import_graph() -> dict[str, set[str]]:
    paths = [p for p in PACKAGE.rglob("*.py") if "proto" not in p.parts]
    modules = {_module_name(p): p for p in paths}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in _runtime_imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                assert node.level == 0, f"{path}: the package uses absolute imports only"
                base = node.module or ""
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            graph[name].update(t for t in targets if t in modules and t != name)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return out


def test_the_package_has_no_import_circles() -> None:
    assert _cycles(import_graph()) == []


def test_the_framework_never_imports_a_plugin() -> None:
    graph = import_graph()
    offenders = {
        module: sorted(t for t in targets if t.startswith("accelsched.plugins"))
        for module, targets in graph.items()
        if module.startswith("accelsched.framework")
    }
    assert {m: t for m, t in offenders.items() if t} == {}


def test_the_graph_sees_lazy_imports() -> None:
    """The checker itself: a function-level import is an edge (sim/command.py's subcommand imports its options)."""
    graph = import_graph()
    assert "accelsched.terminal" in graph["accelsched.sim.command"]
    assert "accelsched.plugins.registry" in graph["accelsched.config.load"]
