"""The judge's call and merge for the pipeline's judge stage (:mod:`proxy.serving.pipeline`;
:mod:`guards.judge.opinion` holds the logic, :mod:`guards.action` the decision that follows).

:class:`JudgeService` takes stage 1's output and the verifier's verdicts, escalates the
claims the policy's ``judge`` block picks, answers what it can from its cache, makes ONE
judge call for the rest (inside the time left: ``judge.timeout_ms`` and the guard's
latency budget, or a sentence's ``max_hold_ms``), and returns the merged verdicts and the
answer's judge figures. Never silent: every escalated claim ends judged or skipped with a
reason (``timeout``, ``error``, ``bad_json``, ``rate_limit``, ``budget``, ``unquoted``);
the figures go to the body, the ``x-groundproxy-judge`` header, metrics and traces.

The cache (:class:`JudgeCache`) is bounded and keyed per tenant by (claim, evidence
hashes, judge model, prompt version, question); the rate limit is per tenant
(``judge.max_calls_per_minute`` calls in any 60 s, shared by ``--workers N``); each
request draws on one :class:`JudgeAllowance` (calls, time, no second wait after a
timeout); the judge's ``reason`` is scrubbed (:mod:`proxy.serving.judge_limits`).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence

import anyio
import structlog

from groundproxy.errors import RateLimitError, UpstreamTimeoutError
from groundproxy.guards import (
    BadJudgement,
    Escalated,
    Judged,
    JudgeSummary,
    JudgeVerdict,
    Outcome,
    SkipReason,
    Verified,
    cache_key,
    checked,
    escalation,
    judge_messages,
    judged_label,
    merge,
    parse_judgement,
    response_format,
    summarize,
)
from groundproxy.guards.types import ClaimResult, GuardReport
from groundproxy.policies.schema import Policy
from groundproxy.proxy.metrics import Metrics
from groundproxy.proxy.serving.judge_limits import (
    JudgeAllowance,
    RateLimiter,
    SharedRateLimiter,
    current_allowance,
    judge_allowance,
    rate_limiter,
    scrubbed,
)
from groundproxy.proxy.storage.feedback import CALLER, Labelled
from groundproxy.proxy.storage.judge_labels import JudgeLabels, label_context
from groundproxy.proxy.upstream.judge_client import JudgeCall, JudgeCaller, judge_upstream

log = structlog.get_logger(__name__)

CACHE_ENTRIES = 20_000


class JudgeCache:
    """Bounded LRU of judged verdicts (only verdicts that counted), tenant-scoped keys."""

    def __init__(self, max_entries: int = CACHE_ENTRIES) -> None:
        self.max_entries = max_entries
        self._data: OrderedDict[tuple[str, str], JudgeVerdict] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: tuple[str, str]) -> JudgeVerdict | None:
        with self._lock:
            found = self._data.get(key)
            if found is None:
                self.misses += 1
            else:
                self.hits += 1
                self._data.move_to_end(key)
            return found

    def put(self, key: tuple[str, str], verdict: JudgeVerdict) -> None:
        with self._lock:
            self._data[key] = verdict
            self._data.move_to_end(key)
            while len(self._data) > self.max_entries:
                self._data.popitem(last=False)

    def stats(self) -> dict[str, float]:
        with self._lock:
            total = self.hits + self.misses
            return {
                "hits": self.hits, "misses": self.misses, "size": len(self._data),
                "hit_rate": self.hits / total if total else 0.0, "max_entries": self.max_entries,
            }  # fmt: skip


__all__ = [
    "JudgeAllowance", "JudgeCache", "JudgeService", "RateLimiter", "SharedRateLimiter",
    "audited", "current_allowance", "judge_allowance", "keep_label", "rate_limiter",
]  # fmt: skip


def _reason(exc: Exception) -> SkipReason:
    if isinstance(exc, RateLimitError):
        return "rate_limit"
    if isinstance(exc, UpstreamTimeoutError | TimeoutError):
        return "timeout"
    return "error"


class JudgeService:
    """Escalation, cache, rate limit and the judge call (see the module docstring)."""

    def __init__(
        self,
        caller: JudgeCaller,
        metrics: Metrics | None = None,
        cache: JudgeCache | None = None,
        limiter: RateLimiter | None = None,
    ) -> None:
        self.caller = caller
        self.metrics = metrics
        self.cache = cache if cache is not None else JudgeCache()
        self.limiter = limiter if limiter is not None else RateLimiter()

    async def judge(
        self,
        verified: Verified,
        results: list[ClaimResult],
        policy: Policy,
        time_left_s: float,
    ) -> Judged:
        """Escalate, judge and merge one answer (or one streamed piece) within
        ``time_left_s`` (what the latency budget, or a sentence's hold, leaves)."""
        model = policy.judge.model or policy.upstream.model
        evidence = [s.evidence for s in verified.claims]
        items = escalation(results, evidence, policy.judge)
        if not items:
            return Judged(results, JudgeSummary(model=model))
        started = time.perf_counter()
        outcomes: dict[int, Outcome] = {}
        todo: list[Escalated] = []
        for it in items:
            hit = self.cache.get(cache_key(policy.tenant, model, it, verified.question))
            if hit is not None:
                outcomes[it.index] = Outcome(verdict=hit, cached=True)
            else:
                todo.append(it)
        if todo:
            outcomes.update(await self._call(todo, verified.question, policy, model, time_left_s))
        ms = (time.perf_counter() - started) * 1000.0
        merged = merge(results, evidence, outcomes, model)
        summary = summarize(merged, model, ms)
        self._observe(policy.tenant, summary, len(todo), len(items) - len(todo))
        return Judged(merged, summary)

    async def _call(
        self,
        todo: Sequence[Escalated],
        question: str | None,
        policy: Policy,
        model: str,
        time_left_s: float,
    ) -> dict[int, Outcome]:
        """One judge call for ``todo`` (renumbered c1… in answer order): each claim's
        outcome; accepted verdicts go to the cache."""
        sent = [dataclasses.replace(it, id=f"c{n}") for n, it in enumerate(todo, 1)]
        timeout_s = policy.judge.timeout_ms / 1000.0
        allowance = current_allowance(policy)
        if time_left_s <= 0.0 or allowance.spent():
            return _skip(sent, "budget")
        if not self.limiter.allow(policy.tenant, policy.judge.max_calls_per_minute):
            return _skip(sent, "rate_limit")
        allowance.calls -= 1
        window = min(timeout_s, time_left_s, allowance.seconds)
        call = JudgeCall(
            judge_upstream(policy, window), model, judge_messages(sent, question),
            response_format(), claims=len(sent),
        )  # fmt: skip
        started = time.perf_counter()
        try:
            with anyio.fail_after(window):
                content = await self.caller.judge(call)
        except Exception as exc:
            reason = _reason(exc)
            if reason == "timeout" and window < timeout_s:
                reason = "budget"  # the guard's time ran out before the judge's own timeout
            allowance.timed_out = allowance.timed_out or reason in ("timeout", "budget")
            log.warning("judge_failed", reason=reason, error_type=type(exc).__name__)
            return _skip(sent, reason, (time.perf_counter() - started) * 1000.0)
        finally:
            allowance.seconds -= time.perf_counter() - started
        ms = (time.perf_counter() - started) * 1000.0
        try:
            parsed = parse_judgement(content, sent)
        except BadJudgement as exc:
            log.warning("judge_bad_json", error=str(exc)[:200])
            return _skip(sent, "bad_json", ms)
        verdicts = {k: dataclasses.replace(v, reason=scrubbed(v.reason)) for k, v in parsed.items()}
        out: dict[int, Outcome] = {}
        for it in sent:
            o = dataclasses.replace(checked(it, verdicts.get(it.id)), ms=ms)
            if o.verdict is not None:
                self.cache.put(cache_key(policy.tenant, model, it, question), o.verdict)
            out[it.index] = o
        return out

    def _observe(self, tenant: str, summary: JudgeSummary, called: int, cached: int) -> None:
        if self.metrics is not None:
            self.metrics.observe_judge(tenant, summary, called > 0, cached)


def _skip(items: Sequence[Escalated], reason: SkipReason, ms: float = 0.0) -> dict[int, Outcome]:
    return {it.index: Outcome(skipped=reason, ms=ms) for it in items}


def audited(policy: Policy, results: Sequence[ClaimResult]) -> bool:
    """Is this answer, which a decision would decide alone, in the ``judge.audit`` share?
    Picked by a hash of the tenant and the claims (the same answer is picked every time)."""
    share = policy.judge.audit
    if share <= 0.0:
        return False
    text = "\n".join([policy.tenant, *(r.claim.text for r in results)])
    draw = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big") / 2.0**64
    return draw < share


async def keep_label(
    labels: JudgeLabels | None,
    policy: Policy,
    report: GuardReport,
    question: str | None,
    context: Sequence[tuple[str, str]],
) -> None:
    """``judge.labels``: a judged answer the judge settled (:func:`judged_label`) becomes a
    label in the tenant's feedback store, for ``calibrate --fit`` (not again when every
    verdict came from the cache), within the tenant's ``judge.max_label_store_bytes``; its
    context is the evidence its claims cite (:mod:`proxy.storage.judge_labels`), not the
    request's whole ``context``. A failure to store it is logged, never the client's
    problem."""
    if not policy.judge.labels or labels is None or report.judge is None:
        return
    label = judged_label(report.claims)
    judged = [r.judge for r in report.claims if r.judge is not None and "verdict" in r.judge]
    if label is None or all(j.get("cached") for j in judged):
        return  # unsettled, or every verdict came from the cache: labelled before
    claims = [
        {"text": r.claim.text, "label": "supported" if r.verdict == "supported" else "hallucinated"}
        for r in report.claims
        if r.judge is not None and "verdict" in r.judge
    ]
    del context  # the request's whole context is not stored (the cited evidence is)
    item = Labelled(
        answer=report.original, label_hallucinated=label, question=question,
        context=label_context(report.claims), claims=claims or None,
        source="judge", key=CALLER.get(),  # caused by a client key: label_count caps it
    )  # fmt: skip
    keep = functools.partial(labels.keep, policy.tenant, item, policy.judge.max_label_store_bytes)
    await anyio.to_thread.run_sync(keep)
