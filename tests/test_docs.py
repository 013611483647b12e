"""The documentation site's generated blocks cover what they describe (issue 41, Docs).

``docs/_hooks/generate.py`` makes the policy reference, the module map and the benchmark
tables from the code and ``bench/results`` each time ``mkdocs build`` runs (``make docs``,
part of ``make test``), so they cannot go stale; these tests check that what they are made
from is complete: every policy field has its meaning in the annotated ``policies/demo.yaml``,
every module of the wheel says what it is, every marker renders, and every results file a
page names exists.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

from groundproxy.policies.schema import Policy
from tests.readme_commands import REPO, pages

HOOK = REPO / "docs" / "_hooks" / "generate.py"


def _generate() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_generate", HOOK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen = _generate()


def test_every_policy_field_is_in_the_reference_with_its_meaning() -> None:
    comments = gen.demo_comments((REPO / "policies" / "demo.yaml").read_text("utf-8"))
    fields = [path for path, _, nested in gen.policy_rows(Policy) if nested is None]
    assert len(fields) >= 50
    missing = [path for path in fields if not comments.get(path)]
    assert missing == [], f"add a comment beside these keys in policies/demo.yaml: {missing}"
    reference = gen.policy_reference()
    assert all(f"| `{path}` |" in reference for path in fields)
    assert "| `retrieval.top_k` | integer | `3` | ≥ 1, ≤ 50 |" in reference


def test_the_reference_follows_the_schema_not_a_copy() -> None:
    """A field's default and bounds come from pydantic: change the model, the row changes."""
    field = Policy.model_fields["latency_budget_ms"]
    assert gen._default(field) == f"`{field.default}`"
    assert gen._bounds(field.metadata) == "≥ 1"


def test_every_module_of_the_wheel_is_in_the_map_and_says_what_it_is() -> None:
    rows = {path: doc for path, doc, _ in gen.module_rows()}
    on_disk = {
        str(p.relative_to(REPO))
        for package in gen.packages()
        for p in REPO.joinpath(*package.split(".")[1:]).glob("*.py")
    }
    assert set(rows) == on_disk and len(rows) > 150
    silent = [
        p for p, doc in rows.items() if not doc and not p.endswith(("__init__.py", "__main__.py"))
    ]
    assert silent == [], f"these modules need a docstring (the module map shows it): {silent}"


@pytest.mark.parametrize("page", pages()[1:], ids=lambda p: p.name)
def test_every_page_renders_and_names_only_results_that_exist(page: Path) -> None:
    text = gen.render(page.read_text(encoding="utf-8"))
    assert "<!-- gen:" not in text
    for name in re.findall(r"bench/results/([\w./-]+\.(?:txt|json|png))", text):
        assert (REPO / "bench" / "results" / name).exists(), f"{page.name}: {name}"


def test_an_unknown_marker_fails_the_build() -> None:
    with pytest.raises(ValueError, match="unknown generated block"):
        gen.render("<!-- gen:no-such-table -->\n")


def _layout_rows(page: Path, heading: str) -> set[str]:
    """The folders (first column) of the table under ``heading`` in ``page``."""
    text = page.read_text(encoding="utf-8").split(f"\n{heading}\n", 1)[1]
    rows = re.findall(r"^\| `([\w.-]+)/` \|", text.split("\n## ", 1)[0], re.M)
    return set(rows)


def test_the_layout_tables_name_every_top_level_folder_with_code() -> None:
    """DESIGN's and Architecture's layout tables are written by hand: each names every
    top-level folder that holds Python code (the site's own build hook under docs/ aside),
    and none that is gone — ``models/train/`` became ``training/`` with no row at first."""
    code = {
        d.name
        for d in REPO.iterdir()
        if d.is_dir()
        and not d.name.startswith(".")
        and d.name != "docs"
        and any(p for p in d.rglob("*.py") if "node_modules" not in p.parts)
    }
    assert {"proxy", "guards", "training", "bench", "tests"} <= code
    docs = REPO / "docs"
    assert _layout_rows(docs / "DESIGN.md", "## Layout (fixed top level)") == code
    assert _layout_rows(docs / "architecture.md", "## Layout") == code
