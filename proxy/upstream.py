"""The upstream LLM call, through ``litellm.acompletion``, with errors mapped at the boundary.

litellm is imported lazily (in the app's lifespan) and only after
``LITELLM_LOCAL_MODEL_COST_MAP=True`` is set, so it never fetches its price map.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import structlog

from groundproxy.guards.errors import (
    BadRequestError,
    RateLimitError,
    UnknownModelError,
    UpstreamError,
    UpstreamTimeoutError,
)
from groundproxy.policies.schema import UpstreamPolicy
from groundproxy.proxy.redact import redact, remember_secret
from groundproxy.proxy.stream_checks import AnswerSeen

log = structlog.get_logger(__name__)


def import_litellm() -> Any:
    """Import litellm offline-safe (no price-map download, no telemetry)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    import litellm

    litellm.telemetry = False
    litellm.suppress_debug_info = True
    return litellm


@dataclass
class UpstreamAnswer:
    """A whole upstream completion (streams are collected into one)."""

    body: dict[str, Any]
    seconds: float
    chunks: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def resolve_model(upstream: UpstreamPolicy, client_model: str) -> str:
    """Client-visible model name → litellm model string, per the policy's map."""
    if client_model in upstream.models:
        return upstream.models[client_model]
    if upstream.restrict_models:
        known = ", ".join(sorted(upstream.models)) or "(none)"
        raise UnknownModelError(
            f"The model '{client_model}' does not exist or you do not have access to it. "
            f"Models for this key: {known}",
            param="model",
        )
    return upstream.model


OPENAI_CHAT_PARAMS = frozenset(
    {
        "audio",
        "frequency_penalty",
        "function_call",
        "functions",
        "logit_bias",
        "logprobs",
        "max_completion_tokens",
        "max_tokens",
        "metadata",
        "modalities",
        "n",
        "parallel_tool_calls",
        "prediction",
        "presence_penalty",
        "reasoning_effort",
        "response_format",
        "seed",
        "service_tier",
        "stop",
        "store",
        "stream_options",
        "temperature",
        "tool_choice",
        "tools",
        "top_logprobs",
        "top_p",
        "user",
        "web_search_options",
    }
)


def upstream_kwargs(
    upstream: UpstreamPolicy,
    model: str,
    messages: list[dict[str, Any]],
    extra: dict[str, Any],
) -> dict[str, Any]:
    """litellm.acompletion keyword arguments for one call.

    OpenAI's own chat parameters go to litellm as keywords (it translates them for other
    providers); every other client field rides in ``extra_body``, so it reaches the upstream
    untouched and can never steer litellm itself (``api_base``, ``api_key``,
    ``mock_response``, credentials …): routing and keys come from the policy alone.
    """
    kwargs: dict[str, Any] = {k: v for k, v in extra.items() if k in OPENAI_CHAT_PARAMS}
    unknown = {k: v for k, v in extra.items() if k not in OPENAI_CHAT_PARAMS}
    if unknown:
        kwargs["extra_body"] = unknown
    kwargs.update(
        model=model,
        messages=messages,
        timeout=upstream.timeout_s,
        num_retries=0,
        max_retries=0,
    )
    if upstream.api_base:
        kwargs["api_base"] = upstream.api_base
    key = os.environ.get(upstream.api_key_env) if upstream.api_key_env else None
    if key:
        remember_secret(key)  # redacted from any upstream error text (proxy.redact)
        kwargs["api_key"] = key
    elif upstream.api_base:
        # A self-hosted OpenAI-compatible server (vLLM, Ollama …) often needs no key, but
        # the client library refuses to send a request without one.
        kwargs["api_key"] = "groundproxy-no-key"
    return kwargs


def is_connection_drop(exc: BaseException) -> bool:
    """Did the connection fail before any answer (not a timeout, not an HTTP status)?

    litellm re-wraps openai's ``APIConnectionError`` (sometimes as a 500
    ``InternalServerError``), so the whole ``__cause__``/``__context__`` chain is read.
    """
    import httpx
    import openai

    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, openai.APITimeoutError | httpx.TimeoutException | TimeoutError):
            return False
        if isinstance(
            cur,
            openai.APIConnectionError
            | httpx.ConnectError
            | httpx.RemoteProtocolError
            | httpx.ReadError,
        ):
            return True
        if "Connection error" in str(getattr(cur, "message", "")):
            return True
        cur = cur.__cause__ or cur.__context__
    return False


class UpstreamClient:
    """Calls the tenant's upstream; one instance per process (litellm pools connections)."""

    def __init__(self) -> None:
        self._litellm = import_litellm()

    async def _acompletion(self, kwargs: dict[str, Any]) -> Any:
        """``litellm.acompletion``, retried once when a pooled connection was dropped
        before an answer came (the server closed an idle keep-alive connection as we reused
        it). Timeouts and HTTP error statuses are never retried."""
        try:
            return await self._litellm.acompletion(**kwargs)
        except Exception as exc:
            if not is_connection_drop(exc):
                raise
            log.info("upstream_connection_dropped_retrying")
            return await self._litellm.acompletion(**kwargs)

    async def complete(
        self,
        upstream: UpstreamPolicy,
        model: str,
        messages: list[dict[str, Any]],
        extra: dict[str, Any],
        stream: bool,
    ) -> UpstreamAnswer:
        """One completion; with ``stream`` the upstream streams and the chunks are collected."""
        kwargs = upstream_kwargs(upstream, model, messages, extra)
        started = time.perf_counter()
        try:
            if not stream:
                resp = await self._acompletion(kwargs)
                body: dict[str, Any] = resp.model_dump(exclude_none=False)
                return UpstreamAnswer(body, time.perf_counter() - started)
            kwargs["stream"] = True
            resp = await self._acompletion(kwargs)
            return await _collect_stream(resp, started)
        except Exception as exc:  # mapped below, re-raised as our own tree
            raise map_upstream_error(exc, self._litellm) from exc

    async def stream(
        self,
        upstream: UpstreamPolicy,
        model: str,
        messages: list[dict[str, Any]],
        extra: dict[str, Any],
    ) -> UpstreamStream:
        """Open a streamed completion (``stream: sentence``); connection and status
        errors raise here, before any byte is sent to the client."""
        kwargs = upstream_kwargs(upstream, model, messages, extra)
        kwargs["stream"] = True
        started = time.perf_counter()
        try:
            raw = await self._acompletion(kwargs)
        except Exception as exc:
            raise map_upstream_error(exc, self._litellm) from exc
        return UpstreamStream(raw, self._litellm, started)


@dataclass
class StreamDelta:
    """One upstream stream chunk, flattened: choice ``index``, ``role``/``content``
    deltas, ``finish_reason``, ``usage``, and the chunk's ``id``/``created``/``model``."""

    index: int = 0
    role: str | None = None
    content: str = ""
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    id: str | None = None
    created: int | None = None
    model: str | None = None


def _deltas(chunk: Any) -> list[StreamDelta]:
    data = chunk.model_dump() if hasattr(chunk, "model_dump") else dict(chunk)
    meta: dict[str, Any] = {
        "id": data.get("id"),
        "created": data.get("created"),
        "model": data.get("model"),
    }
    usage = data.get("usage") or None
    out = [
        StreamDelta(
            index=int(c.get("index") or 0),
            role=(c.get("delta") or {}).get("role"),
            content=(c.get("delta") or {}).get("content") or "",
            finish_reason=c.get("finish_reason"),
            **meta,
        )
        for c in data.get("choices") or []
    ]
    if usage:
        if out:
            out[-1].usage = usage
        else:
            out.append(StreamDelta(usage=usage, **meta))
    return out


class UpstreamStream:
    """An open upstream stream (:meth:`UpstreamClient.stream`): iterate it for
    :class:`StreamDelta` s; errors while reading are mapped like the call's; a stream
    that ends without a ``finish_reason`` raises ``upstream_incomplete``. ``aclose()``
    stops reading (the HTTP response is closed)."""

    def __init__(self, raw: Any, litellm: Any, started: float) -> None:
        self._raw = raw
        self._litellm = litellm
        self.started = started
        self.chunks = 0

    async def __aiter__(self) -> AsyncIterator[StreamDelta]:
        finished, seen = False, AnswerSeen()
        try:
            async for chunk in self._raw:
                self.chunks += 1
                for d in _deltas(chunk):
                    seen.check(d, self.chunks)  # a finish with no answer is an error
                    finished = finished or bool(d.finish_reason)
                    yield d
        except Exception as exc:
            raise map_upstream_error(exc, self._litellm) from exc
        if not finished:
            raise UpstreamError(
                f"upstream stream incomplete: it ended after {self.chunks} chunks without "
                "a finish_reason",
                code="upstream_incomplete",
            )

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


async def _collect_stream(stream: Any, started: float) -> UpstreamAnswer:
    text: dict[int, list[str]] = {}
    finish: dict[int, str | None] = {}
    role: dict[int, str] = {}
    first: dict[str, Any] = {}
    usage: Any = None
    n = 0
    async for chunk in stream:
        n += 1
        data = chunk.model_dump() if hasattr(chunk, "model_dump") else dict(chunk)
        if not first:
            first = data
        if data.get("usage"):
            usage = data["usage"]
        for choice in data.get("choices") or []:
            idx = int(choice.get("index") or 0)
            delta = choice.get("delta") or {}
            if delta.get("role"):
                role[idx] = delta["role"]
            if delta.get("content"):
                text.setdefault(idx, []).append(delta["content"])
            if choice.get("finish_reason"):
                finish[idx] = choice["finish_reason"]
    # EOF without a finish_reason (a cut stream), or nothing but the finish chunk litellm
    # synthesizes when the body held no SSE event at all: never a clean answer.
    if not finish or not (text or role):
        raise UpstreamError(
            f"upstream stream incomplete: it ended after {n} chunks without a finish_reason",
            code="upstream_incomplete",
        )
    indices = sorted(set(text) | set(finish) | set(role)) or [0]
    body: dict[str, Any] = {
        "id": first.get("id") or "chatcmpl-groundproxy",
        "object": "chat.completion",
        "created": first.get("created") or int(time.time()),
        "model": first.get("model"),
        "choices": [
            {
                "index": i,
                "message": {"role": role.get(i, "assistant"), "content": "".join(text.get(i, []))},
                "finish_reason": finish.get(i) or "stop",
            }
            for i in indices
        ],
    }
    if usage:
        body["usage"] = usage
    return UpstreamAnswer(body, time.perf_counter() - started, chunks=n)


def _upstream_message(exc: Exception) -> str:
    msg = str(getattr(exc, "message", "") or exc)
    for prefix in ("litellm.", "OpenAIException - "):
        msg = msg.replace(prefix, "")
    return redact(msg.strip())[:2000] or type(exc).__name__


def map_upstream_error(exc: Exception, litellm: Any) -> Exception:
    """litellm/openai errors → our tree; anything else → a generic upstream error."""
    if isinstance(exc, UpstreamError | BadRequestError):
        return exc
    msg = _upstream_message(exc)
    log.warning(
        "upstream_error", error_type=type(exc).__name__, status=getattr(exc, "status_code", None)
    )
    if isinstance(exc, litellm.Timeout):
        return UpstreamTimeoutError(f"upstream timed out: {msg}")
    if isinstance(exc, litellm.RateLimitError):
        return RateLimitError(f"upstream rate limit: {msg}")
    if isinstance(exc, litellm.BadRequestError) and not isinstance(
        exc, litellm.AuthenticationError
    ):
        return BadRequestError(f"upstream rejected the request: {msg}")
    if isinstance(exc, litellm.APIConnectionError):
        return UpstreamError(f"upstream unreachable: {msg}", code="upstream_unreachable")
    status = getattr(exc, "status_code", None)
    prefix = f"upstream returned {status}" if status else "upstream error"
    return UpstreamError(f"{prefix}: {msg}")
