"""The upstream LLM call, through ``litellm.acompletion``, with errors mapped at the boundary.

litellm is imported lazily (in the app's lifespan) and only after
``LITELLM_LOCAL_MODEL_COST_MAP=True`` is set, so it never fetches its price map.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

import structlog

from guards.errors import (
    BadRequestError,
    RateLimitError,
    UnknownModelError,
    UpstreamError,
    UpstreamTimeoutError,
)
from policies.schema import UpstreamPolicy

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


class UpstreamClient:
    """Calls the tenant's upstream; one instance per process (litellm pools connections)."""

    def __init__(self) -> None:
        self._litellm = import_litellm()

    def _kwargs(
        self,
        upstream: UpstreamPolicy,
        model: str,
        messages: list[dict[str, Any]],
        extra: dict[str, Any],
    ) -> dict[str, Any]:
        kwargs: dict[str, Any] = dict(extra)
        kwargs.update(
            model=model,
            messages=messages,
            timeout=upstream.timeout_s,
            num_retries=0,
            max_retries=0,
        )
        if upstream.api_base:
            kwargs["api_base"] = upstream.api_base
        if upstream.api_key_env:
            key = os.environ.get(upstream.api_key_env)
            if key:
                kwargs["api_key"] = key
            elif upstream.api_base:
                kwargs["api_key"] = "groundproxy-no-key"
        return kwargs

    async def complete(
        self,
        upstream: UpstreamPolicy,
        model: str,
        messages: list[dict[str, Any]],
        extra: dict[str, Any],
        stream: bool,
    ) -> UpstreamAnswer:
        """One completion; with ``stream`` the upstream streams and the chunks are collected."""
        kwargs = self._kwargs(upstream, model, messages, extra)
        started = time.perf_counter()
        try:
            if not stream:
                resp = await self._litellm.acompletion(**kwargs)
                body: dict[str, Any] = resp.model_dump(exclude_none=False)
                return UpstreamAnswer(body, time.perf_counter() - started)
            kwargs["stream"] = True
            resp = await self._litellm.acompletion(**kwargs)
            return await _collect_stream(resp, started)
        except Exception as exc:  # mapped below, re-raised as our own tree
            raise map_upstream_error(exc, self._litellm) from exc


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
    return msg.strip()[:2000] or type(exc).__name__


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
