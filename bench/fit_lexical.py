"""Fit the lexical verifier's constants (guards/verdict/lexical.py) on the TRAIN files only.

    .venv/bin/python bench/fit_lexical.py [--data ../shared/data] [--max-per-file N]
        [--mode chunks|pair]

Each train row gives one example: the response is the claim, the context the evidence
(``--mode chunks``: the context cut into the guard's sentence windows, scored in one
batch like the pipeline does, best window kept; ``--mode pair``: the whole context),
the query the question. For every alpha on a grid a one-feature logistic regression maps
s to P(supported); every (dataset, label) cell weighs the same, so no file and no class
dominates. The alpha with the best mean per-dataset balanced accuracy wins. Prints the
constants to paste into guards/verdict/lexical.py and the train figures. ``eval/`` is never read.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import balanced_accuracy_score, roc_auc_score

from bench.needs_data import require

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from groundproxy.guards.evidence.context import sentence_windows
from groundproxy.guards.types import Pair
from groundproxy.guards.verdict.lexical import LexicalVerifier

ALPHAS = [round(a, 2) for a in np.linspace(0.0, 1.0, 11)]


def load_rows(train_dir: Path, max_per_file: int | None) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for path in sorted(train_dir.glob("*.jsonl")):
        with path.open(encoding="utf-8") as fh:
            file_rows = [json.loads(line) for line in fh if line.strip()]
        if max_per_file is not None and len(file_rows) > max_per_file:
            file_rows = random.Random(0).sample(file_rows, max_per_file)
        rows.extend(file_rows)
    return rows


def row_sims(
    verifier: LexicalVerifier, row: dict[str, object], mode: str
) -> tuple[np.ndarray, np.ndarray, bool]:
    context = str(row["context"] or "")
    response = str(row["response"] or "")
    query = row.get("query")
    question = str(query) if query else None
    if mode == "chunks":
        evidence = [context[s:e] for _, (s, e) in sentence_windows(context)] or [context]
    else:
        evidence = [context]
    pairs = [Pair(claim=response, evidence=ev, question=question) for ev in evidence]
    cc, qc, has_q = verifier.similarities(pairs)
    return cc, qc, bool(has_q[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared/data"
    )
    ap.add_argument("--max-per-file", type=int, default=None)
    ap.add_argument("--mode", choices=["chunks", "pair"], default="chunks")
    args = ap.parse_args()
    require(args.data)

    rows = load_rows(args.data / "train", args.max_per_file)
    t0 = time.perf_counter()
    verifier = LexicalVerifier()
    sims = [row_sims(verifier, r, args.mode) for r in rows]
    featurize_s = time.perf_counter() - t0
    y = np.array([1 - int(r["label_hallucinated"]) for r in rows])  # 1 = supported
    datasets = np.array([str(r["dataset"]) for r in rows])
    cells = Counter(zip(datasets.tolist(), y.tolist(), strict=True))
    weight = np.array([1.0 / cells[(d, int(c))] for d, c in zip(datasets, y, strict=True)])

    results = []
    for alpha in ALPHAS:
        s = np.array(
            [
                float(np.max(alpha * cc + (1 - alpha) * qc)) if has_q else float(np.max(cc))
                for cc, qc, has_q in sims
            ]
        )
        lr = LogisticRegression(C=1e4, max_iter=1000)
        lr.fit(s.reshape(-1, 1), y, sample_weight=weight)
        pred = lr.predict(s.reshape(-1, 1))
        per_ds = {
            d: balanced_accuracy_score(y[datasets == d], pred[datasets == d])
            for d in sorted(set(datasets.tolist()))
            if len(set(y[datasets == d].tolist())) == 2
        }
        results.append(
            {
                "alpha": alpha,
                "slope": float(lr.coef_[0][0]),
                "intercept": float(lr.intercept_[0]),
                "macro_ba": float(np.mean(list(per_ds.values()))),
                "pooled_ba": float(balanced_accuracy_score(y, pred)),
                "auc": float(roc_auc_score(y, s)),
                "per_dataset": per_ds,
            }
        )
        print(
            f"alpha={alpha:.1f} slope={results[-1]['slope']:.3f} "
            f"intercept={results[-1]['intercept']:.3f} macro_ba={results[-1]['macro_ba']:.4f} "
            f"pooled_ba={results[-1]['pooled_ba']:.4f} auc={results[-1]['auc']:.4f}",
            flush=True,
        )
    best = max(results, key=lambda r: (r["macro_ba"], -abs(r["alpha"] - 0.5)))
    print(f"\nrows={len(rows)} mode={args.mode} featurize_s={featurize_s:.1f}")
    print("per-dataset balanced accuracy (best alpha):")
    for d, ba in best["per_dataset"].items():  # type: ignore[attr-defined]
        print(f"  {d:28s} {ba:.4f}")
    print("\n# paste into guards/verdict/lexical.py")
    print(f"ALPHA = {best['alpha']}")
    print(f"SLOPE = {best['slope']:.4f}")
    print(f"INTERCEPT = {best['intercept']:.4f}")
    print(
        f"# train: macro balanced accuracy {best['macro_ba']:.4f}, pooled "
        f"{best['pooled_ba']:.4f}, ROC-AUC {best['auc']:.4f}"
    )


if __name__ == "__main__":
    main()
