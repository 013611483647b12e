"""``stream: sentence`` through the real app (in-process) and a real fake-upstream process."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest_asyncio
import structlog

from groundproxy.proxy.app import build_app
from groundproxy.proxy.settings import Settings
from tests.conftest import KEYS

QUESTION = "How long is the warranty?"


@pytest_asyncio.fixture(scope="module")
async def client(policies_dir: Path, data_dir: Path) -> AsyncIterator[httpx.AsyncClient]:
    # A CLI test earlier in the session may have pointed structlog at a captured (now
    # closed) stderr; log to whatever stdout is current instead.
    structlog.reset_defaults()
    settings = Settings(policies=policies_dir, data=data_dir, watch_policies=False)
    app = build_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gp", timeout=60) as c:
            yield c


async def events(
    client: httpx.AsyncClient, tenant: str, model: str = "gpt-4o-mini", content: str = QUESTION
) -> tuple[httpx.Response, list[Any]]:
    body = {"model": model, "stream": True, "messages": [{"role": "user", "content": content}]}
    out: list[Any] = []
    async with client.stream(
        "POST",
        "/v1/chat/completions",
        json=body,
        headers={"authorization": f"Bearer {KEYS[tenant]}", "x-request-id": "req-sent-1"},
    ) as resp:
        async for line in resp.aiter_lines():
            if line.startswith("data: "):
                data = line.removeprefix("data: ")
                out.append(data if data == "[DONE]" else json.loads(data))
    return resp, out


def text_of(chunks: list[Any]) -> str:
    return "".join(
        c["choices"][0]["delta"].get("content") or ""
        for c in chunks
        if isinstance(c, dict) and c.get("choices")
    )


async def test_sentence_mode_corrects_and_cites(client: httpx.AsyncClient) -> None:
    resp, chunks = await events(client, "sentence")
    assert resp.status_code == 200
    assert resp.headers["x-request-id"] == "req-sent-1"
    assert resp.headers["x-groundproxy-step-id"].startswith("st_")
    assert resp.headers["x-groundproxy-policy"].startswith("sentence@")
    assert "x-groundproxy-action" not in resp.headers  # the verdict is not known yet
    assert chunks[-1] == "[DONE]"
    last = chunks[-2]
    gp = last["groundproxy"]
    assert all("groundproxy" not in c for c in chunks[:-2])
    assert last["choices"][0]["finish_reason"] == "stop"
    text = text_of(chunks)
    assert "12 months" in text and "24 months" not in text
    assert "Sources:" in text and "handbook.md" in text
    wrong = next(c for c in gp["claims"] if "24 months" in c["text"])
    assert wrong["verdict"] == "contradicted" and wrong["action"] == "corrected"
    assert "12 months" in wrong["correction"]
    assert wrong["explanation"] == "evidence states 12 months, claim states 24 months"
    assert wrong["citations"][0]["doc"] == "handbook.md"
    right = next(c for c in gp["claims"] if "6 months" in c["text"])
    assert right["verdict"] == "supported"
    assert gp["action"] == "rewrite"
    # spans index the upstream's original answer, across sentences
    original = (
        "The Acme vacuum robot has a limited warranty of 24 months from the date of "
        "purchase. Batteries are covered for 6 months."
    )
    for c in gp["claims"]:
        assert original[c["span"][0] : c["span"][1]] == c["text"]


async def test_first_sentence_leaves_before_the_answer_ends(client: httpx.AsyncClient) -> None:
    """With a dripping upstream the first verified sentence arrives while the rest streams."""
    _, chunks = await events(client, "sentence", model="drip-0.02")
    contents = [
        i
        for i, c in enumerate(chunks)
        if isinstance(c, dict) and c.get("choices") and c["choices"][0]["delta"].get("content")
    ]
    assert len(contents) >= 3  # sentence 1, sentence 2, footnotes — not one lump
    assert "12 months" in text_of(chunks)


async def test_sentence_mode_block_withholds_the_rest(client: httpx.AsyncClient) -> None:
    _, chunks = await events(client, "sentblock")
    last = chunks[-2]
    assert last["choices"][0]["finish_reason"] == "content_filter"
    assert last["groundproxy"]["action"] == "block"
    text = text_of(chunks)
    assert "24 months" not in text and "6 months" not in text
    assert "could not be verified" in text


async def test_sentence_mode_upstream_error_keeps_status(client: httpx.AsyncClient) -> None:
    resp, _ = await events(client, "sentence", model="fail-500")
    assert resp.status_code == 502


async def test_sentence_mode_cut_stream_ends_with_error_event(client: httpx.AsyncClient) -> None:
    resp, chunks = await events(client, "sentence", model="cut-stream")
    assert resp.status_code == 200
    assert chunks[-1] == "[DONE]"
    assert chunks[-2]["error"]["code"] in ("upstream_incomplete", "upstream_error")
    assert "groundproxy" not in chunks[-2]
