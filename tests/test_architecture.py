"""The shape of the code, checked from the source (``ast``, nothing imported).

- no import cycle between the top-level packages, nor between modules;
- ``guards/`` (pure logic) imports no web framework or HTTP client;
- ``proxy/``, ``integrations/`` and ``testing/`` use the guard through its public surface
  (``groundproxy.guards``: the two stages and what serves them) and its data types
  (``groundproxy.guards.types``), never the modules behind it;
- no module over 400 lines;
- runtime code never imports the training code (``groundproxy.models.train``);
- every folder with an ``__init__.py`` is a package listed in pyproject's
  ``[tool.setuptools] packages`` (training code excepted: it stays out of the wheel).

Imports inside functions count (a lazy import still ties the modules together), those
under ``if TYPE_CHECKING:`` too.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "groundproxy"
ROOTS = ("errors", "proxy", "guards", "retrieval", "models", "policies", "testing", "integrations")
TRAINING = f"{PACKAGE}.models.train"
MAX_LINES = 400
NOT_IN_GUARDS = frozenset({"fastapi", "starlette", "httpx", "uvicorn"})


@dataclass
class Module:
    name: str  # groundproxy.proxy.app
    path: Path
    is_package: bool
    lines: int
    imports: set[str] = field(default_factory=set)  # every absolute name it imports

    @property
    def top(self) -> str:  # groundproxy.proxy
        # the training code is a layer of its own above the runtime (nothing imports it, see
        # test_runtime_never_imports_training_code): it may drive the serve path (proxy) to
        # make its training signals (models/train/answer_combiner.py)
        if self.name == TRAINING or self.name.startswith(f"{TRAINING}."):
            return TRAINING
        return ".".join(self.name.split(".")[:2])


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join([PACKAGE, *parts])


def _imported(tree: ast.AST, module: str, is_package: bool) -> Iterator[str]:
    for node in ast.walk(tree):
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


@cache
def modules() -> dict[str, Module]:
    found: dict[str, Module] = {}
    for root in ROOTS:
        for path in sorted((ROOT / root).rglob("*.py")):
            name = _module_name(path)
            text = path.read_text(encoding="utf-8")
            is_package = path.name == "__init__.py"
            mod = Module(name, path, is_package, len(text.splitlines()))
            mod.imports = set(_imported(ast.parse(text, str(path)), name, is_package))
            found[name] = mod
    return found


def _edges(mod: Module) -> set[str]:
    """The modules of the tree ``mod`` imports (``from pkg import sub`` → ``pkg.sub``)."""
    known = modules()
    return {i for i in mod.imports if i in known and i != mod.name}


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


def test_the_tree_is_found() -> None:
    names = modules()
    assert f"{PACKAGE}.proxy.app" in names and f"{PACKAGE}.guards.pipeline" in names
    assert f"{PACKAGE}.errors" in names
    assert len(names) > 80


def test_no_import_cycle_between_packages() -> None:
    graph: dict[str, set[str]] = {}
    for mod in modules().values():
        targets = {modules()[t].top for t in _edges(mod)} - {mod.top}
        graph.setdefault(mod.top, set()).update(targets)
    cycles = _cycles(graph)
    assert not cycles, {" <-> ".join(c): _why(graph, c) for c in cycles}


def test_no_import_cycle_between_modules() -> None:
    graph = {name: _edges(mod) for name, mod in modules().items()}
    # a package's __init__ importing its own submodules is not a cycle of design
    for name, mod in modules().items():
        if mod.is_package:
            graph[name] = {t for t in graph[name] if not t.startswith(f"{name}.")}
    assert _cycles(graph) == []


def test_guards_import_no_web_framework_or_http_client() -> None:
    bad = sorted(
        f"{m.name} imports {i}"
        for m in modules().values()
        if m.top == f"{PACKAGE}.guards"
        for i in m.imports
        if i.split(".")[0] in NOT_IN_GUARDS
    )
    assert bad == []


def test_the_serving_layer_uses_only_the_guards_public_surface() -> None:
    allowed = {f"{PACKAGE}.guards", f"{PACKAGE}.guards.types"}
    internals = {n for n in modules() if n.startswith(f"{PACKAGE}.guards.")} - allowed
    bad = {
        m.name: sorted(m.imports & internals)
        for m in modules().values()
        if m.top in {f"{PACKAGE}.proxy", f"{PACKAGE}.integrations", f"{PACKAGE}.testing"}
        and m.imports & internals
    }
    assert bad == {}


def test_errors_module_imports_nothing_of_ours() -> None:
    assert _edges(modules()[f"{PACKAGE}.errors"]) == set()


def test_no_module_over_400_lines() -> None:
    long = {
        str(m.path.relative_to(ROOT)): m.lines for m in modules().values() if m.lines > MAX_LINES
    }
    assert long == {}


def test_runtime_never_imports_training_code() -> None:
    bad = sorted(
        f"{m.name} imports {i}"
        for m in modules().values()
        if not (m.name == TRAINING or m.name.startswith(f"{TRAINING}."))
        for i in m.imports
        if i == TRAINING or i.startswith(f"{TRAINING}.")
    )
    assert bad == []


def test_every_package_folder_is_listed_in_pyproject() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    listed = set(config["tool"]["setuptools"]["packages"])
    assert config["tool"]["setuptools"]["package-dir"] == {PACKAGE: "."}
    folders = {_module_name(init) for root in ROOTS for init in (ROOT / root).rglob("__init__.py")}
    training = {f for f in folders if f == TRAINING or f.startswith(f"{TRAINING}.")}
    assert training, "models/train moved: update this test"
    assert sorted(folders - training - listed) == []  # a folder the wheel would leave out
    assert sorted(listed - folders) == []  # a listed package with no folder
    assert not listed & training  # training code stays out of the wheel
