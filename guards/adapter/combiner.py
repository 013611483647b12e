"""A tenant's adapter: a small combiner that replaces the answer-level decision.

Zero-shot, an answer is accepted iff every claim is supported ("any claim not supported"
rejects it). A tenant whose reviewers labelled answers (``POST /v1/groundproxy/feedback``,
``groundproxy calibrate --fit``) gets an :class:`Adapter`: a logistic regression over
answer-level aggregates of what stage 1 found
(:func:`~groundproxy.guards.adapter.features.answer_features`), fitted on that
tenant's labels only, and a threshold on its P(hallucinated): above it the answer is
rejected, else accepted. What accept and reject do to the answer is decided in
:mod:`guards.action` (:func:`~groundproxy.guards.action.apply_adapted`, rows 4-5): an
accepting adapter never switches a value rule's correction off (a claim a rule
contradicted keeps the policy's action). A stored record may also be a zero-shot record
(:func:`read_adapter`: no adapter in force).

The same mechanism serves a verifier's shipped, learned answer-level decision (policy
``verifier.decision: learned``, :attr:`Adapter.source` ``"shipped"``) for a tenant without an
adapter of its own. The report carries ``adapter`` (version, source, P(hallucinated),
threshold, decision). Pure logic: the files are read and cached in
:mod:`groundproxy.proxy.storage.adapters`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from groundproxy.errors import PolicyError
from groundproxy.guards.adapter.features import (
    FEATURES,
    LOGPROB_FEATURES,
    TOKEN_FEATURES,
)


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


def _oof(fit: Any) -> float | None:
    found = fit.get("oof_balanced_accuracy") if isinstance(fit, Mapping) else None
    if isinstance(found, int | float) and not isinstance(found, bool) and 0 <= found <= 1:
        return float(found)
    return None


def _decides_alone(fit: Any) -> bool:
    found = fit.get("decides_alone", True) if isinstance(fit, Mapping) else True
    if not isinstance(found, bool):
        raise PolicyError("adapter: 'fit.decides_alone' must be true or false")
    return found


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
    # the fit's cross-fitted balanced accuracy on its labels (``fit.oof_balanced_accuracy``;
    # None when the file has none): the judge gate trusts only an adapter this good
    oof_balanced_accuracy: float | None = None
    # may it decide an answer alone, nothing escalated to the judge? ``fit.decides_alone``:
    # False when its balanced accuracy on reviewers' labels held back from its fit is below
    # the gate, or it had none (judge labels alone never let an adapter decide alone); a
    # file from before the field existed: True (then the oof gate alone applies)
    decides_alone: bool = True

    @property
    def uses_tokens(self) -> bool:
        """Whether it reads the token alignment (the caller computes it only then)."""
        return any(name in TOKEN_FEATURES for name in self.features)

    @property
    def uses_logprobs(self) -> bool:
        """Whether it reads the upstream's logprobs (guards.verdict.logprobs)."""
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
            oof_balanced_accuracy=_oof(data.get("fit")),
            decides_alone=_decides_alone(data.get("fit")),
        )


@dataclass(frozen=True)
class ZeroShotRecord:
    """A fit that kept the zero-shot decision (``"decision": "zero_shot"``): no adapter is
    in force, and the record says how well zero-shot did on the tenant's reviewers' labels
    (``n`` of them, for ``verifier``; ``fit.reviewer``), so a record with a high
    :attr:`balanced_accuracy` proves zero-shot good enough to decide alone on this tenant's
    answers (:func:`guards.judge.merge.zero_shot_decides`). Judge labels never prove it: a
    client can cause them. A record from before ``fit.reviewer`` existed reads its figures
    over all its labels."""

    version: int
    verifier: str
    balanced_accuracy: float | None
    n: int


def read_record(data: Mapping[str, Any]) -> Adapter | ZeroShotRecord:
    """A stored adapter record, validated: a combiner (:class:`Adapter`) or a zero-shot
    record (:class:`ZeroShotRecord`: the tenant's latest fit did not beat the zero-shot
    decision on its labels, so no adapter is in force)."""
    if data.get("decision") != "zero_shot":
        return Adapter.from_dict(data)
    version = data.get("version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise PolicyError("adapter: 'version' must be a positive integer")
    fit = data.get("fit")
    fit = fit if isinstance(fit, Mapping) else {}
    zero, n = fit.get("zero_shot_balanced_accuracy"), fit.get("n")
    reviewer = fit.get("reviewer")
    if isinstance(reviewer, Mapping):  # reviewers' labels only (judge labels never prove)
        zero, n = reviewer.get("zero_shot_balanced_accuracy"), reviewer.get("n")
    score = None
    if isinstance(zero, int | float) and not isinstance(zero, bool) and 0.0 <= zero <= 1.0:
        score = float(zero)
    count = n if isinstance(n, int) and not isinstance(n, bool) and n >= 0 else 0
    return ZeroShotRecord(version, str(data.get("verifier", "")), score, count)


def read_adapter(data: Mapping[str, Any]) -> Adapter | None:
    """:func:`read_record`, the adapter in force: None for a zero-shot record."""
    found = read_record(data)
    return found if isinstance(found, Adapter) else None
