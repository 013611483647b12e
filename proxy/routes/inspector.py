"""The verdict inspector: a static page at ``/ui`` and the admin-only JSON it reads.

The page (``proxy/ui/``: HTML, vanilla JS, CSS; no build step, nothing loaded from
elsewhere) is public; it asks for an admin key, keeps it in ``sessionStorage`` and sends
it as ``Authorization: Bearer`` on every data call. Every JSON endpoint here takes only an
admin key (a tenant's normal key → 403) and reads only that key's tenant:

``GET /v1/groundproxy/ui/answers?q=ID&limit=N``   recent guarded answers (newest first);
                                                 ``q``: a request, trace or step id
``GET /v1/groundproxy/ui/answers/{step_id}``      one answer: original and returned text,
                                                 claims with probabilities and citations
``GET /v1/groundproxy/ui/traces/{trace_id}``      the trace DAG and its error steps
``GET /v1/groundproxy/ui/documents/{doc}?chunk=C``  a cited passage

The last two are the provenance API's answers (:mod:`.provenance`) behind the admin check.
"""

from __future__ import annotations

import time
from functools import cache
from importlib import resources
from typing import Annotated, Any

import anyio
import structlog
from fastapi import APIRouter, Query, Request, Response

from groundproxy.errors import NotFoundError, PermissionDeniedError
from groundproxy.policies.loader import LoadedPolicy
from groundproxy.proxy.auth import admin_tenant_for
from groundproxy.proxy.routes import provenance
from groundproxy.proxy.serving.traces import STEP_ID_RE
from groundproxy.proxy.state import Parts, Served, app_state
from groundproxy.proxy.storage import answers

router = APIRouter()

ASSETS = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
}
# Nothing but this origin: no CDN, no inline script, no framing.
PAGE_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-cache",
}


@cache
def _asset(name: str) -> bytes:
    return resources.files("groundproxy.proxy").joinpath("ui", name).read_bytes()


def _page(name: str) -> Response:
    return Response(_asset(name), media_type=ASSETS[name], headers=PAGE_HEADERS)


@router.get("/ui", include_in_schema=False)
@router.get("/ui/", include_in_schema=False)
async def inspector_page() -> Response:
    return _page("index.html")


@router.get("/ui/{name}", include_in_schema=False)
async def inspector_asset(name: str) -> Response:
    if name not in ASSETS:
        raise NotFoundError(f"no such inspector file {name[:40]!r}")
    return _page(name)


def _admin(request: Request) -> LoadedPolicy:
    try:
        loaded = admin_tenant_for(request, app_state(request).policies)
    except PermissionDeniedError:
        raise PermissionDeniedError(
            "the verdict inspector needs an admin key of the tenant, not a normal API key"
        ) from None
    structlog.contextvars.bind_contextvars(tenant=loaded.policy.tenant)
    return loaded


@router.get("/v1/groundproxy/ui/answers")
async def list_answers(
    request: Request,
    q: Annotated[str | None, Query(max_length=128)] = None,
    limit: Annotated[int, Query(ge=1, le=answers.MAX_LIST)] = 50,
) -> dict[str, Any]:
    traces = app_state(request).served().deps.traces
    loaded = _admin(request)
    settings = loaded.policy.traces
    if not settings.enabled:
        return {"object": "list", "traces_enabled": False, "data": []}
    store = traces.get(loaded.policy.tenant)
    not_before = time.time() - settings.retention_hours * 3600.0
    query = (q or "").strip() or None
    found = await anyio.to_thread.run_sync(
        lambda: store.read(lambda conn: answers.recent(conn, not_before, limit, query))
    )
    return {"object": "list", "traces_enabled": True, "data": [a.summary() for a in found]}


@router.get("/v1/groundproxy/ui/answers/{step_id}")
async def get_answer(step_id: str, request: Request) -> dict[str, Any]:
    traces = app_state(request).served().deps.traces
    loaded = _admin(request)
    settings = loaded.policy.traces
    if not settings.enabled or not STEP_ID_RE.match(step_id):
        raise NotFoundError("no such answer for this tenant")
    store = traces.get(loaded.policy.tenant)
    not_before = time.time() - settings.retention_hours * 3600.0
    found = await anyio.to_thread.run_sync(
        lambda: store.read(lambda conn: answers.one(conn, step_id, not_before))
    )
    if found is None:
        raise NotFoundError("no such answer for this tenant")
    return found.detail()


@router.get("/v1/groundproxy/ui/traces/{trace_id}")
async def get_trace(
    trace_id: str, request: Request, parts: Parts, serving: Served
) -> dict[str, Any]:
    return await provenance.get_trace(trace_id, _admin(request), parts, serving)


@router.get("/v1/groundproxy/ui/documents/{doc_id:path}")
async def get_document(
    doc_id: str,
    request: Request,
    parts: Parts,
    chunk: Annotated[str | None, Query(max_length=200)] = None,
) -> dict[str, Any]:
    return await provenance.get_document(doc_id, request, _admin(request), parts)
