"""Request-context evidence at a cost proportional to the claims (guards.evidence.request_evidence,
guards.evidence.bm25, guards.evidence.vectors)."""

from __future__ import annotations

import math
import random
import time
from collections import Counter
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pytest

from groundproxy.errors import GuardTimeoutError
from groundproxy.guards.answer.report import report_body, report_headers
from groundproxy.guards.claims.decompose import decompose
from groundproxy.guards.evidence.bm25 import K1, B, Bm25Index, terms
from groundproxy.guards.evidence.request_evidence import RequestContext, request_evidence
from groundproxy.guards.evidence.split import evidence_sentences
from groundproxy.guards.evidence.vectors import SLICE_CHARS, RequestVectors
from groundproxy.guards.pipeline import Backends, gather_evidence, run_guard
from groundproxy.guards.verdict.lexical import LexicalVerifier
from groundproxy.policies.schema import local_policy
from groundproxy.testing.embedders import HashingEmbedder

FACTS = [
    f"The {city} office of Acme opened in {1950 + i} and employs {40 + i} engineers."
    for i, city in enumerate(
        [
            "Paris",
            "Lyon",
            "Berlin",
            "Madrid",
            "Rome",
            "Vienna",
            "Prague",
            "Oslo",
            "Lisbon",
            "Dublin",
            "Warsaw",
            "Athens",
            "Helsinki",
            "Zurich",
            "Geneva",
            "Munich",
            "Hamburg",
            "Milan",
            "Naples",
            "Porto",
            "Seville",
            "Krakow",
        ]
    )
]
FILLER = [f"Section {i} describes the general terms of service in plain words." for i in range(200)]


class Counting:
    """The hashing embedder, counting the texts it is asked to embed."""

    def __init__(self) -> None:
        self.inner = HashingEmbedder()
        self.name, self.dim = self.inner.name, self.inner.dim
        self.texts: list[str] = []

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.texts += list(texts)
        return self.inner.encode(texts)


def _context() -> str:
    rng = random.Random(3)
    lines = FACTS + FILLER
    rng.shuffle(lines)
    return " ".join(lines)


def test_bm25_matches_the_formula_and_ignores_stop_words() -> None:
    rng = random.Random(0)
    vocab = [
        "alpha",
        "beta",
        "gamma",
        "warranty",
        "months",
        "12",
        "acme",
        "robot",
        "paris",
        "the",
        "of",
    ]
    docs = [" ".join(rng.choice(vocab) for _ in range(rng.randint(0, 30))) for _ in range(40)]
    index = Bm25Index(docs)
    bags = [Counter(terms(d)) for d in docs]
    sizes = [sum(b.values()) for b in bags]
    mean = sum(sizes) / len(sizes)
    for query in ("warranty 12 months", "acme robot in paris"):
        expected = np.zeros(len(docs))
        for t in set(terms(query)):
            df = sum(t in b for b in bags)
            idf = math.log(1 + (len(docs) - df + 0.5) / (df + 0.5))
            for i, b in enumerate(bags):
                if t in b:
                    expected[i] += (
                        idf * b[t] * (K1 + 1) / (b[t] + K1 * (1 - B + B * sizes[i] / mean))
                    )
        assert np.allclose(index.scores(query), expected)
    assert not index.scores("the of").any()  # stop words: no term at all


def test_a_long_context_embeds_only_what_the_claims_can_be_about() -> None:
    embedder = Counting()
    context = RequestContext([("system", _context())])
    claims = decompose(
        "The Berlin office of Acme opened in 1952. The Oslo office employs 47 engineers."
    )
    vectors = RequestVectors(embedder)
    found = request_evidence(claims, embedder.inner.encode([c.text for c in claims]), context,
                             vectors, 3, -1.0)  # fmt: skip
    stats = context.stats
    every = {s for w in context_evidence_texts() for s in evidence_sentences(w)}
    assert stats.passages > 60 and stats.candidates <= 12
    assert stats.embedded == len(embedder.texts) < len(every) / 4
    assert "Berlin" in found[0][0].text and "Oslo" in found[1][0].text
    assert found[0][0].sentences is vectors  # the verifier reads the same vectors
    assert not stats.capped


def context_evidence_texts() -> list[str]:
    from groundproxy.guards.evidence.context import context_evidence

    return [w.text for w in context_evidence([("system", _context())])]


def test_the_cap_verifies_on_the_top_passages_and_says_so() -> None:
    embedder = Counting()
    context = RequestContext([("system", _context())], max_chars=400)
    claims = decompose(
        "The Berlin office of Acme opened in 1952. The Oslo office employs 47 engineers."
    )
    found = request_evidence(claims, embedder.inner.encode([c.text for c in claims]), context,
                             RequestVectors(embedder), 3, -1.0)  # fmt: skip
    assert context.stats.capped and 0 < context.stats.verified < context.stats.candidates
    assert sum(len(t) for t in embedder.texts) <= 400
    assert any(found)  # the first candidates, not nothing


def test_past_the_budgets_reserve_no_vector_is_made_and_halt_stops_between_slices() -> None:
    embedder = Counting()
    late = RequestContext([("system", _context())], until=time.monotonic() - 1.0)
    claims = decompose("The Berlin office of Acme opened in 1952.")
    q = embedder.inner.encode([c.text for c in claims])
    # no candidate got its vectors: the budget is spent — never "no evidence found" (a flag)
    # for a context that held candidates
    with pytest.raises(GuardTimeoutError, match="budget"):
        request_evidence(claims, q, late, RequestVectors(embedder), 3, -1.0)
    assert late.stats.capped and not embedder.texts
    capped = RequestContext([("system", _context())], max_chars=0)  # the cap is the policy's
    assert request_evidence(claims, q, capped, RequestVectors(embedder), 3, -1.0) == [[]]
    calls = {"n": 0}

    def halt() -> bool:
        calls["n"] += 1
        return calls["n"] > 1

    vectors = RequestVectors(embedder)
    with pytest.raises(GuardTimeoutError):
        vectors.fill([f"sentence number {i} " * 10 for i in range(100)], halt=halt)
    assert 0 < sum(len(t) for t in embedder.texts) <= SLICE_CHARS  # one slice, then stopped


def test_vectors_found_in_a_source_are_not_embedded_again() -> None:
    embedder = Counting()
    made: dict[str, npt.NDArray[np.float32]] = {}

    class Source:
        def find(self, texts: Sequence[str]) -> list[npt.NDArray[np.float32] | None]:
            return [made.get(t) for t in texts]

        def keep(self, texts: Sequence[str], vectors: npt.NDArray[np.float32]) -> None:
            made.update(zip(texts, vectors, strict=True))

    RequestVectors(embedder, Source()).fill(["a b c.", "d e f."])
    again = RequestVectors(embedder, Source())
    again.fill(["a b c.", "d e f.", "g h i."])
    assert embedder.texts == ["a b c.", "d e f.", "g h i."]
    assert again.counts.found == 2 and again.counts.embedded == 1


def test_a_capped_answer_reports_top_n_in_body_and_header() -> None:
    policy = local_policy("t", verifier={"model": "lexical"})
    context = RequestContext([("system", _context())], max_chars=400)
    report = run_guard(
        "The Berlin office of Acme opened in 1952. The Oslo office employs 47 engineers.",
        question=None, context_messages=context, policy=policy,
        backends=Backends(LexicalVerifier(), HashingEmbedder()),
    )  # fmt: skip
    body = report_body(report, "t@1")
    assert body["context"]["capped"] and body["context"]["verified"] < body["context"]["passages"]
    assert body["notes"][0].startswith("verified on the top")
    header = report_headers(report, "t@1", "st", "rid")["x-groundproxy-context"]
    assert header == f"top-n={report.context.verified}; passages={report.context.passages}"  # type: ignore[union-attr]


def test_a_small_context_keeps_every_window_and_no_note() -> None:
    policy = local_policy("t", verifier={"model": "lexical"})
    found = gather_evidence(
        decompose("The meeting is on Tuesday."), [("system", "The meeting is on Tuesday at 10.")],
        policy, HashingEmbedder(), None,
    )  # fmt: skip
    assert found[0] and found[0][0].text == "The meeting is on Tuesday at 10."
    report = run_guard("The meeting is on Tuesday.", question=None,
                       context_messages=[("system", "The meeting is on Tuesday at 10.")],
                       policy=policy,
                       backends=Backends(LexicalVerifier(), HashingEmbedder()))  # fmt: skip
    assert "context" not in report_body(report, "t@1") and report.context is not None


def test_a_sentence_longer_than_a_slice_is_embedded_alone_not_dropped() -> None:
    """A slice is about SLICE_CHARS characters; a longer sentence is a slice of its own.
    (Slices of 300 characters once left every longer sentence — and everything after it —
    without a vector: 4 of 15 supported HaluEval answers were then rejected by the rules.)"""
    embedder = Counting()
    long = "The Berlin office of Acme opened in 1952 and " + "grew steadily, " * 40 + "too."
    short = "The Oslo office employs 47 engineers."
    assert len(long) > SLICE_CHARS
    vectors = RequestVectors(embedder)
    vectors.fill([long, short])
    assert vectors.has(long) and vectors.has(short) and not vectors.counts.stopped
    assert embedder.texts == [long, short]  # two calls: the long one alone
    capped = RequestVectors(Counting())
    capped.fill([short, long], max_chars=len(short) + 10)  # the cap is still a hard stop
    assert capped.has(short) and not capped.has(long) and capped.counts.stopped
    assert not capped.counts.out_of_time
