"""1,000 randomized requests across three tenants whose documents are near-identical:
no citation, correction or cached verdict ever crosses a tenant boundary."""

from __future__ import annotations

import asyncio
import json
import random
import time
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from groundproxy.proxy.state import AppState
from tests.isolation.conftest import ISO_TENANTS, key

# real processes, real model exports or many real-model requests: `make test` runs these,
# the working lane (`make fast`, -m "not slow") skips them
pytestmark = pytest.mark.slow

N_REQUESTS = 1000
CONCURRENCY = 8
QUESTIONS = [
    "How long is the warranty?",
    "Can I get a refund?",
    "Tell me about warranty and refund terms.",
    "hello there",
]


def _body(rng: random.Random) -> dict[str, Any]:
    messages: list[dict[str, str]] = []
    if rng.random() < 0.25:  # request context is evidence too: it must stay this request's
        messages.append({"role": "system", "content": "The team meeting is on Tuesday at 10:00."})
    messages.append({"role": "user", "content": rng.choice(QUESTIONS)})
    return {"model": "gpt-4o-mini", "messages": messages, "stream": rng.random() < 0.3}


def _parse(resp: httpx.Response, stream: bool) -> tuple[str, dict[str, Any]]:
    if not stream:
        body = resp.json()
        return body["choices"][0]["message"]["content"], body["groundproxy"]
    chunks = [
        json.loads(line[6:])
        for line in resp.text.splitlines()
        if line.startswith("data: ") and line != "data: [DONE]"
    ]
    text = "".join(
        c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices")
    )
    return text, chunks[-1]["groundproxy"]


def _check(tenant: str, resp: httpx.Response, stream: bool) -> int:
    assert resp.status_code == 200, resp.text
    text, gp = _parse(resp, stream)
    assert gp["policy"].startswith(f"{tenant}@")
    cited = [c["doc"] for claim in gp["claims"] for c in claim["citations"]]
    for doc in cited:
        assert doc.startswith(f"{tenant}/") or doc.startswith("request:"), (tenant, doc)
    header = resp.headers.get("x-groundproxy-citations", "")
    for item in filter(None, header.split("; ")):
        # index chunks read doc:<tenant>/…; the request's own messages request:<role>#<i>#…
        assert item.startswith(f"doc:{tenant}/") or item.startswith("request:"), item
    months = ISO_TENANTS[tenant][0]
    for other, (m, d) in ISO_TENANTS.items():
        if other != tenant:  # another tenant's figures never reach this tenant's answer
            assert f"{m} months" not in text and f"{d} days" not in text, (tenant, text)
    if "24 months" in gp["claims"][0]["text"] if gp["claims"] else False:
        assert f"{months} months" in text
    return len(cited)


async def test_1000_randomized_requests_never_cross_tenants(
    iso_client: httpx.AsyncClient, iso_app: FastAPI
) -> None:
    rng = random.Random(5)
    plan = [(rng.choice(sorted(ISO_TENANTS)), _body(rng)) for _ in range(N_REQUESTS)]
    sem = asyncio.Semaphore(CONCURRENCY)
    citations = 0

    async def one(tenant: str, body: dict[str, Any]) -> None:
        nonlocal citations
        async with sem:
            resp = await iso_client.post(
                "/v1/chat/completions",
                json=body,
                headers={"authorization": f"Bearer {key(tenant)}"},
            )
        citations += _check(tenant, resp, body["stream"])

    started = time.perf_counter()
    await asyncio.gather(*(one(t, b) for t, b in plan))
    elapsed = time.perf_counter() - started
    print(f"{N_REQUESTS} requests in {elapsed:.1f} s, {citations} citations checked")
    assert citations > N_REQUESTS // 2  # the check had something to check
    # The verdict cache keys every entry by tenant. The same (claim, evidence) pair — the
    # shared products.md and identical claims — must be held once per tenant: each tenant
    # computed its own verdict, none was served another tenant's.
    state: AppState = iso_app.state.gp
    cache = state.served().deps.guard.parts.verdict_cache
    if cache is not None:
        owners: dict[bytes, set[str]] = {}
        for tenant, digest in list(cache._data):
            owners.setdefault(digest, set()).add(tenant)
        assert set().union(*owners.values()) <= set(ISO_TENANTS)
        assert any(len(t) > 1 for t in owners.values()), "no pair shared across tenants"
        assert cache.stats()["hits"] > 0
