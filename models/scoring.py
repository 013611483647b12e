"""Scoring verifiers on labelled rows: the figures every offline job reports, one definition.

Rows are the JSON lines of ``../shared/data`` (``response``, ``context``,
``label_hallucinated`` …). :func:`sample_rows` reads a file, or a seeded sample of it (the
same rows every run, per file name — never the first N); :func:`verifier_metrics` scores a
verifier's P(supported) against the labels at a threshold; :func:`balanced_accuracy` is the
plain balanced accuracy of 0/1 predictions. Used by the benchmarks, the adapter fit
(``groundproxy calibrate --fit``) and the training code alike.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt


def sample_rows(path: Path, limit: int | None) -> list[dict[str, Any]]:
    """Every row of ``path``, or — with ``limit`` below their count — a sample of ``limit``
    rows seeded by the file's name."""
    rows = [json.loads(line) for line in path.open(encoding="utf-8") if line.strip()]
    if limit is not None and len(rows) > limit:
        rows = random.Random(f"bench:{path.name}").sample(rows, limit)
    return rows


def verifier_metrics(
    labels: list[int], p_sup: npt.NDArray[np.floating[Any]], threshold: float
) -> dict[str, float]:
    """Balanced accuracy and F1 (hallucinated = positive) of "hallucinated iff P(supported)
    < threshold", and ROC-AUC of 1 − P(supported) (NaN with one class only)."""
    from sklearn.metrics import balanced_accuracy_score, f1_score, roc_auc_score

    y = np.array(labels)
    pred = (p_sup < threshold).astype(int)
    auc = float(roc_auc_score(y, 1.0 - p_sup)) if len(set(labels)) > 1 else math.nan
    return {
        "balanced_accuracy": round(float(balanced_accuracy_score(y, pred)), 4),
        "f1_hallucinated": round(float(f1_score(y, pred, pos_label=1, zero_division=0)), 4),
        "roc_auc": round(auc, 4),
    }


def balanced_accuracy(y: Sequence[int], pred: Sequence[int]) -> float:
    """Mean of the recall of each class (NaN when a class is missing)."""
    pos = [p for t, p in zip(y, pred, strict=True) if t == 1]
    neg = [p for t, p in zip(y, pred, strict=True) if t == 0]
    if not pos or not neg:
        return math.nan
    return 0.5 * (sum(pos) / len(pos) + sum(1 - p for p in neg) / len(neg))
