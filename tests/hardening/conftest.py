"""One real ``groundproxy serve`` process per test module (issue 14's hardening tests).

Tenants ``ta`` (buffered), ``tb`` and ``ts`` (sentence-mode streams), each with its own key and
admin key and its own index; the fast ``hashing`` embedder and ``lexical`` verifier keep the
start-up short. The proxy knows an upstream key (``UPSTREAM_SECRET``) that must never reach a
client or the log; its log is kept for the tests to read.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from groundproxy.policies.keys import hash_key
from groundproxy.testing.embedders import HASHING
from groundproxy.testing.processes import (
    free_port,
    start_fake_upstream,
    start_proxy,
    stop_process,
)

UPSTREAM_SECRET = "sk-upstream-SECRET-4f9a8b7c6d5e4f3a2b1c"
TENANTS = ("ta", "tb", "ts")
FAST_ENV = {"GROUNDPROXY_EMBEDDER": HASHING, "TEST_UPSTREAM_KEY": UPSTREAM_SECRET}
UPSTREAM_MODELS = ("gpt-4o-mini", "echo-key", "bad-json", "fail-500")
KETTLE = "The Zephyr kettle boils water in 45 seconds."
N_GADGETS = 40


def gadget(i: int) -> str:
    return f"Gadget model G{i:03d} weighs {100 + i} grams."


def key(tenant: str) -> str:
    return f"sk-{tenant}-client-key"


def admin_key(tenant: str) -> str:
    return f"sk-{tenant}-admin-key"


def auth(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def policy(tenant: str, upstream_port: int, **overrides: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "tenant": tenant,
        "keys": [hash_key(key(tenant))],
        "admin_keys": [hash_key(admin_key(tenant))],
        "upstream": {
            "model": "openai/gpt-4o-mini",
            "models": {m: f"openai/{m}" for m in UPSTREAM_MODELS},
            "api_base": f"http://127.0.0.1:{upstream_port}/v1",
            "api_key_env": "TEST_UPSTREAM_KEY",
            "timeout_s": 10,
        },
        "verifier": {"model": "lexical"},
        "latency_budget_ms": 20000,
        "stream": "sentence" if tenant == "ts" else "buffer",
    }
    spec.update(overrides)
    return spec


def write_policy(
    directory: Path, tenant: str, upstream_port: int, name: str | None = None, **overrides: Any
) -> Path:
    path = directory / f"{name or tenant}.yaml"
    path.write_text(yaml.safe_dump(policy(tenant, upstream_port, **overrides)), encoding="utf-8")
    return path


def run_cli(*args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """``python -m groundproxy.proxy ARGS`` (the real CLI) with the fast embedder."""
    import os
    import sys

    return subprocess.run(
        [sys.executable, "-m", "groundproxy.proxy", *args],
        env={**os.environ, **FAST_ENV},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@dataclass
class Server:
    url: str
    port: int
    policies: Path
    data: Path
    log: Path
    upstream_port: int
    proc: subprocess.Popen[bytes]

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=30)

    def log_text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def restart(self) -> None:
        stop_process(self.proc)
        self.proc = start_proxy(
            self.port, self.policies, self.data, env=FAST_ENV, log_path=self.log
        )


@pytest.fixture(scope="session")
def hardening_upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    port = free_port()
    script = tmp_path_factory.mktemp("hard-upstream") / "script.json"
    rules = [
        {"match": "kettle", "answer": KETTLE},
        {"match": "catalog", "answer": " ".join(gadget(i) for i in range(N_GADGETS))},
    ]
    script.write_text(
        json.dumps({"default": "The warranty is 12 months.", "rules": rules}), encoding="utf-8"
    )
    proc = start_fake_upstream(port, script)
    try:
        yield port
    finally:
        stop_process(proc)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, hardening_upstream: int) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("hard")
    policies, data = root / "policies", root / "data"
    policies.mkdir()
    data.mkdir()
    docs = root / "docs"
    docs.mkdir()
    (docs / "handbook.md").write_text(
        "The Acme robot has a warranty of 12 months from the date of purchase.\n", encoding="utf-8"
    )
    for tenant in TENANTS:
        write_policy(policies, tenant, hardening_upstream)
        done = run_cli(
            "ingest", "--data", str(data), "--tenant", tenant, str(docs), "--no-progress"
        )
        assert done.returncode == 0, done.stderr
    port = free_port()
    log = root / "proxy.log"
    proc = start_proxy(port, policies, data, env=FAST_ENV, log_path=log)
    srv = Server(f"http://127.0.0.1:{port}", port, policies, data, log, hardening_upstream, proc)
    try:
        yield srv
    finally:
        stop_process(srv.proc)
