"""guards.verdict.logprobs_kept: citation markers and a "Sources:" block keep the logprobs; any
other change drops them, with a note saying precisely why (issue 31, item 4)."""

from __future__ import annotations

import pytest

from groundproxy.guards.types import Claim, ClaimAction, ClaimResult, Probs
from groundproxy.guards.verdict.logprobs_kept import (
    PieceTally,
    TokenQueue,
    dropped_note,
    still_describes,
)

ANSWER = "The warranty lasts 12 months. Batteries are covered for 6 months."
SOURCES = '\n\nSources:\n[1] acme:handbook#0 — "The warranty lasts 12 months."'


@pytest.mark.parametrize(
    ("returned", "kept"),
    [
        (ANSWER, True),
        ("The warranty lasts 12 months [1]. Batteries are covered for 6 months [1].", True),
        ("The warranty lasts 12 months [1]. Batteries are covered for 6 months." + SOURCES, True),
        ("The warranty lasts 24 months [1]. Batteries are covered for 6 months.", False),
        ("The warranty lasts 12 months [unverified]. Batteries are covered for 6 months.", False),
        ("Batteries are covered for 6 months [1]." + SOURCES, False),  # a claim removed
        ("I cannot answer that.", False),
    ],
)
def test_only_citations_keep_the_logprobs(returned: str, kept: bool) -> None:
    assert still_describes(ANSWER, returned) is kept


def test_an_original_with_its_own_brackets_reads_as_changed() -> None:
    original = "See note [2] for details."
    assert still_describes(original, original)
    assert not still_describes(original, "See note [2] for details [1].")  # conservative


def _claims(*actions: ClaimAction) -> list[ClaimResult]:
    probs = Probs(1.0, 0.0, 0.0)
    return [ClaimResult(Claim("x", (0, 1)), "supported", probs, 0.0, action=a) for a in actions]


def test_the_note_says_why() -> None:
    note = dropped_note(_claims("corrected", "kept", "removed", "corrected"), False)
    assert note == "logprobs dropped: the answer was rewritten (claims: 2 corrected, 1 removed)"
    blocked = dropped_note(_claims("blocked"), True)
    assert blocked == "logprobs dropped: the answer was blocked (the refusal replaced the text)"
    tally = PieceTally()
    assert tally.keep("A is B.", "A is B [1].", _claims("kept"), False)
    assert not tally.keep("C is D.", "C is E [2].", _claims("corrected"), False)
    assert tally.note() == "logprobs dropped for 1 of 2 sentences: rewritten (claims: 1 corrected)"
    assert PieceTally().note() is None


def test_a_stream_s_tokens_go_with_the_piece_whose_text_they_start() -> None:
    queue = TokenQueue()
    words = ["The", " warranty", " lasts", " 24", " months.", " Batteries", " last."]
    queue.add([{"token": w, "logprob": -0.1} for w in words])
    first = queue.take(len("The warranty lasts 24 months. "))  # a sentence and its space
    assert [t["token"] for t in first] == words[:5]  # " Batteries" starts the next one
    assert [t["token"] for t in queue.take(len("Batteries last."))] == words[5:]
    assert queue.take(5) == []
