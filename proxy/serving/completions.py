"""``POST /v1/completions`` served (legacy text completions), guarded like a chat answer.

Each choice's ``text`` is verified against the prompt (the request's own context) and the
tenant's index, and rewritten per the policy; the verdict rides in the ``x-groundproxy-*``
headers and the body's ``groundproxy`` object. ``stream: true`` is answered in buffer mode:
the whole guarded text re-sent as ``text_completion`` chunks, ``groundproxy`` in the last.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from fastapi.responses import JSONResponse, Response

from groundproxy.errors import BadRequestError
from groundproxy.guards import report_body
from groundproxy.guards.types import GuardReport
from groundproxy.proxy.serving.call import Asked, Scope, UpstreamServing
from groundproxy.proxy.serving.chat import Completed, no_claims
from groundproxy.proxy.serving.guarding import Held
from groundproxy.proxy.serving.headers import NO_BUFFERING
from groundproxy.proxy.serving.passthrough import passthrough_model, required_model
from groundproxy.proxy.streaming.event_stream import EventStreamResponse
from groundproxy.proxy.streaming.pacing import within_deadline
from groundproxy.proxy.streaming.sse import sse


def prompt_text(prompt: Any) -> str:
    if isinstance(prompt, str) and prompt:
        return prompt
    if isinstance(prompt, list) and prompt and all(isinstance(p, str) for p in prompt):
        return "\n".join(prompt)
    raise BadRequestError("'prompt' must be a non-empty string or array of strings", param="prompt")


def _chunks(body: dict[str, Any]) -> Iterator[bytes]:
    """The whole guarded body as ``text_completion`` chunks: one per choice (with its
    finish reason: each chunk validates as ``CreateCompletionResponse``), then one with
    ``choices: []`` carrying the usage and the ``groundproxy`` object."""
    base = {k: body.get(k) for k in ("id", "object", "created", "model")}
    for choice in body.get("choices") or []:
        yield sse({**base, "choices": [choice]})
    last: dict[str, Any] = {**base, "choices": []}
    for key in ("usage", "groundproxy"):
        if body.get(key):
            last[key] = body[key]
    yield sse(last)
    yield sse("[DONE]")


class CompletionsServing(UpstreamServing):
    """Legacy text completions over the guarded call, the upstreams and the metrics."""

    async def create(self, scope: Scope, data: dict[str, Any]) -> Response:
        scope.model = required_model(data)
        prompt = prompt_text(data.get("prompt"))

        async def whole(held: Held) -> Completed:
            return await self._complete(scope, data, Asked(prompt, [("user", prompt)]))

        done = await self.call.run(scope, whole)
        if isinstance(done, Response):
            return done  # 499: the client went away
        if not data.get("stream"):
            return JSONResponse(done.body, headers=done.headers)
        headers = {**done.headers, **NO_BUFFERING}
        return EventStreamResponse(
            _chunks(done.body), media_type="text/event-stream", headers=headers
        )

    async def _complete(self, scope: Scope, data: dict[str, Any], asked: Asked) -> Completed:
        policy = scope.policy
        own = ("model", "prompt", "stream", "stream_options")
        extra = {k: v for k, v in data.items() if k not in own}
        model = passthrough_model(policy.upstream, scope.model)
        call = self.upstream.text_complete(policy.upstream, model, data["prompt"], extra)
        # a stream answers once the whole answer is in: the stream deadline holds for it
        body, seconds = await (within_deadline(policy, call) if data.get("stream") else call)
        self.metrics.observe_upstream(policy.tenant, seconds, body.get("usage"))
        body["model"], body["object"] = scope.model, "text_completion"
        started = self.call.clock.monotonic()
        reports: list[GuardReport] = []
        for choice in body.get("choices") or []:
            text = choice.get("text")
            if not isinstance(text, str):
                continue
            # logprobs are read only by an adapter that uses them
            report = await self.call.guard_text(scope, text, asked, choice.get("logprobs"))
            reports.append(report)
            if report.text != text:  # its logprobs describe tokens the guard replaced
                choice["logprobs"] = None
            choice["text"] = report.text
            choice.setdefault("logprobs", None)  # the spec requires it (nullable)
            if report.blocked:
                choice["finish_reason"] = "content_filter"
        report = reports[0] if reports else no_claims()
        report.latency_ms = (self.call.clock.monotonic() - started) * 1000.0
        body["groundproxy"] = report_body(report, scope.policy_id)
        headers = await self.call.conclude(scope, report, asked, seconds * 1000.0)
        return Completed(body, headers, report)
