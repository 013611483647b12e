"""``POST /v1/embeddings``: passed through to the tenant's upstream (served by
:class:`proxy.serving.embeddings.EmbeddingsServing`)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from groundproxy.proxy.auth import Tenant
from groundproxy.proxy.routes.body import JsonBody
from groundproxy.proxy.serving.call import Scope
from groundproxy.proxy.state import RequestId, Served

router = APIRouter()


@router.post("/v1/embeddings", response_model=None)
async def embeddings(
    request: Request, loaded: Tenant, data: JsonBody, serving: Served, rid: RequestId
) -> Response:
    return await serving.embeddings.create(Scope(request, loaded, rid), data)
