"""The spec check every in-process answer goes through (``tests/conftest.py``'s session
fixture around ``httpx.ASGITransport``, :func:`tests.spec_check.check_exchange`): one request
to each OpenAI route, streamed and not, and errors, each validated against its schema as it
arrives; and a shape that breaks the spec is refused."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from fastapi import FastAPI

from groundproxy.proxy.app import build_app
from groundproxy.proxy.settings import Settings
from tests.conftest import KEYS
from tests.spec_check import CHECKED, SpecError, check_exchange

AUTH = {"authorization": f"Bearer {KEYS['acme']}"}
ASK = [{"role": "user", "content": "How long is the warranty?"}]
WEATHER = [{"role": "user", "content": "What is the weather in Paris?"}]
TOOLS = [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]
CHAT_TOOLS = [{"type": "function", "function": {"name": "get_weather",
                                                "parameters": {"type": "object"}}}]  # fmt: skip
CALLS: list[tuple[str, str, dict[str, Any] | None, str]] = [
    ("POST", "/v1/chat/completions", {"messages": ASK}, "CreateChatCompletionResponse"),
    ("POST", "/chat/completions", {"messages": ASK, "stream": True},
     "CreateChatCompletionStreamResponse"),
    ("POST", "/v1/responses", {"input": "How long is the warranty?"}, "Response"),
    ("POST", "/v1/responses", {"input": "How long is the warranty?", "stream": True},
     "ResponseTextDeltaEvent"),
    ("POST", "/v1/completions", {"prompt": "How long is the warranty?"},
     "CreateCompletionResponse"),
    ("POST", "/v1/completions", {"prompt": "Can I get a refund?", "stream": True},
     "CreateCompletionResponse"),
    ("POST", "/v1/completions", {"prompt": ["How long is the warranty?", "Can I get a refund?"]},
     "CreateCompletionResponse"),
    ("POST", "/v1/responses", {"input": "What is the weather in Paris?", "tools": TOOLS},
     "Response"),
    ("POST", "/v1/responses", {"input": "What is the weather in Paris?", "tools": TOOLS,
                               "stream": True}, "ResponseFunctionCallArgumentsDoneEvent"),
    ("POST", "/v1/chat/completions", {"messages": WEATHER, "tools": CHAT_TOOLS, "stream": True},
     "CreateChatCompletionStreamResponse"),
    ("POST", "/v1/chat/completions", {"messages": ASK, "stream": True, "logprobs": True},
     "CreateChatCompletionStreamResponse"),
    ("POST", "/v1/embeddings", {"model": "text-embedding-3-small", "input": ["a b", "c"]},
     "CreateEmbeddingResponse"),
    ("GET", "/v1/models", None, "ListModelsResponse"),
    ("GET", "/v1/models/gpt-4o-mini", None, "Model"),
    ("GET", "/v1/models/no-such-model", None, "ErrorResponse"),
    ("POST", "/v1/chat/completions", {"messages": ASK, "model": "fail-500"}, "ErrorResponse"),
]  # fmt: skip


@pytest_asyncio.fixture(scope="module")
async def app(policies_dir: Path, data_dir: Path) -> AsyncIterator[FastAPI]:
    application = build_app(Settings(policies=policies_dir, data=data_dir, watch_policies=False))
    async with application.router.lifespan_context(application):
        yield application


@pytest.mark.parametrize(("method", "path", "body", "schema"), CALLS)
async def test_each_route_is_validated_as_it_arrives(
    app: FastAPI, method: str, path: str, body: dict[str, Any] | None, schema: str
) -> None:
    transport = httpx.ASGITransport(app=app)
    before = CHECKED.get(schema, 0)
    async with httpx.AsyncClient(transport=transport, base_url="http://gp", timeout=60) as c:
        payload = {"model": "gpt-4o-mini", **body} if body is not None else None
        resp = await c.request(method, path, json=payload, headers=AUTH)
    assert (resp.status_code >= 400) == (schema == "ErrorResponse"), resp.text
    assert CHECKED.get(schema, 0) > before, f"{schema} was not checked for {method} {path}"


def test_a_shape_that_breaks_the_spec_is_refused() -> None:
    body = {
        "id": "c1", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                     "message": {"role": "assistant", "content": "hi", "refusal": None,
                                 "tool_calls": None}}],
    }  # fmt: skip
    raw = json.dumps(body).encode()
    with pytest.raises(SpecError, match="tool_calls"):
        check_exchange("POST", "/v1/chat/completions", 200, "application/json", raw)
    event = b'data: {"type": "response.output_text.delta", "sequence_number": 0}\n\n'
    with pytest.raises(SpecError, match="ResponseTextDeltaEvent"):
        check_exchange("POST", "/v1/responses", 200, "text/event-stream", event)
    error = json.dumps({"error": {"message": "x"}}).encode()
    with pytest.raises(SpecError, match="ErrorResponse"):
        check_exchange("GET", "/v1/anything", 404, "application/json", error)
