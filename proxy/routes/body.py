"""Request bodies as FastAPI dependencies: read with a size limit, parsed as bounded JSON,
and (for ``POST /v1/chat/completions``) validated into a :class:`ChatCompletionRequest`.

Routes declare them after the tenant (``loaded: Tenant, req: ChatRequest``): FastAPI
resolves dependencies in order, so a request without a valid key is refused (401) before
its body is read.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends
from starlette.requests import Request

from groundproxy.errors import BodyTooLargeError
from groundproxy.proxy.openai.chat_request import (
    ChatCompletionRequest,
    parse_chat_request,
    parse_json_body,
)
from groundproxy.proxy.routes.aliases import DEPLOYMENT
from groundproxy.proxy.state import app_state


async def read_body(request: Request, max_bytes: int) -> bytes:
    """Read the body, refusing (413) as soon as it passes ``max_bytes``."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > max_bytes:
        raise BodyTooLargeError(f"request body is {declared} bytes; the limit is {max_bytes}")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise BodyTooLargeError(f"request body exceeds the limit of {max_bytes} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def json_body(request: Request) -> dict[str, Any]:
    """The body as a JSON object, within the server's size and nesting limits."""
    settings = app_state(request).settings
    raw = await read_body(request, settings.max_body_bytes)
    data = parse_json_body(
        raw, max_bytes=settings.max_body_bytes, max_depth=settings.max_json_depth
    )
    deployment = request.scope.get(DEPLOYMENT)
    if isinstance(deployment, str):  # Azure OpenAI: the deployment names the model
        data["model"] = deployment
    return data


JsonBody = Annotated[dict[str, Any], Depends(json_body)]


async def chat_request(data: JsonBody) -> ChatCompletionRequest:
    return parse_chat_request(data)


ChatRequest = Annotated[ChatCompletionRequest, Depends(chat_request)]
