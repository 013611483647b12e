"""``verifier.decision: learned``: the shipped answer combiner through the real path (real
index on disk, real embedhead ONNX verifier, :func:`build_guard`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from groundproxy.errors import PolicyError
from groundproxy.guards import FEATURES, answer_features, decide_claims
from groundproxy.models.evidence_text import clip_claim
from groundproxy.policies.schema import local_policy
from groundproxy.proxy.serving.guarding import GuardService, build_guard
from groundproxy.proxy.settings import Settings
from groundproxy.proxy.storage.adapters import MODELS_DIR, SHIPPED, shipped_decision, write_adapter
from groundproxy.retrieval.ingest import ingest_texts
from groundproxy.retrieval.onnx_embedder import OnnxEmbedder
from groundproxy.retrieval.token_states import TokenStates
from tests.verdict.conftest import HANDBOOK, guarded

# embedhead's shipped combiner (crossencoder's is tested in tests/models/test_crossencoder.py)
LEARNED = {"model": "embedhead", "decision": "learned"}
RIGHT = "The warranty lasts 12 months from the date of purchase."
WRONG = "The warranty lasts 48 months from the date of purchase."


def test_shipped_combiner_file_is_complete() -> None:
    content = json.loads((MODELS_DIR / SHIPPED["embedhead"]).read_text(encoding="utf-8"))
    assert content["source"] == "shipped" and content["verifier"] == "embedhead"
    assert set(content["features"]) <= set(FEATURES)
    fit = content["fit"]  # how it was fitted and what it scored, leave-one-train-file-out
    assert fit["n"] >= 1000 and len(fit["leave_one_file_out"]) >= 10
    assert 0.5 < fit["mean_roc_auc"] <= 1.0
    adapter = shipped_decision("embedhead")
    assert 0.0 < adapter.threshold < 1.0 and "learned answer-level" in adapter.label


def test_learned_decision_is_the_combiner_over_the_served_features(
    verdict_guard: GuardService,
) -> None:
    reports = {}
    for answer in (RIGHT, WRONG):
        report = guarded(verdict_guard, "handbook", answer, verifier=LEARNED)
        assert report.adapter is not None and report.adapter["source"] == "shipped"
        # the same number from the features of the same verification, recomputed here
        policy = local_policy(
            "handbook", retrieval={"index": "handbook"}, verifier={"model": "embedhead"}
        )
        verified = verdict_guard.verify_sync(answer, None, [], policy, cache=False)
        alignment = verdict_guard.alignment(verified)  # token states from the real MiniLM
        assert alignment is not None and len(alignment) == len(verified.claims)
        features = answer_features(verified, decide_claims(verified, policy), alignment)
        p = shipped_decision("embedhead").p_hallucinated(features)
        assert report.adapter["p_hallucinated"] == pytest.approx(p, abs=1e-4)
        reports[answer] = report
    right, wrong = reports[RIGHT].adapter, reports[WRONG].adapter
    assert right is not None and wrong is not None
    assert right["decision"] == "accept" and reports[RIGHT].action == "none"
    assert wrong["decision"] == "reject" and reports[WRONG].action != "none"
    # the default decision stays "every claim": no combiner in the report
    assert guarded(verdict_guard, "handbook", RIGHT).adapter is None


def test_the_guards_alignment_reads_the_index_token_states_stored_at_ingest(
    verdict_guard: GuardService, monkeypatch: pytest.MonkeyPatch
) -> None:
    embedder = verdict_guard.parts.embedder
    assert isinstance(embedder, OnnxEmbedder)
    policy = local_policy("handbook", retrieval={"index": "handbook"})
    verified = verdict_guard.verify_sync(WRONG, None, [], policy, cache=False)
    evidence = [e for s in verified.claims for e in s.evidence]
    assert evidence and all(e.source == "index" and e.sentences is not None for e in evidence)
    asked: list[str] = []
    real = embedder.token_states

    def spy(texts: Sequence[str]) -> list[TokenStates]:
        asked.extend(texts)
        return real(texts)

    monkeypatch.setattr(embedder, "token_states", spy)
    alignment = verdict_guard.alignment(verified)
    assert alignment is not None and embedder.keep_token_states  # switched on by the guard
    assert asked and set(asked) <= {clip_claim(s.claim.text) for s in verified.claims}


def test_the_alignment_reads_through_the_micro_batching_wrapper(
    tmp_path: Path, embedder: Any, verdict_guard: GuardService
) -> None:
    """With ``GROUNDPROXY_BATCH_WINDOW_MS`` on, the guard's embedder is a batching wrapper
    without token states: the alignment asks the configured embedder under it."""
    ingest_texts(tmp_path, "handbook", [("handbook.md", HANDBOOK)], embedder)
    policy = local_policy("handbook", retrieval={"index": "handbook"})
    settings = Settings(data=tmp_path, batch_window_ms=2)
    with build_guard(settings, embedder=embedder) as batched:
        assert not isinstance(batched.parts.embedder, OnnxEmbedder)  # the wrapper
        verified = batched.verify_sync(WRONG, None, [], policy, cache=False)
        alignment = batched.alignment(verified)
    assert alignment is not None
    plain = verdict_guard.alignment(verdict_guard.verify_sync(WRONG, None, [], policy, cache=False))
    assert plain is not None
    np.testing.assert_allclose(alignment, plain, atol=2e-3)


def test_learned_decision_needs_a_verifier_that_ships_one(verdict_guard: GuardService) -> None:
    with pytest.raises(PolicyError, match="verifier 'lexical' ships no answer combiner"):
        guarded(
            verdict_guard, "handbook", RIGHT, verifier={"model": "lexical", "decision": "learned"}
        )


def test_a_tenant_adapter_wins_over_the_learned_decision(tmp_path: Path, embedder: Any) -> None:
    ingest_texts(tmp_path, "acme", [("handbook.md", HANDBOOK)], embedder)
    content = json.loads((MODELS_DIR / SHIPPED["embedhead"]).read_text(encoding="utf-8"))
    # the tenant's own adapter: same features, accepts everything
    mine = {k: content[k] for k in ("features", "mean", "scale", "coef", "intercept")}
    write_adapter(tmp_path, "acme", {**mine, "verifier": "embedhead", "threshold": 1.0})
    policy = local_policy("acme", retrieval={"index": "acme"}, verifier=LEARNED)
    with build_guard(Settings(data=tmp_path, batch_window_ms=0), embedder=embedder) as guard:
        report = guard.guard_sync(WRONG, None, [], policy, cache=False)
    assert report.adapter is not None and report.adapter["source"] == "tenant"
    assert report.adapter["decision"] == "accept"


def test_policy_decision_values() -> None:
    assert local_policy("x").verifier.decision == "every_claim"  # the default is unchanged
    assert local_policy("x", verifier={"decision": "learned"}).verifier.decision == "learned"
    with pytest.raises(ValueError, match="every_claim"):
        local_policy("x", verifier={"decision": "any"})
