"""Admission decisions, the answer cap, deadlines inside verify, and the guard queue's
estimate (pure parts; the real-process tests are tests/proxy/test_overload_process.py and
tests/proxy/test_long_answer_process.py)."""

from __future__ import annotations

import time

import anyio
import pytest

from groundproxy.errors import GuardTimeoutError, OverloadedError
from groundproxy.guards.action import apply
from groundproxy.guards.answer.failures import admission, overload_error, unverified_report
from groundproxy.guards.claims.decompose import decompose
from groundproxy.guards.claims.sentences import guard_cut, sentence_spans
from groundproxy.guards.pipeline import evidence_fn
from groundproxy.guards.verdict.lexical import LexicalVerifier
from groundproxy.guards.verdict.stages import verify
from groundproxy.policies.schema import Policy, local_policy
from groundproxy.proxy.serving.admission import GuardQueue

CONTEXT = [("system", "The warranty lasts 12 months. Batteries are covered for 6 months.")]
SENTENCE = "The warranty lasts 24 months. "


def policy(**over: object) -> Policy:
    return local_policy("t1", "x", **over)


def test_admission_per_on_overload() -> None:
    for mode, late in (("queue", "run"), ("unverified", "shed"), ("reject", "reject")):
        pol = policy(on_overload=mode, latency_budget_ms=800)
        assert admission(pol, 0.1, 0.3) == "run"  # fits the budget: always run
        assert admission(pol, 0.6, 0.3) == late
    err = overload_error(policy(on_overload="reject"), 2.2)
    assert isinstance(err, OverloadedError) and err.retry_after_s == 3


def test_on_overload_is_validated_with_the_choices() -> None:
    with pytest.raises(ValueError, match="queue"):
        policy(on_overload="drop")


def test_guard_cut_ends_at_a_sentence_before_the_cap() -> None:
    text = SENTENCE * 10
    assert guard_cut(text, 10_000) == len(text)
    cut = guard_cut(text, 100)
    assert cut <= 100 and text[:cut].endswith("months. ")


def test_long_answer_is_verified_up_to_the_cap_the_rest_marked() -> None:
    answer = SENTENCE * 20  # 600 chars
    for on_error in ("annotate", "block"):
        pol = policy(max_answer_chars=120, citations="none", on_guard_error=on_error)
        verified = verify(
            answer,
            question=None,
            policy=pol,
            verifier=LexicalVerifier(),
            evidence_for=evidence_fn(CONTEXT, pol, None, None, None),
        )
        assert len(verified.claims) == 4 and len(verified.answer) + len(verified.tail) == 600
        report = apply(verified, pol)
        assert report.unverified and report.original == answer
        if on_error == "block":  # the unverified rest is withheld, never returned
            assert report.blocked and report.text.endswith(pol.actions.refusal)
            assert answer[120:] not in report.text
        else:
            assert report.action == "unverified" and report.text.endswith(verified.tail)


def test_verify_stops_at_its_deadline() -> None:
    pol = policy()
    with pytest.raises(GuardTimeoutError, match="deadline"):
        verify(
            SENTENCE * 50,
            question=None,
            policy=pol,
            verifier=LexicalVerifier(),
            evidence_for=evidence_fn(CONTEXT, pol, None, None, None),
            halt=lambda: True,
        )


def test_long_paragraph_split_in_windows_same_sentences() -> None:
    text = ("Dr. Smith works at Acme Inc. in Paris. He joined in 2019. " * 60).strip()
    spans = sentence_spans(text, join_lines=True)
    assert len(spans) == 120  # abbreviations inside a window are still not cut
    assert all(text[s:e].endswith(".") for s, e in spans)
    with pytest.raises(GuardTimeoutError):
        decompose(text, lambda: True)


def test_unverified_report_falls_back_to_cheap_sentences_when_time_is_up() -> None:
    answer = "The warranty lasts 24 months, and batteries are covered for 6 months."
    assert len(unverified_report(answer, policy(), "r").claims) == 2  # clauses
    late = unverified_report(answer, policy(), "r", halt=lambda: True)
    assert [c.claim.text for c in late.claims] == [answer]  # one sentence, no clause split


def test_guard_queue_estimate_and_skipping_abandoned_work() -> None:
    queue = GuardQueue(workers=2)
    assert queue.estimate() == (0.0, 0.0)
    queue.recent_s = 0.2
    tickets = [queue.enter(10.0) for _ in range(5)]
    wait, guard_s = queue.estimate()
    assert guard_s == 0.2 and wait == pytest.approx(4 * 0.2 / 2)
    ran: list[int] = []
    tickets[0].leave()  # its caller gave up before a worker took it
    with pytest.raises(TimeoutError):
        tickets[0].run(lambda: ran.append(0))
    assert ran == [] and queue.in_flight == 4

    async def go() -> int:
        return await queue.run(lambda: 7, tickets[1])

    assert anyio.run(go) == 7 and queue.in_flight == 3
    expired = queue.enter(0.0)
    time.sleep(0.001)
    assert expired.expired()
