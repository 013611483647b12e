"""``POST /v1/chat/completions`` (non-stream and ``stream: true``): served by
:class:`proxy.serving.chat.ChatServing`."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from groundproxy.proxy.auth import Tenant
from groundproxy.proxy.routes.body import ChatRequest
from groundproxy.proxy.serving.call import Scope
from groundproxy.proxy.state import RequestId, Served

router = APIRouter()


@router.post("/v1/chat/completions", response_model=None)
async def chat_completions(
    request: Request, loaded: Tenant, req: ChatRequest, serving: Served, rid: RequestId
) -> Response:
    scope = Scope(request, loaded, rid, model=req.model)
    return await serving.chat.create(scope, req)
