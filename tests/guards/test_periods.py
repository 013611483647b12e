"""Issue 40 item 16: frequencies and periods are values for the value rules ("every year"
against "every 3 months")."""

from __future__ import annotations

import pytest

from groundproxy.guards.rules.check import check_claim
from groundproxy.guards.rules.quantities import extract_quantities

MANUAL = "Replace the HEPA filter every 3 months. Clean the brushes every week."


@pytest.mark.parametrize(
    ("claim", "corrected"),
    [
        ("Replace the HEPA filter every year.", "Replace the HEPA filter every 3 months."),
        ("Replace the HEPA filter annually.", "Replace the HEPA filter every 3 months."),
        ("Clean the brushes every month.", "Clean the brushes every week."),
    ],
)
def test_a_wrong_period_is_corrected(claim: str, corrected: str) -> None:
    result = check_claim(claim, [MANUAL])
    assert not result.ok and result.correction == corrected


@pytest.mark.parametrize(
    "claim",
    [
        "Replace the HEPA filter every 3 months.",
        "Replace the HEPA filter quarterly.",
        "Clean the brushes weekly.",
        "Clean the brushes every week.",
    ],
)
def test_the_same_period_in_other_words_is_stated(claim: str) -> None:
    assert check_claim(claim, [MANUAL]).ok


def test_an_adverb_period_is_corrected_from_a_numbered_one() -> None:
    result = check_claim("Replace the HEPA filter every 3 months.", ["Replace it annually."])
    assert not result.ok


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("Replace it every year.", [(1.0, "year", "year")]),
        ("Replace it every decade.", [(10.0, "year", "decade")]),
        ("It is paid monthly.", [(1.0, "month", "monthly")]),
        ("a monthly fee of $10", [(10.0, "$", "$10")]),  # an adjective: no period
        ("The Daily Mail reported it.", []),
        ("They met every other day.", []),
    ],
)
def test_periods_extracted(text: str, found: list[tuple[float, str, str]]) -> None:
    assert [(q.value, q.unit, q.display) for q in extract_quantities(text)] == found
