"""``POST /v1/embeddings`` served: passed through to the tenant's upstream (nothing to guard).

It goes through the guarded call's last step only (no guard will run: no admission, no
trace): the upstream call is cancelled when the client disconnects (499).
"""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse, Response

from groundproxy.proxy.openai.chat_request import checked
from groundproxy.proxy.openai.requests import EmbeddingsRequest
from groundproxy.proxy.serving.call import Scope, UpstreamServing
from groundproxy.proxy.serving.guarding import Held
from groundproxy.proxy.serving.passthrough import passthrough_model


class EmbeddingsServing(UpstreamServing):
    """Embeddings passed through (nothing to guard)."""

    async def create(self, scope: Scope, data: dict[str, Any]) -> Response:
        scope.model = checked(EmbeddingsRequest, data).model  # 400 naming a bad field
        inputs = data["input"]
        policy = scope.policy
        extra = {k: v for k, v in data.items() if k not in ("model", "input")}
        model = passthrough_model(policy.upstream, scope.model)

        async def embed(held: Held) -> Response:
            body, seconds = await self.upstream.embed(policy.upstream, model, inputs, extra)
            self.metrics.observe_upstream(policy.tenant, seconds, body.get("usage"))
            body["model"] = scope.model
            return JSONResponse(body)

        return await self.call.run(scope, embed, guarded=False)
