"""Fitting a tenant's adapter (:mod:`groundproxy.guards.adapter.combiner`): the combiner, its
threshold, its honest estimate against the zero-shot decision, and what the labels look
like. Pure: numbers in, adapter content out (``groundproxy calibrate --fit`` is
:mod:`groundproxy.proxy.cli.adapt`).

The combiner: standardized features → logistic regression (class-balanced, L2). The
threshold on its P(hallucinated):

- default: the one that maximizes balanced accuracy over out-of-fold probabilities
  (5-fold cross-fitting; the final model is fitted on every row);
- ``--alpha A``: split conformal. The rows are split (``--cal-fraction``); the model is
  fitted on one part, and the threshold is the split-conformal one over the supported
  (label 0) answers of the other part, so that P(a truly supported answer is accepted)
  ≥ 1 − A (marginally, exchangeable rows; :mod:`groundproxy.guards.verdict.conformal`).

Labels that always help: the whole fit is cross-fitted once more (:func:`cross_fitted`:
feature set, strength and threshold chosen inside each outer fold) — with ``--alpha``, the
calibration part is the held-out estimate — and when that estimate does not beat the
zero-shot decision's balanced accuracy on the same labels by :data:`MARGIN`, the fit
ships no combiner: a zero-shot record (the zero-shot decision in force, and why).
"""

from __future__ import annotations

import functools
import itertools
import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeVar

import numpy as np
import numpy.typing as npt

from groundproxy.errors import BadRequestError
from groundproxy.guards import FEATURE_SETS, conformal_threshold
from groundproxy.models.scoring import balanced_accuracy

MIN_ROWS = 10
# An adapter ships only when its cross-fitted balanced accuracy beats the zero-shot
# decision's on the same labels by this much (chosen on ../shared/data/train with
# python -m bench.kshot --split train; see README "Labels that always help").
MARGIN = 0.0
# Warn when at least this share of the answers a value rule contradicts is labelled correct.
RULE_DISAGREEMENT = 0.25
C_GRID = (0.001, 0.01, 0.1, 1.0)  # L2 strengths tried (sklearn's C: smaller = stronger)
Matrix = npt.NDArray[np.float64]
P = ParamSpec("P")
R = TypeVar("R")


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


@dataclass(frozen=True)
class Conformal:
    """``--alpha A`` (``--cal-fraction F``): the split-conformal threshold (module docstring)."""

    alpha: float
    cal_fraction: float = 0.5


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


def one_blas_thread(fn: Callable[P, R]) -> Callable[P, R]:
    """Run ``fn`` with one BLAS thread: hundreds of small logistic fits, which several
    threads only slow down (10 ms a fit vs 160 ms on a busy 2-core machine)."""

    @functools.wraps(fn)
    def one(*args: P.args, **kwargs: P.kwargs) -> R:
        from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

        with threadpool_limits(limits=1):
            return fn(*args, **kwargs)

    return one


def cross_fitted(
    features: Sequence[Mapping[str, float]],
    y: npt.NDArray[np.int64],
    seed: int,
    candidates: Candidates,
) -> list[int]:
    """Honest out-of-fold decisions of the whole fit (feature set, L2 strength and
    threshold chosen again inside each outer fold, on its training part only): what an
    adapter fitted on these labels would decide on answers it has not seen."""
    from sklearn.model_selection import StratifiedKFold

    feature_sets, cs = candidates.feature_sets, candidates.cs
    folds = min(5, int(np.bincount(y).min()))
    pred = np.zeros(len(y), dtype=np.int64)
    for tr, te in StratifiedKFold(folds, shuffle=True, random_state=seed).split(y, y):
        inner = [features[i] for i in tr]
        if min(np.bincount(y[tr], minlength=2)) >= 2:
            set_name, c, oof = choose_combiner(inner, y[tr], seed, candidates)
        else:  # too few of a label to choose: the first set, the strongest fit
            set_name, c = next(iter(feature_sets)), max(cs)
            oof = np.full(len(tr), 0.5)
        threshold = best_threshold(y[tr].tolist(), oof.tolist())
        x = _matrix(inner, feature_sets[set_name])
        mean, scale = _standardize(x)
        model = _model((x - mean) / scale, y[tr], c)
        xt = (_matrix([features[i] for i in te], feature_sets[set_name]) - mean) / scale
        pred[te] = (model.predict_proba(xt)[:, 1] > threshold).astype(np.int64)
    return pred.tolist()


def keep_zero_shot(fit: dict[str, Any], estimate: float, zero: float) -> bool:
    """Record the comparison in ``fit``; True when the adapter's cross-fitted balanced
    accuracy does not beat the zero-shot decision's on the same labels by more than
    :data:`MARGIN` — a tie keeps zero-shot too (then the fit ships no adapter: the zero-shot
    decision stays in force)."""
    fit["cross_fitted_balanced_accuracy"] = round(estimate, 4)
    fit["zero_shot_balanced_accuracy"] = round(zero, 4)
    fit["margin"] = MARGIN
    return not estimate > zero + MARGIN


@one_blas_thread
def fit_combiner(
    features: Sequence[Mapping[str, float]],
    labels: Sequence[int],
    *,
    conformal: Conformal | None = None,
    seed: int = 0,
    candidates: Candidates | None = None,
    zero: Sequence[int] | None = None,
) -> dict[str, Any]:
    """The adapter's parameters and fit figures (no version, no verifier yet).

    ``features``: one :func:`~groundproxy.guards.features_from_signals` dict per answer. The
    feature set and the L2 strength are chosen by cross-fitting on these labels
    (:func:`choose_combiner`, among ``candidates``: default every feature set × C_GRID),
    then the threshold (module docstring; ``conformal``: split conformal). ``zero``: the
    zero-shot decision on the same answers; when the adapter's cross-fitted estimate does
    not beat it (:func:`keep_zero_shot`), the content is a zero-shot record
    (``"decision": "zero_shot"``, no combiner) instead."""
    candidates = candidates if candidates is not None else Candidates()
    feature_sets, cs = candidates.feature_sets, candidates.cs
    y = np.asarray(labels, dtype=np.int64)
    if len(y) < MIN_ROWS or min(int((y == 0).sum()), int((y == 1).sum())) < 2:
        raise BadRequestError(
            f"--fit needs at least {MIN_ROWS} labelled answers, 2 or more of each label "
            f"(have {len(y)}: {int((y == 1).sum())} hallucinated)"
        )
    fit: dict[str, Any] = {"n": len(y), "n_hallucinated": int(y.sum())}
    if conformal is None:
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
        if zero is not None:
            honest = cross_fitted(features, y, seed, candidates)
            estimate = balanced_accuracy(y.tolist(), honest)
            if keep_zero_shot(fit, estimate, balanced_accuracy(y.tolist(), list(zero))):
                return _zero_shot_record(fit)
    else:
        alpha, cal_fraction = conformal.alpha, conformal.cal_fraction
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
        accept_scores = _accept_scores(model, xc[y[cal] == 0])
        ct = conformal_threshold(accept_scores, alpha)
        threshold = 1.0 if math.isinf(ct.threshold) else min(1.0, max(0.0, 1.0 - ct.threshold))
        if zero is not None:
            cal_pred = [int(1.0 - a > threshold) for a in _accept_scores(model, xc)]
            y_cal = y[cal].tolist()
            estimate = balanced_accuracy(y_cal, cal_pred)
            zero_cal = balanced_accuracy(y_cal, [int(zero[i]) for i in cal])
            if keep_zero_shot(fit, estimate, zero_cal):
                return _zero_shot_record(fit)
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


def _accept_scores(model: Any, x: Matrix) -> list[float]:
    """1 − P(hallucinated) of each row (higher: more surely accepted)."""
    return [1.0 - float(p) for p in model.predict_proba(x)[:, 1]]


def _zero_shot_record(fit: dict[str, Any]) -> dict[str, Any]:
    """What a fit that loses to the zero-shot decision stores: the zero-shot decision
    stays (or comes back) in force, with the figures that decided it."""
    fit["kept"] = "zero_shot"
    return {"object": "groundproxy.adapter", "decision": "zero_shot", "fit": fit}


def label_warnings(labels: Sequence[int], zero: Sequence[int], ruled: Sequence[int]) -> list[str]:
    """What looks wrong with the labels: the zero-shot decision below chance on them
    (inverted labels?), or many answers whose values the evidence contradicts (a value rule:
    a wrong or denied number, date, name) labelled correct."""
    out: list[str] = []
    zero_bacc = balanced_accuracy(labels, zero)
    if zero_bacc < 0.5:
        out.append(
            f"the labels disagree with the zero-shot decision (balanced accuracy "
            f"{zero_bacc:.2f} < 0.5 on {len(labels)} answers): check that label_hallucinated "
            "= 1 marks a hallucinated answer"
        )
    contradicted = [y for y, r in zip(labels, ruled, strict=True) if r]
    passed = contradicted.count(0)
    if contradicted and passed / len(contradicted) >= RULE_DISAGREEMENT:
        out.append(
            f"{passed} of {len(contradicted)} answers whose values the evidence contradicts "
            "(value rules: a wrong or denied number, date or name) are labelled correct; an "
            "adapter never lets such an answer through (the rule's correction stays), so "
            "these labels teach it nothing"
        )
    return out
