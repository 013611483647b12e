"""The verifier ladder (guards.verdict.ladder, the ``climb`` stage of guards.verdict.stages.verify)
with scripted verifiers: which claims climb to the strong rung (margin, share), its time budget
(a claim it would not finish is skipped, marked), its failure (marked, fast verdict kept),
its own threshold, and what the body and the ``x-groundproxy-ladder`` header say."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from groundproxy.guards import (
    CostMeter,
    Rungs,
    apply,
    decide_claims,
    report_body,
    report_headers,
    verify,
)
from groundproxy.guards.judge.merge import merge
from groundproxy.guards.judge.opinion import JudgeVerdict, Outcome
from groundproxy.guards.pipeline import Backends, evidence_fn, run_guard
from groundproxy.guards.types import ClaimResult, Pair, Probs
from groundproxy.guards.verdict.ladder import select, share_cap
from groundproxy.guards.verdict.stages import Verified
from groundproxy.policies.schema import LadderPolicy, Policy, local_policy
from groundproxy.testing.clock import FakeClock
from groundproxy.testing.verifiers import SUPPORTED, ScriptedVerifier

CONTEXT = [
    ("system", "The warranty lasts 12 months. Support is open on weekdays. Shipping is free.")
]
QUESTION = "Tell me about the robot."
SURE = "The warranty lasts 12 months."  # the fast rung is sure of it
UNSURE_A = "Support is open on weekdays."  # the fast rung is unsure of these
UNSURE_B = "Shipping is free."
# fast P(supported) per claim: threshold 0.6 (no fitted one) → margin 0.05/0.4 = 0.125 for
# SURE; 0.55/0.6 = 0.92 and 0.5/0.6 = 0.83 (unsupported, near the threshold) for the others
FAST = {SURE: Probs(0.95, 0.03, 0.02), UNSURE_A: Probs(0.55, 0.1, 0.35),
        UNSURE_B: Probs(0.5, 0.1, 0.4)}  # fmt: skip


def fast_verifier() -> ScriptedVerifier:
    return ScriptedVerifier(lambda p: FAST[p.claim], name="fast")


def policy(**ladder: Any) -> Policy:
    return local_policy("acme", verifier={"ladder": {"strong": "strong", **ladder}})


def run(answer: str, pol: Policy, rungs: Rungs) -> Verified:
    return verify(
        answer, question=QUESTION, policy=pol, verifier=rungs,
        evidence_for=evidence_fn(CONTEXT, pol, None, None, QUESTION),
    )  # fmt: skip


def by_text(results: list[ClaimResult]) -> dict[str, ClaimResult]:
    return {r.claim.text: r for r in results}


def test_defaults_a_new_tenant_gets_and_strict_keys() -> None:
    ladder = local_policy("acme").verifier.ladder
    assert ladder == LadderPolicy()
    assert (ladder.strong, ladder.min_uncertainty, ladder.max_share, ladder.budget_ms) == (
        "crossencoder", 0.7, 0.25, 300
    )  # fmt: skip
    with pytest.raises(ValidationError, match="extra"):
        local_policy("acme", verifier={"ladder": {"strong": "x", "margin": 0.2}})
    with pytest.raises(ValidationError):
        local_policy("acme", verifier={"ladder": {"max_share": 1.5}})


def test_only_the_unsure_claims_climb_and_the_strong_verdict_replaces_the_fast_one() -> None:
    strong = ScriptedVerifier(SUPPORTED, name="strong")
    pol = policy(max_share=1.0)
    v = run(f"{SURE} {UNSURE_A}", pol, Rungs(fast_verifier(), strong))
    assert strong.batches == [1]  # one claim, its one passage: the sure claim never climbed
    r = by_text(decide_claims(v, pol))
    assert (r[SURE].rung, r[SURE].rung_verifier, r[SURE].verdict) == ("fast", "fast", "supported")
    assert (r[UNSURE_A].rung, r[UNSURE_A].rung_verifier) == ("strong", "strong")
    assert r[UNSURE_A].verdict == "supported"  # the fast rung alone: unverifiable
    assert r[UNSURE_A].probs.supported == pytest.approx(SUPPORTED.supported)
    assert r[UNSURE_A].uncertainty < 0.7  # the strong rung's own margin: sure now
    assert "ladder" in v.stage_ms
    alone = by_text(decide_claims(run(f"{SURE} {UNSURE_A}", pol, Rungs(fast_verifier())), pol))
    assert alone[UNSURE_A].verdict == "unverifiable" and alone[UNSURE_A].rung == "fast"


def test_the_margin_that_escalates_is_the_policys() -> None:
    strong = ScriptedVerifier(SUPPORTED, name="strong")
    pol = policy(max_share=1.0, min_uncertainty=0.9)  # UNSURE_B's margin 0.83 is under it
    v = run(f"{UNSURE_A} {UNSURE_B}", pol, Rungs(fast_verifier(), strong))
    r = by_text(decide_claims(v, pol))
    assert (r[UNSURE_A].rung, r[UNSURE_B].rung) == ("strong", "fast")
    assert r[UNSURE_B].rung_skipped is None  # not unsure enough: nothing was skipped


def test_the_share_caps_the_strong_rung_most_uncertain_first_the_rest_marked() -> None:
    assert [share_cap(n, 0.25) for n in (0, 1, 2, 4, 5, 8)] == [0, 1, 1, 1, 2, 2]
    assert share_cap(3, 0.0) == 0
    strong = ScriptedVerifier(SUPPORTED, name="strong")
    pol = policy(max_share=0.25)
    v = run(f"{SURE} {UNSURE_B} {UNSURE_A}", pol, Rungs(fast_verifier(), strong))
    r = by_text(decide_claims(v, pol))
    assert r[UNSURE_A].rung == "strong"  # margin 0.92: the most uncertain
    assert (r[UNSURE_B].rung, r[UNSURE_B].rung_skipped) == ("fast", "share")
    assert r[UNSURE_B].verdict == "unverifiable"  # its fast verdict stands
    assert r[SURE].rung_skipped is None
    report = apply(v, pol)
    body, headers = report_body(report, "acme@1"), report_headers(report, "acme@1", "s", "r")
    assert body["ladder"] == {"fast": 2, "strong": 1, "judge": 0, "skipped": 1, "skipped_share": 1}
    assert headers["x-groundproxy-ladder"] == (
        "fast=2; strong=1; judge=0; skipped=1; skipped_share=1"
    )  # fmt: skip
    claims = {c["text"]: c for c in body["claims"]}
    assert claims[UNSURE_A]["rung"] == "strong" and claims[UNSURE_A]["rung_verifier"] == "strong"
    assert claims[UNSURE_B]["rung_skipped"] == "share" and "rung_skipped" not in claims[SURE]


def test_select_ranks_eligible_unsure_claims() -> None:
    def result(u: float) -> ClaimResult:
        from groundproxy.guards.types import Claim

        return ClaimResult(Claim("c", (0, 1)), "unverifiable", Probs(0.3, 0.1, 0.6), u)

    results = [result(0.8), result(0.95), result(0.2), result(0.99), result(0.9)]
    eligible = [True, True, True, False, True]
    assert select(results, eligible, 0.7, 0.4) == ([1, 4], [0])  # cap 2 of 5; #3 ineligible
    assert select(results, eligible, 0.7, 0.0) == ([], [1, 4, 0])


def test_a_claim_the_strong_rung_would_not_finish_in_the_budget_is_skipped_marked() -> None:
    clock = FakeClock()
    # each strong call takes 0.1 s of the fake clock; the meter knows it from an earlier one

    def slow(pair: Pair) -> Probs:
        clock.advance(0.1)
        return SUPPORTED

    strong = ScriptedVerifier(slow, name="strong")
    meter = CostMeter(ms_per_pair=100.0)
    pol = policy(max_share=1.0, budget_ms=150)
    v = run(
        f"{UNSURE_B} {UNSURE_A}", pol, Rungs(fast_verifier(), strong, None, meter, clock.monotonic)
    )
    r = by_text(decide_claims(v, pol))
    assert strong.batches == [1]  # the most uncertain one; the second would end past 150 ms
    assert r[UNSURE_A].rung == "strong"
    assert (r[UNSURE_B].rung, r[UNSURE_B].rung_skipped) == ("fast", "budget")
    assert r[UNSURE_B].verdict == "unverifiable"
    # the guard's own deadline bounds it too: nothing fits before it, nothing is scored
    strong.batches.clear()
    early = Rungs(fast_verifier(), strong, clock.now + 0.06, meter, clock.monotonic)
    v = run(f"{UNSURE_B} {UNSURE_A}", policy(max_share=1.0, budget_ms=10_000), early)
    assert strong.batches == []
    assert {s.skipped for s in v.claims} == {"budget"}
    # budget_ms 0: the strong rung never runs, every unsure claim says so
    v = run(UNSURE_A, policy(budget_ms=0), Rungs(fast_verifier(), strong))
    assert [s.skipped for s in v.claims] == ["budget"] and strong.batches == []


def test_the_strong_rung_checks_halt_before_each_claim_and_skips_the_rest_marked() -> None:
    """Each strong claim is a slice: the guard's halt runs before it (where the serving layer
    takes its turn at the cores, issue 40.17); once it says stop, the rest is skipped."""
    strong = ScriptedVerifier(lambda p: SUPPORTED, name="strong")
    calls: list[int] = []

    def halt() -> bool:
        calls.append(len(strong.batches))
        return len(calls) > 1  # the caller gave up after the first claim

    pol = policy(max_share=1.0)
    v = run(f"{UNSURE_A} {UNSURE_B}", pol, Rungs(fast_verifier(), strong, halt=halt))
    assert calls == [0, 1]  # before the first claim, and before the second
    assert strong.batches == [1]
    assert sorted(str(s.skipped) for s in v.claims) == ["None", "budget"]


def test_a_failing_strong_rung_keeps_the_fast_verdicts_marked_error() -> None:
    strong = ScriptedVerifier(error=RuntimeError("model gone"), name="strong")
    pol = policy(max_share=1.0)
    v = run(f"{UNSURE_A} {UNSURE_B}", pol, Rungs(fast_verifier(), strong))
    assert strong.batches == [1]  # tried once; the next claim was not tried again
    r = by_text(decide_claims(v, pol))
    assert {x.rung_skipped for x in r.values()} == {"error"}
    assert {x.rung for x in r.values()} == {"fast"} and r[UNSURE_A].verdict == "unverifiable"


def test_a_claim_the_strong_rung_scored_is_decided_with_its_own_threshold() -> None:
    strong = ScriptedVerifier(Probs(0.2, 0.05, 0.75), name="strong")
    strong.threshold = 0.15  # type: ignore[attr-defined]  # its fitted one (build.json)
    v = run(UNSURE_A, policy(), Rungs(fast_verifier(), strong))
    (r,) = decide_claims(v, policy())
    assert r.rung == "strong" and r.verdict == "supported"  # 0.2 ≥ 0.15 (the fast bar: 0.6)
    pinned = local_policy("acme", verifier={"threshold": 0.5, "ladder": {"strong": "strong"}})
    (r,) = decide_claims(run(UNSURE_A, pinned, Rungs(fast_verifier(), strong)), pinned)
    assert r.rung == "strong" and r.verdict == "unverifiable"  # a policy number binds both


def test_ladder_off_scores_nothing_twice() -> None:
    strong = ScriptedVerifier(SUPPORTED, name="strong")
    pol = policy(strong="none")
    v = run(f"{SURE} {UNSURE_A}", pol, Rungs(fast_verifier(), strong))
    assert strong.batches == []
    assert {(r.rung, r.rung_skipped) for r in decide_claims(v, pol)} == {("fast", None)}
    report = run_guard(
        UNSURE_A, question=QUESTION, context_messages=CONTEXT, policy=policy(),
        backends=Backends(fast_verifier(), strong=strong),
    )  # fmt: skip
    assert [c.rung for c in report.claims] == ["strong"]  # run_guard climbs with Backends.strong


def test_a_judged_claim_says_the_judge_decided_it() -> None:
    strong = ScriptedVerifier(SUPPORTED, name="strong")
    pol = policy(max_share=1.0)
    v = run(f"{SURE} {UNSURE_A}", pol, Rungs(fast_verifier(), strong))
    results = decide_claims(v, pol)
    verdict = JudgeVerdict("contradicted", "Support is open on weekdays.", "no")
    merged = merge(
        results, [s.evidence for s in v.claims], {1: Outcome(verdict=verdict)}, "judge-m"
    )
    assert [(r.rung, r.rung_verifier) for r in merged] == [("fast", "fast"), ("judge", "judge-m")]
    skipped = merge(results, [s.evidence for s in v.claims], {1: Outcome(skipped="timeout")}, "m")
    assert skipped[1].rung == "strong"  # a skipped judge decided nothing


def test_pairs_the_strong_rung_scores_are_the_claims_own() -> None:
    seen: list[Pair] = []

    def seeing(pair: Pair) -> Probs:
        seen.append(pair)
        return SUPPORTED

    strong = ScriptedVerifier(seeing, name="strong")
    run(f"{SURE} {UNSURE_A}", policy(max_share=1.0), Rungs(fast_verifier(), strong))
    assert [p.claim for p in seen] == [UNSURE_A] and seen[0].question == QUESTION
    assert "weekdays" in seen[0].evidence


def test_a_calibrated_decision_is_kept_nothing_climbs() -> None:
    # verifier.threshold: calibrated — the tenant decides by its conformal threshold, whose
    # guarantee is the fast verifier's: the strong rung never overrides it
    strong = ScriptedVerifier(SUPPORTED, name="strong")
    ladder = {"strong": "strong", "max_share": 1.0}
    pol = local_policy("acme", verifier={"threshold": "calibrated", "ladder": ladder})
    v = run(f"{SURE} {UNSURE_A}", pol, Rungs(fast_verifier(), strong))
    assert strong.batches == []
    assert {r.rung for r in decide_claims(v, pol)} == {"fast"}
