"""Accuracy of the request-context path before and after issue 30, every eval file, one run.

Each row's response is guarded through the served path (``GuardService.guard_sync``, context
mode: the row's context is the request's only evidence, no verdict cache) three ways, on the
same seeded sample of rows (``groundproxy eval``'s ``sample_rows``):

- ``embedhead before``: the path before issue 30 — every sentence window of the context
  embedded, top_k by window cosine (bench.rag_stages.legacy_gather);
- ``embedhead now``: BM25 pre-selection, only the candidates' sentences embedded, windows
  ranked by their best sentence (guards.evidence.request_evidence);
- ``lexical now``: the TF-IDF baseline of seeds 001/004 on the new path.

Balanced accuracy (an answer is hallucinated when any claim is not supported), ROC-AUC (1 −
trust), agreement of each run's predictions with the first's, and ms per row (the
embedder's vector LRU and the context cache emptied before every row and variant: each row
costs what a distinct request does).

    nice -n 5 .venv/bin/python -m bench.rag_accuracy [--limit 400] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.metrics import balanced_accuracy_score, roc_auc_score

import groundproxy.guards.pipeline as pipeline
from bench.rag_stages import NEW_GATHER, legacy_gather
from groundproxy.proxy.cli.evaluate import Row, eval_policy, read_rows, sample_rows
from groundproxy.proxy.serving.guarding import GuardService, build_guard
from groundproxy.proxy.settings import Settings

EVAL = Path(__file__).resolve().parents[2] / "shared" / "data" / "eval"
VARIANTS = (("embedhead before", "embedhead", legacy_gather),
            ("embedhead now", "embedhead", NEW_GATHER),
            ("lexical now", "lexical", NEW_GATHER))  # fmt: skip


def score(
    guard: GuardService, rows: list[Row], verifier: str
) -> tuple[list[int], list[float], float]:
    policy = eval_policy(verifier, "context")
    preds, scores = [], []
    began = time.perf_counter()
    lru = getattr(guard.parts.raw_embedder, "lru", None)
    for r in rows:
        if lru is not None:  # a distinct request finds no vector of another row's texts
            lru.clear()
        report = guard.guard_sync(
            r.response, r.query, [("context", r.context)], policy, index=None, cache=False
        )
        preds.append(int(any(c.verdict != "supported" for c in report.claims)))
        scores.append(1.0 - report.trust)
    return preds, scores, (time.perf_counter() - began) * 1000.0 / len(rows)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=400)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    lines = [f"# bench.rag_accuracy — {time.strftime('%Y-%m-%d %H:%M')}, context mode, "
             f"seeded samples of ≤ {a.limit} rows (seed 0), load {os.getloadavg()[0]:.1f}",
             f"{'file':<24}{'n':>6}{'variant':>18}{'bal.acc':>9}{'ROC-AUC':>9}{'agree':>7}"
             f"{'ms/row':>8}"]  # fmt: skip
    print("\n".join(lines), flush=True)
    with build_guard(Settings()) as guard:
        for path in sorted(EVAL.glob("*.jsonl"), key=lambda p: p.stat().st_size):
            rows = sample_rows(read_rows(path), a.limit, 0)
            labels = [r.label for r in rows]
            base: list[int] | None = None
            for name, verifier, gather in VARIANTS:
                pipeline.gather_evidence = gather
                guard.parts.context_cache = type(guard.parts.context_cache)()  # nothing cached
                preds, scores, ms = score(guard, rows, verifier)
                base = preds if base is None else base
                agree = float(np.mean(np.array(preds) == np.array(base)))
                row: dict[str, Any] = {
                    "bal": balanced_accuracy_score(labels, preds),
                    "auc": roc_auc_score(labels, scores) if len(set(labels)) > 1 else float("nan"),
                }
                lines.append(f"{path.stem:<24}{len(rows):>6}{name:>18}{row['bal']:>9.4f}"
                             f"{row['auc']:>9.4f}{agree:>7.3f}{ms:>8.0f}")  # fmt: skip
                print(lines[-1], flush=True)
            pipeline.gather_evidence = NEW_GATHER
    if a.out is not None:
        a.out.write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
