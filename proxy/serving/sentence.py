"""``stream: sentence``: the upstream streams, each sentence is held until its claims are
verified, then sent (rewritten if the policy says so).

Per piece of the answer (:class:`guards.claims.segments.SentenceSegmenter`: a sentence, a
table, a code line) the guard runs under the policy's ``latency_budget_ms`` — the budget
bounds how long any one sentence is held — and the piece is rendered with citation
numbers that continue across the answer; the "Sources:" footnotes are sent once, after
the last sentence. Code is passed through unverified and unaltered.

What differs from ``buffer`` mode, because the first bytes leave before the answer is
known:

- headers: only what is known up front — ``x-request-id``, ``x-groundproxy-policy``,
  ``x-groundproxy-step-id`` (and ``x-groundproxy-stream: sentence``). The verdict (trust,
  action, claims, citations, latency) travels in the ``groundproxy`` object of the last
  SSE event before ``[DONE]``, as DESIGN.md's contract for streams says;
- ``block`` (a claim whose action is block, or the trust floor once a contradiction
  makes the answer so far fall below it): what was sent stays sent; the blocked sentence
  and everything after it are withheld, the policy's refusal text is sent in their place,
  and ``finish_reason`` is ``content_filter``;
- a guard error or a sentence past the budget: that sentence is sent as is, its claims
  marked ``unverified``, and the answer's action becomes ``unverified``
  (``on_guard_error: block`` refuses from that sentence on instead);
- an upstream failure after the first byte: an SSE event ``{"error": {...}}`` in OpenAI's
  shape, then ``[DONE]`` (the ``openai`` SDK raises it as an ``APIError``).

A client that disconnects cancels the generator, which closes the upstream stream.
Only choice 0 is guarded sentence by sentence; requests with ``n > 1`` use buffer mode.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import structlog

from groundproxy.guards import (
    PieceTally,
    Segment,
    SentenceSegmenter,
    StreamedAnswer,
    TokenQueue,
    parse_json_answer,
    report_body,
    response_schema,
)
from groundproxy.policies.loader import LoadedPolicy
from groundproxy.proxy.openai.chat_request import ChatCompletionRequest
from groundproxy.proxy.openai.shape import wants_usage
from groundproxy.proxy.serving.admission import Reservation
from groundproxy.proxy.serving.call import Asked, Scope
from groundproxy.proxy.serving.guarding import GuardService
from groundproxy.proxy.serving.json_answer import JsonHold, guard_json
from groundproxy.proxy.serving.judging import current_allowance, judge_allowance
from groundproxy.proxy.serving.pipeline import Piece
from groundproxy.proxy.streaming.pacing import Paced
from groundproxy.proxy.streaming.sse import ChunkWriter, StreamEnd, sse, until_failure
from groundproxy.proxy.upstream.client import StreamDelta, Upstream, UpstreamStream, resolve_model

log = structlog.get_logger(__name__)


class SentenceGuard:
    """One sentence-mode answer: each segment verified (the I/O: a worker thread, the
    budget) and handed to :class:`guards.answer.streamed.StreamedAnswer`, which applies the
    policy."""

    def __init__(
        self,
        loaded: LoadedPolicy,
        guard: GuardService,
        question: str | None,
        context: list[tuple[str, str]],
        reservation: Reservation | None = None,
    ) -> None:
        self.policy = loaded.policy
        self.guard = guard
        self.reservation = reservation  # the request's place in the guard queue
        self.question = question
        self.context = context
        self.answer = StreamedAnswer(loaded.policy)
        # one judge allowance for the whole answer: its pieces share the calls and the
        # latency budget, and after a timeout the rest are sent marked, at once
        self.judging = current_allowance(loaded.policy)

    async def piece(self, seg: Segment) -> str:
        """The text to send for one segment ("" when it is withheld): the segment through
        the guard pipeline (:meth:`GuardService.run`) as a piece of the answer so far."""
        state = self.answer
        if state.blocked or not seg.verify or not any(ch.isalnum() for ch in seg.text):
            return state.passthrough(seg.text)
        piece = Piece(
            seg.text, self.question, self.context, self.policy, segment=state.segment(),
            hold_s=self.policy.max_hold_ms / 1000.0,  # a sentence waits this long for its judge
            reservation=self.reservation,
        )  # fmt: skip
        with judge_allowance(self.judging):
            report = await self.guard.run(piece)  # metrics: once per answer (sentence_events)
        ms = piece.guard_s * 1000.0
        if piece.verified is None:
            return state.unverified(report, seg.offset, ms)
        return state.decided(piece.verified, report, seg.offset, ms, piece.judged)


async def open_sentence_stream(
    req: ChatCompletionRequest, loaded: LoadedPolicy, upstream: Upstream
) -> UpstreamStream:
    """Open the upstream stream (errors raise here, before the response starts)."""
    policy = loaded.policy
    model = resolve_model(policy.upstream, req.model)
    messages = [m.model_dump(exclude_none=True) for m in req.messages]
    return await upstream.stream(policy.upstream, model, messages, req.passthrough())


async def sentence_events(
    req: ChatCompletionRequest,
    scope: Scope,
    stream: UpstreamStream,
    guard: GuardService,
    on_report: Any = None,
    reservation: Reservation | None = None,
) -> AsyncIterator[bytes]:
    """SSE bytes for one sentence-mode answer (see the module docstring); ``scope``: the
    request's policy and step id.

    ``on_report`` (optional, async, ``(GuardReport) -> None``) is awaited with the final
    report before the last event (trace recording). ``reservation``: the request's place in
    the guard queue (:mod:`proxy.serving.admission`), which its segment guards draw on.
    """
    loaded, step_id = scope.loaded, scope.step_id
    guarded = SentenceGuard(loaded, guard, req.question(), req.context_messages(), reservation)
    state = guarded.answer
    segmenter = SentenceSegmenter()
    out = ChunkWriter(f"chatcmpl-{step_id}", req.model, wants_usage(req.passthrough()))
    tokens = TokenQueue()  # upstream logprobs not yet sent (they ride on unchanged text)
    tally = PieceTally()
    hold, json_report = JsonHold(), None

    async def emit(segments: list[Segment]) -> AsyncIterator[bytes]:
        for seg in segments:
            before = len(state.results)
            text = await guarded.piece(seg)
            logprobs = None  # kept for text unchanged apart from citation markers; a
            # rewritten or withheld piece's own tokens are dropped (and noted)
            own = tokens.take(len(seg.text))
            if own and tally.keep(seg.text, text, state.results[before:], state.blocked):
                logprobs = {"content": own, "refusal": None}
            if text:
                state.sent.append(text)
                yield out.chunk({"content": text}, logprobs)

    paced = Paced(stream, loaded.policy, segmenter.holding)  # the policy's stream deadlines

    async def guarded_events() -> AsyncGenerator[bytes, None]:
        nonlocal json_report
        role_sent = False
        async for d in paced:
            if d is None:  # held past max_hold_ms with no sentence end: send it now
                async for piece in emit(segmenter.release()):
                    yield piece
                continue
            if not out.note(d):
                continue
            if not role_sent:
                role_sent = True
                yield out.chunk({"role": d.role or "assistant", "content": ""})
            tokens.add((d.logprobs or {}).get("content") or [])
            prose = hold.take(d.content) if d.content and not state.blocked else ""
            if prose:
                async for piece in emit(segmenter.feed(prose)):
                    yield piece
            calls = b"" if state.blocked else out.calls(d)  # never verified, never altered
            if calls:
                yield calls
        doc = parse_json_answer(hold.text) if hold.is_json else None
        if doc is not None:  # a JSON answer: guarded whole, stays JSON
            asked = Asked(guarded.question, guarded.context)
            _, schema = response_schema(req.passthrough().get("response_format"))
            json_report = await guard_json(hold.text, doc, schema, asked, guarded.policy, guard)
            yield out.chunk({"content": json_report.text})
        async for piece in emit(segmenter.feed(hold.text) if doc is None else []):
            yield piece
        async for piece in emit(segmenter.flush()):
            yield piece
        tail = state.tail()
        if tail:
            state.sent.append(tail)
            yield out.chunk({"content": tail})

    end = StreamEnd("sentence_stream_failed")
    async with contextlib.aclosing(until_failure(guarded_events(), end, (paced, stream))) as events:
        async for event in events:
            yield event
    if end.failed:
        return
    report = json_report or state.report()
    guard.observe(loaded.policy, report, report.latency_ms / 1000.0)  # once per answer
    if on_report is not None:
        await on_report(report)
    # judge.labels: the whole streamed answer, judged piece by piece, is one label
    await guard.keep_label(loaded.policy, report, guarded.question, guarded.context)
    finish = "content_filter" if report.blocked else (out.finish or "stop")
    verdict = report_body(report, loaded.policy_id)
    if (note := tally.note()) is not None:  # beside a request-context note (report_body)
        verdict.setdefault("notes", []).append(note)
    last = out.last(finish, verdict)
    log.info(
        "guarded",
        mode="sentence",
        action=report.action,
        trust=round(report.trust, 3),
        claims=len(report.claims),
        guard_ms=round(report.latency_ms, 1),
    )
    yield last
    yield sse("[DONE]")


__all__ = [
    "SentenceGuard",
    "StreamDelta",
    "open_sentence_stream",
    "sentence_events",
]
