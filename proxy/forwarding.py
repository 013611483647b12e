"""Client headers that travel on to the upstream: the request's ``x-request-id`` always,
and the deployment's allow-list (``GROUNDPROXY_FORWARD_HEADERS``, comma-separated names).

:class:`ForwardHeadersMiddleware` picks them from each request into a context variable;
:func:`proxy.upstream.client.upstream_kwargs` reads it (:func:`forwarded_headers`) and sends them as
litellm's ``extra_headers`` — so every upstream call a request makes carries them, in
every response mode, without threading them through each call. Credentials never travel,
whatever the allow-list says: the upstream's key comes from the policy alone.
"""

from __future__ import annotations

from contextvars import ContextVar

from starlette.types import ASGIApp, Receive, Scope, Send

NEVER_FORWARDED = frozenset(
    {"authorization", "api-key", "cookie", "proxy-authorization", "host", "content-length"}
)
_FORWARDED: ContextVar[dict[str, str] | None] = ContextVar("gp_forwarded_headers", default=None)


def header_names(setting: str) -> frozenset[str]:
    """``"x-a, X-B"`` → ``{"x-a", "x-b"}`` (credentials removed)."""
    names = {n.strip().lower() for n in setting.split(",") if n.strip()}
    return frozenset(names - NEVER_FORWARDED)


def forwarded_headers() -> dict[str, str]:
    """The headers the current request forwards to the upstream (empty outside a request)."""
    return dict(_FORWARDED.get() or {})


class ForwardHeadersMiddleware:
    """Pure ASGI; runs inside ``RequestIdMiddleware`` (the request id is settled there)."""

    def __init__(self, app: ASGIApp, allow: frozenset[str]) -> None:
        self.app = app
        self.allow = allow

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        picked: dict[str, str] = {}
        for raw_name, raw_value in scope.get("headers", []):
            name = raw_name.decode("latin-1").lower()
            if name in self.allow:
                picked[name] = raw_value.decode("latin-1")
        rid = scope.get("state", {}).get("request_id")
        if rid:
            picked["x-request-id"] = str(rid)
        token = _FORWARDED.set(picked)
        try:
            await self.app(scope, receive, send)
        finally:
            _FORWARDED.reset(token)
