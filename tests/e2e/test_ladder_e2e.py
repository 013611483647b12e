"""The verifier ladder through the real server: a ``groundproxy serve`` process with the real
int8 ONNX models — ``embedhead`` (the fast rung, every claim) and ``crossencoder`` (the strong
rung, the claims the fast one is unsure of) — a scripted upstream process, the official
``openai`` client, and the request's own context as evidence.

One two-claim answer: the fast rung is sure of the first claim (it decides it) and unsure of
the second, which the default policy's strong rung re-scores and decides (the body's
``rung`` per claim and the ``x-groundproxy-ladder`` header say so, buffered and in a
sentence stream's last event). A tenant whose ladder budget is spent before the strong rung
could run gets the fast verdict, marked ``budget`` — never silently.
"""

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

pytestmark = pytest.mark.slow

CONTEXT = (
    "The warranty of the Acme robot lasts 12 months from the date of purchase. Return "
    "shipping is free for customers in the European Union. Support is available Monday to "
    "Friday, 9am to 5pm. The robot weighs 4 kg and charges in two hours."
)
SURE = "The warranty lasts 12 months from the date of purchase."  # embedhead: margin 0.59
UNSURE = "Support can be reached on weekdays during office hours."  # embedhead: margin 0.94
ANSWER = f"{SURE} {UNSURE}"
# the fast rung alone calls UNSURE unverifiable (P(supported) 0.54 under its threshold); the
# strong rung reads "Monday to Friday, 9am to 5pm" as weekdays during office hours
TENANTS: dict[str, dict[str, Any]] = {
    "lsure": {},  # the defaults a new tenant gets: embedhead + crossencoder
    "lsent": {"stream": "sentence"},
    "lspent": {"verifier": {"ladder": {"budget_ms": 1}}},  # no claim fits in 1 ms
    "loff": {"verifier": {"ladder": {"strong": "none"}}},
}


def _key(tenant: str) -> str:
    return f"sk-{tenant}-ladder-test"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("ladder-e2e")
    up_port, port = free_port(), free_port()
    (root / "up.json").write_text(
        json.dumps({"rules": [{"match": "robot", "answer": ANSWER}]}), encoding="utf-8"
    )
    policies, data = root / "policies", root / "data"
    policies.mkdir()
    data.mkdir()
    for tenant, extra in TENANTS.items():
        spec = {
            "tenant": tenant,
            "keys": [hash_key(_key(tenant))],
            "upstream": {
                "model": "openai/gpt-4o-mini", "api_base": f"http://127.0.0.1:{up_port}/v1",
                "api_key_env": "TEST_UPSTREAM_KEY", "timeout_s": 10,
            },
            "latency_budget_ms": 20000,
            "stream": "buffer",
            **extra,
        }  # fmt: skip
        (policies / f"{tenant}.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    procs: list[subprocess.Popen[bytes]] = []
    try:
        procs.append(start_fake_upstream(up_port, root / "up.json"))
        # two ONNX verifiers load and warm up before ready: slow on a busy 2-core machine
        procs.append(start_proxy(port, policies, data, log_path=root / "proxy.log", timeout_s=600))
        yield f"http://127.0.0.1:{port}"
    finally:
        for proc in reversed(procs):
            stop_process(proc)


def _client(url: str, tenant: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key=_key(tenant), timeout=120, max_retries=0)


MESSAGES: list[Any] = [
    {"role": "system", "content": CONTEXT},
    {"role": "user", "content": "Tell me about the robot's warranty and support."},
]


def _ask(url: str, tenant: str) -> tuple[dict[str, Any], dict[str, str]]:
    raw = _client(url, tenant).chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=MESSAGES
    )
    completion = raw.parse()
    extra = completion.model_extra or {}
    return extra["groundproxy"], dict(raw.headers)


def _claims(gp: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["text"]: c for c in gp["claims"]}


def test_the_fast_rung_decides_the_sure_claim_the_strong_rung_the_unsure_one(served: str) -> None:
    gp, headers = _ask(served, "lsure")
    claims = _claims(gp)
    assert set(claims) == {SURE, UNSURE}
    assert gp["verifier"] == "embedhead"  # the fast rung names the answer's verifier, as before
    sure, unsure = claims[SURE], claims[UNSURE]
    assert (sure["rung"], sure["rung_verifier"], sure["verdict"]) == (
        "fast", "embedhead", "supported"
    )  # fmt: skip
    assert (unsure["rung"], unsure["rung_verifier"]) == ("strong", "crossencoder")
    assert unsure["verdict"] == "supported" and unsure["probs"]["supported"] > 0.5
    assert "rung_skipped" not in sure and "rung_skipped" not in unsure
    assert gp["ladder"] == {"fast": 1, "strong": 1, "judge": 0, "skipped": 0}
    assert headers["x-groundproxy-ladder"] == "fast=1; strong=1; judge=0; skipped=0"
    assert headers["x-groundproxy-claims"] == (
        "total=2; supported=2; contradicted=0; unverifiable=0"
    )  # fmt: skip
    # without the ladder the same answer's second claim is the fast rung's: unverifiable
    off, off_headers = _ask(served, "loff")
    assert _claims(off)[UNSURE]["verdict"] == "unverifiable"
    assert _claims(off)[UNSURE]["rung"] == "fast"
    assert off_headers["x-groundproxy-ladder"] == "fast=2; strong=0; judge=0; skipped=0"


def test_the_strong_rung_skipped_when_the_budget_is_spent_is_marked(served: str) -> None:
    gp, headers = _ask(served, "lspent")
    unsure = _claims(gp)[UNSURE]
    assert (unsure["rung"], unsure["rung_verifier"]) == ("fast", "embedhead")
    assert unsure["rung_skipped"] == "budget" and unsure["verdict"] == "unverifiable"
    assert gp["ladder"] == {
        "fast": 2, "strong": 0, "judge": 0, "skipped": 1, "skipped_budget": 1
    }  # fmt: skip
    assert headers["x-groundproxy-ladder"] == (
        "fast=2; strong=0; judge=0; skipped=1; skipped_budget=1"
    )  # fmt: skip


def test_a_sentence_streams_last_event_says_which_rung_decided(served: str) -> None:
    body = {"model": "gpt-4o-mini", "messages": MESSAGES, "stream": True}
    headers = {"Authorization": f"Bearer {_key('lsent')}"}
    resp = httpx.post(served + "/v1/chat/completions", json=body, headers=headers, timeout=120)
    assert resp.status_code == 200 and resp.headers["x-groundproxy-stream"] == "sentence"
    last: dict[str, Any] = {}
    for line in resp.text.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            event = json.loads(line[6:])
            last = event.get("groundproxy", last)
    rungs = {c["text"]: (c["rung"], c["rung_verifier"]) for c in last["claims"]}
    assert rungs == {SURE: ("fast", "embedhead"), UNSURE: ("strong", "crossencoder")}
    assert last["ladder"] == {"fast": 1, "strong": 1, "judge": 0, "skipped": 0}
