"""A client that hangs up mid-stream, through the real `groundproxy serve` process and a raw
TCP socket: the proxy cancels its upstream call (the fake upstream sees its connection
closed before the answer finished) and keeps serving.

The in-process variant (ASGI, no sockets) is in test_faults.py; this one proves the same
through uvicorn's real disconnect handling.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from groundproxy.policies.keys import hash_key
from groundproxy.testing.processes import free_port, start_proxy, stop_process
from tests.conftest import _policy, share_index_files
from tests.faults.helpers import upstream_stats, wait_for

pytestmark = pytest.mark.slow

# guard on, sentence mode, and guard off (relayed chunk by chunk, proxy.serving.relay): the
# response starts at once and the client hangs up mid-stream.
TENANTS: dict[str, dict[str, Any]] = {
    "sentence": {"stream": "sentence"},
    "unguarded": {"guard": False},
}


def key(tenant: str) -> str:
    return f"sk-disconnect-{tenant}"


@pytest.fixture(scope="module")
def proxy_port(
    tmp_path_factory: pytest.TempPathFactory, data_dir: Path, upstream_port: int
) -> Iterator[int]:
    policies = tmp_path_factory.mktemp("disconnect-policies")
    for tenant, overrides in TENANTS.items():
        spec = _policy("acme", upstream_port, **overrides)
        spec.update(tenant=tenant, keys=[hash_key(key(tenant))], admin_keys=[])
        spec["retrieval"] = {"index": "acme"}
        spec["upstream"]["models"]["drip-0.5"] = "openai/drip-0.5"
        spec["upstream"]["models"]["drip-0.1"] = "openai/drip-0.1"
        (policies / f"{tenant}.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    share_index_files(policies)
    port = free_port()
    log = tmp_path_factory.mktemp("disconnect-log") / "proxy.log"
    proc: subprocess.Popen[bytes] = start_proxy(port, policies, data_dir, log_path=log)
    try:
        yield port
    finally:
        stop_process(proc)


def _raw_stream_request(port: int, tenant: str) -> socket.socket:
    """Send a streaming chat request over a plain socket; return the open socket."""
    body = json.dumps(
        {
            "model": "drip-0.5",  # the upstream waits 0.5 s before each word: ~12 s in all
            "stream": True,
            "messages": [{"role": "user", "content": "How long is the warranty?"}],
        }
    ).encode()
    head = (
        "POST /v1/chat/completions HTTP/1.1\r\n"
        f"Host: 127.0.0.1:{port}\r\n"
        f"Authorization: Bearer {key(tenant)}\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(head + body)
    return sock


@pytest.mark.parametrize("tenant", sorted(TENANTS))
def test_hang_up_mid_stream_cancels_the_upstream_call(
    proxy_port: int, upstream_port: int, tenant: str
) -> None:
    before = upstream_stats(upstream_port)
    sock = _raw_stream_request(proxy_port, tenant)
    try:
        first = sock.recv(4096)  # the response has started streaming
        assert first.startswith(b"HTTP/1.1 200"), first[:200]
        if tenant == "unguarded":
            assert b"x-groundproxy-stream: relay" in first.lower(), first[:400]
            time.sleep(1.0)  # a few words have been relayed
    finally:
        sock.close()
    assert wait_for(
        lambda: upstream_stats(upstream_port)["disconnected"] > before["disconnected"], 5.0
    ), upstream_stats(upstream_port)
    after = upstream_stats(upstream_port)
    assert after["finished"] == before["finished"], "the upstream call ran to completion"
    assert after["inflight"] == before["inflight"]

    # The server is still healthy and answers the next request in full.
    assert httpx.get(f"http://127.0.0.1:{proxy_port}/readyz", timeout=5).status_code == 200
    resp = httpx.post(
        f"http://127.0.0.1:{proxy_port}/v1/chat/completions",
        json={
            "model": "gpt-4o-mini",
            "messages": [{"role": "user", "content": "How long is the warranty?"}],
        },
        headers={"authorization": f"Bearer {key(tenant)}"},
        timeout=30,
    )
    assert resp.status_code == 200, resp.text
    # (the guard-on tenant rewrites the upstream's "24 months" to the documents' 12)
    assert "limited warranty of" in resp.json()["choices"][0]["message"]["content"]


def test_unguarded_stream_is_relayed_as_it_arrives(proxy_port: int) -> None:
    """guard: false → chunks leave as the upstream sends them (0.1 s per word), not after
    the whole answer; the contract of an unguarded answer is kept (headers, last event)."""
    started = time.perf_counter()
    arrivals: list[float] = []
    events: list[dict[str, Any]] = []
    with httpx.stream(
        "POST",
        f"http://127.0.0.1:{proxy_port}/v1/chat/completions",
        json={
            "model": "drip-0.1",
            "stream": True,
            "messages": [{"role": "user", "content": "How long is the warranty?"}],
        },
        headers={"authorization": f"Bearer {key('unguarded')}"},
        timeout=30,
    ) as resp:
        assert resp.status_code == 200
        assert resp.headers["x-groundproxy-action"] == "unverified"
        assert resp.headers["x-groundproxy-stream"] == "relay"
        for line in resp.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            events.append(json.loads(line.removeprefix("data: ")))
            if events[-1]["choices"] and events[-1]["choices"][0]["delta"].get("content"):
                arrivals.append(time.perf_counter() - started)
    total = time.perf_counter() - started
    text = "".join(e["choices"][0]["delta"].get("content", "") for e in events if e["choices"])
    assert "warranty" in text and len(arrivals) > 5
    # the first words arrived long before the last (the answer takes ≥ 2 s to drip out)
    assert total >= 2.0 and arrivals[0] < total / 2, (arrivals[0], total)
    last = events[-1]
    assert last["choices"][0]["finish_reason"] == "stop"
    assert last["groundproxy"]["action"] == "unverified"
    assert all(c["action"] == "unverified" for c in last["groundproxy"]["claims"])
