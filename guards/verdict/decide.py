"""Verdict per claim and trust score.

Per claim, over the verifier's Probs for each of its evidence passages:

- the *support pair* is the one with max P(supported); the *contradiction pair* the one
  with max P(contradicted);
- a rule value mismatch → ``contradicted`` (the rule's correction and explanation), with
  P(supported) ≤ ``MISMATCH_CAP`` and P(contradicted) ≥ ``MISMATCH_FLOOR``;
- else ``supported`` when the support pair has P(supported) ≥ threshold, its normalized
  entropy ≤ max_uncertainty and every rule passed;
- else ``contradicted`` when the contradiction pair has P(contradicted) ≥ the verifier's
  contradiction bar (``contradiction_min``: 0.5 unless the verifier carries a bar fitted on
  train data, see :func:`contradiction_bar`) and P(contradicted) > P(unverifiable);
- else ``unverifiable``; a failed rule caps P(supported) at ``MISSING_CAP`` (the excess
  moves to unverifiable). No evidence at all → unverifiable, "no evidence found".

A number or name no passage states (a *missing* value, not a mismatch) makes the claim
``unverifiable`` unless the verifier's support reaches the *missing bar*
``τ + rules.missing_support · (1 − τ)`` — part of the way from the threshold to certainty
(:func:`missing_bar`; 1 = a missing value always wins, as before; 0 = the verifier alone
decides). Chosen on held-out train rows (``bench/results/missing-support-train.txt``): names
of world knowledge ("music by Alberto Iglesias") and paraphrased values are missing from
passages that still support the claim, and the veto cost more right answers than it caught
wrong ones. A value the evidence states otherwise is a mismatch and still contradicts; a
missing value a passage contests (:attr:`RuleResult.contested`) keeps the veto.

Trust score of an answer with claims c_1 … c_n::

    T = (1/n) · Σ_i s_i,   s_i = 0 if c_i is contradicted, else the claim's P(supported)

and T = 1.0 when there are no claims (nothing was asserted).

Trust score of the returned text (:func:`rendered_trust`, what the client sees): removed
claims drop out, a corrected claim counts with its correction's P(supported), a
contradicted claim left in counts 0.

What the policy then does with the verdicts (annotate / flag / rewrite / block, the
adapter, the trust floor, failures) is decided in :mod:`guards.action`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from groundproxy.guards.rules.check import RuleResult
from groundproxy.guards.types import CONTRADICTION_MIN as CONTRADICTION_MIN  # re-export
from groundproxy.guards.types import (
    Claim,
    ClaimResult,
    Evidence,
    Probs,
    Verdict,
    Verifier,
)
from groundproxy.policies.schema import Policy

DEFAULT_THRESHOLD = 0.6  # a verifier without a fitted threshold; "calibrated" unsupplied
MISMATCH_CAP = 0.1
MISMATCH_FLOOR = 0.8
MISSING_CAP = 0.3
MAX_CITATIONS = 3


def contradiction_bar(verifier: Verifier) -> float:
    """The P(contradicted) a verifier's pair needs for a model-only ``contradicted``.

    Every verifier carries ``contradiction_min`` (the shipped embedhead's is fitted on
    held-out train rows so that ≤ 0.5 % of supported rows cross it — a false contradiction
    rewrites a right answer; others carry :data:`CONTRADICTION_MIN`). Never below
    :data:`CONTRADICTION_MIN`, never above 1; a value that is not a number gives
    :data:`CONTRADICTION_MIN`.
    """
    try:
        value = float(verifier.contradiction_min)
    except (TypeError, ValueError):
        return CONTRADICTION_MIN
    return min(max(value, CONTRADICTION_MIN), 1.0)


def model_threshold(verifier: Verifier) -> float | None:
    """The verifier's own fitted P(supported) threshold (its meta.json ``threshold``,
    forwarded by wrappers), or None when it has none or it is not a number in [0, 1]."""
    value = getattr(verifier, "threshold", None)
    if isinstance(value, bool) or not isinstance(value, float | int):
        return None
    return float(value) if 0.0 <= value <= 1.0 else None


def resolve_threshold(
    policy: Policy, override: float | None = None, fitted: float | None = None
) -> float:
    """The P(supported) threshold: ``override`` (a calibration), else the policy's number,
    else — ``threshold: model``, the default — the verifier's ``fitted`` one, else 0.6."""
    if override is not None:
        return override
    t = policy.verifier.threshold
    if isinstance(t, float | int):
        return float(t)
    if t == "model" and fitted is not None:
        return fitted
    return DEFAULT_THRESHOLD


def cap_support(probs: Probs, cap: float, into: Verdict) -> Probs:
    """``probs`` with P(supported) ≤ cap; the excess moves to ``into``."""
    if probs.supported <= cap:
        return probs
    excess = probs.supported - cap
    if into == "contradicted":
        return Probs(cap, probs.contradicted + excess, probs.unverifiable)
    return Probs(cap, probs.contradicted, probs.unverifiable + excess)


def mismatch_probs(probs: Probs) -> Probs:
    """Probabilities for a claim whose value the evidence contradicts (a rule, not the
    verifier, decided): P(supported) ≤ MISMATCH_CAP, P(contradicted) ≥ MISMATCH_FLOOR."""
    supported = min(probs.supported, MISMATCH_CAP)
    contradicted = min(max(probs.contradicted, MISMATCH_FLOOR), 1.0 - supported)
    return Probs(supported, contradicted, max(0.0, 1.0 - supported - contradicted))


def _ranked(
    evidence: Sequence[Evidence], probs: Sequence[Probs], key: str, minimum: float
) -> list[Evidence]:
    order = sorted(range(len(probs)), key=lambda i: -float(getattr(probs[i], key)))
    return [evidence[i] for i in order if getattr(probs[i], key) >= minimum][:MAX_CITATIONS]


@dataclass(frozen=True)
class Bars:
    """What a claim's probabilities are measured against: the P(supported) ``threshold``
    (:func:`resolve_threshold`), the most normalized entropy a ``supported`` verdict may have
    (``max_uncertainty``) and the verifier's contradiction bar (:func:`contradiction_bar`)."""

    threshold: float
    max_uncertainty: float
    contradiction_min: float = CONTRADICTION_MIN
    # rules.missing_support: how far from the threshold towards 1 the support of a claim
    # with a missing number or name must reach (1: never supported, see missing_bar)
    missing_support: float = 1.0


def missing_bar(bars: Bars) -> float | None:
    """The P(supported) a claim with a missing number or name needs for ``supported``:
    ``τ + missing_support · (1 − τ)``; None when no support is enough (``missing_support``
    1)."""
    if bars.missing_support >= 1.0:
        return None
    return bars.threshold + bars.missing_support * (1.0 - bars.threshold)


def _rules_allow(rule: RuleResult, support: float, bar: float | None) -> bool:
    """A claim's rules let it be supported: nothing failed, or only missing values (no
    mismatch, none contested: stated otherwise by a passage of the claim's) and the
    verifier's ``support`` reaches the missing ``bar`` (:func:`missing_bar`)."""
    if rule.ok:
        return True
    uncontested = not rule.mismatches and not rule.contested
    return uncontested and bar is not None and support >= bar


def decide_claim(
    claim: Claim,
    evidence: Sequence[Evidence],
    probs: Sequence[Probs],
    rule: RuleResult,
    bars: Bars,
    correction_probs: Probs | None = None,
) -> ClaimResult:
    """Verdict, probabilities, citations and explanation for one claim.

    ``probs[i]`` scores (``evidence[i]``, claim); ``correction_probs`` scores the rule's
    correction against the evidence that produced it, when there is one.
    """
    threshold, max_uncertainty = bars.threshold, bars.max_uncertainty
    contradiction_min = bars.contradiction_min
    if len(evidence) != len(probs):
        raise ValueError("one Probs per evidence passage is required")
    if not evidence:
        none = Probs(0.0, 0.0, 1.0)
        return ClaimResult(
            claim, "unverifiable", none, none.uncertainty(), explanation="no evidence found"
        )
    # a passage that only denies, quotes, asks or instructs the claim supports nothing
    probs = [
        cap_support(p, 0.0, "unverifiable") if i in rule.hollow else p for i, p in enumerate(probs)
    ]
    i_sup = max(range(len(probs)), key=lambda i: probs[i].supported)
    i_con = max(range(len(probs)), key=lambda i: probs[i].contradicted)
    sup, con = probs[i_sup], probs[i_con]

    verifier_contradicts = con.contradicted >= contradiction_min and (
        con.contradicted > con.unverifiable
    )
    if rule.mismatches:
        idx = rule.evidence_index if rule.evidence_index is not None else i_con
        final = mismatch_probs(probs[idx])
        return ClaimResult(
            claim,
            "contradicted",
            final,
            final.uncertainty(),
            citations=[evidence[idx]],
            correction=rule.correction,
            explanation=rule.explanation,
            correction_support=None if correction_probs is None else correction_probs.supported,
            by_wording=rule.denied_by_wording and not verifier_contradicts,
            by_rule=not rule.denied_by_wording,
        )
    bar = missing_bar(bars)
    allowed = _rules_allow(rule, sup.supported, bar)
    if sup.supported >= threshold and sup.uncertainty() <= max_uncertainty and allowed:
        why = f"supported by {evidence[i_sup].ref} (p={sup.supported:.2f})"
        if bar is not None and not rule.ok:
            why = f"{why}, above the missing bar {bar:.2f} ({rule.explanation})"
        return ClaimResult(
            claim,
            "supported",
            sup,
            sup.uncertainty(),
            citations=_ranked(evidence, probs, "supported", threshold) or [evidence[i_sup]],
            explanation=why,
        )
    if verifier_contradicts:
        why = f"contradicted by {evidence[i_con].ref} (p={con.contradicted:.2f})"
        if not rule.ok:
            why = f"{why}; {rule.explanation}"
        return ClaimResult(
            claim,
            "contradicted",
            con,
            con.uncertainty(),
            citations=_ranked(evidence, probs, "contradicted", contradiction_min),
            explanation=why,
            by_verifier=True,
        )
    final = sup if rule.ok else cap_support(sup, MISSING_CAP, "unverifiable")
    if not rule.ok:
        why = rule.explanation
    elif sup.supported >= threshold:
        why = (
            f"{evidence[i_sup].ref} supports it (p={sup.supported:.2f}) but the verdict is "
            f"too uncertain ({sup.uncertainty():.2f} > {max_uncertainty:.2f})"
        )
    else:
        why = (
            f"best evidence {evidence[i_sup].ref} gives p(supported)={sup.supported:.2f}, "
            f"below {threshold:.2f}"
        )
    return ClaimResult(
        claim,
        "unverifiable",
        final,
        final.uncertainty(),
        citations=[evidence[i_sup]],
        explanation=why,
    )


def trust_score(results: Sequence[ClaimResult]) -> float:
    """T = mean of P(supported) with contradicted claims at 0; 1.0 with no claims."""
    if not results:
        return 1.0
    total = sum(0.0 if r.verdict == "contradicted" else r.probs.supported for r in results)
    return total / len(results)


def rendered_trust(results: Sequence[ClaimResult]) -> float:
    """T of the returned text: removed claims drop out; a corrected claim counts with
    the correction's support; a contradicted claim left in counts 0; 1.0 if none left."""
    scores: list[float] = []
    for r in results:
        if r.action == "removed":
            continue
        if r.action == "corrected":
            support = r.correction_support
            scores.append(r.probs.supported if support is None else support)
        elif r.verdict == "contradicted":
            scores.append(0.0)
        else:
            scores.append(r.probs.supported)
    return sum(scores) / len(scores) if scores else 1.0
