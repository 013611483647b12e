"""``groundproxy serve --workers 2`` as a real process (uvicorn's supervisor, two workers
sharing the listening socket, each with its own ONNX models and read-only index snapshots):

- guarded requests succeed and are answered by two distinct worker processes
  (``x-groundproxy-worker``), each reporting its memory in ``/metrics``;
- a document ingested through one worker becomes visible to both (each follows CURRENT
  on disk).
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from groundproxy.testing.processes import free_port, start_process, stop_process, wait_http
from tests.conftest import ADMIN_KEYS, KEYS, _policy

pytestmark = pytest.mark.slow

USER = {"authorization": f"Bearer {KEYS['acme']}"}
ADMIN = {"authorization": f"Bearer {ADMIN_KEYS['acme']}"}


@pytest.fixture(scope="module")
def proxy_port(
    tmp_path_factory: pytest.TempPathFactory, data_dir: Path, upstream_port: int
) -> Iterator[int]:
    tmp = tmp_path_factory.mktemp("workers")
    data = tmp / "data"
    shutil.copytree(data_dir, data)  # this test ingests: never into the shared index
    policies = tmp / "policies"
    policies.mkdir()
    spec = _policy("acme", upstream_port)
    (policies / "acme.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    port = free_port()
    args = ["-m", "groundproxy.proxy", "serve", "--workers", "2", "--port", str(port),
            "--policies", str(policies), "--data", str(data)]  # fmt: skip
    proc: subprocess.Popen[bytes] = start_process(args, log_path=tmp / "proxy.log")
    try:
        wait_http(f"http://127.0.0.1:{port}/readyz", proc, timeout_s=300)
        yield port
    finally:
        stop_process(proc, timeout_s=30)
    assert proc.returncode is not None


def _by_worker(
    port: int, method: str, path: str, want: int = 2, **kw: object
) -> dict[str, httpx.Response]:
    """One response per worker pid: fresh connections until ``want`` pids answered (and
    both are ready: a worker still loading answers 503)."""
    seen: dict[str, httpx.Response] = {}
    deadline = time.monotonic() + 240
    while len(seen) < want and time.monotonic() < deadline:
        resp = httpx.request(method, f"http://127.0.0.1:{port}{path}", timeout=60, **kw)  # type: ignore[arg-type]
        if resp.status_code == 503:
            time.sleep(0.5)
            continue
        seen[resp.headers["x-groundproxy-worker"]] = resp
    return seen


def test_two_workers_answer_guarded_requests(proxy_port: int) -> None:
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "warranty?"}]}
    answers = _by_worker(proxy_port, "POST", "/v1/chat/completions", json=body, headers=USER)
    assert len(answers) == 2, answers
    for pid, resp in answers.items():
        assert resp.status_code == 200, resp.text
        verdict = resp.json()["groundproxy"]
        assert verdict["claims"] and not verdict["unverified"], (pid, verdict)
        assert "12 months" in resp.json()["choices"][0]["message"]["content"]  # corrected
    metrics = _by_worker(proxy_port, "GET", "/metrics")
    for pid, resp in metrics.items():
        rows = resp.text.splitlines()
        line = next(row for row in rows if row.startswith("groundproxy_worker_rss"))
        assert f'pid="{pid}"' in line and float(line.split()[-1]) > 50 * 2**20, line


def test_ingest_through_one_worker_is_seen_by_both(proxy_port: int) -> None:
    before = _by_worker(proxy_port, "GET", "/v1/groundproxy/documents", headers=ADMIN)
    versions = {pid: r.json()["version"] for pid, r in before.items()}
    assert len(set(versions.values())) == 1, versions
    doc = {"id": "dock.md", "text": "The Acme charging dock draws 14 watts when idle."}
    added = httpx.post(
        f"http://127.0.0.1:{proxy_port}/v1/groundproxy/documents",
        json={"documents": [doc]}, headers=ADMIN, timeout=120,
    )  # fmt: skip
    assert added.status_code == 200, added.text
    version = added.json()["version"]
    assert version > next(iter(versions.values()))
    time.sleep(1.0)  # each worker reads CURRENT at most every 0.5 s
    after = _by_worker(proxy_port, "GET", "/v1/groundproxy/documents", headers=ADMIN)
    assert len(after) == 2
    for pid, resp in after.items():
        assert resp.json()["version"] == version, (pid, resp.json()["version"])
        assert "dock.md" in {d["doc_id"] for d in resp.json()["data"]}, pid
