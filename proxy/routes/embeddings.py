"""``POST /v1/embeddings``: passed through to the tenant's upstream (nothing to guard).

The client's model name maps through the policy's ``upstream.models`` like a chat model;
a name the policy does not map goes to the provider of the policy's default model
(``openai/gpt-4o-mini`` → ``openai/<name>``), unless the policy restricts its models.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from groundproxy.errors import BadRequestError
from groundproxy.policies.schema import UpstreamPolicy
from groundproxy.proxy.auth import Tenant
from groundproxy.proxy.body import JsonBody
from groundproxy.proxy.state import Ready, State
from groundproxy.proxy.upstream.client import resolve_model

router = APIRouter()


def required_model(data: dict[str, Any]) -> str:
    model = data.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequestError("'model' is a required property", param="model")
    return model


def passthrough_model(upstream: UpstreamPolicy, client_model: str) -> str:
    """The litellm model for a non-chat endpoint (module docstring)."""
    if client_model in upstream.models or upstream.restrict_models:
        return resolve_model(upstream, client_model)  # unknown + restricted: 404
    provider, _, _ = upstream.model.rpartition("/")
    return f"{provider}/{client_model}" if provider else client_model


@router.post("/v1/embeddings", response_model=None)
async def embeddings(loaded: Tenant, data: JsonBody, services: Ready, state: State) -> JSONResponse:
    model = required_model(data)
    inputs = data.get("input")
    if not isinstance(inputs, str | list) or not inputs:
        raise BadRequestError("'input' must be a non-empty string or array", param="input")
    policy = loaded.policy
    extra = {k: v for k, v in data.items() if k not in ("model", "input")}
    body, seconds = await services.upstream.embed(
        policy.upstream, passthrough_model(policy.upstream, model), inputs, extra
    )
    state.metrics.observe_upstream(policy.tenant, seconds, body.get("usage"))
    body["model"] = model
    return JSONResponse(body)
