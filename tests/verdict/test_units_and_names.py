"""Issue 11 cases 4 and 5 through the real path (index on disk, embedhead ONNX)."""

from __future__ import annotations

import pytest

from groundproxy.proxy.serving.guarding import GuardService
from tests.verdict.conftest import guarded

# real processes, real model exports or many real-model requests: `make test` runs these,
# the working lane (`make fast`, -m "not slow") skips them
pytestmark = pytest.mark.slow


def test_other_languages_units_are_contradicted(verdict_guard: GuardService) -> None:
    german = guarded(verdict_guard, "german", "Die Garantie gilt 2 Jahre.")
    (claim,) = german.claims
    assert claim.verdict == "contradicted"
    assert claim.correction == "Die Garantie gilt 12 Monate."
    mixed = guarded(verdict_guard, "handbook", "The warranty lasts 24 Monate.")
    assert mixed.claims[0].verdict == "contradicted"
    assert mixed.claims[0].correction == "The warranty lasts 12 months."
    japanese = guarded(verdict_guard, "japanese", "保証期間は24か月です。")
    assert japanese.claims[0].verdict == "contradicted"
    assert japanese.claims[0].correction == "保証期間は12か月です。"


def test_prose_and_table_are_corrected_alike(verdict_guard: GuardService) -> None:
    answer = (
        "The warranty lasts 24 months.\n\n| Item | Warranty |\n|---|---|\n| Robot | 24 months |\n"
    )
    report = guarded(verdict_guard, "handbook", answer)
    body = report.text.split("Sources:")[0]
    assert "24" not in body
    assert "The warranty lasts 12 months" in body and "| 12 months" in body
    assert [c.verdict for c in report.claims].count("contradicted") == 2


def test_names_and_dates_match_in_other_forms(verdict_guard: GuardService) -> None:
    # diacritics, a day-month date without its year, a name by its parts
    report = guarded(
        verdict_guard,
        "wiki",
        "On 12 July, Reading announced that Jón Daði Böðvarsson had joined Millwall.",
    )
    (claim,) = report.claims
    # the names-and-numbers rule finds them all: no cap at P(supported) 0.3
    assert "claim names" not in claim.explanation, claim.explanation
    assert "claim states" not in claim.explanation, claim.explanation
