"""End to end: the real `groundproxy serve` process and a fake upstream process, driven by
the official `openai` SDK exactly as a client application would use it."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from groundproxy.testing.processes import free_port, start_proxy, stop_process
from tests.conftest import KEYS
from tests.faults.helpers import upstream_stats

pytestmark = pytest.mark.slow
AUDIT_DIR = Path(__file__).resolve().parent / "audit_connect"

CONTRACT_HEADERS = (
    "x-groundproxy-trust",
    "x-groundproxy-action",
    "x-groundproxy-claims",
    "x-groundproxy-citations",
    "x-groundproxy-policy",
    "x-groundproxy-latency-ms",
    "x-groundproxy-step-id",
    "x-request-id",
)


@pytest.fixture(scope="module")
def base_url(
    policies_dir: Path,
    data_dir: Path,
    upstream_port: int,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[str]:
    port = free_port()
    logs = tmp_path_factory.mktemp("proxy-log")
    log, connects = logs / "proxy.log", logs / "connects.log"
    # the audit hook first, then whatever path already finds groundproxy (a worktree's)
    path = os.pathsep.join(p for p in (str(AUDIT_DIR), os.environ.get("PYTHONPATH")) if p)
    env = {"PYTHONPATH": path, "GP_CONNECT_LOG": str(connects)}
    proc: subprocess.Popen[bytes] = start_proxy(port, policies_dir, data_dir, env=env, log_path=log)
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        stop_process(proc)
    # The proxy opens no outbound connection except to the configured upstream.
    destinations = set(connects.read_text(encoding="utf-8").splitlines())
    assert destinations, "the audit hook recorded nothing: the upstream was never called?"
    assert destinations == {f"('127.0.0.1', {upstream_port})"}, destinations
    text = log.read_text(encoding="utf-8", errors="replace")
    assert KEYS["acme"] not in text, "an API key reached the logs"
    assert "24 months" not in text, "an answer body reached the logs"


def client(base_url: str, tenant: str = "acme") -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url, api_key=KEYS[tenant], max_retries=0, timeout=60)


def test_sdk_non_stream_contract(base_url: str) -> None:
    raw = client(base_url).chat.completions.with_raw_response.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "How long is the warranty?"}],
        extra_headers={"x-request-id": "req-e2e-1"},
    )
    for h in CONTRACT_HEADERS:
        assert h in raw.headers, h
    assert raw.headers["x-request-id"] == "req-e2e-1"
    assert raw.headers["x-groundproxy-step-id"].startswith("st_")
    completion = raw.parse()
    assert completion.model == "gpt-4o-mini"
    gp = (completion.model_extra or {})["groundproxy"]
    verdicts = {c["text"]: c["verdict"] for c in gp["claims"]}
    wrong = next(t for t in verdicts if "24 months" in t)
    assert verdicts[wrong] == "contradicted"
    right = next(t for t in verdicts if "6 months" in t)
    assert verdicts[right] == "supported"
    right_claim = next(c for c in gp["claims"] if c["text"] == right)
    assert right_claim["citations"][0]["doc"] == "handbook.md"
    content = completion.choices[0].message.content or ""
    assert "12 months" in content
    assert float(raw.headers["x-groundproxy-trust"]) == pytest.approx(gp["trust"], abs=0.01)
    claims_header = raw.headers["x-groundproxy-claims"]
    assert claims_header.startswith(f"total={len(gp['claims'])};")


def test_sdk_stream_carries_groundproxy_last(base_url: str) -> None:
    with client(base_url).chat.completions.with_streaming_response.create(
        model="gpt-4o-mini",
        stream=True,
        messages=[{"role": "user", "content": "How long is the warranty?"}],
    ) as response:
        assert response.headers["x-groundproxy-action"] == "rewrite"
        chunks = list(response.parse())
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert "12 months" in text and "24 months" not in text
    extras = [c.model_extra or {} for c in chunks]
    assert "groundproxy" in extras[-1]
    assert all("groundproxy" not in e for e in extras[:-1])
    assert extras[-1]["groundproxy"]["claims"][0]["verdict"] == "contradicted"


def test_sdk_errors_are_openai_errors(base_url: str) -> None:
    bad = openai.OpenAI(base_url=base_url, api_key="sk-wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]
        )
    with pytest.raises(openai.NotFoundError):
        client(base_url, "strict").chat.completions.create(
            model="nope", messages=[{"role": "user", "content": "hi"}]
        )
    with pytest.raises(openai.InternalServerError) as exc:
        client(base_url).chat.completions.create(
            model="fail-500", messages=[{"role": "user", "content": "hi"}]
        )
    assert exc.value.status_code == 502
    assert "upstream exploded" in str(exc.value)


def test_sdk_stream_sentence_mode_warranty(base_url: str) -> None:
    """Issue 3's done-when, streaming sentence by sentence: contradicted, corrected to
    12 months and cited, through the real proxy process and the openai SDK."""
    with client(base_url, "sentence").chat.completions.with_streaming_response.create(
        model="gpt-4o-mini",
        stream=True,
        messages=[{"role": "user", "content": "How long is the warranty?"}],
    ) as response:
        assert response.headers["x-groundproxy-step-id"].startswith("st_")
        assert response.headers["x-groundproxy-policy"].startswith("sentence@")
        chunks = list(response.parse())
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert "12 months" in text and "24 months" not in text
    assert "Sources:" in text and "handbook.md" in text
    assert sum(1 for c in chunks if c.choices and c.choices[0].delta.content) >= 2
    gp = (chunks[-1].model_extra or {})["groundproxy"]
    assert all("groundproxy" not in (c.model_extra or {}) for c in chunks[:-1])
    wrong = next(c for c in gp["claims"] if "24 months" in c["text"])
    assert wrong["verdict"] == "contradicted" and wrong["action"] == "corrected"
    assert "12 months" in wrong["correction"]
    assert wrong["citations"][0]["doc"] == "handbook.md"
    assert gp["action"] == "rewrite"


@pytest.mark.parametrize(
    ("model", "error"),
    [("fail-404", openai.NotFoundError), ("fail-401", openai.AuthenticationError)],
)
def test_an_upstream_4xx_raises_its_own_class_and_is_not_retried(
    base_url: str, upstream_port: int, model: str, error: type[openai.APIStatusError]
) -> None:
    """A wrong model name (404) or upstream key (401) reaches the SDK as that error: before,
    a 502 the SDK raised as InternalServerError after retrying it twice (issue 31, item 6)."""
    sdk = openai.OpenAI(base_url=base_url, api_key=KEYS["acme"], timeout=60)  # 2 retries
    before = upstream_stats(upstream_port)["started"]
    with pytest.raises(error) as info:
        sdk.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}])
    assert upstream_stats(upstream_port)["started"] == before + 1  # asked once, no retry
    assert "sk-proj-AbCdEfGh" not in str(info.value)  # the quoted upstream key: redacted
