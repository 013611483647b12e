"""``POST /v1/chat/completions`` (non-stream and ``stream: true``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from groundproxy.guards.types import GuardReport
from groundproxy.policies.loader import LoadedPolicy
from groundproxy.proxy.auth import Tenant
from groundproxy.proxy.body import ChatRequest
from groundproxy.proxy.metrics import Metrics
from groundproxy.proxy.protocol import ChatCompletionRequest
from groundproxy.proxy.serving.chat import guarded_completion, new_step_id
from groundproxy.proxy.serving.disconnect import ClientDisconnected, cancel_on_disconnect
from groundproxy.proxy.serving.guarding import GuardService, Held
from groundproxy.proxy.serving.headers import NO_BUFFERING, asks_buffer, response_headers
from groundproxy.proxy.serving.openai_shape import wants_usage
from groundproxy.proxy.serving.traces import TraceRequest, record_step, trace_for
from groundproxy.proxy.state import Ready, RequestId, State
from groundproxy.proxy.streaming.event_stream import EventStreamResponse
from groundproxy.proxy.streaming.metered import MeteredStream
from groundproxy.proxy.streaming.relay import relay_events, wants_relay
from groundproxy.proxy.streaming.sentence import (
    open_sentence_stream,
    sentence_events,
    wants_sentence_mode,
)
from groundproxy.proxy.streaming.sse import completion_to_chunks
from groundproxy.proxy.upstream.client import Upstream

router = APIRouter()


@router.post("/v1/chat/completions", response_model=None)
async def chat_completions(
    request: Request,
    loaded: Tenant,
    req: ChatRequest,
    services: Ready,
    state: State,
    rid: RequestId,
) -> Response:
    upstream, guard = services
    # an answer-level decision (adapter, learned) needs the whole answer: buffer mode
    sentence = (
        wants_sentence_mode(req, loaded)
        and not asks_buffer(request.headers)
        and not guard.decides_per_answer(loaded.policy)
    )
    # before the upstream is called — reject: 429; queue: wait for guard room
    # (proxy.serving.admission)
    async with guard.arrival(loaded.policy) as held:
        trace = await trace_for(
            request.headers, state.traces, loaded.policy.tenant, loaded.policy.traces, req.model
        )
        if sentence or wants_relay(req, loaded):
            # stream: sentence (proxy.streaming.sentence), or unguarded: relayed
            return await _incremental_response(
                request, req, loaded, upstream, guard, rid, trace, state.metrics, held
            )
        try:
            done = await cancel_on_disconnect(
                request,
                guarded_completion(
                    req,
                    loaded,
                    upstream,
                    guard,
                    state.metrics,
                    rid,
                    stream_upstream=req.stream,
                    trace=trace,
                ),
            )
        except ClientDisconnected:
            return Response(status_code=499)  # nobody listens; the upstream call was cancelled
    if not req.stream:
        return JSONResponse(done.body, headers=done.headers)

    def events() -> Iterator[bytes]:
        yield from completion_to_chunks(done.body, wants_usage(req.passthrough()))

    headers = {**done.headers, **NO_BUFFERING}
    return EventStreamResponse(events(), media_type="text/event-stream", headers=headers)


async def _incremental_response(
    request: Request,
    req: ChatCompletionRequest,
    loaded: LoadedPolicy,
    upstream: Upstream,
    guard: GuardService,
    rid: str,
    trace: TraceRequest | None,
    metrics: Metrics,
    held: Held,
) -> Response:
    """Open the upstream stream first (its errors keep their status), then stream it as
    it comes: sentence by sentence once verified, or relayed when the guard is off. The
    arrival hold's place goes with the stream (its first segment guard takes it over) and
    is given back when the stream ends."""
    try:
        opened = await cancel_on_disconnect(request, open_sentence_stream(req, loaded, upstream))
    except ClientDisconnected:
        return Response(status_code=499)
    stream = MeteredStream(opened, metrics, loaded.policy.tenant)  # upstream time, tokens
    step_id = new_step_id()

    async def on_report(report: GuardReport) -> None:
        if not loaded.policy.guard:  # relayed: one action per answer (sentence mode: its own)
            metrics.observe_unguarded(loaded.policy.tenant)
        if trace is not None:
            await record_step(
                trace,
                step_id,
                rid,
                loaded.policy_id,
                req.question(),
                req.context_messages(),
                report,
            )

    if not loaded.policy.guard:
        events = relay_events(req, loaded, stream, step_id, on_report)
        headers = response_headers("relay", loaded.policy_id, step_id, rid)
    else:
        reservation = held.reservation
        events = sentence_events(req, loaded, stream, guard, step_id, on_report, reservation)
        headers = response_headers("sentence", loaded.policy_id, step_id, rid)
    return EventStreamResponse(
        _releasing(events, held.detach()),
        media_type="text/event-stream",
        headers={**headers, **NO_BUFFERING},
    )


async def _releasing(
    events: AsyncIterator[bytes], release: Callable[[], None]
) -> AsyncIterator[bytes]:
    """``events``, then ``release`` however the stream ends (done, error, disconnect); a
    stream closed early closes ``events`` too (``async for`` alone would leave it open)."""
    try:
        async for event in events:
            yield event
    finally:
        release()
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()
