"""The served uncertainty: a claim's decision margin and the answer's decision risk."""

from __future__ import annotations

import pytest

from groundproxy.guards.verdict.uncertainty import decision_risk, margin_risk


def test_the_margin_is_one_at_the_threshold_and_zero_where_the_verifier_is_sure() -> None:
    assert margin_risk(0.57, True, 0.57) == pytest.approx(1.0)
    assert margin_risk(0.57, False, 0.57) == pytest.approx(1.0)
    assert margin_risk(1.0, True, 0.57) == 0.0 and margin_risk(0.0, False, 0.57) == 0.0
    assert margin_risk(0.785, True, 0.57) == pytest.approx(0.5)
    assert margin_risk(0.285, False, 0.57) == pytest.approx(0.5)
    # the raw probability may sit on the other side of the threshold (a rule, the context
    # overruled it): as unsure as can be, clipped
    assert margin_risk(0.9, False, 0.57) == 1.0 and margin_risk(0.2, True, 0.57) == 1.0
    assert margin_risk(-3.0, False, 0.5) == 0.0 and margin_risk(7.0, True, 0.5) == 0.0
    # degenerate thresholds never divide by zero
    assert margin_risk(0.5, True, 1.0) == 0.0 and margin_risk(0.5, False, 0.0) == 0.0


def test_the_answer_risk_follows_the_claims_that_decide_it() -> None:
    # accepted (every claim supported): any claim may be the error — the weakest one
    assert decision_risk([(0.1, True), (0.7, True)]) == 0.7
    # rejected: it flips only if every rejecting claim is wrong — the surest one decides
    assert decision_risk([(0.9, True), (0.6, False), (0.95, False)]) == 0.6
    assert decision_risk([]) == 0.0
