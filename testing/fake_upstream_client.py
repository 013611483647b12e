"""An in-process :class:`~proxy.upstream.types.Upstream`: the scripted fake upstream's answers
without a server or litellm, for tests that drive the proxy's code directly.

It answers like :mod:`groundproxy.testing.fake_upstream` (the first rule whose ``match`` is in
the last user message, else the default) and knows the same failure models: ``fail-500``
(an upstream error), ``fail-400`` (the upstream rejects the request), ``slow-<seconds>``,
``bad-json``, ``cut-stream`` (a stream that stops halfway, without a finish chunk) and
``drip-<seconds>`` (a wait before each streamed word). Streams go through the proxy's one
chunk parser (:class:`~proxy.upstream.types.ChunkStream`), so a cut stream fails as a real
one does. Every call is recorded in ``calls``.

    fake = FakeUpstream([{"match": "warranty", "answer": "It lasts 12 months."}])
    app = build_app(settings, build_deps(settings).replace(upstream=fake))
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field, replace
from typing import Any

from groundproxy.errors import BadRequestError, UpstreamError
from groundproxy.policies.schema import UpstreamPolicy
from groundproxy.proxy.upstream.types import (
    ChunkStream,
    Completion,
    Upstream,
    UpstreamAnswer,
    UpstreamCall,
)
from groundproxy.testing.fake_bodies import (
    DEFAULT_ANSWER,
    completion_body,
    embedding_body,
    pick_rule,
    stream_chunks,
    text_completion_body,
)


@dataclass
class FakeCall:
    """One call the fake received: what the proxy asked for."""

    model: str
    messages: list[dict[str, Any]]
    extra: dict[str, Any]
    stream: bool
    upstream: UpstreamPolicy = field(repr=False)


def _bare(model: str) -> str:
    """``openai/cut-stream`` → ``cut-stream`` (the provider prefix litellm strips)."""
    return model.split("/", 1)[1] if "/" in model else model


def _seconds(model: str, prefix: str) -> float:
    return float(model.removeprefix(prefix)) if model.startswith(prefix) else 0.0


def _passthrough(error: Exception) -> Exception:
    return error  # the fake raises our own errors already


class FakeUpstream(Upstream):
    """Scripted in-process upstream (see the module docstring)."""

    def __init__(
        self, rules: list[dict[str, Any]] | None = None, default: str = DEFAULT_ANSWER
    ) -> None:
        self.rules = list(rules or [])
        self.default = default
        self.calls: list[FakeCall] = []

    def _rule(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        return pick_rule(self.rules, {"messages": messages}, self.default)

    async def _open(self, call: UpstreamCall, stream: bool) -> None:
        """Record the call and play the model's failure mode (the error types and codes
        the real client maps those upstream failures to; the messages are the fake's)."""
        self.calls.append(FakeCall(call.model, call.messages, dict(call.extra), stream,
                                   call.upstream))  # fmt: skip
        model = _bare(call.model)
        if model == "fail-500":
            raise UpstreamError("upstream returned 500: upstream exploded")
        if model == "fail-400":
            raise BadRequestError("upstream rejected the request: bad temperature")
        if model == "bad-json":
            raise UpstreamError("upstream error: the upstream's body is not JSON")
        wait = _seconds(model, "slow-")
        if wait:
            await asyncio.sleep(wait)

    async def answer(self, call: UpstreamCall) -> UpstreamAnswer:
        started = time.perf_counter()
        await self._open(call, stream=False)
        rule = self._rule(call.messages)
        answer = str(rule.get("answer") or "")
        body = completion_body(answer, _bare(call.model), rule, bool(call.extra.get("logprobs")))
        return UpstreamAnswer(Completion.from_body(body), time.perf_counter() - started)

    async def open_stream(self, call: UpstreamCall) -> ChunkStream:
        started = time.perf_counter()
        await self._open(call, stream=True)
        name = _bare(call.model)
        rule = self._rule(call.messages)
        chunks = stream_chunks(
            str(rule.get("answer") or ""),
            name,
            cut=name == "cut-stream",
            drip_s=_seconds(name, "drip-"),
            rule=rule,
            options=call.extra,
        )
        return ChunkStream(chunks, _passthrough, started)

    async def embeddings(self, call: UpstreamCall, inputs: Any) -> tuple[dict[str, Any], float]:
        started = time.perf_counter()
        await self._open(replace(call, extra={**call.extra, "input": inputs}), stream=False)
        body = embedding_body(inputs, _bare(call.model), call.extra.get("encoding_format"))
        return body, time.perf_counter() - started

    async def completions(self, call: UpstreamCall, prompt: Any) -> tuple[dict[str, Any], float]:
        started = time.perf_counter()
        messages = [{"role": "user", "content": str(prompt)}]
        await self._open(replace(call, messages=messages), stream=False)
        answer = str(self._rule(messages).get("answer") or "")
        return text_completion_body(answer, _bare(call.model)), (time.perf_counter() - started)
