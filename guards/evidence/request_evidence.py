"""Evidence from the request's own context, at a cost proportional to what the claims need.

A RAG request carries its retrieved passages in a system or user message: 2,000 words are
~90 sentence windows (:func:`guards.evidence.context.context_evidence`), and embedding them all took
~700 ms on 2 cores — past the budget for most answers. Per request now:

1. **windows** — the context cut into sentence windows, as before (linear regex);
2. **pre-selection** — per claim, its :data:`PER_CLAIM` best windows by BM25
   (:mod:`guards.evidence.bm25`); a context of at most :data:`ALL_BELOW` windows skips it (every
   window is a candidate for every claim, as before);
3. **vectors** — the verifier's sentences (:func:`guards.evidence.split.evidence_sentences`)
   of the candidates, in priority order (every claim's best candidate, then every claim's
   second …): found in the tenant's cache or index, else embedded in slices
   (:class:`guards.evidence.vectors.RequestVectors`), until done, the budget's reserve or
   ``max_chars`` of live embedding — a hard cap on context work per request;
4. **selection** — each claim's ``top_k`` candidates with vectors, by the best cosine of
   the claim with one of the window's sentences (what the verifier's own best-sentence
   feature reads), at least ``min_score``.

The verifier then reads those very sentence vectors (each window's ``sentences``): the
context costs one embedding of the sentences that can decide a claim. When the cap or the
budget left candidates without vectors, :class:`ContextStats` says so (``capped``): the
answer is verified on the top-N passages instead of coming back unverified. When the budget's
reserve came before a single candidate had its vectors, there are no top-N passages: that is
the budget spent (:class:`GuardTimeoutError`, the answer comes back unverified), never "no
evidence found" for a context that held candidates.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from groundproxy.errors import GuardTimeoutError
from groundproxy.guards.claims.sentences import Stop
from groundproxy.guards.evidence.bm25 import Bm25Index
from groundproxy.guards.evidence.context import context_evidence
from groundproxy.guards.evidence.split import evidence_sentences
from groundproxy.guards.evidence.vectors import RequestVectors
from groundproxy.guards.types import Claim, ContextStats, Evidence

# Lexical candidates per claim. Chosen on TRAIN rows (context mode, embedhead, 169 rows per
# file, paired with the path that embedded every window): 6 kept balanced accuracy within
# ±0.01 on wice-article (long articles: 0.769 vs 0.778; 4 gave 0.746), frank, summedits and
# HaluEval summarization; a static encoder's candidates beside BM25 added nothing at the same
# count (bench/static_encoder.py).
PER_CLAIM = 6
ALL_BELOW = 8  # contexts of at most this many windows: every window is every claim's candidate
MAX_CONTEXT_CHARS = 24_000  # sentence text embedded live per request (cache / index hits free)


@dataclass
class RequestContext:
    """The request's ``(role, text)`` messages and how to embed their sentences."""

    messages: Sequence[tuple[str, str]]
    vectors: RequestVectors | None = None  # None: made per call (no cache)
    halt: Stop | None = None  # true once the caller gave up
    until: float | None = None  # time.monotonic() after which no new vectors are made
    max_chars: int = MAX_CONTEXT_CHARS
    stats: ContextStats = field(default_factory=ContextStats)
    # wall ms spent on: embed (claims and context sentences), windows, preselect, search
    timings: dict[str, float] = field(default_factory=dict)

    def timed(self, stage: str, since: float) -> float:
        """Add the time since ``since`` (perf_counter) to ``stage``; returns now."""
        now = time.perf_counter()
        self.timings[stage] = self.timings.get(stage, 0.0) + (now - since) * 1000.0
        return now


def candidates(
    queries: Sequence[str], windows: Sequence[str], per_claim: int, halt: Stop | None = None
) -> list[list[int]]:
    """Each query's candidate windows, best first: all of them for a small context, else
    its ``per_claim`` best by BM25 (windows sharing no term are never candidates)."""
    if len(windows) <= max(ALL_BELOW, per_claim):
        return [list(range(len(windows))) for _ in queries]
    index = Bm25Index(windows, halt)
    out: list[list[int]] = []
    for q in queries:
        scores = index.scores(q)
        order = np.argsort(-scores, kind="stable")[:per_claim]
        out.append([int(j) for j in order if scores[j] > 0.0])
    return out


def priority(ranked: Sequence[Sequence[int]]) -> list[int]:
    """Distinct windows in the order their vectors are made: every claim's first, then
    every claim's second, …"""
    order: dict[int, None] = {}
    depth = max((len(r) for r in ranked), default=0)
    for rank in range(depth):
        for r in ranked:
            if rank < len(r):
                order.setdefault(r[rank], None)
    return list(order)


def request_evidence(
    queries: Sequence[Claim],
    query_vectors: npt.NDArray[np.float32],
    context: RequestContext,
    vectors: RequestVectors,
    top_k: int,
    min_score: float,
) -> list[list[Evidence]]:
    """For each query (claim, or question + claim), its ``top_k`` request-context windows
    (see the module docstring); ``context.stats`` records the cost."""
    stats = context.stats
    began = time.perf_counter()
    windows = context_evidence(context.messages, halt=context.halt)
    began = context.timed("windows", began)
    stats.passages = len(windows)
    if not windows or not queries:
        return [[] for _ in queries]
    texts = [w.text for w in windows]
    ranked = candidates([q.text for q in queries], texts, PER_CLAIM, context.halt)
    order = priority(ranked)
    sentences = {j: evidence_sentences(windows[j].text) for j in order}
    wanted = list(dict.fromkeys(s for j in order for s in sentences[j]))
    began = context.timed("preselect", began)
    before = dataclasses.replace(vectors.counts)
    vectors.fill(wanted, halt=context.halt, until=context.until, max_chars=context.max_chars)
    context.timed("embed", began)
    ready = {j for j in order if all(vectors.has(s) for s in sentences[j])}
    stats.candidates += len(order)
    stats.verified += len(ready)
    stats.sentences += len(wanted)
    stats.found += vectors.counts.found - before.found
    stats.embedded += vectors.counts.embedded - before.embedded
    stats.capped = stats.capped or len(ready) < len(order)
    if order and not ready and vectors.counts.out_of_time:
        raise GuardTimeoutError("guard spent its budget before reading the request context")
    out: list[list[Evidence]] = []
    for qi, per in enumerate(ranked):
        scored = []
        for j in per:
            if j not in ready:
                continue
            found = vectors.lookup(sentences[j])
            matrix = np.stack([v for v in found if v is not None])
            scored.append((float(np.max(matrix @ query_vectors[qi])), j))
        scored.sort(key=lambda x: -x[0])
        out.append(
            [
                dataclasses.replace(windows[j], score=s, sentences=vectors)
                for s, j in scored[:top_k]
                if s >= min_score
            ]
        )
    return out
