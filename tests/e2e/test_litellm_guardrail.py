"""The LiteLLM guardrail through a REAL LiteLLM proxy process (litellm[proxy]==1.108.7 in its
own venv, `make litellm-venv`), a real `groundproxy serve` process and a fake upstream, driven
by the official `openai` SDK: the wrong number is corrected and cited through LiteLLM."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
import yaml
from openai.types.chat import ChatCompletionMessageParam

from groundproxy.policies.keys import hash_key
from groundproxy.testing.processes import (
    REPO_ROOT,
    free_port,
    start_fake_upstream,
    start_proxy,
    stop_process,
    wait_http,
)

pytestmark = pytest.mark.slow

LITELLM_BIN = Path(
    os.environ.get("LITELLM_BIN", str(REPO_ROOT / ".venv-litellm" / "bin" / "litellm"))
)
MASTER_KEY = "sk-litellm-master"
TENANT_KEY = "sk-anvil-test-key"
DOC = (
    "The Acme Anvil weighs 3.4 kg and is made of forged steel. "
    "It ships in a wooden crate within 5 days."
)
SCRIPT = {
    "default": "I do not know.",
    "rules": [{"match": "weigh", "answer": "The Acme Anvil weighs 5.2 kg."}],
}


def litellm_config(upstream_port: int, gp_port: int) -> dict[str, Any]:
    """README's config.yaml, pointed at the test's processes."""
    return {
        "model_list": [
            {
                "model_name": "gpt-4o-mini",
                "litellm_params": {
                    "model": "openai/gpt-4o-mini",
                    "api_base": f"http://127.0.0.1:{upstream_port}/v1",
                    "api_key": "sk-fake",
                },
            }
        ],
        "guardrails": [
            {
                "guardrail_name": "groundproxy",
                "litellm_params": {
                    "guardrail": "groundproxy.integrations.litellm.GroundproxyGuardrail",
                    "mode": "post_call",
                    "default_on": True,
                    "api_base": f"http://127.0.0.1:{gp_port}",
                    "api_key": "os.environ/GROUNDPROXY_API_KEY",
                },
            }
        ],
        "general_settings": {"master_key": MASTER_KEY},
        "litellm_settings": {"telemetry": False},
    }


def start_litellm(work: Path, config: dict[str, Any]) -> tuple[int, subprocess.Popen[bytes]]:
    # The litellm venv imports groundproxy.integrations from this tree: a `groundproxy` link to
    # the repository root is all its path needs (the integration needs only httpx + litellm).
    root = work / "gp-path"
    root.mkdir()
    (root / "groundproxy").symlink_to(REPO_ROOT, target_is_directory=True)
    cfg = work / "config.yaml"
    cfg.write_text(yaml.safe_dump(config), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "PYTHONPATH")}
    env.update(
        PYTHONPATH=str(root),
        GROUNDPROXY_API_KEY=TENANT_KEY,
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        PYTHONUNBUFFERED="1",
    )
    port = free_port()
    log = open(work / "litellm.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        [str(LITELLM_BIN), "--config", str(cfg), "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=work,
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/health/liveliness", proc, timeout_s=240)
    except BaseException:
        stop_process(proc)
        print((work / "litellm.log").read_text(errors="replace")[-4000:])
        raise
    return port, proc


@pytest.fixture(scope="module")
def litellm_url(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Iterator[str]:
    if not LITELLM_BIN.is_file():
        pytest.fail(
            f"LiteLLM proxy not found at {LITELLM_BIN}: run `make litellm-venv` "
            "(litellm[proxy]==1.108.7 in .venv-litellm) or set LITELLM_BIN"
        )
    from groundproxy.retrieval.ingest import ingest_texts

    work = tmp_path_factory.mktemp("litellm")
    ingest_texts(work / "data", "anvil", [("anvil.md", DOC)], embedder)
    (work / "policies").mkdir()
    (work / "script.json").write_text(json.dumps(SCRIPT), encoding="utf-8")
    procs: list[subprocess.Popen[bytes]] = []
    try:
        up_port = free_port()
        procs.append(start_fake_upstream(up_port, work / "script.json"))
        policy = {
            "tenant": "anvil",
            "keys": [hash_key(TENANT_KEY)],
            "stream": "buffer",
            "latency_budget_ms": 20000,
            "upstream": {
                "model": "openai/gpt-4o-mini",
                "api_base": f"http://127.0.0.1:{up_port}/v1",
            },
        }
        (work / "policies" / "anvil.yaml").write_text(yaml.safe_dump(policy), encoding="utf-8")
        gp_port = free_port()
        procs.append(
            start_proxy(
                gp_port, work / "policies", work / "data", log_path=work / "groundproxy.log"
            )
        )
        ll_port, ll = start_litellm(work, litellm_config(up_port, gp_port))
        procs.append(ll)
        yield f"http://127.0.0.1:{ll_port}/v1"
    finally:
        for proc in reversed(procs):
            stop_process(proc)


def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url, api_key=MASTER_KEY, max_retries=0, timeout=120)


QUESTION: list[ChatCompletionMessageParam] = [
    {"role": "user", "content": "How much does the Acme Anvil weigh?"}
]


def test_wrong_number_corrected_and_cited_through_litellm(litellm_url: str) -> None:
    raw = client(litellm_url).chat.completions.with_raw_response.create(
        model="gpt-4o-mini",
        messages=QUESTION,
    )
    assert raw.headers["x-groundproxy-action"] == "rewrite"
    assert "contradicted=1" in raw.headers["x-groundproxy-claims"]
    assert raw.headers["x-groundproxy-citations"].startswith("doc:anvil.md#")
    assert raw.headers["x-groundproxy-policy"].startswith("anvil@")
    completion = raw.parse()
    content = completion.choices[0].message.content or ""
    assert "3.4 kg" in content and "5.2 kg" not in content
    assert "[1]" in content and "anvil.md" in content  # cited, with the source named
    gp = (completion.model_extra or {})["groundproxy"]
    claim = gp["claims"][0]
    assert claim["verdict"] == "contradicted" and "3.4 kg" in claim["correction"]
    assert claim["citations"][0]["doc"] == "anvil.md"
    assert "3.4 kg" in claim["citations"][0]["quote"]


def test_stream_is_corrected_through_litellm(litellm_url: str) -> None:
    stream = client(litellm_url).chat.completions.create(
        model="gpt-4o-mini",
        messages=QUESTION,
        stream=True,
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert "3.4 kg" in text and "5.2 kg" not in text
    assert "[1]" in text
    assert chunks[-1].choices[0].finish_reason == "stop" if chunks[-1].choices else True
    # the verdict rides on the stream's last chunk, as on groundproxy's own streams
    carrying = [c for c in chunks if "groundproxy" in (c.model_extra or {})]
    assert carrying == [chunks[-1]], [sorted(c.model_extra or {}) for c in chunks]
    gp = (chunks[-1].model_extra or {})["groundproxy"]
    assert gp["action"] == "rewrite" and gp["claims"][0]["verdict"] == "contradicted"
    assert "3.4 kg" in gp["claims"][0]["correction"]
