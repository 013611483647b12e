"""Issue 11 cases 1, 6 and 8 through the real path (index on disk, embedhead ONNX)."""

from __future__ import annotations

import json
from pathlib import Path

from groundproxy.guards.verdict.decide import model_threshold
from groundproxy.models.embedhead_verifier import MODEL_DIR, load_meta
from groundproxy.proxy.cli.evaluate import EvalJob, evaluate, sample_rows
from groundproxy.proxy.serving.guarding import GuardService
from tests.verdict.conftest import guarded


def test_a_denied_value_does_not_support_the_claim(verdict_guard: GuardService) -> None:
    # case 1: "It was never 10 years." mentions 10 years only to deny it
    report = guarded(verdict_guard, "denial", "The robot is covered for 10 years.")
    (claim,) = report.claims
    assert claim.verdict == "contradicted"
    assert claim.correction == "The robot is covered for 12 months."
    assert "12 months [1]" in report.text and "10 years" not in report.text.split("Sources")[0]


def test_a_denial_alone_contradicts_without_a_correction(verdict_guard: GuardService) -> None:
    report = guarded(verdict_guard, "denial-only", "The robot warranty was 10 years.")
    (claim,) = report.claims
    assert claim.verdict == "contradicted" and claim.correction is None
    assert "evidence denies 10 years" in claim.explanation
    # the same value asserted with the same polarity is still supported
    same = guarded(verdict_guard, "denial-only", "The robot warranty was never 10 years.")
    assert [c.verdict for c in same.claims] == ["supported"]


def test_default_threshold_is_the_verifiers_fitted_one(verdict_guard: GuardService) -> None:
    # case 6: meta.json's threshold is the one in force unless the policy sets a number
    fitted = float(load_meta(MODEL_DIR)["threshold"])
    verifier = verdict_guard.verifier("default")
    assert model_threshold(verifier) == fitted
    verified = verdict_guard.verify_sync(
        "The warranty lasts 12 months.", None, [], _policy("handbook"), cache=False
    )
    assert verified.model_threshold == fitted
    # a claim whose P(supported) falls between the fitted threshold and 0.6 decides it (the
    # fast verifier's threshold: the ladder off, else the strong rung re-scores the claim)
    p_sup = verified.claims[0].probs[0].supported
    fast_only = {"ladder": {"strong": "none"}}
    by_model = guarded(
        verdict_guard, "handbook", "The warranty lasts 12 months.", verifier=fast_only
    )
    by_number = guarded(
        verdict_guard,
        "handbook",
        "The warranty lasts 12 months.",
        verifier={"threshold": p_sup + 1e-6, **fast_only},
    )
    assert by_model.claims[0].verdict == "supported"
    assert by_number.claims[0].verdict != "supported"
    assert "below" in by_number.claims[0].explanation


def _policy(tenant: str):  # type: ignore[no-untyped-def]
    from groundproxy.policies.schema import local_policy

    return local_policy(tenant, retrieval={"index": tenant}, latency_budget_ms=60_000)


def test_an_answer_without_claims_is_not_hallucinated_anywhere(
    verdict_guard: GuardService, tmp_path: Path
) -> None:
    # case 8: the guard passes it with trust 1.0, and eval counts it the same way
    report = guarded(verdict_guard, "handbook", "Do you like robots?")
    assert report.claims == [] and report.trust == 1.0 and report.action == "none"
    rows = [
        {"context": HANDBOOK_TEXT, "query": "q", "response": r, "label_hallucinated": lab}
        for r, lab in [
            ("Do you like robots?", 0),
            ("The warranty lasts 12 months.", 0),
            ("The warranty lasts 48 months.", 1),
            ("The warranty lasts 36 months.", 1),
        ]
    ]
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    result = evaluate(EvalJob(path, "lexical", "context", None), log=lambda s: None)
    assert result["balanced_accuracy"] == 1.0


HANDBOOK_TEXT = "The warranty lasts 12 months from the date of purchase."


def test_eval_limit_draws_a_seeded_sample() -> None:
    rows = list(range(1000))
    first = sample_rows(rows, 100, seed=0)
    assert len(first) == 100 and first == sorted(first) and first != rows[:100]
    assert first == sample_rows(rows, 100, seed=0)
    assert first != sample_rows(rows, 100, seed=1)
    assert sample_rows(rows, None) == rows
