"""The lexical (TF-IDF, seeds 001/004) verifier."""

from __future__ import annotations

import math

import pytest

from groundproxy.guards.types import Pair, Verifier
from groundproxy.guards.verdict.lexical import CONTRADICTED_SHARE, LexicalVerifier

SUPPORT = "Our products come with a limited warranty of 12 months from the date of purchase."
UNRELATED = "The cafeteria serves vegetarian lunch on Fridays in building C."


def test_satisfies_the_verifier_protocol() -> None:
    v: Verifier = LexicalVerifier()
    assert v.name == "lexical"
    assert v.score([]) == []


def test_supporting_pair_ranks_above_unrelated_pair() -> None:
    claim = "The warranty lasts 12 months from the date of purchase."
    probs = LexicalVerifier().score(
        [Pair(claim, SUPPORT, "How long is the warranty?"), Pair(claim, UNRELATED, None)]
    )
    assert probs[0].supported > probs[1].supported
    assert probs[0].supported > 0.6 > probs[1].supported


def test_probabilities_are_valid_and_mostly_unverifiable() -> None:
    pairs = [
        Pair("x", "y"),
        Pair("", ""),
        Pair("The warranty lasts 12 months.", SUPPORT, "warranty?"),
        Pair("the of and", "a an the"),  # stop words only: empty vocabulary
    ]
    for p in LexicalVerifier().score(pairs):
        values = (p.supported, p.contradicted, p.unverifiable)
        assert all(0.0 <= x <= 1.0 for x in values)
        assert math.isclose(sum(values), 1.0, abs_tol=1e-9)
        assert p.contradicted == pytest.approx((1 - p.supported) * CONTRADICTED_SHARE)
        assert p.contradicted < p.unverifiable
        assert 0.0 <= p.uncertainty() <= 1.0


def test_seed_formula_mixes_claim_and_question_similarity() -> None:
    v = LexicalVerifier(alpha=0.5)
    pair_q = Pair("warranty twelve months", SUPPORT, "warranty months purchase date")
    cc, qc, has_q = v.similarities([pair_q])
    assert has_q[0] and 0.0 < cc[0] <= 1.0 and 0.0 < qc[0] <= 1.0
    assert v.raw_scores([pair_q])[0] == pytest.approx(0.5 * cc[0] + 0.5 * qc[0])
    no_q = Pair("warranty twelve months", SUPPORT, None)
    cc_alone, _, has_q_alone = v.similarities([no_q])
    assert not has_q_alone[0]
    assert v.raw_scores([no_q])[0] == pytest.approx(cc_alone[0])


def test_batch_scores_every_pair_in_order() -> None:
    claim = "The warranty lasts 12 months."
    pairs = [Pair(claim, SUPPORT), Pair(claim, UNRELATED)] * 20
    probs = LexicalVerifier().score(pairs)
    assert len(probs) == 40
    assert all(probs[i].supported > probs[i + 1].supported for i in range(0, 40, 2))


def test_rejects_bad_parameters() -> None:
    with pytest.raises(ValueError):
        LexicalVerifier(alpha=1.5)
    with pytest.raises(ValueError):
        LexicalVerifier(contradicted_share=0.9)
