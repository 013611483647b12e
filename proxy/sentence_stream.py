"""``stream: sentence``: the upstream streams, each sentence is held until its claims are
verified, then sent (rewritten if the policy says so).

Per piece of the answer (:class:`guards.segments.SentenceSegmenter`: a sentence, a
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

import dataclasses
import time
from collections.abc import AsyncIterator
from typing import Any

import structlog

from groundproxy.guards.decide import answer_action, below_floor
from groundproxy.guards.errors import GroundproxyError
from groundproxy.guards.report import report_body
from groundproxy.guards.rewrite import Cited, footnote_block, render, rendered_trust
from groundproxy.guards.segments import Segment, SentenceSegmenter
from groundproxy.guards.types import AnswerAction, Claim, ClaimResult, GuardReport
from groundproxy.policies.loader import LoadedPolicy
from groundproxy.proxy.errors import exception_body
from groundproxy.proxy.guarding import GuardService
from groundproxy.proxy.protocol import ChatCompletionRequest
from groundproxy.proxy.sse import ChunkWriter, sse
from groundproxy.proxy.upstream import StreamDelta, Upstream, UpstreamStream, resolve_model

log = structlog.get_logger(__name__)

_STRENGTH: dict[AnswerAction, int] = {
    "none": 0, "annotate": 1, "flag": 2, "rewrite": 3, "unverified": 4, "block": 5
}  # fmt: skip


def wants_sentence_mode(req: ChatCompletionRequest, loaded: LoadedPolicy) -> bool:
    """Sentence mode: a streamed request, a guarded policy with ``stream: sentence``, n ≤ 1."""
    n = req.passthrough().get("n")
    single = n is None or (isinstance(n, int) and n <= 1)
    return req.stream and loaded.policy.stream == "sentence" and loaded.policy.guard and single


def up_front_headers(policy_id: str, step_id: str, request_id: str) -> dict[str, str]:
    return {
        "x-request-id": request_id,
        "x-groundproxy-policy": policy_id,
        "x-groundproxy-step-id": step_id,
        "x-groundproxy-stream": "sentence",
    }


class SentenceGuard:
    """State of one sentence-mode answer: segments in, SSE text out, the report at the end."""

    def __init__(
        self,
        loaded: LoadedPolicy,
        guard: GuardService,
        question: str | None,
        context: list[tuple[str, str]],
    ) -> None:
        self.loaded = loaded
        self.policy = loaded.policy
        self.guard = guard
        self.question = question
        self.context = context
        self.cited: Cited = {}
        self.results: list[ClaimResult] = []
        self.original: list[str] = []
        self.sent: list[str] = []
        self.action: AnswerAction = "none"
        self.blocked = False
        self.unverified = False
        self.guard_ms = 0.0
        self.verifier = ""

    def _raise_action(self, action: AnswerAction) -> None:
        if _STRENGTH[action] > _STRENGTH[self.action]:
            self.action = action

    def _block(self) -> str:
        self.blocked = True
        self.action = "block"
        for r in self.results:
            if r.action in ("kept", "flagged", "annotated", "corrected", "removed"):
                r.action = "blocked"
        refusal = self.policy.actions.refusal
        return ("\n\n" if self.sent else "") + refusal

    async def piece(self, seg: Segment) -> str:
        """The text to send for one segment ("" when it is withheld)."""
        self.original.append(seg.text)
        if self.blocked:
            return ""
        if not seg.verify or not any(ch.isalnum() for ch in seg.text):
            return seg.text
        started = time.perf_counter()
        report = await self.guard.guard(seg.text, self.question, self.context, self.policy)
        self.guard_ms += (time.perf_counter() - started) * 1000.0
        self.verifier = report.verifier or self.verifier
        shifted = [
            dataclasses.replace(
                r,
                claim=Claim(r.claim.text, (r.claim.span[0] + seg.offset,
                                           r.claim.span[1] + seg.offset)),
            )
            for r in report.claims
        ]
        if report.unverified:
            self.unverified = True
            self.results.extend(shifted)
            if report.blocked:
                return self._block()
            self._raise_action("unverified")
            return seg.text
        local = [dataclasses.replace(r) for r in report.claims]
        action = answer_action(local, self.policy)
        if action == "block":
            self.results.extend(shifted)
            return self._block()
        rendered = render(seg.text, local, self.policy, action, cited=self.cited, segment=True)
        for r, loc in zip(shifted, local, strict=True):
            r.action = loc.action
        self.results.extend(shifted)
        if below_floor(self.results, self.policy, rendered_trust(self.results)):
            return self._block()
        self._raise_action(action)
        return rendered.text

    def tail(self) -> str:
        """Footnotes (and a refusal when every claim was removed), sent after the last piece."""
        if self.blocked:
            return ""
        if self.results and all(r.action == "removed" for r in self.results):
            return self._block()
        if self.policy.citations == "footnotes" and self.cited:
            return "\n\n" + footnote_block(self.cited)
        return ""

    def report(self) -> GuardReport:
        trust = rendered_trust(self.results)
        if self.unverified:
            trust = 0.0
        return GuardReport(
            original="".join(self.original),
            text="".join(self.sent),
            claims=self.results,
            trust=trust,
            action=self.action,
            blocked=self.blocked,
            unverified=self.unverified,
            latency_ms=self.guard_ms,
            verifier=self.verifier,
        )


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
    loaded: LoadedPolicy,
    stream: UpstreamStream,
    guard: GuardService,
    step_id: str,
    on_report: Any = None,
) -> AsyncIterator[bytes]:
    """SSE bytes for one sentence-mode answer (see the module docstring).

    ``on_report`` (optional, async, ``(GuardReport) -> None``) is awaited with the final
    report before the last event (trace recording).
    """
    state = SentenceGuard(loaded, guard, req.question(), req.context_messages())
    segmenter = SentenceSegmenter()
    out = ChunkWriter(f"chatcmpl-{step_id}", req.model)
    role_sent = False

    async def emit(segments: list[Segment]) -> AsyncIterator[bytes]:
        for seg in segments:
            text = await state.piece(seg)
            if text:
                state.sent.append(text)
                yield out.chunk({"content": text})

    try:
        async for d in stream:
            if not out.note(d):
                continue
            if not role_sent:
                role_sent = True
                yield out.chunk({"role": d.role or "assistant", "content": ""})
            if d.content and not state.blocked:
                async for piece in emit(segmenter.feed(d.content)):
                    yield piece
        async for piece in emit(segmenter.flush()):
            yield piece
        tail = state.tail()
        if tail:
            state.sent.append(tail)
            yield out.chunk({"content": tail})
    except GroundproxyError as exc:
        log.warning("sentence_stream_failed", error=exc.message, code=exc.code)
        yield sse(exception_body(exc))
        yield sse("[DONE]")
        return
    finally:
        await stream.aclose()
    report = state.report()
    if on_report is not None:
        await on_report(report)
    finish = "content_filter" if report.blocked else (out.finish or "stop")
    last = out.last(finish, report_body(report, loaded.policy_id))
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
    "up_front_headers",
    "wants_sentence_mode",
]
