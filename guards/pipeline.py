"""One guarded answer: :func:`run_guard` = :func:`guards.verdict.stages.verify` (decompose →
evidence → rules → ONE verifier batch) then :func:`guards.action.apply` (decide → action →
rewrite).

Rules run before the verifier because they need only texts, and a value mismatch yields
a correction; each correction is scored against the evidence it came from in the same
batch as the (claim, evidence) pairs, so a corrected claim's support is measured, not
assumed.

Evidence per claim: ``index.search`` over the claim vectors (top_k, min_score) when an
index is given, plus — with ``retrieval.use_request_context`` — the request's own
messages, merged and sorted by score. Request context is pre-selected per claim (BM25) and
only the candidates' sentences are embedded, within a cap (:mod:`guards.evidence.request_evidence`).
``min_score`` is an embedding-cosine threshold; without an embedder, request context is
ranked by TF-IDF cosine and any passage sharing a term with the claim is kept (top_k).

A claim of at most ``SHORT_CLAIM_WORDS`` words ("Delhi", "President Richard Nixon") is an
answer to the question and means little alone: it is searched for as "question + claim"
(:func:`search_text`). Searched alone its embedding is close to nothing in the evidence,
every passage fell under ``min_score`` and right short answers came out "no evidence
found" (HaluEval-QA through the guard: answer-level ROC-AUC 0.48 with the embedhead
verifier, whose pair-level ROC-AUC on the same rows is 0.97). The verifier still judges
the claim itself.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass

from groundproxy.errors import GuardError
from groundproxy.guards.action import apply
from groundproxy.guards.answer.failures import unverified_report
from groundproxy.guards.evidence.context import context_evidence, refine_hits, select_evidence
from groundproxy.guards.evidence.request_evidence import RequestContext, request_evidence
from groundproxy.guards.evidence.vectors import RequestVectors, encode_sliced
from groundproxy.guards.types import (
    Claim,
    Embedder,
    Evidence,
    EvidenceSource,
    GuardReport,
    Verifier,
)
from groundproxy.guards.verdict.ladder import Rungs
from groundproxy.guards.verdict.stages import EvidenceFn, Verified, verify
from groundproxy.policies.schema import Policy

TFIDF_MIN_SCORE = 1e-9
SHORT_CLAIM_WORDS = 4


def search_text(claim: str, question: str | None) -> str:
    """What evidence is searched with: the claim, or "question claim" for a short claim."""
    if question and len(claim.split()) <= SHORT_CLAIM_WORDS:
        return f"{question.strip()} {claim}"
    return claim


def _merge(a: Sequence[Evidence], b: Sequence[Evidence]) -> list[Evidence]:
    seen: set[tuple[str, tuple[int, int]]] = set()
    out: list[Evidence] = []
    for e in sorted([*a, *b], key=lambda e: -e.score):
        if (e.doc, e.span) not in seen:
            seen.add((e.doc, e.span))
            out.append(e)
    return out


def _best_windows(
    claims: Sequence[Claim], found: Sequence[Sequence[Evidence]], top_k: int
) -> list[list[Evidence]]:
    """Each claim's top_k sentence windows of the retrieved chunks, picked by TF-IDF (no
    second embedder call); a window keeps its chunk's retrieval score so that index and
    request evidence stay on one (embedding cosine) scale."""
    windows = refine_hits(found)
    if not windows:
        return [[] for _ in claims]
    chosen = select_evidence(claims, None, windows, None, top_k, -1.0)
    retrieval_score = {(w.doc, w.span): w.score for w in windows}
    return [
        [dataclasses.replace(w, score=retrieval_score[(w.doc, w.span)]) for w in per]
        for per in chosen
    ]


Context = Sequence[tuple[str, str]] | RequestContext


def as_request_context(context: Context) -> RequestContext:
    """The request's messages as a :class:`RequestContext` (no cache, no deadline)."""
    return context if isinstance(context, RequestContext) else RequestContext(list(context))


def gather_evidence(
    claims: Sequence[Claim],
    context_messages: Context,
    policy: Policy,
    embedder: Embedder | None,
    index: EvidenceSource | None,
    question: str | None = None,
) -> list[list[Evidence]]:
    """Evidence for each claim, best first (see the module docstring). ``context_messages``:
    the request's ``(role, text)`` messages, or a :class:`RequestContext` carrying the
    tenant's vector cache, the caller's halt and the budget's reserve."""
    if not claims:
        return []
    context = as_request_context(context_messages)
    queries = [dataclasses.replace(c, text=search_text(c.text, question)) for c in claims]
    top_k, min_score = policy.retrieval.top_k, policy.retrieval.min_score
    use_context = policy.retrieval.use_request_context and bool(context.messages)
    if embedder is None:
        if index is not None:
            raise GuardError("searching an index needs an embedder")
        if not use_context:
            return [[] for _ in claims]
        candidates = context_evidence(context.messages)
        return select_evidence(queries, None, candidates, None, top_k, TFIDF_MIN_SCORE)
    began = time.perf_counter()
    vectors = encode_sliced(embedder, [q.text for q in queries], context.halt)
    began = context.timed("embed", began)
    per_claim: list[list[Evidence]] = [[] for _ in claims]
    if index is not None:
        found = index.search(vectors, top_k, min_score)
        if len(found) != len(claims):
            raise GuardError("the index returned a result list per query of the wrong length")
        per_claim = _best_windows(queries, found, top_k)
        context.timed("search", began)
    if use_context:
        store = context.vectors if context.vectors is not None else RequestVectors(embedder)
        chosen = request_evidence(queries, vectors, context, store, top_k, min_score)
        per_claim = [_merge(p, c) for p, c in zip(per_claim, chosen, strict=True)]
    return per_claim


@dataclass(frozen=True)
class Backends:
    """What the guard runs on: the verifier (the ladder's fast rung; ``strong``, its strong
    rung under ``verifier.ladder``), and for evidence an embedder and a tenant index
    (without an index: the request's own messages only; without an embedder they are ranked
    by TF-IDF)."""

    verifier: Verifier
    embedder: Embedder | None = None
    index: EvidenceSource | None = None
    strong: Verifier | None = None  # the ladder's strong rung (guards.verdict.ladder), when on


def run_guard(
    answer: str,
    *,
    question: str | None,
    context_messages: Context,
    policy: Policy,
    backends: Backends,
) -> GuardReport:
    """Guard one upstream answer under ``policy``.

    ``context_messages`` are the request's ``(role, text)`` messages in order (indices
    name them in ``request:<role>#<i>``). Backend failures raise :class:`GuardError`.
    """
    context = as_request_context(context_messages)
    verified = verify(
        answer,
        question=question,
        policy=policy,
        verifier=Rungs(backends.verifier, backends.strong),
        evidence_for=evidence_fn(context, policy, backends.embedder, backends.index, question),
    )
    return apply(with_context(verified, context), policy)


def with_context(verified: Verified, context: RequestContext) -> Verified:
    """``verified`` carrying what the request's context cost (when it had any) and the
    evidence stage's parts in ``stage_ms``."""
    stage_ms = {**verified.stage_ms, **context.timings}
    stats = context.stats if context.stats.passages else None
    return dataclasses.replace(verified, context=stats, stage_ms=stage_ms)


def evidence_fn(
    context_messages: Context,
    policy: Policy,
    embedder: Embedder | None,
    index: EvidenceSource | None,
    question: str | None,
) -> EvidenceFn:
    """:func:`gather_evidence` bound to one request, for :func:`guards.verdict.stages.verify`."""

    def evidence_for(claims: Sequence[Claim]) -> list[list[Evidence]]:
        return gather_evidence(claims, context_messages, policy, embedder, index, question)

    return evidence_for


__all__ = [
    "Backends",
    "RequestContext",
    "as_request_context",
    "evidence_fn",
    "gather_evidence",
    "run_guard",
    "search_text",
    "unverified_report",
    "with_context",
]
