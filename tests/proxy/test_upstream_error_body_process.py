"""A 3 MB upstream error body through the real ``groundproxy serve`` process.

litellm's secret redaction used to run over the whole body on the event loop (~11 s frozen
proxy). The transport under litellm (proxy.upstream.transport) cuts error bodies first, so

- the client gets the clean OpenAI-shaped 503 with the upstream's ``retry-after``, promptly;
- a ``/healthz`` sent while the error is handled answers fast (generous bound: loaded box;
  the figures are in bench/results/overload.txt).
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from groundproxy.policies.keys import hash_key
from groundproxy.testing.processes import free_port, start_proxy, stop_process
from tests.conftest import _policy, share_index_files

pytestmark = pytest.mark.slow

KEY = "sk-huge-error"


@pytest.fixture(scope="module")
def proxy_port(
    tmp_path_factory: pytest.TempPathFactory, data_dir: Path, upstream_port: int
) -> Iterator[int]:
    policies = tmp_path_factory.mktemp("huge-error-policies")
    spec = _policy("acme", upstream_port)
    spec.update(tenant="hugeerr", keys=[hash_key(KEY)], admin_keys=[])
    spec["retrieval"] = {"index": "acme"}
    spec["upstream"]["models"]["huge-error"] = "openai/huge-error"
    (policies / "hugeerr.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    share_index_files(policies)
    port = free_port()
    log = tmp_path_factory.mktemp("huge-error-log") / "proxy.log"
    proc: subprocess.Popen[bytes] = start_proxy(port, policies, data_dir, log_path=log)
    try:
        yield port
    finally:
        stop_process(proc)


def _ask(port: int, model: str, stream: bool = False) -> tuple[httpx.Response, float]:
    started = time.perf_counter()
    resp = httpx.post(
        f"http://127.0.0.1:{port}/v1/chat/completions",
        json={"model": model, "stream": stream, "messages": [{"role": "user", "content": "hi"}]},
        headers={"authorization": f"Bearer {KEY}"},
        timeout=60,
    )
    return resp, time.perf_counter() - started


@pytest.mark.parametrize("stream", [False, True])
def test_huge_error_body_is_cut_and_the_loop_stays_free(proxy_port: int, stream: bool) -> None:
    _ask(proxy_port, "huge-error", stream)  # warm: litellm's first failure imports modules
    health: list[float] = []
    done = threading.Event()

    def poll() -> None:
        with httpx.Client(base_url=f"http://127.0.0.1:{proxy_port}", timeout=30) as c:
            while not done.is_set():
                t = time.perf_counter()
                assert c.get("/healthz").status_code == 200
                health.append(time.perf_counter() - t)
                time.sleep(0.01)

    poller = threading.Thread(target=poll)
    poller.start()
    try:
        resp, seconds = _ask(proxy_port, "huge-error", stream)
    finally:
        done.set()
        poller.join()
    assert resp.status_code == 503, resp.text
    assert resp.headers["retry-after"] == "7"
    error = resp.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["code"] == "upstream_unavailable"
    assert error["message"].startswith("The upstream model provider is unavailable")
    assert "sk-0000" not in error["message"]  # still redacted
    assert len(resp.content) < 4096
    assert seconds < 5.0, seconds  # was ~11 s (the fake upstream builds 3 MB each time)
    assert health and max(health) < 1.0, health  # was ~10 s; < 50 ms on a quiet machine
