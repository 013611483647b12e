"""The guard pipeline: every guarded text — a whole answer, a streamed sentence, a JSON
answer's statements — is one :class:`Piece` that goes through the same stages, in order,
each reading and filling that one record (the structlog-processor idea):

=========  ==========================================================  ====================
stage      what                                                        where
=========  ==========================================================  ====================
admit      the guard queue's place, shed under overload                :meth:`verify`
decompose  the answer's claims                                         guards.verdict.stages.verify
retrieve   evidence: the tenant's index and the request's context      guards.pipeline,
                                                                       proxy.serving.context
verify     each rung of the verifier ladder (fast, then strong)        guards.verdict.ladder,
                                                                       proxy.serving.rungs
judge      the escalated claims' second opinion, merged                :meth:`second_opinion`,
                                                                       proxy.serving.judging
decide     the one choice of an action — the guard's or the judge's    :meth:`decide`:
           failure, the block-and-refuse path included                 guards.action
render     the returned text (rewrite, citations, refusal)             guards.action.render
label      ``judge.labels``: a settled judged answer becomes a label   :meth:`keep_label`
=========  ==========================================================  ====================

Stage 1 (decompose → retrieve → verify) runs in a worker thread inside the policy's latency
budget; what an answer becomes when the guard fails or overruns is decided in
:mod:`guards.action` like every other answer. Streaming (:mod:`proxy.serving.sentence`)
only decides when a piece is ready; a piece differs from a whole answer in its
:class:`guards.action.Segment` (``InAnswer``) (where it stands in its answer) and its ``hold_s``.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, TypedDict, Unpack

import anyio
import structlog

from groundproxy.errors import GroundproxyError, GuardTimeoutError
from groundproxy.guards import (
    Adapter,
    CachingVerifier,
    InAnswer,
    InForce,
    Judged,
    JudgeSummary,
    Verified,
    adapter_sure,
    admission,
    budget_error,
    decide_answer,
    decide_claims,
    disabled_report,
    evidence_fn,
    failure_report,
    overload_error,
    shed_error,
    verified_logprobs,
    verify,
    zero_shot_decides,
)
from groundproxy.guards.types import ClaimResult, EvidenceSource, GuardReport
from groundproxy.models.token_alignment import StoredStates, TokenEmbedder, alignments
from groundproxy.policies.schema import Policy
from groundproxy.proxy.serving.admission import Reservation
from groundproxy.proxy.serving.context import request_context, with_context
from groundproxy.proxy.serving.guard_build import GuardParts
from groundproxy.proxy.serving.judging import JudgeService, audited, keep_label
from groundproxy.proxy.serving.rungs import rungs_for
from groundproxy.proxy.storage.adapters import AdapterCache, shipped_decision
from groundproxy.proxy.storage.judge_labels import JudgeLabels
from groundproxy.proxy.upstream.redact import public_error

log = structlog.get_logger(__name__)

TENANT_INDEX: Literal["tenant"] = "tenant"  # the policy's index, from the index manager
IndexChoice = EvidenceSource | None | Literal["tenant"]
Context = Sequence[tuple[str, str]]  # the request's (role, text) evidence
REPORT_S = 0.05  # the most a failure report spends on claims before the linear splitter


class VerifyOptions(TypedDict, total=False):
    """What a caller may change about stage 1 (:meth:`GuardPipeline.verify_sync`)."""

    index: IndexChoice  # default: the tenant's index (None: request context only)
    threshold: float | None  # default: the calibrated one when the policy says so
    cache: bool  # the verdict cache (default on)
    stop: Callable[[], bool] | None  # true once the caller gave up
    deadline: float | None  # time.monotonic() of the budget's end (request context: top-N)


async def off_loop(
    fn: Callable[..., GuardReport],
    answer: str,
    policy: Policy,
    *args: object,
    budget_spent: bool = False,
) -> GuardReport:
    """``fn(answer, policy, *args, halt=...)`` (a :mod:`guards.action` failure report) in a worker
    thread, its claim splitting cut short after REPORT_S — at once when ``budget_spent``
    (the cheap sentence split: a 20,000-word answer's clause split took 45 ms more): the
    event loop never splits a (possibly huge) answer, and an answer past its budget is not
    held much longer."""
    end = time.monotonic() + (0.0 if budget_spent else REPORT_S)
    call = functools.partial(fn, answer, policy, *args, halt=lambda: time.monotonic() >= end)
    return await anyio.to_thread.run_sync(call)


@dataclass
class Piece:
    """One text through the pipeline: what the caller gives, then what each stage made."""

    answer: str
    question: str | None
    context: Context
    policy: Policy
    logprobs: object = None  # the upstream's, read only by an adapter that reads them
    segment: InAnswer | None = None  # a streamed piece: where it stands in its answer
    hold_s: float | None = None  # a streamed piece waits at most this long for its judge
    reservation: Reservation | None = None  # the request's place in the guard queue
    started: float = 0.0  # time.perf_counter() when stage 1 was asked for
    verified: Verified | None = None  # stage 1's output (None: ``error`` says why not)
    error: Exception | None = None  # the guard failed, overran its budget or was shed
    budget_spent: bool = False  # ``error`` is the budget's: the failure report is cut short
    in_force: InForce | None = None  # the answer-level decision, when the judge looked it up
    judged: Judged | None = None  # the judge's merged verdicts and figures
    guard_s: float = 0.0  # seconds from ``started`` to the decision


class GuardPipeline:
    """The stages (module docstring) over the parts :func:`proxy.serving.guarding.build_guard`
    assembled."""

    def __init__(
        self,
        parts: GuardParts,
        adapters: AdapterCache | None = None,
        judge: JudgeService | None = None,
        labels: JudgeLabels | None = None,
    ) -> None:
        self.parts = parts
        self.adapters = adapters  # tenants' fitted answer-level decisions (guards.adapter.combiner)
        self.judge = judge  # the second opinion on escalated claims (proxy.serving.judging)
        self.labels = labels  # judge.labels: judged answers become the tenant's labels

    async def guard(
        self,
        answer: str,
        question: str | None,
        context: Context,
        policy: Policy,
        logprobs: object = None,
    ) -> GuardReport:
        """One whole answer (buffer mode) through the pipeline (:meth:`run`); budget and
        errors per the policy; ``logprobs``: the upstream's, when it sent them."""
        if not policy.guard:
            self.parts.metrics.observe_unguarded(policy.tenant)
            return await off_loop(disabled_report, answer, policy)
        piece = Piece(answer, question, context, policy, logprobs)
        report = await self.run(piece)
        self.observe(policy, report, time.perf_counter() - piece.started)
        return report

    def observe(self, policy: Policy, report: GuardReport, seconds: float) -> None:
        self.parts.metrics.observe_guard(policy.tenant, report, seconds)

    async def run(self, piece: Piece) -> GuardReport:
        """Every stage for ``piece``: its report. A whole answer whose adapter cannot be
        read gets ``on_guard_error``'s report; a judged one may become a label."""
        piece.started = time.perf_counter()
        if not await self.verify(piece):
            report = await self.decide(piece)
            piece.guard_s = time.perf_counter() - piece.started
            return report
        if piece.segment is not None:
            await self.second_opinion(piece)
            piece.guard_s = time.perf_counter() - piece.started
            return await self.decide(piece)
        try:
            await self.second_opinion(piece)
            report = await self.decide(piece)
        except GroundproxyError as err:  # an unreadable adapter: on_guard_error
            return failure_report(piece.answer, piece.policy, public_error(err))
        await self.keep_label(piece.policy, report, piece.question, piece.context)
        return report

    # --- admit, decompose, retrieve, verify ------------------------------------------------

    def verify_sync(
        self, answer: str, question: str | None, context: Context, policy: Policy,
        **options: Unpack[VerifyOptions],
    ) -> Verified:  # fmt: skip
        """Stage 1 with the tenant's index, verdict cache, calibrated threshold and the
        ladder's rungs, in the caller's thread. ``options`` (:class:`VerifyOptions`):
        ``index`` replaces the tenant's (eval's temporary index, or None: request context
        only); ``threshold`` the calibrated one; ``cache`` False skips the verdict cache;
        ``stop`` ends the work at verify's next check. Failures raise (GroundproxyError)."""
        index = options.get("index", TENANT_INDEX)
        threshold, cache = options.get("threshold"), options.get("cache", True)
        stop, deadline = options.get("stop"), options.get("deadline")
        parts = self.parts
        verifier = parts.verifier(policy.verifier.model)
        if threshold is None:  # verifier.threshold: calibrated → the tenant's file
            threshold = parts.calibrations.threshold_for(policy, verifier.name)
        cached = CachingVerifier(verifier, parts.verdict_cache, policy.tenant)
        rungs = rungs_for(parts, policy, cached if cache else verifier, cache, deadline)
        index_now = self._index(policy, index)
        request = request_context(parts, context, policy, index_now, (stop, deadline))
        evidence = evidence_fn(request, policy, parts.embedder, index_now, question)
        parts.batching.enter()
        try:
            verified = verify(
                answer,
                question=question,
                policy=policy,
                verifier=rungs,
                evidence_for=evidence,
                halt=stop,
            )
        finally:
            parts.batching.leave()
        verified = dataclasses.replace(verified, threshold=threshold)
        if cache:
            stats = parts.verdict_cache.stats()
            log.info(
                "verdict_cache",
                hits=cached.hits,
                misses=cached.misses,
                hit_rate=stats["hit_rate"],
                size=stats["size"],
            )
        return with_context(verified, request)

    def _index(self, policy: Policy, index: IndexChoice) -> EvidenceSource | None:
        if index != TENANT_INDEX:
            return index
        found = self.parts.indexes.get(policy.index_name)
        return found if found.count > 0 else None

    def admit(self, policy: Policy, chars: int | None = None) -> tuple[bool, float]:
        """Admission control (:func:`guards.answer.failures.admission`) from the guard queue's
        estimate for a guard over ``chars`` characters (None: a whole request's, before its
        upstream call): (run the guard?, estimated wait in s). ``on_overload: reject`` past
        the budget raises OverloadedError (429 + retry-after) — callable before the upstream
        call, so a rejected request costs nothing upstream."""
        wait_s, guard_s = self.parts.queue.estimate(chars, policy.tenant)
        decision = admission(policy, wait_s, guard_s) if policy.guard else "run"
        if decision == "reject":
            self.parts.metrics.observe_overload(policy.tenant, "rejected")
            raise overload_error(policy, wait_s)
        return decision == "run", wait_s

    async def verify(self, piece: Piece) -> bool:
        """Stage 1 in a worker thread, after the queue (:mod:`proxy.serving.admission`),
        within the policy's latency budget: True with ``piece.verified``; False with
        ``piece.error`` when shed, on a failure or past the budget."""
        policy, answer = piece.policy, piece.answer
        budget_s = policy.latency_budget_ms / 1000.0
        run, wait_s = self.admit(policy, len(answer))
        if not run:
            self.parts.metrics.observe_overload(policy.tenant, "shed")
            piece.error = shed_error(policy, wait_s)
            return False
        queue = self.parts.queue
        ticket = queue.enter(budget_s, len(answer), piece.reservation, policy.tenant)
        stops: VerifyOptions = {"stop": ticket.expired, "deadline": ticket.deadline}
        context = list(piece.context)
        call = functools.partial(self.verify_sync, answer, piece.question, context, policy, **stops)
        try:
            with anyio.fail_after(budget_s):
                piece.verified = await queue.run(call, ticket)
            return True
        except (TimeoutError, GuardTimeoutError):
            log.warning("guard_budget_exceeded", budget_ms=policy.latency_budget_ms)
            self.parts.metrics.observe_overload(policy.tenant, "overrun")
            piece.error, piece.budget_spent = budget_error(policy), True
        except Exception as err:
            log.warning(
                "guard_failed",
                error_type=type(err).__name__,
                error=err.message if isinstance(err, GroundproxyError) else str(err)[:200],
            )
            piece.error = public_error(err)
        return False

    # --- judge ---------------------------------------------------------------------------

    async def second_opinion(self, piece: Piece) -> None:
        """The judge stage: ``piece.judged`` stays None when the policy escalates nothing;
        else the judged verdicts, within what the latency budget leaves (and ``hold_s``)."""
        policy, verified = piece.policy, piece.verified
        if self.judge is None or policy.judge.escalate == "none" or verified is None:
            return
        call = functools.partial(self._candidates, piece, verified)
        results, decided_by = await anyio.to_thread.run_sync(call)
        audit = bool(decided_by) and audited(policy, results)
        if decided_by and not audit:
            model = policy.judge.model or policy.upstream.model
            piece.judged = Judged(results, JudgeSummary(model=model, decided_by=decided_by))
            return
        left = policy.latency_budget_ms / 1000.0 - (time.perf_counter() - piece.started)
        if piece.hold_s is not None:
            left = min(left, piece.hold_s)
        if not audit:
            piece.judged = await self.judge.judge(verified, results, policy, left)
            return
        every_claim = policy.judge.model_copy(update={"escalate": "all"})
        every = policy.model_copy(update={"judge": every_claim})
        judged = await self.judge.judge(verified, results, every, left)
        judged.summary = dataclasses.replace(judged.summary, audit=True)
        piece.judged = judged

    def _candidates(self, piece: Piece, verified: Verified) -> tuple[list[ClaimResult], str]:
        """The verifier's verdicts, and who decides the answer alone so that nothing is
        escalated: "adapter" (the decision in force — a tenant adapter or the shipped one —
        is sure of it), "zero_shot" (the tenant's zero-shot record proves zero-shot, and it
        is sure of every claim), or "" (escalate as the policy says)."""
        policy = piece.policy
        results = decide_claims(verified, policy)
        found = self.in_force(verified, policy, piece.logprobs)
        if found is None:
            proof = None
            if self.adapters is not None and policy.verifier.decision == "every_claim":
                proof = self.adapters.zero_shot_for(policy.tenant, verified.verifier)
            return results, "zero_shot" if proof and zero_shot_decides(proof, results) else ""
        piece.in_force = found
        sure = adapter_sure(found.adapter, verified, results, found.alignment, found.logprobs)
        return results, "adapter" if sure else ""

    # --- decide (and render) -------------------------------------------------------------

    async def decide(self, piece: Piece) -> GuardReport:
        """The action, by :mod:`guards.action` alone: the failure report when stage 1 did
        not verify (``on_guard_error``); a streamed piece's, on the loop (no adapter
        decides a piece); a whole answer's in a worker thread (an adapter's token
        alignment may run the embedder)."""
        if piece.verified is None:
            error = piece.error if piece.error is not None else RuntimeError("not verified")
            budget_spent = piece.budget_spent
            return await off_loop(
                failure_report, piece.answer, piece.policy, error, budget_spent=budget_spent
            )
        if piece.segment is not None:
            return decide_answer(piece.verified, piece.policy, piece.judged, segment=piece.segment)
        call = functools.partial(
            self.finish, piece.verified, piece.policy, piece.logprobs, piece.judged, piece.in_force
        )
        return await anyio.to_thread.run_sync(call)

    def finish(
        self, verified: Verified, policy: Policy, logprobs: object = None,
        judged: Judged | None = None, in_force: InForce | None = None,
    ) -> GuardReport:  # fmt: skip
        """Stage 2 of a whole answer (:func:`guards.action.decide_answer`) with the
        answer-level decision in force (``in_force``, else looked up: :meth:`in_force`);
        the judge's verdicts, when it judged a claim, are final. ``logprobs``: the choice's
        ``logprobs`` as the upstream sent them (or a label carried them)."""
        if in_force is None and not (judged is not None and judged.summary.escalated):
            in_force = self.in_force(verified, policy, logprobs)
        return decide_answer(verified, policy, judged, in_force)

    def decision(self, policy: Policy, verifier: str) -> Adapter | None:
        """The answer-level decision in force: the tenant's adapter (hot-reloaded), else —
        policy ``verifier.decision: learned`` — the verifier's shipped answer combiner."""
        found = None
        if self.adapters is not None:
            found = self.adapters.for_verifier(policy.tenant, verifier)
        if found is None and policy.verifier.decision == "learned":
            found = shipped_decision(verifier)
        return found

    def in_force(self, verified: Verified, policy: Policy, logprobs: object) -> InForce | None:
        """:meth:`decision` with what it reads (token alignment, the claims' logprobs)."""
        found = self.decision(policy, verified.verifier)
        if found is None:
            return None
        alignment = self.alignment(verified) if found.uses_tokens else None
        sure = verified_logprobs(verified, logprobs) if found.uses_logprobs else None
        return InForce(found, alignment, sure)

    def alignment(self, verified: Verified) -> list[tuple[float, float, float]] | None:
        """Each claim's token alignment with its evidence (models.token_alignment); None
        when the embedder gives no token states. An adapter reading it is in force: from
        now on the embedder keeps the token states of the short texts it embeds (claims,
        context sentences), so the next answers' alignment runs no model pass of its own."""
        embedder = self.parts.token_embedder  # unwrapped: the batching wrapper has no states
        if not isinstance(embedder, TokenEmbedder):
            return None
        embedder.keep_token_states = True
        claims = [(s.claim.text, [e.text for e in s.evidence]) for s in verified.claims]
        stores: dict[int, StoredStates] = {}
        for e in (e for s in verified.claims for e in s.evidence):
            if isinstance(e.sentences, StoredStates):  # the index's, from ingest
                stores.setdefault(id(e.sentences), e.sentences)
        return alignments(embedder, claims, verified.question, list(stores.values()))

    # --- label -----------------------------------------------------------------------------

    async def keep_label(
        self, policy: Policy, report: GuardReport, question: str | None, context: Context
    ) -> None:
        """``judge.labels``: a settled judged answer (a whole one, or a streamed one at its
        end) becomes a label (:func:`proxy.serving.judging.keep_label`)."""
        await keep_label(self.labels, policy, report, question, context)
