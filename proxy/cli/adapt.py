"""``groundproxy calibrate --fit``: learn a tenant's adapter (:mod:`groundproxy.guards.adapter`).

Labelled answers come from the tenant's feedback store (``POST /v1/groundproxy/feedback``)
and, optionally, a labels file (:mod:`groundproxy.proxy.storage.feedback`; rows of
``../shared/data`` work too). Each answer is verified by the serve path
(:meth:`GuardService.verify_sync`: the tenant's index when it has one, the row's context
as request evidence, the tenant's policy) and turned into the answer-level features the
served decision uses, so the combiner is fitted on exactly the scores serving produces.

The combiner: standardized features → logistic regression (class-balanced, L2). The
threshold on its P(hallucinated):

- default: the one that maximizes balanced accuracy over out-of-fold probabilities
  (5-fold cross-fitting; the final model is fitted on every row);
- ``--alpha A``: split conformal. The rows are split (``--cal-fraction``); the model is
  fitted on one part, and the threshold is the split-conformal one over the supported
  (label 0) answers of the other part, so that P(a truly supported answer is accepted)
  ≥ 1 − A (marginally, exchangeable rows; :mod:`groundproxy.guards.conformal`).
"""

from __future__ import annotations

import itertools
import math
import random
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from groundproxy.errors import BadRequestError
from groundproxy.guards import (
    FEATURE_SETS,
    LOGPROB_FEATURES,
    LOGPROB_SETS,
    TOKEN_FEATURES,
    conformal_threshold,
    features_from_signals,
    impute_missing,
)
from groundproxy.models.scoring import balanced_accuracy
from groundproxy.policies.schema import Policy
from groundproxy.proxy.offline import signals_of
from groundproxy.proxy.serving.guarding import build_guard
from groundproxy.proxy.settings import Settings
from groundproxy.proxy.storage.backends import EmbeddedStorage, Storage
from groundproxy.proxy.storage.feedback import read_labelled

MIN_ROWS = 10
C_GRID = (0.001, 0.01, 0.1, 1.0)  # L2 strengths tried (sklearn's C: smaller = stronger)
Matrix = npt.NDArray[np.float64]


def _standardize(x: Matrix) -> tuple[Matrix, Matrix]:
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    return mean, np.where(scale > 1e-6, scale, 1.0)


def _model(x: Matrix, y: npt.NDArray[np.int64], c: float) -> Any:
    from sklearn.linear_model import LogisticRegression

    m = LogisticRegression(C=c, class_weight="balanced", max_iter=2000)
    m.fit(x, y)
    return m


def best_threshold(y: Sequence[int], p: Sequence[float]) -> float:
    """The P(hallucinated) cut (reject iff p > cut) with the best balanced accuracy."""
    cuts = sorted(set(p))
    candidates = [0.0] + [(a + b) / 2 for a, b in itertools.pairwise(cuts)] + [1.0]
    scored = [(balanced_accuracy(y, [int(v > t) for v in p]), -abs(t - 0.5), t) for t in candidates]
    return max(scored)[2]


def _auc(y: npt.NDArray[np.int64], p: Matrix) -> float:
    """ROC-AUC (ties count half)."""
    pos, neg = p[y == 1], p[y == 0]
    greater = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return float(greater) / (len(pos) * len(neg))


def _oof(x: Matrix, y: npt.NDArray[np.int64], c: float, seed: int) -> Matrix:
    """Out-of-fold P(hallucinated): stratified 5-fold (fewer when a label is rare); each
    fold standardized on its own training part."""
    from sklearn.model_selection import StratifiedKFold

    folds = min(5, int(np.bincount(y).min()))
    if folds < 2:
        mean, scale = _standardize(x)
        return np.asarray(_model((x - mean) / scale, y, c).predict_proba((x - mean) / scale)[:, 1])
    out = np.zeros(len(y))
    for tr, te in StratifiedKFold(folds, shuffle=True, random_state=seed).split(x, y):
        mean, scale = _standardize(x[tr])
        out[te] = _model((x[tr] - mean) / scale, y[tr], c).predict_proba((x[te] - mean) / scale)[
            :, 1
        ]
    return out


def _matrix(features: Sequence[Mapping[str, float]], names: Sequence[str]) -> Matrix:
    return np.asarray([[f[n] for n in names] for f in features], dtype=np.float64)


@dataclass(frozen=True)
class Candidates:
    """The combiners a fit chooses from: named feature sets × L2 strengths (sklearn's C)."""

    feature_sets: Mapping[str, Sequence[str]] = field(default_factory=lambda: dict(FEATURE_SETS))
    cs: Sequence[float] = C_GRID


def choose_combiner(
    features: Sequence[Mapping[str, float]],
    y: npt.NDArray[np.int64],
    seed: int,
    candidates: Candidates,
) -> tuple[str, float, Matrix]:
    """(feature set, C, its out-of-fold P(hallucinated)) with the best out-of-fold ROC-AUC
    over the grid; on a tie the stronger regularization (smaller C), then the smaller set."""
    best: tuple[float, float, int, str, Matrix] | None = None
    for name, names in candidates.feature_sets.items():
        x = _matrix(features, names)
        for c in candidates.cs:
            oof = _oof(x, y, c, seed)
            key = (round(_auc(y, oof), 6), -c, -len(names), name, oof)
            if best is None or key[:3] > best[:3]:
                best = key
    assert best is not None
    return best[3], -best[1], best[4]


def fit_combiner(
    features: Sequence[Mapping[str, float]],
    labels: Sequence[int],
    *,
    alpha: float | None = None,
    cal_fraction: float = 0.5,
    seed: int = 0,
    candidates: Candidates | None = None,
) -> dict[str, Any]:
    """The adapter's parameters and fit figures (no version, no verifier yet).

    ``features``: one :func:`~groundproxy.guards.features_from_signals` dict per answer. The
    feature set and the L2 strength are chosen by cross-fitting on these labels
    (:func:`choose_combiner`, among ``candidates``: default every feature set × C_GRID),
    then the threshold (module docstring)."""
    candidates = candidates if candidates is not None else Candidates()
    feature_sets, cs = candidates.feature_sets, candidates.cs
    y = np.asarray(labels, dtype=np.int64)
    if len(y) < MIN_ROWS or min(int((y == 0).sum()), int((y == 1).sum())) < 2:
        raise BadRequestError(
            f"--fit needs at least {MIN_ROWS} labelled answers, 2 or more of each label "
            f"(have {len(y)}: {int((y == 1).sum())} hallucinated)"
        )
    fit: dict[str, Any] = {"n": len(y), "n_hallucinated": int(y.sum())}
    if alpha is None:
        set_name, c, oof = choose_combiner(features, y, seed, candidates)
        x = _matrix(features, feature_sets[set_name])
        threshold = best_threshold(y.tolist(), oof.tolist())
        fit.update(
            threshold_rule="balanced accuracy, out-of-fold",
            oof_roc_auc=round(_auc(y, oof), 4),
            oof_balanced_accuracy=round(
                balanced_accuracy(y.tolist(), [int(p > threshold) for p in oof]), 4
            ),
        )
        mean, scale = _standardize(x)
        model = _model((x - mean) / scale, y, c)
    else:
        order = list(range(len(y)))
        random.Random(seed).shuffle(order)
        cut = round(len(order) * (1 - cal_fraction))
        tr, cal = np.array(order[:cut]), np.array(order[cut:])
        if len(set(y[tr].tolist())) < 2 or not (y[cal] == 0).any():
            raise BadRequestError("the split leaves a part without both labels: label more")
        train = [features[i] for i in tr]
        if min(np.bincount(y[tr], minlength=2)) >= 2:
            set_name, c, _ = choose_combiner(train, y[tr], seed, candidates)
        else:
            set_name, c = next(iter(feature_sets)), max(cs)
        x = _matrix(train, feature_sets[set_name])
        mean, scale = _standardize(x)
        model = _model((x - mean) / scale, y[tr], c)
        xc = (_matrix([features[i] for i in cal], feature_sets[set_name]) - mean) / scale
        accept_scores = [1.0 - float(p) for p in model.predict_proba(xc[y[cal] == 0])[:, 1]]
        ct = conformal_threshold(accept_scores, alpha)
        threshold = 1.0 if math.isinf(ct.threshold) else min(1.0, max(0.0, 1.0 - ct.threshold))
        fit.update(
            threshold_rule="split conformal",
            alpha=alpha,
            n_calibration=ct.n,
            k=ct.k,
            guarantee=f"P(a truly supported answer is accepted) >= {1 - alpha:g}",
        )
    fit.update(feature_set=set_name, C=c)
    return {
        "object": "groundproxy.adapter",
        "features": list(feature_sets[set_name]),
        "mean": [float(v) for v in mean],
        "scale": [float(v) for v in scale],
        "coef": [float(v) for v in model.coef_[0]],
        "intercept": float(model.intercept_[0]),
        "threshold": float(threshold),
        "fit": fit,
    }


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
    content = fit_combiner(
        features,
        labels,
        alpha=job.alpha,
        cal_fraction=job.cal_fraction,
        seed=job.seed,
        candidates=Candidates(sets),
    )
    rule = [r for _, r in scored]
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
