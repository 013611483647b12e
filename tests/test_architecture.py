"""The shape of the code, checked from the source (``ast``, nothing imported).

- every package imports only the layers below it (:data:`LAYERS`): errors ← policies ←
  guards ← retrieval ← models ← proxy ← integrations / testing ← training (``training/``,
  an import root of its own like ``bench/``) ← bench ← tests — so the runtime never imports
  the test doubles, the training code or the benchmarks, and nothing imports the tests;
- no import cycle between the top-level packages, nor between modules;
- no two subpackages of ``proxy/`` import each other (imports under ``if TYPE_CHECKING:``
  aside): serving → streaming → upstream → openai, never back;
- nothing imports ``training``, ``bench`` or ``tests`` through the package's name
  (``groundproxy.training``: the checkout's ``.gp-root`` link would let it);
- ``guards/action.py`` alone chooses an action (:func:`action_choices` says what counts);
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
  ``[tool.setuptools] packages``, and ``training/`` none of them (it stays out of the wheel).

Imports inside functions count (a lazy import still ties the modules together), those
under ``if TYPE_CHECKING:`` too (except for the proxy's subpackages rule). Each rule is a
function over the modules, and :func:`test_each_rule_catches_a_planted_violation` adds one
breach of each to the parsed tree and checks that the rule names it.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from pathlib import Path

from tests.source_tree import (
    ACTION_MODULE,
    GUARDS_SURFACE,
    LAYERS,
    MAX_LINES,
    MAX_PARAMS,
    NOT_IN_GUARDS,
    OUTSIDE,
    PACKAGE,
    PROXY_SURFACE,
    ROOT,
    ROOTS,
    TRAINING,
    TYPES_MODULE,
    Module,
    Modules,
    _cycles,
    _edges,
    _module_name,
    _why,
    modules,
    parsed,
)


def test_the_tree_is_found() -> None:
    names = modules()
    assert f"{PACKAGE}.proxy.app" in names and f"{PACKAGE}.guards.pipeline" in names
    assert f"{PACKAGE}.errors" in names and "bench.guard_latency" in names
    assert "tests.test_architecture" in names and f"{TRAINING}.answer_combiner" in names
    assert {m.top for m in names.values()} == set(LAYERS)  # every package has a layer
    assert len(names) > 80


def layer_breaches(mods: Modules) -> list[str]:
    """Imports of a package of the same or a higher layer (``models`` → ``proxy``)."""
    return sorted(
        f"{m.name} -> {target}"
        for m in mods.values()
        for target in _edges(m, mods)
        if mods[target].top != m.top and LAYERS[mods[target].top] >= LAYERS[m.top]
    )


def test_every_package_imports_only_the_layers_below() -> None:
    assert layer_breaches(modules()) == []


def _proxy_subpackage(name: str, mods: Modules) -> str | None:
    """``groundproxy.proxy.serving`` for any module under ``proxy/serving/``; None for the
    proxy's own modules (``proxy/app.py``) and everything outside ``proxy/``."""
    parts = name.split(".")
    if parts[:2] != [PACKAGE, "proxy"] or len(parts) < 3:
        return None
    folder = ".".join(parts[:3])
    return folder if folder in mods and mods[folder].is_package else None


def mutual_proxy_imports(mods: Modules) -> dict[str, list[str]]:
    """Pairs of ``proxy/`` subpackages that import each other (runtime imports), with the
    module imports behind each pair."""
    edges: dict[tuple[str, str], list[str]] = {}
    for m in mods.values():
        source = _proxy_subpackage(m.name, mods)
        if source is None:
            continue
        for target in _edges(m, mods, runtime=True):
            sink = _proxy_subpackage(target, mods)
            if sink and sink != source:
                edges.setdefault((source, sink), []).append(f"{m.name} -> {target}")
    return {
        f"{a} <-> {b}": sorted(edges[(a, b)] + edges[(b, a)])
        for a, b in sorted(edges)
        if a < b and (b, a) in edges
    }


def test_no_two_proxy_subpackages_import_each_other() -> None:
    assert mutual_proxy_imports(modules()) == {}


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
    work: list[tuple[ast.AST, str]] = [(mod.tree, mod.name)]
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


def over_six_parameters(mods: Modules) -> dict[str, int]:
    """Functions of the runtime, the test doubles and the training code over 6 parameters."""
    checked = [m for m in mods.values() if LAYERS[m.top] <= LAYERS[TRAINING]]
    counts = {name: n for m in checked for name, n in _functions(m)}
    return {name: n for name, n in counts.items() if n > MAX_PARAMS}


def test_no_runtime_or_training_function_takes_more_than_six_parameters() -> None:
    assert over_six_parameters(modules()) == {}


def test_errors_module_imports_nothing_of_ours() -> None:
    assert _edges(modules()[f"{PACKAGE}.errors"]) == set()


def test_no_module_over_400_lines() -> None:
    long = {
        str(m.path.relative_to(ROOT)): m.lines
        for m in modules().values()
        if m.top not in ("bench", "tests") and m.lines > MAX_LINES
    }
    assert long == {}


def _under(name: str, roots: tuple[str, ...]) -> bool:
    return any(name == r or name.startswith(f"{r}.") for r in roots)


def runtime_imports_of_outside_code(mods: Modules) -> list[str]:
    """Lazy imports too; a process that is TOLD to load a test double by its import path
    (``GROUNDPROXY_EMBEDDER=groundproxy.testing.embedders:HashingEmbedder``) is the only way
    one reaches it."""
    banned = (f"{PACKAGE}.testing", *OUTSIDE, *(f"{PACKAGE}.{o}" for o in OUTSIDE))
    return sorted(
        f"{m.name} imports {i}"
        for m in mods.values()
        if m.runtime
        for i in m.imports
        if _under(i, banned)
    )


def test_runtime_never_imports_test_doubles_training_code_or_benchmarks() -> None:
    assert runtime_imports_of_outside_code(modules()) == []


def test_nothing_imports_training_bench_or_tests_under_the_package_name() -> None:
    """``groundproxy.training.fit`` would import (``.gp-root/groundproxy`` is a link to the
    checkout) — a second copy of the module, and a runtime import no other rule would see."""
    aliased = tuple(f"{PACKAGE}.{o}" for o in OUTSIDE)
    bad = sorted(
        f"{m.name} imports {i}" for m in modules().values() for i in m.imports if _under(i, aliased)
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


# ---------------------------------------------------------------- one place chooses an action


def _literal_values(tree: ast.Module, alias: str) -> set[str]:
    """The strings of ``alias = Literal["a", "b", ...]`` at the top of ``tree``."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == alias:
            return {
                c.value
                for c in ast.walk(node.value)
                if isinstance(c, ast.Constant) and isinstance(c.value, str)
            }
    raise AssertionError(f"{alias} is not a Literal in {TYPES_MODULE}: update this test")


def _action_fields(tree: ast.Module) -> dict[str, int]:
    """The guard's data types that carry an action: class name → the field's position."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            fields = [ast.unparse(s.target) for s in node.body if isinstance(s, ast.AnnAssign)]
            if "action" in fields:
                out[node.name] = fields.index("action")
    return out


def _names_action(node: ast.AST) -> bool:
    """``action``, ``x.action``, or a function named for it (``_raise_action``)."""
    name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")
    return name == "action" or "action" in name.split("_")


def _gives_a_literal(value: ast.AST | None, literals: set[str]) -> bool:
    """Does ``value`` hold one of ``literals``, other than as a comparison's operand?"""
    if value is None:
        return False
    compared = {
        id(c)
        for n in ast.walk(value)
        if isinstance(n, ast.Compare)
        for c in (n.left, *n.comparators)
    }
    return any(
        isinstance(c, ast.Constant) and c.value in literals and id(c) not in compared
        for c in ast.walk(value)
    )


def _choices_in(node: ast.AST, literals: set[str], positions: dict[str, int]) -> list[ast.AST]:
    """The parts of ``node`` that give an action a literal (:func:`action_choices`)."""

    def gives(value: ast.AST | None) -> bool:
        return _gives_a_literal(value, literals)

    if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return [node] if any(map(_names_action, targets)) and gives(node.value) else []
    if isinstance(node, ast.Dict):
        pairs = zip(node.keys, node.values, strict=True)
        return [
            v for k, v in pairs if isinstance(k, ast.Constant) and k.value == "action" and gives(v)
        ]
    if not isinstance(node, ast.Call):
        return []
    out: list[ast.AST] = [k for k in node.keywords if k.arg == "action" and gives(k.value)]
    if _names_action(node.func):  # _raise_action("unverified")
        out += [a for a in node.args if gives(a)]
    func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
    at = positions.get(func)  # GuardReport(text, text, [], 1.0, "flag")
    if at is not None and len(node.args) > at and gives(node.args[at]):
        out.append(node.args[at])
    return out


def action_choices(mods: Modules) -> list[str]:
    """Where a module other than ``guards/action.py`` chooses an action: an answer or claim
    action literal (``AnswerAction`` / ``ClaimAction`` of ``guards/types.py``, e.g.
    ``"block"``, ``"blocked"``) given to an action — assigned to a name or attribute
    ``action``, passed as ``action=``, as a function's argument whose name says ``action``
    (``_raise_action("unverified")``), at the action's position of a guard data type
    (``GuardReport(text, text, [], 1.0, "flag")``) or as the value of a dict key
    ``"action"``. Reading one (``report.action == "block"``) is not a choice; the data
    types' own field defaults (``ClaimResult.action = "kept"``) are not either. Runtime and
    training code; the test doubles (``testing/``) script their outcomes."""
    types = mods[TYPES_MODULE].tree
    literals = _literal_values(types, "AnswerAction") | _literal_values(types, "ClaimAction")
    positions = _action_fields(types)
    found = []
    for m in mods.values():
        if m.name == ACTION_MODULE or not (m.runtime or m.top == TRAINING):
            continue
        fields = set()  # the data types' field defaults
        if m.name == TYPES_MODULE:
            fields = {id(s) for c in m.tree.body if isinstance(c, ast.ClassDef) for s in c.body}
        for node in ast.walk(m.tree):
            if id(node) not in fields:
                found += [
                    f"{m.name}: {ast.unparse(c)}" for c in _choices_in(node, literals, positions)
                ]
    return sorted(found)


# Choices made outside guards/action.py today, each to move there (issue 39.1: the pipeline's
# decide stage, the judge's failure and the block-and-refuse path included). The test fails
# on a new one AND on an entry that is gone: delete it here when its code moves.
KNOWN_CHOICES_OUTSIDE_ACTION = {
    # the sentence stream's running answer (StreamedAnswer): its start, block and unverified
    f"{PACKAGE}.guards.answer.streamed: self.action: AnswerAction = 'none'",
    f"{PACKAGE}.guards.answer.streamed: self.action = 'block'",
    f"{PACKAGE}.guards.answer.streamed: r.action = 'blocked'",
    f"{PACKAGE}.guards.answer.streamed: 'unverified'",
    # the report of a guard that did not run (built for action.py's rows 1-2)
    f"{PACKAGE}.guards.answer.failures: action='unverified'",
}


def test_only_guards_action_chooses_an_action() -> None:
    found = action_choices(modules())
    new = sorted(set(found) - KNOWN_CHOICES_OUTSIDE_ACTION)
    moved = sorted(KNOWN_CHOICES_OUTSIDE_ACTION - set(found))
    assert new == [], "an action is chosen outside guards/action.py: choose it there"
    assert moved == [], "these moved into guards/action.py: delete them from the known list"


# ---------------------------------------------------------------- the rules catch a breach


def _planted(name: str, source: str) -> Modules:
    """The real tree, plus (or with, in place of its module) ``name`` holding ``source``."""
    parts = name.split(".")
    rel = Path(*(parts[1:] if parts[0] == PACKAGE else parts)).with_suffix(".py")
    return {**modules(), name: parsed(name, ROOT / rel, source)}


def test_each_rule_catches_a_planted_violation() -> None:
    models_up = _planted(f"{PACKAGE}.models.planted", "from groundproxy.proxy import app\n")
    assert layer_breaches(models_up) == [
        f"{PACKAGE}.models.planted -> {PACKAGE}.proxy",
        f"{PACKAGE}.models.planted -> {PACKAGE}.proxy.app",
    ]
    # serving imports streaming; a streaming module importing serving back makes a pair,
    # unless only for its types
    pair = f"{PACKAGE}.proxy.serving <-> {PACKAGE}.proxy.streaming"
    back = f"{PACKAGE}.proxy.streaming.planted"
    pairs = mutual_proxy_imports(_planted(back, "from groundproxy.proxy.serving import call\n"))
    assert list(pairs) == [pair]
    assert f"{back} -> {PACKAGE}.proxy.serving.call" in pairs[pair]
    typed = "if TYPE_CHECKING:\n    from groundproxy.proxy.serving import call\n"
    assert mutual_proxy_imports(_planted(back, typed)) == {}
    for source in ("import training.fit\n", "from groundproxy.training import fit\n"):
        assert runtime_imports_of_outside_code(_planted(f"{PACKAGE}.proxy.planted", source))
    wide = "def fit(a, b, c, d, e, f, g):\n    pass\n"
    assert over_six_parameters(_planted(f"{TRAINING}.planted", wide)) == {
        f"{TRAINING}.planted.fit": 7
    }
    choices = (
        "report.action = 'block'\n"
        "r = dataclasses.replace(r, action='rewrite' if worse else r.action)\n"
        "GuardReport(text, text, [], 1.0, 'flag')\n"
        "body = {'action': 'annotate'}\n"
        "keep = report.action == 'none' and GuardReport(t, t, [], 1.0, report.action)\n"
    )
    planted = _planted(f"{PACKAGE}.proxy.serving.planted", choices)
    assert sorted(set(action_choices(planted)) - KNOWN_CHOICES_OUTSIDE_ACTION) == [
        f"{PACKAGE}.proxy.serving.planted: 'annotate'",
        f"{PACKAGE}.proxy.serving.planted: 'flag'",
        f"{PACKAGE}.proxy.serving.planted: action='rewrite' if worse else r.action",
        f"{PACKAGE}.proxy.serving.planted: report.action = 'block'",
    ]
