"""``groundproxy calibrate --fit``: learn a tenant's adapter
(:mod:`groundproxy.guards.adapter.combiner`).

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
    Adapter,
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
from groundproxy.proxy.cli.label_count import counted, outvotes_rule, within_burst_cap
from groundproxy.proxy.cli.refit import FitOptions, InForce, Labels, refit
from groundproxy.proxy.offline import signals_of
from groundproxy.proxy.serving.guarding import build_guard
from groundproxy.proxy.settings import Settings
from groundproxy.proxy.storage.adapters import shipped_decision
from groundproxy.proxy.storage.backends import EmbeddedStorage, Storage
from groundproxy.proxy.storage.feedback import read_labelled

__all__ = [
    "Candidates",
    "Conformal",
    "FitJob",
    "WarningsFired",
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
    accept_warnings: bool = False  # ship a fit whose label warnings fire (--accept-warnings)


class WarningsFired(Exception):
    """The labels look wrong (:func:`label_warnings`) and the fit was not told to ship
    anyway (``--accept-warnings``): nothing is written; the CLI exits 2."""

    def __init__(self, warnings: list[str]) -> None:
        super().__init__("; ".join(warnings))
        self.warnings = warnings


def in_force(
    store: Storage, job: FitJob, verifier: str, features: Sequence[Mapping[str, float]]
) -> InForce:
    """The tenant's decision now and its decision on each labelled answer: its adapter
    (fitted on this verifier), else the shipped learned decision when the policy serves it,
    else zero-shot (``decisions`` then empty: the caller's zero-shot decisions)."""
    found = store.adapters().record(job.tenant)
    adapter: Adapter | None = None
    kind = "zero_shot"
    if isinstance(found, Adapter) and found.verifier == verifier:
        adapter, kind = found, "adapter"
    elif not isinstance(found, Adapter) and job.policy.verifier.decision == "learned":
        adapter, kind = shipped_decision(verifier), "shipped"
    if adapter is None:
        return InForce("zero-shot", [])
    nan = float("nan")  # a feature these answers lack reads as the adapter's fitted mean
    full = [{n: f.get(n, nan) for n in adapter.features} for f in features]
    decisions = [int(adapter.p_hallucinated(f) > adapter.threshold) for f in full]
    return InForce(adapter.label, decisions, kind)


def fit_tenant(
    job: FitJob,
    storage: Storage | None = None,
    say: Callable[[str], None] = lambda s: print(s, file=sys.stderr),
) -> dict[str, Any]:
    """Fit the tenant's next adapter version and write it when it replaces the decision in
    force (:func:`groundproxy.proxy.cli.refit.refit`); returns its content (+ version and
    path; ``"decision": "keep"``: nothing written). ``storage``: where the tenant's labels
    and index are, as the server has them (default the files under ``job.data``; PostgreSQL
    when the server uses it). Judge labels count as :mod:`.label_count` says; labels that
    look wrong (:func:`label_warnings`) raise :class:`WarningsFired` unless
    ``job.accept_warnings``."""
    tenant, data, policy, labels_file = job.tenant, job.data, job.policy, job.labels_file
    store = storage if storage is not None else EmbeddedStorage(data)
    items = store.read_feedback(tenant)
    if labels_file is not None:
        more = read_labelled(labels_file)
        if not more:
            raise BadRequestError(f"{labels_file}: no labelled answers")
        items += more  # a reviewer's unless a row says "source": "judge" (an exported store)
    capped = within_burst_cap(items)
    started = time.perf_counter()
    with build_guard(Settings(data=data, batch_window_ms=0), storage=store) as guard:
        verifier = guard.verifier(policy.verifier.model).name
        say(f"scoring {sum(capped)} labelled answers with '{verifier}' …")
        scored = {i: signals_of(it, policy, guard) for i, it in enumerate(items) if capped[i]}
    ruled = [bool(scored[i][0].get("rule_contradicted", 0)) if i in scored else False
             for i in range(len(items))]  # fmt: skip
    count = counted(items, capped, ruled)
    say(count.line())
    kept = [i for i in scored if not outvotes_rule(items[i], ruled[i])]
    labels = [items[i].label_hallucinated for i in kept]
    features = [features_from_signals(scored[i][0]) for i in kept]
    with_logprobs = sum(int(scored[i][0]["logprobs"]) for i in kept if "logprobs" in scored[i][0])
    candidates = dict(FEATURE_SETS)
    if with_logprobs >= max(MIN_ROWS, len(kept) // 2):  # enough answers carried logprobs
        candidates.update(LOGPROB_SETS)
        features = impute_missing(features, LOGPROB_FEATURES)
        say(f"{with_logprobs} of {len(kept)} answers carry the upstream's logprobs")
    sets = candidates if job.token_features else without_token_features(candidates)
    rule = [scored[i][1] for i in kept]
    warnings = label_warnings(labels, rule, [int(ruled[i]) for i in kept])
    for warning in warnings:
        say(f"warning: {warning}")
    if warnings and not job.accept_warnings:
        raise WarningsFired(warnings)
    force = in_force(store, job, verifier, features)
    content = refit(
        features,
        Labels(labels, rule, [items[i].source == "reviewer" for i in kept]),
        force if force.decisions else InForce(force.name, rule),
        FitOptions(
            None if job.alpha is None else Conformal(job.alpha, job.cal_fraction),
            job.seed,
            Candidates(sets),
        ),
    )
    content["fit"]["zero_shot_balanced_accuracy"] = round(balanced_accuracy(labels, rule), 4)
    content["fit"]["labels"] = {"reviewer": count.reviewer, "judge": count.judge,
                                "judge_counted": count.judge_counted}  # fmt: skip
    if warnings:
        content["fit"]["warnings_accepted"] = warnings
    content.update(
        tenant=tenant,
        verifier=verifier,
        policy=policy.tenant,
        created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        seconds=round(time.perf_counter() - started, 1),
    )
    if content.get("decision") == "keep":
        return {**content, "version": None, "path": None}
    version, where = store.write_adapter(tenant, content)
    return {**content, "version": version, "path": where}
