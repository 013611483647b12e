"""Sentence spans, request-context evidence windows and evidence selection."""

from __future__ import annotations

import numpy as np

from groundproxy.guards.claims.sentences import fast_sentence_spans, sentence_spans
from groundproxy.guards.evidence.context import (
    MAX_CHARS,
    context_evidence,
    select_evidence,
    sentence_windows,
)
from groundproxy.guards.types import Claim, Evidence


def test_sentence_spans_are_exact_and_trimmed() -> None:
    text = "  Dr. Smith paid $1.5 million. He left.\nNo stop here\n\nYes. Yes."
    spans = sentence_spans(text)
    got = [text[s:e] for s, e in spans]
    assert got == ["Dr. Smith paid $1.5 million.", "He left.", "No stop here", "Yes.", "Yes."]
    assert spans[-2] != spans[-1]


def test_fast_splitter_keeps_abbreviations_and_initials() -> None:
    text = "Mr. Jones met J. K. Rowling in the U.S. office. It was 3.5 hours long! Next."
    got = [text[s:e] for s, e in fast_sentence_spans(text)]
    assert got == [
        "Mr. Jones met J. K. Rowling in the U.S. office.",
        "It was 3.5 hours long!",
        "Next.",
    ]


def test_context_evidence_windows_docs_and_spans() -> None:
    system = "You are a support bot. Answer briefly."
    user = (
        "Our warranty lasts 12 months. Returns are accepted within 30 days. "
        "Shipping is free over $50. Support is open on weekdays."
    )
    messages = [("system", system), ("user", user), ("assistant", "The warranty is 2 years.")]
    ev = context_evidence(messages)
    assert {e.doc for e in ev} == {"request:system#0", "request:user#1"}
    for e in ev:
        source = system if e.doc.endswith("#0") else user
        assert source[e.span[0] : e.span[1]] == e.text
        assert e.source == "request" and e.chunk.startswith("s") and len(e.text) <= MAX_CHARS
    user_chunks = [e for e in ev if e.doc == "request:user#1"]
    # windows of up to 3 sentences that overlap by one: s0 = sentences 0-2, s2 = 2-3
    assert [e.chunk for e in user_chunks] == ["s0", "s2"]
    assert user_chunks[0].text.startswith("Our warranty") and "Shipping" in user_chunks[0].text
    assert user_chunks[1].text.startswith("Shipping")


def test_long_sentences_are_cut_to_the_size_limit() -> None:
    text = "word " * 400 + "end."
    windows = sentence_windows(text)
    assert len(windows) > 1
    assert all(e - s <= MAX_CHARS for _, (s, e) in windows)


def _ev(text: str, chunk: str) -> Evidence:
    return Evidence(text=text, doc="d", chunk=chunk, score=0.0, span=(0, len(text)))


def test_select_evidence_tfidf_fallback_ranks_and_scores() -> None:
    claims = [Claim("The warranty lasts 12 months.", (0, 29)), Claim("Cats purr.", (30, 40))]
    cands = [
        _ev("Shipping is free over $50.", "a"),
        _ev("Our warranty lasts 12 months from purchase.", "b"),
    ]
    chosen = select_evidence(claims, None, cands, None, top_k=1, min_score=0.01)
    assert [e.chunk for e in chosen[0]] == ["b"]
    assert 0.0 < chosen[0][0].score <= 1.0
    assert chosen[1] == []  # nothing shares a term with "Cats purr."


def test_select_evidence_with_vectors_uses_cosine_and_min_score() -> None:
    claims = [Claim("a", (0, 1))]
    cands = [_ev("x", "x"), _ev("y", "y"), _ev("z", "z")]
    cv = np.array([[1.0, 0.0]], dtype=np.float32)
    ev = np.array([[0.6, 0.8], [1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    chosen = select_evidence(claims, cv, cands, ev, top_k=3, min_score=0.5)
    assert [(e.chunk, round(e.score, 2)) for e in chosen[0]] == [("y", 1.0), ("x", 0.6)]


def test_questions_are_never_evidence() -> None:
    text = "Can I get a refund? Refunds take 10 days. Is shipping free? Shipping is free in the EU."
    ev = context_evidence([("user", text)])
    quotes = [e.text for e in ev]
    assert quotes and all("?" not in q for q in quotes)
    assert any("Refunds take 10 days." in q for q in quotes)
    assert any("Shipping is free in the EU." in q for q in quotes)
    for e in ev:
        assert text[e.span[0] : e.span[1]] == e.text


def test_instructions_are_never_evidence() -> None:
    text = "Tell me about the R2 and where maps are stored. The R2 weighs 3.4 kilograms."
    quotes = [e.text for e in context_evidence([("user", text)])]
    assert quotes == ["The R2 weighs 3.4 kilograms."]
