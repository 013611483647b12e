"""The shape of the code, checked from the source (``ast``, nothing imported).

- every package imports only the layers below it (:data:`LAYERS`): errors ← policies ←
  guards ← retrieval ← models ← proxy ← integrations / testing ← training (``training/``,
  an import root of its own like ``bench/``) ← bench ← tests — so the runtime never imports the test
  doubles, the training code or the benchmarks, and nothing imports the tests;
- no import cycle between the top-level packages, nor between modules;
- ``guards/`` (pure logic) imports no web framework or HTTP client;
- ``proxy/``, ``integrations/``, ``testing/`` and the training code use the guard through
  its public surface (``groundproxy.guards``: the two stages and what serves them) and its
  data types (``groundproxy.guards.types``), never the modules behind it;
- the training code imports only what a user could: the runtime's public modules, the
  proxy through ``groundproxy.proxy.offline`` only, never ``bench``;
- no function or method in the runtime or the training code takes more than 6 parameters
  (positional and keyword, ``self`` / ``cls`` not counted; ``*args`` / ``**kwargs`` not counted);
- no module over 450 lines (a hint to find a seam, not a shape to fold code into);
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
OUTSIDE = ("training", "bench", "tests")  # import roots of their own (``bench.x`` …)
TRAINING = "training"
MAX_LINES = 450  # a hint to find a seam (issue 39): past it split along one, never fold code
MAX_PARAMS = 6
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
    imports: set[str] = field(default_factory=set)  # every absolute name it imports

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
    for root in (*ROOTS, *OUTSIDE):
        for path in sorted((ROOT / root).rglob("*.py")):
            if "node_modules" in path.parts:
                continue
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
    assert f"{PACKAGE}.errors" in names and "bench.guard_latency" in names
    assert "tests.test_architecture" in names and f"{TRAINING}.answer_combiner" in names
    assert {m.top for m in names.values()} == set(LAYERS)  # every package has a layer
    assert len(names) > 80


def test_every_package_imports_only_the_layers_below() -> None:
    bad = sorted(
        f"{m.name} -> {target}"
        for m in modules().values()
        for target in _edges(m)
        if modules()[target].top != m.top and LAYERS[modules()[target].top] >= LAYERS[m.top]
    )
    assert bad == []


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
    internals = {n for n in modules() if n.startswith(f"{PACKAGE}.guards.")} - GUARDS_SURFACE
    users = {f"{PACKAGE}.proxy", f"{PACKAGE}.integrations", f"{PACKAGE}.testing", TRAINING}
    bad = {
        m.name: sorted(m.imports & internals)
        for m in modules().values()
        if m.top in users and m.imports & internals
    }
    assert bad == {}


def test_training_code_imports_only_what_a_user_could() -> None:
    """The runtime's public modules: the guard's surface, the proxy's offline surface, any
    module of errors / policies / retrieval / models; never bench, tests or testing."""
    public_tops = {f"{PACKAGE}.{p}" for p in ("errors", "policies", "retrieval", "models")}

    def public(name: str) -> bool:
        top = modules()[name].top
        return top in public_tops or top == TRAINING or name in GUARDS_SURFACE | PROXY_SURFACE

    bad = sorted(
        f"{m.name} -> {target}"
        for m in modules().values()
        if m.top == TRAINING
        for target in _edges(m)
        if not public(target)
    )
    assert bad == []
    assert all(name in modules() for name in PROXY_SURFACE)


def _params(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = node.args
    names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    return len(names) - (1 if names and names[0] in ("self", "cls") else 0)


def _functions(mod: Module) -> Iterator[tuple[str, int]]:
    """(qualified name, parameter count) of every function and method of ``mod``."""
    tree = ast.parse(mod.path.read_text(encoding="utf-8"))
    work: list[tuple[ast.AST, str]] = [(tree, mod.name)]
    while work:
        node, prefix = work.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                yield f"{prefix}.{child.name}", _params(child)
                work.append((child, f"{prefix}.{child.name}"))
            elif isinstance(child, ast.ClassDef):
                work.append((child, f"{prefix}.{child.name}"))
            else:
                work.append((child, prefix))


def test_no_runtime_or_training_function_takes_more_than_six_parameters() -> None:
    checked = [m for m in modules().values() if LAYERS[m.top] <= LAYERS[TRAINING]]
    counts = {name: n for m in checked for name, n in _functions(m)}
    over = {name: n for name, n in counts.items() if n > MAX_PARAMS}
    assert over == {}


def test_errors_module_imports_nothing_of_ours() -> None:
    assert _edges(modules()[f"{PACKAGE}.errors"]) == set()


def test_no_module_over_400_lines() -> None:
    long = {
        str(m.path.relative_to(ROOT)): m.lines
        for m in modules().values()
        if m.top not in ("bench", "tests") and m.lines > MAX_LINES
    }
    assert long == {}


def test_runtime_never_imports_test_doubles_training_code_or_benchmarks() -> None:
    """Lazy imports too; a process that is TOLD to load a test double by its import path
    (``GROUNDPROXY_EMBEDDER=groundproxy.testing.embedders:HashingEmbedder``) is the only way
    one reaches it."""
    banned = (f"{PACKAGE}.testing", TRAINING, "bench", "tests")
    bad = sorted(
        f"{m.name} imports {i}"
        for m in modules().values()
        if m.runtime
        for i in m.imports
        if any(i == b or i.startswith(f"{b}.") for b in banned)
    )
    assert bad == []


def test_every_package_folder_is_listed_in_pyproject() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    listed = set(config["tool"]["setuptools"]["packages"])
    assert config["tool"]["setuptools"]["package-dir"] == {PACKAGE: "."}
    folders = {_module_name(init) for root in ROOTS for init in (ROOT / root).rglob("__init__.py")}
    assert (ROOT / TRAINING / "__init__.py").is_file(), "training/ moved: update this test"
    assert sorted(folders - listed) == []  # a folder the wheel would leave out
    assert sorted(listed - folders) == []  # a listed package with no folder
    # training code stays out of the wheel (it is not under the package's folders either)
    assert not [p for p in listed if p.split(".")[1:2] == [TRAINING]]
