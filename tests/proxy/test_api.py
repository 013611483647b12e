"""In-process API tests through httpx.ASGITransport: real app, real lifespan (real embedder,
real on-disk index, real lexical verifier), real fake-upstream process over HTTP."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest_asyncio

from groundproxy.proxy.app import build_app
from groundproxy.proxy.settings import Settings
from tests.conftest import ADMIN_KEYS, KEYS

MAX_BODY = 65_536
HEADERS = (
    "x-groundproxy-trust",
    "x-groundproxy-action",
    "x-groundproxy-claims",
    "x-groundproxy-citations",
    "x-groundproxy-policy",
    "x-groundproxy-latency-ms",
    "x-groundproxy-step-id",
    "x-request-id",
)


@pytest_asyncio.fixture(scope="session")
async def client(policies_dir: Path, data_dir: Path) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(
        policies=policies_dir, data=data_dir, watch_policies=False, max_body_bytes=MAX_BODY
    )
    app = build_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gp", timeout=60) as c:
            yield c


def auth(tenant: str) -> dict[str, str]:
    return {"authorization": f"Bearer {KEYS[tenant]}"}


def chat(content: str, model: str = "gpt-4o-mini", **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": content}], **extra}


def assert_openai_error(
    resp: httpx.Response, status: int, etype: str | None = None
) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["message"]
    if etype:
        assert body["error"]["type"] == etype
    return dict(body["error"])


async def test_health_and_ready(client: httpx.AsyncClient) -> None:
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    ready = await client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json() == {"ready": True}  # without an admin key: ready only (issue 14)
    admin = await client.get("/readyz", headers={"authorization": "Bearer sk-acme-admin-key"})
    assert admin.json()["ready"] is True
    assert admin.json()["tenant"] == "acme"


async def test_models_lists_policy_models(client: httpx.AsyncClient) -> None:
    resp = await client.get("/v1/models", headers=auth("strict"))
    assert [m["id"] for m in resp.json()["data"]] == ["gpt-4o-mini"]


async def test_401_without_or_with_unknown_key(client: httpx.AsyncClient) -> None:
    assert_openai_error(
        await client.post("/v1/chat/completions", json=chat("hi")), 401, "authentication_error"
    )
    resp = await client.post(
        "/v1/chat/completions", json=chat("hi"), headers={"authorization": "Bearer sk-nobody"}
    )
    err = assert_openai_error(resp, 401)
    assert err["code"] == "invalid_api_key"
    assert "sk-nobody" not in resp.text


async def test_400_malformed_json(client: httpx.AsyncClient) -> None:
    resp = await client.post(
        "/v1/chat/completions",
        content=b'{"model": "x", "messages": [',
        headers={**auth("acme"), "content-type": "application/json"},
    )
    assert "not valid JSON" in assert_openai_error(resp, 400, "invalid_request_error")["message"]


async def test_400_missing_messages(client: httpx.AsyncClient) -> None:
    resp = await client.post(
        "/v1/chat/completions", json={"model": "gpt-4o-mini"}, headers=auth("acme")
    )
    err = assert_openai_error(resp, 400, "invalid_request_error")
    assert err["param"] == "messages"


async def test_400_non_utf8_and_deep_nesting(client: httpx.AsyncClient) -> None:
    resp = await client.post(
        "/v1/chat/completions", content=b'{"model": "\xff\xfe"}', headers=auth("acme")
    )
    assert "UTF-8" in assert_openai_error(resp, 400)["message"]
    deep = (
        '{"model":"m","messages":[{"role":"user","content":"x"}],"x":' + "[" * 200 + "]" * 200 + "}"
    )
    resp = await client.post("/v1/chat/completions", content=deep.encode(), headers=auth("acme"))
    assert "nests deeper" in assert_openai_error(resp, 400)["message"]


async def test_413_body_over_limit(client: httpx.AsyncClient) -> None:
    resp = await client.post(
        "/v1/chat/completions", json=chat("x" * (MAX_BODY + 10)), headers=auth("acme")
    )
    assert_openai_error(resp, 413)


async def test_404_unknown_model_when_policy_restricts(client: httpx.AsyncClient) -> None:
    resp = await client.post(
        "/v1/chat/completions", json=chat("hi", model="gpt-5-turbo"), headers=auth("strict")
    )
    err = assert_openai_error(resp, 404)
    assert err["code"] == "model_not_found" and err["param"] == "model"


async def test_502_upstream_error_carries_message(client: httpx.AsyncClient) -> None:
    resp = await client.post(
        "/v1/chat/completions", json=chat("hi", model="fail-500"), headers=auth("acme")
    )
    err = assert_openai_error(resp, 502)
    assert "upstream exploded" in err["message"]


async def test_502_upstream_malformed_json(client: httpx.AsyncClient) -> None:
    resp = await client.post(
        "/v1/chat/completions", json=chat("hi", model="bad-json"), headers=auth("acme")
    )
    assert_openai_error(resp, 502)


async def test_504_upstream_timeout(client: httpx.AsyncClient) -> None:
    resp = await client.post(
        "/v1/chat/completions", json=chat("hi", model="slow-3"), headers=auth("hasty")
    )
    err = assert_openai_error(resp, 504)
    assert err["code"] == "upstream_timeout"


async def test_wrong_claim_contradicted_and_corrected(client: httpx.AsyncClient) -> None:
    resp = await client.post(
        "/v1/chat/completions", json=chat("How long is the warranty?"), headers=auth("acme")
    )
    assert resp.status_code == 200, resp.text
    for h in HEADERS:
        assert h in resp.headers, h
    body = resp.json()
    assert body["model"] == "gpt-4o-mini"
    gp = body["groundproxy"]
    assert set(gp) >= {"trust", "action", "policy", "claims"}
    assert gp["policy"].startswith("acme@") and resp.headers["x-groundproxy-policy"] == gp["policy"]
    warranty = next(c for c in gp["claims"] if "24 months" in c["text"])
    assert warranty["verdict"] == "contradicted"
    assert warranty["correction"] and "12 months" in warranty["correction"]
    assert "12 months" in warranty["explanation"]
    assert warranty["citations"][0]["doc"] == "handbook.md"
    assert gp["action"] == "rewrite"
    assert resp.headers["x-groundproxy-action"] == "rewrite"
    content = body["choices"][0]["message"]["content"]
    assert "12 months" in content and "24 months" not in content
    assert "contradicted=1" in resp.headers["x-groundproxy-claims"]
    assert 0.0 <= float(resp.headers["x-groundproxy-trust"]) < 1.0


async def test_right_claim_supported_and_cites_right_doc(client: httpx.AsyncClient) -> None:
    resp = await client.post(
        "/v1/chat/completions", json=chat("Can I get a refund?"), headers=auth("acme")
    )
    gp = resp.json()["groundproxy"]
    assert [c["verdict"] for c in gp["claims"]] == ["supported"]
    cite = gp["claims"][0]["citations"][0]
    assert cite["doc"] == "handbook.md"
    assert "30 days" in cite["quote"]
    assert "doc:handbook.md#" in resp.headers["x-groundproxy-citations"]
    assert resp.headers["x-groundproxy-action"] == "none"


async def test_request_context_is_evidence(client: httpx.AsyncClient) -> None:
    body = {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": "The team meeting is on Tuesday at 10:00 in room 4."},
            {"role": "user", "content": "context question: when is the meeting?"},
        ],
    }
    resp = await client.post("/v1/chat/completions", json=body, headers=auth("globex"))
    gp = resp.json()["groundproxy"]
    assert gp["claims"] and all(c["verdict"] == "supported" for c in gp["claims"])
    assert gp["claims"][0]["citations"][0]["doc"].startswith("request:system")


async def test_stream_buffer_mode_sse(client: httpx.AsyncClient) -> None:
    events: list[str] = []
    async with client.stream(
        "POST",
        "/v1/chat/completions",
        headers=auth("acme"),
        json=chat("How long is the warranty?", stream=True),
    ) as resp:
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith("text/event-stream")
        assert resp.headers["x-groundproxy-action"] == "rewrite"
        async for line in resp.aiter_lines():
            if line.startswith("data: "):
                events.append(line.removeprefix("data: "))
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert "12 months" in text and "24 months" not in text
    assert "groundproxy" in chunks[-1]
    assert all("groundproxy" not in c for c in chunks[:-1])
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


async def test_unknown_fields_pass_through(client: httpx.AsyncClient, upstream_port: int) -> None:
    resp = await client.post(
        "/v1/chat/completions",
        headers=auth("acme"),
        json=chat(
            "refund please",
            temperature=0.3,
            user="u-42",
            foo_bar={"x": 1},
            mock_response="owned",
            api_base="http://127.0.0.9:1",
        ),
    )
    assert resp.status_code == 200
    last = httpx.get(f"http://127.0.0.1:{upstream_port}/_last").json()
    assert last["temperature"] == 0.3 and last["user"] == "u-42"
    assert last["foo_bar"] == {"x": 1}  # unknown fields pass through to the upstream …
    assert "owned" not in resp.text  # … but never steer litellm (mock_response, api_base)
    assert last["model"] == "gpt-4o-mini"


async def test_contradicted_block_policy(client: httpx.AsyncClient) -> None:
    resp = await client.post(
        "/v1/chat/completions", json=chat("How long is the warranty?"), headers=auth("blocky")
    )
    body = resp.json()
    assert resp.status_code == 200
    assert body["choices"][0]["finish_reason"] == "content_filter"
    assert "24 months" not in body["choices"][0]["message"]["content"]
    assert resp.headers["x-groundproxy-action"] == "block"


async def test_guard_error_fail_open_is_marked(client: httpx.AsyncClient) -> None:
    resp = await client.post(
        "/v1/chat/completions", json=chat("How long is the warranty?"), headers=auth("loose")
    )
    assert resp.status_code == 200
    assert resp.headers["x-groundproxy-action"] == "unverified"
    assert resp.json()["groundproxy"]["unverified"] is True
    assert "24 months" in resp.json()["choices"][0]["message"]["content"]


async def test_guard_error_block_refuses(client: httpx.AsyncClient) -> None:
    resp = await client.post(
        "/v1/chat/completions", json=chat("How long is the warranty?"), headers=auth("fragile")
    )
    body = resp.json()
    assert body["choices"][0]["finish_reason"] == "content_filter"
    assert "24 months" not in body["choices"][0]["message"]["content"]
    assert resp.headers["x-groundproxy-action"] == "block"


async def test_admin_api_ingest_delete_scoped(client: httpx.AsyncClient) -> None:
    admin = {"authorization": f"Bearer {ADMIN_KEYS['globex']}"}
    doc = {
        "documents": [
            {
                "id": "notes/pricing.md",
                "text": "The Globex Turbo costs 1,299 dollars and ships in 5 days.",
            }
        ]
    }
    forbidden = await client.post("/v1/groundproxy/documents", json=doc, headers=auth("globex"))
    assert_openai_error(forbidden, 403)
    added = await client.post("/v1/groundproxy/documents", json=doc, headers=admin)
    assert added.status_code == 200, added.text
    assert added.json()["added"] == 1
    listing = (await client.get("/v1/groundproxy/documents", headers=admin)).json()
    ids = [d["doc_id"] for d in listing["data"]]
    assert "notes/pricing.md" in ids and "handbook.md" not in ids
    bad = await client.post(
        "/v1/groundproxy/documents",
        headers=admin,
        json={"documents": [{"id": "../../etc/passwd", "text": "x"}]},
    )
    assert_openai_error(bad, 400)
    gone = await client.request(
        "DELETE", "/v1/groundproxy/documents", headers=admin, json={"ids": ["notes/pricing.md"]}
    )
    assert gone.json()["deleted"] == ["notes/pricing.md"]
    assert gone.json()["version"] > added.json()["version"]


async def test_tenants_see_only_their_documents(client: httpx.AsyncClient) -> None:
    resp = await client.post(
        "/v1/chat/completions", json=chat("How long is the warranty?"), headers=auth("globex")
    )
    gp = resp.json()["groundproxy"]
    docs = {c["doc"] for claim in gp["claims"] for c in claim["citations"]}
    assert docs and docs <= {"globex-handbook.md"}
    cited = resp.headers["x-groundproxy-citations"].split("; ")
    assert cited and all(c.startswith("doc:globex-handbook.md#") for c in cited), cited
