"""No new import circle among the modules of lakectl and server, and no new ``__getattr__`` re-export.

ARCHITECTURE.md: floors import downward only, and callers import a verb from its own module. The
import-linter contracts in pyproject.toml check the floors they name; this test checks every
module at once. It reads every import statement of ``lakectl/`` and ``server/`` (with ``ast``:
nothing is imported), builds the module graph and finds its strongly connected components: each
component of more than one module is an import circle.

Counted: every ``import x`` and ``from x import y`` anywhere in a file, those inside functions
and under ``if TYPE_CHECKING:`` included. A function-level import is the usual way to hide a circle
from the interpreter, not to remove it: the two modules still need each other. A type-only import
still means the lower module knows the higher one, which the floors forbid, and mypy follows it.
Not counted: ``importlib.import_module`` calls; the ``__getattr__`` test below stands for them.
Importing ``a.b.c`` counts as an edge to ``a.b.c`` only, not to the packages ``a`` and ``a.b``
whose ``__init__`` it runs too (as import-linter does): otherwise every package's ``__init__``
would share a circle with its children.

Today's circles are listed in KNOWN_CIRCLES. A circle found passes when it lies within a known one
(circles only shrink or split as they are taken apart); a new circle, or one that has taken in a
module, fails with its modules and the import lines that close it. Once a circle is gone, delete
its entry, and shrink an entry that has lost modules, so that it cannot grow back.
"""

from __future__ import annotations

import ast
import itertools
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("lakectl", "server")


def _core(*names: str) -> frozenset[str]:
    return frozenset(f"lakectl.core.{name}" for name in names)


KNOWN_CIRCLES: list[frozenset[str]] = []

# Modules that define a module-level ``__getattr__`` today: a name looked up there is loaded from
# another module, so the import graph (and the reader) cannot see where it comes from.
KNOWN_GETATTR: frozenset[str] = frozenset()


def module_files() -> dict[str, Path]:
    """Every module of PACKAGES by its dotted name (a package by the name of its ``__init__``)."""
    modules = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def absolute(module: str, path: Path, level: int, name: str | None) -> str:
    """The absolute name of ``from <level dots><name> import ...`` written in ``module``."""
    if level == 0:
        return name or ""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = package[: len(package) - (level - 1)]
    return ".".join([*base, name] if name else base)


def known_prefix(name: str, modules: dict[str, Path]) -> str | None:
    """``name`` if it is one of our modules, else its longest prefix that is (``x.y.attr`` -> ``x.y``)."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def imported(module: str, path: Path, modules: dict[str, Path]) -> Iterator[tuple[str, int]]:
    """The modules of ours that ``module`` imports, each with the line of its import statement."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = known_prefix(alias.name, modules)
                if target is not None:
                    yield target, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = absolute(module, path, node.level, node.module)
            for alias in node.names:
                # ``from pkg import name`` imports the module pkg.name when there is one.
                target = known_prefix(f"{base}.{alias.name}", modules)
                if target is not None:
                    yield target, node.lineno


Graph = dict[str, dict[str, list[str]]]
"""module -> imported module -> the import statements ("path:line") that make the edge."""


def import_graph() -> Graph:
    modules = module_files()
    graph: Graph = {module: defaultdict(list) for module in modules}
    for module, path in modules.items():
        for target, line in imported(module, path, modules):
            site = f"{path.relative_to(ROOT)}:{line}"
            # ``from . import x`` in a package's own __init__, say, is no edge; ``from m import a, b``
            # is one site.
            if target != module and site not in graph[module][target]:
                graph[module][target].append(site)
    return graph


def strongly_connected(graph: Graph) -> list[frozenset[str]]:
    """Tarjan's strongly connected components, iterative (the recursion would go ~200 deep)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[frozenset[str]] = []
    for root in graph:
        if root in index:
            continue
        # Each frame: a node and the iterator over its successors still to visit.
        frames = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while frames:
            node, successors = frames[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    frames.append((successor, iter(graph[successor])))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                frames.pop()
                if frames:
                    parent = frames[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    components.append(frozenset(component))
    return components


def circles(graph: Graph) -> list[frozenset[str]]:
    return [component for component in strongly_connected(graph) if len(component) > 1]


def new_edges(graph: Graph, circle: frozenset[str]) -> list[tuple[str, str]]:
    """``circle``'s edges that no known circle holds: among them is the import that made it new."""
    return [
        (source, target)
        for source in sorted(circle)
        for target in sorted(graph[source])
        if target in circle and not any({source, target} <= known for known in KNOWN_CIRCLES)
    ]


def path_within(graph: Graph, circle: frozenset[str], start: str, end: str) -> list[str]:
    """A shortest import path from ``start`` to ``end`` through ``circle``'s modules (breadth first)."""
    came_from: dict[str, str | None] = {start: None}
    frontier = [start]
    while end not in came_from:
        following = []
        for node in frontier:
            for target in sorted(graph[node]):
                if target in circle and target not in came_from:
                    came_from[target] = node
                    following.append(target)
        frontier = following
    path: list[str] = []
    node: str | None = end
    while node is not None:
        path.append(node)
        node = came_from[node]
    return path[::-1]


def closing_cycle(graph: Graph, circle: frozenset[str]) -> list[str]:
    """The import lines of a shortest cycle of ``circle`` through an edge no known circle holds.

    A new circle of sixty modules holds hundreds of imports; the one that closed it lies on its
    shortest cycles through a new edge, which are a handful of lines to read.
    """
    cycles = [
        [source, *path_within(graph, circle, target, source)] for source, target in new_edges(graph, circle)
    ]
    cycle = min(cycles, key=len)
    lines = []
    for source, target in itertools.pairwise(cycle):
        sites = graph[source][target]
        more = f" and {len(sites) - 1} more" if len(sites) > 1 else ""
        lines.append(f"{sites[0]}{more}: {source} -> {target}")
    return lines


def test_the_graph_sees_the_modules_and_their_imports() -> None:
    graph = import_graph()
    assert len(graph) > 150
    assert "lakectl.core.model" in graph["lakectl.core.graph.refs"]
    # An import inside a function body counts.
    assert "lakectl.core.kv.memory" in graph["lakectl.core.kv.stores"]


def test_relative_imports_resolve_from_the_importing_module() -> None:
    path = ROOT / "lakectl" / "core" / "kv" / "sqlite.py"
    assert absolute("lakectl.core.kv.sqlite", path, 1, "memory") == "lakectl.core.kv.memory"
    assert absolute("lakectl.core.kv.sqlite", path, 2, None) == "lakectl.core"
    package = ROOT / "lakectl" / "core" / "kv" / "__init__.py"
    assert absolute("lakectl.core.kv", package, 1, "sqlite") == "lakectl.core.kv.sqlite"
    assert absolute("lakectl.core.kv", package, 0, "lakectl.errors") == "lakectl.errors"


def test_tarjan_finds_circles_and_leaves_a_chain_alone() -> None:
    graph: Graph = {
        "a": {"b": []},
        "b": {"c": []},
        "c": {"a": [], "d": []},
        "d": {"e": []},
        "e": {"d": []},
        "f": {"a": []},
    }
    assert sorted(map(sorted, circles(graph))) == [["a", "b", "c"], ["d", "e"]]


def test_no_new_import_circle() -> None:
    graph = import_graph()
    grown = [circle for circle in circles(graph) if not any(circle <= known for known in KNOWN_CIRCLES)]
    report = []
    for circle in grown:
        report.append(f"an import circle of {len(circle)} modules: {', '.join(sorted(circle))}")
        report.append("  a shortest cycle through an import no known circle holds:")
        report.extend(f"    {line}" for line in closing_cycle(graph, circle))
    assert not grown, "\n".join(report)


def test_every_known_circle_is_still_there_as_written() -> None:
    """A circle broken or shrunk is written down smaller (or deleted): it may never grow back."""
    found = set(circles(import_graph()))
    stale = [sorted(known) for known in KNOWN_CIRCLES if known not in found]
    assert not stale, f"circles now smaller or gone, to update in KNOWN_CIRCLES: {stale}"


def defines_getattr(tree: ast.Module) -> bool:
    """Whether the module's own body (its ``if``/``try`` blocks included) binds ``__getattr__``."""
    body: list[ast.stmt] = list(tree.body)
    while body:
        node = body.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "__getattr__":
            return True
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "__getattr__" for target in node.targets
        ):
            return True
        if isinstance(node, ast.If | ast.Try):
            body.extend([*node.body, *node.orelse])
            body.extend(statement for handler in getattr(node, "handlers", []) for statement in handler.body)
            body.extend(getattr(node, "finalbody", []))
    return False


def test_no_new_module_level_getattr() -> None:
    found = {
        module
        for module, path in module_files().items()
        if defines_getattr(ast.parse(path.read_text(), str(path)))
    }
    assert found <= KNOWN_GETATTR, (
        f"module-level __getattr__ (a re-export: import the name from its own module instead) in "
        f"{sorted(found - KNOWN_GETATTR)}"
    )
