"""The upstream spoken to directly over the OpenAI wire protocol (``upstream.transport``).

For an OpenAI-compatible upstream (vLLM, Ollama, llama.cpp, LocalAI, another OpenAI
proxy, OpenAI itself) litellm translates nothing: it rebuilds the request, calls the OpenAI
SDK and rebuilds the answer as its own objects — about three quarters of the proxy's CPU per
unguarded request. :class:`WireUpstream` posts the client's body (``model`` replaced, every
other field as the client sent it) to ``{api_base}/chat/completions`` (``/embeddings``,
``/completions``) with one pooled ``httpx`` client, and reads the answer as plain JSON —
or, streamed, as server-sent events through the same :class:`~proxy.upstream.types.ChunkStream`
parser the litellm path uses. Error bodies are cut at :data:`ERROR_BODY_LIMIT` bytes
(:mod:`proxy.upstream.transport`) and map to the same codes as litellm's errors
(:mod:`proxy.upstream.errors`: a 4xx keeps its status — 400/401/403/404/409/422 —, 429 →
``rate_limited``, 503 → ``upstream_unavailable``, other statuses → ``upstream_error``,
refused/dropped → ``upstream_unreachable``, the policy's ``timeout_s`` →
``upstream_timeout``). A pooled
connection the server dropped before any answer is retried once, as on the litellm path.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import anyio
import httpx
import structlog

from groundproxy.errors import (
    GroundproxyError,
    UpstreamError,
)
from groundproxy.policies.schema import UpstreamPolicy
from groundproxy.proxy.forwarding import forwarded_headers
from groundproxy.proxy.openai.upstream_bodies import embeddings_body, text_body
from groundproxy.proxy.upstream.errors import (
    connection_error,
    error_sentence,
    failed_error,
    is_connection_drop,
)
from groundproxy.proxy.upstream.errors import status_error as status_mapped
from groundproxy.proxy.upstream.redact import redact, remember_secret
from groundproxy.proxy.upstream.transport import ERROR_BODY_LIMIT, BoundedErrorTransport
from groundproxy.proxy.upstream.types import (
    ChunkStream,
    Completion,
    Upstream,
    UpstreamAnswer,
    UpstreamCall,
)

__all__ = ["WIRE_PREFIXES", "WireUpstream", "wire_model"]

log = structlog.get_logger(__name__)

Json = dict[str, Any]
_MAX_EVENT_BYTES = 16 * 1024 * 1024  # one SSE event larger than this is not a chat chunk


#: litellm model strings that mean "an OpenAI-compatible API, this model name": the wire
#: client sends the name after the prefix.
WIRE_PREFIXES = ("openai/", "text-completion-openai/")


def wire_model(model: str) -> str:
    """The model name the upstream gets: a litellm-style ``openai/`` (or
    ``text-completion-openai/``) prefix is dropped."""
    for prefix in WIRE_PREFIXES:
        if model.startswith(prefix):
            return model[len(prefix) :]
    return model


def _headers(upstream: UpstreamPolicy) -> dict[str, str]:
    headers = {"content-type": "application/json", **forwarded_headers()}
    key = os.environ.get(upstream.api_key_env) if upstream.api_key_env else None
    if key:
        remember_secret(key)  # redacted from any upstream error text (proxy.upstream.redact)
        headers["authorization"] = f"Bearer {key}"
    return headers


def _url(upstream: UpstreamPolicy, path: str) -> str:
    base = upstream.api_base or "https://api.openai.com/v1"
    return f"{base.rstrip('/')}/{path}"


def _error_detail(body: bytes) -> tuple[str, str | None]:
    """The upstream's own message (redacted) and ``code`` from an error body (OpenAI's
    shape, or its text)."""
    text = body.decode("utf-8", "replace")
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    code = None
    if isinstance(data, dict):
        err = data.get("error", data)
        msg = err.get("message") if isinstance(err, dict) else err
        text = msg if isinstance(msg, str) else json.dumps(msg)
        raw_code = err.get("code") if isinstance(err, dict) else None
        code = raw_code if isinstance(raw_code, str) else None
    return redact(" ".join(text.split()).rstrip("."))[:500], code


def status_error(status: int, body: bytes, headers: httpx.Headers) -> GroundproxyError:
    """An upstream error response → our tree (``proxy.upstream.errors.status_error``)."""
    log.warning("upstream_error", error_type="HTTPStatus", status=status)
    mapped = status_mapped(status, *_error_detail(body))
    value = headers.get("retry-after")
    mapped.retry_after = value.strip()[:32] if value and value.strip() else None
    return mapped


def map_wire_error(exc: Exception) -> GroundproxyError:
    """A transport failure (or ours, passed through) → our tree."""
    if isinstance(exc, GroundproxyError):
        return exc
    log.warning("upstream_error", error_type=type(exc).__name__, status=None)
    return connection_error(exc) or failed_error(redact(" ".join(str(exc).split()))[:500])


def _too_large(limit: int) -> UpstreamError:
    return UpstreamError(f"The upstream's answer was longer than {limit} bytes and was not read.")


def _not_json(what: str) -> UpstreamError:
    return UpstreamError(f"The upstream model provider answered with {what}, not JSON.")


async def _sse_chunks(response: httpx.Response) -> AsyncGenerator[Json, None]:
    """``data:`` events of a chat stream as dicts, up to ``[DONE]``; an ``error`` event
    raises. :meth:`_EventStream.aclose` closes the response."""
    data: list[str] = []
    async for line in response.aiter_lines():
        if line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
            if sum(len(d) for d in data) > _MAX_EVENT_BYTES:
                raise UpstreamError("The upstream sent a stream event over 16 MiB.")
            continue
        if line or not data:
            continue  # comments, event:/id: fields; blank lines between events
        payload, data = "\n".join(data), []
        if payload.strip() == "[DONE]":
            return
        chunk = _event(payload)
        if chunk is not None:
            yield chunk
    if data and "\n".join(data).strip() != "[DONE]":  # a last event without a blank line
        chunk = _event("\n".join(data))
        if chunk is not None:
            yield chunk


def _event(payload: str) -> Json | None:
    """One SSE ``data`` payload → a chunk dict (an ``error`` event raises)."""
    try:
        chunk = json.loads(payload)
    except ValueError as exc:
        raise _not_json("a stream event") from exc
    if not isinstance(chunk, dict):
        return None
    if chunk.get("error") and not chunk.get("choices"):
        detail, _ = _error_detail(json.dumps(chunk).encode())
        raise UpstreamError(error_sentence("The upstream's stream failed", detail))
    return chunk


def _pool() -> httpx.AsyncBaseTransport:
    """One event loop's connection pool: no cap on open connections (the admission
    control and the upstream's own limits decide), idle ones kept for reuse."""
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=200)
    return httpx.AsyncHTTPTransport(limits=limits)


class _EventStream:
    """The open SSE response as an async iterable of chunk dicts. ``aclose()`` closes the
    response, shielded; a stream left before its end (a client hang-up) also has its
    connection's socket closed outright, so the upstream hears it at once: the hang-up
    cancels a read in flight in another task, and httpx then counts the response closed
    while its pooled connection stays open and unread."""

    def __init__(self, response: httpx.Response) -> None:
        self._response = response
        self._ended = False
        self._events = self._read()

    async def _read(self) -> AsyncGenerator[Json, None]:
        async for chunk in _sse_chunks(self._response):
            yield chunk
        self._ended = True

    def __aiter__(self) -> AsyncIterator[Json]:
        return self._events

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            # RuntimeError: a read still pending in a cancelled task (the response closes it)
            with contextlib.suppress(RuntimeError):
                await self._events.aclose()
            socket = self._response.extensions.get("network_stream")
            if not self._ended and socket is not None:
                with contextlib.suppress(Exception):
                    await socket.aclose()
            await self._response.aclose()


class WireUpstream(Upstream):
    """The :class:`~proxy.upstream.types.Upstream` of ``transport: openai`` (module
    docstring); one per process, its connection pool shared by every tenant using it."""

    def __init__(
        self, max_body_bytes: int | None = None, client: httpx.AsyncClient | None = None
    ) -> None:
        # ``client``: another WireUpstream's (:meth:`capped`): one connection pool, closed
        # by its owner
        self._client = client or httpx.AsyncClient(transport=BoundedErrorTransport(inner=_pool))
        # a plain (not streamed) answer's body is read up to this many bytes (decoded), a
        # longer one refused before it is parsed (the judge's client sets it)
        self._max_body = max_body_bytes

    def capped(self, max_body_bytes: int) -> WireUpstream:
        """This client's connection pool, plain answers' bodies read up to
        ``max_body_bytes`` (the judge's); closing this one closes the pool too."""
        return WireUpstream(max_body_bytes, self._client)

    async def aclose(self) -> None:
        await self._client.aclose()

    async def _send(
        self, upstream: UpstreamPolicy, path: str, body: Json, *, stream: bool
    ) -> httpx.Response:
        """POST, retried once when a pooled connection was dropped before any answer;
        an error status raises (its body is bounded by the transport)."""
        request = self._client.build_request(
            "POST",
            _url(upstream, path),
            content=json.dumps(body).encode(),
            headers=_headers(upstream),
            timeout=upstream.timeout_s,
        )
        try:
            try:
                response = await self._client.send(request, stream=True)
            except Exception as exc:
                if not is_connection_drop(exc):
                    raise
                log.info("upstream_connection_dropped_retrying")
                response = await self._client.send(request, stream=True)
            if response.status_code >= 400:
                content = await response.aread()
                await response.aclose()
                raise status_error(response.status_code, content[:ERROR_BODY_LIMIT],
                                   response.headers)  # fmt: skip
            if not stream:
                try:
                    await response.aread()
                finally:
                    await response.aclose()
        except Exception as exc:
            raise map_wire_error(exc) from exc
        return response

    async def _body(self, upstream: UpstreamPolicy, path: str, body: Json) -> bytes:
        """The answer's body, read whole, or (``max_body_bytes``) read up to the cap: a
        declared or actual length over it raises ``upstream_error`` unread/unparsed."""
        limit = self._max_body
        if limit is None:
            return (await self._send(upstream, path, body, stream=False)).content
        response = await self._send(upstream, path, body, stream=True)
        got = bytearray()
        try:
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > limit:
                raise _too_large(limit)
            async for chunk in response.aiter_bytes():
                got += chunk
                if len(got) > limit:
                    raise _too_large(limit)
        except Exception as exc:
            raise map_wire_error(exc) from exc
        finally:
            await response.aclose()
        return bytes(got)

    async def _json(self, upstream: UpstreamPolicy, path: str, body: Json) -> tuple[Json, float]:
        started = time.perf_counter()
        raw = await self._body(upstream, path, body)
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise _not_json("a body that is not JSON") from exc
        if not isinstance(data, dict):
            raise _not_json("a JSON value that is not an object")
        return data, time.perf_counter() - started

    async def answer(self, call: UpstreamCall) -> UpstreamAnswer:
        """One completion (``Upstream.complete`` collects a streamed one)."""
        body = {**call.extra, "model": wire_model(call.model), "messages": call.messages}
        data, seconds = await self._json(call.upstream, "chat/completions", body)
        if not isinstance(data.get("choices"), list):
            raise UpstreamError("The upstream model provider answered without any choices.")
        return UpstreamAnswer(Completion.from_body(data), seconds)

    async def open_stream(self, call: UpstreamCall) -> ChunkStream:
        """Open a streamed completion; connection and status errors raise here."""
        body = {**call.extra, "model": wire_model(call.model), "messages": call.messages,
                "stream": True}  # fmt: skip
        started = time.perf_counter()
        response = await self._send(call.upstream, "chat/completions", body, stream=True)
        return ChunkStream(_EventStream(response), map_wire_error, started)

    async def embeddings(self, call: UpstreamCall, inputs: Any) -> tuple[Json, float]:
        """``POST {api_base}/embeddings``: the upstream's body as it is."""
        body = {k: v for k, v in call.extra.items() if v is not None}
        data, seconds = await self._json(
            call.upstream, "embeddings", {**body, "model": wire_model(call.model), "input": inputs}
        )
        return embeddings_body(data), seconds

    async def completions(self, call: UpstreamCall, prompt: Any) -> tuple[Json, float]:
        """``POST {api_base}/completions`` (legacy completions): the upstream's body."""
        body = {**call.extra, "model": wire_model(call.model), "prompt": prompt}
        data, seconds = await self._json(call.upstream, "completions", body)
        return text_body(data), seconds
