"""A tenant's adapter: a small combiner that replaces the answer-level decision.

Zero-shot, an answer is accepted iff every claim is supported ("any claim not supported"
rejects it). A tenant whose reviewers labelled answers (``POST /v1/groundproxy/feedback``,
``groundproxy calibrate --fit``) gets an :class:`Adapter`: a logistic regression over
answer-level aggregates of what stage 1 found
(:func:`~groundproxy.guards.adapter_features.answer_features`), fitted on that
tenant's labels only, and a threshold on its P(hallucinated). With an adapter in force:

- P(hallucinated) ≤ threshold → the answer is **accepted**: its text is returned as the
  upstream wrote it (claims not supported are only ``annotated``; no trust floor), the
  answer action is ``none`` — except for a claim a value rule contradicted (a wrong or
  denied number, date or name: :mod:`guards.rules`): it keeps the policy's action (its
  correction, flag or removal), so an adapter only moves the decision for claims without
  a rule verdict and never switches a rule's correction off;
- P(hallucinated) > threshold → the answer is **rejected**: the claims get the policy's
  actions as usual, and when every claim was supported the weakest one (lowest
  P(supported)) becomes ``unverifiable`` with the adapter's reason, so the policy's
  ``actions.unverifiable`` applies to it.

The same mechanism serves a verifier's shipped, learned answer-level decision (policy
``verifier.decision: learned``, :attr:`Adapter.source` ``"shipped"``) for a tenant without an
adapter of its own. The report carries ``adapter`` (version, source, P(hallucinated),
threshold, decision). Pure logic: the files are read and cached in
:mod:`groundproxy.proxy.storage.adapters`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from groundproxy.errors import PolicyError
from groundproxy.guards.adapter_features import (
    FEATURES,
    LOGPROB_FEATURES,
    TOKEN_FEATURES,
    answer_features,
)
from groundproxy.guards.decide import verdict_action
from groundproxy.guards.stages import Verified, apply, decide
from groundproxy.guards.types import ActionName, ClaimResult, GuardReport
from groundproxy.policies.schema import Policy


def _floats(data: Mapping[str, Any], key: str, n: int) -> list[float]:
    value = data.get(key)
    if not isinstance(value, list) or len(value) != n:
        raise PolicyError(f"adapter: '{key}' must be a list of {n} numbers")
    out = []
    for v in value:
        if not isinstance(v, int | float) or isinstance(v, bool) or not math.isfinite(v):
            raise PolicyError(f"adapter: '{key}' must hold finite numbers")
        out.append(float(v))
    return out


@dataclass(frozen=True)
class Adapter:
    """A fitted combiner: standardized named features → logistic P(hallucinated)."""

    version: int
    verifier: str
    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float
    threshold: float  # reject iff P(hallucinated) > threshold
    # "tenant": fitted on the tenant's labels; "shipped": a verifier's learned answer-level
    # decision (models/<verifier>/answer-combiner.json, policy ``verifier.decision: learned``)
    source: str = "tenant"

    @property
    def uses_tokens(self) -> bool:
        """Whether it reads the token alignment (the caller computes it only then)."""
        return any(name in TOKEN_FEATURES for name in self.features)

    @property
    def uses_logprobs(self) -> bool:
        """Whether it reads the upstream's logprobs (guards.logprobs)."""
        return any(name in LOGPROB_FEATURES for name in self.features)

    @property
    def label(self) -> str:
        """How reports and explanations name it."""
        if self.source == "tenant":
            return f"the tenant's adapter v{self.version}"
        return f"the learned answer-level decision of '{self.verifier}' v{self.version}"

    def p_hallucinated(self, features: Mapping[str, float]) -> float:
        """P(hallucinated) from the named features (:func:`answer_features`); a NaN (a
        logprob feature of an answer that came without logprobs) reads as the fitted mean,
        so it weighs nothing."""
        xs = [features[name] for name in self.features]
        xs = [m if math.isnan(x) else x for x, m in zip(xs, self.mean, strict=True)]
        z = self.intercept + sum(
            c * (x - m) / s for c, x, m, s in zip(self.coef, xs, self.mean, self.scale, strict=True)
        )
        return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Adapter:
        """Validated. Any file listing features this version computes loads (the first
        format's 17 included); one naming an unknown feature is refused (PolicyError)."""
        names = data.get("features")
        if not isinstance(names, list) or not names or not all(isinstance(v, str) for v in names):
            raise PolicyError("adapter: 'features' must be a non-empty list of feature names")
        unknown = sorted(set(names) - set(FEATURES))
        if unknown:
            raise PolicyError(
                f"adapter: made for features this version does not compute ({', '.join(unknown)}); "
                "fit it again with `groundproxy calibrate --fit`"
            )
        n = len(names)
        scale = _floats(data, "scale", n)
        if any(s <= 0 for s in scale):
            raise PolicyError("adapter: 'scale' must be positive")
        version, threshold = data.get("version"), data.get("threshold")
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise PolicyError("adapter: 'version' must be a positive integer")
        if not isinstance(threshold, int | float) or not 0.0 <= threshold <= 1.0:
            raise PolicyError("adapter: 'threshold' must be a number in [0, 1]")
        (intercept,) = _floats({"intercept": [data.get("intercept")]}, "intercept", 1)
        source = data.get("source", "tenant")
        if source not in ("tenant", "shipped"):
            raise PolicyError("adapter: 'source' must be 'tenant' or 'shipped'")
        return cls(
            version=version,
            verifier=str(data.get("verifier", "")),
            features=tuple(names),
            mean=tuple(_floats(data, "mean", n)),
            scale=tuple(scale),
            coef=tuple(_floats(data, "coef", n)),
            intercept=intercept,
            threshold=float(threshold),
            source=source,
        )


def read_adapter(data: Mapping[str, Any]) -> Adapter | None:
    """A stored adapter record: a combiner (:class:`Adapter`, validated), or a zero-shot
    record (``"decision": "zero_shot"``: the tenant's latest fit did not beat the zero-shot
    decision on its labels, so none is in force — None)."""
    if data.get("decision") == "zero_shot":
        version = data.get("version", 1)
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise PolicyError("adapter: 'version' must be a positive integer")
        return None
    return Adapter.from_dict(data)


def _accepting(policy: Policy) -> Policy:
    """``policy`` with every claim action ``annotate`` and no trust floor."""
    actions = policy.actions.model_copy(
        update={"contradicted": "annotate", "unverifiable": "annotate", "block_below_trust": 0.0}
    )
    return policy.model_copy(update={"actions": actions})


def _ruled(verified: Verified, results: Sequence[ClaimResult]) -> list[ClaimResult]:
    """The claims a value rule contradicted (a wrong or denied value, a correction)."""
    return [
        r
        for s, r in zip(verified.claims, results, strict=True)
        if r.verdict == "contradicted" and (s.rule.mismatches or r.correction)
    ]


def apply_adapted(
    verified: Verified,
    policy: Policy,
    adapter: Adapter,
    alignment: Sequence[tuple[float, float, float]] | None = None,
    logprobs: Sequence[tuple[float, float]] | None = None,
) -> GuardReport:
    """Stage 2 with the adapter's answer-level decision (module docstring); ``alignment``:
    each claim's token alignment when :attr:`Adapter.uses_tokens`; ``logprobs``: each
    claim's upstream logprobs (:func:`guards.logprobs.claim_logprobs`) when the answer came
    with them."""
    results = decide(verified, policy)
    p = adapter.p_hallucinated(answer_features(verified, results, alignment, logprobs))
    reject = p > adapter.threshold
    if reject:
        if results and all(r.verdict == "supported" for r in results):
            weakest = min(results, key=lambda r: r.probs.supported)
            weakest.verdict = "unverifiable"
            weakest.explanation = (
                f"{adapter.label} judges the answer unsupported "
                f"(p={p:.2f} > {adapter.threshold:.2f}); this is its weakest claim"
            )
        report = apply(verified, policy, results=results)
    else:
        # accepted: the verifier's doubts are annotated only, but a value rule's verdict
        # stands — an adapter never switches a correction off
        ruled = {id(r) for r in _ruled(verified, results)}

        def act(r: ClaimResult) -> ActionName | None:
            if id(r) in ruled:
                return verdict_action(r.verdict, policy)
            return None if r.verdict == "supported" else "annotate"

        report = apply(verified, _accepting(policy), results=results, act=act)
        if not ruled:
            report.action = "none"
    report.adapter = {
        "version": adapter.version,
        "source": adapter.source,
        "p_hallucinated": round(p, 4),
        "threshold": round(adapter.threshold, 4),
        "decision": "reject" if reject else "accept",
    }
    return report
