"""The guard's first stage and the verdicts, pure functions over plain data.

:func:`verify` — what the evidence says: the answer is split into claims, each claim's
evidence is gathered (by the caller's ``evidence_for``), the symbolic rules run, and the
(claim, evidence) pairs plus each rule correction (scored against the passage that gave it)
go to the verifier in ONE batch. Its result, :class:`Verified`, holds no decision yet.

:func:`decide` — a verdict per claim under the policy (threshold, uncertainty,
contradiction bar; :mod:`guards.decide`).

Stage 2 — what the policy does with the verdicts (the answer action, the returned text,
the trust floor) — is :func:`guards.action.apply`. Buffered answers, every sentence of a
streamed answer and the CLI all go through the same two stages.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from groundproxy.errors import GroundproxyError, GuardError, GuardTimeoutError
from groundproxy.guards.claims import decompose
from groundproxy.guards.conflicts import resolve
from groundproxy.guards.consistency import harmonize
from groundproxy.guards.decide import (
    Bars,
    contradiction_bar,
    decide_claim,
    model_threshold,
    resolve_threshold,
)
from groundproxy.guards.rules import RuleResult
from groundproxy.guards.sentences import Stop, guard_cut
from groundproxy.guards.types import (
    Claim,
    ClaimResult,
    ContextStats,
    Evidence,
    Pair,
    Probs,
    Verifier,
)
from groundproxy.guards.uncertainty import ErrorRanker, error_ranker, rank_errors
from groundproxy.policies.schema import Policy

EvidenceFn = Callable[[Sequence[Claim]], list[list[Evidence]]]
# A long answer goes to the evidence search and the verifier in slices, ``halt`` checked
# between them; an ordinary answer (a few claims) is one evidence call and one batch.
CLAIM_BATCH = 16
VERIFY_BATCH = 64
STAGES = ("split", "evidence", "rules", "verifier")  # Verified.stage_ms, in order


@dataclass(frozen=True)
class ScoredClaim:
    """One claim with its evidence, the verifier's Probs per passage and the rules' result."""

    claim: Claim
    evidence: list[Evidence]
    probs: list[Probs]
    rule: RuleResult
    correction_probs: Probs | None = None  # the rule correction, scored by the verifier
    conflict: str | None = None  # request vs documents (guards.conflicts)


@dataclass(frozen=True)
class Verified:
    """What :func:`verify` found for one answer (no policy action decided yet)."""

    answer: str
    claims: list[ScoredClaim]
    verifier: str
    contradiction_min: float
    threshold: float | None = None  # a P(supported) override in force (calibrated)
    model_threshold: float | None = None  # the verifier's fitted one (threshold: model)
    latency_ms: float = 0.0
    tail: str = ""  # past policy.max_answer_chars: not verified, returned marked (apply)
    question: str | None = None  # the user's question the claims were verified with
    context: ContextStats | None = None  # what the request's context cost (its caller sets it)
    # wall ms per stage: split (claims), evidence, rules, verifier; the evidence function's
    # own parts (pipeline.with_context: embed, windows, preselect, search) added by its caller
    stage_ms: dict[str, float] = field(default_factory=dict)
    # the verifier's ranker of its own errors (ClaimResult.uncertainty; guards.uncertainty)
    ranker: ErrorRanker | None = field(default=None, compare=False, repr=False)


def verify(
    answer: str,
    *,
    question: str | None,
    policy: Policy,
    verifier: Verifier,
    evidence_for: EvidenceFn,
    halt: Stop | None = None,
) -> Verified:
    """Stage 1. Backend failures raise :class:`GuardError` (domain errors pass as they are).
    A calibrated threshold in force is the caller's to set (``Verified.threshold``).

    Only the first ``policy.max_answer_chars`` (cut at a sentence end) are verified; the
    rest is :attr:`Verified.tail`, returned unverified by :func:`apply`. ``halt`` (true
    once the caller's deadline passed) is checked between sentence windows, claims and
    verifier batches: :class:`GuardTimeoutError` then, so abandoned work stops.
    """
    started = time.perf_counter()
    cut = guard_cut(answer, policy.max_answer_chars)
    answer, tail = answer[:cut], answer[cut:]
    marks = [time.perf_counter()]
    try:
        claims = decompose(answer, halt)
        marks.append(time.perf_counter())
        evidence = _evidence(evidence_for, claims, halt)
        marks.append(time.perf_counter())
        pool = list(dict.fromkeys(e.text for ev in evidence for e in ev))  # the answer's
        resolved = [
            resolve(c.text, ev, policy, pool) for c, ev in zip(claims, evidence, strict=True)
        ]
        marks.append(time.perf_counter())
        evidence = [ev for ev, _, _ in resolved]
        rules: list[RuleResult] = [rule for _, rule, _ in resolved]
        pairs: list[Pair] = []
        owners: list[tuple[int, int]] = []  # (claim index, evidence index or -1 = correction)
        for i, (claim, ev) in enumerate(zip(claims, evidence, strict=True)):
            for j, e in enumerate(ev):
                pairs.append(Pair(claim.text, e.text, question, vectors=e.sentences))
                owners.append((i, j))
            rule = rules[i]
            if rule.correction is not None and rule.evidence_index is not None:
                source = ev[rule.evidence_index]
                pairs.append(Pair(rule.correction, source.text, question, vectors=source.sentences))
                owners.append((i, -1))
        scored = _score(verifier, pairs, halt)
        marks.append(time.perf_counter())
    except GroundproxyError:
        raise
    except Exception as exc:  # a backend failed: the caller applies on_guard_error
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
    return Verified(
        answer=answer,
        claims=[
            ScoredClaim(claim, evidence[i], probs[i], rules[i], corrections.get(i), resolved[i][2])
            for i, claim in enumerate(claims)
        ],
        verifier=verifier.name,
        contradiction_min=contradiction_bar(verifier),
        model_threshold=model_threshold(verifier),
        latency_ms=(time.perf_counter() - started) * 1000.0,
        question=question,
        tail=tail,
        stage_ms={
            name: (b - a) * 1000.0 for name, a, b in zip(STAGES, marks[:-1], marks[1:], strict=True)
        },
        ranker=error_ranker(verifier),
    )


def _check(halt: Stop | None) -> None:
    if halt is not None and halt():
        raise GuardTimeoutError("guard stopped at its deadline")


def _evidence(
    evidence_for: EvidenceFn, claims: list[Claim], halt: Stop | None
) -> list[list[Evidence]]:
    evidence: list[list[Evidence]] = []
    for at in range(0, len(claims), CLAIM_BATCH):
        _check(halt)
        evidence += evidence_for(claims[at : at + CLAIM_BATCH])
    _check(halt)
    return evidence


def _score(verifier: Verifier, pairs: list[Pair], halt: Stop | None) -> list[Probs]:
    """The verifier's Probs for ``pairs``: one batch for an ordinary answer, batches of
    VERIFY_BATCH for a long one, with ``halt`` checked between them."""
    scored: list[Probs] = []
    for at in range(0, len(pairs), VERIFY_BATCH):
        _check(halt)
        scored += verifier.score(pairs[at : at + VERIFY_BATCH])
    return scored


def decide(verified: Verified, policy: Policy) -> list[ClaimResult]:
    """A verdict per claim under ``policy`` (see :mod:`guards.decide`)."""
    tau = resolve_threshold(policy, verified.threshold, verified.model_threshold)
    bars = Bars(tau, policy.verifier.max_uncertainty, verified.contradiction_min)
    results = [
        decide_claim(s.claim, s.evidence, s.probs, s.rule, bars, s.correction_probs)
        for s in verified.claims
    ]
    for s, r in zip(verified.claims, results, strict=True):
        if s.conflict is not None:
            r.conflict = s.conflict
            r.explanation = f"{r.explanation}; {s.conflict}"
    results = harmonize([s.rule for s in verified.claims], results)
    rank_errors(verified.claims, results, tau, verified.ranker)
    return results
