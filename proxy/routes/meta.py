"""``GET /healthz``, ``GET /readyz`` and ``GET /v1/models``."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from groundproxy.proxy.auth import Tenant
from groundproxy.proxy.readiness import readiness_body
from groundproxy.proxy.state import State

router = APIRouter()

# A model's ``created`` is a fixed date (it never changes between calls or processes).
MODELS_CREATED = 1_704_067_200  # 2024-01-01T00:00:00Z


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(request: Request, state: State) -> JSONResponse:
    body = readiness_body(request, state.policies, state.ready, state.load_errors)
    return JSONResponse(body, status_code=200 if state.ready else 503)


@router.get("/v1/models")
async def list_models(loaded: Tenant) -> dict[str, Any]:
    upstream = loaded.policy.upstream
    names = sorted(upstream.models) or [upstream.model]
    return {
        "object": "list",
        "data": [
            {"id": n, "object": "model", "created": MODELS_CREATED, "owned_by": "groundproxy"}
            for n in names
        ],
    }
