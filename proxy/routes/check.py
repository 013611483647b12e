"""``POST /v1/groundproxy/check``: guard an answer the caller already has (served by
:class:`proxy.serving.check.CheckServing`; the request body is described there).

Either of the tenant's keys may call it: an API key or an admin key (a check reads nothing
but the policy).
"""

from __future__ import annotations

import structlog
from fastapi import APIRouter, Request
from fastapi.responses import Response

from groundproxy.errors import AuthenticationError
from groundproxy.policies.loader import LoadedPolicy, PolicyStore
from groundproxy.proxy.auth import bearer_key, tenant_for
from groundproxy.proxy.openai.chat_request import parse_json_body
from groundproxy.proxy.routes.body import read_body
from groundproxy.proxy.serving.call import Scope
from groundproxy.proxy.serving.check import parse_check_request
from groundproxy.proxy.state import RequestId, Served, State

router = APIRouter()


def any_tenant_key(request: Request, store: PolicyStore) -> LoadedPolicy:
    """The tenant of an API key or of an admin key."""
    try:
        return tenant_for(request, store)
    except AuthenticationError:
        loaded = store.lookup_admin_key(bearer_key(request))
        if loaded is None:
            raise
        return loaded


@router.post("/v1/groundproxy/check", response_model=None)
async def check(request: Request, state: State, serving: Served, rid: RequestId) -> Response:
    loaded = any_tenant_key(request, state.policies)
    structlog.contextvars.bind_contextvars(tenant=loaded.policy.tenant)
    settings = state.settings
    raw = await read_body(request, settings.max_body_bytes)
    req = parse_check_request(
        parse_json_body(raw, max_bytes=settings.max_body_bytes, max_depth=settings.max_json_depth)
    )
    return await serving.check.check(Scope(request, loaded, rid, model=req.model or ""), req)
