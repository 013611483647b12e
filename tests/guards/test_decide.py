"""Verdicts, trust score and answer action on hand-built probabilities."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from groundproxy.guards.action import answer_action, below_floor
from groundproxy.guards.rules.check import RuleResult
from groundproxy.guards.types import Claim, ClaimResult, Evidence, Pair, Probs
from groundproxy.guards.verdict.decide import (
    CONTRADICTION_MIN,
    MISMATCH_CAP,
    MISMATCH_FLOOR,
    MISSING_CAP,
    Bars,
    contradiction_bar,
    decide_claim,
    missing_bar,
    resolve_threshold,
    trust_score,
)
from groundproxy.policies.schema import Policy, local_policy

CLAIM = Claim("The warranty lasts 24 months.", (0, 29))
OK = RuleResult(ok=True)


def policy(**overrides: object) -> Policy:
    return local_policy("acme", "openai/gpt-4o-mini", **overrides)


def ev(chunk: str) -> Evidence:
    return Evidence(f"text {chunk}", "handbook.md", chunk, 0.5, (0, 6))


def decide(probs: list[Probs], rule: RuleResult = OK, **kw: float) -> ClaimResult:
    evidence = [ev(f"c{i}") for i in range(len(probs))]
    bars = Bars(
        threshold=kw.get("threshold", 0.6),
        max_uncertainty=kw.get("max_uncertainty", 0.9),
        contradiction_min=kw.get("contradiction_min", CONTRADICTION_MIN),
        missing_support=kw.get("missing_support", 1.0),
    )
    return decide_claim(CLAIM, evidence, probs, rule, bars)


def test_the_verifier_contradiction_bar_turns_a_weak_contradiction_into_unverifiable() -> None:
    weak = [Probs(0.2, 0.7, 0.1)]
    assert decide(weak).verdict == "contradicted"
    r = decide(weak, contradiction_min=0.92)
    assert r.verdict == "unverifiable"
    assert r.probs.supported == pytest.approx(0.2)  # P(supported) is never touched
    strong = [Probs(0.02, 0.95, 0.03)]
    assert decide(strong, contradiction_min=0.92).verdict == "contradicted"


class _WithBar:
    name = "with-bar"

    def __init__(self, bar: Any) -> None:
        self.contradiction_min = bar

    def score(self, pairs: Sequence[Pair]) -> list[Probs]:
        return []


def test_contradiction_bar_reads_the_verifier_and_never_goes_below_half() -> None:
    # the bar is a member of the Verifier protocol: no silent 0.5 for an object without it
    with pytest.raises(AttributeError):
        contradiction_bar(object())  # type: ignore[arg-type]
    assert contradiction_bar(_WithBar(CONTRADICTION_MIN)) == CONTRADICTION_MIN
    assert contradiction_bar(_WithBar(0.92)) == pytest.approx(0.92)
    assert contradiction_bar(_WithBar(0.2)) == CONTRADICTION_MIN
    assert contradiction_bar(_WithBar(7)) == 1.0
    assert contradiction_bar(_WithBar("junk")) == CONTRADICTION_MIN


def test_supported_uses_the_best_pair_and_cites_it() -> None:
    r = decide([Probs(0.3, 0.1, 0.6), Probs(0.95, 0.01, 0.04), Probs(0.7, 0.1, 0.2)])
    assert r.verdict == "supported"
    assert r.probs == Probs(0.95, 0.01, 0.04)
    assert [e.chunk for e in r.citations] == ["c1", "c2"]
    assert r.uncertainty == pytest.approx(r.probs.uncertainty())
    assert r.explanation == "supported by handbook.md#c1 (p=0.95)"


def test_citations_are_capped_at_three() -> None:
    r = decide([Probs(0.9, 0.05, 0.05)] * 5)
    assert r.verdict == "supported" and len(r.citations) == 3


def test_below_threshold_is_unverifiable() -> None:
    r = decide([Probs(0.5, 0.1, 0.4)])
    assert r.verdict == "unverifiable"
    assert r.explanation == "best evidence handbook.md#c0 gives p(supported)=0.50, below 0.60"
    assert [e.chunk for e in r.citations] == ["c0"]


def test_too_uncertain_is_unverifiable() -> None:
    p = Probs(0.62, 0.19, 0.19)
    r = decide([p], max_uncertainty=0.5)
    assert p.uncertainty() > 0.5
    assert r.verdict == "unverifiable" and "too uncertain" in r.explanation


def test_verifier_contradiction() -> None:
    r = decide([Probs(0.4, 0.3, 0.3), Probs(0.05, 0.85, 0.10)])
    assert r.verdict == "contradicted"
    assert r.probs == Probs(0.05, 0.85, 0.10)
    assert [e.chunk for e in r.citations] == ["c1"]
    assert r.explanation.startswith("contradicted by handbook.md#c1")
    weak = decide([Probs(0.1, 0.45, 0.45)])
    assert weak.verdict == "unverifiable"


def test_rule_mismatch_contradicts_with_correction() -> None:
    rule = RuleResult(
        ok=False,
        mismatches=[("24 months", "12 months")],
        correction="The warranty lasts 12 months.",
        explanation="evidence states 12 months, claim states 24 months",
        evidence_index=1,
    )
    r = decide_claim(
        CLAIM,
        [ev("c0"), ev("c1")],
        [Probs(0.9, 0.02, 0.08), Probs(0.7, 0.06, 0.24)],
        rule,
        Bars(threshold=0.6, max_uncertainty=0.9),
        correction_probs=Probs(0.8, 0.04, 0.16),
    )
    assert r.verdict == "contradicted"
    assert r.correction == "The warranty lasts 12 months."
    assert r.explanation == "evidence states 12 months, claim states 24 months"
    assert [e.chunk for e in r.citations] == ["c1"]
    assert r.probs.supported <= MISMATCH_CAP and r.probs.contradicted >= MISMATCH_FLOOR
    assert sum((r.probs.supported, r.probs.contradicted, r.probs.unverifiable)) == pytest.approx(1)
    assert r.correction_support == 0.8


def test_missing_rule_caps_support() -> None:
    rule = RuleResult(ok=False, missing=["24 months"], explanation="claim states 24 months; no")
    r = decide([Probs(0.95, 0.01, 0.04)], rule)
    assert r.verdict == "unverifiable"
    assert r.probs.supported == MISSING_CAP
    assert r.probs.unverifiable == pytest.approx(0.04 + 0.95 - MISSING_CAP)
    assert r.explanation == rule.explanation


MISSING = RuleResult(
    ok=False,
    missing=["Acme Corporation"],
    explanation="claim names Acme Corporation; no evidence mentions it",
)


def test_a_missing_value_gives_way_only_to_support_above_the_missing_bar() -> None:
    # threshold 0.6, missing_support 0.5: the bar is half way from 0.6 to 1
    assert missing_bar(Bars(0.6, 0.9, missing_support=0.5)) == pytest.approx(0.8)
    r = decide([Probs(0.85, 0.05, 0.10)], MISSING, missing_support=0.5)
    assert r.verdict == "supported" and r.probs.supported == 0.85
    assert "above the missing bar 0.80" in r.explanation and MISSING.explanation in r.explanation
    below = decide([Probs(0.75, 0.05, 0.20)], MISSING, missing_support=0.5)  # ≥ τ, < bar
    assert below.verdict == "unverifiable" and below.probs.supported == MISSING_CAP
    assert below.explanation == MISSING.explanation


def test_missing_support_one_keeps_the_veto_and_zero_leaves_the_verifier_alone() -> None:
    assert missing_bar(Bars(0.6, 0.9, missing_support=1.0)) is None
    assert decide([Probs(0.999, 0.0005, 0.0005)], MISSING).verdict == "unverifiable"
    assert missing_bar(Bars(0.6, 0.9, missing_support=0.0)) == pytest.approx(0.6)
    assert decide([Probs(0.61, 0.1, 0.29)], MISSING, missing_support=0.0).verdict == "supported"
    assert decide([Probs(0.59, 0.1, 0.31)], MISSING, missing_support=0.0).verdict == "unverifiable"


def test_no_support_outweighs_a_contested_value() -> None:
    rule = RuleResult(
        ok=False,
        missing=["15:00"],
        contested=["15:00"],
        explanation="claim states 15:00; the evidence states 10:00",
    )
    r = decide([Probs(0.99, 0.005, 0.005)], rule, missing_support=0.0)
    assert r.verdict == "unverifiable" and r.explanation == rule.explanation


def test_no_support_outweighs_a_mismatch() -> None:
    rule = RuleResult(
        ok=False,
        missing=["Acme Corporation"],
        mismatches=[("24 months", "12 months")],
        explanation="evidence states 12 months, claim states 24 months",
    )
    r = decide([Probs(0.99, 0.005, 0.005)], rule, missing_support=0.0)
    assert r.verdict == "contradicted"


def test_no_evidence() -> None:
    r = decide_claim(CLAIM, [], [], OK, Bars(threshold=0.6, max_uncertainty=0.9))
    assert r.verdict == "unverifiable" and r.explanation == "no evidence found"
    assert r.citations == [] and r.probs.supported == 0.0
    with pytest.raises(ValueError):
        decide_claim(CLAIM, [ev("c0")], [], OK, Bars(threshold=0.6, max_uncertainty=0.9))


def _result(verdict: str, supported: float) -> ClaimResult:
    p = Probs(supported, (1 - supported) / 2, (1 - supported) / 2)
    return ClaimResult(CLAIM, verdict, p, p.uncertainty())  # type: ignore[arg-type]


def test_trust_formula() -> None:
    results = [
        _result("supported", 0.9),
        _result("contradicted", 0.2),  # counts 0, not 0.2
        _result("unverifiable", 0.3),
    ]
    assert trust_score(results) == pytest.approx((0.9 + 0.0 + 0.3) / 3)
    assert trust_score([]) == 1.0


def test_answer_action_per_policy() -> None:
    p = policy()
    sup, con, unv = (
        _result("supported", 0.9),
        _result("contradicted", 0.1),
        _result("unverifiable", 0.5),
    )
    assert answer_action([sup], p) == "none"
    assert answer_action([], p) == "none"
    assert answer_action([sup, unv], p) == "flag"
    assert answer_action([sup, con, unv], p) == "rewrite"
    blocky = policy(actions={"contradicted": "block"})
    assert answer_action([sup, con], blocky) == "block"
    soft = policy(actions={"contradicted": "annotate", "unverifiable": "annotate"})
    assert answer_action([sup, con, unv], soft) == "annotate"


def test_trust_floor_needs_a_contradiction() -> None:
    p = policy()  # block_below_trust 0.2
    sup, con, unv = (
        _result("supported", 0.9),
        _result("contradicted", 0.1),
        _result("unverifiable", 0.05),
    )
    assert below_floor([sup, con], p, 0.1)
    assert not below_floor([sup, con], p, 0.5)  # e.g. the contradiction was corrected
    assert not below_floor([unv], p, 0.05)  # nothing speaks against it: flag, not block


def test_threshold_resolution() -> None:
    assert resolve_threshold(policy(verifier={"threshold": 0.4})) == 0.4
    assert resolve_threshold(policy(verifier={"threshold": "calibrated"})) == 0.6
    assert resolve_threshold(policy(verifier={"threshold": "calibrated"}), 0.45) == 0.45
