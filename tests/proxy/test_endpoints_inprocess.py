"""Issue 12 items 4-6 in process (httpx.ASGITransport): per-answer metrics in sentence
mode, token counts, CORS off by default and on when configured, the Responses API
translation, and upstream error messages without litellm's wrapper chains."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from fastapi import FastAPI

from groundproxy.errors import BadRequestError
from groundproxy.proxy.app import build_app
from groundproxy.proxy.serving.responses import to_chat
from groundproxy.proxy.settings import Settings
from groundproxy.proxy.upstream.errors import upstream_message
from tests.conftest import KEYS
from tests.proxy.test_metrics import value


@pytest_asyncio.fixture(scope="module")
async def app(policies_dir: Path, data_dir: Path) -> AsyncIterator[FastAPI]:
    application = build_app(Settings(policies=policies_dir, data=data_dir, watch_policies=False))
    async with application.router.lifespan_context(application):
        yield application


def client(app: FastAPI) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 40000))
    return httpx.AsyncClient(transport=transport, base_url="http://gp", timeout=60)


PER_ANSWER = (
    "groundproxy_actions_total",
    "groundproxy_guard_seconds_count",
    "groundproxy_upstream_seconds_count",
)


async def test_a_streamed_two_sentence_answer_moves_each_per_answer_counter_by_one(
    app: FastAPI,
) -> None:
    """Sentence mode guards the warranty answer's two sentences one by one: still one
    action, one guard duration and one upstream time for the one answer."""
    async with client(app) as c:
        before = (await c.get("/metrics")).text
        resp = await c.post(
            "/v1/chat/completions",
            headers={"authorization": f"Bearer {KEYS['sentence']}"},
            json={
                "model": "gpt-4o-mini",
                "stream": True,
                "messages": [{"role": "user", "content": "How long is the warranty?"}],
            },
        )
        assert resp.status_code == 200 and resp.headers["x-groundproxy-stream"] == "sentence"
        assert resp.text.rstrip().endswith("data: [DONE]")
        after = (await c.get("/metrics")).text
    for name in PER_ANSWER:
        moved = value(after, name, tenant="sentence") - value(before, name, tenant="sentence")
        assert moved == 1, name
    rewrites = value(after, "groundproxy_actions_total", tenant="sentence", action="rewrite")
    assert (
        rewrites - value(before, "groundproxy_actions_total", tenant="sentence", action="rewrite")
        == 1
    )


async def test_tokens_are_counted_from_usage(app: FastAPI) -> None:
    async with client(app) as c:
        before = (await c.get("/metrics")).text
        resp = await c.post(
            "/completions",  # legacy completions, without /v1
            headers={"api-key": KEYS["acme"]},  # Azure-style key header
            json={"model": "gpt-4o-mini", "prompt": "Can I get a refund?"},
        )
        assert resp.status_code == 200, resp.text
        after = (await c.get("/metrics")).text
    for kind in ("prompt", "completion"):
        moved = value(after, "groundproxy_tokens_total", tenant="acme", kind=kind) - value(
            before, "groundproxy_tokens_total", tenant="acme", kind=kind
        )
        assert moved == resp.json()["usage"][f"{kind}_tokens"] > 0


PREFLIGHT = {
    "origin": "https://app.example",
    "access-control-request-method": "POST",
    "access-control-request-headers": "authorization, content-type",
}


async def test_cors_is_off_by_default(app: FastAPI) -> None:
    async with client(app) as c:
        resp = await c.options("/v1/chat/completions", headers=PREFLIGHT)
    assert "access-control-allow-origin" not in resp.headers
    assert resp.status_code == 405 and resp.json()["error"]["code"] == "method_not_allowed"


async def test_cors_allows_the_configured_origins(tmp_path: Path) -> None:
    settings = Settings(
        policies=tmp_path, data=tmp_path, watch_policies=False, cors_origins="https://app.example"
    )
    async with client(build_app(settings)) as c:
        ok = await c.options("/v1/chat/completions", headers=PREFLIGHT)
        other = await c.options(
            "/v1/chat/completions", headers={**PREFLIGHT, "origin": "https://evil.example"}
        )
    assert ok.status_code == 200
    assert ok.headers["access-control-allow-origin"] == "https://app.example"
    assert "access-control-allow-origin" not in other.headers


def test_responses_request_translates_to_one_chat_request() -> None:
    chat = to_chat({
        "model": "gpt-4o-mini",
        "instructions": "Be brief.",
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "Weather?"}]},
            {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
        ],
        "tools": [{"type": "function", "name": "weather", "parameters": {"type": "object"}}],
        "tool_choice": {"type": "function", "name": "weather"},
        "max_output_tokens": 20,
        "text": {"format": {"type": "json_schema", "name": "w", "schema": {"type": "object"}}},
        "user": "u1",
    })  # fmt: skip
    assert [m["role"] for m in chat["messages"]] == ["system", "user", "assistant", "tool"]
    assert chat["messages"][1]["content"] == "Weather?"
    assert chat["messages"][2]["tool_calls"][0]["function"]["name"] == "weather"
    assert chat["messages"][3] == {"role": "tool", "tool_call_id": "c1", "content": "sunny"}
    assert chat["tools"][0]["function"]["name"] == "weather"
    assert chat["tool_choice"] == {"type": "function", "function": {"name": "weather"}}
    assert chat["max_tokens"] == 20 and chat["user"] == "u1"
    assert chat["response_format"]["json_schema"]["name"] == "w"
    with pytest.raises(BadRequestError) as refused:
        to_chat({"model": "m", "input": "hi", "previous_response_id": "resp_1"})
    assert refused.value.param == "previous_response_id"
    with pytest.raises(BadRequestError):
        to_chat({"model": "m", "input": "hi", "tools": [{"type": "web_search"}]})


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        (
            "litellm.MidStreamFallbackError: litellm.APIConnectionError: APIConnectionError: "
            "OpenAIException - upstream exploded Original exception: APIConnectionError: x",
            "upstream exploded",
        ),
        ("litellm.InternalServerError: InternalServerError: OpenAIException - boom.", "boom"),
        ("litellm.Timeout: APITimeoutError - Request timed out. Error_str: x", "Request timed out"),
        (  # the openai client's status prefix, kept by litellm's embedding path
            "litellm.RateLimitError: RateLimitError: OpenAIException - Error code: 429 - "
            "upstream says rate_limit_exceeded",
            "upstream says rate_limit_exceeded",
        ),
    ],
)
def test_upstream_messages_lose_litellm_wrapper_chains(raw: str, clean: str) -> None:
    assert upstream_message(Exception(raw)) == clean
