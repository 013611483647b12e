"""Pages generated from the code and the measured results at build time (a mkdocs hook).

A page asks for a generated block with a marker line of its own:

- ``<!-- gen:policy-reference -->``: every field of the policy model
  (``groundproxy.policies.schema.Policy``): its type, default and bounds as pydantic has
  them, its meaning from the comment beside it in ``policies/demo.yaml``;
- ``<!-- gen:module-map -->``: every module of the installed package, with the first line
  of its docstring (read with ``ast``, nothing imported);
- ``<!-- gen:bench-rewrite NAME -->``: the rewrite bench's per-file rows from
  ``bench/results/NAME.json``, with the command line of ``NAME.txt``;
- ``<!-- gen:bench-latency NAME -->``: the latency bench's paths from ``NAME.json``;
- ``<!-- gen:bench-overload NAME -->``: the overload bench's tenants from ``NAME.json``;
- ``<!-- gen:bench-accuracy NAME -->``: the accuracy bench's table from ``NAME.json``;
- ``<!-- gen:bench-file NAME.txt -->``: a results file as it was written (command first);
- ``<!-- gen:module-doc PATH -->``: a module's docstring (e.g. the metrics it defines).

So the pages cannot drift from what they describe: ``mkdocs build`` makes them from the
source each time; ``tests/test_docs.py`` checks that every field and module is covered.
"""

from __future__ import annotations

import ast
import json
import math
import re
import tomllib
import types
import typing
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"
DEMO_POLICY = ROOT / "policies" / "demo.yaml"
_MARKER = re.compile(r"^<!-- gen:([a-z-]+)(?: ([\w./-]+))? -->$", re.M)


# ---------------------------------------------------------------- policy reference


def demo_comments(text: str) -> dict[str, str]:
    """``dotted.key`` -> the comment beside it in the annotated demo policy (a comment
    line under it, indented past the key, continues it)."""
    found: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    last: str | None = None
    for line in text.splitlines():
        key = re.match(r"^(\s*)([a-z_]+):(.*)$", line)
        if key is None:
            more = re.match(r"^\s{20,}#\s?(.*)$", line)
            if more and last is not None:
                found[last] = f"{found[last]} {more.group(1).strip()}".strip()
            elif not line.strip().startswith("- "):
                last = None
            continue
        indent, name, rest = len(key.group(1)), key.group(2), key.group(3)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = ".".join([*(n for _, n in stack), name])
        stack.append((indent, name))
        comment = re.search(r"\s{2,}#\s?(.*)$", rest)
        found[path] = comment.group(1).strip() if comment else ""
        last = path
    return found


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return " \\| ".join(f"`{a}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        parts = [_type_name(a) for a in args if a is not type(None)]
        return " or ".join(parts) + (" or `null`" if type(None) in args else "")
    if origin is list:
        return f"list of {_type_name(args[0])}"
    if origin is dict:
        return f"map {_type_name(args[0])} → {_type_name(args[1])}"
    if isinstance(annotation, type) and hasattr(annotation, "model_fields"):
        return "object"
    names = {str: "string", int: "integer", float: "number", bool: "boolean"}
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _bounds(metadata: list[Any]) -> str:
    signs = {"ge": "≥", "gt": ">", "le": "≤", "lt": "<"}
    out = []
    for item in metadata:
        for attr, sign in signs.items():
            value = getattr(item, attr, None)
            if value is not None:
                out.append(f"{sign} {value:,}" if isinstance(value, int) else f"{sign} {value}")
    return ", ".join(out)


def _default(field: Any) -> str:
    if field.is_required():
        return "**required**"
    value = field.get_default(call_default_factory=True)
    if hasattr(value, "model_dump"):
        return "(below)"
    shown = json.dumps(value, ensure_ascii=False)
    return f"`{shown}`" if len(shown) <= 40 else f"`{shown[:37]}…`"


def policy_rows(model: Any, prefix: str = "") -> list[tuple[str, Any, Any]]:
    """(dotted key, field, the nested model or None) for every field, depth first."""
    rows: list[tuple[str, Any, Any]] = []
    for name, field in model.model_fields.items():
        path = f"{prefix}{name}"
        nested = field.annotation if hasattr(field.annotation, "model_fields") else None
        rows.append((path, field, nested))
        if nested is not None:
            rows.extend(policy_rows(nested, f"{path}."))
    return rows


def policy_reference() -> str:
    from groundproxy.policies.schema import Policy

    comments = demo_comments(DEMO_POLICY.read_text(encoding="utf-8"))
    lines = [
        "| key | type | default | bounds | meaning |",
        "|---|---|---|---|---|",
    ]
    for path, field, _ in policy_rows(Policy):
        meaning = comments.get(path, "").replace("|", "\\|")
        lines.append(
            f"| `{path}` | {_type_name(field.annotation)} | {_default(field)} | "
            f"{_bounds(field.metadata)} | {meaning} |"
        )
    return "\n".join(lines)


# ---------------------------------------------------------------- module map


def packages() -> list[str]:
    """The installed package's folders, as pyproject lists them (``groundproxy.x.y``)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return list(config["tool"]["setuptools"]["packages"])


def first_line(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    if not doc:
        return ""
    para = doc.strip().split("\n\n")[0]
    return " ".join(para.split())


def module_rows() -> list[tuple[str, str, int]]:
    """(module path, docstring's first paragraph, lines) for every module of the wheel."""
    rows = []
    for package in packages():
        folder = ROOT.joinpath(*package.split(".")[1:])
        for path in sorted(folder.glob("*.py")):
            lines = path.read_text(encoding="utf-8").count("\n")
            rows.append((str(path.relative_to(ROOT)), first_line(path), lines))
    return rows


def module_map() -> str:
    out: list[str] = []
    current = None
    for path, doc, lines in module_rows():
        folder = str(Path(path).parent) + "/"
        if folder != current:
            current = folder
            out += ["", f"### `{folder}`", "", "| module | lines | what it is |", "|---|---|---|"]
        cell = doc.replace("|", "\\|")
        out.append(f"| `{Path(path).name}` | {lines} | {cell} |")
    return "\n".join(out).strip()


# ---------------------------------------------------------------- measured results


def provenance(name: str) -> str:
    """How ``NAME.json`` was made, from the first line of ``NAME.txt``: a ``$ command  #
    when, where`` line, else its first two lines (the bench's own header)."""
    txt = RESULTS / f"{name}.txt"
    if not txt.exists():
        return f"`bench/results/{name}.json`"
    lines = txt.read_text(encoding="utf-8").splitlines()
    if lines[0].startswith("$ "):
        command, _, note = lines[0][2:].partition("  #")
        if not note.strip() and len(lines) > 1 and lines[1].startswith("# "):
            note = lines[1][2:]
        note = f" ({note.strip()})" if note.strip() else ""
        return f"`{command.strip()}`{note}, `bench/results/{name}.json`"
    return f"`bench/results/{name}.json` ({'; '.join(line.strip() for line in lines[:2])})"


def bench_rewrite(name: str) -> str:
    rows = json.loads((RESULTS / f"{name}.json").read_text(encoding="utf-8"))
    lines = [
        f"Measured by {provenance(name)}:",
        "",
        "| eval file | correct / hallucinated | correct answers changed | "
        "hallucinated repaired | corrected | blocked | ms / row |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['file']} | {r['n_ok']} / {r['n_hal']} | {r['ok_changed']:.1%} | "
            f"{r['hal_changed']:.1%} | {r['hal_corrected']:.1%} | {r['hal_blocked']:.1%} | "
            f"{r['ms_per_row']:.0f} |"
        )
    return "\n".join(lines)


def _ms(value: Any) -> str:
    if not isinstance(value, int | float) or math.isnan(value):
        return "—"
    return f"{value:.1f}"


def bench_latency(name: str) -> str:
    data = json.loads((RESULTS / f"{name}.json").read_text(encoding="utf-8"))
    lines = [
        f"Measured: {provenance(name)}; {data['index']['chunks']:,} chunks in the index, "
        f"{data['claims']} claims an answer.",
        "",
        "| path | c=1 p50 / p99 ms | added p50 ms | guard p50 ms | repeat guard p50 ms | "
        "c=16 p50 / p99 ms | c=16 req/s | errors |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in data["rows"]:
        lines.append(
            f"| {r['path']} | {_ms(r['c1_p50_ms'])} / {_ms(r['c1_p99_ms'])} | "
            f"{_ms(r['c1_added_p50_ms'])} | {_ms(r['c1_guard_p50_ms'])} | "
            f"{_ms(r['c1_repeat_guard_p50_ms'])} | {_ms(r['c16_p50_ms'])} / "
            f"{_ms(r['c16_p99_ms'])} | {_ms(r['c16_rps'])} | {r['errors']} |"
        )
    return "\n".join(lines)


def bench_overload(name: str) -> str:
    data = json.loads((RESULTS / f"{name}.json").read_text(encoding="utf-8"))
    probe = data.get("healthz_apart_ms") or data["healthz_ms"]
    rss = [mb for _, mb in data["rss"]]
    lines = [
        f"Measured: {provenance(name)}. Capacity {data['capacity_rps']:.1f} answers/s, offered "
        f"{data['offered_rps']:.1f} req/s for {data['wall_s']:.0f} s; `/healthz` p50 / p99 "
        f"{probe['p50']:.1f} / {probe['p99']:.1f} ms; RSS {rss[0]:.0f} → {rss[-1]:.0f} MB "
        f"({(rss[-1] / rss[0] - 1):+.1%}).",
        "",
        "| tenant | answered | declared 429 | errors | unverified | refused |",
        "|---|---|---|---|---|---|",
    ]
    for tenant, t in data["tenants"].items():
        lines.append(
            f"| {tenant} | {t['ok']:,} | {t['declared_429']:,} | {t['errors']} | "
            f"{t['unverified']} | {t['refused']} |"
        )
    return "\n".join(lines)


def bench_accuracy(name: str) -> str:
    data = json.loads((RESULTS / f"{name}.json").read_text(encoding="utf-8"))
    verifiers = list(dict.fromkeys(r["verifier"] for r in data["table"]))
    cells: dict[str, dict[str, str]] = {}
    rows: dict[str, int] = {}
    for r in data["table"]:
        cells.setdefault(r["dataset"], {})[r["verifier"]] = (
            f"{r['balanced_accuracy']:.3f} / {r['roc_auc']:.3f}"
        )
        rows[r["dataset"]] = r["n"]
    lines = [
        f"Measured by {provenance(name)}; balanced accuracy / ROC-AUC:",
        "",
        "| eval file | rows | " + " | ".join(verifiers) + " |",
        "|---|---|" + "---|" * len(verifiers),
    ]
    for dataset, by in cells.items():
        lines.append(
            f"| {dataset} | {rows[dataset]} | "
            + " | ".join(by.get(v, "—") for v in verifiers)
            + " |"
        )
    return "\n".join(lines)


def module_doc(path: str) -> str:
    """A module's docstring as it is written, after its first line."""
    doc = ast.get_docstring(ast.parse((ROOT / path).read_text(encoding="utf-8"))) or ""
    body = doc.split("\n", 1)[1].strip() if "\n" in doc else doc
    return f"```text\n{body.replace('``', '`')}\n```"


def bench_file(name: str) -> str:
    text = (RESULTS / name).read_text(encoding="utf-8").rstrip()
    return f"`bench/results/{name}`:\n\n```text\n{text}\n```"


# ---------------------------------------------------------------- the hook

GENERATORS = {
    "policy-reference": lambda _: policy_reference(),
    "module-map": lambda _: module_map(),
    "bench-rewrite": bench_rewrite,
    "bench-latency": bench_latency,
    "bench-overload": bench_overload,
    "bench-accuracy": bench_accuracy,
    "bench-file": bench_file,
    "module-doc": module_doc,
}


def render(markdown: str) -> str:
    """Every marker of ``markdown`` replaced by what it asks for (an unknown one is an
    error, so a typo fails ``mkdocs build``)."""

    def one(match: re.Match[str]) -> str:
        kind, arg = match.group(1), match.group(2)
        if kind not in GENERATORS:
            raise ValueError(f"unknown generated block {kind!r}")
        return GENERATORS[kind](arg or "")

    return _MARKER.sub(one, markdown)


def on_page_markdown(markdown: str, **_: Any) -> str:
    return render(markdown)
