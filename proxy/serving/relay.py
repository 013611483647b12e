"""Streams of an unguarded tenant (``guard: false``): relayed chunk by chunk as they arrive.

Nothing is verified, so nothing needs to be held: each upstream delta leaves as soon as it
comes (buffering the whole answer first would take streaming away from guard-off tenants:
against an upstream that sends a word every 0.2 s, the first byte came after the whole
answer, 8.7 s, instead of 0.5 s). The contract of an unguarded answer is kept:

- headers, all known up front: ``x-groundproxy-action: unverified``,
  ``x-groundproxy-trust: n/a`` (not checked), ``x-groundproxy-latency-ms: 0``, the policy, step and
  request ids, and ``x-groundproxy-stream: relay``;
- the last event before ``[DONE]`` carries the ``groundproxy`` object of the unverified
  report (claims marked ``unverified``, "guard disabled by policy");
- an upstream failure after the first byte, or the policy's ``stream_deadline_ms`` passed
  (proxy.streaming.pacing): an OpenAI-shaped ``{"error": {...}}`` event, then ``[DONE]``; a
  client that disconnects closes the upstream stream.

Tool-call and function-call deltas, logprobs and the fingerprint are relayed as they come;
``stream_options.include_usage`` gets the usage in a final ``choices: []`` chunk. Requests
with ``n > 1`` keep the buffered path.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import structlog

from groundproxy.guards import disabled_report, report_body
from groundproxy.guards.types import GuardReport
from groundproxy.proxy.openai.chat_request import ChatCompletionRequest
from groundproxy.proxy.openai.shape import wants_usage
from groundproxy.proxy.serving.call import Scope
from groundproxy.proxy.serving.guarding import off_loop
from groundproxy.proxy.streaming.pacing import Paced
from groundproxy.proxy.streaming.sse import ChunkWriter, StreamEnd, sse, until_failure
from groundproxy.proxy.upstream.client import UpstreamStream

log = structlog.get_logger(__name__)


async def relay_events(
    req: ChatCompletionRequest, scope: Scope, stream: UpstreamStream, on_report: Any = None
) -> AsyncIterator[bytes]:
    """SSE bytes of one relayed answer (``scope``: the request's policy and step id);
    ``on_report`` (async) gets the final report."""
    loaded, step_id = scope.loaded, scope.step_id
    out = ChunkWriter(f"chatcmpl-{step_id}", req.model, wants_usage(req.passthrough()))
    text: list[str] = []
    paced = Paced(stream, loaded.policy, lambda: False)  # the policy's stream deadline

    async def relayed() -> AsyncGenerator[bytes, None]:
        role_sent = False
        async for d in paced:
            if d is None:  # only when holding text; relay holds none
                continue
            if not out.note(d):
                continue
            delta: dict[str, Any] = {}
            if not role_sent:
                role_sent = True
                delta["role"] = d.role or "assistant"
            if d.content:
                text.append(d.content)
                delta["content"] = d.content
            if d.tool_calls:
                delta["tool_calls"] = d.tool_calls
            if d.function_call:
                delta["function_call"] = d.function_call
            if delta or d.logprobs:
                yield out.chunk(delta, d.logprobs)

    end = StreamEnd("relay_stream_failed")
    async with contextlib.aclosing(until_failure(relayed(), end, (paced, stream))) as events:
        async for event in events:
            yield event
    if end.failed:
        return
    report: GuardReport = await off_loop(disabled_report, "".join(text), loaded.policy)
    if on_report is not None:
        await on_report(report)
    last = out.last(out.finish or "stop", report_body(report, loaded.policy_id))
    log.info("relayed", mode="relay", action=report.action, claims=len(report.claims))
    yield last
    yield sse("[DONE]")
