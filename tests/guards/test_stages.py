"""The guard's two stages (guards.verdict.stages, guards.action), the failure decisions
(guards.action) and the piece-by-piece answer of sentence streaming (guards.answer.streamed), with
the real lexical verifier and request-context evidence."""

from __future__ import annotations

import dataclasses
from typing import Any

from groundproxy.errors import GuardError, GuardTimeoutError
from groundproxy.guards.action import Segment, apply, disabled_report, failure_report
from groundproxy.guards.answer.failures import budget_error
from groundproxy.guards.answer.streamed import StreamedAnswer
from groundproxy.guards.pipeline import Backends, evidence_fn, run_guard
from groundproxy.guards.verdict.lexical import LexicalVerifier
from groundproxy.guards.verdict.stages import Verified, verify
from groundproxy.policies.schema import Policy, local_policy

CONTEXT = [("system", "The warranty lasts 12 months. Batteries are covered for 6 months.")]
QUESTION = "How long is the warranty?"
WRONG = "The warranty lasts 24 months."
RIGHT = "Batteries are covered for 6 months."


def policy(**over: Any) -> Policy:
    return local_policy("acme", "openai/gpt-4o-mini", **over)


def verified(answer: str, pol: Policy, threshold: float | None = None) -> Verified:
    found = verify(
        answer,
        question=QUESTION,
        policy=pol,
        verifier=LexicalVerifier(),
        evidence_for=evidence_fn(CONTEXT, pol, None, None, QUESTION),
    )
    return dataclasses.replace(found, threshold=threshold)  # a calibrated threshold in force


def test_verify_then_apply_is_run_guard() -> None:
    pol = policy()
    answer = f"{WRONG} {RIGHT}"
    v = verified(answer, pol)
    assert [s.claim.text for s in v.claims] == [WRONG, RIGHT]
    assert v.verifier == "lexical" and v.threshold is None
    assert all(s.evidence and len(s.probs) == len(s.evidence) for s in v.claims)
    assert v.claims[0].rule.correction == "The warranty lasts 12 months."
    assert v.claims[0].correction_probs is not None  # the correction was scored too
    staged = apply(v, pol)
    whole = run_guard(
        answer,
        question=QUESTION,
        context_messages=CONTEXT,
        policy=pol,
        backends=Backends(LexicalVerifier()),
    )
    assert staged.text == whole.text and staged.action == whole.action == "rewrite"
    assert staged.trust == whole.trust
    assert (
        [(c.verdict, c.action) for c in staged.claims]
        == [(c.verdict, c.action) for c in whole.claims]
        == [("contradicted", "corrected"), ("supported", "kept")]
    )


def test_apply_decides_under_the_policy_it_is_given() -> None:
    v = verified(WRONG, policy())  # verify once, apply under two policies
    flag = policy(actions={"contradicted": "flag", "block_below_trust": 0.0})
    assert apply(v, flag).action == "flag"
    assert apply(v, policy(actions={"contradicted": "flag"})).action == "block"  # the floor
    blocked = apply(v, policy(actions={"contradicted": "block"}))
    assert blocked.blocked and blocked.text == policy().actions.refusal
    # the threshold carried by Verified (a calibrated one) decides "supported"
    strict = apply(verified(RIGHT, policy(), threshold=1.0), policy())
    assert strict.claims[0].verdict != "supported"


def test_segment_mode_continues_citations_and_judges_the_floor_on_the_answer_so_far() -> None:
    pol = policy(citations="footnotes")
    seg = Segment()
    first = apply(verified(RIGHT, pol), pol, seg)
    assert first.text == "Batteries are covered for 6 months [1]." and "Sources" not in first.text
    assert len(seg.cited) == 1
    floor = policy(actions={"contradicted": "annotate", "block_below_trust": 0.9})
    piece = apply(verified(WRONG, floor), floor, Segment(prior=first.claims))
    assert piece.blocked and piece.action == "block"


def test_failure_decisions() -> None:
    pol, strict = policy(), policy(on_guard_error="block")
    failed = failure_report(WRONG, pol, GuardError("verifier backend crashed"))
    assert failed.unverified and failed.action == "unverified" and failed.text == WRONG
    assert failed.claims[0].explanation == "verifier backend crashed"
    refused = failure_report(WRONG, strict, GuardError("verifier backend crashed"))
    assert refused.blocked and refused.text == strict.actions.refusal
    # a budget overrun is a guard failure: annotate fails open, block refuses
    assert isinstance(budget_error(strict), GuardTimeoutError)
    late = failure_report(WRONG, pol, budget_error(pol))
    assert late.action == "unverified" and late.text == WRONG and not late.blocked
    late = failure_report(WRONG, strict, budget_error(strict))
    assert late.blocked and late.action == "block" and late.text == strict.actions.refusal
    off = disabled_report(WRONG, pol)
    assert off.unverified and off.claims[0].explanation == "guard disabled by policy"


def test_streamed_answer_withholds_everything_after_a_block() -> None:
    pol = policy(actions={"contradicted": "block"}, citations="none")
    answer = StreamedAnswer(pol)
    text, piece = answer.verified(verified(RIGHT, pol), 0, 1.0)
    assert text == RIGHT and not piece.blocked
    answer.sent.append(text)
    refusal, piece = answer.verified(verified(WRONG, pol), len(RIGHT) + 1, 1.0)
    assert piece.blocked and refusal == "\n\n" + pol.actions.refusal
    assert answer.passthrough("More text.") == ""
    report = answer.report()
    assert report.blocked and report.action == "block"
    assert [c.action for c in report.claims] == ["blocked", "blocked"]
    assert report.claims[1].claim.span[0] == len(RIGHT) + 1  # spans are into the answer
    assert report.original == f"{RIGHT}{WRONG}More text." and report.latency_ms == 2.0


def test_streamed_answer_marks_an_unverified_piece() -> None:
    pol = policy()
    answer = StreamedAnswer(pol)
    sent = answer.unverified(failure_report(RIGHT, pol, GuardError("down")), 0, 0.0)
    assert sent == RIGHT
    report = answer.report()
    assert report.unverified and report.action == "unverified" and report.trust == 0.0
