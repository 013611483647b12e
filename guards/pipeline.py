"""One guarded answer: decompose → evidence → rules → ONE verifier batch → decide → rewrite.

Rules run before the verifier because they need only texts, and a value mismatch yields
a correction; each correction is scored against the evidence it came from in the same
batch as the (claim, evidence) pairs, so a corrected claim's support is measured, not
assumed.

Evidence per claim: ``index.search`` over the claim vectors (top_k, min_score) when an
index is given, plus — with ``retrieval.use_request_context`` — the request's own
messages (:mod:`guards.context`), merged and sorted by score. ``min_score`` is an
embedding-cosine threshold; without an embedder, request context is ranked by TF-IDF
cosine and any passage sharing a term with the claim is kept (top_k).

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
from collections.abc import Callable, Sequence

from groundproxy.guards.claims import decompose
from groundproxy.guards.context import context_evidence, refine_hits, select_evidence
from groundproxy.guards.decide import (
    answer_action,
    below_floor,
    contradiction_bar,
    decide_claim,
    resolve_threshold,
    trust_score,
)
from groundproxy.guards.errors import GroundproxyError, GuardError
from groundproxy.guards.rewrite import render
from groundproxy.guards.rules import RuleResult, check_claim
from groundproxy.guards.types import (
    Claim,
    ClaimResult,
    Embedder,
    Evidence,
    EvidenceSource,
    GuardReport,
    Pair,
    Probs,
    Verifier,
)
from groundproxy.policies.schema import Policy

TFIDF_MIN_SCORE = 1e-9
SHORT_CLAIM_WORDS = 4


def search_text(claim: str, question: str | None) -> str:
    """What evidence is searched with: the claim, or "question claim" for a short claim."""
    if question and len(claim.split()) <= SHORT_CLAIM_WORDS:
        return f"{question.strip()} {claim}"
    return claim

EvidenceFn = Callable[[Sequence[Claim]], list[list[Evidence]]]


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


def gather_evidence(
    claims: Sequence[Claim],
    context_messages: Sequence[tuple[str, str]],
    policy: Policy,
    embedder: Embedder | None,
    index: EvidenceSource | None,
    question: str | None = None,
) -> list[list[Evidence]]:
    """Evidence for each claim, best first (see the module docstring)."""
    if not claims:
        return []
    queries = [dataclasses.replace(c, text=search_text(c.text, question)) for c in claims]
    top_k, min_score = policy.retrieval.top_k, policy.retrieval.min_score
    use_context = policy.retrieval.use_request_context and bool(context_messages)
    candidates = context_evidence(context_messages) if use_context else []
    # One embedder call per request: the claims and the request-context windows together.
    vectors = cand_vectors = None
    if embedder is not None:
        encoded = embedder.encode([q.text for q in queries] + [e.text for e in candidates])
        vectors, cand_vectors = encoded[: len(claims)], encoded[len(claims) :]
    per_claim: list[list[Evidence]] = [[] for _ in claims]
    if index is not None:
        if vectors is None:
            raise GuardError("searching an index needs an embedder")
        found = index.search(vectors, top_k, min_score)
        if len(found) != len(claims):
            raise GuardError("the index returned a result list per query of the wrong length")
        per_claim = _best_windows(queries, found, top_k)
    if candidates:
        floor = min_score if vectors is not None else TFIDF_MIN_SCORE
        chosen = select_evidence(queries, vectors, candidates, cand_vectors, top_k, floor)
        per_claim = [_merge(p, c) for p, c in zip(per_claim, chosen, strict=True)]
    return per_claim


def _guard(
    answer: str,
    question: str | None,
    policy: Policy,
    verifier: Verifier,
    evidence_for: EvidenceFn,
    threshold: float | None,
) -> GuardReport:
    started = time.perf_counter()
    try:
        claims = decompose(answer)
        evidence = evidence_for(claims)
        rules: list[RuleResult] = [
            check_claim(c.text, [e.text for e in ev], policy.rules)
            for c, ev in zip(claims, evidence, strict=True)
        ]
        pairs: list[Pair] = []
        owners: list[tuple[int, int]] = []  # (claim index, evidence index or -1 = correction)
        for i, (claim, ev) in enumerate(zip(claims, evidence, strict=True)):
            for j, e in enumerate(ev):
                pairs.append(Pair(claim=claim.text, evidence=e.text, question=question))
                owners.append((i, j))
            rule = rules[i]
            if rule.correction is not None and rule.evidence_index is not None:
                source = ev[rule.evidence_index].text
                pairs.append(Pair(claim=rule.correction, evidence=source, question=question))
                owners.append((i, -1))
        scored = verifier.score(pairs) if pairs else []
    except GroundproxyError:
        raise
    except Exception as exc:  # a backend failed: the proxy applies on_guard_error
        raise GuardError(f"guard failed: {type(exc).__name__}: {exc}") from exc
    if len(scored) != len(pairs):
        raise GuardError(f"verifier {verifier.name!r} returned {len(scored)} for {len(pairs)}")

    probs: list[list[Probs]] = [[] for _ in claims]
    corrections: dict[int, Probs] = {}
    for (i, j), p in zip(owners, scored, strict=True):
        if j < 0:
            corrections[i] = p
        else:
            probs[i].append(p)
    tau = resolve_threshold(policy, threshold)
    bar = contradiction_bar(verifier)
    results: list[ClaimResult] = [
        decide_claim(
            claim,
            evidence[i],
            probs[i],
            rules[i],
            threshold=tau,
            max_uncertainty=policy.verifier.max_uncertainty,
            correction_probs=corrections.get(i),
            contradiction_min=bar,
        )
        for i, claim in enumerate(claims)
    ]
    trust = trust_score(results)
    rendered = render(answer, results, policy, answer_action(results, policy))
    if not rendered.blocked and below_floor(results, policy, rendered.trust or 0.0):
        rendered = render(answer, results, policy, "block")
    return GuardReport(
        original=answer,
        text=rendered.text,
        claims=results,
        trust=trust if rendered.trust is None else rendered.trust,
        action=rendered.action,
        blocked=rendered.blocked,
        latency_ms=(time.perf_counter() - started) * 1000.0,
        verifier=verifier.name,
    )


def run_guard(
    answer: str,
    *,
    question: str | None,
    context_messages: Sequence[tuple[str, str]],
    policy: Policy,
    verifier: Verifier,
    embedder: Embedder | None,
    index: EvidenceSource | None,
    threshold: float | None = None,
) -> GuardReport:
    """Guard one upstream answer under ``policy``.

    ``context_messages`` are the request's ``(role, text)`` messages in order (indices
    name them in ``request:<role>#<i>``). ``threshold`` overrides the policy's (needed
    when it says "calibrated"). Backend failures raise :class:`GuardError`.
    """

    def evidence_for(claims: Sequence[Claim]) -> list[list[Evidence]]:
        return gather_evidence(claims, context_messages, policy, embedder, index, question)

    return _guard(answer, question, policy, verifier, evidence_for, threshold)


def guard_context_row(
    context: str,
    query: str | None,
    response: str,
    policy: Policy,
    verifier: Verifier,
    embedder: Embedder | None,
    threshold: float | None = None,
) -> GuardReport:
    """Closed-domain check of one eval row: ``context`` is the only evidence.

    The context is cut into sentence windows (doc ``request:context#0``) and each claim
    keeps its ``retrieval.top_k`` best windows whatever their score.
    """
    candidates = context_evidence([("context", context)])

    def evidence_for(claims: Sequence[Claim]) -> list[list[Evidence]]:
        if not claims or not candidates:
            return [[] for _ in claims]
        vectors = cand_vectors = None
        if embedder is not None:
            vectors = embedder.encode([c.text for c in claims])
            cand_vectors = embedder.encode([e.text for e in candidates])
        return select_evidence(
            claims, vectors, candidates, cand_vectors, policy.retrieval.top_k, -1.0
        )

    return _guard(response, query, policy, verifier, evidence_for, threshold)


def unverified_report(
    answer: str, policy: Policy, reason: str, *, latency_ms: float = 0.0, verifier: str = ""
) -> GuardReport:
    """The report for an answer that could not be verified (budget exceeded, guard error,
    guard disabled): text unchanged, T = 0.0, action "unverified", ``unverified`` True.

    The claims (when the answer can still be decomposed) carry verdict "unverifiable",
    action "unverified" and ``reason`` as explanation. Whether to block instead
    (``on_guard_error: block``) is the caller's decision; ``policy`` is not consulted.
    """
    del policy
    try:
        claims = decompose(answer)
    except Exception:  # the error path must not fail in turn
        claims = []
    unknown = Probs(0.0, 0.0, 1.0)
    results = [
        ClaimResult(
            claim=c,
            verdict="unverifiable",
            probs=unknown,
            uncertainty=unknown.uncertainty(),
            action="unverified",
            explanation=reason,
        )
        for c in claims
    ]
    return GuardReport(
        original=answer,
        text=answer,
        claims=results,
        trust=0.0,
        action="unverified",
        unverified=True,
        latency_ms=latency_ms,
        verifier=verifier,
    )
