"""The aggregate over an answer's choices (guards.answer.choices): claims of every choice with their
spans moved into the joined text, the lowest trust, the strongest action, judge figures
summed; one choice is its own report."""

from __future__ import annotations

from groundproxy.guards.answer.choices import SEPARATOR, combined, combined_judge
from groundproxy.guards.answer.report import report_headers
from groundproxy.guards.types import Claim, ClaimResult, GuardReport, Probs


def _choice(text: str, verdict: str, trust: float, action: str, **kw: object) -> GuardReport:
    claim = ClaimResult(Claim(text, (0, len(text))), verdict, Probs(0.3, 0.4, 0.3), 0.5)  # type: ignore[arg-type]
    return GuardReport(text, text, [claim], trust, action, **kw)  # type: ignore[arg-type]


def test_one_choice_is_its_own_report() -> None:
    one = _choice("The warranty is 12 months.", "supported", 0.9, "none")
    got = combined([one], latency_ms=12.0)
    assert got.claims == one.claims and got.trust == 0.9 and got.latency_ms == 12.0


def test_every_choice_counts() -> None:
    first = _choice("The warranty is 12 months.", "supported", 0.9, "none",
                    judge={"escalated": 1, "overturned": 0, "skipped": 1, "ms": 4.0,
                           "model": "j", "skipped_reasons": {"timeout": 1}})  # fmt: skip
    second = _choice("It weighs 9 kg.", "contradicted", 0.2, "rewrite",
                     judge={"escalated": 2, "overturned": 1, "skipped": 1, "ms": 6.5,
                            "model": "j", "skipped_reasons": {"bad_json": 1}})  # fmt: skip
    empty = GuardReport("Hi!", "Hi!", [], 1.0, "none")  # no claims: no trust of its own
    got = combined([first, second, empty], latency_ms=30.0)
    assert got.original == SEPARATOR.join(["The warranty is 12 months.", "It weighs 9 kg.", "Hi!"])
    assert [got.original[a:b] for a, b in (r.claim.span for r in got.claims)] == [
        "The warranty is 12 months.", "It weighs 9 kg."]  # fmt: skip
    assert got.trust == 0.2 and got.action == "rewrite" and got.latency_ms == 30.0
    assert got.judge == {"escalated": 3, "overturned": 1, "skipped": 2, "ms": 10.5, "model": "j",
                         "skipped_reasons": {"timeout": 1, "bad_json": 1}}  # fmt: skip
    headers = report_headers(got, "p", "s", "r")
    assert headers["x-groundproxy-claims"].startswith("total=2; supported=1; contradicted=1")
    assert headers["x-groundproxy-judge"] == "escalated=3; overturned=1; skipped=2; ms=10"
    assert headers["x-groundproxy-trust"] == "0.20"


def test_no_claims_anywhere_is_still_no_claims() -> None:
    got = combined([GuardReport("Hi", "Hi", [], 1.0, "none")] * 2)
    assert got.reported_trust is None and got.action == "none"
    assert combined_judge([]) is None
