"""The HTTP transport under litellm: upstream error bodies are cut to a bounded size.

litellm runs its secret-redaction regexes over an upstream's error text on the event loop,
several times per failure: a 3 MB error body froze the whole proxy for ~11 s (every tenant,
``/healthz`` too). :class:`BoundedErrorTransport` reads at most :data:`ERROR_BODY_LIMIT`
bytes of any response whose status is an error (>= 400); a longer body is replaced, before
litellm or the OpenAI SDK parse it, by a small OpenAI-shaped error body carrying the start
of the upstream's message. Status and headers (``retry-after`` included) are kept, so the
client still gets the clean mapped error of :mod:`proxy.upstream.errors`. Successful
responses (streams included) pass through untouched.

The transport is installed once per process as ``litellm.aclient_session`` (used for every
OpenAI-compatible provider litellm calls through the OpenAI SDK), and under the direct
OpenAI-wire client (:mod:`proxy.upstream.wire`). Connection pools belong to an event loop,
so it keeps one inner transport (litellm's own choice, or the one ``inner`` makes) per
running loop.
"""

from __future__ import annotations

import asyncio
import json
import re
import weakref
from collections.abc import Callable

import httpx

__all__ = ["ERROR_BODY_LIMIT", "BoundedErrorTransport", "bounded_client", "cut_error_body"]

# Real providers' error bodies are well under 2 KB; anything over this is cut.
ERROR_BODY_LIMIT = 8 * 1024
_MESSAGE_CHARS = 1000
_MESSAGE = re.compile(rb'"message"\s*:\s*"((?:[^"\\]|\\.){0,4000})')


def cut_error_body(prefix: bytes, encoded: bool) -> bytes:
    """A small OpenAI error body standing for an error body longer than the limit.

    ``prefix`` is the start of the upstream's body; when it was not content-encoded its
    ``"message"`` (or else its text) opens the new message.
    """
    start = ""
    if not encoded:
        found = _MESSAGE.search(prefix)
        raw = found.group(1) if found else prefix
        start = raw.decode("utf-8", "replace")[:_MESSAGE_CHARS].replace("\\n", " ")
    note = f"(the upstream's error body was longer than {ERROR_BODY_LIMIT} bytes and was cut)"
    message = f"{start} … {note}" if start.strip() else note
    error = {"message": message, "type": "upstream_error", "param": None, "code": None}
    return json.dumps({"error": error}).encode()


async def _read_bounded(response: httpx.Response, limit: int) -> tuple[bytes, bool]:
    """Up to ``limit`` bytes of the (raw) body, and whether there was more; closes it."""
    body = bytearray()
    try:
        async for chunk in response.stream:  # type: ignore[union-attr]
            body += chunk
            if len(body) > limit:
                return bytes(body[:limit]), True
        return bytes(body), False
    finally:
        await response.aclose()


class BoundedErrorTransport(httpx.AsyncBaseTransport):
    """Error responses over ``limit`` bytes become a small error body (module docstring)."""

    def __init__(
        self,
        limit: int = ERROR_BODY_LIMIT,
        inner: Callable[[], httpx.AsyncBaseTransport] | None = None,
    ) -> None:
        self.limit = limit
        self._make_inner = inner or _litellm_transport
        self._inner: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, httpx.AsyncBaseTransport
        ] = weakref.WeakKeyDictionary()

    def _transport(self) -> httpx.AsyncBaseTransport:
        loop = asyncio.get_running_loop()
        inner = self._inner.get(loop)
        if inner is None:
            inner = self._inner[loop] = self._make_inner()
        return inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._transport().handle_async_request(request)
        if response.status_code < 400:
            return response
        body, cut = await _read_bounded(response, self.limit)
        headers = httpx.Headers(response.headers)
        for name in ("content-length", "transfer-encoding"):
            headers.pop(name, None)
        if cut:
            body = cut_error_body(body, encoded="content-encoding" in headers)
            headers.pop("content-encoding", None)
            headers["content-type"] = "application/json"
        return httpx.Response(
            response.status_code,
            headers=headers,
            content=body,
            request=request,
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        loop = asyncio.get_running_loop()
        inner = self._inner.pop(loop, None)
        if inner is not None:
            await inner.aclose()


def _litellm_transport() -> httpx.AsyncBaseTransport:
    """The transport litellm would have built itself (aiohttp or httpx, its SSL settings)."""
    try:
        from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler

        made = AsyncHTTPHandler.create_async_transport()
    except Exception:  # an older/newer litellm without it: plain httpx
        made = None
    return made if made is not None else httpx.AsyncHTTPTransport()


def bounded_client() -> httpx.AsyncClient:
    """The process-wide client litellm uses for OpenAI-SDK providers (``aclient_session``)."""
    return httpx.AsyncClient(transport=BoundedErrorTransport(), follow_redirects=True)
