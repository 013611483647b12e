"""One streamed two-sentence answer moves each per-answer counter by exactly one, in every
mode: chat streams in buffer, sentence and relay (``guard: false``) mode, the Responses API
and legacy completions (streamed and not): ``groundproxy_actions_total``, the counts of
``groundproxy_guard_seconds`` and ``groundproxy_upstream_seconds``, and
``groundproxy_tokens_total`` by exactly the usage the answer reported (counted once). The real
app in process against the fake upstream process."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
import yaml
from fastapi import FastAPI

from groundproxy.proxy.app import build_app
from groundproxy.proxy.settings import Settings
from tests.conftest import KEYS, _policy, share_index
from tests.proxy.test_metrics import value
from tests.spec_check import sse_events

QUESTION = "How long is the warranty?"  # two sentences, the first contradicted
PER_ANSWER = (
    "groundproxy_actions_total",
    "groundproxy_guard_seconds_count",
    "groundproxy_upstream_seconds_count",
)
# tenant → the action its answer gets: buffer, sentence, guard off (relayed)
ACTIONS = {"acme": "rewrite", "sentence": "rewrite", "loose": "unverified"}


@pytest_asyncio.fixture(scope="module")
async def app(
    tmp_path_factory: pytest.TempPathFactory, data_dir: Path, upstream_port: int
) -> AsyncIterator[FastAPI]:
    policies = tmp_path_factory.mktemp("metric-policies")
    specs = {
        "acme": _policy("acme", upstream_port),
        "sentence": _policy(
            "sentence", upstream_port, retrieval={"index": "acme"}, stream="sentence"
        ),
        "loose": _policy("loose", upstream_port, retrieval={"index": "acme"}, guard=False),
    }
    share_index(specs)
    for tenant, spec in specs.items():
        (policies / f"{tenant}.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    application = build_app(Settings(policies=policies, data=data_dir, watch_policies=False))
    async with application.router.lifespan_context(application):
        yield application


def _usage(payloads: list[dict[str, Any]]) -> dict[str, int]:
    """The usage the answer reported (chat/completions names, or the Responses API's)."""
    for p in reversed(payloads):
        usage = p.get("usage") or (p.get("response") or {}).get("usage")
        if usage:
            prompt = usage.get("prompt_tokens", usage.get("input_tokens"))
            completion = usage.get("completion_tokens", usage.get("output_tokens"))
            return {"prompt": int(prompt), "completion": int(completion)}
    raise AssertionError("no usage in the answer")


REQUESTS: dict[str, tuple[str, dict[str, Any]]] = {
    "chat-stream": (
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": QUESTION}], "stream": True,
         "stream_options": {"include_usage": True}},
    ),
    "chat": ("/v1/chat/completions", {"messages": [{"role": "user", "content": QUESTION}]}),
    "responses-stream": ("/v1/responses", {"input": QUESTION, "stream": True}),
    "responses": ("/v1/responses", {"input": QUESTION}),
    "completions-stream": (
        "/v1/completions",
        {"prompt": QUESTION, "stream": True, "stream_options": {"include_usage": True}},
    ),
    "completions": ("/v1/completions", {"prompt": QUESTION}),
}  # fmt: skip


@pytest.mark.parametrize("tenant", list(ACTIONS))
@pytest.mark.parametrize("kind", list(REQUESTS))
async def test_one_answer_moves_each_per_answer_counter_by_one(
    app: FastAPI, tenant: str, kind: str
) -> None:
    path, body = REQUESTS[kind]
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 40000))
    async with httpx.AsyncClient(transport=transport, base_url="http://gp", timeout=60) as c:
        before = (await c.get("/metrics")).text
        resp = await c.post(
            path,
            headers={"authorization": f"Bearer {KEYS[tenant]}"},
            json={"model": "gpt-4o-mini", **body},
        )
        assert resp.status_code == 200, resp.text
        after = (await c.get("/metrics")).text
    payloads = sse_events(resp.text) if body.get("stream") else [resp.json()]

    def moved(name: str, **labels: str) -> float:
        return value(after, name, tenant=tenant, **labels) - value(
            before, name, tenant=tenant, **labels
        )

    for name in PER_ANSWER:
        assert moved(name) == 1, (name, kind, tenant)
    assert moved("groundproxy_actions_total", action=ACTIONS[tenant]) == 1
    usage = _usage(payloads)
    for token_kind, n in usage.items():
        assert moved("groundproxy_tokens_total", kind=token_kind) == n > 0, (token_kind, kind)
    if tenant == "loose":  # nothing was judged: no verdicts counted
        assert moved("groundproxy_verdicts_total") == 0
    else:
        assert moved("groundproxy_verdicts_total", verdict="contradicted") == 1
    assert json.dumps(payloads)  # the answer itself is plain JSON throughout
