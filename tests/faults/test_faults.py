"""Faults: each yields the expected OpenAI error or a visibly marked answer, and leaves no
asyncio task or upstream connection behind.

Real app and lifespan in process (httpx.ASGITransport, or a raw ASGI call for a client that
disconnects), a real fake-upstream process over HTTP, a real on-disk index.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
import yaml
from fastapi import FastAPI

from groundproxy.guards.types import CONTRADICTION_MIN, Pair, Probs
from groundproxy.policies.keys import hash_key
from groundproxy.proxy.app import build_app
from groundproxy.proxy.settings import Settings
from groundproxy.proxy.state import AppState
from tests.conftest import _policy, share_index_files
from tests.faults.helpers import (
    asgi_post_then_disconnect,
    open_connections,
    settle_tasks,
    upstream_stats,
    wait_for,
)

# real processes, real model exports or many real-model requests: `make test` runs these,
# the working lane (`make fast`, -m "not slow") skips them
pytestmark = pytest.mark.slow

FAULT_TENANTS: dict[str, dict[str, Any]] = {
    "plain": {},
    "impatient": {"upstream": {"timeout_s": 1}},
    "exploding": {"verifier": {"model": "explode"}},
    "exploding-strict": {"verifier": {"model": "explode"}, "on_guard_error": "block"},
    "lost": {"retrieval": {"index": "lost"}},
    "mangled": {"retrieval": {"index": "mangled"}},
}


def key(tenant: str) -> str:
    return f"sk-fault-{tenant}"


def auth(tenant: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key(tenant)}"}


def chat(content: str, model: str = "gpt-4o-mini", **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": content}], **extra}


class ExplodingVerifier:
    name = "explode"
    contradiction_min = CONTRADICTION_MIN

    def score(self, pairs: Sequence[Pair]) -> list[Probs]:
        raise RuntimeError("verifier blew up")


@pytest.fixture(scope="module")
def fault_dirs(
    tmp_path_factory: pytest.TempPathFactory, data_dir: Path, upstream_port: int
) -> tuple[Path, Path]:
    policies = tmp_path_factory.mktemp("fault-policies")
    for tenant, overrides in FAULT_TENANTS.items():
        spec = _policy("acme", upstream_port, **overrides)
        spec.update(
            tenant=tenant,
            keys=[hash_key(key(tenant))],
            admin_keys=[hash_key(f"{key(tenant)}-admin")],
        )
        spec.setdefault("retrieval", {}).setdefault("index", "acme")
        for name in ("slow-5", "drip-0.5"):
            spec["upstream"]["models"][name] = f"openai/{name}"
        (policies / f"{tenant}.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    share_index_files(policies)
    data = tmp_path_factory.mktemp("fault-data")
    shutil.copytree(data_dir / "acme", data / "acme")
    for broken in ("lost", "mangled"):
        shutil.copytree(data_dir / "acme", data / broken)
        current = json.loads((data / broken / "CURRENT").read_text(encoding="utf-8"))
        gen_dir = data / broken / current["generation"]
        if broken == "lost":
            (gen_dir / "index.bin").unlink()
        else:
            (gen_dir / "index.bin").write_bytes(b"\x00garbage" * 64)
    return policies, data


@pytest_asyncio.fixture(scope="module")
async def app(fault_dirs: tuple[Path, Path]) -> AsyncIterator[FastAPI]:
    policies, data = fault_dirs
    application = build_app(Settings(policies=policies, data=data, watch_policies=False))
    async with application.router.lifespan_context(application):
        state: AppState = application.state.gp
        parts = state.served().deps.guard.parts
        parts.verifiers._loaded["explode"] = ExplodingVerifier()  # a verifier that raises
        yield application


@pytest_asyncio.fixture(scope="module")
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gp", timeout=60) as c:
        # One ordinary call first: litellm starts its process-wide logging worker task lazily
        # on the first call; it belongs to the process, not to any request.
        first = await c.post("/v1/chat/completions", json=chat("hi"), headers=auth("plain"))
        assert first.is_success
        yield c


@pytest_asyncio.fixture(autouse=True)
async def no_leaks(upstream_port: int, client: httpx.AsyncClient) -> AsyncIterator[None]:
    """Around every test: no new asyncio task survives it, and it leaves no more pooled
    connections to the upstream than the pool held before (at most one more)."""
    baseline = set(asyncio.all_tasks())
    conns_before = open_connections(upstream_port)
    yield
    leaked = await settle_tasks(baseline)
    assert not leaked, f"tasks left running: {leaked}"
    assert wait_for(lambda: upstream_stats(upstream_port)["inflight"] == 0, 5.0)
    assert open_connections(upstream_port) <= conns_before + 1


def assert_openai_error(resp: httpx.Response, status: int, code: str | None = None) -> str:
    assert resp.status_code == status, resp.text
    err = resp.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["message"]
    if code is not None:
        assert err["code"] == code
    return str(err["message"])


async def stream_events(
    client: httpx.AsyncClient, tenant: str, body: dict[str, Any]
) -> tuple[httpx.Response, list[str]]:
    events: list[str] = []
    async with client.stream("POST", "/v1/chat/completions", json=body, headers=auth(tenant)) as r:
        await r.aread()
        for line in r.text.splitlines():
            if line.startswith("data: "):
                events.append(line.removeprefix("data: "))
    return r, events


# --- upstream faults --------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
async def test_upstream_timeout_is_504_and_the_call_is_dropped(
    client: httpx.AsyncClient, upstream_port: int, stream: bool
) -> None:
    before = upstream_stats(upstream_port)
    started = time.perf_counter()
    resp = await client.post(
        "/v1/chat/completions",
        json=chat("hi", model="slow-5", stream=stream),
        headers=auth("impatient"),
    )
    assert time.perf_counter() - started < 4.0  # the 1 s policy timeout, not the 5 s upstream
    assert_openai_error(resp, 504, "upstream_timeout")
    # The proxy closed its connection: the upstream saw the client go away, not finish.
    assert wait_for(
        lambda: upstream_stats(upstream_port)["disconnected"] > before["disconnected"], 5.0
    )


@pytest.mark.parametrize("stream", [False, True])
async def test_upstream_5xx_is_502_with_its_message(
    client: httpx.AsyncClient, stream: bool
) -> None:
    for _ in range(3):
        resp = await client.post(
            "/v1/chat/completions",
            json=chat("hi", model="fail-500", stream=stream),
            headers=auth("plain"),
        )
        assert "upstream exploded" in assert_openai_error(resp, 502)


@pytest.mark.parametrize("stream", [False, True])
async def test_upstream_malformed_json_is_502(client: httpx.AsyncClient, stream: bool) -> None:
    for _ in range(3):
        resp = await client.post(
            "/v1/chat/completions",
            json=chat("hi", model="bad-json", stream=stream),
            headers=auth("plain"),
        )
        assert_openai_error(resp, 502)


async def test_upstream_stream_cut_mid_answer_is_an_error_not_a_clean_answer(
    client: httpx.AsyncClient,
) -> None:
    """The upstream stops mid-answer without finish_reason or [DONE]. The client must learn
    the answer is incomplete: a 502 before any byte (buffer mode), or, once bytes went out
    (sentence mode), an error event instead of a clean finish."""
    body = chat("How long is the warranty?", model="cut-stream", stream=True)
    resp, events = await stream_events(client, "plain", body)
    if resp.status_code != 200:
        assert resp.status_code == 502, resp.text
        message = resp.json()["error"]["message"]
        assert "incomplete" in message or "finish_reason" in message, message
        return
    assert (events and events[-1] != "[DONE]") or any('"error"' in e for e in events), events
    finishes = [
        c.get("finish_reason")
        for e in events
        if e != "[DONE]"
        for c in json.loads(e).get("choices", [])
    ]
    assert "stop" not in finishes


async def test_upstream_stream_ok_after_faults(client: httpx.AsyncClient) -> None:
    resp, events = await stream_events(client, "plain", chat("Can I get a refund?", stream=True))
    assert resp.status_code == 200 and events[-1] == "[DONE]"
    assert resp.headers["x-groundproxy-action"] == "none"


# --- client disconnect ------------------------------------------------------------------


@pytest.mark.parametrize("model", ["drip-0.5", "slow-5"])
async def test_client_disconnect_cancels_the_upstream_call(
    app: FastAPI, upstream_port: int, model: str
) -> None:
    """The client goes away 0.6 s into a stream whose upstream needs ≥ 5 s: the proxy's
    handler returns at once and the upstream sees its connection closed."""
    before = upstream_stats(upstream_port)
    started = time.perf_counter()
    await asyncio.wait_for(
        asgi_post_then_disconnect(
            app,
            "/v1/chat/completions",
            chat("How long is the warranty?", model=model, stream=True),
            auth("plain"),
            0.6,
        ),
        timeout=4.0,
    )
    assert time.perf_counter() - started < 3.0
    assert wait_for(
        lambda: upstream_stats(upstream_port)["disconnected"] > before["disconnected"], 5.0
    ), upstream_stats(upstream_port)
    after = upstream_stats(upstream_port)
    assert after["finished"] == before["finished"], "the upstream call ran to completion"


# --- guard faults -----------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
async def test_verifier_raising_fails_open_marked(client: httpx.AsyncClient, stream: bool) -> None:
    body = chat("How long is the warranty?", stream=stream)
    if stream:
        resp, events = await stream_events(client, "exploding", body)
        last = json.loads(events[-2])
        assert events[-1] == "[DONE]" and last["groundproxy"]["unverified"] is True
    else:
        resp = await client.post("/v1/chat/completions", json=body, headers=auth("exploding"))
        gp = resp.json()["groundproxy"]
        assert gp["unverified"] is True
        assert "24 months" in resp.json()["choices"][0]["message"]["content"]
    assert resp.status_code == 200
    assert resp.headers["x-groundproxy-action"] == "unverified"


async def test_verifier_raising_blocks_when_policy_says_block(client: httpx.AsyncClient) -> None:
    resp = await client.post(
        "/v1/chat/completions",
        json=chat("How long is the warranty?"),
        headers=auth("exploding-strict"),
    )
    assert resp.status_code == 200
    choice = resp.json()["choices"][0]
    assert choice["finish_reason"] == "content_filter"
    assert "24 months" not in choice["message"]["content"]
    assert resp.headers["x-groundproxy-action"] == "block"


# --- index faults -----------------------------------------------------------------------


async def test_missing_and_corrupt_index_reported_at_start(client: httpx.AsyncClient) -> None:
    ready = await client.get("/readyz")
    assert ready.status_code == 200, "one tenant's broken index must not take the server down"
    assert "errors" not in ready.json()  # details only for the tenant's admin key (issue 14)
    errors: list[str] = []
    for tenant in ("lost", "mangled", "plain"):
        admin = {"authorization": f"Bearer {key(tenant)}-admin"}
        errors += (await client.get("/readyz", headers=admin)).json()["errors"]
    lost = [e for e in errors if "'lost'" in e]
    mangled = [e for e in errors if "'mangled'" in e]
    assert lost and "index.bin" in lost[0] and "missing" in lost[0], errors
    assert mangled and "index.bin" in mangled[0], errors
    assert not [e for e in errors if "'acme'" in e], errors


@pytest.mark.parametrize("tenant", ["lost", "mangled"])
async def test_broken_index_tenant_gets_marked_answer(
    client: httpx.AsyncClient, tenant: str
) -> None:
    resp = await client.post(
        "/v1/chat/completions", json=chat("How long is the warranty?"), headers=auth(tenant)
    )
    assert resp.status_code == 200, resp.text
    assert resp.headers["x-groundproxy-action"] == "unverified"
    assert resp.json()["groundproxy"]["unverified"] is True


async def test_other_tenants_unaffected_by_broken_indexes(client: httpx.AsyncClient) -> None:
    resp = await client.post(
        "/v1/chat/completions", json=chat("How long is the warranty?"), headers=auth("plain")
    )
    assert resp.status_code == 200
    gp = resp.json()["groundproxy"]
    assert gp["unverified"] is False and gp["action"] == "rewrite"
    assert "12 months" in resp.json()["choices"][0]["message"]["content"]
