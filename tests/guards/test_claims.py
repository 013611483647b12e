"""decompose(): atomic claims with exact spans into the original answer."""

from __future__ import annotations

import pytest

from groundproxy.guards.claims.decompose import decompose
from groundproxy.guards.types import Claim


def texts(answer: str) -> list[str]:
    claims = decompose(answer)
    for c in claims:
        assert answer[c.span[0] : c.span[1]] == c.text
    return [c.text for c in claims]


REALISTIC = [
    "Sure! The warranty lasts 24 months, and it covers parts and labour. I hope this helps.",
    "Hello! Great question.\n\nHere are the plans:\n\n- **Basic**: $12 per month\n"
    "- Pro costs $20 per month; it includes support.\n\n```python\nprint('x is 5')\n```\n\n"
    "## Pricing history\n\nPrices rose in 2021. Do you want more? Let me know if you need more.",
    "1. Unplug the robot.\n2. Hold the reset button\n   for ten seconds.\n\n"
    "| Plan | Price |\n|---|---|\n| Basic | $12 |\n| Pro | $20 a month |\n\n"
    "> The handbook was updated in March 2024.",
    "Dr. Smith joined Acme Corp. in 1999. He left in 2005. He left in 2005.",
    "Arthur's Magazine",
    "",
]


@pytest.mark.parametrize("answer", REALISTIC)
def test_spans_are_exact(answer: str) -> None:
    claims = decompose(answer)
    assert all(isinstance(c, Claim) for c in claims)
    for c in claims:
        assert answer[c.span[0] : c.span[1]] == c.text
        assert c.text == c.text.strip() and c.text
    starts = [c.span[0] for c in claims]
    assert starts == sorted(starts)


def test_repeated_sentences_get_their_own_spans() -> None:
    answer = "He left in 2005. He left in 2005."
    claims = decompose(answer)
    assert [c.span for c in claims] == [(0, 16), (17, 33)]


def test_markdown_list_code_heading_greeting_and_question() -> None:
    got = texts(REALISTIC[1])
    assert got == [
        "**Basic**: $12 per month",
        "Pro costs $20 per month",
        "it includes support.",
        "Prices rose in 2021.",
    ]


def test_list_items_table_cells_and_quotes_exclude_markers() -> None:
    got = texts(REALISTIC[2])
    assert got == [
        "Unplug the robot.",
        "Hold the reset button\n   for ten seconds.",
        "Basic",
        "$12",
        "Pro",
        "$20 a month",
        "The handbook was updated in March 2024.",
    ]


def test_coordinated_clauses_are_split() -> None:
    answer = "X was born in 1950, and he moved to Paris in 1970."
    assert texts(answer) == ["X was born in 1950", "he moved to Paris in 1970."]
    assert texts("The shop sells bikes; it also repairs them.") == [
        "The shop sells bikes",
        "it also repairs them.",
    ]
    assert texts("The office was closed, but the store stayed open.") == [
        "The office was closed",
        "the store stayed open.",
    ]


def test_noun_lists_and_shared_subjects_are_not_split() -> None:
    assert texts("The flag is red, white, and blue.") == ["The flag is red, white, and blue."]
    assert texts("Available colours are red, green and blue.") == [
        "Available colours are red, green and blue."
    ]
    assert texts("The office opens at 9 am and closes at 5 pm.") == [
        "The office opens at 9 am and closes at 5 pm."
    ]


def test_greetings_pleasantries_and_questions_are_skipped() -> None:
    answer = (
        "Hello! Sure! Great question. Thanks for asking. The warranty lasts 12 months. "
        "Would you like details? I hope this helps. Let me know if you need anything else. "
        "Feel free to ask more!"
    )
    assert texts(answer) == ["The warranty lasts 12 months."]
    assert decompose("Sure!") == []
    assert decompose("???  ...  ---") == []


def test_leading_interjection_is_trimmed_from_the_span() -> None:
    answer = "Sure, the warranty lasts 12 months."
    (claim,) = decompose(answer)
    assert claim.text == "the warranty lasts 12 months."
    assert claim.span == (6, len(answer))


def test_very_short_answers_are_one_claim() -> None:
    assert texts("Arthur's Magazine") == ["Arthur's Magazine"]
    assert texts("Yes") == ["Yes"]
    assert texts("Hurricane Ivan") == ["Hurricane Ivan"]


def test_indented_and_fenced_code_is_skipped() -> None:
    answer = "Run this:\n\n    pip install acme\n\nThen it works.\n\n~~~\nx = 1. y = 2.\n~~~\n"
    assert texts(answer) == ["Then it works."]
