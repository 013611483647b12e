"""The adapter's fast lexical score equals the lexical verifier's own (seed-001) score."""

from __future__ import annotations

import random

import pytest

from groundproxy.guards.evidence.lexical_best import LexicalScorer
from groundproxy.guards.types import Pair
from groundproxy.guards.verdict.lexical import LexicalVerifier

TEXT = (
    "the warranty covers parts and labour for twelve months from purchase; claims need a "
    "receipt 12 months 24 the office opens at 9:00 in Berlin and Paris, never on Sundays"
)
WORDS = TEXT.split(" ")


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)) + "."


@pytest.mark.parametrize("seed", range(20))
def test_same_score_as_raw_scores(seed: int) -> None:
    rng = random.Random(seed)
    text = _text(rng, rng.randint(3, 15))
    passages = [_text(rng, rng.randint(1, 30)) for _ in range(rng.randint(1, 5))]
    passages.append(passages[0])  # a repeated passage counts once, as in raw_scores
    question = _text(rng, 6) if seed % 3 else None
    pairs = [Pair(claim=text, evidence=p, question=question) for p in passages]
    expected = float(max(LexicalVerifier().raw_scores(pairs)))
    scorer = LexicalScorer()
    assert scorer.best(text, passages, question) == pytest.approx(expected, abs=1e-9)
    assert scorer.best(text, passages, question) == pytest.approx(expected, abs=1e-9)  # cached


def test_edges() -> None:
    scorer = LexicalScorer()
    assert scorer.best("   ", ["a passage"], None) == 0.0
    assert scorer.best("a claim", [], None) == 0.0
    assert scorer.best("the and of", ["the of"], None) == 0.0  # only stop words: no vocabulary
    assert scorer.best("Berlin office", ["Berlin office"], None) == pytest.approx(1.0)
