"""End to end: a three-step pipeline through the real `groundproxy serve` process, driven by
the official `openai` SDK; step 2 turns 40 million into 45 million, the final answer repeats
it, and the trace API names step 2 as the error stage."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
import yaml

from groundproxy.policies.keys import hash_key
from groundproxy.testing.processes import free_port, start_fake_upstream, start_proxy, stop_process
from tests.conftest import KEYS
from tests.traces_pipeline import DOCS, SCRIPT, step_messages

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def proxy_url(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Iterator[str]:
    from groundproxy.retrieval.ingest import ingest_texts

    root = tmp_path_factory.mktemp("trace-e2e")
    up_port, port = free_port(), free_port()
    script = root / "script.json"
    script.write_text(json.dumps(SCRIPT), encoding="utf-8")
    policies, data = root / "policies", root / "data"
    policies.mkdir()
    spec = {
        "tenant": "loose",
        "keys": [hash_key(KEYS["loose"])],
        "upstream": {
            "model": "openai/gpt-4o-mini",
            "api_base": f"http://127.0.0.1:{up_port}/v1",
            "api_key_env": "TEST_UPSTREAM_KEY",
            "timeout_s": 10,
        },
        "actions": {"contradicted": "flag"},  # the wrong number travels on, marked
        "traces": {"enabled": True, "retention_hours": 24, "max_nodes": 1000},
        "latency_budget_ms": 20000,
    }
    (policies / "loose.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    ingest_texts(data, "loose", DOCS, embedder)
    upstream: subprocess.Popen[bytes] = start_fake_upstream(up_port, script)
    try:
        proxy = start_proxy(port, policies, data, log_path=root / "proxy.log")
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            stop_process(proxy)
    finally:
        stop_process(upstream)
    assert (data / "loose" / "traces.sqlite").exists()
    assert KEYS["loose"] not in (root / "proxy.log").read_text(encoding="utf-8", errors="replace")


def test_three_step_pipeline_through_the_real_proxy(proxy_url: str) -> None:
    client = openai.OpenAI(
        base_url=f"{proxy_url}/v1", api_key=KEYS["loose"], max_retries=0, timeout=60
    )
    trace = {"x-groundproxy-trace-id": "e2e-pipeline"}

    def run(n: int, parents: list[str], inputs: list[str] | None = None) -> tuple[str, str]:
        headers = dict(trace)
        if parents:
            headers["x-groundproxy-parent-ids"] = ",".join(parents)
        raw = client.chat.completions.with_raw_response.create(
            model="gpt-4o-mini",
            messages=step_messages(n, inputs),  # type: ignore[arg-type]
            extra_headers=headers,
        )
        return raw.headers["x-groundproxy-step-id"], raw.parse().choices[0].message.content or ""

    s1, out1 = run(1, [])
    s2, out2 = run(2, [])
    assert "45 million" in out2
    s3, final = run(3, [s1, s2], [out1, out2])
    assert "45 million" in final
    resp = httpx.get(
        f"{proxy_url}/v1/groundproxy/traces/e2e-pipeline",
        headers={"authorization": f"Bearer {KEYS['loose']}"},
        timeout=60,
    )
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert [n["step_id"] for n in body["nodes"]] == [s1, s2, s3]
    assert body["nodes"][2]["parents"] == [s1, s2]
    errors = {u["error_step"] for u in body["unsupported"] if "45 million" in u["claim"]}
    assert errors == {s2}, body["unsupported"]
