"""``POST /v1/responses``: the Responses API, guarded like a chat answer (served by
:class:`proxy.serving.responses_serving.ResponsesServing`)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from groundproxy.proxy.auth import Tenant
from groundproxy.proxy.routes.body import JsonBody
from groundproxy.proxy.serving.call import Scope
from groundproxy.proxy.state import RequestId, Served

router = APIRouter()


@router.post("/v1/responses", response_model=None)
async def responses(
    request: Request, loaded: Tenant, data: JsonBody, serving: Served, rid: RequestId
) -> Response:
    return await serving.responses.create(Scope(request, loaded, rid), data)
