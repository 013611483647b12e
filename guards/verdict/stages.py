"""The guard's first stage and the verdicts, pure functions over plain data.

:func:`verify` — what the evidence says: the answer is split into claims, each claim's
evidence is gathered (by the caller's ``evidence_for``), the symbolic rules run, and the
(claim, evidence) pairs plus each rule correction (scored against the passage that gave it)
go to the verifier in ONE batch. Its result, :class:`Verified`, holds no decision yet.

:func:`decide` — a verdict per claim under the policy (threshold, uncertainty,
contradiction bar; :mod:`guards.verdict.decide`).

Stage 2 — what the policy does with the verdicts (the answer action, the returned text,
the trust floor) — is :func:`guards.action.apply`. Buffered answers, every sentence of a
streamed answer and the CLI all go through the same two stages.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from groundproxy.errors import GroundproxyError, GuardError, GuardTimeoutError
from groundproxy.guards.claims.decompose import decompose
from groundproxy.guards.claims.sentences import Stop, guard_cut
from groundproxy.guards.evidence.conflicts import resolve
from groundproxy.guards.rules.check import RuleResult
from groundproxy.guards.rules.consistency import harmonize
from groundproxy.guards.types import (
    Claim,
    ClaimResult,
    ContextStats,
    Evidence,
    Pair,
    Probs,
    Verifier,
)
from groundproxy.guards.verdict.decide import (
    Bars,
    contradiction_bar,
    decide_claim,
    model_threshold,
    resolve_threshold,
)
from groundproxy.guards.verdict.ladder import (
    NO_LADDER,
    LadderSkip,
    Rungs,
    StrongRung,
    as_rungs,
    budget_end,
    rescore,
    select,
)
from groundproxy.guards.verdict.uncertainty import (
    ErrorModel,
    claim_risk,
    error_ranker,
    margin_only,
    rank_errors,
)
from groundproxy.policies.schema import Policy

EvidenceFn = Callable[[Sequence[Claim]], list[list[Evidence]]]
# A long answer goes to the evidence search and the verifier in slices, ``halt`` checked
# between them; an ordinary answer (a few claims) is one evidence call and one batch.
CLAIM_BATCH = 16
VERIFY_BATCH = 64
STAGES = ("split", "evidence", "rules", "verifier")  # Verified.stage_ms, in order (+ "ladder")


@dataclass(frozen=True)
class ScoredClaim:
    """One claim with its evidence, the verifier's Probs per passage and the rules' result."""

    claim: Claim
    evidence: list[Evidence]
    probs: list[Probs]
    rule: RuleResult
    correction_probs: Probs | None = None  # the rule correction, scored by the verifier
    conflict: str | None = None  # request vs documents (guards.evidence.conflicts)
    strong: StrongRung | None = None  # the ladder's strong rung scored it (guards.verdict.ladder)
    skipped: LadderSkip | None = None  # the ladder wanted the strong rung, did not run it


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
    # the verifier's ranker or calibration of its own errors (ClaimResult.uncertainty;
    # guards.verdict.uncertainty)
    ranker: ErrorModel | None = field(default=None, compare=False, repr=False)


def verify(
    answer: str,
    *,
    question: str | None,
    policy: Policy,
    verifier: Verifier | Rungs,
    evidence_for: EvidenceFn,
    halt: Stop | None = None,
) -> Verified:
    """Stage 1. Backend failures raise :class:`GuardError` (domain errors pass as they are).
    A calibrated threshold in force is the caller's to set (``Verified.threshold``).

    ``verifier``: the one verifier, or the ladder's :class:`Rungs` — the fast rung scores
    every claim, then the strong rung the claims it is unsure of (:func:`climb`).

    Only the first ``policy.max_answer_chars`` (cut at a sentence end) are verified; the
    rest is :attr:`Verified.tail`, returned unverified by :func:`apply`. ``halt`` (true
    once the caller's deadline passed) is checked between sentence windows, claims and
    verifier batches: :class:`GuardTimeoutError` then, so abandoned work stops.
    """
    started = time.perf_counter()
    rungs = as_rungs(verifier)
    verifier = rungs.fast
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
            for j, pair in claim_pairs(claim, ev, rules[i], question):
                pairs.append(pair)
                owners.append((i, j))
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
    found = Verified(
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
    return climb(found, policy, rungs) if rungs.strong is not None else found


def claim_pairs(
    claim: Claim, evidence: Sequence[Evidence], rule: RuleResult, question: str | None
) -> list[tuple[int, Pair]]:
    """A claim's pairs for a verifier, each with its evidence index: (claim, passage) for
    each passage, then (the rule's correction, the passage that gave it) as index -1."""
    out = [
        (j, Pair(claim.text, e.text, question, vectors=e.sentences)) for j, e in enumerate(evidence)
    ]
    if rule.correction is not None and rule.evidence_index is not None:
        source = evidence[rule.evidence_index]
        out.append((-1, Pair(rule.correction, source.text, question, vectors=source.sentences)))
    return out


def climb(verified: Verified, policy: Policy, rungs: Rungs) -> Verified:
    """The ladder's stage (:mod:`guards.verdict.ladder`): the claims the fast rung is unsure of,
    within ``verifier.ladder``'s share and budget, scored again by ``rungs.strong``, whose
    probabilities then stand for them; the unsure claims it did not score are marked. A
    policy that decides by its calibrated threshold (``verifier.threshold: calibrated``)
    keeps that decision: the calibration's guarantee is the fast verifier's, so nothing
    climbs."""
    ladder, strong = policy.verifier.ladder, rungs.strong
    calibrated = policy.verifier.threshold == "calibrated"
    if strong is None or ladder.strong == NO_LADDER or not verified.claims or calibrated:
        return verified
    started = rungs.clock()
    began = time.perf_counter()
    claims = verified.claims
    eligible = [bool(s.evidence) and not s.rule.mismatches for s in claims]
    # unsure by the fast rung's decision margin (the scale ladder.min_uncertainty was chosen
    # on), a calibration of its errors aside (guards.verdict.uncertainty.margin_only)
    margins = decide(dataclasses.replace(verified, ranker=margin_only(verified.ranker)), policy)
    picked, over = select(margins, eligible, ladder.min_uncertainty, ladder.max_share)
    todo = [
        (i, [p for _, p in claim_pairs(claims[i].claim, claims[i].evidence, claims[i].rule,
                                       verified.question)])
        for i in picked
    ]  # fmt: skip
    end = budget_end(rungs, ladder.budget_ms, started)
    scored, skipped = rescore(todo, strong, rungs, end) if todo else ({}, {})
    rung = StrongRung.of(strong) if scored else None  # reads (loads) it only when used
    out = list(claims)
    for i, probs in scored.items():
        s = claims[i]
        n = len(s.evidence)
        corr = probs[n] if len(probs) > n else None
        out[i] = dataclasses.replace(s, probs=probs[:n], correction_probs=corr, strong=rung)
    for i, reason in [*skipped.items(), *((i, "share") for i in over)]:
        out[i] = dataclasses.replace(claims[i], skipped=reason)
    stage_ms = {**verified.stage_ms, "ladder": (time.perf_counter() - began) * 1000.0}
    return dataclasses.replace(verified, claims=out, stage_ms=stage_ms)


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
    """A verdict per claim under ``policy`` (see :mod:`guards.verdict.decide`); a claim the ladder's
    strong rung scored is decided with that verifier's threshold and contradiction bar, and
    its uncertainty is that verifier's (:mod:`guards.verdict.ladder`)."""
    tau = resolve_threshold(policy, verified.threshold, verified.model_threshold)
    bars = _bars(policy, tau, verified.contradiction_min)
    results = []
    for s in verified.claims:
        b = bars if s.strong is None else _strong_bars(policy, s.strong)
        r = decide_claim(s.claim, s.evidence, s.probs, s.rule, b, s.correction_probs)
        if s.evidence:
            r.rung = "fast" if s.strong is None else "strong"
            r.rung_verifier = verified.verifier if s.strong is None else s.strong.name
        r.rung_skipped = s.skipped
        results.append(r)
    for s, r in zip(verified.claims, results, strict=True):
        if s.conflict is not None:
            r.conflict = s.conflict
            r.explanation = f"{r.explanation}; {s.conflict}"
    results = harmonize([s.rule for s in verified.claims], results)
    rank_errors(verified.claims, results, tau, verified.ranker)
    for s, r in zip(verified.claims, results, strict=True):
        if s.strong is not None:
            strong_tau = resolve_threshold(policy, None, s.strong.threshold)
            r.uncertainty = claim_risk(s, r, strong_tau, s.strong.ranker, len(results))
    return results


def _strong_bars(policy: Policy, strong: StrongRung) -> Bars:
    """The bars of a claim the strong rung scored: the policy's threshold (``model``: the
    strong verifier's own; a tenant calibration is the fast rung's and does not apply)."""
    return _bars(
        policy, resolve_threshold(policy, None, strong.threshold), strong.contradiction_min
    )


def _bars(policy: Policy, tau: float, contradiction_min: float) -> Bars:
    """A verifier's threshold and contradiction bar beside the policy's entropy cap and
    missing-value bar."""
    return Bars(
        tau, policy.verifier.max_uncertainty, contradiction_min, policy.rules.missing_support
    )
