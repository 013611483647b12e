"""The one guarded call every guarded endpoint goes through.

A request is described once, by a :class:`Scope` (tenant policy, request id, step id, the
client's model, its trace). :meth:`GuardedCall.run` then takes it through, in order:

1. **arrival and admission** — before the upstream is called: ``on_overload: reject`` past
   the budget answers 429; ``queue`` holds the request until its guard is predicted to fit
   (:meth:`proxy.serving.guarding.GuardService.arrival`, :mod:`proxy.serving.admission`);
2. **trace** — the trace headers are validated (400 before any upstream cost) and the
   request's place in its trace is settled (:mod:`proxy.serving.traces`);
3. **the work, raced against the client** — the endpoint's own work (upstream call and
   guard, or a stream opened) is cancelled when the client disconnects, and the answer is
   499 (:mod:`proxy.serving.disconnect`);

and, for each answer text, :meth:`GuardedCall.guard_text` (both guard stages within the
policy's budget, :mod:`guards.answer.failures` deciding on failure) and :meth:`GuardedCall.conclude`
(the trace node recorded, the ``x-groundproxy-*`` headers, one access log line).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import structlog
from fastapi.responses import Response
from starlette.requests import Request

from groundproxy.guards.types import GuardReport
from groundproxy.policies.loader import LoadedPolicy
from groundproxy.policies.schema import Policy
from groundproxy.proxy.metrics import Metrics
from groundproxy.proxy.serving.clock import Clock
from groundproxy.proxy.serving.disconnect import ClientDisconnected, cancel_on_disconnect
from groundproxy.proxy.serving.guarding import GuardService, Held
from groundproxy.proxy.serving.headers import Mode, response_headers
from groundproxy.proxy.serving.judging import JudgeAllowance, judge_allowance
from groundproxy.proxy.serving.traces import StepNode, TraceRequest, record_step, trace_for
from groundproxy.proxy.storage.sqlite_traces import TraceStores
from groundproxy.proxy.upstream.types import Upstream

log = structlog.get_logger(__name__)
R = TypeVar("R")


def new_step_id() -> str:
    return f"st_{uuid.uuid4().hex[:16]}"


@dataclass
class Asked:
    """What an answer replies to: the question and the request's own evidence."""

    question: str | None
    context: Sequence[tuple[str, str]]  # (role, text) of system / user / tool messages …


@dataclass
class Scope:
    """One request as every serving object sees it (request-scoped data in one place)."""

    request: Request
    loaded: LoadedPolicy
    request_id: str
    model: str = ""  # the client's model name (traces, the inspector)
    step_id: str = field(default_factory=new_step_id)
    trace: TraceRequest | None = None  # settled by GuardedCall.run

    @property
    def policy(self) -> Policy:
        return self.loaded.policy

    @property
    def policy_id(self) -> str:
        return self.loaded.policy_id


class GuardedCall:
    """The guarded call (module docstring) over the app's guard, traces and metrics."""

    def __init__(
        self, guard: GuardService, traces: TraceStores, metrics: Metrics, clock: Clock
    ) -> None:
        self.guard = guard
        self.traces = traces
        self.metrics = metrics
        self.clock = clock

    async def run(
        self, scope: Scope, work: Callable[[Held], Awaitable[R]], *, guarded: bool = True
    ) -> R | Response:
        """Steps 1-3 of the module docstring; ``work`` gets the request's place in the
        guard queue (a stream takes it over with :meth:`Held.detach`). A client gone
        before the work ended: 499, the work cancelled. ``guarded=False`` (a pass-through:
        nothing will be guarded): step 3 only."""
        try:  # the request's judge calls draw on one allowance (all its choices, prompts)
            with judge_allowance(JudgeAllowance.of(scope.policy)):
                async with self._arrival(scope, guarded) as held:
                    return await cancel_on_disconnect(scope.request, _call(work, held))
        except ClientDisconnected:
            return Response(status_code=499)  # nobody listens; the work was cancelled

    @contextlib.asynccontextmanager
    async def _arrival(self, scope: Scope, guarded: bool) -> AsyncIterator[Held]:
        if not guarded:
            yield Held(None)
            return
        async with self.guard.arrival(scope.policy) as held:
            scope.trace = await trace_for(
                scope.request.headers,
                self.traces,
                scope.policy.tenant,
                scope.policy.traces,
                scope.model,
            )
            yield held

    async def guard_text(
        self, scope: Scope, text: str, asked: Asked, logprobs: object = None
    ) -> GuardReport:
        """One answer text, both stages (:meth:`GuardService.guard`)."""
        return await self.guard.guard(text, asked.question, asked.context, scope.policy, logprobs)

    async def record(self, scope: Scope, report: GuardReport, asked: Asked) -> str | None:
        """The generation as a node of its trace (multi-step traces; VeriTrail): the trace
        id, or None when the tenant keeps no traces or recording failed (logged)."""
        if scope.trace is None:
            return None
        node = StepNode(
            scope.step_id,
            scope.request_id,
            scope.policy_id,
            asked.question,
            asked.context,
            report,
        )
        return await record_step(scope.trace, node)

    async def conclude(
        self, scope: Scope, report: GuardReport, asked: Asked, upstream_ms: float | None = None
    ) -> dict[str, str]:
        """After a whole answer's guard: the trace node, the ``x-groundproxy-*`` headers
        (buffer mode: the whole verdict) and one access log line."""
        trace_id = await self.record(scope, report, asked)
        log.info(
            "guarded",
            action=report.action,
            trust=round(report.trust, 3),
            claims=len(report.claims),
            guard_ms=round(report.latency_ms, 1),
            **({} if upstream_ms is None else {"upstream_ms": round(upstream_ms, 1)}),
        )
        return response_headers(
            "buffer",
            scope.policy_id,
            scope.step_id,
            scope.request_id,
            report=report,
            trace_id=trace_id,
        )

    def stream_headers(self, scope: Scope, mode: Mode) -> dict[str, str]:
        """The headers of a stream that starts before its verdict is known (sentence,
        relay): the verdict rides in its last event."""
        return response_headers(mode, scope.policy_id, scope.step_id, scope.request_id)


async def _call(work: Callable[[Held], Awaitable[R]], held: Held) -> R:
    return await work(held)


class UpstreamServing:
    """What a serving object that calls an upstream holds: the guarded call, the tenants'
    upstreams and the app's metrics (the chat, completions and embeddings endpoints)."""

    def __init__(self, call: GuardedCall, upstream: Upstream, metrics: Metrics) -> None:
        self.call = call
        self.upstream = upstream
        self.metrics = metrics
