"""Issue 40 items 1 and 15 (pure logic): a judge's ``supported`` quote must entail the claim
(its values — words and digits alike — and its item, asserted for the present), a judge
never overturns a value rule's mismatch (they disagree → flagged, both said), and a claim
only the verifier contradicts does not trip the trust floor."""

from __future__ import annotations

import dataclasses

import pytest

from groundproxy.guards.action import answer_action, below_floor, claim_action
from groundproxy.guards.judge.merge import judged_label, merge, summarize
from groundproxy.guards.judge.opinion import Escalated, JudgeVerdict, Outcome, checked, quote_holds
from groundproxy.guards.types import Claim, ClaimResult, Evidence, Probs
from groundproxy.policies.schema import local_policy


def _holds(evidence: str, claim: str, quote: str, verdict: str = "supported") -> bool:
    item = Escalated(0, "c1", claim, (evidence,))
    return quote_holds(item, JudgeVerdict(verdict, quote, "scripted"))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("evidence", "claim", "quote"),
    [
        # a span without the claim's value (before: one shared content word was enough)
        ("The battery is covered for 6 months.", "The battery is covered for ten years.",
         "The battery is covered for"),
        ("The robot weighs 3.4 kg.", "The robot weighs nine kilograms.", "The robot weighs"),
        ("Returns are accepted within 30 days.", "Returns are accepted within ninety days.",
         "Returns are accepted within"),
        ("The warranty lasts 12 months.", "The warranty lasts four years.", "The warranty lasts"),
        # the claim's digits in the quote, but as another item's value
        ("The battery is covered for 6 months. The robot warranty is 12 months.",
         "The battery is covered for 12 months.",
         "The battery is covered for 6 months. The robot warranty is 12 months"),
        # a swapped city
        ("Acme robots are assembled in Lyon.", "Acme robots are assembled in Paris.",
         "Acme robots are assembled in"),
        # the value stated only as a belief, a past or a planned value
        ("Some customers believe the warranty is 48 months, but they are wrong.",
         "The warranty is 48 months.", "the warranty is 48 months"),
        ("Until 2019 the warranty was 48 months.", "The warranty is 48 months.",
         "the warranty was 48 months"),
        ("Acme plans to offer a warranty of 48 months in 2030.", "The warranty is 48 months.",
         "a warranty of 48 months"),
        # denied around the quote
        ("No robot has a warranty of 48 months.", "The robot has a warranty of 48 months.",
         "robot has a warranty of 48 months"),
        # a quote holding too little of the claim
        ("Return shipping is free for customers in the European Union.",
         "Return shipping is free for all customers worldwide, including Canada and Japan.",
         "shipping is free"),
    ],
)  # fmt: skip
def test_a_supported_quote_that_does_not_entail_the_claim_is_unquoted(
    evidence: str, claim: str, quote: str
) -> None:
    assert not _holds(evidence, claim, quote)
    item = Escalated(0, "c1", claim, (evidence,))
    verdict = JudgeVerdict("supported", quote, "scripted")
    assert checked(item, verdict) == Outcome(skipped="unquoted")


@pytest.mark.parametrize(
    ("evidence", "claim", "quote"),
    [
        ("The battery is covered for 6 months.", "The battery is covered for six months.",
         "The battery is covered for 6 months"),
        ("The warranty lasts 12 months.", "The warranty lasts one year.",
         "The warranty lasts 12 months"),
        ("Every Acme vacuum robot comes with a limited warranty of 12 months from the date of "
         "purchase.", "The warranty lasts 12 months.", "limited warranty of 12 months"),
        ("Refunds are issued to the original payment method within 10 business days.",
         "Refunds are issued within 10 business days.", "within 10 business days"),
        ("Acme robots are assembled in Lyon.", "Acme robots are assembled in Lyon.",
         "Acme robots are assembled in Lyon"),
        ("Until 2019 the warranty was 48 months.", "Until 2019 the warranty was 48 months.",
         "Until 2019 the warranty was 48 months"),
    ],
)  # fmt: skip
def test_a_supported_quote_that_entails_the_claim_holds(
    evidence: str, claim: str, quote: str
) -> None:
    assert _holds(evidence, claim, quote)


def test_a_contradicted_quote_needs_no_entailment() -> None:
    # the judge against a claim: the quote shows the evidence's value, not the claim's
    assert _holds("The battery is covered for 6 months.", "The battery is covered for ten years.",
                  "The battery is covered for 6 months", verdict="contradicted")  # fmt: skip


def _ev(text: str = "The warranty lasts 12 months.") -> Evidence:
    return Evidence(text, "handbook.md", "c1", 0.8, (0, len(text)))


def _ruled(claim: str = "The warranty lasts 24 months.") -> ClaimResult:
    """A claim a value rule contradicted, with its correction (as guards.verdict.decide makes
    it)."""
    probs = Probs(0.1, 0.8, 0.1)
    return ClaimResult(
        Claim(claim, (0, len(claim))), "contradicted", probs, 0.2, citations=[_ev()],
        correction="The warranty lasts 12 months.",
        explanation="evidence states 12 months, claim states 24 months", by_rule=True,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("verdict", "quote"),
    [("supported", "The warranty lasts 12 months"), ("unverifiable", "")],
)
def test_a_judge_never_overturns_a_value_rule(verdict: str, quote: str) -> None:
    # before: the judge's verdict replaced the rule's (supported → action none; unverifiable
    # → the correction dropped)
    outcome = Outcome(JudgeVerdict(verdict, quote, "injected"))  # type: ignore[arg-type]
    (merged,) = merge([_ruled()], [[_ev()]], {0: outcome}, "m")
    assert merged.verdict == "contradicted" and merged.disputed
    assert merged.correction == "The warranty lasts 12 months."
    assert merged.judge is not None and merged.judge["disputed"] is True
    assert merged.judge["verdict"] == verdict
    assert merged.explanation.startswith("evidence states 12 months, claim states 24 months")
    assert f"judge m disagrees: {verdict}" in merged.explanation
    policy = local_policy("acme")
    assert claim_action(merged, policy) == "flagged"
    assert answer_action([merged], policy) == "flag"
    assert not below_floor([merged], policy, 0.0)  # flagged, not blocked
    assert summarize([merged], "m", 1.0).overturned == 0
    assert judged_label([merged]) != 0  # never a "right answer" label


def test_a_judge_that_agrees_with_the_rule_keeps_the_correction() -> None:
    outcome = Outcome(JudgeVerdict("contradicted", "The warranty lasts 12 months", "agrees"))
    (merged,) = merge([_ruled()], [[_ev()]], {0: outcome}, "m")
    assert not merged.disputed and claim_action(merged, local_policy("acme")) == "corrected"


def test_a_judge_still_overturns_the_verifier() -> None:
    soft = dataclasses.replace(_ruled(), by_rule=False, correction=None, by_verifier=True)
    outcome = Outcome(JudgeVerdict("supported", "The warranty lasts 12 months", "agrees"))
    (merged,) = merge([soft], [[_ev()]], {0: outcome}, "m")
    assert merged.verdict == "supported" and not merged.disputed


def test_a_verifier_only_contradiction_does_not_trip_the_trust_floor() -> None:
    # issue 40 item 15: before, a claim only the verifier contradicted (another catalogue
    # item) blocked the answer — a whole stream at its first sentence — through the floor
    policy = local_policy("acme")
    by_verifier = dataclasses.replace(_ruled(), by_rule=False, correction=None, by_verifier=True)
    assert not below_floor([by_verifier], policy, 0.0)
    assert claim_action(by_verifier, policy) == "flagged"
    # a value rule's contradiction still does
    assert below_floor([_ruled()], policy, 0.0)
