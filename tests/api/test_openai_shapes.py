"""Every response and stream chunk the proxy produces validates against OpenAI's own spec
(tests/spec_check.py), in every mode: buffer, sentence, relay (guard off), non-streamed;
with tool calls, legacy function calls, JSON mode, logprobs, ``include_usage``, and errors.
Tool calls pass through untouched; JSON answers stay JSON. The real app (lifespan, embedder,
on-disk index, guard) with the in-process scripted upstream in place of litellm."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
import structlog
import yaml

from groundproxy.proxy.app import build_app
from groundproxy.proxy.deps import build_deps
from groundproxy.proxy.settings import Settings
from groundproxy.testing.fake_upstream_client import FakeUpstream
from tests.conftest import KEYS, _policy, share_index
from tests.spec_check import check, check_stream

# real processes, real model exports or many real-model requests: `make test` runs these,
# the working lane (`make fast`, -m "not slow") skips them
pytestmark = pytest.mark.slow

WEATHER_ARGS = '{"city": "Paris", "unit": "celsius"}'
JSON_ANSWER = json.dumps({
    "product": "Acme vacuum robot",
    "warranty": "The warranty lasts 24 months from the date of purchase.",
    "months": 24,
})  # fmt: skip
RULES: list[dict[str, Any]] = [
    {"match": "weather", "answer": "Let me look that up.",
     "tool_calls": [{"name": "get_weather", "arguments": WEATHER_ARGS},
                    {"name": "get_time", "arguments": '{"tz": "Europe/Paris"}'}]},
    {"match": "legacy", "function_call": {"name": "lookup", "arguments": '{"q": "x"}'}},
    {"match": "as json", "answer": JSON_ANSWER},
    {"match": "warranty", "answer": "The warranty lasts 24 months. It covers the battery."},
]  # fmt: skip
SCHEMA = {
    "type": "object",
    "properties": {
        "product": {"type": "string"},
        "warranty": {"type": "string"},
        "months": {"type": "integer"},
    },
    "required": ["product", "warranty", "months"],
    "additionalProperties": False,
}
TENANTS = ("acme", "sentence", "loose")  # buffer, sentence, guard off (relay when streamed)


@pytest.fixture(scope="module")
async def client(
    tmp_path_factory: pytest.TempPathFactory, data_dir: Path
) -> AsyncIterator[httpx.AsyncClient]:
    structlog.reset_defaults()
    policies = tmp_path_factory.mktemp("shape-policies")
    specs = {
        "acme": _policy("acme", 9, retrieval={"index": "acme"}),  # port 9: never used
        "sentence": _policy("sentence", 9, retrieval={"index": "acme"}, stream="sentence"),
        "loose": _policy("loose", 9, retrieval={"index": "acme"}, guard=False),
    }
    share_index(specs)
    for tenant, spec in specs.items():
        (policies / f"{tenant}.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    settings = Settings(policies=policies, data=data_dir, watch_policies=False)
    app = build_app(settings, build_deps(settings).replace(upstream=FakeUpstream(RULES)))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gp", timeout=60) as c:
            yield c


async def _post(c: httpx.AsyncClient, tenant: str, question: str, **extra: Any) -> httpx.Response:
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": question}], **extra}
    resp = await c.post(
        "/v1/chat/completions", json=body, headers={"authorization": f"Bearer {KEYS[tenant]}"}
    )
    assert resp.status_code == 200, resp.text
    return resp


def _merged_calls(chunks: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[int]]:
    """The streamed tool calls folded by index, and the indices in the order they came."""
    calls: dict[int, dict[str, Any]] = {}
    order: list[int] = []
    for chunk in chunks:
        for choice in chunk["choices"]:
            for part in choice["delta"].get("tool_calls") or []:
                order.append(part["index"])
                call = calls.setdefault(part["index"], {"id": None, "name": "", "arguments": ""})
                call["id"] = part.get("id") or call["id"]
                call["name"] += (part.get("function") or {}).get("name") or ""
                call["arguments"] += (part.get("function") or {}).get("arguments") or ""
    return [calls[i] for i in sorted(calls)], order


def _content(chunks: list[dict[str, Any]]) -> str:
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])


@pytest.mark.parametrize("tenant", TENANTS)
async def test_tool_calls_pass_through_non_streamed(client: httpx.AsyncClient, tenant: str) -> None:
    body = (await _post(client, tenant, "What is the weather in Paris?", logprobs=True)).json()
    check("CreateChatCompletionResponse", body)
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    calls = choice["message"]["tool_calls"]
    assert [(c["function"]["name"], c["function"]["arguments"]) for c in calls] == [
        ("get_weather", WEATHER_ARGS),
        ("get_time", '{"tz": "Europe/Paris"}'),
    ]
    assert choice["message"]["content"].startswith("Let me look that up")  # prose: guarded
    assert body["system_fingerprint"] == "fp_fake"
    assert "groundproxy" in body
    legacy = (await _post(client, tenant, "legacy call")).json()
    check("CreateChatCompletionResponse", legacy)
    assert legacy["choices"][0]["message"]["function_call"] == {
        "name": "lookup", "arguments": '{"q": "x"}'
    }  # fmt: skip
    assert legacy["choices"][0]["finish_reason"] == "function_call"


@pytest.mark.parametrize("tenant", TENANTS)
async def test_tool_calls_stream_in_order_in_every_mode(
    client: httpx.AsyncClient, tenant: str
) -> None:
    resp = await _post(client, tenant, "What is the weather in Paris?", stream=True)
    chunks = check_stream(resp.text)
    calls, order = _merged_calls(chunks)
    assert calls == [
        {"id": "call_0_get_weather", "name": "get_weather", "arguments": WEATHER_ARGS},
        {"id": "call_1_get_time", "name": "get_time", "arguments": '{"tz": "Europe/Paris"}'},
    ]
    assert order == sorted(order)  # deltas in order, each with its index
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert "groundproxy" in chunks[-1]
    assert _content(chunks).startswith("Let me look that up")  # the prose, guarded
    assert all(c.get("system_fingerprint") == "fp_fake" for c in chunks)
    legacy = check_stream((await _post(client, tenant, "legacy call", stream=True)).text)
    fc = [c["choices"][0]["delta"]["function_call"] for c in legacy
          if c["choices"] and "function_call" in c["choices"][0]["delta"]]  # fmt: skip
    assert "".join(f.get("arguments", "") for f in fc) == '{"q": "x"}'
    assert fc[0]["name"] == "lookup"


@pytest.mark.parametrize("tenant", TENANTS)
async def test_include_usage_is_a_final_empty_choices_chunk(
    client: httpx.AsyncClient, tenant: str
) -> None:
    opts = {"stream": True, "stream_options": {"include_usage": True}, "logprobs": True}
    chunks = check_stream((await _post(client, tenant, "How long is the warranty?", **opts)).text)
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] > 0
    assert "groundproxy" in chunks[-1]
    assert all("usage" not in c or c["usage"] is None for c in chunks[:-1])
    plain = check_stream((await _post(client, tenant, "warranty?", stream=True)).text)
    assert all(c.get("usage") is None for c in plain) and plain[-1]["choices"]
    # logprobs ride along, for text the guard did not replace
    tokens = [t for c in chunks if c["choices"] for t in
              (c["choices"][0].get("logprobs") or {}).get("content") or []]  # fmt: skip
    if tenant == "loose":
        assert "".join(t["token"] for t in tokens) == _content(chunks)
    else:
        assert all(t["token"] in _content(chunks) for t in tokens)


@pytest.mark.parametrize("tenant", TENANTS)
@pytest.mark.parametrize("stream", [False, True])
async def test_json_answers_stay_valid_json(
    client: httpx.AsyncClient, tenant: str, stream: bool
) -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "w", "schema": SCHEMA, "strict": True}}
    for response_format in ({"type": "json_object"}, fmt, None):
        extra: dict[str, Any] = {"stream": stream}
        if response_format:
            extra["response_format"] = response_format
        resp = await _post(client, tenant, "Answer as json: the warranty?", **extra)
        if stream:
            chunks = check_stream(resp.text)
            content, gp = _content(chunks), chunks[-1]["groundproxy"]
        else:
            body = resp.json()
            check("CreateChatCompletionResponse", body)
            content, gp = body["choices"][0]["message"]["content"], body["groundproxy"]
        doc = json.loads(content)  # never a marker, never "Sources:"
        jsonschema.validate(doc, SCHEMA)
        assert "Sources" not in content and "[1]" not in content
        if tenant != "loose":
            verdicts = {c["text"]: c["verdict"] for c in gp["claims"]}
            assert any("24 months" in t and v == "contradicted" for t, v in verdicts.items())
            assert gp["action"] != "none"
            if not stream or response_format:  # buffered: the verdict is in the headers too
                assert resp.headers["x-groundproxy-action"] == gp["action"]
            # the contradicted values are corrected in place: in a plain string field, and
            # the number (a claim too, "months: 24 months") as an integer of the schema
            assert "24 months" not in doc["warranty"] and doc["months"] == 12, gp
            assert any("months: 24 months" in t for t in verdicts), verdicts


async def test_errors_and_models_validate(client: httpx.AsyncClient) -> None:
    bad_key = await client.post(
        "/v1/chat/completions", json={"model": "m", "messages": []},
        headers={"authorization": "Bearer nope"},
    )  # fmt: skip
    assert bad_key.status_code == 401
    check("ErrorResponse", bad_key.json())
    auth = {"authorization": f"Bearer {KEYS['acme']}"}
    bad = await client.post("/v1/chat/completions", json={"model": "m"}, headers=auth)
    assert bad.status_code == 400
    check("ErrorResponse", bad.json())
    msgs = [{"role": "user", "content": "hi"}]
    failed = await client.post(
        "/v1/chat/completions", json={"model": "fail-500", "messages": msgs}, headers=auth
    )
    assert failed.status_code >= 500
    check("ErrorResponse", failed.json())
    first = (await client.get("/v1/models", headers=auth)).json()
    check("ListModelsResponse", first)
    for model in first["data"]:
        check("Model", model)
    assert (await client.get("/v1/models", headers=auth)).json() == first  # stable `created`
