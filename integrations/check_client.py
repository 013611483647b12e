"""Client for groundproxy's ``POST /v1/groundproxy/check`` (httpx only; no server imports).

Used by the gateway plugins (:mod:`groundproxy.integrations.litellm`): send an answer with the
conversation it replies to, get back the text to return, the action and the verdict headers.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

DEFAULT_API_BASE = "http://127.0.0.1:8080"
CHECK_PATH = "/v1/groundproxy/check"
HEADER_PREFIX = "x-groundproxy-"


class CheckError(Exception):
    """groundproxy could not be reached, or refused the check (its error message is kept)."""


@dataclass
class CheckResult:
    answer: str  # the text to return: as sent, rewritten, annotated, or the refusal
    action: str  # none | annotate | flag | rewrite | block | unverified
    groundproxy: dict[str, Any]  # the body object a chat completion carries
    headers: dict[str, str] = field(default_factory=dict)  # the x-groundproxy-* headers

    @property
    def blocked(self) -> bool:
        return self.action == "block"


def from_env_ref(value: str | None) -> str | None:
    """``os.environ/NAME`` (LiteLLM's config convention) → the variable's value."""
    if value and value.startswith("os.environ/"):
        return os.environ.get(value.removeprefix("os.environ/"))
    return value


def context_messages(messages: object) -> list[dict[str, Any]]:
    """The conversation as role/content pairs (text or content parts); other fields dropped."""
    out: list[dict[str, Any]] = []
    if not isinstance(messages, Sequence):
        return out
    for m in messages:
        if not isinstance(m, Mapping) or not isinstance(m.get("role"), str):
            continue
        content = m.get("content")
        if isinstance(content, list):
            content = [p for p in content if isinstance(p, Mapping)]
        elif not isinstance(content, str):
            content = None
        out.append({"role": m["role"], "content": content})
    return out


@dataclass
class CheckQuery:
    """One answer to check, with what it replies to: the ``question``, the conversation
    (``messages``, OpenAI-shaped; other fields are dropped) and/or plain ``context`` texts;
    ``model``: the upstream model that wrote it; ``logprobs``: the upstream's, as the response
    choice carried them (a dict or an object with ``model_dump``), for a tenant adapter that
    reads them."""

    answer: str
    question: str | None = None
    messages: object = None
    context: Sequence[str] = ()
    model: str | None = None
    logprobs: object = None


class CheckClient:
    """One HTTP client per plugin instance; ``api_base``/``api_key`` default to the
    ``GROUNDPROXY_API_BASE`` / ``GROUNDPROXY_API_KEY`` environment variables."""

    def __init__(
        self,
        api_base: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        base = from_env_ref(api_base) or os.environ.get("GROUNDPROXY_API_BASE") or DEFAULT_API_BASE
        self.api_base = base.rstrip("/").removesuffix("/v1")
        self._api_key = from_env_ref(api_key) or os.environ.get("GROUNDPROXY_API_KEY") or ""
        self._timeout_s = timeout_s
        self._transport = transport
        self._client: httpx.AsyncClient | None = None

    def _http(self) -> httpx.AsyncClient:
        if self._client is None or self._client.is_closed:
            self._client = httpx.AsyncClient(
                base_url=self.api_base, timeout=self._timeout_s, transport=self._transport
            )
        return self._client

    async def check(self, query: CheckQuery, request_id: str | None = None) -> CheckResult:
        """The verdict for ``query`` (``request_id``: sent as ``x-request-id``)."""
        body: dict[str, Any] = {
            "answer": query.answer,
            "question": query.question,
            "messages": context_messages(query.messages),
            "context": list(query.context),
            "model": query.model,
        }
        logprobs = query.logprobs
        dump = getattr(logprobs, "model_dump", None)
        plain = dump() if callable(dump) else logprobs
        if isinstance(plain, dict | list) and plain:
            body["logprobs"] = plain
        headers = {"authorization": f"Bearer {self._api_key}"}
        if request_id:
            headers["x-request-id"] = request_id
        try:
            resp = await self._http().post(CHECK_PATH, json=body, headers=headers)
        except httpx.HTTPError as exc:
            raise CheckError(
                f"groundproxy unreachable at {self.api_base}: {type(exc).__name__}"
            ) from exc
        if resp.status_code != 200:
            raise CheckError(f"groundproxy check failed ({resp.status_code}): {_message(resp)}")
        data = resp.json()
        return CheckResult(
            answer=str(data["answer"]),
            action=str(data["action"]),
            groundproxy=dict(data["groundproxy"]),
            headers={k: v for k, v in resp.headers.items() if k.startswith(HEADER_PREFIX)},
        )

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()


def _message(resp: httpx.Response) -> str:
    try:
        return str(resp.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return resp.text[:200]
