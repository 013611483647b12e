"""``POST /v1/completions`` served (legacy text completions), guarded like a chat answer.

Each choice's ``text`` is verified against the prompt (the request's own context) and the
tenant's index, and rewritten per the policy; the verdict rides in the ``x-groundproxy-*``
headers and the body's ``groundproxy`` object — over several prompts (or ``n > 1``) the
aggregate over every choice (:mod:`guards.answer.choices`), each choice carrying its own too.
``stream: true`` is answered in buffer mode: the whole guarded text re-sent as
``text_completion`` chunks, ``groundproxy`` in the last.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

from fastapi.responses import JSONResponse, Response

from groundproxy.errors import BadRequestError
from groundproxy.guards import (
    combined_choices,
    dropped_note,
    no_claims_report,
    report_body,
    still_describes,
)
from groundproxy.guards.types import GuardReport
from groundproxy.proxy.openai.chat_request import checked
from groundproxy.proxy.openai.requests import CompletionsRequest
from groundproxy.proxy.serving.call import Asked, Scope, UpstreamServing
from groundproxy.proxy.serving.chat import Completed
from groundproxy.proxy.serving.guarding import Held
from groundproxy.proxy.serving.headers import NO_BUFFERING
from groundproxy.proxy.serving.passthrough import passthrough_model
from groundproxy.proxy.streaming.event_stream import EventStreamResponse
from groundproxy.proxy.streaming.pacing import within_deadline
from groundproxy.proxy.streaming.sse import sse

MAX_PROMPTS = 32  # each prompt is its own upstream call and guard


def prompt_list(prompt: Any) -> list[str]:
    """The request's prompts: a string is one, an array of strings one each (at most
    :data:`MAX_PROMPTS`)."""
    if isinstance(prompt, str) and prompt:
        return [prompt]
    if isinstance(prompt, list) and prompt and all(isinstance(p, str) and p for p in prompt):
        if len(prompt) > MAX_PROMPTS:
            raise BadRequestError(
                f"'prompt' holds {len(prompt)} prompts; at most {MAX_PROMPTS} per request",
                param="prompt",
            )
        return list(prompt)
    raise BadRequestError("'prompt' must be a non-empty string or array of strings", param="prompt")


def merged(bodies: list[dict[str, Any]]) -> dict[str, Any]:
    """One body of the answers to each prompt, as OpenAI answers a list of prompts: prompt
    i's choices in order, indexed ``i * n + j``; usage summed."""
    body = dict(bodies[0])
    choices: list[dict[str, Any]] = []
    usage: dict[str, int] = {}
    for answer in bodies:
        own = answer.get("choices") or []
        choices.extend({**c, "index": len(choices) + j} for j, c in enumerate(own))
        for key, value in (answer.get("usage") or {}).items():
            if isinstance(value, int):
                usage[key] = usage.get(key, 0) + value
    body["choices"] = choices
    if usage:
        body["usage"] = usage
    return body


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


def _legacy_note(text: str, report: GuardReport) -> str:
    """Why a choice's legacy logprobs were dropped: even citation markers alone shift the
    characters their ``text_offset`` indexes."""
    if still_describes(text, report.text):
        return "logprobs dropped: citation markers shift the text their text_offset indexes"
    return dropped_note(report.claims, report.blocked)


class CompletionsServing(UpstreamServing):
    """Legacy text completions over the guarded call, the upstreams and the metrics."""

    async def create(self, scope: Scope, data: dict[str, Any]) -> Response:
        scope.model = checked(CompletionsRequest, data).model  # 400 naming a bad field
        prompts = prompt_list(data.get("prompt"))

        async def whole(held: Held) -> Completed:
            return await self._complete(scope, data, prompts)

        done = await self.call.run(scope, whole)
        if isinstance(done, Response):
            return done  # 499: the client went away
        if not data.get("stream"):
            return JSONResponse(done.body, headers=done.headers)
        headers = {**done.headers, **NO_BUFFERING}
        return EventStreamResponse(
            _chunks(done.body), media_type="text/event-stream", headers=headers
        )

    async def _upstream(
        self, scope: Scope, data: dict[str, Any], prompts: list[str]
    ) -> tuple[list[dict[str, Any]], float]:
        """Each prompt's upstream answer (one call each, concurrently: an upstream or
        litellm given a list may merge it into one prompt) and the longest call's seconds."""
        policy = scope.policy
        own = ("model", "prompt", "stream", "stream_options")
        extra = {k: v for k, v in data.items() if k not in own}
        model = passthrough_model(policy.upstream, scope.model)

        async def together() -> list[tuple[dict[str, Any], float]]:
            calls = [self.upstream.text_complete(policy.upstream, model, p, extra) for p in prompts]
            tasks = [asyncio.ensure_future(call) for call in calls]
            try:
                return list(await asyncio.gather(*tasks))
            finally:  # one failed (or the deadline passed): the others are not left running
                for task in tasks:
                    task.cancel()

        # a stream answers once the whole answer is in: the stream deadline holds for it
        answers = await (within_deadline(policy, together()) if data.get("stream") else together())
        for body, seconds in answers:
            self.metrics.observe_upstream(policy.tenant, seconds, body.get("usage"))
        return [body for body, _ in answers], max(seconds for _, seconds in answers)

    async def _complete(self, scope: Scope, data: dict[str, Any], prompts: list[str]) -> Completed:
        bodies, seconds = await self._upstream(scope, data, prompts)
        body = merged(bodies)
        body["model"], body["object"] = scope.model, "text_completion"
        started = self.call.clock.monotonic()
        reports: list[GuardReport] = []
        notes: list[str] = []
        owners = [p for p, b in zip(prompts, bodies, strict=True) for _ in b.get("choices") or []]
        for choice, prompt in zip(body["choices"], owners, strict=True):
            text = choice.get("text")
            if not isinstance(text, str):
                continue
            # each choice is verified against its own prompt; logprobs are read only by an
            # adapter that uses them
            asked = Asked(prompt, [("user", prompt)])
            report = await self.call.guard_text(scope, text, asked, choice.get("logprobs"))
            reports.append(report)
            if choice.get("logprobs") and report.text != text:  # text_offset would not match
                choice["logprobs"] = None
                notes.append(_legacy_note(text, report))
            choice["text"] = report.text
            choice.setdefault("logprobs", None)  # the spec requires it (nullable)
            if report.blocked:
                choice["finish_reason"] = "content_filter"
            if len(body["choices"]) > 1:
                choice["groundproxy"] = report_body(report, scope.policy_id)
        # headers and the top-level object: every choice's verdict (guards.answer.choices)
        report = combined_choices(reports or [no_claims_report("")],
                                  (self.call.clock.monotonic() - started) * 1000.0)  # fmt: skip
        body["groundproxy"] = report_body(report, scope.policy_id)
        if notes:  # beside a request-context note (report_body)
            body["groundproxy"].setdefault("notes", []).extend(notes)
        whole = "\n".join(prompts)
        asked = Asked(whole, [("user", whole)])
        headers = await self.call.conclude(scope, report, asked, seconds * 1000.0)
        return Completed(body, headers, report)
