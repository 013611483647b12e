"""``POST /v1/chat/completions`` served: upstream call, guard, and the annotated answer.

:class:`ChatServing` answers in one of three modes, chosen by
:func:`proxy.serving.stream_mode.choose_mode`, each through the one guarded call
(:class:`proxy.serving.call.GuardedCall`):

- **buffer** (non-stream, ``stream: buffer`` tenants, an answer-level decision in force, or
  ``x-groundproxy-stream: buffer``): the whole answer is guarded, then sent — as JSON, or
  re-sent as stream chunks with every ``x-groundproxy-*`` header up front;
- **sentence** (``stream: sentence`` tenants): each sentence is sent once verified
  (:mod:`proxy.serving.sentence`);
- **relay** (``guard: false`` tenants' streams): relayed as they come
  (:mod:`proxy.serving.relay`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

from fastapi.responses import JSONResponse, Response

from groundproxy.guards import (
    combined_choices,
    dropped_note,
    no_claims_report,
    parse_json_answer,
    report_body,
    response_schema,
    still_describes,
)
from groundproxy.guards.types import GuardReport
from groundproxy.proxy.openai.chat_request import ChatCompletionRequest
from groundproxy.proxy.openai.shape import shape_completion, wants_usage
from groundproxy.proxy.serving.call import Asked, Scope, UpstreamServing
from groundproxy.proxy.serving.guarding import Held
from groundproxy.proxy.serving.headers import NO_BUFFERING, Mode
from groundproxy.proxy.serving.json_answer import guard_json
from groundproxy.proxy.serving.relay import relay_events
from groundproxy.proxy.serving.sentence import open_sentence_stream, sentence_events
from groundproxy.proxy.serving.stream_mode import choose_mode
from groundproxy.proxy.streaming.event_stream import EventStreamResponse
from groundproxy.proxy.streaming.metered import MeteredStream
from groundproxy.proxy.streaming.pacing import within_deadline
from groundproxy.proxy.streaming.sse import completion_to_chunks
from groundproxy.proxy.upstream.client import resolve_model


@dataclass
class Completed:
    """A whole guarded chat completion: the body to send and its headers."""

    body: dict[str, Any]
    headers: dict[str, str]
    # over every choice (guards.answer.choices; n > 1: each its own in the body)
    report: GuardReport


def asked_by(req: ChatCompletionRequest) -> Asked:
    return Asked(req.question(), req.context_messages())


def _answer_text(choice: dict[str, Any]) -> str | None:
    message = choice.get("message") or {}
    content = message.get("content")
    return content if isinstance(content, str) else None


class ChatServing(UpstreamServing):
    """Chat completions over the guarded call, the tenants' upstreams and the metrics."""

    async def create(self, scope: Scope, req: ChatCompletionRequest) -> Response:
        """The route's answer, in the mode the request and policy ask for."""
        mode = choose_mode(req, scope, self.call.guard)
        if mode != "buffer":

            async def incremental(held: Held) -> Response:
                return await self._incremental(scope, req, held, mode)

            return await self.call.run(scope, incremental)

        async def whole(held: Held) -> Completed:
            return await self.complete(scope, req, stream_upstream=req.stream)

        done = await self.call.run(scope, whole)
        if isinstance(done, Response):
            return done  # 499: the client went away
        if not req.stream:
            return JSONResponse(done.body, headers=done.headers)

        def events() -> Iterator[bytes]:
            yield from completion_to_chunks(done.body, wants_usage(req.passthrough()))

        headers = {**done.headers, **NO_BUFFERING}
        return EventStreamResponse(events(), media_type="text/event-stream", headers=headers)

    async def complete(
        self,
        scope: Scope,
        req: ChatCompletionRequest,
        *,
        stream_upstream: bool = False,
        deadline: bool = False,
    ) -> Completed:
        """Call the upstream, guard every choice's text, and rewrite the body per the policy.

        A streamed upstream (or ``deadline``: the client asked for a stream) must answer
        within the policy's ``stream_deadline_ms`` (proxy.streaming.pacing)."""
        policy = scope.policy
        model = resolve_model(policy.upstream, req.model)
        messages = [m.model_dump(exclude_none=True) for m in req.messages]
        call = self.upstream.complete(
            policy.upstream, model, messages, req.passthrough(), stream=stream_upstream
        )
        answer = await (within_deadline(policy, call) if stream_upstream or deadline else call)
        self.metrics.observe_upstream(policy.tenant, answer.seconds, answer.completion.usage)
        body = answer.body
        body["model"] = req.model
        shape_completion(body)
        asked = asked_by(req)
        started = self.call.clock.monotonic()
        reports, notes = await self._guard_choices(scope, req, body, asked)
        # headers and the top-level object: every choice's verdict (guards.answer.choices)
        report = combined_choices(reports or [no_claims_report("")],
                                  (self.call.clock.monotonic() - started) * 1000.0)  # fmt: skip
        body["groundproxy"] = report_body(report, scope.policy_id)
        if notes:  # beside a request-context note (report_body)
            body["groundproxy"].setdefault("notes", []).extend(notes)
        headers = await self.call.conclude(scope, report, asked, answer.seconds * 1000.0)
        return Completed(body, headers, report)

    async def _guard_choices(
        self, scope: Scope, req: ChatCompletionRequest, body: dict[str, Any], asked: Asked
    ) -> tuple[list[GuardReport], list[str]]:
        """Each choice's text guarded and replaced in ``body``: (reports, notes on logprobs
        dropped)."""
        policy = scope.policy
        _, schema = response_schema(req.passthrough().get("response_format"))
        reports: list[GuardReport] = []
        notes: list[str] = []
        choices = body.get("choices") or []
        for i, choice in enumerate(choices):
            text = _answer_text(choice)
            if text is None:  # no prose (e.g. only tool calls): nothing to verify
                continue
            doc = parse_json_answer(text) if policy.guard else None
            if doc is not None:  # JSON stays JSON (asked for or not): its statements are claims
                report = await guard_json(text, doc, schema, asked, policy, self.call.guard)
            else:  # a choice's logprobs are read only by an adapter that uses them
                report = await self.call.guard_text(scope, text, asked, choice.get("logprobs"))
            reports.append(report)
            choice["message"]["content"] = report.text
            if choice.get("logprobs") and not still_describes(text, report.text):
                choice["logprobs"] = None  # they described tokens the rewrite replaced
                note = dropped_note(report.claims, report.blocked)
                notes.append(note if len(choices) == 1 else f"choice {i}: {note}")
            if report.blocked:
                choice["finish_reason"] = "content_filter"
                choice["message"].pop("tool_calls", None)
            if len(choices) > 1:
                choice["groundproxy"] = report_body(report, scope.policy_id)
        return reports, notes

    async def _incremental(
        self, scope: Scope, req: ChatCompletionRequest, held: Held, mode: Mode
    ) -> Response:
        """Open the upstream stream first (its errors keep their status), then stream it as
        it comes: sentence by sentence once verified, or relayed when the guard is off. The
        arrival hold's place goes with the stream (its first segment guard takes it over)
        and is given back when the stream ends."""
        loaded, guard = scope.loaded, self.call.guard
        opened = await open_sentence_stream(req, loaded, self.upstream)
        stream = MeteredStream(opened, self.metrics, scope.policy.tenant)  # time, tokens
        asked = asked_by(req)

        async def on_report(report: GuardReport) -> None:
            if not loaded.policy.guard:  # relayed: one action per answer
                self.metrics.observe_unguarded(loaded.policy.tenant)
            await self.call.record(scope, report, asked)

        if mode == "relay":
            events = relay_events(req, scope, stream, on_report)
            headers = self.call.stream_headers(scope, "relay")
        else:
            events = sentence_events(req, scope, stream, guard, on_report, held.reservation)
            headers = self.call.stream_headers(scope, "sentence")
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
