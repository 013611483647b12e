"""The judge's rate limit under ``serve --workers 2`` (issue 40 item 8): the real server with
two worker processes, a scripted upstream and a scripted judge (real HTTP processes). The
workers share the tenant's ``judge.max_calls_per_minute`` (a file under the data folder,
``proxy.serving.judge_limits.SharedRateLimiter``): concurrent requests spread over both
workers make at most that many judge calls in all, and the rest are skipped ``rate_limit``,
visibly."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
import yaml

from groundproxy.policies.keys import hash_key
from groundproxy.testing.processes import free_port, start_fake_upstream, start_proxy, stop_process
from tests.conftest import SAMPLES

pytestmark = pytest.mark.slow

HANDBOOK = (SAMPLES / "handbook.md").read_text(encoding="utf-8")
KEY = "sk-lworkers-limits-test"
LIMIT = 3
REQUESTS = 12


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("judge-workers")
    up_port, judge_port, port = free_port(), free_port(), free_port()
    # the judge's default answer is not JSON (bad_json): nothing is cached, every request
    # that gets past the limit calls the judge
    answer = {"rules": [{"match": "warranty", "answer": "The warranty lasts 12 months."}]}
    (root / "up.json").write_text(json.dumps(answer), encoding="utf-8")
    policies, data = root / "policies", root / "data"
    policies.mkdir()
    spec = {
        "tenant": "lworkers", "keys": [hash_key(KEY)],
        "upstream": {"model": "openai/gpt-4o-mini", "api_base": f"http://127.0.0.1:{up_port}/v1"},
        "latency_budget_ms": 20000, "stream": "buffer",
        "judge": {"model": "openai/judge", "api_base": f"http://127.0.0.1:{judge_port}/v1",
                  "escalate": "all", "max_calls_per_minute": LIMIT},
    }  # fmt: skip
    (policies / "lworkers.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    procs: list[subprocess.Popen[bytes]] = []
    try:
        procs.append(start_fake_upstream(up_port, root / "up.json"))
        procs.append(start_fake_upstream(judge_port))
        env = {"GROUNDPROXY_WORKERS": "2"}  # serve --workers 2
        log = root / "proxy.log"
        procs.append(start_proxy(port, policies, data, env=env, log_path=log, timeout_s=900))
        url = f"http://127.0.0.1:{port}"
        _both_ready(url)
        yield {"url": url, "judge": f"http://127.0.0.1:{judge_port}"}
    finally:
        for proc in reversed(procs):
            stop_process(proc)


def _both_ready(url: str) -> None:
    """Fresh connections until both worker processes answered ``/readyz`` 200 (a worker
    still loading its models answers 503)."""
    seen: set[str] = set()
    deadline = time.monotonic() + 600
    while len(seen) < 2 and time.monotonic() < deadline:
        resp = httpx.get(url + "/readyz", headers={"Connection": "close"}, timeout=60)
        if resp.status_code == 200:
            seen.add(resp.headers["x-groundproxy-worker"])
        else:
            time.sleep(0.5)
    assert len(seen) == 2, seen


def _ask(url: str) -> httpx.Response:
    body = {
        "model": "gpt-4o-mini",
        "messages": [{"role": "system", "content": HANDBOOK},
                     {"role": "user", "content": "How long is the warranty?"}],
    }  # fmt: skip
    headers = {"Authorization": f"Bearer {KEY}", "Connection": "close"}  # a new connection each
    return httpx.post(url + "/v1/chat/completions", json=body, headers=headers, timeout=120)


def test_workers_share_the_judge_rate_limit(served: dict[str, Any]) -> None:
    with ThreadPoolExecutor(max_workers=REQUESTS) as pool:
        answers = list(pool.map(_ask, [served["url"]] * REQUESTS))
    assert all(r.status_code == 200 for r in answers), [r.text[:200] for r in answers]
    assert len({r.headers["x-groundproxy-worker"] for r in answers}) == 2  # both served
    calls = int(httpx.get(served["judge"] + "/_stats", timeout=5).json()["started"])
    assert calls == LIMIT  # both processes together (before: up to LIMIT per worker)
    limited = [r for r in answers if r.json()["groundproxy"]["judge"]["skipped_reasons"].get(
        "rate_limit")]  # fmt: skip
    assert len(limited) == REQUESTS - LIMIT
