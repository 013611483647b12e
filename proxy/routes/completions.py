"""``POST /v1/completions`` (legacy text completions), guarded like a chat answer (served by
:class:`proxy.serving.completions.CompletionsServing`)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from groundproxy.proxy.auth import Tenant
from groundproxy.proxy.routes.body import JsonBody
from groundproxy.proxy.serving.call import Scope
from groundproxy.proxy.state import RequestId, Served

router = APIRouter()


@router.post("/v1/completions", response_model=None)
async def completions(
    request: Request, loaded: Tenant, data: JsonBody, serving: Served, rid: RequestId
) -> Response:
    return await serving.completions.create(Scope(request, loaded, rid), data)
