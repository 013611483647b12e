"""The OpenAI routes without their ``/v1`` prefix (``POST /chat/completions`` …): clients
configured with a base URL that lacks ``/v1`` reach the same handlers.

A pure-ASGI rewrite of the path before routing (the access log keeps the path the client
sent); groundproxy's own API (``/v1/groundproxy/...``) keeps its one path.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

OPENAI_ROUTES = ("/chat/completions", "/responses", "/completions", "/embeddings", "/models")


def v1_path(path: str) -> str | None:
    """``/models/x`` → ``/v1/models/x``; None for a path that is not an OpenAI route."""
    for route in OPENAI_ROUTES:
        if path == route or path.startswith(route + "/"):
            return "/v1" + path
    return None


class UnprefixedRoutes:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and (path := v1_path(str(scope.get("path", "")))):
            scope = {**scope, "path": path, "raw_path": path.encode("latin-1")}
        await self.app(scope, receive, send)
