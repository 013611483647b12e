"""Labels that never hurt (issue 42 item 4): a refit replaces the decision in force only
when it beats it on reviewers' labels held back from the fit, by more than their noise.

The rule (:func:`refit`):

1. **Held back**: :data:`HELD_BACK` of the reviewers' labels of each class (at least one of
   each; seeded) are set aside before anything is fitted. Judge labels are never held back
   (a client can cause them: :mod:`groundproxy.proxy.cli.label_count`): they may train, but
   never decide. Fewer than :data:`MIN_HELD` reviewer labels to hold back, or one class
   missing: nothing can show a refit better, so the decision in force stays.
2. **The candidate** is fitted on the rest alone (:func:`adapt_fit.fit_combiner`, with its
   own cross-fitted comparison against the zero-shot decision): an adapter, or a zero-shot
   record when no adapter beats zero-shot there.
3. **The comparison**: on the held-back labels, the difference ``d`` between the
   candidate's balanced accuracy and that of the decision in force (the tenant's adapter,
   else the shipped learned decision, else zero-shot), and its noise: the standard error
   ``se`` of ``d`` over :data:`BOOTSTRAP` paired bootstrap resamples of the held-back labels
   (seeded; a resample lacking a class is drawn again). The candidate replaces the decision
   in force iff ``d > NOISE_Z × se`` and ``d > 0``; else the decision in force stays (a
   zero-shot record when zero-shot is in force, nothing written when an adapter is).
4. **Deciding alone** (no judge escalation, :func:`guards.judge.merge.adapter_decides`): an
   adapter may only when its balanced accuracy on the held-back reviewers' labels is at
   least ``ADAPTER_GOOD`` (``fit.decides_alone``); a zero-shot record proves zero-shot only
   on reviewers' labels (``fit.reviewer``), never on the judge's.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from groundproxy.errors import BadRequestError
from groundproxy.guards import ADAPTER_GOOD, Adapter
from groundproxy.models.scoring import balanced_accuracy
from groundproxy.proxy.cli.adapt_fit import MIN_ROWS, Candidates, Conformal, fit_combiner

HELD_BACK = 0.3
MIN_HELD = 4
NOISE_Z = 2.0
BOOTSTRAP = 1000
RULE = f"replace iff difference > {NOISE_Z:g} x paired-bootstrap SE (and > 0)"


@dataclass(frozen=True)
class InForce:
    """The tenant's decision now, and what it decides on each labelled answer."""

    name: str  # "zero-shot", "adapter v3", "the shipped learned decision"
    decisions: Sequence[int]
    kind: str = "zero_shot"  # or "adapter", "shipped" (kept: nothing is written)


@dataclass(frozen=True)
class Labels:
    """The counted labels: 1 = hallucinated; ``zero``: the zero-shot decision on each;
    ``reviewer``: whether a reviewer gave it (else the judge)."""

    y: Sequence[int]
    zero: Sequence[int]
    reviewer: Sequence[bool]


@dataclass(frozen=True)
class FitOptions:
    conformal: Conformal | None = None
    seed: int = 0
    candidates: Candidates | None = None


def held_back_split(labels: Labels, seed: int) -> tuple[list[int], list[int]]:
    """(the fit part, the held-back part): indices; module docstring, step 1."""
    rng = random.Random(seed)
    held: list[int] = []
    for cls in (0, 1):
        pool = [i for i, (v, r) in enumerate(zip(labels.y, labels.reviewer, strict=True))
                if r and v == cls]  # fmt: skip
        rng.shuffle(pool)
        held += pool[: max(1, round(HELD_BACK * len(pool)))] if pool else []
    held_set = set(held)
    return [i for i in range(len(labels.y)) if i not in held_set], sorted(held)


def _bacc(y: Sequence[int], p: Sequence[int]) -> float:
    return float(balanced_accuracy(list(y), list(p)))


def difference_and_noise(
    y: Sequence[int], candidate: Sequence[int], force: Sequence[int], seed: int
) -> tuple[float, float]:
    """(balanced accuracy of ``candidate`` − that of ``force`` on ``y``, its paired
    bootstrap standard error)."""
    d = _bacc(y, candidate) - _bacc(y, force)
    rng = np.random.default_rng(seed)
    ya, ca, fa = np.asarray(y), np.asarray(candidate), np.asarray(force)
    diffs: list[float] = []
    while len(diffs) < BOOTSTRAP:
        idx = rng.integers(0, len(ya), len(ya))
        if len(set(ya[idx].tolist())) < 2:
            continue
        yy = ya[idx].tolist()
        diffs.append(_bacc(yy, ca[idx].tolist()) - _bacc(yy, fa[idx].tolist()))
    return d, float(np.std(diffs, ddof=1))


def _decisions(
    content: Mapping[str, Any], features: Sequence[Mapping[str, float]], zero: Sequence[int]
) -> list[int]:
    if content.get("decision") == "zero_shot":
        return list(zero)
    adapter = Adapter.from_dict({**content, "version": 1})
    return [int(adapter.p_hallucinated(f) > adapter.threshold) for f in features]


def reviewer_figures(labels: Labels) -> dict[str, Any]:
    """The zero-shot decision on the reviewers' labels: what may prove it (a zero-shot
    record's ``fit.reviewer``; :func:`guards.adapter.combiner.read_record`)."""
    ys = [v for v, r in zip(labels.y, labels.reviewer, strict=True) if r]
    zs = [v for v, r in zip(labels.zero, labels.reviewer, strict=True) if r]
    score = round(_bacc(ys, zs), 4) if len(set(ys)) == 2 else None
    return {"n": len(ys), "zero_shot_balanced_accuracy": score}


def refit(
    features: Sequence[Mapping[str, float]],
    labels: Labels,
    in_force: InForce,
    options: FitOptions,
) -> dict[str, Any]:
    """The content to write (module docstring): the candidate when it replaces the
    decision in force; else a zero-shot record (zero-shot in force) or ``"decision":
    "keep"`` (an adapter in force: nothing to write). ``fit.held_back`` says why."""
    fit_idx, held = held_back_split(labels, options.seed)
    y_held = [labels.y[i] for i in held]
    if len(fit_idx) < MIN_ROWS:
        raise BadRequestError(
            f"--fit needs at least {MIN_ROWS} labelled answers besides the {len(held)} "
            f"reviewers' labels held back to test it (have {len(labels.y)}): label more"
        )
    content = fit_combiner(
        [features[i] for i in fit_idx],
        [labels.y[i] for i in fit_idx],
        conformal=options.conformal,
        seed=options.seed,
        candidates=options.candidates,
        zero=[labels.zero[i] for i in fit_idx],
    )
    fit = content["fit"]
    fit.update(
        n=len(labels.y),
        n_hallucinated=sum(labels.y),
        n_fit=len(fit_idx),
        zero_shot_fit_balanced_accuracy=fit.get("zero_shot_balanced_accuracy"),
        reviewer=reviewer_figures(labels),
    )
    report: dict[str, Any] = {"n": len(held), "n_hallucinated": sum(y_held),
                              "in_force": in_force.name, "rule": RULE}  # fmt: skip
    fit["held_back"] = report
    zero_now = in_force.kind == "zero_shot"
    if len(held) < MIN_HELD or len(set(y_held)) < 2:
        report.update(replaced=False, why=f"fewer than {MIN_HELD} reviewers' labels to hold "
                      "back, both kinds: nothing can show a refit better")  # fmt: skip
        return _kept(content, zero_now)
    candidate = _decisions(content, [features[i] for i in held], [labels.zero[i] for i in held])
    force = [in_force.decisions[i] for i in held]
    d, se = difference_and_noise(y_held, candidate, force, options.seed)
    report.update(
        candidate_balanced_accuracy=round(_bacc(y_held, candidate), 4),
        in_force_balanced_accuracy=round(_bacc(y_held, force), 4),
        difference=round(d, 4),
        noise_se=round(se, 4),
    )
    if content.get("decision") != "zero_shot":
        fit["decides_alone"] = report["candidate_balanced_accuracy"] >= ADAPTER_GOOD
    same = content.get("decision") == "zero_shot" and zero_now
    report["replaced"] = same or (d > 0 and d > NOISE_Z * se)
    if same:
        report["why"] = "the candidate is the zero-shot decision in force: its figures refreshed"
        return content
    if not report["replaced"]:
        report["why"] = f"difference {d:.4f} is not above {NOISE_Z:g} x SE {se:.4f}"
        return _kept(content, zero_now)
    return content


def _kept(content: dict[str, Any], zero_now: bool) -> dict[str, Any]:
    """The decision in force stays: a zero-shot record when zero-shot is in force (its
    figures refreshed), else ``"decision": "keep"`` (nothing written)."""
    fit = {k: v for k, v in content["fit"].items() if k != "decides_alone"}
    fit["kept"] = "zero_shot" if zero_now else "in_force"
    decision = "zero_shot" if zero_now else "keep"
    return {"object": "groundproxy.adapter", "decision": decision, "fit": fit}
