"""Runs the guard's two stages (:mod:`guards.stages`, :mod:`guards.action`) for one answer off
the event loop, inside the policy's latency budget. What an answer becomes when the guard
fails or overruns is decided in :mod:`guards.action`; this module only catches and times.
:func:`build_guard` is the one place a guard is wired (serve, check, eval, calibrate, benches).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Literal, TypedDict, Unpack

import anyio
import structlog

from groundproxy.errors import GroundproxyError, GuardTimeoutError
from groundproxy.guards import (
    Adapter,
    CachingVerifier,
    Judged,
    Verified,
    admission,
    apply,
    apply_adapted,
    budget_error,
    disabled_report,
    evidence_fn,
    failure_report,
    overload_error,
    settle,
    shed_error,
    verified_logprobs,
    verify,
)
from groundproxy.guards.types import Embedder, EvidenceSource, GuardReport, Verifier
from groundproxy.models.token_alignment import StoredStates, TokenEmbedder, alignments
from groundproxy.policies.schema import Policy, local_policy
from groundproxy.proxy.metrics import Metrics
from groundproxy.proxy.serving.admission import Held, Reservation, take_place
from groundproxy.proxy.serving.context import request_context, with_context
from groundproxy.proxy.serving.guard_build import GuardParts, build_parts
from groundproxy.proxy.serving.judging import JudgeService, keep_label, rate_limiter, second_opinion
from groundproxy.proxy.serving.rungs import Meters, rungs_for, warm_strong
from groundproxy.proxy.settings import Settings
from groundproxy.proxy.storage.adapters import AdapterCache, shipped_decision
from groundproxy.proxy.storage.backends import EmbeddedStorage, GuardStorage, LabelStorage
from groundproxy.proxy.storage.judge_labels import JudgeLabels
from groundproxy.proxy.upstream.judge_client import UpstreamJudge
from groundproxy.proxy.upstream.redact import public_error

log = structlog.get_logger(__name__)

__all__ = ["GuardService", "Held", "VerifyOptions", "build_guard", "off_loop"]

TENANT_INDEX: Literal["tenant"] = "tenant"  # the policy's index, from the index manager
IndexChoice = EvidenceSource | None | Literal["tenant"]
Context = Sequence[tuple[str, str]]  # the request's (role, text) evidence


class VerifyOptions(TypedDict, total=False):
    """What a caller may change about stage 1 (:meth:`GuardService.verify_sync`)."""

    index: IndexChoice  # default: the tenant's index (None: request context only)
    threshold: float | None  # default: the calibrated one when the policy says so
    cache: bool  # the verdict cache (default on)
    stop: Callable[[], bool] | None  # true once the caller gave up
    deadline: float | None  # time.monotonic() of the budget's end (request context: top-N)


REPORT_S = 0.05  # the most a failure report spends on claims before the linear splitter


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


class GuardService:
    """Guards answers with the parts :func:`build_guard` made."""

    def __init__(
        self,
        parts: GuardParts,
        adapters: AdapterCache | None = None,
        judge: JudgeService | None = None,
        labels: JudgeLabels | None = None,
    ) -> None:
        self.parts = parts
        self.adapters = adapters  # tenants' fitted answer-level decisions (guards.adapter)
        self.judge = judge  # the second opinion on escalated claims (proxy.serving.judging)
        self.labels = labels  # judge.labels: judged answers become the tenant's labels
        self.meters = Meters()  # the ladder's strong verifiers' cost (proxy.serving.rungs)

    def __enter__(self) -> GuardService:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def warm_up(self, verifier_names: Sequence[str], strong: Sequence[str] = ()) -> list[str]:
        """Load the policies' verifiers (and their ladders' ``strong`` ones) up front; a bad
        name is reported, not fatal (the tenants using it get their policy's
        ``on_guard_error`` behaviour; a bad strong one, fast verdicts marked ``error``)."""
        errors = warm_strong(self, strong)
        registry = self.parts.verifiers
        for name in verifier_names:
            try:
                registry.get(name)
            except GroundproxyError as exc:
                errors.append(exc.message)
                log.error("verifier_not_loaded", verifier=name, error=exc.message)
        for name in verifier_names:
            if name in registry.loaded():  # one full guard: no lazy-import cost later
                self.guard_sync(
                    "The warranty lasts 12 months. It covers 3 parts made by Acme in Paris.",
                    "How long is the warranty?",
                    [("system", "The warranty lasts 12 months from purchase.")],
                    local_policy("warmup", verifier={"model": name, "ladder": {"strong": "none"}}),
                    index=None,
                    cache=False,
                )
        return errors

    def verifier(self, name: str) -> Verifier:
        """The verifier ``name``, micro-batched across requests when batching is on."""
        return self.parts.batching.verifier(name, self.parts.verifiers.get(name))

    def close(self) -> None:
        """Stop the micro-batching workers (calls still queued fail as guard errors)."""
        self.parts.batching.close()

    def _index(self, policy: Policy, index: IndexChoice) -> EvidenceSource | None:
        if index != TENANT_INDEX:
            return index
        found = self.parts.indexes.get(policy.index_name)
        return found if found.count > 0 else None

    def verify_sync(
        self, answer: str, question: str | None, context: Context, policy: Policy,
        **options: Unpack[VerifyOptions],
    ) -> Verified:  # fmt: skip
        """Stage 1 with the tenant's index, verdict cache and calibrated threshold.

        ``options`` (:class:`VerifyOptions`): ``index`` replaces the tenant's (eval's
        temporary index, or None: request context only); ``threshold`` the calibrated one;
        ``cache`` False skips the verdict cache; ``stop`` (true once the caller gave up)
        ends the work at verify's next check. Failures raise (GroundproxyError).
        """
        index = options.get("index", TENANT_INDEX)
        threshold = options.get("threshold")
        cache = options.get("cache", True)
        stop, deadline = options.get("stop"), options.get("deadline")
        parts = self.parts
        verifier = self.verifier(policy.verifier.model)
        if threshold is None:  # verifier.threshold: calibrated → the tenant's file
            threshold = parts.calibrations.threshold_for(policy, verifier.name)
        cached = CachingVerifier(verifier, parts.verdict_cache, policy.tenant)
        rungs = rungs_for(self, policy, cached if cache else verifier, cache, deadline)
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

    def guard_sync(
        self, answer: str, question: str | None, context: Context, policy: Policy,
        logprobs: object = None, **options: Unpack[VerifyOptions],
    ) -> GuardReport:  # fmt: skip
        """Both stages, in the caller's thread (the CLI, eval, calibrate, benchmarks);
        ``options`` as :meth:`verify_sync`'s, ``logprobs`` as :meth:`finish`'s."""
        verified = self.verify_sync(answer, question, context, policy, **options)
        return self.finish(verified, policy, logprobs)

    def decision(self, policy: Policy, verifier: str) -> Adapter | None:
        """The answer-level decision in force: the tenant's adapter (hot-reloaded), else —
        policy ``verifier.decision: learned`` — the verifier's shipped answer combiner."""
        found = None
        if self.adapters is not None:
            found = self.adapters.for_verifier(policy.tenant, verifier)
        if found is None and policy.verifier.decision == "learned":
            found = shipped_decision(verifier)
        return found

    def finish(
        self, verified: Verified, policy: Policy, logprobs: object = None,
        judged: Judged | None = None,
    ) -> GuardReport:  # fmt: skip
        """Stage 2, with the answer-level decision in force (:meth:`decision`); the judge's
        verdicts, when it judged a claim, are final (:func:`guards.judge_merge.settle`).
        ``logprobs``: the choice's ``logprobs`` as the upstream sent them (or a label
        carried them), read only when the adapter reads them (:func:`guards.verified_logprobs`)."""
        if judged is not None and judged.summary.escalated:
            return settle(verified, policy, judged.results, judged.summary)
        found = self.decision(policy, verified.verifier)
        if found is None:
            report = apply(verified, policy)
        else:
            alignment = self.alignment(verified) if found.uses_tokens else None
            sure = verified_logprobs(verified, logprobs) if found.uses_logprobs else None
            report = apply_adapted(verified, policy, found, alignment, sure)
        if judged is not None:
            report.judge = judged.summary.as_dict()
        return report

    def decides_per_answer(self, policy: Policy) -> bool:
        """Is an answer-level decision in force (the tenant's adapter, or ``verifier.decision:
        learned``)? It needs the whole answer, so ``stream: sentence`` streams are guarded in
        buffer mode instead (proxy.routes.chat)."""
        if policy.verifier.decision == "learned":
            return True
        if self.adapters is None:
            return False
        try:
            return self.adapters.get(policy.tenant) is not None
        except GroundproxyError:  # unreadable: buffer mode, where on_guard_error decides
            return True

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

    def admit(self, policy: Policy, chars: int | None = None) -> tuple[bool, float]:
        """Admission control (:func:`guards.failures.admission`) from the guard queue's
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

    @contextlib.asynccontextmanager
    async def arrival(self, policy: Policy) -> AsyncIterator[Held]:
        """A guarded request's admission, before its upstream call: ``on_overload: reject``
        past the budget raises OverloadedError (429, :meth:`admit`); ``queue`` holds the
        request until a guard starting now would end within the budget, at most
        ``max_queue_ms`` (:meth:`proxy.serving.admission.GuardQueue.hold`); the others reserve a
        place without waiting (:meth:`proxy.serving.admission.GuardQueue.reserve`). The place is
        given back when the request ends without its guard having taken it over — or, for a
        stream handed on with :meth:`Held.detach`, when the stream ends."""
        if not policy.guard:
            yield Held(None)
            return
        self.admit(policy)  # on_overload: reject → 429 here, before the upstream is called
        held = Held(await take_place(self.parts.queue, self.parts.metrics, policy))
        try:
            yield held
        finally:
            if not held.detached:
                held.release()

    async def check(
        self,
        answer: str,
        question: str | None,
        context: Sequence[tuple[str, str]],
        policy: Policy,
        reservation: Reservation | None = None,
    ) -> Verified | GuardReport:
        """Stage 1 in a worker thread (after the queue, :mod:`proxy.serving.admission`) within the
        policy's latency budget; when shed, on a failure or past the budget, the report
        :mod:`guards.action` decides instead (``on_guard_error: block`` refuses).
        ``reservation``: the place of the request this guard belongs to (a stream's
        segments pass it; else the one the request's context made is taken)."""
        budget_s = policy.latency_budget_ms / 1000.0
        run, wait_s = self.admit(policy, len(answer))
        if not run:
            self.parts.metrics.observe_overload(policy.tenant, "shed")
            return await off_loop(failure_report, answer, policy, shed_error(policy, wait_s))
        queue = self.parts.queue
        ticket = queue.enter(budget_s, len(answer), reservation, policy.tenant)
        stops: VerifyOptions = {"stop": ticket.expired, "deadline": ticket.deadline}
        call = functools.partial(self.verify_sync, answer, question, list(context), policy, **stops)
        try:
            with anyio.fail_after(budget_s):
                return await queue.run(call, ticket)
        except (TimeoutError, GuardTimeoutError):
            log.warning("guard_budget_exceeded", budget_ms=policy.latency_budget_ms)
            self.parts.metrics.observe_overload(policy.tenant, "overrun")
            error = budget_error(policy)
            return await off_loop(failure_report, answer, policy, error, budget_spent=True)
        except Exception as err:
            log.warning(
                "guard_failed",
                error_type=type(err).__name__,
                error=err.message if isinstance(err, GroundproxyError) else str(err)[:200],
            )
            return await off_loop(failure_report, answer, policy, public_error(err))

    async def guard(
        self,
        answer: str,
        question: str | None,
        context: Sequence[tuple[str, str]],
        policy: Policy,
        logprobs: object = None,
    ) -> GuardReport:
        """One whole answer (buffer mode): both stages, budget and errors per the policy;
        ``logprobs``: the upstream's, when it sent them (:meth:`finish`)."""
        if not policy.guard:
            self.parts.metrics.observe_unguarded(policy.tenant)
            return await off_loop(disabled_report, answer, policy)
        started = time.perf_counter()
        checked = await self.check(answer, question, context, policy)
        if isinstance(checked, Verified):
            try:  # in a worker thread: an adapter's token alignment may run the embedder
                judged = await second_opinion(self, checked, policy, started, logprobs)
                call = functools.partial(self.finish, checked, policy, logprobs, judged)
                report = await anyio.to_thread.run_sync(call)
            except GroundproxyError as err:  # an unreadable adapter: on_guard_error
                report = failure_report(answer, policy, public_error(err))
            else:
                await keep_label(self, policy, report, question, context)
        else:
            report = checked
        self.observe(policy, report, time.perf_counter() - started)
        return report

    def observe(self, policy: Policy, report: GuardReport, seconds: float) -> None:
        self.parts.metrics.observe_guard(policy.tenant, report, seconds)


def build_guard(
    settings: Settings,
    *,
    embedder: Embedder | None = None,
    metrics: Metrics | None = None,
    models_dir: Path | None = None,
    storage: GuardStorage | None = None,
    labels: LabelStorage | None = None,
) -> GuardService:
    """The guard for ``settings`` (see :func:`proxy.serving.guard_build.build_parts`); indexes,
    calibration and adapters from ``storage`` (default: the files under ``settings.data``,
    whose feedback then takes ``judge.labels``' labels unless ``labels`` is given)."""
    if storage is None:
        storage = files = EmbeddedStorage(settings.data)
        labels = labels or files
    parts = build_parts(
        settings, embedder=embedder, metrics=metrics, models_dir=models_dir, storage=storage
    )
    limiter = rate_limiter(settings.data, settings.workers)  # shared by --workers N
    judge = JudgeService(UpstreamJudge(), parts.metrics, limiter=limiter)
    sink = JudgeLabels(labels, parts.metrics) if labels is not None else None
    return GuardService(parts, storage.adapters(), judge, labels=sink)
