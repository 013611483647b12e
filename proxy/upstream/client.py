"""The upstream LLM call, through ``litellm.acompletion``, with errors mapped at the boundary.

Calls to an OpenAI-compatible upstream skip litellm (``upstream.transport``: ``openai``, or
``auto`` — the default — for an ``openai/…`` model string): they go to
:class:`proxy.upstream.wire.WireUpstream` (the OpenAI wire protocol, spoken directly).

:class:`UpstreamClient` implements the :class:`~proxy.upstream.types.Upstream` protocol
(typed answers and deltas, one stream parser: proxy.upstream.types). litellm is imported
lazily (in the app's lifespan) and only after ``LITELLM_LOCAL_MODEL_COST_MAP=True`` is set,
so it never fetches its price map.
"""

from __future__ import annotations

import os
import time
import warnings
from typing import Any

import structlog

from groundproxy.errors import UnknownModelError
from groundproxy.policies.schema import UpstreamPolicy
from groundproxy.proxy.forwarding import forwarded_headers
from groundproxy.proxy.openai.upstream_bodies import embeddings_body, text_body
from groundproxy.proxy.upstream.errors import is_connection_drop, map_upstream_error
from groundproxy.proxy.upstream.redact import remember_secret
from groundproxy.proxy.upstream.types import (
    ChunkStream,
    Completion,
    StreamDelta,
    Upstream,
    UpstreamAnswer,
    UpstreamCall,
    UpstreamStream,
)
from groundproxy.proxy.upstream.wire import WIRE_PREFIXES, WireUpstream

__all__ = [
    "ChunkStream", "Completion", "StreamDelta", "Upstream", "UpstreamAnswer", "UpstreamClient",
    "UpstreamStream", "is_connection_drop", "map_upstream_error", "resolve_model",
    "upstream_kwargs", "uses_wire",
]  # fmt: skip

log = structlog.get_logger(__name__)


def import_litellm() -> Any:
    """Import litellm offline-safe (no price-map download, no telemetry)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    import litellm

    litellm.telemetry = False
    litellm.suppress_debug_info = True
    # litellm dumps its own objects as it streams; an upstream field of an odd type (content
    # as a list of text parts, joined in proxy.openai.upstream_bodies) made pydantic print the
    # value — the answer's text — to stderr: never a body in the logs
    warnings.filterwarnings("ignore", message="Pydantic serializer warnings", category=UserWarning)
    if litellm.aclient_session is None:  # error bodies cut before litellm reads them
        from groundproxy.proxy.upstream.transport import bounded_client

        litellm.aclient_session = bounded_client()
    # Every call passes max_retries=0 (the client decides when to retry), but litellm's
    # OpenAI embedding path reads ``max_retries or DEFAULT_MAX_RETRIES``: 0 became 2 retries,
    # each waiting out the upstream's retry-after (14 s on a 429 before the client heard).
    module: Any = litellm  # DEFAULT_MAX_RETRIES is not in litellm's declared exports
    module.DEFAULT_MAX_RETRIES = 0
    return litellm


def uses_wire(upstream: UpstreamPolicy, model: str) -> bool:
    """Does a call with litellm model string ``model`` go over the direct OpenAI wire?"""
    if upstream.transport == "auto":
        return model.startswith(WIRE_PREFIXES)
    return upstream.transport == "openai"


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
    ``metadata`` rides there too (litellm keeps its own ``metadata`` keyword for itself).
    The request's ``x-request-id`` and the allow-listed client headers
    (:mod:`proxy.forwarding`) go as ``extra_headers``.
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
    headers = forwarded_headers()
    if headers:
        kwargs["extra_headers"] = headers
    if upstream.api_base:
        kwargs["api_base"] = upstream.api_base
    key = os.environ.get(upstream.api_key_env) if upstream.api_key_env else None
    if key:
        remember_secret(key)  # redacted from any upstream error text (proxy.upstream.redact)
        kwargs["api_key"] = key
    elif upstream.api_base:
        # A self-hosted OpenAI-compatible server (vLLM, Ollama …) often needs no key, but
        # the client library refuses to send a request without one.
        kwargs["api_key"] = "groundproxy-no-key"
    return kwargs


class UpstreamClient(Upstream):
    """Calls the tenant's upstream; one instance per process (litellm pools connections)."""

    def __init__(
        self, max_body_bytes: int | None = None, owner: UpstreamClient | None = None
    ) -> None:
        self._litellm = import_litellm()
        self._wire_client: WireUpstream | None = None
        self._max_body = max_body_bytes  # the direct wire's cap on a plain answer's body
        self._owner = owner  # capped(): the client whose connections this one shares

    def capped(self, max_body_bytes: int) -> UpstreamClient:
        """A client over this one's connections (litellm's, the direct wire's pool) whose
        plain answers' bodies are read up to ``max_body_bytes`` (the judge's,
        :mod:`proxy.upstream.judge_client`); closing this client closes them."""
        return UpstreamClient(max_body_bytes, owner=self)

    def _wire(self, upstream: UpstreamPolicy, model: str) -> WireUpstream | None:
        """The direct OpenAI-wire client, when the policy's transport picks it for ``model``."""
        if not uses_wire(upstream, model):
            return None
        if self._wire_client is None:
            if self._owner is None:
                self._wire_client = WireUpstream(self._max_body)
            elif (shared := self._owner._wire(upstream, model)) is not None:
                # the owner's pool, this client's body cap
                self._wire_client = shared.capped(self._max_body) if self._max_body else shared
        return self._wire_client

    async def aclose(self) -> None:
        """Close the direct client's connections (litellm's pool lives with the process); a
        :meth:`capped` client leaves them to its owner."""
        if self._wire_client is not None and self._owner is None:
            await self._wire_client.aclose()
        self._wire_client = None

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

    def _map(self, exc: Exception) -> Exception:
        return map_upstream_error(exc, self._litellm)

    async def answer(self, call: UpstreamCall) -> UpstreamAnswer:
        """One completion (``Upstream.complete`` collects a streamed one)."""
        if wire := self._wire(call.upstream, call.model):
            return await wire.answer(call)
        kwargs = upstream_kwargs(call.upstream, call.model, call.messages, call.extra)
        started = time.perf_counter()
        try:
            resp = await self._acompletion(kwargs)
            body: dict[str, Any] = resp.model_dump(exclude_none=False, warnings=False)
        except Exception as exc:  # mapped below, re-raised as our own tree
            raise self._map(exc) from exc
        return UpstreamAnswer(Completion.from_body(body), time.perf_counter() - started)

    async def open_stream(self, call: UpstreamCall) -> ChunkStream:
        """Open a streamed completion; connection and status errors raise here, before any
        byte is sent to the client."""
        if wire := self._wire(call.upstream, call.model):
            return await wire.open_stream(call)
        kwargs = upstream_kwargs(call.upstream, call.model, call.messages, call.extra)
        kwargs["stream"] = True
        started = time.perf_counter()
        try:
            raw = await self._acompletion(kwargs)
        except Exception as exc:
            raise self._map(exc) from exc
        return ChunkStream(raw, self._map, started)

    async def _plain(self, call: str, kwargs: dict[str, Any]) -> tuple[dict[str, Any], float]:
        started = time.perf_counter()
        try:
            resp = await getattr(self._litellm, call)(**kwargs)
            # warnings=False: base64 embeddings (the SDKs' default) are strings where litellm's
            # model says list[float]; pydantic's warning printed them as plain text to stderr
            body: dict[str, Any] = resp.model_dump(exclude_none=True, warnings=False)
        except Exception as exc:
            raise self._map(exc) from exc
        return body, time.perf_counter() - started

    async def embeddings(self, call: UpstreamCall, inputs: Any) -> tuple[dict[str, Any], float]:
        """``litellm.aembedding``: the body as the upstream sent it (nothing to guard)."""
        if wire := self._wire(call.upstream, call.model):
            return await wire.embeddings(call, inputs)
        kwargs = upstream_kwargs(call.upstream, call.model, [], {})
        del kwargs["messages"], kwargs["num_retries"]
        for name in ("dimensions", "encoding_format", "user"):
            if call.extra.get(name) is not None:
                kwargs[name] = call.extra[name]
        body, seconds = await self._plain("aembedding", {**kwargs, "input": inputs})
        return embeddings_body(body), seconds

    async def completions(self, call: UpstreamCall, prompt: Any) -> tuple[dict[str, Any], float]:
        """``litellm.atext_completion`` (a ``text-completion-openai/`` model calls the
        upstream's ``/v1/completions``; litellm turns others into a chat call)."""
        kwargs = upstream_kwargs(call.upstream, call.model, [], call.extra)
        del kwargs["messages"]
        body, seconds = await self._plain("atext_completion", {**kwargs, "prompt": prompt})
        return text_body(body), seconds
