"""Evidence-window selection of the cross-encoder (pure functions, no model)."""

from __future__ import annotations

from groundproxy.models.ce_window import (
    MAX_LENGTH,
    MIN_EVIDENCE_TOKENS,
    SPECIAL_TOKENS,
    claim_budget,
    pair_texts,
    rank_candidates,
    select_evidence,
)
from groundproxy.models.features import MAX_CANDIDATES


def n_words(text: str) -> int:
    return len(text.split())


FILLER = [f"Sentence number {w} talks about weather in general terms." for w in "abcdefghij"]


def test_short_evidence_is_kept_whole_in_order() -> None:
    ev = "Paris is the capital of France. It has many museums."
    assert select_evidence("Paris is in France.", ev, n_words, 100) == ev


def test_best_matching_sentences_win_and_keep_document_order() -> None:
    doc = [
        *FILLER[:4],
        "The Eiffel Tower opened in 1889 in Paris.",
        *FILLER[4:8],
        "Gustave Eiffel's company built the tower.",
        *FILLER[8:],
    ]
    claim = "Gustave Eiffel's company built the Eiffel Tower in 1889."
    out = select_evidence(claim, " ".join(doc), n_words, 20)
    # both matching sentences fit 20 words; no filler does after them; document order
    assert (
        out == "The Eiffel Tower opened in 1889 in Paris. Gustave Eiffel's company built the tower."
    )


def test_budget_drops_the_weakest_candidates_first() -> None:
    doc = ["Alpha beta gamma delta epsilon.", "Alpha beta gamma.", "Alpha zeta.", *FILLER]
    claim = "Alpha beta gamma delta epsilon."
    full = select_evidence(claim, " ".join(doc), n_words, 1000)
    assert len(full.split(". ")) <= MAX_CANDIDATES
    only_best = select_evidence(claim, " ".join(doc), n_words, 5)
    assert only_best == "Alpha beta gamma delta epsilon."
    two = select_evidence(claim, " ".join(doc), n_words, 8)
    assert two == "Alpha beta gamma delta epsilon. Alpha beta gamma."


def test_nothing_fits_returns_the_best_sentence_alone() -> None:
    doc = ["Unrelated words here entirely.", "The red fox jumps over the lazy dog.", *FILLER]
    out = select_evidence("A red fox jumps.", " ".join(doc), n_words, 2)
    assert out == "The red fox jumps over the lazy dog."


def test_rank_prefers_rare_claim_words_and_breaks_ties_by_order() -> None:
    cands = ["cat sat", "cat mat", "dog", "cat sat"]
    assert rank_candidates("cat sat mat", cands) == [1, 0, 3, 2]


def test_claim_budget_leaves_room_for_evidence() -> None:
    assert claim_budget(20) == 20
    assert claim_budget(500) == MAX_LENGTH - SPECIAL_TOKENS - MIN_EVIDENCE_TOKENS


class WordTokenizer:
    """Stands in for a HF tokenizer in pair_texts: one token per whitespace word."""

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict[str, list[str]]:
        return {"input_ids": text.split()}


def test_pair_texts_long_claim_keeps_evidence_room() -> None:
    claim = " ".join(["tower"] * 200)
    doc = ["The tower is tall, one of ten.", "The tower is old, built in 1889."]
    ((c, ev),) = pair_texts(WordTokenizer(), [(claim, " ".join(doc))])
    assert c == claim  # the claim is truncated by the tokenizer, not here
    # a 200-word claim still leaves MIN_EVIDENCE_TOKENS words of budget: both sentences fit
    assert ev == " ".join(doc)
