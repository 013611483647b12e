"""``groundproxy calibrate --fit``: learn a tenant's adapter (:mod:`groundproxy.guards.adapter`).

Labelled answers come from the tenant's feedback store (``POST /v1/groundproxy/feedback``)
and, optionally, a labels file (:mod:`groundproxy.proxy.storage.feedback`; rows of
``../shared/data`` work too). Each answer is verified by the serve path
(:meth:`GuardService.verify_sync`: the tenant's index when it has one, the row's context
as request evidence, the tenant's policy) and turned into the answer-level features the
served decision uses, so the combiner is fitted on exactly the scores serving produces.
The fit itself (combiner, threshold, the comparison with the zero-shot decision, warnings
about the labels) is :mod:`groundproxy.proxy.cli.adapt_fit`.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from groundproxy.errors import BadRequestError
from groundproxy.guards import (
    FEATURE_SETS,
    LOGPROB_FEATURES,
    LOGPROB_SETS,
    TOKEN_FEATURES,
    features_from_signals,
    impute_missing,
)
from groundproxy.models.scoring import balanced_accuracy
from groundproxy.policies.schema import Policy
from groundproxy.proxy.cli.adapt_fit import (
    MIN_ROWS,
    Candidates,
    Conformal,
    best_threshold,
    fit_combiner,
    label_warnings,
)
from groundproxy.proxy.offline import signals_of
from groundproxy.proxy.serving.guarding import build_guard
from groundproxy.proxy.settings import Settings
from groundproxy.proxy.storage.backends import EmbeddedStorage, Storage
from groundproxy.proxy.storage.feedback import read_labelled

__all__ = [
    "Candidates",
    "Conformal",
    "FitJob",
    "balanced_accuracy",
    "best_threshold",
    "fit_combiner",
    "fit_tenant",
    "signals_of",
    "without_token_features",
]


def without_token_features(sets: Mapping[str, Sequence[str]]) -> dict[str, tuple[str, ...]]:
    """``sets`` less the token alignment features (a set left the same as another is
    dropped)."""
    out: dict[str, tuple[str, ...]] = {}
    for name, names in sets.items():
        kept = tuple(n for n in names if n not in TOKEN_FEATURES)
        if kept and kept not in out.values():
            out[name] = kept
    return out


@dataclass(frozen=True)
class FitJob:
    """``groundproxy calibrate --tenant T --fit``: its inputs. ``token_features`` False:
    the feature sets without the token alignment (:func:`without_token_features`)."""

    tenant: str
    data: Path
    policy: Policy
    labels_file: Path | None = None
    alpha: float | None = None
    cal_fraction: float = 0.5
    seed: int = 0
    token_features: bool = True


def fit_tenant(
    job: FitJob,
    storage: Storage | None = None,
    say: Callable[[str], None] = lambda s: print(s, file=sys.stderr),
) -> dict[str, Any]:
    """Fit and write the tenant's next adapter version; returns its content (+ path).
    ``storage``: where the tenant's labels and index are, as the server has them (default
    the files under ``job.data``; PostgreSQL when the server uses it)."""
    tenant, data, policy, labels_file = job.tenant, job.data, job.policy, job.labels_file
    store = storage if storage is not None else EmbeddedStorage(data)
    items = store.read_feedback(tenant)
    if labels_file is not None:
        more = read_labelled(labels_file)
        if not more:
            raise BadRequestError(f"{labels_file}: no labelled answers")
        items += more
    started = time.perf_counter()
    with build_guard(Settings(data=data, batch_window_ms=0), storage=store) as guard:
        verifier = guard.verifier(policy.verifier.model).name
        say(f"scoring {len(items)} labelled answers with '{verifier}' …")
        scored = [signals_of(it, policy, guard) for it in items]
    labels = [it.label_hallucinated for it in items]
    features = [features_from_signals(f) for f, _ in scored]
    with_logprobs = sum(int(f["logprobs"]) for f, _ in scored if "logprobs" in f)
    candidates = dict(FEATURE_SETS)
    if with_logprobs >= max(MIN_ROWS, len(items) // 2):  # enough answers carried logprobs
        candidates.update(LOGPROB_SETS)
        features = impute_missing(features, LOGPROB_FEATURES)
        say(f"{with_logprobs} of {len(items)} answers carry the upstream's logprobs")
    sets = candidates if job.token_features else without_token_features(candidates)
    rule = [r for _, r in scored]
    for warning in label_warnings(
        labels, rule, [int(f.get("rule_contradicted", 0)) for f, _ in scored]
    ):
        say(f"warning: {warning}")
    content = fit_combiner(
        features,
        labels,
        conformal=None if job.alpha is None else Conformal(job.alpha, job.cal_fraction),
        seed=job.seed,
        candidates=Candidates(sets),
        zero=rule,
    )
    content["fit"]["zero_shot_balanced_accuracy"] = round(balanced_accuracy(labels, rule), 4)
    content.update(
        tenant=tenant,
        verifier=verifier,
        policy=policy.tenant,
        created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        seconds=round(time.perf_counter() - started, 1),
    )
    version, where = store.write_adapter(tenant, content)
    return {**content, "version": version, "path": where}
