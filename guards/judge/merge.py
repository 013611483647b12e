"""Merging the judge's word into the claim verdicts, and what follows from it (pure logic).

:func:`merge` puts each escalated claim's outcome (:class:`guards.judge.opinion.Outcome`) into its
:class:`ClaimResult`; :func:`summarize` counts an answer's figures (:class:`JudgeSummary`);
:func:`settle` (:mod:`guards.action`, re-exported) runs stage 2 on the judged verdicts;
the figures and the failure test are :mod:`guards.judge.judged`'s; :func:`adapter_sure` says when
a tenant's adapter is confident enough that nothing is escalated, :func:`zero_shot_decides`
the same for a zero-shot decision the tenant's labels proved (``judge.labels`` feeds both:
escalations fall as they learn); :func:`judged_label` is the label a judged answer gives.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from groundproxy.guards.action import settle
from groundproxy.guards.adapter.combiner import Adapter, ZeroShotRecord
from groundproxy.guards.adapter.features import answer_features
from groundproxy.guards.judge.judged import FAILURES, Judged, JudgeSummary, failed
from groundproxy.guards.judge.opinion import Outcome, normalized
from groundproxy.guards.types import ClaimResult, Evidence
from groundproxy.guards.verdict.stages import Verified

__all__ = [
    "ADAPTER_GOOD", "ADAPTER_SURE", "FAILURES", "ZERO_SHOT_PROOF", "JudgeSummary", "Judged",
    "adapter_decides", "adapter_margin", "adapter_sure", "failed", "judged_label", "merge",
    "settle", "summarize", "zero_shot_decides",
]  # fmt: skip

# A tenant adapter decides an answer alone (nothing escalated) when it is as good as a
# judge by its own cross-fit (``fit.oof_balanced_accuracy`` ≥ ADAPTER_GOOD) and the answer
# lies at least ADAPTER_SURE from its decision boundary, in standardized feature units
# (:func:`adapter_margin`). Both checked on TRAIN (python -m bench.judge train-sure, pool
# 200, re-run on train-only signals: the first run's cache mixed in eval files of the same
# names): without the quality bar the adapter's error on the answers it is sure of stays
# above a 0.85 judge's 0.15 up to margin 2 (0.171 at margin 1, 0.113 at 3); with it, 0.012 at
# margin 1 (on the 3 % of train answers that adapters this good were sure of).
ADAPTER_GOOD = 0.85
ADAPTER_SURE = 1.0
# A tenant without an adapter, whose latest fit kept the zero-shot decision (a
# ZeroShotRecord), has it decide its answers alone when the record proves it as good as a
# judge on the tenant's labels: zero-shot balanced accuracy ≥ ADAPTER_GOOD on at least
# ZERO_SHOT_PROOF of them. No per-answer cut is asked of it: the proof is measured on the
# tenant's own answers, so it already states zero-shot's error where it will decide, and
# ``judge.audit`` keeps a share of those answers judged — the next fit revokes the proof
# when zero-shot stops agreeing with the judge. On TRAIN (python -m bench.judge_zero) labels
# from the uncertain tail never prove it (zero-shot is near chance there: 0.36-0.75), labels
# from every answer prove it on halueval-qa only (0.878 on the held-out half).
ZERO_SHOT_PROOF = 10


def _cited(item_evidence: Sequence[Evidence], quote: str) -> list[Evidence]:
    q = normalized(quote)
    return [e for e in item_evidence if q and q in normalized(e.text)][:1]


def merge(
    results: Sequence[ClaimResult],
    evidence: Sequence[Sequence[Evidence]],
    outcomes: Mapping[int, Outcome],
    model: str,
) -> list[ClaimResult]:
    """Copies of ``results`` with each escalated claim's outcome (``outcomes`` by claim
    index): a judged claim takes the judge's verdict (the citation is the passage holding
    the quote; a correction survives only when the judge agrees the claim is contradicted),
    a skipped one keeps the verifier's verdict; both carry ``judge``. A claim a value rule
    contradicted (``by_rule``) keeps its verdict whatever the judge says: when the judge
    disagrees it is ``disputed`` (flagged, ``judge.disputed``, both in the explanation)."""
    out = list(results)
    for i, o in outcomes.items():
        r = results[i]
        if o.verdict is None:
            out[i] = dataclasses.replace(r, judge={"skipped": o.skipped, "model": model})
            continue
        v = o.verdict
        info: dict[str, Any] = {
            "verdict": v.verdict, "quote": v.quote, "reason": v.reason, "model": model,
            "ms": round(o.ms, 1), "verifier_verdict": r.verdict,
        }  # fmt: skip
        if o.cached:
            info["cached"] = True
        if v.verdict == r.verdict:  # a quoted agreement: sure now, as the verifier would be
            out[i] = dataclasses.replace(
                r, judge=info, by_wording=False, by_verifier=False, rung="judge",
                rung_verifier=model,
            )  # fmt: skip
            continue
        if r.by_rule:  # a value rule's mismatch is never overturned: flagged, both said
            info["disputed"] = True
            said = f"judge {model} disagrees: {v.verdict}" + (f' ("{v.quote}")' if v.quote else "")
            out[i] = dataclasses.replace(
                r,
                judge=info,
                disputed=True,
                explanation=f"{r.explanation}; {said}; the value rule's verdict stands",
            )
            continue
        said = f"judge {model}: {v.verdict}" + (f' ("{v.quote}")' if v.quote else "")
        out[i] = dataclasses.replace(
            r,
            verdict=v.verdict,
            citations=_cited(evidence[i], v.quote) or r.citations,
            correction=r.correction if v.verdict == "contradicted" else None,
            correction_support=r.correction_support if v.verdict == "contradicted" else None,
            explanation=f"{said}; verifier said {r.verdict}: {r.explanation}",
            judge=info,
            by_wording=False,
            by_verifier=False,
            rung="judge",
            rung_verifier=model,
        )
    return out


def summarize(merged: Sequence[ClaimResult], model: str, ms: float) -> JudgeSummary:
    """The figures of one judged answer (or piece) from its merged results."""
    judged = [r.judge for r in merged if r.judge is not None]
    skipped = tuple(j["skipped"] for j in judged if "skipped" in j)
    overturned = sum(
        1
        for j in judged
        if "verdict" in j and j["verdict"] != j["verifier_verdict"] and not j.get("disputed")
    )
    return JudgeSummary(len(judged), overturned, len(skipped), ms, skipped, model)


def judged_label(merged: Sequence[ClaimResult]) -> int | None:
    """The answer's label for the tenant's adapter (``judge.labels``) from a judged answer,
    or None when the judge did not settle it: 1 (hallucinated) when the judge found a claim
    contradicted or unverifiable; 0 when it judged at least one claim and every claim is
    supported (judged so, or — not escalated — by the verifier); None when nothing was
    judged, a judge call was skipped, or a claim the judge never saw is not supported."""
    judged = [r.judge for r in merged if r.judge is not None and "verdict" in r.judge]
    if any(j["verdict"] != "supported" for j in judged):
        return 1
    if not judged or any(r.judge is not None and "skipped" in r.judge for r in merged):
        return None
    return 0 if all(r.verdict == "supported" for r in merged) else None


def adapter_sure(
    adapter: Adapter,
    verified: Verified,
    results: Sequence[ClaimResult],
    alignment: Sequence[tuple[float, float, float]] | None = None,
    logprobs: Sequence[tuple[float, float]] | None = None,
) -> bool:
    """Is ``adapter`` good enough (cross-fitted balanced accuracy ≥ :data:`ADAPTER_GOOD`,
    and its fit let it decide alone: ``fit.decides_alone``, proven on reviewers' labels
    held back from it — never on judge labels alone) and the answer at least
    :data:`ADAPTER_SURE` from its decision boundary (:func:`adapter_margin`)? (Then the
    adapter decides alone and no claim is escalated.)"""
    return adapter_decides(adapter, answer_features(verified, results, alignment, logprobs))


def adapter_decides(adapter: Adapter, features: Mapping[str, float]) -> bool:
    """:func:`adapter_sure` on the answer's features (:func:`answer_features`)."""
    good = (adapter.oof_balanced_accuracy or 0.0) >= ADAPTER_GOOD and adapter.decides_alone
    return good and adapter_margin(adapter, features) >= ADAPTER_SURE


def zero_shot_decides(record: ZeroShotRecord, results: Sequence[ClaimResult]) -> bool:
    """Does the zero-shot decision decide this answer alone (nothing escalated)? When
    ``record`` proves it: balanced accuracy ≥ :data:`ADAPTER_GOOD` on ≥
    :data:`ZERO_SHOT_PROOF` of the tenant's labels (an answer without claims has nothing to
    escalate anyway)."""
    proven = (record.balanced_accuracy or 0.0) >= ADAPTER_GOOD and record.n >= ZERO_SHOT_PROOF
    return proven and bool(results)


def _logit(p: float) -> float:
    p = min(max(p, 1e-12), 1.0 - 1e-12)
    return math.log(p / (1.0 - p))


def adapter_margin(adapter: Adapter, features: Mapping[str, float]) -> float:
    """The answer's distance from the adapter's decision boundary in standardized feature
    units: ``|logit(p) − logit(threshold)| / ‖coef‖``. Unlike the distance in probability,
    it does not shrink with the fit's L2 strength (``calibrate --fit`` may pick a strong one,
    whose probabilities all sit near 0.5 however separable the labels); 0 for an adapter
    without weights (never sure)."""
    norm = math.sqrt(sum(c * c for c in adapter.coef))
    if norm == 0.0:
        return 0.0
    gap = _logit(adapter.p_hallucinated(features)) - _logit(adapter.threshold)
    return abs(gap) / norm
