"""The OpenAI routes without their ``/v1`` prefix (``POST /chat/completions`` …): clients
configured with a base URL that lacks ``/v1`` reach the same handlers."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.routing import APIRoute

KEPT_UNDER_V1 = ("/v1/groundproxy/",)  # groundproxy's own API keeps its one path


def add_unprefixed_routes(app: FastAPI) -> None:
    """For every ``/v1/...`` route (but groundproxy's own), the same route without ``/v1``."""
    for route in list(app.router.routes):
        if not isinstance(route, APIRoute) or not route.path.startswith("/v1/"):
            continue
        if route.path.startswith(KEPT_UNDER_V1):
            continue
        app.router.add_api_route(
            route.path.removeprefix("/v1"),
            route.endpoint,
            methods=sorted(route.methods or ()),
            response_model=None,
            include_in_schema=False,
        )
