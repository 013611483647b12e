"""The OpenAI routes without their ``/v1`` prefix (``POST /chat/completions`` …): clients
configured with a base URL that lacks ``/v1`` reach the same handlers; and Azure OpenAI's
routes, so the ``AzureOpenAI`` client works unchanged: ``/openai/deployments/{deployment}/
chat/completions`` (and ``completions``, ``embeddings``; ``?api-version=`` is accepted and
ignored) serve as ``/v1/...`` with the request's ``model`` set to the deployment (mapped by the
tenant's ``upstream.models`` like any model name, :func:`proxy.routes.body.json_body`), and Azure's
``/openai/v1/...`` as ``/v1/...``.

A pure-ASGI rewrite of the path before routing (the access log keeps the path the client
sent); groundproxy's own API (``/v1/groundproxy/...``) keeps its one path.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

from starlette.types import ASGIApp, Receive, Scope, Send

OPENAI_ROUTES = ("/chat/completions", "/responses", "/completions", "/embeddings", "/models")
_AZURE = re.compile(r"^/openai/deployments/([^/]+)/(chat/completions|completions|embeddings)/?$")
# the ASGI scope key holding an Azure request's deployment (read by proxy.routes.body.json_body)
DEPLOYMENT = "groundproxy.deployment"


def azure_path(path: str) -> tuple[str, str | None] | None:
    """An Azure OpenAI path → (the ``/v1`` path, its deployment or None); None otherwise."""
    found = _AZURE.match(path)
    if found:
        return "/v1/" + found.group(2), unquote(found.group(1))
    if path.startswith("/openai/v1/"):
        return path.removeprefix("/openai"), None
    return None


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
        if scope["type"] == "http":
            asked = str(scope.get("path", ""))
            if path := v1_path(asked):
                scope = {**scope, "path": path, "raw_path": path.encode("latin-1")}
            elif azure := azure_path(asked):
                path, deployment = azure
                scope = {**scope, "path": path, "raw_path": path.encode("latin-1")}
                if deployment is not None:
                    scope[DEPLOYMENT] = deployment
        await self.app(scope, receive, send)
