"""``POST /v1/chat/completions`` (non-stream and ``stream: true``)."""

from __future__ import annotations

from collections.abc import Iterator

import structlog
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from proxy.auth import tenant_for
from proxy.chat import guarded_completion
from proxy.protocol import parse_chat_request, parse_json_body
from proxy.sse import completion_to_chunks
from proxy.state import app_state, request_id

router = APIRouter()


async def read_body(request: Request, max_bytes: int) -> bytes:
    """Read the body, refusing (413) as soon as it passes ``max_bytes``."""
    from guards.errors import BodyTooLargeError

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
    done = await guarded_completion(req, loaded, upstream, guard, rid, stream_upstream=req.stream)
    if not req.stream:
        return JSONResponse(done.body, headers=done.headers)

    def events() -> Iterator[bytes]:
        yield from completion_to_chunks(done.body)

    headers = {**done.headers, "cache-control": "no-cache", "x-accel-buffering": "no"}
    return StreamingResponse(events(), media_type="text/event-stream", headers=headers)
