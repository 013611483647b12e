"""Verdict per claim, trust score and answer action.

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

Trust score of an answer with claims c_1 … c_n::

    T = (1/n) · Σ_i s_i,   s_i = 0 if c_i is contradicted, else the claim's P(supported)

and T = 1.0 when there are no claims (nothing was asserted).

Answer action: ``block`` when any non-supported claim's policy action is ``block``;
else the strongest action used among the non-supported claims (rewrite > flag >
annotate); ``none`` when every claim is supported. Then the trust floor
(:func:`below_floor`): the answer is blocked when the text that would be returned has
T < ``actions.block_below_trust`` AND at least one claim is ``contradicted``. Both parts
are deliberate: the floor judges what the client would get (an answer whose one wrong
value was corrected is not blocked for the value it no longer states), and it needs
evidence *against* the answer — a low T made only of unverifiable claims (nothing found,
weak support) is what ``actions.unverifiable`` handles; blocking it hides right answers
the evidence merely fails to cover (on HaluEval, context mode, an unconditional floor
blocked 30% of the correct answers; bench/rewrite.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from groundproxy.guards.rules import RuleResult
from groundproxy.guards.types import CONTRADICTION_MIN as CONTRADICTION_MIN  # re-export
from groundproxy.guards.types import (
    ActionName,
    AnswerAction,
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


def ref(e: Evidence) -> str:
    """``doc#chunk`` of an evidence passage."""
    return f"{e.doc}#{e.chunk}"


def _ranked(
    evidence: Sequence[Evidence], probs: Sequence[Probs], key: str, minimum: float
) -> list[Evidence]:
    order = sorted(range(len(probs)), key=lambda i: -float(getattr(probs[i], key)))
    return [evidence[i] for i in order if getattr(probs[i], key) >= minimum][:MAX_CITATIONS]


def decide_claim(
    claim: Claim,
    evidence: Sequence[Evidence],
    probs: Sequence[Probs],
    rule: RuleResult,
    *,
    threshold: float,
    max_uncertainty: float,
    correction_probs: Probs | None = None,
    contradiction_min: float = CONTRADICTION_MIN,
) -> ClaimResult:
    """Verdict, probabilities, citations and explanation for one claim.

    ``probs[i]`` scores (``evidence[i]``, claim); ``correction_probs`` scores the rule's
    correction against the evidence that produced it, when there is one;
    ``contradiction_min`` is the verifier's bar (:func:`contradiction_bar`).
    """
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
        )
    if sup.supported >= threshold and sup.uncertainty() <= max_uncertainty and rule.ok:
        return ClaimResult(
            claim,
            "supported",
            sup,
            sup.uncertainty(),
            citations=_ranked(evidence, probs, "supported", threshold) or [evidence[i_sup]],
            explanation=f"supported by {ref(evidence[i_sup])} (p={sup.supported:.2f})",
        )
    if con.contradicted >= contradiction_min and con.contradicted > con.unverifiable:
        why = f"contradicted by {ref(evidence[i_con])} (p={con.contradicted:.2f})"
        if not rule.ok:
            why = f"{why}; {rule.explanation}"
        return ClaimResult(
            claim,
            "contradicted",
            con,
            con.uncertainty(),
            citations=_ranked(evidence, probs, "contradicted", contradiction_min),
            explanation=why,
        )
    final = sup if rule.ok else cap_support(sup, MISSING_CAP, "unverifiable")
    if not rule.ok:
        why = rule.explanation
    elif sup.supported >= threshold:
        why = (
            f"{ref(evidence[i_sup])} supports it (p={sup.supported:.2f}) but the verdict is "
            f"too uncertain ({sup.uncertainty():.2f} > {max_uncertainty:.2f})"
        )
    else:
        why = (
            f"best evidence {ref(evidence[i_sup])} gives p(supported)={sup.supported:.2f}, "
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


def verdict_action(verdict: Verdict, policy: Policy) -> ActionName | None:
    """What the policy does to a claim with this verdict (None for supported)."""
    if verdict == "contradicted":
        return policy.actions.contradicted
    if verdict == "unverifiable":
        return policy.actions.unverifiable
    return None


ActFn = Callable[[ClaimResult], ActionName | None]


def answer_action(
    results: Sequence[ClaimResult], policy: Policy, act: ActFn | None = None
) -> AnswerAction:
    """The answer-level action before the trust floor (see the module docstring);
    ``act``: each claim's action when not the policy's for its verdict (guards.adapter)."""
    used = {act(r) if act else verdict_action(r.verdict, policy) for r in results} - {None}
    order: tuple[AnswerAction, ...] = ("block", "rewrite", "flag", "annotate")
    for name in order:
        if name in used:
            return name
    return "none"


def below_floor(results: Sequence[ClaimResult], policy: Policy, returned_trust: float) -> bool:
    """Does the trust floor block this answer? (T of the returned text, and a
    contradicted claim among the results; see the module docstring.)"""
    contradicted = any(r.verdict == "contradicted" for r in results)
    return contradicted and returned_trust < policy.actions.block_below_trust
