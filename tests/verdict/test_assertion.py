"""Issue 29, verdict logic, through the real path (index on disk, embedhead ONNX): a value
— or a property — is evidence only where a document asserts it, and a correction comes
only from a passage about the same item and attribute."""

from __future__ import annotations

import pytest

from groundproxy.proxy.serving.guarding import GuardService
from tests.verdict.conftest import DENIALS, FRAMES, guarded

VALUE = "The Acme vacuum robot has a limited warranty of 48 months."
PROPERTY = "The Acme vacuum robot is waterproof."


@pytest.mark.parametrize("variant", sorted(FRAMES))
@pytest.mark.parametrize("answer", [VALUE, PROPERTY])
def test_a_document_that_does_not_assert_the_claim_does_not_support_it(
    verdict_guard: GuardService, variant: str, answer: str
) -> None:
    # before: the verifier read every one of these as support (P(supported) 0.7-0.99,
    # action none) but the question
    report = guarded(verdict_guard, f"frame-{variant}", answer)
    (claim,) = report.claims
    assert claim.verdict != "supported" and report.action != "none"
    assert claim.correction is None
    if variant in DENIALS:  # a denial is evidence against it
        assert claim.verdict == "contradicted" and "denies" in claim.explanation
    else:  # a quote, question or instruction is evidence of nothing
        assert claim.verdict == "unverifiable"
        assert claim.probs.supported < 0.3


def test_the_same_words_asserted_still_support(verdict_guard: GuardService) -> None:
    denied = "The Acme vacuum robot is not waterproof."
    assert guarded(verdict_guard, "frame-not", denied).claims[0].verdict == "supported"
    report = guarded(verdict_guard, "frame-not", "The Acme vacuum robot is a robot.")
    assert report.claims[0].verdict != "contradicted"


def test_a_correction_comes_from_the_same_attribute(verdict_guard: GuardService) -> None:
    # before: "Repairs … 90 days" was corrected to 30 days from the returns rule
    report = guarded(verdict_guard, "returns", "Repairs are done within 90 days of delivery.")
    (claim,) = report.claims
    assert claim.correction is None and claim.verdict == "unverifiable"
    assert report.text.startswith("Repairs are done within 90 days of delivery")
    # the returns rule still corrects a wrong return period
    wrong = guarded(verdict_guard, "returns", "You can return an unused robot within 60 days.")
    assert wrong.claims[0].correction == "You can return an unused robot within 30 days."


def test_a_correction_comes_from_the_same_item(verdict_guard: GuardService) -> None:
    # before: the lawn mower's warranty was corrected to the vacuum robot's 12 months
    mower = "The Acme lawn mower comes with a limited warranty of 24 months."
    report = guarded(verdict_guard, "robot-warranty", mower)
    (claim,) = report.claims
    assert claim.correction is None and claim.verdict != "supported"
    assert report.text.startswith(mower[:-1])
    robot = "The Acme vacuum robot has a limited warranty of 24 months."
    fixed = guarded(verdict_guard, "robot-warranty", robot)
    assert fixed.claims[0].correction == robot.replace("24", "12")


def test_a_denied_value_is_never_a_correction(verdict_guard: GuardService) -> None:
    # before: "10 years" was corrected to "48 months" taken from "… is not 48 months"
    report = guarded(verdict_guard, "battery-denial", "The battery warranty is 10 years.")
    (claim,) = report.claims
    assert claim.correction is None and claim.verdict != "supported"
    assert "48 months" not in report.text


def test_a_value_of_another_item_does_not_support_the_claim(verdict_guard: GuardService) -> None:
    # before: "24 months" (the mower's) supported the robot's warranty; "30 days" (returns)
    # supported the shipping time — the value stood in the passage, in another slot
    robot = guarded(
        verdict_guard, "two-items", "The Acme vacuum robot has a warranty of 24 months."
    )
    (claim,) = robot.claims
    assert claim.verdict == "contradicted"
    assert claim.correction == "The Acme vacuum robot has a warranty of 12 months."
    mower = guarded(verdict_guard, "two-items", "The Acme lawn mower has a warranty of 24 months.")
    assert mower.claims[0].verdict == "supported" and mower.action == "none"
    shipping = guarded(verdict_guard, "shipping", "Shipping takes 30 days.")
    assert shipping.claims[0].correction == "Shipping takes 5 days."
    assert guarded(verdict_guard, "shipping", "Shipping takes 5 days.").action == "none"


def test_a_correction_never_comes_from_another_item_named_elsewhere(
    verdict_guard: GuardService,
) -> None:
    # before: "10 years" for the battery was corrected to the robot's 12 months ("battery"
    # stands in the passage, so "robot" was read as an anaphor for it)
    report = guarded(verdict_guard, "battery-robot", "The battery warranty is 10 years.")
    (claim,) = report.claims
    assert claim.correction is None and claim.verdict != "supported"
    assert report.text.startswith("The battery warranty is 10 years")


def test_a_claim_only_wording_denies_is_flagged_not_removed(
    verdict_guard: GuardService,
) -> None:
    # the default policy rewrites contradicted claims; before, a claim a passage's wording
    # denied was removed from the answer like a wrong value — but the reading is a heuristic
    # (on HaluEval train summaries it fired on as many right answers as wrong ones), so the
    # claim is flagged and the text kept (issue 29: when unsure, flag instead of rewrite)
    answer = "The Acme vacuum robot is waterproof. Call support for help."
    report = guarded(verdict_guard, "frame-rumour", answer)
    claim = report.claims[0]
    assert claim.verdict == "contradicted" and "denies" in claim.explanation
    assert claim.by_wording and claim.action == "flagged"
    assert report.action == "flag" and "The Acme vacuum robot is waterproof" in report.text
    # a policy that blocks contradicted claims still blocks it
    blocked = guarded(verdict_guard, "frame-rumour", answer, actions={"contradicted": "block"})
    assert blocked.blocked and blocked.action == "block"


def test_a_denied_value_is_still_removed(verdict_guard: GuardService) -> None:
    # a value the evidence denies is not a wording heuristic: rewrite removes the claim (the
    # only one here, so the answer is blocked: row 9)
    report = guarded(verdict_guard, "denial-only", "The robot warranty is 10 years.")
    claim = report.claims[0]
    assert claim.verdict == "contradicted" and not claim.by_wording
    assert report.blocked and "10 years" not in report.text


def test_a_claim_only_the_verifier_contradicts_is_flagged_not_removed(
    verdict_guard: GuardService,
) -> None:
    # before: the verifier's contradiction alone (no value rule, no judge) removed the claim
    # under the default rewrite; on HaluEval train summaries such removals hit 12 right
    # answers for 15 wrong ones (900 pairs, seed 99), so a removal needs corroboration and
    # the claim is flagged, its text kept (issue 29: when unsure, flag instead of rewrite)
    answer = "The bridge was designed by Gustave Eiffel's company. It does not span the river."
    report = guarded(verdict_guard, "bridge", answer)
    claim = report.claims[1]
    assert claim.verdict == "contradicted" and claim.explanation.startswith("contradicted by")
    assert claim.by_verifier and not claim.by_wording and claim.action == "flagged"
    assert report.action == "flag" and "It does not span the river" in report.text
    # still contradicted for the trust score, and a policy that blocks contradicted claims
    # still blocks it
    assert report.trust is not None and report.trust < 0.7
    blocked = guarded(verdict_guard, "bridge", answer, actions={"contradicted": "block"})
    assert blocked.blocked and blocked.action == "block"


def test_a_bound_is_corrected_with_its_words(verdict_guard: GuardService) -> None:
    # before: "more than 30,000 claims" was "corrected" to "more than 30,621 claims" (a
    # HaluEval train summary), which the document does not say either
    answer = "TSA received more than 30,000 claims of missing valuables between 2010-2014."
    report = guarded(verdict_guard, "claims-count", answer)
    (claim,) = report.claims
    assert claim.correction == answer.replace("more than 30,000", "30,621")
    assert "more than 30,621" not in report.text
