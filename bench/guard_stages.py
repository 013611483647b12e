"""Where a guarded answer's CPU goes, stage by stage, in one process (no HTTP).

The same distinct 5-claim answers as ``bench.guard_latency`` (bench.answers) over the same
~300-document index, each guarded once through ``guards.pipeline.run_guard`` with the
``embedhead`` verifier, then again (cache-free) stage by stage: claim split
(``decompose``), retrieval (claim embedding + index search + sentence windows), evidence
selection (the verifier's lexical pre-ranking of evidence sentences), embedding (the
verifier's embedder call, after the stored sentence vectors), verifier head (ONNX), and
the rest of ``run_guard`` (rules, decide, rewrite) as total − the stages above.

    .venv/bin/python -m bench.guard_stages [--n 40] [--docs 300] [--data DIR]

``--data`` keeps the index there (built on the first run, reused after; bench.guard_latency
``--index DIR/bench`` can reuse it too). Each pass starts with the embedder's LRU of recent
vectors empty (retrieval.vector_lru), as a request with a distinct answer finds it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bench.answers import distinct_answers
from bench.guard_latency import _docs, _pct
from groundproxy.guards.claims import decompose
from groundproxy.guards.pipeline import gather_evidence, run_guard
from groundproxy.guards.types import Pair, Probs
from groundproxy.models.embedhead_verifier import EmbedHeadVerifier
from groundproxy.models.features import clip_claim, evidence_candidates
from groundproxy.policies.schema import local_policy
from groundproxy.retrieval.embedder import load_embedder
from groundproxy.retrieval.index_snapshot import TenantIndex
from groundproxy.retrieval.ingest import ingest_texts

STAGES = ("claim split", "retrieval", "evidence selection", "embedding", "verifier head")


class _Recording:
    """The verifier, recording the pairs it is given (and how long scoring took)."""

    def __init__(self, inner: EmbedHeadVerifier) -> None:
        self.inner = inner
        self.name = inner.name
        self.contradiction_min = inner.contradiction_min
        self.threshold = inner.threshold
        self.pairs: list[Pair] = []

    def score(self, pairs: Sequence[Pair]) -> list[Probs]:
        self.pairs = list(pairs)
        return self.inner.score(pairs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--docs", type=int, default=300)
    ap.add_argument("--data", type=Path, default=None)
    args = ap.parse_args()
    work = args.data or Path(tempfile.mkdtemp(prefix="gp-stages-"))
    docs = _docs(args.docs)
    embedder = load_embedder()
    if not (work / "bench" / "CURRENT").is_file():
        t0 = time.perf_counter()
        ingest_texts(work, "bench", docs, embedder)
        print(f"index: {len(docs)} documents, built in {time.perf_counter() - t0:.1f} s")
    lru = getattr(embedder, "lru", None)
    forget = lru.clear if lru is not None else (lambda: None)
    index = TenantIndex.open(work, "bench", embedder=embedder)
    verifier = _Recording(EmbedHeadVerifier("int8", embedder=embedder))
    policy = local_policy("bench")
    answers = distinct_answers(docs, args.n + 3)
    ms: dict[str, list[float]] = {s: [] for s in (*STAGES, "rules+decide+rewrite", "total")}
    for i, a in enumerate(answers):
        forget()
        t = time.perf_counter()
        run_guard(a.text, question=a.question, context_messages=[], policy=policy,
                  verifier=verifier, embedder=embedder, index=index)  # fmt: skip
        total = time.perf_counter() - t
        pairs = verifier.pairs
        forget()
        t1 = time.perf_counter()
        claims = decompose(a.text)
        t2 = time.perf_counter()
        gather_evidence(claims, [], policy, embedder, index, a.question)
        t3 = time.perf_counter()
        for p in pairs:
            evidence_candidates(clip_claim(p.claim) or ".", p.evidence)
        t4 = time.perf_counter()
        features = verifier.inner.features(pairs)  # selection + embedding
        t5 = time.perf_counter()
        verifier.inner.probabilities(features)
        t6 = time.perf_counter()
        stages = [t2 - t1, t3 - t2, t4 - t3, (t5 - t4) - (t4 - t3), t6 - t5]
        if i < 3:  # warm-up
            continue
        for name, s in zip(STAGES, stages, strict=True):
            ms[name].append(s * 1000)
        ms["rules+decide+rewrite"].append(max(0.0, total - sum(stages)) * 1000)
        ms["total"].append(total * 1000)
    print(f"index: {work}; load average now {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"\n{args.n} distinct answers ({len(pairs)} pairs in the last); ms per answer")
    print(f"{'stage':<24}{'p50':>8}{'p90':>8}{'mean':>8}")
    for name, xs in ms.items():
        print(f"{name:<24}{statistics.median(xs):>8.1f}{_pct(xs, 90):>8.1f}"
              f"{statistics.fmean(xs):>8.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
