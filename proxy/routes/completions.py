"""``POST /v1/completions`` (legacy text completions), guarded like a chat answer.

Each choice's ``text`` is verified against the prompt (the request's own context) and the
tenant's index, and rewritten per the policy; the verdict rides in the ``x-groundproxy-*``
headers and the body's ``groundproxy`` object. ``stream: true`` is answered in buffer mode:
the whole guarded text re-sent as ``text_completion`` chunks, ``groundproxy`` in the last.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response

from groundproxy.errors import BadRequestError
from groundproxy.guards import report_body
from groundproxy.guards.types import GuardReport
from groundproxy.proxy.auth import Tenant
from groundproxy.proxy.body import JsonBody
from groundproxy.proxy.routes.embeddings import passthrough_model, required_model
from groundproxy.proxy.serving.chat import new_step_id
from groundproxy.proxy.serving.headers import NO_BUFFERING, response_headers
from groundproxy.proxy.state import Ready, RequestId, State
from groundproxy.proxy.streaming.event_stream import EventStreamResponse
from groundproxy.proxy.streaming.pacing import within_deadline
from groundproxy.proxy.streaming.sse import sse

router = APIRouter()


def _prompt_text(prompt: Any) -> str:
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


@router.post("/v1/completions", response_model=None)
async def completions(
    loaded: Tenant, data: JsonBody, services: Ready, state: State, rid: RequestId
) -> Response:
    model = required_model(data)
    prompt = _prompt_text(data.get("prompt"))
    policy = loaded.policy
    extra = {
        k: v for k, v in data.items() if k not in ("model", "prompt", "stream", "stream_options")
    }
    reports: list[GuardReport] = []
    async with services.guard.arrival(policy):  # reject: 429; queue: wait (proxy.serving.admission)
        call = services.upstream.text_complete(
            policy.upstream, passthrough_model(policy.upstream, model), data["prompt"], extra
        )  # a stream answers once the whole answer is in: the stream deadline holds for it
        body, seconds = await (within_deadline(policy, call) if data.get("stream") else call)
        state.metrics.observe_upstream(policy.tenant, seconds, body.get("usage"))
        body["model"], body["object"] = model, "text_completion"
        for choice in body.get("choices") or []:
            text = choice.get("text")
            if not isinstance(text, str):
                continue
            lp = choice.get("logprobs")  # read only by an adapter that uses them
            report = await services.guard.guard(text, prompt, [("user", prompt)], policy, lp)
            reports.append(report)
            if report.text != text:  # its logprobs describe tokens the guard replaced
                choice["logprobs"] = None
            choice["text"] = report.text
            choice.setdefault("logprobs", None)  # the spec requires it (nullable)
            if report.blocked:
                choice["finish_reason"] = "content_filter"
    report = reports[0] if reports else GuardReport("", "", [], trust=1.0, action="none")
    body["groundproxy"] = report_body(report, loaded.policy_id)
    headers = response_headers("buffer", loaded.policy_id, new_step_id(), rid, report=report)
    if not data.get("stream"):
        return JSONResponse(body, headers=headers)
    return EventStreamResponse(
        _chunks(body), media_type="text/event-stream", headers={**headers, **NO_BUFFERING}
    )
