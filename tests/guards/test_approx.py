"""guards.rules.approx through guards.rules.check: a correction replaces a bound's words with its
value.

Before: "TSA received more than 30,000 claims" was "corrected" to "more than 30,621 claims"
from "shows 30,621 claims" — a statement the evidence does not make either (a HaluEval
train summary)."""

from __future__ import annotations

import pytest

from groundproxy.guards.rules.approx import bound_of
from groundproxy.guards.rules.check import check_claim, same_correction
from groundproxy.guards.rules.quantities import extract_quantities

TSA = (
    "A CNN analysis of passenger property loss claims filed with the TSA from 2010 to 2014 "
    "shows 30,621 claims of missing valuables, mostly packed in checked luggage."
)
SINCE = " between 2010-2014."


@pytest.mark.parametrize(
    ("text", "bound"),
    [
        ("more than 30,000 claims", "at_least"),
        ("at least 5 players", "at_least"),
        ("fewer than 10 days", "at_most"),
        ("up to $20", "at_most"),
        ("under 3 hours", "at_most"),
        # a hedge with a tolerance is no bound: "about 10 million" for 11 million stays wrong
        ("about $20", None),
        ("nearly 5,000 people", None),
        ("30,000 claims", None),
        ("scored 12 goals", None),
    ],
)
def test_the_bound_written_before_a_value(text: str, bound: str | None) -> None:
    q = extract_quantities(text)[0]
    found = bound_of(text, q)
    assert (found[0] if found else None) == bound
    if found:
        assert text[found[1] :].split()[0].lower() in text.lower().split()[:2]


def test_years_and_dates_have_no_bound() -> None:
    text = "sales grew over 2010 and before May 3"
    assert [bound_of(text, q) for q in extract_quantities(text)] == [None, None]


def test_a_bound_is_corrected_with_its_words() -> None:
    result = check_claim(f"TSA received more than 30,000 claims of missing valuables{SINCE}", [TSA])
    assert not result.ok
    assert result.correction == f"TSA received 30,621 claims of missing valuables{SINCE}"
    under = check_claim("The warranty lasts under 3 years.", ["The warranty lasts 24 months."])
    assert under.correction == "The warranty lasts 24 months."
    # a hedge is not a bound: it stays beside the corrected value
    about = check_claim("The warranty lasts about 3 years.", ["The warranty lasts 24 months."])
    assert not about.ok and about.correction == "The warranty lasts about 24 months."


def test_a_bound_the_evidence_breaks_is_corrected_with_its_words() -> None:
    result = check_claim(f"TSA received more than 40,000 claims of missing valuables{SINCE}", [TSA])
    assert not result.ok
    assert result.correction == f"TSA received 30,621 claims of missing valuables{SINCE}"
    exact = check_claim(f"TSA received 30,000 claims of missing valuables{SINCE}", [TSA])
    assert exact.correction == f"TSA received 30,621 claims of missing valuables{SINCE}"


def test_the_same_correction_elsewhere_drops_the_bound_too() -> None:
    # the text another piece of the answer states the value in is edited the same way
    swaps = check_claim(f"TSA received more than 40,000 claims of missing valuables{SINCE}", [TSA])
    assert same_correction("In all, over 40,000 claims were filed.", swaps.swaps) == (
        "In all, 30,621 claims were filed."
    )
