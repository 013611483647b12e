"""``GET /healthz``, ``GET /readyz``, ``GET /v1/models`` and ``GET /v1/models/{id}``.

A model's ``created`` is the time this process started: the same on every call."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from groundproxy.errors import UnknownModelError
from groundproxy.policies.loader import LoadedPolicy
from groundproxy.proxy.auth import Tenant
from groundproxy.proxy.readiness import readiness_body
from groundproxy.proxy.state import State

router = APIRouter()
# A model's ``created`` is a fixed date (it never changes between calls or processes).
MODELS_CREATED = 1_704_067_200  # 2024-01-01T00:00:00Z


def _models(loaded: LoadedPolicy) -> list[dict[str, Any]]:
    upstream = loaded.policy.upstream
    names = sorted(upstream.models) or [upstream.model]
    return [
        {"id": n, "object": "model", "created": MODELS_CREATED, "owned_by": "groundproxy"}
        for n in names
    ]


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(request: Request, state: State) -> JSONResponse:
    body = readiness_body(request, state.policies, state.ready, state.load_errors)
    return JSONResponse(body, status_code=200 if state.ready else 503)


@router.get("/v1/models")
async def list_models(loaded: Tenant) -> dict[str, Any]:
    return {"object": "list", "data": _models(loaded)}


@router.get("/v1/models/{model_id:path}")
async def retrieve_model(model_id: str, loaded: Tenant) -> dict[str, Any]:
    for model in _models(loaded):
        if model["id"] == model_id:
            return model
    raise UnknownModelError(
        f"The model '{model_id}' does not exist or you do not have access to it.", param="model"
    )
