"""The judge's limits through the real ``groundproxy serve`` process (real embedder, verifier
and index), a scripted upstream process and a scripted judge — a real HTTP process
(``groundproxy.testing.fake_upstream`` answering the judge's JSON): issue 40 items 5-11 and
a seeded fuzz of the judge's replies.

- a hung judge in a sentence stream is waited for once per answer, not once per sentence;
- one request makes at most ``judge.max_calls_per_request`` judge calls (a multi-prompt
  completion, a sentence stream), the rest skipped ``budget``, visibly;
- a judge body over the cap is never parsed (skipped ``error``);
- the judge's ``reason`` reaches the body and the inspector scrubbed and cut;
- a policy whose judge is on another host with no key of its own is refused at load (the
  upstream key never leaves for it); a judge with its own key variable gets that key;
- judge labels carry the cited evidence, not the whole context, and stop at
  ``judge.max_label_store_bytes`` (``/metrics`` says so);
- fuzzed judge replies (shapes, sizes, ids, quotes, types, non-JSON, huge): never a 5xx, and
  every escalated claim ends judged or visibly skipped.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import yaml

from groundproxy.guards.judge.opinion import SKIP_REASONS
from groundproxy.policies.keys import hash_key
from groundproxy.proxy.serving.judge_limits import MAX_STORED_REASON
from groundproxy.proxy.storage.judge_labels import MAX_LABEL_CONTEXT_CHARS
from groundproxy.testing.fake_judge import verdicts
from groundproxy.testing.processes import free_port, start_fake_upstream, start_proxy, stop_process
from tests.conftest import SAMPLES, share_index
from tests.e2e.judge_replies import fuzz_rules

pytestmark = pytest.mark.slow

HANDBOOK = (SAMPLES / "handbook.md").read_text(encoding="utf-8")
UPSTREAM_KEY = "gpkey.Zq9LimitsTenantSecret42"  # not key-shaped: only its value gives it away
JUDGE_KEY = "gpkey.Judge0wnKeyValue77"
FILLER = " ".join(f"Filler note {n} says nothing about robots at all." for n in range(800))
EIGHT = (
    "The warranty lasts 12 months. Batteries are covered for 6 months. The warranty covers "
    "defects in materials and workmanship. The warranty does not cover damage caused by water. "
    "You can return an unused robot within 30 days of delivery. Return shipping is free for "
    "customers in the European Union. Refunds are issued within 10 business days. Support is "
    "available Monday to Friday."
)
FUZZ = fuzz_rules(40, seed=4040)
ANSWERS = {
    "eight": EIGHT,
    "huge": "Refunds arrive within 10 business days.",
    "secret": "Battery cover lasts 6 months.",
    "label1": "The warranty runs for 12 months.",
    "label2": "Return shipping is free for all customers worldwide.",
    **{f"fuzz-{n:03d}": f"In {tag} the warranty lasts 12 months."
       for n, (tag, _) in enumerate(FUZZ)},
}  # fmt: skip
LEAKED = f"Authorization: Bearer {UPSTREAM_KEY}; also sk-proj-Abc0123456789defGHIjkl. " + "y" * 900
JUDGE_RULES: list[dict[str, Any]] = [
    {"match": "Refunds arrive within 10", "body": {
        "id": "x", "object": "chat.completion", "created": 0, "model": "judge",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {
            "role": "assistant", "content": verdicts(("c1", "supported", "Refunds are issued to "
                                                      "the original payment method within 10 "
                                                      "business days"))}}],
        "padding": "p" * 3_000_000}},  # a valid verdict inside a 3 MB body
    {"match": "Battery cover lasts", "answer": json.dumps({"claims": [{
        "id": "c1", "verdict": "supported", "quote": "Batteries are covered for 6 months.",
        "reason": LEAKED}]})},
    {"match": "warranty runs for", "answer": verdicts(
        ("c1", "supported", "limited warranty of 12 months from the date of purchase"))},
    {"match": "free for all customers", "answer": verdicts(
        ("c1", "contradicted", "Return shipping is free for customers in the European Union."))},
    *({"match": tag, **reply} for tag, reply in FUZZ),
]  # fmt: skip
TENANTS: dict[str, dict[str, Any]] = {
    # item 5: a hung judge; 8 sentences; budget 5 s
    "lhung": {"judge": {"model": "openai/slow-30", "timeout_ms": 3000},
              "stream": "sentence", "max_hold_ms": 3000, "latency_budget_ms": 5000},
    # item 9
    "lfan": {"judge": {"max_calls_per_request": 3}},
    "lfansent": {"judge": {"max_calls_per_request": 3}, "stream": "sentence"},
    "lbig": {},  # items 10, 11
    "lkeyleak": {"judge": {"api_base": "LOCALHOST"}},  # item 7: refused at load
    "lkeyown": {"judge": {"api_base": "LOCALHOST", "api_key_env": "LIMITS_JUDGE_KEY"}},
    "llabels": {"judge": {"labels": True, "max_label_store_bytes": 1}},  # item 6
    "lfuzz": {},
    "lfuzzs": {"stream": "sentence"},
}  # fmt: skip


def _key(tenant: str) -> str:
    return f"sk-{tenant}-limits-test"


def _spec(tenant: str, up_port: int, judge_port: int) -> dict[str, Any]:
    extra = json.loads(json.dumps(TENANTS[tenant]))
    judge = {"model": "openai/judge", "api_base": f"http://127.0.0.1:{judge_port}/v1",
             "escalate": "all", **extra.pop("judge", {})}  # fmt: skip
    if judge["api_base"] == "LOCALHOST":  # the same machine under another host name
        judge["api_base"] = f"http://localhost:{judge_port}/v1"
    return {
        "tenant": tenant, "keys": [hash_key(_key(tenant))],
        "admin_keys": [hash_key(_key(tenant) + "-admin")],
        "upstream": {"model": "openai/gpt-4o-mini", "api_base": f"http://127.0.0.1:{up_port}/v1",
                     "api_key_env": "LIMITS_UPSTREAM_KEY", "timeout_s": 20},
        "retrieval": {"index": "ldocs"}, "latency_budget_ms": 20000, "stream": "buffer",
        "judge": judge, **extra,
    }  # fmt: skip


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Iterator[dict[str, Any]]:
    from groundproxy.retrieval.ingest import ingest_texts

    root = tmp_path_factory.mktemp("judge-limits")
    up_port, judge_port, port = free_port(), free_port(), free_port()
    up_script = {"rules": [{"match": k, "answer": v} for k, v in ANSWERS.items()]}
    (root / "up.json").write_text(json.dumps(up_script), encoding="utf-8")
    (root / "judge.json").write_text(json.dumps({"rules": JUDGE_RULES}), encoding="utf-8")
    policies, data = root / "policies", root / "data"
    policies.mkdir()
    specs = {t: _spec(t, up_port, judge_port) for t in TENANTS}
    share_index(specs)
    for tenant, spec in specs.items():
        (policies / f"{tenant}.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    ingest_texts(data, "ldocs", [("note.md", "Zephyr blenders are made in Portugal.")], embedder)
    env = {"LIMITS_UPSTREAM_KEY": UPSTREAM_KEY, "LIMITS_JUDGE_KEY": JUDGE_KEY}
    procs: list[subprocess.Popen[bytes]] = []
    try:
        procs.append(start_fake_upstream(up_port, root / "up.json"))
        procs.append(start_fake_upstream(judge_port, root / "judge.json"))
        procs.append(
            start_proxy(port, policies, data, env=env, log_path=root / "proxy.log", timeout_s=600)
        )  # a busy machine loads models slowly
        yield {"url": f"http://127.0.0.1:{port}", "judge": f"http://127.0.0.1:{judge_port}",
               "data": data, "log": root / "proxy.log"}  # fmt: skip
    finally:
        for proc in reversed(procs):
            stop_process(proc)


def _chat(s: dict[str, Any], tenant: str, keyword: str, **kw: Any) -> httpx.Response:
    system = kw.pop("system", HANDBOOK)
    body = {
        "model": "gpt-4o-mini", "stream": kw.pop("stream", False),
        "messages": [{"role": "system", "content": system},
                     {"role": "user", "content": f"Question ({keyword}): tell me about it."}],
    }  # fmt: skip
    headers = {"Authorization": f"Bearer {_key(tenant)}"}
    return httpx.post(s["url"] + "/v1/chat/completions", json=body, headers=headers, timeout=120)


def _calls(s: dict[str, Any]) -> int:
    return int(httpx.get(s["judge"] + "/_stats", timeout=5).json()["started"])


def _header(resp: httpx.Response) -> dict[str, int]:
    raw = resp.headers["x-groundproxy-judge"]
    return {k.strip(): int(v) for k, v in (part.split("=") for part in raw.split(";"))}


def _last_event(resp: httpx.Response) -> dict[str, Any]:
    last: dict[str, Any] = {}
    for line in resp.text.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            event = json.loads(line[6:])
            last = event.get("groundproxy", last)
    return last


def test_a_hung_judge_is_waited_for_once_per_streamed_answer(served: dict[str, Any]) -> None:
    before = _calls(served)
    started = time.monotonic()
    resp = _chat(served, "lhung", "eight", stream=True)
    seconds = time.monotonic() - started
    assert resp.status_code == 200, resp.text
    verdict = _last_event(resp)
    judged = [c["judge"] for c in verdict["claims"] if c.get("judge")]
    assert len(judged) >= 8 and all(j.get("skipped") in ("timeout", "budget") for j in judged)
    assert verdict["judge"]["skipped"] == len(judged)
    assert _calls(served) == before + 1  # one wait; the later sentences went out at once
    assert seconds < 15.0, seconds  # before: one 3 s wait per sentence (8 × 3 s)


def test_one_request_makes_at_most_max_calls_per_request(served: dict[str, Any]) -> None:
    before = _calls(served)
    body = {
        "model": "gpt-4o-mini",
        "prompt": [
            f"Question ({k}): tell me" for k in ("huge", "secret", "label1", "label2", "eight")
        ],
    }
    headers = {"Authorization": f"Bearer {_key('lfan')}"}
    resp = httpx.post(served["url"] + "/v1/completions", json=body, headers=headers, timeout=120)
    assert resp.status_code == 200, resp.text
    assert _calls(served) == before + 3  # not 5
    reasons = [c["groundproxy"]["judge"]["skipped_reasons"] for c in resp.json()["choices"]]
    assert sum(r.get("budget", 0) for r in reasons) >= 2  # the choices past the budget: visible

    before = _calls(served)
    resp = _chat(served, "lfansent", "eight", stream=True)
    verdict = _last_event(resp)
    assert _calls(served) == before + 3  # not one per sentence
    assert verdict["judge"]["skipped_reasons"].get("budget", 0) >= 5


def test_a_judge_body_over_the_cap_is_not_parsed(served: dict[str, Any]) -> None:
    resp = _chat(served, "lbig", "huge")
    assert resp.status_code == 200, resp.text
    claim = resp.json()["groundproxy"]["claims"][0]
    assert claim["judge"]["skipped"] == "error" and _header(resp)["skipped"] == 1


def test_the_judges_reason_is_scrubbed_and_cut(served: dict[str, Any]) -> None:
    resp = _chat(served, "lbig", "secret")
    assert resp.status_code == 200, resp.text
    judge = resp.json()["groundproxy"]["claims"][0]["judge"]
    assert judge["verdict"] == "supported" and len(judge["reason"]) <= MAX_STORED_REASON
    assert UPSTREAM_KEY not in resp.text and "sk-proj-Abc0123456789defGHIjkl" not in resp.text
    step = resp.headers["x-groundproxy-step-id"]
    admin = {"Authorization": f"Bearer {_key('lbig')}-admin"}
    ui = httpx.get(served["url"] + f"/v1/groundproxy/ui/answers/{step}", headers=admin, timeout=10)
    assert ui.status_code == 200 and "Authorization: Bearer [redacted]" in ui.text
    assert UPSTREAM_KEY not in ui.text and "sk-proj-Abc0123456789defGHIjkl" not in ui.text


def test_the_upstream_key_never_goes_to_a_judge_on_another_host(served: dict[str, Any]) -> None:
    refused = _chat(served, "lkeyleak", "label1")
    assert refused.status_code == 401  # its policy was refused at load
    log = served["log"].read_text(encoding="utf-8", errors="replace")
    assert "judge.api_base (localhost) is not the upstream's host (127.0.0.1)" in log
    own = _chat(served, "lkeyown", "label1")
    assert own.status_code == 200 and "verdict" in own.json()["groundproxy"]["claims"][0]["judge"]
    seen = httpx.get(served["judge"] + "/_last_headers", timeout=5).json()
    assert seen["authorization"] == f"Bearer {JUDGE_KEY}"


def test_judge_labels_are_small_and_bounded(served: dict[str, Any]) -> None:
    big = HANDBOOK + "\n\n" + FILLER  # a large request context (~40 KB)
    for keyword in ("label1", "label2"):
        resp = _chat(served, "llabels", keyword, system=big)
        assert resp.status_code == 200 and _header(resp)["escalated"] == 1, resp.text
    rows = (served["data"] / "llabels" / "feedback.jsonl").read_text(encoding="utf-8")
    labels = [json.loads(r) for r in rows.splitlines()]
    assert len(labels) == 1  # the second found the store at judge.max_label_store_bytes
    context = labels[0]["context"]
    assert context and sum(map(len, context)) <= MAX_LABEL_CONTEXT_CHARS
    assert not any("Filler note" in text for text in context)  # the cited evidence only
    metrics = httpx.get(served["url"] + "/metrics", timeout=10).text
    assert 'groundproxy_judge_labels_total{outcome="stored",tenant="llabels"} 1.0' in metrics
    assert 'groundproxy_judge_labels_total{outcome="full",tenant="llabels"} 1.0' in metrics
    assert 'groundproxy_label_store_bytes{tenant="llabels"}' in metrics


def _visible(claims: list[dict[str, Any]], figures: dict[str, Any]) -> None:
    """Every escalated claim ends judged or skipped with a known reason, and the answer's
    figures count the skipped ones."""
    judged = [c["judge"] for c in claims if c.get("judge") is not None]
    for j in judged:
        assert ("verdict" in j) != ("skipped" in j), j
        assert "verdict" in j or j["skipped"] in SKIP_REASONS, j
        assert len(j.get("reason", "")) <= MAX_STORED_REASON and "sk-proj-Fuzz" not in str(j)
    skipped = sum(1 for j in judged if "skipped" in j)
    assert figures["escalated"] == len(judged) and figures["skipped"] == skipped
    assert sum(figures["skipped_reasons"].values()) == skipped


def test_fuzzed_judge_replies_never_5xx_and_every_skip_is_visible(
    served: dict[str, Any],
) -> None:
    """Seeded cases (tests/e2e/judge_replies.py) in order, within 50 s of this machine."""
    started, done = time.monotonic(), 0
    for n in range(len(FUZZ)):
        if time.monotonic() - started > 50.0:
            break
        stream = n % 4 == 3
        resp = _chat(served, "lfuzzs" if stream else "lfuzz", f"fuzz-{n:03d}", stream=stream)
        assert resp.status_code == 200, (n, resp.status_code, resp.text[:300])
        if stream:
            verdict = _last_event(resp)
            _visible(verdict["claims"], verdict["judge"])
        else:
            verdict = resp.json()["groundproxy"]
            _visible(verdict["claims"], verdict["judge"])
            header = _header(resp)
            assert header["skipped"] == verdict["judge"]["skipped"], (n, header)
        done += 1
    assert done >= 12, done
