"""``groundproxy calibrate --fit``: learn a tenant's adapter (:mod:`groundproxy.guards.adapter`).

Labelled answers come from the tenant's feedback store (``POST /v1/groundproxy/feedback``)
and, optionally, a labels file (:mod:`groundproxy.proxy.feedback`; rows of
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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from groundproxy.errors import BadRequestError
from groundproxy.guards import FEATURES, answer_features, conformal_threshold, decide_claims
from groundproxy.policies.schema import Policy
from groundproxy.proxy.adapters import write_adapter
from groundproxy.proxy.feedback import Labelled, feedback_path, read_labelled
from groundproxy.proxy.guarding import GuardService, build_guard
from groundproxy.proxy.settings import Settings

MIN_ROWS = 10
Matrix = npt.NDArray[np.float64]


def featurize(item: Labelled, policy: Policy, guard: GuardService) -> tuple[list[float], int]:
    """(features, zero-shot prediction) of one labelled answer, by the serve path."""
    context = [("context", c) for c in item.context]
    verified = guard.verify_sync(item.answer, item.question, context, policy, cache=False)
    results = decide_claims(verified, policy)
    rule = int(not results or any(r.verdict != "supported" for r in results))
    return answer_features(verified, results), rule


def _standardize(x: Matrix) -> tuple[Matrix, Matrix]:
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    return mean, np.where(scale > 1e-6, scale, 1.0)


def _model(x: Matrix, y: npt.NDArray[np.int64], c: float) -> Any:
    from sklearn.linear_model import LogisticRegression

    m = LogisticRegression(C=c, class_weight="balanced", max_iter=2000)
    m.fit(x, y)
    return m


def balanced_accuracy(y: Sequence[int], pred: Sequence[int]) -> float:
    pos = [p for t, p in zip(y, pred, strict=True) if t == 1]
    neg = [p for t, p in zip(y, pred, strict=True) if t == 0]
    if not pos or not neg:
        return math.nan
    return 0.5 * (sum(pos) / len(pos) + sum(1 - p for p in neg) / len(neg))


def best_threshold(y: Sequence[int], p: Sequence[float]) -> float:
    """The P(hallucinated) cut (reject iff p > cut) with the best balanced accuracy."""
    cuts = sorted(set(p))
    candidates = [0.0] + [(a + b) / 2 for a, b in itertools.pairwise(cuts)] + [1.0]
    scored = [(balanced_accuracy(y, [int(v > t) for v in p]), -abs(t - 0.5), t) for t in candidates]
    return max(scored)[2]


def _oof(x: Matrix, y: npt.NDArray[np.int64], c: float, seed: int) -> list[float]:
    from sklearn.model_selection import StratifiedKFold

    folds = min(5, int(np.bincount(y).min()))
    if folds < 2:
        return [float(v) for v in _model(x, y, c).predict_proba(x)[:, 1]]
    out = np.zeros(len(y))
    for tr, te in StratifiedKFold(folds, shuffle=True, random_state=seed).split(x, y):
        out[te] = _model(x[tr], y[tr], c).predict_proba(x[te])[:, 1]
    return [float(v) for v in out]


def fit_combiner(
    features: Sequence[Sequence[float]],
    labels: Sequence[int],
    *,
    alpha: float | None = None,
    cal_fraction: float = 0.5,
    seed: int = 0,
    c: float = 1.0,
) -> dict[str, Any]:
    """The adapter's parameters and fit figures (no version, no verifier yet)."""
    x, y = np.asarray(features, dtype=np.float64), np.asarray(labels, dtype=np.int64)
    if len(y) < MIN_ROWS or min(int((y == 0).sum()), int((y == 1).sum())) < 2:
        raise BadRequestError(
            f"--fit needs at least {MIN_ROWS} labelled answers, 2 or more of each label "
            f"(have {len(y)}: {int((y == 1).sum())} hallucinated)"
        )
    mean, scale = _standardize(x)
    z = (x - mean) / scale
    fit: dict[str, Any] = {"n": len(y), "n_hallucinated": int(y.sum()), "C": c}
    if alpha is None:
        oof = _oof(z, y, c, seed)
        threshold = best_threshold(y.tolist(), oof)
        model = _model(z, y, c)
        fit.update(
            threshold_rule="balanced accuracy, out-of-fold",
            oof_balanced_accuracy=round(
                balanced_accuracy(y.tolist(), [int(p > threshold) for p in oof]), 4
            ),
        )
    else:
        order = list(range(len(y)))
        random.Random(seed).shuffle(order)
        cut = round(len(order) * (1 - cal_fraction))
        tr, cal = np.array(order[:cut]), np.array(order[cut:])
        if len(set(y[tr].tolist())) < 2 or not (y[cal] == 0).any():
            raise BadRequestError("the split leaves a part without both labels: label more")
        model = _model(z[tr], y[tr], c)
        accept_scores = [1.0 - float(p) for p in model.predict_proba(z[cal][y[cal] == 0])[:, 1]]
        ct = conformal_threshold(accept_scores, alpha)
        threshold = 1.0 if math.isinf(ct.threshold) else min(1.0, max(0.0, 1.0 - ct.threshold))
        fit.update(
            threshold_rule="split conformal",
            alpha=alpha,
            n_calibration=ct.n,
            k=ct.k,
            guarantee=f"P(a truly supported answer is accepted) >= {1 - alpha:g}",
        )
    return {
        "object": "groundproxy.adapter",
        "features": list(FEATURES),
        "mean": [float(v) for v in mean],
        "scale": [float(v) for v in scale],
        "coef": [float(v) for v in model.coef_[0]],
        "intercept": float(model.intercept_[0]),
        "threshold": float(threshold),
        "fit": fit,
    }


def fit_tenant(
    tenant: str,
    *,
    data: Path,
    policy: Policy,
    labels_file: Path | None = None,
    alpha: float | None = None,
    cal_fraction: float = 0.5,
    seed: int = 0,
    say: Callable[[str], None] = lambda s: print(s, file=sys.stderr),
) -> dict[str, Any]:
    """Fit and write the tenant's next adapter version; returns its content (+ path)."""
    items = read_labelled(feedback_path(data, tenant))
    if labels_file is not None:
        more = read_labelled(labels_file)
        if not more:
            raise BadRequestError(f"{labels_file}: no labelled answers")
        items += more
    started = time.perf_counter()
    with build_guard(Settings(data=data, batch_window_ms=0)) as guard:
        verifier = guard.verifier(policy.verifier.model).name
        say(f"scoring {len(items)} labelled answers with '{verifier}' …")
        scored = [featurize(it, policy, guard) for it in items]
    labels = [it.label_hallucinated for it in items]
    content = fit_combiner(
        [f for f, _ in scored], labels, alpha=alpha, cal_fraction=cal_fraction, seed=seed
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
    path = write_adapter(data, tenant, content)
    return {**content, "version": int(path.stem.rsplit("v", 1)[1]), "path": str(path)}
