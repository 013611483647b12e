"""A 20,000-word upstream answer through the real ``groundproxy serve`` process: the guard
works in a worker thread up to ``max_answer_chars`` and stops at its deadline, so

- the answer comes back within the latency budget plus a margin, marked unverified;
- ``/healthz``, polled meanwhile, keeps answering fast (the event loop never splits it);
- the next request right after it, on one guard worker, is verified within its budget
  (the abandoned guard did not keep the worker busy).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from groundproxy.policies.keys import hash_key
from groundproxy.testing.processes import (
    free_port,
    start_fake_upstream,
    start_proxy,
    stop_process,
)
from tests.conftest import UPSTREAM_SCRIPT, _policy, share_index_files

pytestmark = pytest.mark.slow

BUDGET_MS = 800
SENTENCES = [
    "The Acme vacuum robot has a limited warranty of 12 months from the date of purchase.",
    "Batteries are covered for 6 months.",
    "You can return an unused robot within 30 days of delivery for a full refund.",
    "The robot cleans carpets and hard floors in the same run.",
]
LONG = "\n\n".join(" ".join(SENTENCES) for _ in range(20_000 // 48 + 1))
KEY = "sk-long-answer"


@pytest.fixture(scope="module")
def proxy_port(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Iterator[int]:
    tmp = tmp_path_factory.mktemp("long-answer")
    script = tmp / "script.json"
    rules = [{"match": "everything", "answer": LONG}, *UPSTREAM_SCRIPT["rules"]]
    script.write_text(json.dumps({"default": "I do not know.", "rules": rules}), "utf-8")
    upstream_port = free_port()
    upstream = start_fake_upstream(upstream_port, script)
    policies = tmp / "policies"
    policies.mkdir()
    spec = _policy("acme", upstream_port, latency_budget_ms=BUDGET_MS)
    spec.update(tenant="longish", keys=[hash_key(KEY)], admin_keys=[])
    spec["retrieval"] = {"index": "acme"}
    (policies / "longish.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    share_index_files(policies)
    port = free_port()
    env = {"GROUNDPROXY_GUARD_WORKERS": "1"}
    proc: subprocess.Popen[bytes] = start_proxy(
        port, policies, data_dir, env=env, log_path=tmp / "proxy.log"
    )
    try:
        yield port
    finally:
        stop_process(proc)
        stop_process(upstream)


def _ask(port: int, question: str) -> tuple[httpx.Response, float]:
    started = time.perf_counter()
    resp = httpx.post(
        f"http://127.0.0.1:{port}/v1/chat/completions",
        json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": question}]},
        headers={"authorization": f"Bearer {KEY}"},
        timeout=60,
    )
    return resp, time.perf_counter() - started


def test_long_answer_keeps_the_budget_and_the_event_loop_free(proxy_port: int) -> None:
    assert len(LONG.split()) >= 20_000
    _ask(proxy_port, "How long is the warranty?")  # warm: models loaded, first guard timed
    health: list[float] = []
    done = threading.Event()

    def poll() -> None:
        with httpx.Client(base_url=f"http://127.0.0.1:{proxy_port}", timeout=10) as c:
            while not done.is_set():
                t = time.perf_counter()
                assert c.get("/healthz").status_code == 200
                health.append(time.perf_counter() - t)
                time.sleep(0.02)

    poller = threading.Thread(target=poll)
    poller.start()
    # a few polls before the request, so the samples are not all from a request that the
    # guard's admission estimate may end quickly (unverified at once: a handful of polls)
    deadline = time.monotonic() + 10
    while len(health) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        resp, seconds = _ask(proxy_port, "Tell me everything about the robot.")
    finally:
        done.set()
        poller.join()
    assert resp.status_code == 200, resp.text
    body = resp.json()
    verdict = body["groundproxy"]
    assert verdict["unverified"] and verdict["action"] == "unverified"
    assert body["choices"][0]["message"]["content"].endswith(SENTENCES[-1])  # all of it
    # the budget, plus the upstream call and the transfer of ~120 kB both ways
    assert seconds < BUDGET_MS / 1000.0 + 1.0, seconds
    assert len(health) >= 5
    assert statistics.median(health) < 0.05, health
    # a frozen loop (the issue: 10.5 s) fails at once; one scheduling hiccup of the shared
    # 2-core CI box (a single 0.30 s poll was seen once) does not
    assert sorted(health)[-2] < 0.25, health
    assert max(health) < 1.0, health

    # the abandoned guard stopped at its deadline: the one worker is free for the next one
    nxt, _ = _ask(proxy_port, "How long is the warranty?")
    assert nxt.status_code == 200
    assert nxt.json()["groundproxy"]["action"] != "unverified", nxt.json()["groundproxy"]
