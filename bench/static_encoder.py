"""Does the distilled static encoder rank request-context evidence like MiniLM? (issue 30, 3)

The static table (``training/static_distill.py``, the Model2Vec method; built into
``--static`` first if it is not there) would be the cheaper encoder for claims and context
sentences. Its vectors are not MiniLM's (another space), so it can never feed the
``embedhead`` verifier's features; what it could replace is a *ranking*. This measures that,
for a seeded sample of rows of every eval file (context mode, ``groundproxy eval``'s
``sample_rows``): each response sentence against the row's context windows
(``guards.evidence.context.context_evidence``), ranked by MiniLM fp32 cosine (the reference), by the
static table's cosine, and by BM25 (the lexical baseline the request-context pre-selection
uses, ``guards.evidence.bm25``):

- ``top-1``: the method's best window is MiniLM's best;
- ``top-3``: overlap of the two top-3 sets;
- ``in 6``: MiniLM's best window is among the method's 6 candidates (what the pre-selection
  must keep: ``guards.evidence.request_evidence.PER_CLAIM``);

and the encode speed of both encoders on the same texts (sentences per second, this run).

    nice -n 5 .venv/bin/python -m bench.static_encoder [--limit 60] [--static models/static]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from groundproxy.guards.evidence.bm25 import Bm25Index
from groundproxy.guards.evidence.context import context_evidence
from groundproxy.proxy.cli.evaluate import read_rows, sample_rows
from groundproxy.retrieval.onnx_embedder import OnnxEmbedder
from groundproxy.retrieval.sentence_split import split_sentences
from groundproxy.retrieval.static_embedder import STATIC_DIR, StaticEmbedder

EVAL = Path(__file__).resolve().parents[2] / "shared" / "data" / "eval"
METHODS = ("static", "bm25")


def _agreement(reference: np.ndarray, scores: np.ndarray) -> tuple[int, float, int]:
    """(top-1 same, top-3 overlap share, reference's best in the method's 6) of one claim."""
    ref = np.argsort(-reference, kind="stable")
    got = np.argsort(-scores, kind="stable")
    k = min(3, len(ref))
    return int(got[0] == ref[0]), len(set(got[:k]) & set(ref[:k])) / k, int(ref[0] in got[:6])


def measure(path: Path, limit: int, static: StaticEmbedder, minilm: OnnxEmbedder) -> list[str]:
    sums = {m: np.zeros(3) for m in METHODS}
    claims_n = rows_n = 0
    timing = {"static": 0.0, "minilm": 0.0}
    for row in sample_rows(read_rows(path), limit, 0):
        windows = [w.text for w in context_evidence([("context", row.context)])]
        claims = split_sentences(row.response)
        if len(windows) < 2 or not claims:
            continue
        rows_n += 1
        t = time.perf_counter()
        ref = minilm.encode(claims) @ minilm.encode(windows).T
        timing["minilm"] += time.perf_counter() - t
        t = time.perf_counter()
        fast = static.encode(claims) @ static.encode(windows).T
        timing["static"] += time.perf_counter() - t
        bm25 = Bm25Index(windows)
        for i, claim in enumerate(claims):
            claims_n += 1
            sums["static"] += _agreement(ref[i], fast[i])
            sums["bm25"] += _agreement(ref[i], bm25.scores(claim))
    if not claims_n:
        return [f"{path.stem:<24} no row with 2 or more context windows"]
    speed = timing["minilm"] / max(timing["static"], 1e-9)
    lines = []
    for m in METHODS:
        top1, top3, in6 = sums[m] / claims_n
        lines.append(
            f"{path.stem:<24}{rows_n:>5}{claims_n:>7}{m:>8}{top1:>8.3f}{top3:>8.3f}{in6:>8.3f}"
            + (f"{speed:>10.0f}x" if m == "static" else "")
        )
    return lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=60, help="seeded rows per eval file")
    ap.add_argument("--static", type=Path, default=STATIC_DIR)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    if not (a.static / "meta.json").exists():
        cmd = [sys.executable, "-m", "training.static_distill", "--out"]
        subprocess.run([*cmd, str(a.static)], check=True)
    static, minilm = StaticEmbedder(a.static), OnnxEmbedder("fp32", lru_size=0)
    lines = [
        f"# bench.static_encoder — {time.strftime('%Y-%m-%d %H:%M')}, {static.name}, seeded "
        f"samples of ≤ {a.limit} rows, load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores",
        f"{'file':<24}{'rows':>5}{'claims':>7}{'method':>8}{'top-1':>8}{'top-3':>8}{'in 6':>8}"
        f"{'speed-up':>11}",
    ]
    print("\n".join(lines), flush=True)
    for path in sorted(EVAL.glob("*.jsonl"), key=lambda p: p.stat().st_size):
        found = measure(path, a.limit, static, minilm)
        lines += found
        print("\n".join(found), flush=True)
    if a.out is not None:
        a.out.write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
