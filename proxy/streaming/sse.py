"""Server-sent events for ``stream: true`` responses (OpenAI's chunk format)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncGenerator, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from groundproxy.errors import GroundproxyError
from groundproxy.proxy.errors import error_code, exception_body
from groundproxy.proxy.openai.shape import shape_delta, shape_usage

if TYPE_CHECKING:
    from groundproxy.proxy.upstream.client import StreamDelta

log = structlog.get_logger(__name__)

_PIECE = re.compile(r"\S+\s*|\s+")


def sse(data: dict[str, Any] | str) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return f"data: {payload}\n\n".encode()


class Closable(Protocol):
    async def aclose(self) -> None: ...


@dataclass
class StreamEnd:
    """How an incremental stream ended: ``failed`` once :func:`until_failure` sent the error
    event; ``event``: the log event of that failure."""

    event: str
    failed: bool = False


async def until_failure(
    events: AsyncGenerator[bytes, None], end: StreamEnd, closing: Sequence[Closable]
) -> AsyncGenerator[bytes, None]:
    """``events`` as they come; when one of our errors ends them (an upstream failure after
    the first byte, a stream deadline), an OpenAI-shaped ``{"error": …}`` event, then
    ``[DONE]`` (``end.failed`` is set: the caller sends nothing more). ``events`` and the
    ``closing`` streams are closed whatever ends it, a client hang-up included (close this
    one, e.g. with ``contextlib.aclosing``)."""
    try:
        async for event in events:
            yield event
    except GroundproxyError as exc:
        end.failed = True
        log.warning(end.event, error=exc.message, code=error_code(exc))
        yield sse(exception_body(exc))
        yield sse("[DONE]")
    finally:
        await events.aclose()
        for source in closing:
            await source.aclose()


class ChunkWriter:
    """The chunks of one incremental stream (sentence mode, relay): OpenAI's chunk fields,
    with the id, created time, fingerprint, usage and finish reason the upstream reports as
    it goes. Tool-call and function-call deltas pass through as they come; ``include_usage``
    puts the usage in a final ``choices: []`` chunk, as OpenAI does."""

    def __init__(self, chunk_id: str, model: str, include_usage: bool = False) -> None:
        self.base: dict[str, Any] = {
            "id": chunk_id, "object": "chat.completion.chunk",
            "created": int(time.time()), "model": model,
        }  # fmt: skip
        self.include_usage = include_usage
        self.usage: dict[str, Any] | None = None
        self.finish: str | None = None

    def note(self, d: StreamDelta) -> bool:
        """Take what an upstream delta says about the stream; True for choice 0's deltas."""
        if d.id:
            self.base["id"] = d.id
        if d.created:
            self.base["created"] = d.created
        if d.system_fingerprint:
            self.base["system_fingerprint"] = d.system_fingerprint
        if d.usage:
            self.usage = d.usage
        if d.index != 0:
            return False
        if d.finish_reason:
            self.finish = d.finish_reason
        return True

    def chunk(self, delta: dict[str, Any], logprobs: dict[str, Any] | None = None) -> bytes:
        choice: dict[str, Any] = {"index": 0, "delta": shape_delta(delta), "finish_reason": None}
        if logprobs:
            choice["logprobs"] = logprobs
        return sse({**self.base, "choices": [choice]})

    def calls(self, d: StreamDelta) -> bytes:
        """The delta's tool-call / function-call parts, untouched ("" when it has none)."""
        delta: dict[str, Any] = {}
        if d.tool_calls:
            delta["tool_calls"] = d.tool_calls
        if d.function_call:
            delta["function_call"] = d.function_call
        return self.chunk(delta) if delta else b""

    def last(self, finish_reason: str, groundproxy: dict[str, Any]) -> bytes:
        """The final chunk(s): finish reason, usage when asked for, the ``groundproxy`` object."""
        return last_chunks(
            self.base,
            [{"index": 0, "delta": {}, "finish_reason": finish_reason}],
            shape_usage(self.usage) if self.include_usage else None,
            groundproxy,
        )


def last_chunks(
    base: dict[str, Any],
    finishes: list[dict[str, Any]],
    usage: dict[str, Any] | None,
    groundproxy: dict[str, Any] | None,
) -> bytes:
    """The finish chunk, then (with ``usage``) a ``choices: []`` usage chunk; ``groundproxy``
    rides on the last of them, the last event before ``[DONE]``."""
    finish: dict[str, Any] = {**base, "choices": finishes}
    if usage is None:
        if groundproxy is not None:
            finish["groundproxy"] = groundproxy
        return sse(finish)
    tail: dict[str, Any] = {**base, "choices": [], "usage": usage}
    if groundproxy is not None:
        tail["groundproxy"] = groundproxy
    return sse(finish) + sse(tail)


def _pieces(text: str, words_per_piece: int = 4) -> Iterator[str]:
    words = _PIECE.findall(text)
    for i in range(0, len(words), words_per_piece):
        yield "".join(words[i : i + words_per_piece])


def _call_deltas(message: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """A whole message's tool calls (and legacy function call) as stream deltas."""
    for i, call in enumerate(message.get("tool_calls") or []):
        yield {"tool_calls": [{**call, "index": i}]}
    if message.get("function_call"):
        yield {"function_call": message["function_call"]}


def completion_to_chunks(body: dict[str, Any], include_usage: bool = False) -> Iterator[bytes]:
    """Re-emit a whole (guarded) completion as SSE chunks: text in pieces (the choice's
    logprobs with the first), then its tool calls; ``groundproxy`` rides in the last chunk
    before ``[DONE]``."""
    base = {
        "id": body.get("id"),
        "object": "chat.completion.chunk",
        "created": body.get("created"),
        "model": body.get("model"),
    }
    if body.get("system_fingerprint"):
        base["system_fingerprint"] = body["system_fingerprint"]
    choices = body.get("choices") or []
    for choice in choices:
        idx = choice.get("index", 0)
        message = choice.get("message") or {}
        logprobs = choice.get("logprobs")

        def chunk(delta: dict[str, Any], idx: int = idx) -> bytes:
            return sse({**base, "choices": [{"index": idx, "delta": delta, "finish_reason": None}]})

        yield chunk({"role": message.get("role", "assistant"), "content": ""})
        for piece in _pieces(message.get("content") or ""):
            out: dict[str, Any] = {"index": idx, "delta": {"content": piece}, "finish_reason": None}
            if logprobs:
                out["logprobs"], logprobs = logprobs, None
            yield sse({**base, "choices": [out]})
        for delta in _call_deltas(message):
            yield chunk(delta)
    finishes = [
        {"index": c.get("index", 0), "delta": {}, "finish_reason": c.get("finish_reason")}
        for c in choices
    ]
    usage = shape_usage(body.get("usage")) if include_usage else None
    yield last_chunks(base, finishes, usage, body.get("groundproxy"))
    yield sse("[DONE]")
