"""``groundproxy demo --upstream-only``: the demo's scripted upstream on its own (issue 41: the
Getting started steps pointed a ``serve`` of the reader's own at ``policies/demo.yaml``, whose
upstream ran only inside ``groundproxy demo`` — every answer a 502 upstream_unreachable)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from groundproxy.testing.demo import demo_upstream_port
from groundproxy.testing.processes import free_port, stop_process, wait_http


@pytest.mark.slow
def test_the_command_serves_the_demo_script_and_stops_with_its_process(tmp_path: Path) -> None:
    port, log = free_port(), tmp_path / "upstream.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "groundproxy.proxy", "demo", "--upstream-only",
             "--port", str(port)], stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}/v1"
    try:
        wait_http(f"{url}/models", proc, timeout_s=60)
        reply = httpx.post(
            f"{url}/chat/completions",
            json={"model": "demo-model", "messages": [{"role": "user", "content": "warranty?"}]},
            timeout=30,
        )
        assert reply.status_code == 200
        answer = reply.json()["choices"][0]["message"]["content"]
        assert "limited warranty of 24 months" in answer  # testing/samples/demo_script.json
    finally:
        stop_process(proc)
    # the process started is the server: stopping it stops the server (no orphan on the port)
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/models", timeout=5)
    assert f"demo upstream on {url}" in log.read_text(encoding="utf-8")


def test_its_default_port_is_the_one_the_demo_policy_names() -> None:
    assert demo_upstream_port() == 8099
