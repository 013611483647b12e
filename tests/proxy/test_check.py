"""``POST /v1/groundproxy/check`` in process (httpx.ASGITransport): the real app and lifespan
(real embedder, real on-disk index, real verifier), guarding answers the caller already has."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.conftest import ADMIN_KEYS
from tests.proxy.test_api import HEADERS, assert_openai_error, auth
from tests.proxy.test_api import client as client  # the session app fixture

WRONG = (
    "The Acme vacuum robot has a limited warranty of 24 months from the date of purchase. "
    "Batteries are covered for 6 months."
)
CHECK = "/v1/groundproxy/check"


async def check(c: httpx.AsyncClient, tenant: str, **body: Any) -> httpx.Response:
    return await c.post(CHECK, json=body, headers=auth(tenant))


async def test_wrong_number_corrected_and_cited(client: httpx.AsyncClient) -> None:
    resp = await check(client, "acme", question="How long is the warranty?", answer=WRONG)
    assert resp.status_code == 200, resp.text
    for h in HEADERS:
        assert h in resp.headers, h
    assert resp.headers["x-groundproxy-step-id"].startswith("st_")
    body = resp.json()
    assert set(body) == {"groundproxy", "answer", "action"}
    gp = body["groundproxy"]
    assert set(gp) >= {"trust", "action", "policy", "claims", "latency_ms", "verifier"}
    assert gp["policy"].startswith("acme@") and resp.headers["x-groundproxy-policy"] == gp["policy"]
    warranty = next(c for c in gp["claims"] if "24 months" in c["text"])
    assert warranty["verdict"] == "contradicted"
    assert "12 months" in warranty["correction"]
    assert warranty["citations"][0]["doc"] == "handbook.md"
    battery = next(c for c in gp["claims"] if "6 months" in c["text"])
    assert battery["verdict"] == "supported"
    assert body["action"] == gp["action"] == resp.headers["x-groundproxy-action"] == "rewrite"
    assert "12 months" in body["answer"] and "24 months" not in body["answer"]
    assert "doc:handbook.md#" in resp.headers["x-groundproxy-citations"]
    assert "contradicted=1" in resp.headers["x-groundproxy-claims"]


async def test_supported_answer_is_returned_unchanged(client: httpx.AsyncClient) -> None:
    answer = "You can return an unused robot within 30 days of delivery for a full refund."
    resp = await check(client, "acme", question="Can I get a refund?", answer=answer)
    body = resp.json()
    assert body["action"] == "none"
    assert body["answer"].startswith(answer.rstrip(".")) and "[1]" in body["answer"]  # cited
    assert [c["verdict"] for c in body["groundproxy"]["claims"]] == ["supported"]


async def test_messages_give_question_and_evidence(client: httpx.AsyncClient) -> None:
    messages = [
        {"role": "system", "content": "The team meeting is on Tuesday at 10:00 in room 4."},
        {"role": "user", "content": "When is the meeting?"},
    ]
    resp = await check(
        client,
        "globex",
        answer="The meeting is on Tuesday at 10:00 in room 4.",
        messages=messages,
        model="gpt-4o-mini",
    )
    gp = resp.json()["groundproxy"]
    assert gp["claims"] and all(c["verdict"] == "supported" for c in gp["claims"])
    assert gp["claims"][0]["citations"][0]["doc"] == "request:system#0"


async def test_context_strings_are_evidence(client: httpx.AsyncClient) -> None:
    resp = await check(
        client,
        "globex",
        question="How heavy is the Globex Turbo?",
        answer="The Globex Turbo weighs 5.2 kg.",
        context=["The Globex Turbo weighs 3.4 kg and ships in a cardboard box."],
    )
    body = resp.json()
    claim = body["groundproxy"]["claims"][0]
    assert claim["verdict"] == "contradicted"
    assert claim["citations"][0]["doc"] == "request:context#0"
    assert "3.4 kg" in body["answer"] and "5.2 kg" not in body["answer"]


async def test_tenant_policy_and_index_apply(client: httpx.AsyncClient) -> None:
    """globex's handbook says 36 months: the same answer is judged against globex's index."""
    resp = await check(client, "globex", question="How long is the warranty?", answer=WRONG)
    gp = resp.json()["groundproxy"]
    assert gp["policy"].startswith("globex@")
    docs = {c["doc"] for claim in gp["claims"] for c in claim["citations"]}
    assert docs and docs <= {"globex-handbook.md"}
    assert "36 months" in resp.json()["answer"]


async def test_block_policy_returns_the_refusal(client: httpx.AsyncClient) -> None:
    resp = await check(client, "blocky", question="How long is the warranty?", answer=WRONG)
    assert resp.status_code == 200
    body = resp.json()
    assert body["action"] == "block" == resp.headers["x-groundproxy-action"]
    assert "24 months" not in body["answer"] and body["answer"]


async def test_guard_error_fail_open_is_marked(client: httpx.AsyncClient) -> None:
    resp = await check(client, "loose", question="How long is the warranty?", answer=WRONG)
    body = resp.json()
    assert body["action"] == "unverified" and body["groundproxy"]["unverified"] is True
    assert body["answer"] == WRONG


async def test_admin_key_of_the_tenant_may_check(client: httpx.AsyncClient) -> None:
    resp = await client.post(
        CHECK,
        json={"answer": WRONG, "question": "How long is the warranty?"},
        headers={"authorization": f"Bearer {ADMIN_KEYS['acme']}"},
    )
    assert resp.status_code == 200, resp.text
    assert resp.json()["groundproxy"]["policy"].startswith("acme@")


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"question": "q"}, "answer"),
        ({"answer": 3}, "answer"),
        ({"answer": "a", "context": "not a list"}, "context"),
        ({"answer": "a", "messages": [{"content": "no role"}]}, "messages.0.role"),
        ({"answer": "a", "anwser": "typo"}, "anwser"),
    ],
)
async def test_400_bad_bodies(client: httpx.AsyncClient, body: dict[str, Any], param: str) -> None:
    resp = await client.post(CHECK, json=body, headers=auth("acme"))
    err = assert_openai_error(resp, 400, "invalid_request_error")
    assert err["param"] == param


async def test_400_not_json_and_401_without_key(client: httpx.AsyncClient) -> None:
    resp = await client.post(
        CHECK, content=b'{"answer": ', headers={**auth("acme"), "content-type": "application/json"}
    )
    assert "not valid JSON" in assert_openai_error(resp, 400)["message"]
    assert_openai_error(await client.post(CHECK, json={"answer": "a"}), 401, "authentication_error")
    resp = await client.post(
        CHECK, json={"answer": "a"}, headers={"authorization": "Bearer sk-nobody"}
    )
    assert_openai_error(resp, 401)
