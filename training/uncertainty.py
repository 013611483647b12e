"""Fit a verifier's ranker of its own errors (``ClaimResult.uncertainty``, issue 29 item 5)
on TRAIN data only; write ``models/<verifier>/uncertainty.json``.

    .venv/bin/python -m training.uncertainty --verifier crossencoder

Data: the out-of-sample train pools of :mod:`training.answer_combiner` (rows whose
context the verifier never trained on, verified by the serve path; run its ``--extract
--verifier NAME`` first), their cached per-claim signals. A claim's true label is known
where its answer is labelled supported (every claim of it is) or is one claim; the
claims of hallucinated multi-claim answers are left out (which one is wrong is unknown).
A claim's verdict is wrong when it is ``supported`` on a hallucinated claim, or anything
else on a supported one.

Model (:class:`groundproxy.guards.verdict.uncertainty.ErrorRanker`): one logistic regression per
verdict group (``supported`` / ``other``) over :data:`~groundproxy.guards.verdict.uncertainty.
RISK_FEATURES`, every train file weighing the same. The L2 strength is chosen by
leave-one-train-file-out mean ROC-AUC, at answer level: the answer's uncertainty is its
most uncertain claim's, its error the zero-shot decision's ("any claim not supported")
against the label — what ``bench/uncertainty.py`` measures on the eval files. Those
out-of-file figures, per train file, go into the file beside the entropy's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from groundproxy.guards import (
    CLAIM_FIELDS,
    RISK_FEATURES,
    ErrorRanker,
    features_from_claim_row,
)
from groundproxy.guards import RISK_GROUPS as GROUPS
from training.answer_combiner import DATA, ROOT, cached, fit_logistic

C_GRID = (0.01, 0.1, 1.0)
SUPPORTED = CLAIM_FIELDS.index("supported")
UNCERTAINTY = CLAIM_FIELDS.index("uncertainty")
Matrix = npt.NDArray[np.float64]


def _auc(y: Sequence[int], s: Sequence[float]) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y, s)) if len(set(y)) == 2 else float("nan")


class Rows:
    """Every cached answer of the train pools: its file, label, zero-shot decision and
    each claim's features and verdict group."""

    def __init__(self, verifier: str, tau: float, data: Path = DATA) -> None:
        self.files: list[str] = []
        self.labels: list[int] = []
        self.zero: list[int] = []
        self.claims: list[list[tuple[dict[str, float], bool, float]]] = []
        for stem, (labels, scored) in cached(data, verifier).items():
            for label, s in zip(labels, scored, strict=True):
                rows = s["signals"]["claims"]
                n = len(rows)
                self.files.append(stem)
                self.labels.append(label)
                self.zero.append(int(s["zero"]))
                self.claims.append(
                    [
                        (
                            features_from_claim_row(r, CLAIM_FIELDS, tau, n),
                            r[SUPPORTED] == 1.0,
                            r[UNCERTAINTY],
                        )
                        for r in rows
                    ]
                )

    def claim_data(
        self, keep: npt.NDArray[np.bool_], group: str
    ) -> tuple[Matrix, npt.NDArray[np.int64], Matrix]:
        """(features, wrong, weight) of the claims with a known label in answers ``keep``."""
        x: list[list[float]] = []
        y: list[int] = []
        f: list[str] = []
        for i, claims in enumerate(self.claims):
            # a hallucinated answer of several claims, every one judged supported: the
            # decision missed it, so its claims are the errors to rank first (which one is
            # wrong is unknown); otherwise its claims' labels are unknown
            missed = self.labels[i] == 1 and all(s for _, s, _ in claims)
            if not keep[i] or (self.labels[i] == 1 and len(claims) != 1 and not missed):
                continue
            for feats, supported, _ in claims:
                if supported != (group == "supported"):
                    continue
                x.append([feats[n] for n in RISK_FEATURES])
                y.append(int(supported == bool(self.labels[i])))
                f.append(self.files[i])
        weights = np.zeros(len(f))
        files = sorted(set(f))
        for name in files:
            m = np.asarray(f) == name
            weights[m] = len(f) / (len(files) * m.sum())
        return np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.int64), weights


def fit_ranker(rows: Rows, keep: npt.NDArray[np.bool_], c: float) -> ErrorRanker:
    models: dict[str, Any] = {}
    for group in GROUPS:
        x, y, w = rows.claim_data(keep, group)
        if len(set(y.tolist())) < 2:
            raise SystemExit(f"too few labelled '{group}' claims to fit: extract more rows")
        mean, scale, m = fit_logistic(x, y, w, c)
        models[group] = {
            "mean": mean.tolist(),
            "scale": scale.tolist(),
            "coef": m.coef_[0].tolist(),
            "intercept": float(m.intercept_[0]),
        }
    return ErrorRanker.from_dict({"features": list(RISK_FEATURES), "models": models})


def answer_auc(rows: Rows, idx: Sequence[int], ranker: ErrorRanker | None) -> float:
    """ROC-AUC of the answers' uncertainty (their most uncertain claim's) for the zero-shot
    decision's errors; ``ranker`` None: the entropy."""
    errors = [int(rows.zero[i] != rows.labels[i]) for i in idx]
    scores = []
    for i in idx:
        claims = rows.claims[i]
        if ranker is None:
            scores.append(max((u for _, _, u in claims), default=0.0))
        else:
            scores.append(max((ranker.p_wrong(f, s) for f, s, _ in claims), default=0.0))
    return _auc(errors, scores)


def fit(verifier: str, tau: float, out: Path) -> dict[str, Any]:
    rows = Rows(verifier, tau)
    files = sorted(set(rows.files))
    g = np.asarray(rows.files)
    print(f"{len(rows.labels)} train answers from {len(files)} files", file=sys.stderr)
    best: tuple[float, float, dict[str, float]] | None = None
    for c in C_GRID:
        per: dict[str, float] = {}
        for f in files:  # leave one train file out
            ranker = fit_ranker(rows, g != f, c)
            per[f] = answer_auc(rows, np.flatnonzero(g == f).tolist(), ranker)
        mean = statistics.mean(v for v in per.values() if v == v)
        print(f"  C={c:<5} out-of-file mean answer ROC-AUC {mean:.4f}", file=sys.stderr)
        if best is None or mean > best[0]:
            best = (mean, c, per)
    assert best is not None
    mean, c, per = best
    entropy = {f: answer_auc(rows, np.flatnonzero(g == f).tolist(), None) for f in files}
    ranker_json = json.loads(json.dumps(_as_dict(fit_ranker(rows, np.ones(len(g), bool), c))))
    content = {
        "object": "groundproxy.uncertainty",
        "verifier": verifier,
        **ranker_json,
        "fit": {
            "data": "../shared/data/train, the out-of-sample pools of "
            "training.answer_combiner (cached signals)",
            "n_answers": len(rows.labels),
            "threshold": tau,
            "C": c,
            "leave_one_file_out_answer_roc_auc": {f: round(v, 4) for f, v in per.items()},
            "mean": round(mean, 4),
            "entropy_answer_roc_auc": {f: round(v, 4) for f, v in entropy.items()},
            "entropy_mean": round(statistics.mean(v for v in entropy.values() if v == v), 4),
        },
    }
    out.write_text(json.dumps(content, indent=1) + "\n", encoding="utf-8")
    return content


def _as_dict(ranker: ErrorRanker) -> dict[str, Any]:
    return {
        "features": list(ranker.features),
        "models": {
            g: {
                "mean": list(m.mean),
                "scale": list(m.scale),
                "coef": list(m.coef),
                "intercept": m.intercept,
            }
            for g, m in ranker.models.items()
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--verifier", default="crossencoder")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    from groundproxy.models.registry import VerifierRegistry

    verifier = VerifierRegistry().get(args.verifier)
    tau = float(getattr(verifier, "threshold", 0.6))
    out = args.out or ROOT / "models" / args.verifier / "uncertainty.json"
    content = fit(args.verifier, tau, out)
    print(json.dumps(content["fit"], indent=1))


if __name__ == "__main__":
    main()
