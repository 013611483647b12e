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
from groundproxy.guards.claims.decompose import decompose
from groundproxy.guards.pipeline import Backends, gather_evidence, run_guard
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
    names = (*STAGES, "rules+decide+rewrite", "total")
    wall: dict[str, list[float]] = {s: [] for s in names}
    cpu: dict[str, list[float]] = {s: [] for s in names}
    pairs: list[Pair] = []
    for i, a in enumerate(answers):
        forget()
        marks = [(time.perf_counter(), time.process_time())]
        run_guard(
            a.text,
            question=a.question,
            context_messages=[],
            policy=policy,
            backends=Backends(verifier, embedder, index),
        )
        marks.append((time.perf_counter(), time.process_time()))
        pairs = verifier.pairs
        forget()
        marks.append((time.perf_counter(), time.process_time()))
        claims = decompose(a.text)
        marks.append((time.perf_counter(), time.process_time()))
        gather_evidence(claims, [], policy, embedder, index, a.question)
        marks.append((time.perf_counter(), time.process_time()))
        for p in pairs:
            evidence_candidates(clip_claim(p.claim) or ".", p.evidence)
        marks.append((time.perf_counter(), time.process_time()))
        features = verifier.inner.features(pairs)  # selection + embedding
        marks.append((time.perf_counter(), time.process_time()))
        verifier.inner.probabilities(features)
        marks.append((time.perf_counter(), time.process_time()))
        if i < 3:  # warm-up
            continue
        for k, out in ((0, wall), (1, cpu)):
            m = [x[k] * 1000 for x in marks]
            total = m[1] - m[0]
            stages = [m[3] - m[2], m[4] - m[3], m[5] - m[4], (m[6] - m[5]) - (m[5] - m[4])]
            stages.append(m[7] - m[6])
            for name, v in zip(STAGES, stages, strict=True):
                out[name].append(v)
            out["rules+decide+rewrite"].append(max(0.0, total - sum(stages)))
            out["total"].append(total)
    print(f"index: {work}; load average now {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"\n{args.n} distinct answers ({len(pairs)} pairs in the last); ms per answer")
    print("wall = elapsed; cpu = CPU time of the process (all its threads)")
    print(f"{'stage':<24}{'wall p50':>10}{'wall p90':>10}{'cpu p50':>10}{'cpu mean':>10}")
    for name in names:
        w, c = wall[name], cpu[name]
        print(f"{name:<24}{statistics.median(w):>10.1f}{_pct(w, 90):>10.1f}"
              f"{statistics.median(c):>10.1f}{statistics.fmean(c):>10.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
