"""Accuracy bench: verifiers × eval files, context mode, one table.

    nice -n 10 .venv/bin/python bench/accuracy.py [--data ../shared/data] [--limit N]
        [--claims meta|whole|min_sentence] [--out /tmp/accuracy.json]
        [--verifiers NAME,…] [--models-dir DIR] [--plots bench/results/accuracy]

For every file in ``<data>/eval`` each row's response is scored against the row's own
context (closed domain) and P(supported) is the row's score:

* ``embedhead`` (int8) and ``embedhead-fp32``: pairs (response, context) — the verifier
  picks the best context sentences itself (models.features); with ``--claims
  min_sentence`` the response is cut into sentences and the row gets the minimum
  P(supported) over them. ``meta`` (default) uses what training chose on held-out
  train data (models/embedhead/meta.json ``claims``). Threshold: meta.json
  ``threshold``, chosen on held-out TRAIN contexts only.
* ``lexical`` (guards.verdict.lexical, seeds 001/004): the context cut into the guard's sentence
  windows (guards.evidence.context.sentence_windows), best window per response, as its constants
  were fitted (bench/fit_lexical.py, train data only); threshold 0.5 (its fitted
  logistic decision boundary).

* ``--verifiers``: any other verifier the registry can load by name (e.g. one built with
  ``groundproxy models build``), scored on the same pairs as embedhead (whole response or
  the minimum over its sentences, against the whole context; the verifier selects its own
  evidence windows); threshold: the verifier's ``threshold`` attribute if it has one (set
  from train data at build time), else 0.5.

Metrics: balanced accuracy, F1 of the hallucinated class, ROC-AUC (1 − P(supported) as
the hallucination score), ms per example (wall time of scoring; the two embedhead rows
share one embedding pass, which is counted in both). ``--limit N`` scores a seeded
sample of N rows per file. ``--plots DIR`` writes ``roc.png`` and ``reliability.png``
(bench/plots.py) with every verifier on every file.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.needs_data import require

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from groundproxy.guards.evidence.context import sentence_windows
from groundproxy.guards.types import Pair
from groundproxy.guards.verdict.lexical import LexicalVerifier
from groundproxy.models.embedhead_verifier import EmbedHeadVerifier
from groundproxy.models.features import split_sentences
from groundproxy.models.scoring import sample_rows, verifier_metrics
from groundproxy.retrieval.embedder import load_embedder

BATCH_ROWS = 32


def row_pairs(batch: list[dict[str, Any]], claims: str) -> tuple[list[Pair], list[int]]:
    """(claim, whole context) pairs of a batch of rows and the row index of each pair."""
    pairs: list[Pair] = []
    owner: list[int] = []
    for i, r in enumerate(batch):
        response = str(r["response"] or "")
        parts = split_sentences(response) if claims == "min_sentence" else []
        for claim in parts or [response]:
            pairs.append(Pair(claim=claim, evidence=str(r["context"] or "")))
            owner.append(i)
    return pairs, owner


def embedhead_scores(
    rows: list[dict[str, Any]], v32: EmbedHeadVerifier, v8: EmbedHeadVerifier, claims: str
) -> tuple[np.ndarray, np.ndarray, float, float]:
    """P(supported) per row for fp32 and int8, and seconds spent by each."""
    p32: list[float] = []
    p8: list[float] = []
    t_feat = t32 = t8 = 0.0
    for at in range(0, len(rows), BATCH_ROWS):
        batch = rows[at : at + BATCH_ROWS]
        pairs, owner = row_pairs(batch, claims)
        t0 = time.perf_counter()
        feats = v32.features(pairs)
        t1 = time.perf_counter()
        a = v32.probabilities(feats)[:, 0]
        t2 = time.perf_counter()
        b = v8.probabilities(feats)[:, 0]
        t3 = time.perf_counter()
        t_feat += t1 - t0
        t32 += t2 - t1
        t8 += t3 - t2
        own = np.array(owner)
        for i in range(len(batch)):
            p32.append(float(a[own == i].min()))
            p8.append(float(b[own == i].min()))
    return np.array(p32), np.array(p8), t_feat + t32, t_feat + t8


def generic_scores(
    rows: list[dict[str, Any]], verifier: Any, claims: str
) -> tuple[np.ndarray, float]:
    """P(supported) per row from any registry verifier (min over sentences if asked)."""
    out: list[float] = []
    t0 = time.perf_counter()
    for at in range(0, len(rows), BATCH_ROWS):
        batch = rows[at : at + BATCH_ROWS]
        pairs, owner = row_pairs(batch, claims)
        p = np.array([x.supported for x in verifier.score(pairs)])
        own = np.array(owner)
        out += [float(p[own == i].min()) for i in range(len(batch))]
    return np.array(out), time.perf_counter() - t0


def lexical_scores(rows: list[dict[str, Any]], lex: LexicalVerifier) -> tuple[np.ndarray, float]:
    out: list[float] = []
    t0 = time.perf_counter()
    for r in rows:
        context = str(r["context"] or "")
        windows = [context[s:e] for _, (s, e) in sentence_windows(context)] or [context]
        q = r.get("query")
        pairs = [
            Pair(claim=str(r["response"] or ""), evidence=w, question=str(q) if q else None)
            for w in windows
        ]
        best = float(np.max(lex.raw_scores(pairs)))
        out.append(lex.probs_from_score(best).supported)
    return np.array(out), time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared/data"
    )
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--claims", choices=["meta", "whole", "min_sentence"], default="meta")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--only", nargs="*", default=None, help="eval file stems to run (default all)")
    ap.add_argument("--verifiers", default="", help="more registry verifier names, comma-separated")
    ap.add_argument("--models-dir", type=Path, default=None, help="where built models live")
    ap.add_argument(
        "--plots", type=Path, default=Path(__file__).resolve().parent / "results" / "accuracy"
    )
    args = ap.parse_args()
    require(args.data)
    extra: dict[str, Any] = {}
    if args.verifiers:
        from groundproxy.models.registry import VerifierRegistry

        registry = (
            VerifierRegistry(models_dir=args.models_dir) if args.models_dir else VerifierRegistry()
        )
        extra = {n: registry.get(n) for n in args.verifiers.split(",") if n}
    scores: dict[str, dict[str, tuple[list[int], np.ndarray]]] = {}

    v32 = EmbedHeadVerifier("fp32", embedder=load_embedder())
    v8 = EmbedHeadVerifier("int8", embedder=load_embedder())
    claims = str(v32.meta.get("claims", "whole")) if args.claims == "meta" else args.claims
    lex = LexicalVerifier()
    table: list[dict[str, Any]] = []
    # smallest files first, so a partial run has covered the most datasets
    files = sorted((args.data / "eval").glob("*.jsonl"), key=lambda p: p.stat().st_size)
    if args.only:
        files = [p for p in files if p.stem in args.only]
    for path in files:
        rows = sample_rows(path, args.limit)
        labels = [int(r["label_hallucinated"]) for r in rows]
        print(f"{path.name}: {len(rows)} rows …", file=sys.stderr, flush=True)
        p32, p8, s32, s8 = embedhead_scores(rows, v32, v8, claims)
        pl, sl = lexical_scores(rows, lex)
        runs = [
            ("embedhead-int8", p8, s8, v8.threshold),
            ("embedhead-fp32", p32, s32, v32.threshold),
            ("lexical", pl, sl, 0.5),
        ]
        for name, verifier in extra.items():
            pe, se = generic_scores(rows, verifier, claims)
            runs.append((name, pe, se, float(getattr(verifier, "threshold", 0.5))))
        for name, p, secs, thr in runs:
            scores.setdefault(path.stem, {})[name] = (labels, p)
            m = verifier_metrics(labels, p, thr)
            table.append(
                {
                    "verifier": name,
                    "dataset": path.stem,
                    "n": len(rows),
                    **m,
                    "ms_per_example": round(1000.0 * secs / len(rows), 2),
                    "threshold": thr,
                }
            )
            r = table[-1]
            print(
                f"  {r['dataset']:<24}{r['verifier']:<16}{r['n']:>6}"
                f"{r['balanced_accuracy']:>9.3f}{r['f1_hallucinated']:>9.3f}"
                f"{r['roc_auc']:>9.3f}{r['ms_per_example']:>9.1f}",
                file=sys.stderr,
                flush=True,
            )
    print(f"\nclaims={claims}  (context mode; thresholds from train data only)")
    print(
        f"{'dataset':<24}{'verifier':<16}{'n':>6}{'bal.acc':>9}{'F1(hal)':>9}"
        f"{'ROC-AUC':>9}{'ms/ex':>9}"
    )
    for r in table:
        print(
            f"{r['dataset']:<24}{r['verifier']:<16}{r['n']:>6}{r['balanced_accuracy']:>9.3f}"
            f"{r['f1_hallucinated']:>9.3f}{r['roc_auc']:>9.3f}{r['ms_per_example']:>9.1f}"
        )
    names = ["embedhead-int8", "embedhead-fp32", "lexical", *extra]
    print("\nmean over files:")
    for name in names:
        rs = [r for r in table if r["verifier"] == name]
        print(
            f"  {name:<16} bal.acc {np.mean([r['balanced_accuracy'] for r in rs]):.4f}  "
            f"ROC-AUC {np.mean([r['roc_auc'] for r in rs]):.4f}"
        )
    parity = {
        d: round(abs(a["roc_auc"] - b["roc_auc"]), 4)
        for d in sorted({r["dataset"] for r in table})
        for a in table
        if a["dataset"] == d and a["verifier"] == "embedhead-int8"
        for b in table
        if b["dataset"] == d and b["verifier"] == "embedhead-fp32"
    }
    print(f"int8 vs fp32 |ΔROC-AUC| per file: {parity}")
    if scores and str(args.plots) != "-":
        from bench.plots import save_plots

        for written in save_plots(scores, args.plots):
            print(f"wrote {written}")
    if args.out is not None:
        args.out.write_text(
            json.dumps({"claims": claims, "table": table, "parity": parity}, indent=1)
        )


if __name__ == "__main__":
    main()
