"""How likely a claim's verdict is wrong: ``ClaimResult.uncertainty``.

The field is in [0, 1], higher = more likely wrong; an LLM judge's escalation ranks claims
by it. By default it is the claim's **decision margin** (:func:`margin_risk`): how close the
verifier's best raw P(supported) over the claim's passages comes to flipping the verdict —
for a claim judged ``supported``, ``(1 − p) / (1 − τ)``; for any other, ``p / τ`` (τ: the
threshold in force; clipped to [0, 1]; 1 at the threshold, 0 where the verifier is sure).
An answer's decision (accepted iff every claim is supported) flips only through its
deciding claims, so :func:`answer_risk` is the weakest claim's margin of an accepted answer
and the strongest rejecting claim's of a rejected one; ``judge.escalate: uncertain``
escalates an answer's claims at or above the cut only when its answer risk reaches it.

Chosen on ``../shared/data/train`` only, without fitting anything
(``python -m bench.uncertainty_margin``): as a ranking of zero-shot's own answer errors the
margin scores a mean AUROC of 0.726 over the 13 train files against 0.642 for the
normalized entropy of the claim's probabilities (the seed's uncertainty, what this field
held before), better on 12 of 13 (eval, reported only: 0.621 vs 0.528, 7 of 8); the
learned ranker below did worse than the entropy leave-one-file-out (0.651 vs 0.662) and
ships for no verifier. A claim a value rule contradicted (a wrong number, date or name
against the passage) is not the verifier's decision: its uncertainty is 0.

A verifier that ships an :class:`ErrorRanker` (``uncertainty.json`` beside its model,
fitted by ``training/uncertainty.py``) gets the ranker's P(the verdict is wrong)
instead: two logistic models — one for claims judged ``supported`` (P(the claim is in fact
not supported)), one for the others (P(it is in fact supported)) — over what stage 1 and
the decision already hold (:func:`risk_features`): the decided and the raw probabilities,
the margin to the threshold in force, the rules' outcome, the evidence found and its
retrieval score, the claim's length and the number of claims in the answer. Nothing is
computed twice and no model runs.

The same numbers are what the adapter signals record per claim
(:data:`guards.adapter.signals.CLAIM_FIELDS`), so the fit and ``bench/uncertainty.py``
read them from the cached signals (:func:`features_from_claim_row`) — a test checks the
two agree.

A verifier that ships a :class:`Calibration` instead (``calibration.json`` beside its model,
fitted on held-out train rows by ``training/calibration.py``) gets a calibrated P(the
verdict is wrong): P_cal(not supported) for a claim judged ``supported``, P_cal(supported)
for any other — the same scale for every verifier, so the ladder's fast-rung and strong-rung
claims compare. The ladder still picks the claims to climb by the fast rung's decision
margin (:func:`margin_only`: its cut was chosen on that scale). Measured on held-out train
rows (``python -m bench.calibration``, leave one train file out) the calibrated P(wrong)
ranks the errors worse than the margin (mean answer-level AUROC 0.625 vs 0.650 for the
ladder, 0.616 vs 0.627 embedhead, 0.664 vs 0.689 crossencoder), so no verifier ships one:
it is opt-in, by running the fit — and then ``judge.min_uncertainty`` reads P(wrong) (at most
1/2 under the ``threshold`` method: the default cut 0.8 escalates no claim).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from groundproxy.errors import ModelLoadError
from groundproxy.guards.rules.check import RuleResult
from groundproxy.guards.types import Claim, ClaimResult, Evidence, Probs


class ScoredClaim(Protocol):
    """What stage 1 holds of a claim (:class:`groundproxy.guards.verdict.stages.ScoredClaim`)."""

    @property
    def claim(self) -> Claim: ...

    @property
    def evidence(self) -> Sequence[Evidence]: ...

    @property
    def probs(self) -> Sequence[Probs]: ...

    @property
    def rule(self) -> RuleResult: ...

    @property
    def correction_probs(self) -> Probs | None: ...


RISK_FEATURES: tuple[str, ...] = (
    "p_supported",
    "margin",
    "abs_margin",
    "raw_supported",
    "raw_contradicted",
    "contradicted",
    "rule_failed",
    "correction",
    "no_evidence",
    "n_evidence",
    "best_retrieval",
    "entropy",
    "mean_passage_supported",
    "claim_words_log",
    "n_claims_log",
)
GROUPS = ("supported", "other")


def _features(
    *,
    decided: tuple[float, float, float],
    raw: tuple[float, float, float],
    verdict: tuple[float, float],
    rule: tuple[float, float],
    evidence: tuple[float, float],
    sizes: tuple[float, int],
) -> dict[str, float]:
    """``decided``: (P(supported) decided, the threshold in force, the entropy)."""
    p, tau, entropy = decided
    raw_sup, raw_con, mean_sup = raw
    n_evidence, best = evidence
    words, n_claims = sizes
    return {
        "p_supported": p,
        "margin": p - tau,
        "abs_margin": abs(p - tau),
        "raw_supported": raw_sup,
        "raw_contradicted": raw_con,
        "contradicted": verdict[1],
        "rule_failed": rule[0],
        "correction": rule[1],
        "no_evidence": float(n_evidence == 0),
        "n_evidence": n_evidence,
        "best_retrieval": best,
        "entropy": entropy,
        "mean_passage_supported": mean_sup,
        "claim_words_log": math.log1p(words),
        "n_claims_log": math.log1p(n_claims),
    }


def risk_features(s: ScoredClaim, r: ClaimResult, tau: float, n_claims: int) -> dict[str, float]:
    """The ranker's features of one decided claim (``tau``: the threshold in force)."""
    probs = s.probs
    return _features(
        decided=(r.probs.supported, tau, r.probs.uncertainty()),
        raw=(
            max((x.supported for x in probs), default=0.0),
            max((x.contradicted for x in probs), default=0.0),
            sum(x.supported for x in probs) / len(probs) if probs else 0.0,
        ),
        verdict=(float(r.verdict == "supported"), float(r.verdict == "contradicted")),
        rule=(float(not s.rule.ok), float(s.correction_probs is not None)),
        evidence=(float(len(s.evidence)), max((e.score for e in s.evidence), default=0.0)),
        sizes=(float(len(s.claim.text.split())), n_claims),
    )


def features_from_claim_row(
    row: Sequence[float], fields: Sequence[str], tau: float, n_claims: int
) -> dict[str, float]:
    """The same features from one claim's adapter signals row (``fields``: their names,
    :data:`guards.adapter.signals.CLAIM_FIELDS`)."""
    c = dict(zip(fields, row, strict=False))
    return _features(
        decided=(c["p_supported"], tau, c["uncertainty"]),
        raw=(c["raw_supported"], c["raw_contradicted"], c["mean_passage_supported"]),
        verdict=(c["supported"], c["contradicted"]),
        rule=(c["rule_failed"], c["correction"]),
        evidence=(c["n_evidence"], c["best_retrieval"]),
        sizes=(c["claim_words"], n_claims),
    )


@dataclass(frozen=True)
class _Logistic:
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float

    def p(self, xs: Sequence[float]) -> float:
        z = self.intercept + sum(
            c * (x - m) / s for c, x, m, s in zip(self.coef, xs, self.mean, self.scale, strict=True)
        )
        return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))


@dataclass(frozen=True)
class ErrorRanker:
    """P(a claim's verdict is wrong): a logistic model per verdict group."""

    features: tuple[str, ...]
    models: Mapping[str, _Logistic]

    def p_wrong(self, x: Mapping[str, float], supported: bool) -> float:
        model = self.models["supported" if supported else "other"]
        return model.p([x[name] for name in self.features])

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ErrorRanker:
        """Validated (ModelLoadError names what is wrong)."""
        names = data.get("features")
        if not isinstance(names, list) or not names or set(names) - set(RISK_FEATURES):
            raise ModelLoadError(f"uncertainty ranker: 'features' must name {RISK_FEATURES}")
        models: dict[str, _Logistic] = {}
        for group in GROUPS:
            m = data.get("models", {}).get(group)
            try:
                parts = [tuple(float(v) for v in m[k]) for k in ("mean", "scale", "coef")]
                intercept = float(m["intercept"])
            except (KeyError, TypeError, ValueError) as exc:
                raise ModelLoadError(f"uncertainty ranker: bad model '{group}': {exc}") from exc
            if any(len(p) != len(names) for p in parts) or min(parts[1]) <= 0:
                raise ModelLoadError(f"uncertainty ranker: model '{group}' does not fit")
            models[group] = _Logistic(parts[0], parts[1], parts[2], intercept)
        return cls(tuple(names), models)


@dataclass(frozen=True)
class Calibration:
    """A verifier's calibrated P(supported) from its best raw P(supported) ``p`` over a
    claim's passages (``p`` clipped to [CAL_EPS, 1 − CAL_EPS]; ``a`` > 0 keeps the claims'
    order):

    - ``platt``: ``σ(a · logit(p) + b)`` (Platt scaling);
    - ``threshold``: ``σ(a · (logit(p) − logit(τ)))`` — temperature scaling (``T = 1/a``)
      about the threshold in force ``τ``: 1/2 at the threshold, so a verdict's P(wrong) is
      at most 1/2 and falls off with the verifier's own fitted temperature."""

    a: float
    b: float = 0.0
    method: str = "platt"

    def p_supported(self, raw_supported: float, tau: float) -> float:
        if self.method == "platt":
            return _sigmoid(self.a * _logit(raw_supported) + self.b)
        return _sigmoid(self.a * (_logit(raw_supported) - _logit(tau)))

    def p_wrong(self, raw_supported: float, supported: bool, tau: float) -> float:
        """P(the verdict is wrong): P_cal(not supported) for a claim judged ``supported``,
        P_cal(supported) for any other verdict (``tau``: the threshold in force)."""
        p = self.p_supported(raw_supported, tau)
        return 1.0 - p if supported else p

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Calibration:
        """Validated (ModelLoadError names what is wrong)."""
        method = data.get("method", "platt")
        if method not in CAL_METHODS:
            raise ModelLoadError(f"calibration: 'method' must be one of {CAL_METHODS}")
        try:
            a, b = float(data["a"]), float(data.get("b", 0.0))
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelLoadError(f"calibration: 'a' and 'b' must be numbers: {exc}") from exc
        if not (math.isfinite(a) and math.isfinite(b)) or a <= 0.0:
            raise ModelLoadError("calibration: 'a' must be a finite number > 0, 'b' finite")
        return cls(a, b, method)


CAL_METHODS = ("platt", "threshold")
CAL_EPS = 1e-6
ErrorModel = ErrorRanker | Calibration  # what a verifier ships to rank its own errors


def _logit(p: float) -> float:
    q = min(max(p, CAL_EPS), 1.0 - CAL_EPS)
    return math.log(q / (1.0 - q))


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))


def error_ranker(verifier: object) -> ErrorModel | None:
    """The verifier's model of its own errors (its ``error_ranker``, forwarded by wrappers:
    a ranker or a calibration), if it has one."""
    ranker = getattr(verifier, "error_ranker", None)
    return ranker if isinstance(ranker, ErrorRanker | Calibration) else None


def margin_only(ranker: ErrorModel | None) -> ErrorModel | None:
    """``ranker`` without a calibration (None for a :class:`Calibration`): what the ladder
    selects by — the fast rung's decision margin, on the scale its cut was chosen on."""
    return None if isinstance(ranker, Calibration) else ranker


def margin_risk(raw_supported: float, supported: bool, tau: float) -> float:
    """A claim's decision margin (module docstring): 1 at the threshold ``tau``, 0 where
    the verifier's best raw P(supported) is sure of the verdict."""
    p = min(max(raw_supported, 0.0), 1.0)
    if supported:
        risk = (1.0 - p) / (1.0 - tau) if tau < 1.0 else 0.0
    else:
        risk = p / tau if tau > 0.0 else 0.0
    return min(max(risk, 0.0), 1.0)


def answer_risk(results: Sequence[ClaimResult]) -> float:
    """How close the answer's decision is to flipping: the largest ``uncertainty`` of an
    accepted answer's claims (any one of them may be the error), the smallest of a rejected
    answer's not-supported claims (every one of them must be wrong for it to flip); 0 for
    an answer without claims (nothing to decide)."""
    return decision_risk([(r.uncertainty, r.verdict == "supported") for r in results])


def decision_risk(claims: Sequence[tuple[float, bool]]) -> float:
    """:func:`answer_risk` over (uncertainty, supported) pairs (what the signals hold)."""
    if not claims:
        return 0.0
    rejecting = [u for u, supported in claims if not supported]
    return min(rejecting) if rejecting else max(u for u, _ in claims)


def rank_errors(
    claims: Sequence[ScoredClaim],
    results: Sequence[ClaimResult],
    tau: float,
    ranker: ErrorModel | None,
) -> None:
    """Set each result's ``uncertainty`` (module docstring): 0 for a claim a value rule
    contradicted (the rule is sure; a passage's wording alone is not), else the ranker's
    P(wrong), else the calibrated P(wrong), else the claim's decision margin
    (:func:`margin_risk`)."""
    for s, r in zip(claims, results, strict=True):
        r.uncertainty = claim_risk(s, r, tau, ranker, len(results))


def claim_risk(
    s: ScoredClaim, r: ClaimResult, tau: float, ranker: ErrorModel | None, n_claims: int
) -> float:
    """One claim's ``uncertainty`` (:func:`rank_errors`) in an answer of ``n_claims``."""
    supported = r.verdict == "supported"
    if r.verdict == "contradicted" and s.rule.mismatches and not r.by_wording:
        return 0.0  # a value rule's mismatch is sure (not the verifier's call)
    if isinstance(ranker, ErrorRanker):
        return ranker.p_wrong(risk_features(s, r, tau, n_claims), supported)
    raw = max((x.supported for x in s.probs), default=0.0)
    if isinstance(ranker, Calibration):
        return ranker.p_wrong(raw, supported, tau)
    return margin_risk(raw, supported, tau)
