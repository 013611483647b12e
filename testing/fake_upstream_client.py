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
from dataclasses import dataclass, field
from typing import Any

from groundproxy.errors import BadRequestError, UpstreamError
from groundproxy.policies.schema import UpstreamPolicy
from groundproxy.proxy.upstream.types import ChunkStream, Completion, UpstreamAnswer, collect
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


class FakeUpstream:
    """Scripted in-process upstream (see the module docstring)."""

    def __init__(
        self, rules: list[dict[str, Any]] | None = None, default: str = DEFAULT_ANSWER
    ) -> None:
        self.rules = list(rules or [])
        self.default = default
        self.calls: list[FakeCall] = []

    def _rule(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        return pick_rule(self.rules, {"messages": messages}, self.default)

    async def _open(
        self,
        upstream: UpstreamPolicy,
        model: str,
        messages: list[dict[str, Any]],
        extra: dict[str, Any],
        stream: bool,
    ) -> None:
        """Record the call and play the model's failure mode (the error types and codes
        the real client maps those upstream failures to; the messages are the fake's)."""
        self.calls.append(FakeCall(model, messages, dict(extra), stream, upstream))
        model = _bare(model)
        if model == "fail-500":
            raise UpstreamError("upstream returned 500: upstream exploded")
        if model == "fail-400":
            raise BadRequestError("upstream rejected the request: bad temperature")
        if model == "bad-json":
            raise UpstreamError("upstream error: the upstream's body is not JSON")
        wait = _seconds(model, "slow-")
        if wait:
            await asyncio.sleep(wait)

    async def complete(
        self,
        upstream: UpstreamPolicy,
        model: str,
        messages: list[dict[str, Any]],
        extra: dict[str, Any],
        stream: bool = False,
    ) -> UpstreamAnswer:
        if stream:
            return await collect(await self.stream(upstream, model, messages, extra))
        started = time.perf_counter()
        await self._open(upstream, model, messages, extra, stream=False)
        rule = self._rule(messages)
        answer = str(rule.get("answer") or "")
        body = completion_body(answer, _bare(model), rule, bool(extra.get("logprobs")))
        return UpstreamAnswer(Completion.from_body(body), time.perf_counter() - started)

    async def stream(
        self,
        upstream: UpstreamPolicy,
        model: str,
        messages: list[dict[str, Any]],
        extra: dict[str, Any],
    ) -> ChunkStream:
        started = time.perf_counter()
        await self._open(upstream, model, messages, extra, stream=True)
        name = _bare(model)
        rule = self._rule(messages)
        chunks = stream_chunks(
            str(rule.get("answer") or ""),
            name,
            cut=name == "cut-stream",
            drip_s=_seconds(name, "drip-"),
            rule=rule,
            options=extra,
        )
        return ChunkStream(chunks, _passthrough, started)

    async def embed(
        self, upstream: UpstreamPolicy, model: str, inputs: Any, extra: dict[str, Any]
    ) -> tuple[dict[str, Any], float]:
        started = time.perf_counter()
        await self._open(upstream, model, [], {**extra, "input": inputs}, stream=False)
        body = embedding_body(inputs, _bare(model), extra.get("encoding_format"))
        return body, time.perf_counter() - started

    async def text_complete(
        self, upstream: UpstreamPolicy, model: str, prompt: Any, extra: dict[str, Any]
    ) -> tuple[dict[str, Any], float]:
        started = time.perf_counter()
        messages = [{"role": "user", "content": str(prompt)}]
        await self._open(upstream, model, messages, extra, stream=False)
        answer = str(self._rule(messages).get("answer") or "")
        return text_completion_body(answer, _bare(model)), (time.perf_counter() - started)
