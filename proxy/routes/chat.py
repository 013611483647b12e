"""``POST /v1/chat/completions`` (non-stream and ``stream: true``)."""

from __future__ import annotations

from collections.abc import Iterator

import structlog
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from groundproxy.guards.types import GuardReport
from groundproxy.policies.loader import LoadedPolicy
from groundproxy.proxy.auth import tenant_for
from groundproxy.proxy.chat import guarded_completion, new_step_id
from groundproxy.proxy.disconnect import ClientDisconnected, cancel_on_disconnect
from groundproxy.proxy.guarding import GuardService
from groundproxy.proxy.protocol import ChatCompletionRequest, parse_chat_request, parse_json_body
from groundproxy.proxy.relay_stream import relay_events, relay_headers, wants_relay
from groundproxy.proxy.sentence_stream import (
    open_sentence_stream,
    sentence_events,
    up_front_headers,
    wants_sentence_mode,
)
from groundproxy.proxy.sse import completion_to_chunks
from groundproxy.proxy.state import app_state, request_id
from groundproxy.proxy.traces import TraceRequest, record_step, trace_for
from groundproxy.proxy.upstream import UpstreamClient

router = APIRouter()


async def read_body(request: Request, max_bytes: int) -> bytes:
    """Read the body, refusing (413) as soon as it passes ``max_bytes``."""
    from groundproxy.guards.errors import BodyTooLargeError

    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > max_bytes:
        raise BodyTooLargeError(f"request body is {declared} bytes; the limit is {max_bytes}")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise BodyTooLargeError(f"request body exceeds the limit of {max_bytes} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


@router.post("/v1/chat/completions", response_model=None)
async def chat_completions(request: Request) -> Response:
    state = app_state(request)
    loaded = tenant_for(request, state.policies)
    structlog.contextvars.bind_contextvars(tenant=loaded.policy.tenant)
    settings = state.settings
    raw = await read_body(request, settings.max_body_bytes)
    data = parse_json_body(
        raw, max_bytes=settings.max_body_bytes, max_depth=settings.max_json_depth
    )
    req = parse_chat_request(data)
    upstream, guard = state.require()
    rid = request_id(request)
    trace = await trace_for(
        request.headers, state.traces, loaded.policy.tenant, loaded.policy.traces, req.model
    )
    if wants_sentence_mode(req, loaded) or wants_relay(req, loaded):
        # stream: sentence (proxy.sentence_stream), or unguarded: relayed (proxy.relay_stream)
        return await _incremental_response(request, req, loaded, upstream, guard, rid, trace)
    try:
        done = await cancel_on_disconnect(
            request,
            guarded_completion(
                req, loaded, upstream, guard, rid, stream_upstream=req.stream, trace=trace
            ),
        )
    except ClientDisconnected:
        return Response(status_code=499)  # nobody is listening; the upstream call was cancelled
    if not req.stream:
        return JSONResponse(done.body, headers=done.headers)

    def events() -> Iterator[bytes]:
        yield from completion_to_chunks(done.body)

    headers = {**done.headers, "cache-control": "no-cache", "x-accel-buffering": "no"}
    return StreamingResponse(events(), media_type="text/event-stream", headers=headers)


async def _incremental_response(
    request: Request,
    req: ChatCompletionRequest,
    loaded: LoadedPolicy,
    upstream: UpstreamClient,
    guard: GuardService,
    rid: str,
    trace: TraceRequest | None,
) -> Response:
    """Open the upstream stream first (its errors keep their status), then stream it as
    it comes: sentence by sentence once verified, or relayed when the guard is off."""
    try:
        stream = await cancel_on_disconnect(
            request, open_sentence_stream(req, loaded, upstream)
        )
    except ClientDisconnected:
        return Response(status_code=499)
    step_id = new_step_id()

    async def on_report(report: GuardReport) -> None:
        if trace is not None:
            await record_step(
                trace, step_id, rid, loaded.policy_id, req.question(),
                req.context_messages(), report,
            )

    no_buffering = {"cache-control": "no-cache", "x-accel-buffering": "no"}
    if not loaded.policy.guard:
        return StreamingResponse(
            relay_events(req, loaded, stream, step_id, on_report),
            media_type="text/event-stream",
            headers={**relay_headers(loaded.policy_id, step_id, rid), **no_buffering},
        )
    return StreamingResponse(
        sentence_events(req, loaded, stream, guard, step_id, on_report),
        media_type="text/event-stream",
        headers={**up_front_headers(loaded.policy_id, step_id, rid), **no_buffering},
    )
