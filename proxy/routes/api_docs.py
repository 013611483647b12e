"""``/docs`` and ``/openapi.json``: the API's interactive documentation — off unless
``GROUNDPROXY_API_DOCS`` is set, and then served by this process alone.

Off (the default) both are 404, as is ``/redoc``: the schema lists every route and field,
which a deployment need not show to whoever can reach it. On, ``/openapi.json`` is
FastAPI's schema and ``/docs`` is Swagger UI from the files the ``fastapi-offline`` package
ships, served under ``/docs/``: nothing is loaded from a CDN (offline deployments, strict
CSPs), and the page's Content-Security-Policy allows this origin only — its start-up is
``/docs/init.js``, not an inline script.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from fastapi import APIRouter, Response

from groundproxy.errors import NotFoundError

router = APIRouter()

ASSETS = {
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
    "favicon.png": "image/png",
}
HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
        "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; "
        "frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
}
PAGE = b"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>groundproxy API</title>
<link rel="icon" href="/docs/favicon.png">
<link rel="stylesheet" href="/docs/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/docs/swagger-ui-bundle.js"></script>
<script src="/docs/init.js"></script>
</body>
</html>
"""
INIT = b"""window.ui = SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#swagger-ui",
  deepLinking: false,
  validatorUrl: null,
});
"""


@cache
def _asset(name: str) -> bytes:
    return resources.files("fastapi_offline").joinpath("static", name).read_bytes()


@router.get("/docs", include_in_schema=False)
async def docs_page() -> Response:
    return Response(PAGE, media_type="text/html; charset=utf-8", headers=HEADERS)


@router.get("/docs/init.js", include_in_schema=False)
async def docs_init() -> Response:
    return Response(INIT, media_type=ASSETS["swagger-ui-bundle.js"], headers=HEADERS)


@router.get("/docs/{name}", include_in_schema=False)
async def docs_asset(name: str) -> Response:
    if name not in ASSETS:
        raise NotFoundError(f"no such documentation file {name[:40]!r}")
    return Response(_asset(name), media_type=ASSETS[name], headers=HEADERS)
