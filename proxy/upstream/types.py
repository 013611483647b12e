"""What an upstream gives back, typed, and the :class:`Upstream` protocol the proxy calls.

* :class:`Completion` — a whole answer: ``id``/``created``/``model``, one
  :class:`CompletionChoice` per choice (text, finish reason, and ``tool_calls`` /
  ``function_call`` / ``logprobs`` when the upstream sent them), ``usage`` and
  ``system_fingerprint``; ``body`` is the OpenAI-shaped dict the client gets (the
  upstream's own for a plain call; for a collected stream the body built by
  :func:`collect`, tool calls, logprobs and fingerprint included).
* :class:`StreamDelta` — one choice's part of one streamed chunk. Every streamed call asks
  the upstream for its usage (:func:`asking_usage`), whatever the client asked.
* :class:`ChunkStream` — THE stream parser: any async iterable of OpenAI chunks (litellm's
  objects or plain dicts) → :class:`StreamDelta` s; a stream that ends without a
  ``finish_reason`` raises ``upstream_incomplete``. :func:`collect` folds one into a
  :class:`Completion` (``complete(..., stream=True)``).

Implementations (subclasses of :class:`Upstream`, each writing its four calls on one
:class:`UpstreamCall`): ``proxy.upstream.client.UpstreamClient`` (litellm),
``proxy.upstream.wire.WireUpstream`` (the OpenAI wire protocol) and
``groundproxy.testing.fake_upstream_client.FakeUpstream`` (in process, scripted).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterable, AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog

from groundproxy.errors import UpstreamError
from groundproxy.policies.schema import UpstreamPolicy
from groundproxy.proxy.openai.upstream_bodies import chat_body, chunk_body
from groundproxy.proxy.upstream.checks import AnswerSeen

log = structlog.get_logger(__name__)

Json = dict[str, Any]


@dataclass
class StreamDelta:
    """One upstream stream chunk's part for one choice: choice ``index``, ``role`` /
    ``content`` deltas, ``finish_reason``, ``usage`` (on the chunk's last delta), the
    chunk's ``id``/``created``/``model``/``system_fingerprint``, and the ``tool_calls`` /
    ``function_call`` deltas and ``logprobs`` when the upstream sends them."""

    index: int = 0
    role: str | None = None
    content: str = ""
    finish_reason: str | None = None
    usage: Json | None = None
    id: str | None = None
    created: int | None = None
    model: str | None = None
    tool_calls: list[Json] | None = None
    function_call: Json | None = None
    logprobs: Json | None = None
    system_fingerprint: str | None = None


@dataclass
class CompletionChoice:
    index: int
    role: str = "assistant"
    content: str | None = None
    finish_reason: str | None = None
    tool_calls: list[Json] | None = None
    function_call: Json | None = None
    logprobs: Json | None = None


@dataclass
class Completion:
    """One whole upstream answer (see the module docstring); ``body`` is what the proxy
    rewrites and returns."""

    id: str | None
    created: int | None
    model: str | None
    choices: list[CompletionChoice]
    body: Json
    usage: Json | None = None
    system_fingerprint: str | None = None

    @classmethod
    def from_body(cls, body: Json) -> Completion:
        """Parse an OpenAI ``chat.completion`` body (kept as ``body``); a malformed one is
        ``upstream_invalid`` (:mod:`proxy.openai.upstream_bodies`)."""
        chat_body(body)
        choices = []
        for c in body.get("choices") or []:
            message = c.get("message") or {}
            content = message.get("content")
            choices.append(CompletionChoice(
                index=int(c.get("index") or 0),
                role=message.get("role") or "assistant",
                content=content if isinstance(content, str) else None,
                finish_reason=c.get("finish_reason"),
                tool_calls=message.get("tool_calls") or None,
                function_call=message.get("function_call") or None,
                logprobs=c.get("logprobs") or None,
            ))  # fmt: skip
        return cls(
            id=body.get("id"), created=body.get("created"), model=body.get("model"),
            choices=choices, body=body, usage=body.get("usage") or None,
            system_fingerprint=body.get("system_fingerprint"),
        )  # fmt: skip


@dataclass
class UpstreamAnswer:
    """A whole upstream completion, how long it took, and (for a collected stream) how many
    chunks it came in."""

    completion: Completion
    seconds: float
    chunks: int = 0
    extra: Json = field(default_factory=dict)

    @property
    def body(self) -> Json:
        return self.completion.body


class UpstreamStream(Protocol):
    """An open upstream stream: iterate it for :class:`StreamDelta` s (errors mapped to
    our tree); ``aclose()`` stops reading."""

    chunks: int
    started: float

    def __aiter__(self) -> AsyncIterator[StreamDelta]: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True)
class UpstreamCall:
    """One call to the upstream: the tenant's upstream settings, the (litellm) model string,
    the chat messages (none for embeddings and legacy completions) and every other OpenAI
    field the client sent (``extra``)."""

    upstream: UpstreamPolicy
    model: str
    messages: list[Json]
    extra: Json


class Upstream(Protocol):
    """The upstream LLM as the proxy sees it. ``complete`` returns a whole answer (with
    ``stream`` the upstream streams and the chunks are collected); ``stream`` opens a
    stream, raising connection and status errors before any byte reaches the client.
    ``embed`` (``POST /v1/embeddings``) and ``text_complete`` (legacy ``/v1/completions``)
    return the upstream's OpenAI body as it is, and the seconds the call took.

    These four are written here once: an implementation subclasses :class:`Upstream` and
    writes the four calls below them, each given one :class:`UpstreamCall` (as an httpx
    transport writes ``handle_async_request``)."""

    async def complete(
        self,
        upstream: UpstreamPolicy,
        model: str,
        messages: list[Json],
        extra: Json,
        stream: bool = False,
    ) -> UpstreamAnswer:
        if stream:
            call = UpstreamCall(upstream, model, messages, asking_usage(extra))
            return await collect(await self.open_stream(call))
        return await self.answer(UpstreamCall(upstream, model, messages, extra))

    async def stream(
        self, upstream: UpstreamPolicy, model: str, messages: list[Json], extra: Json
    ) -> UpstreamStream:
        call = UpstreamCall(upstream, model, messages, asking_usage(extra))
        return await self.open_stream(call)

    async def embed(
        self, upstream: UpstreamPolicy, model: str, inputs: Any, extra: Json
    ) -> tuple[Json, float]:
        return await self.embeddings(UpstreamCall(upstream, model, [], extra), inputs)

    async def text_complete(
        self, upstream: UpstreamPolicy, model: str, prompt: Any, extra: Json
    ) -> tuple[Json, float]:
        return await self.completions(UpstreamCall(upstream, model, [], extra), prompt)

    # -- what an implementation writes --

    async def answer(self, call: UpstreamCall) -> UpstreamAnswer:
        """One whole (not streamed) chat completion."""
        ...

    async def open_stream(self, call: UpstreamCall) -> ChunkStream:
        """A streamed chat completion, opened (errors before the first byte raise here)."""
        ...

    async def embeddings(self, call: UpstreamCall, inputs: Any) -> tuple[Json, float]:
        """``/v1/embeddings`` of ``inputs``: the upstream's body and the seconds it took."""
        ...

    async def completions(self, call: UpstreamCall, prompt: Any) -> tuple[Json, float]:
        """Legacy ``/v1/completions`` of ``prompt``: the upstream's body and seconds."""
        ...


def asking_usage(extra: Json) -> Json:
    """A streamed call's fields with ``stream_options.include_usage`` set: the upstream
    reports the stream's token usage whether or not the client asked for it, so
    ``groundproxy_tokens_total`` counts every streamed answer. The client's own stream is
    written by the proxy (:mod:`proxy.streaming.sse`) and carries the usage chunk only when
    the client asked for it (``wants_usage`` of the client's request)."""
    options = extra.get("stream_options")
    options = dict(options) if isinstance(options, dict) else {}
    return {**extra, "stream_options": {**options, "include_usage": True}}


def _incomplete(chunks: int) -> UpstreamError:
    return UpstreamError(
        f"upstream stream incomplete: it ended after {chunks} chunks without a finish_reason",
        code="upstream_incomplete",
    )


def parse_chunk(chunk: Any) -> tuple[Json, list[StreamDelta]]:
    """One OpenAI chunk (an object with ``model_dump`` or a mapping) → its ``id`` /
    ``created`` / ``model`` and its deltas (usage rides on the last one, or alone)."""
    # warnings=False: a field of an odd type (content as a list of parts) would have
    # pydantic print its value — the answer's text — to stderr
    raw = chunk.model_dump(warnings=False) if hasattr(chunk, "model_dump") else chunk
    data = chunk_body(dict(raw) if isinstance(raw, Mapping) else raw)
    meta: Json = {"id": data.get("id"), "created": data.get("created"), "model": data.get("model")}
    fingerprint = data.get("system_fingerprint")
    usage = data.get("usage") or None
    out = []
    for c in data.get("choices") or []:
        delta = c.get("delta") or {}
        out.append(StreamDelta(
            index=int(c.get("index") or 0), role=delta.get("role"),
            content=delta.get("content") or "", finish_reason=c.get("finish_reason"),
            tool_calls=delta.get("tool_calls") or None,
            function_call=delta.get("function_call") or None,
            logprobs=c.get("logprobs") or None, system_fingerprint=fingerprint, **meta,
        ))  # fmt: skip
    if usage:
        if out:
            out[-1].usage = usage
        else:
            out.append(StreamDelta(usage=usage, system_fingerprint=fingerprint, **meta))
    return meta, out


class ChunkStream:
    """An open stream of OpenAI chunks (the :class:`UpstreamStream` of both upstreams).

    ``map_error`` turns an exception raised while reading into our error tree; ``first``
    holds the first chunk's ``id``/``created``/``model``. ``aclose()`` closes the source
    (an async generator, or litellm's wrapper around the HTTP response).
    """

    def __init__(
        self,
        raw: AsyncIterable[Any],
        map_error: Callable[[Exception], Exception],
        started: float,
    ) -> None:
        self._raw = raw
        self._map_error = map_error
        self.started = started
        self.chunks = 0
        self.first: Json = {}

    async def __aiter__(self) -> AsyncIterator[StreamDelta]:
        finished, seen = False, AnswerSeen()
        try:
            async for chunk in self._raw:
                self.chunks += 1
                meta, deltas = parse_chunk(chunk)
                if self.chunks == 1:
                    self.first = meta
                for d in deltas:
                    seen.check(d, self.chunks)  # a finish with no answer is an error
                    finished = finished or bool(d.finish_reason)
                    yield d
        except Exception as exc:
            raise self._map_error(exc) from exc
        if not finished:
            raise _incomplete(self.chunks)

    async def aclose(self) -> None:
        close = getattr(self._raw, "aclose", None)
        if close is None:
            stream = getattr(self._raw, "completion_stream", None)
            close = getattr(stream, "aclose", None)
        if close is not None:
            try:
                await close()
            except Exception:  # closing a half-read stream must not raise in turn
                log.debug("upstream_stream_close_failed")


def _merge_tool_calls(into: list[Json], parts: list[Json]) -> None:
    """Fold streamed ``tool_calls`` deltas (by their ``index``) into whole calls."""
    for part in parts:
        i = int(part.get("index") or 0)
        while len(into) <= i:
            into.append({"id": None, "type": "function", "function": {"name": "", "arguments": ""}})
        call = into[i]
        call["id"] = part.get("id") or call["id"]
        call["type"] = part.get("type") or call["type"]
        fn = part.get("function") or {}
        call["function"]["name"] += fn.get("name") or ""
        call["function"]["arguments"] += fn.get("arguments") or ""


@dataclass
class _Choice:
    role: str | None = None
    text: list[str] = field(default_factory=list)
    finish: str | None = None
    tool_calls: list[Json] = field(default_factory=list)
    function_call: Json | None = None
    logprobs: list[Any] = field(default_factory=list)

    def add(self, d: StreamDelta) -> None:
        self.role = d.role or self.role
        if d.content:
            self.text.append(d.content)
        self.finish = d.finish_reason or self.finish
        _merge_tool_calls(self.tool_calls, d.tool_calls or [])
        if d.function_call:
            fc = self.function_call = self.function_call or {"name": "", "arguments": ""}
            fc["name"] += d.function_call.get("name") or ""
            fc["arguments"] += d.function_call.get("arguments") or ""
        self.logprobs.extend((d.logprobs or {}).get("content") or [])


def _choice_body(c: CompletionChoice) -> Json:
    """One collected choice as OpenAI's ``chat.completion`` choice (tool calls included)."""
    message: Json = {"role": c.role, "content": c.content}
    if c.tool_calls:
        message["tool_calls"] = c.tool_calls
    if c.function_call:
        message["function_call"] = c.function_call
    return {"index": c.index, "message": message, "logprobs": c.logprobs,
            "finish_reason": c.finish_reason}  # fmt: skip


async def collect(stream: ChunkStream) -> UpstreamAnswer:
    """Read ``stream`` to its end into one :class:`Completion` (closing it either way). A
    stream with nothing but a finish chunk (what litellm synthesizes when the body held no
    SSE event at all) is ``upstream_incomplete`` too, never a clean empty answer."""
    by_index: dict[int, _Choice] = {}
    usage: Json | None = None
    fingerprint: str | None = None
    try:
        async for d in stream:
            usage = d.usage or usage
            fingerprint = d.system_fingerprint or fingerprint
            if not (d.role or d.content or d.finish_reason or d.tool_calls or d.function_call):
                continue  # an empty delta (or a usage-only chunk) adds no choice
            by_index.setdefault(d.index, _Choice()).add(d)
    finally:
        await stream.aclose()
    if not any(c.text or c.role or c.tool_calls or c.function_call for c in by_index.values()):
        raise _incomplete(stream.chunks)
    first = stream.first
    choices = [
        CompletionChoice(
            index=i, role=c.role or "assistant",
            content="".join(c.text) or (None if c.tool_calls or c.function_call else ""),
            finish_reason=c.finish or "stop", tool_calls=c.tool_calls or None,
            function_call=c.function_call,
            logprobs={"content": c.logprobs, "refusal": None} if c.logprobs else None,
        )
        for i, c in sorted(by_index.items())
    ]  # fmt: skip
    body: Json = {
        "id": first.get("id") or "chatcmpl-groundproxy",
        "object": "chat.completion",
        "created": first.get("created") or int(time.time()),
        "model": first.get("model"),
        "choices": [_choice_body(c) for c in choices],
    }
    if fingerprint:
        body["system_fingerprint"] = fingerprint
    if usage:
        body["usage"] = usage
    completion = Completion(
        id=body["id"], created=body["created"], model=body["model"], choices=choices,
        body=body, usage=usage, system_fingerprint=fingerprint,
    )  # fmt: skip
    return UpstreamAnswer(completion, time.perf_counter() - stream.started, chunks=stream.chunks)
