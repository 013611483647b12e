"""``ClaimResult.uncertainty`` (issue 29, item 5): the verifier's ranker of its own errors,
through the real path (real index on disk, embedhead ONNX, build_guard)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from groundproxy.errors import ModelLoadError
from groundproxy.guards import answer_signals, decide_claims
from groundproxy.guards.adapter.signals import CLAIM_FIELDS
from groundproxy.guards.verdict.cache import CachingVerifier
from groundproxy.guards.verdict.stages import decide
from groundproxy.guards.verdict.uncertainty import (
    RISK_FEATURES,
    ErrorRanker,
    error_ranker,
    features_from_claim_row,
    margin_risk,
    risk_features,
)
from groundproxy.policies.schema import local_policy
from groundproxy.proxy.serving.guarding import GuardService

ANSWER = "The warranty lasts 48 months. It lasts 12 months from the date of purchase."


def _ranker(weight: float) -> ErrorRanker:
    n = len(RISK_FEATURES)
    model = {"mean": [0.0] * n, "scale": [1.0] * n, "coef": [0.0] * n, "intercept": 0.0}
    margin = {**model, "coef": [weight if f == "abs_margin" else 0.0 for f in RISK_FEATURES]}
    return ErrorRanker.from_dict(
        {"features": list(RISK_FEATURES), "models": {"supported": margin, "other": margin}}
    )


def test_the_ranker_reads_what_the_signals_record(verdict_guard: GuardService) -> None:
    policy = local_policy("handbook", retrieval={"index": "handbook"}, latency_budget_ms=60_000)
    verified = verdict_guard.verify_sync(ANSWER, None, [], policy, cache=False)
    results = decide_claims(verified, policy)
    rows = answer_signals(verified, results)["claims"]
    tau = verified.model_threshold or 0.6
    for s, r, row in zip(verified.claims, results, rows, strict=True):
        served = risk_features(s, r, tau, len(results))
        assert served == pytest.approx(features_from_claim_row(row, CLAIM_FIELDS, tau, 2))


def test_a_ranker_sets_the_served_uncertainty(verdict_guard: GuardService) -> None:
    policy = local_policy("handbook", retrieval={"index": "handbook"}, latency_budget_ms=60_000)
    verified = verdict_guard.verify_sync(ANSWER, None, [], policy, cache=False)
    plain = decide(verified, policy)
    tau = verified.model_threshold or 0.6
    # no ranker: the decision margin of the best raw P(supported) over the claim's passages;
    # 0 for a claim a value rule contradicted (the rule is sure; issue 41, item 4)
    margins = [
        0.0
        if r.verdict == "contradicted" and s.rule.mismatches and not r.by_wording
        else margin_risk(max(p.supported for p in s.probs), r.verdict == "supported", tau)
        for s, r in zip(verified.claims, plain, strict=True)
    ]
    assert 0.0 in margins  # the handbook answer's wrong value
    assert [r.uncertainty for r in plain] == pytest.approx(margins)
    assert any(r.uncertainty != pytest.approx(r.probs.uncertainty()) for r in plain)
    ranked = decide(replace(verified, ranker=_ranker(-4.0)), policy)
    # claims far from the threshold (a rule's 0.10, a confident support) are surer than 0.5
    assert all(0.0 <= r.uncertainty < 0.5 for r in ranked)
    assert [r.verdict for r in ranked] == [r.verdict for r in plain]  # verdicts unchanged


def test_the_verifier_carries_its_ranker_through_wrappers(verdict_guard: GuardService) -> None:
    inner = verdict_guard.verifier("default")
    wrapped = CachingVerifier(inner, verdict_guard.parts.verdict_cache, "t")
    assert error_ranker(wrapped) is error_ranker(inner)


def test_a_bad_ranker_file_is_refused() -> None:
    with pytest.raises(ModelLoadError, match="features"):
        ErrorRanker.from_dict({"features": ["nope"], "models": {}})
    with pytest.raises(ModelLoadError, match="other"):
        good = _ranker(1.0)
        n = len(good.features)
        model = {"mean": [0.0] * n, "scale": [1.0] * n, "coef": [0.0] * n, "intercept": 0.0}
        ErrorRanker.from_dict({"features": list(good.features), "models": {"supported": model}})
