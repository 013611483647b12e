"""The judge's chat completion (guards.judge.opinion), through the project's upstream machinery.

:class:`JudgeCaller` is what the serving layer calls: one chat completion, its message
content back. :class:`UpstreamJudge` sends it with the :class:`~proxy.upstream.types.Upstream`
the proxy uses for answers (litellm, or the direct OpenAI wire for ``openai/…`` models),
asking for the judge's JSON with ``response_format`` json_schema. A test hands the
serving layer ``groundproxy.testing.fake_judge.FakeJudge`` instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from groundproxy.errors import GroundproxyError, UpstreamError
from groundproxy.policies.schema import Policy, UpstreamPolicy
from groundproxy.proxy.upstream.types import Upstream

MAX_TOKENS_PER_CLAIM = 200  # the judge's answer: id, verdict, a short quote and reason
# The judge's whole HTTP body (direct OpenAI wire: read up to this, never parsed past it) and
# its message content (any transport): ~64 claims x 200 tokens is under 100 KB.
MAX_JUDGE_BYTES = 1024 * 1024


@dataclass(frozen=True)
class JudgeCall:
    """One judge call: where (``upstream``: model, base URL, key variable, timeout), the
    litellm model string, the messages and the ``response_format`` to ask for."""

    upstream: UpstreamPolicy
    model: str
    messages: list[dict[str, str]]
    response_format: dict[str, Any]
    claims: int = 1


def judge_upstream(policy: Policy, timeout_s: float) -> UpstreamPolicy:
    """The judge's endpoint: the policy's ``judge`` block, each field defaulting to the
    tenant's upstream's (model, base URL, key variable, transport)."""
    judge, up = policy.judge, policy.upstream
    return UpstreamPolicy(
        model=judge.model or up.model,
        api_base=judge.api_base or up.api_base,
        api_key_env=judge.api_key_env or up.api_key_env,
        timeout_s=max(timeout_s, 0.001),
        transport=up.transport,
    )


class JudgeCaller(Protocol):
    """Sends one judge call; returns the first choice's message content. Failures raise the
    project's errors (``RateLimitError``, ``UpstreamTimeoutError``, ``UpstreamError`` …)."""

    async def judge(self, call: JudgeCall) -> str: ...


def _refuses_schema(exc: GroundproxyError) -> bool:
    """Did the server refuse ``response_format`` json_schema (llama.cpp's server and other
    OpenAI-compatible servers know only ``json_object``)?"""
    text = exc.message.lower()
    return "response_format" in text or "json_schema" in text


def _json_object(json_schema: dict[str, Any]) -> dict[str, Any]:
    """``json_object`` with the schema beside it (llama-cpp-python's server constrains its
    output to it; servers that do not know ``schema`` ignore it)."""
    schema = (json_schema.get("json_schema") or {}).get("schema")
    return {"type": "json_object", **({"schema": schema} if schema else {})}


class UpstreamJudge:
    """:class:`JudgeCaller` over an :class:`Upstream`: the app's (``Deps.upstream``, whose
    connections it shares — its ``capped`` view when it has one, closed with it at
    shutdown), or — not given — a litellm client of its own, made on first use (the CLI's
    guard). An endpoint that refuses ``response_format`` json_schema is asked once more with
    ``json_object`` (and the schema beside it; the JSON is checked by guards.judge.opinion either
    way), and remembered. An answer over :data:`MAX_JUDGE_BYTES` (the body on the direct
    wire, read no further; the content on any transport) raises ``upstream_error``: its
    claims are skipped ``error``."""

    def __init__(self, upstream: Upstream | None = None) -> None:
        capped = getattr(upstream, "capped", None)  # the same connections, the judge's cap
        self._upstream: Upstream | None = capped(MAX_JUDGE_BYTES) if capped else upstream
        self._json_object: set[tuple[str | None, str]] = set()  # (api_base, model)

    def _client(self) -> Upstream:
        if self._upstream is None:
            from groundproxy.proxy.upstream.client import UpstreamClient

            self._upstream = UpstreamClient(max_body_bytes=MAX_JUDGE_BYTES)
        return self._upstream

    async def judge(self, call: JudgeCall) -> str:
        where = (call.upstream.api_base, call.model)
        plain = where in self._json_object
        fmt = _json_object(call.response_format) if plain else call.response_format
        extra: dict[str, Any] = {
            "response_format": fmt,
            "temperature": 0,
            "max_tokens": MAX_TOKENS_PER_CLAIM * max(1, call.claims),
        }
        client = self._client()
        try:
            answer = await client.complete(call.upstream, call.model, call.messages, extra)
        except GroundproxyError as exc:
            if plain or not _refuses_schema(exc):
                raise
            self._json_object.add(where)
            extra["response_format"] = _json_object(call.response_format)
            answer = await client.complete(call.upstream, call.model, call.messages, extra)
        choices = answer.completion.choices
        content = choices[0].content if choices else None
        if not isinstance(content, str):
            raise UpstreamError("the judge answered without message content")
        if len(content) > MAX_JUDGE_BYTES:
            raise UpstreamError(f"the judge's answer was longer than {MAX_JUDGE_BYTES} characters")
        return content

    async def aclose(self) -> None:
        close = getattr(self._upstream, "aclose", None)
        if close is not None:
            await close()
