"""The repository's Python source, parsed (``ast``, nothing imported), for
``tests/test_architecture.py``: the layers, the modules with their imports, the import graph
and its cycles."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "groundproxy"
ROOTS = ("errors", "proxy", "guards", "retrieval", "models", "policies", "testing", "integrations")
OUTSIDE = ("training", "bench", "tests")  # import roots of their own (``bench.x`` …)
TRAINING = "training"
MAX_LINES = 450  # a hint to find a seam (issue 39): past it split along one, never fold code
MAX_PARAMS = 6
ACTION_MODULE = f"{PACKAGE}.guards.action"
TYPES_MODULE = f"{PACKAGE}.guards.types"
NOT_IN_GUARDS = frozenset({"fastapi", "starlette", "httpx", "uvicorn"})
# A package may import the packages of a LOWER layer only (and itself).
LAYERS: dict[str, int] = {
    f"{PACKAGE}.errors": 0,
    f"{PACKAGE}.policies": 1,
    f"{PACKAGE}.guards": 2,
    f"{PACKAGE}.retrieval": 3,
    f"{PACKAGE}.models": 4,
    f"{PACKAGE}.proxy": 5,
    f"{PACKAGE}.integrations": 6,
    f"{PACKAGE}.testing": 6,
    TRAINING: 7,
    "bench": 8,
    "tests": 9,
}
RUNTIME = frozenset(top for top, layer in LAYERS.items() if layer <= 6) - {f"{PACKAGE}.testing"}
GUARDS_SURFACE = frozenset({f"{PACKAGE}.guards", f"{PACKAGE}.guards.types"})
PROXY_SURFACE = frozenset({f"{PACKAGE}.proxy.offline"})


@dataclass
class Module:
    name: str  # groundproxy.proxy.app
    path: Path
    is_package: bool
    lines: int
    tree: ast.Module
    imports: set[str] = field(default_factory=set)  # every absolute name it imports
    # the same, less those only under ``if TYPE_CHECKING:`` (type-only imports)
    runtime_imports: set[str] = field(default_factory=set)

    @property
    def top(self) -> str:  # groundproxy.proxy, training, bench, tests
        return _top(self.name)

    @property
    def runtime(self) -> bool:
        return self.top in RUNTIME


def _top(name: str) -> str:
    if name.split(".")[0] in OUTSIDE:
        return name.split(".")[0]
    return ".".join(name.split(".")[:2])


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts if parts[0] in OUTSIDE else [PACKAGE, *parts])


def _type_checking(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return isinstance(test, ast.Name | ast.Attribute) and ast.unparse(test).endswith(
        "TYPE_CHECKING"
    )


def _walk(tree: ast.AST, with_type_only: bool) -> Iterator[ast.AST]:
    """``ast.walk``; without ``with_type_only``, the bodies of ``if TYPE_CHECKING:`` skipped."""
    work = [tree]
    while work:
        node = work.pop()
        yield node
        if not with_type_only and _type_checking(node):
            assert isinstance(node, ast.If)
            work.extend(node.orelse)
            continue
        work.extend(ast.iter_child_nodes(node))


def _imported(
    tree: ast.AST, module: str, is_package: bool, with_type_only: bool = True
) -> Iterator[str]:
    for node in _walk(tree, with_type_only):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = module.split(".")
                base = base if is_package else base[:-1]
                base = base[: len(base) - (node.level - 1)]
                prefix = ".".join([*base, node.module] if node.module else base)
            else:
                prefix = node.module or ""
            yield prefix
            yield from (f"{prefix}.{a.name}" for a in node.names if a.name != "*")


def parsed(name: str, path: Path, text: str) -> Module:
    is_package = path.name == "__init__.py"
    tree = ast.parse(text, str(path))
    mod = Module(name, path, is_package, len(text.splitlines()), tree)
    mod.imports = set(_imported(tree, name, is_package))
    mod.runtime_imports = set(_imported(tree, name, is_package, with_type_only=False))
    return mod


@cache
def modules() -> dict[str, Module]:
    found: dict[str, Module] = {}
    for root in (*ROOTS, *OUTSIDE):
        for path in sorted((ROOT / root).rglob("*.py")):
            if "node_modules" in path.parts:
                continue
            name = _module_name(path)
            found[name] = parsed(name, path, path.read_text(encoding="utf-8"))
    return found


Modules = dict[str, Module]


def _edges(mod: Module, mods: Modules | None = None, runtime: bool = False) -> set[str]:
    """The modules of the tree ``mod`` imports (``from pkg import sub`` → ``pkg.sub``);
    ``runtime``: type-only imports left out."""
    known = modules() if mods is None else mods
    names = mod.runtime_imports if runtime else mod.imports
    return {i for i in names if i in known and i != mod.name}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def _why(graph_edges: dict[str, set[str]], cycle: list[str]) -> list[str]:
    """The module imports behind a package cycle, for the failure message."""
    members = set(cycle)
    return sorted(
        f"{m.name} -> {target}"
        for m in modules().values()
        if m.top in members
        for target in _edges(m)
        if modules()[target].top in members and modules()[target].top != m.top
    )
