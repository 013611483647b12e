"""run_guard end to end: real LexicalVerifier, a fake embedder and a fake index."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pytest

from groundproxy.errors import GuardError
from groundproxy.guards.pipeline import Backends, run_guard, unverified_report
from groundproxy.guards.types import (
    CONTRADICTION_MIN,
    Embedder,
    Evidence,
    EvidenceSource,
    GuardReport,
    Pair,
    Probs,
    Verifier,
)
from groundproxy.guards.verdict.lexical import LexicalVerifier
from groundproxy.policies.schema import Policy, local_policy

_WORD = re.compile(r"[a-z0-9]+")
_STOP = {"the", "a", "an", "of", "is", "are", "to", "in", "and", "for", "our", "it", "if"}


class HashingEmbedder:
    """Bag of words hashed into ``dim`` buckets, L2-normalized."""

    name = "fake-hashing"
    dim = 256

    def __init__(self) -> None:
        self.calls = 0

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.calls += 1
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                if word not in _STOP:
                    out[i, int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dim] += 1.0
            norm = float(np.linalg.norm(out[i]))
            if norm > 0:
                out[i] /= norm
        return out


class ListIndex:
    """An in-memory EvidenceSource over fixed passages."""

    def __init__(self, passages: Sequence[Evidence], embedder: HashingEmbedder) -> None:
        self.passages = list(passages)
        self.vectors = embedder.encode([p.text for p in passages])
        self.calls = 0

    def search(
        self, vectors: npt.NDArray[np.float32], top_k: int, min_score: float
    ) -> list[list[Evidence]]:
        self.calls += 1
        out = []
        for row in vectors @ self.vectors.T:
            order = np.argsort(-row)[:top_k]
            out.append(
                [
                    Evidence(
                        self.passages[j].text,
                        self.passages[j].doc,
                        self.passages[j].chunk,
                        float(row[j]),
                        self.passages[j].span,
                        index_version=3,
                    )
                    for j in order
                    if row[j] >= min_score
                ]
            )
        return out


class CountingVerifier:
    def __init__(self, inner: LexicalVerifier) -> None:
        self.inner = inner
        self.name = inner.name
        self.contradiction_min = inner.contradiction_min
        self.batches: list[int] = []

    def score(self, pairs: Sequence[Pair]) -> list[Probs]:
        self.batches.append(len(pairs))
        return self.inner.score(pairs)


class BrokenVerifier:
    name = "broken"
    contradiction_min = CONTRADICTION_MIN

    def score(self, pairs: Sequence[Pair]) -> list[Probs]:
        raise RuntimeError("model exploded")


def policy(**overrides: object) -> Policy:
    return local_policy("acme", "openai/gpt-4o-mini", **overrides)


DOCS = [
    Evidence(
        "Every Acme robot comes with a limited warranty of 12 months from the date of purchase.",
        "handbook.md",
        "c12",
        0.0,
        (1040, 1126),
    ),
    Evidence(
        "Returns are accepted within 30 days of delivery if the robot is unused.",
        "faq.md",
        "c3",
        0.0,
        (200, 271),
    ),
    Evidence("The cafeteria serves lunch on Fridays.", "misc.md", "c1", 0.0, (0, 38)),
]
ANSWER = (
    "Sure! The warranty lasts 24 months from the date of purchase. "
    "Returns are accepted within 30 days of delivery if the robot is unused.\n\n"
    "I hope this helps!"
)


@pytest.fixture()
def embedder() -> HashingEmbedder:
    return HashingEmbedder()


def test_warranty_example_end_to_end(embedder: HashingEmbedder) -> None:
    index = ListIndex(DOCS, embedder)
    verifier = CountingVerifier(LexicalVerifier())
    e: Embedder = embedder
    i: EvidenceSource = index
    v: Verifier = verifier
    report = run_guard(
        ANSWER,
        question="How long is the warranty and can I return it?",
        context_messages=[("system", "You are Acme's support assistant.")],
        policy=policy(),
        backends=Backends(v, e, i),
    )
    assert len(report.claims) == 2
    warranty, returns = report.claims
    assert warranty.verdict == "contradicted"
    assert warranty.correction == "The warranty lasts 12 months from the date of purchase."
    assert warranty.explanation == "evidence states 12 months, claim states 24 months"
    assert warranty.action == "corrected"
    assert [(c.doc, c.chunk) for c in warranty.citations] == [("handbook.md", "c12")]
    assert warranty.correction_support is not None and warranty.correction_support > 0.6
    assert returns.verdict == "supported" and returns.action == "kept"
    assert returns.citations[0].doc == "faq.md" and returns.citations[0].chunk == "c3"
    assert ANSWER[warranty.claim.span[0] : warranty.claim.span[1]] == warranty.claim.text

    assert report.action == "rewrite" and not report.blocked and not report.unverified
    assert report.text.startswith(
        "Sure! The warranty lasts 12 months from the date of purchase [1]. "
        "Returns are accepted within 30 days of delivery if the robot is unused [2]."
    )
    assert report.text.endswith(
        '\n\nSources:\n[1] handbook.md#c12 — "Every Acme robot comes with a limited warranty '
        'of 12 months from the date of purchase."\n[2] faq.md#c3 — "Returns are accepted within '
        '30 days of delivery if the robot is unused."'
    )
    assert report.original == ANSWER
    assert report.verifier == "lexical" and report.latency_ms > 0
    assert 0.6 < report.trust <= 1.0
    assert len(verifier.batches) == 1  # every (claim, evidence) pair and the correction
    assert verifier.batches[0] >= 3
    assert index.calls == 1


def test_request_context_is_evidence_without_an_index() -> None:
    report = run_guard(
        "The meeting is on Tuesday in room 4. The budget is $5,000.",
        question="When is the meeting?",
        context_messages=[
            ("system", "Be brief."),
            ("user", "Notes: the meeting is on Tuesday in room 4. Lunch is provided."),
            ("assistant", "The budget is $5,000."),  # earlier answers are not evidence
        ],
        policy=policy(citations="inline"),
        backends=Backends(LexicalVerifier()),
    )
    meeting, budget = report.claims
    assert meeting.verdict == "supported"
    assert meeting.citations[0].doc == "request:user#1" and meeting.citations[0].source == "request"
    assert budget.verdict == "unverifiable" and budget.action == "flagged"
    assert report.text == (
        "The meeting is on Tuesday in room 4 [1]. The budget is $5,000 [unverified]."
    )
    assert report.action == "flag"


def test_use_request_context_off_means_no_evidence() -> None:
    report = run_guard(
        "The meeting is on Tuesday.",
        question=None,
        context_messages=[("user", "The meeting is on Tuesday.")],
        policy=policy(retrieval={"use_request_context": False}),
        backends=Backends(LexicalVerifier()),
    )
    assert report.claims[0].verdict == "unverifiable"
    assert report.claims[0].explanation == "no evidence found"


def test_no_claims_means_full_trust(embedder: HashingEmbedder) -> None:
    report = run_guard(
        "Hello! How can I help?",
        question=None,
        context_messages=[],
        policy=policy(),
        backends=Backends(LexicalVerifier(), embedder, ListIndex(DOCS, embedder)),
    )
    assert report.claims == [] and report.trust == 1.0 and report.action == "none"
    assert report.text == "Hello! How can I help?"


def test_backend_failures_raise_guard_error(embedder: HashingEmbedder) -> None:
    with pytest.raises(GuardError, match="model exploded"):
        run_guard(
            ANSWER,
            question=None,
            context_messages=[],
            policy=policy(),
            backends=Backends(BrokenVerifier(), embedder, ListIndex(DOCS, embedder)),
        )
    with pytest.raises(GuardError, match="embedder"):
        run_guard(
            ANSWER,
            question=None,
            context_messages=[],
            policy=policy(),
            backends=Backends(LexicalVerifier(), None, ListIndex(DOCS, embedder)),
        )


def test_a_context_row_uses_only_the_context() -> None:
    context = (
        "Arthur's Magazine (1844-1846) was an American literary periodical. "
        "First for Women is a woman's magazine published by Bauer Media Group in the USA. "
        "The magazine was started in 1989."
    )

    # An eval / calibration row: its context is the request's only evidence, guarded by
    # the serving path itself (same evidence floor, short claims searched with the question).
    def row(answer: str, embedder: HashingEmbedder | None) -> GuardReport:
        return run_guard(
            answer,
            question="Which magazine was started first?",
            context_messages=[("context", context)],
            policy=policy(),
            backends=Backends(LexicalVerifier(), embedder),
        )

    good = row("Arthur's Magazine", None)
    bad = row("First for Women was started in 1979.", HashingEmbedder())
    assert good.claims[0].citations[0].doc == "request:context#0"
    assert good.claims[0].citations[0].chunk == "s0"
    assert good.claims[0].verdict == "supported" and good.action == "none"
    (claim,) = bad.claims
    assert claim.verdict == "contradicted"
    assert claim.correction == "First for Women was started in 1989."
    assert claim.explanation == "evidence states 1989, claim states 1979"
    # corrected, not blocked: the returned text no longer states the wrong year
    assert bad.action == "rewrite" and claim.action == "corrected"
    assert bad.text.startswith("First for Women was started in 1989 [1].")
    assert bad.trust > 0.2


def test_unverified_report() -> None:
    report = unverified_report(ANSWER, policy(on_guard_error="block"), "budget exceeded")
    assert report.text == ANSWER and report.action == "unverified"
    assert report.unverified and report.trust == 0.0 and not report.blocked
    assert [c.action for c in report.claims] == ["unverified", "unverified"]
    assert all(c.explanation == "budget exceeded" for c in report.claims)


def test_search_text_adds_the_question_to_short_claims_only() -> None:
    from groundproxy.guards.pipeline import SHORT_CLAIM_WORDS, search_text

    q = "Where is the head office?"
    assert search_text("Delhi", q) == "Where is the head office? Delhi"
    long_claim = " ".join(["word"] * (SHORT_CLAIM_WORDS + 1))
    assert search_text(long_claim, q) == long_claim
    assert search_text("Delhi", None) == "Delhi"
    assert search_text("Delhi", "") == "Delhi"
