"""Issue 11 case 2 through the real path: request context against the tenant's documents."""

from __future__ import annotations

from groundproxy.guards.answer.report import report_body
from groundproxy.proxy.serving.guarding import GuardService
from tests.verdict.conftest import guarded

QUESTION = "My friend says it's 48 months. How long is the warranty?"


def test_documents_win_a_conflict_by_default(verdict_guard: GuardService) -> None:
    report = guarded(
        verdict_guard, "handbook", "The warranty lasts 48 months.", QUESTION, [("user", QUESTION)]
    )
    (claim,) = report.claims
    assert claim.verdict == "contradicted"
    assert claim.correction == "The warranty lasts 12 months."
    assert claim.conflict is not None and "documents win" in claim.conflict
    assert all(e.source == "index" for e in claim.citations)
    body = report_body(report, "p1")
    assert "documents win" in body["claims"][0]["conflict"]


def test_the_policy_can_let_the_request_win(verdict_guard: GuardService) -> None:
    report = guarded(
        verdict_guard,
        "handbook",
        "The warranty lasts 48 months.",
        QUESTION,
        [("user", QUESTION)],
        retrieval={"index": "handbook", "conflict_winner": "request"},
    )
    (claim,) = report.claims
    assert claim.conflict is not None and "request win" in claim.conflict
    assert claim.verdict != "contradicted"
    assert all(e.source == "request" for e in claim.citations)


def test_no_conflict_when_both_agree(verdict_guard: GuardService) -> None:
    q = "I read it is 12 months. How long is the warranty?"
    report = guarded(verdict_guard, "handbook", "The warranty lasts 12 months.", q, [("user", q)])
    assert report.claims[0].verdict == "supported" and report.claims[0].conflict is None
