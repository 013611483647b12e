"""Issue 40 items 1, 2, 15 and 16 through the real ``groundproxy serve`` process (real
embedder, verifier and index), a scripted judge — a real HTTP process
(``groundproxy.testing.fake_upstream`` whose script answers the judge's JSON) — and a
scripted upstream process.

1. A wrong or injected judge cannot certify a wrong value: a ``supported`` quote must state
   the claim's value (words and digits alike) and its item, and a judge never overturns a
   value rule's mismatch (they disagree → the claim is flagged, both said).
2. A value a document asserts only as past, planned, believed, of another edition or
   variant, or in a keyword-stuffed line supports nothing — neither for the rules nor as a
   judge's quote.
15. A claim only the verifier contradicts (another catalogue item) is flagged: it does not
   block a sentence stream through the trust floor.
16. A period is a value: "every year" against "every 3 months" is corrected.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import yaml

from groundproxy.policies.keys import hash_key
from groundproxy.testing.fake_judge import verdicts
from groundproxy.testing.processes import free_port, start_fake_upstream, start_proxy, stop_process

pytestmark = pytest.mark.slow

HANDBOOK = (
    "Every Acme vacuum robot comes with a limited warranty of 12 months from the date of purchase."
)
WRONG_WARRANTY = "The Acme vacuum robot has a warranty of 48 months."
# keyword → (the request's context, the upstream's answer, the judge's `supported` quote)
WRONG_VALUES: dict[str, tuple[str, str, str]] = {
    "tenyears": ("The battery is covered for 6 months.", "The battery is covered for ten years.",
                 "The battery is covered for"),
    "kilograms": ("The robot weighs 3.4 kg.", "The robot weighs nine kilograms.",
                  "The robot weighs"),
    "ninety": ("Returns are accepted within 30 days of delivery.",
               "Returns are accepted within ninety days of delivery.",
               "Returns are accepted within"),
    "fouryears": ("The warranty lasts 12 months.", "The warranty lasts four years.",
                  "The warranty lasts"),
    "elsewhere": ("The battery is covered for 6 months. The robot warranty is 12 months.",
                  "The battery is covered for 12 months.",
                  "The battery is covered for 6 months. The robot warranty is 12 months"),
    "city": ("Acme robots are assembled in Lyon.", "Acme robots are assembled in Paris.",
             "Acme robots are assembled in"),
}  # fmt: skip
# item 2: the handbook (12 months) and a document that states 48 months without asserting it
# for the present robot; the judge quotes the 48 months
MENTIONS: dict[str, tuple[str, str]] = {
    "believe": ("Some customers believe the Acme vacuum robot has a warranty of 48 months, but "
                "they are wrong.", "the Acme vacuum robot has a warranty of 48 months"),
    "until": ("Until 2019 the Acme vacuum robot had a warranty of 48 months.",
              "the Acme vacuum robot had a warranty of 48 months"),
    "edition": ("| Handbook | Acme vacuum robot warranty |\n|---|---|\n| 2015 edition | 48 months "
                "|", "| 2015 edition | 48 months |"),
    "plans": ("Acme plans to offer the Acme vacuum robot a warranty of 48 months in 2030.",
              "the Acme vacuum robot a warranty of 48 months"),
    "aside": ("Refurbished units aside, no Acme vacuum robot has a 48-month warranty.",
              "Acme vacuum robot has a 48-month warranty"),
    "stuffed": ("Acme vacuum robot warranty 48 months Acme vacuum robot warranty 48 months "
                "robot warranty 48 months", "Acme vacuum robot warranty 48 months"),
    "extended": ("An extended plan can bring the Acme vacuum robot warranty to 48 months.",
                 "the Acme vacuum robot warranty to 48 months"),
}  # fmt: skip
HEPA = "Replace the HEPA filter every 3 months. Empty the dust bin after each use."
CATALOGUE = [
    (f"item{i}.md", f"# Item {i}\n\nItem {i} of the catalogue is a steel shelf. Item {i} of the "
     f"catalogue weighs {10 + i} kilograms.\n")
    for i in range(1, 6)
]  # fmt: skip
CATALOGUE_ANSWER = " ".join(
    ["Item 0 of the catalogue weighs 1 kilograms."]
    + [f"Item {i} of the catalogue weighs {10 + i} kilograms." for i in range(1, 6)] * 4
)


def _contexts() -> dict[str, tuple[str, str]]:
    """keyword → (context, answer) the upstream and the request carry."""
    out = {k: (ctx, ans) for k, (ctx, ans, _) in WRONG_VALUES.items()}
    out.update({k: (f"{HANDBOOK}\n\n{doc}", WRONG_WARRANTY) for k, (doc, _) in MENTIONS.items()})
    out["disputed"] = (HANDBOOK, "The Acme vacuum robot has a limited warranty of 24 months.")
    out["hepa"] = (HEPA, "Replace the HEPA filter every year.")
    out["catalogue"] = ("", CATALOGUE_ANSWER)
    return out


def _judge_rules() -> list[dict[str, str]]:
    rules = [
        {"match": ans, "answer": verdicts(("c1", "supported", quote))}
        for _, ans, quote in WRONG_VALUES.values()
    ]
    rules += [
        {"match": doc[:40], "answer": verdicts(("c1", "supported", quote))}
        for doc, quote in MENTIONS.values()
    ]
    rules.append({"match": "24 months", "answer": verdicts(("c1", "unverifiable", ""))})
    rules.append(
        {"match": "HEPA", "answer": verdicts(("c1", "supported", "Replace the HEPA filter every"))}
    )
    return rules


def _key(tenant: str) -> str:
    return f"sk-{tenant}-judge-values"


def _spec(tenant: str, up_port: int, judge_port: int) -> dict[str, Any]:
    judge = {
        "model": "openai/judge", "api_base": f"http://127.0.0.1:{judge_port}/v1",
        "escalate": "all", "max_claims": 32,
    }  # fmt: skip
    return {
        "tenant": tenant,
        "keys": [hash_key(_key(tenant))],
        "upstream": {
            "model": "openai/gpt-4o-mini", "api_base": f"http://127.0.0.1:{up_port}/v1",
            "api_key_env": "TEST_UPSTREAM_KEY", "timeout_s": 10,
        },
        "latency_budget_ms": 60000,
        "stream": "sentence" if tenant == "jvstream" else "buffer",
        "judge": judge,
    }  # fmt: skip


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Iterator[dict[str, Any]]:
    from groundproxy.retrieval.ingest import ingest_texts

    root = tmp_path_factory.mktemp("judge-values-e2e")
    up_port, judge_port, port = free_port(), free_port(), free_port()
    answers = [{"match": f"({k})", "answer": ans} for k, (_, ans) in _contexts().items()]
    (root / "up.json").write_text(json.dumps({"rules": answers}), encoding="utf-8")
    (root / "judge.json").write_text(json.dumps({"rules": _judge_rules()}), encoding="utf-8")
    policies, data = root / "policies", root / "data"
    policies.mkdir()
    for tenant in ("jvbuf", "jvstream"):
        spec = _spec(tenant, up_port, judge_port)
        (policies / f"{tenant}.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    ingest_texts(data, "jvstream", CATALOGUE, embedder)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        procs.append(start_fake_upstream(up_port, root / "up.json"))
        procs.append(start_fake_upstream(judge_port, root / "judge.json"))
        # a generous start: the shared test machine may be loaded (the wait is not a check)
        proxy = start_proxy(port, policies, data, log_path=root / "proxy.log", timeout_s=600)
        procs.append(proxy)
        yield {"url": f"http://127.0.0.1:{port}"}
    finally:
        for proc in reversed(procs):
            stop_process(proc)


def _ask(
    s: dict[str, Any], keyword: str, tenant: str = "jvbuf", stream: bool = False
) -> httpx.Response:
    context = _contexts()[keyword][0]
    messages = [{"role": "system", "content": context}] if context else []
    messages.append({"role": "user", "content": f"Question ({keyword}): tell me about it."})
    body = {"model": "gpt-4o-mini", "messages": messages, "stream": stream}
    headers = {"Authorization": f"Bearer {_key(tenant)}"}
    resp = httpx.post(s["url"] + "/v1/chat/completions", json=body, headers=headers, timeout=120)
    assert resp.status_code == 200, resp.text
    return resp


def _gp(resp: httpx.Response) -> dict[str, Any]:
    found: dict[str, Any] = resp.json()["groundproxy"]
    return found


@pytest.mark.parametrize("keyword", sorted(WRONG_VALUES))
def test_a_judge_cannot_certify_a_wrong_value(served: dict[str, Any], keyword: str) -> None:
    # before: the judge's `supported`, quoting a span without the claim's value (or with a
    # value of another item), made the wrong answer `supported`, action none
    resp = _ask(served, keyword)
    (claim,) = _gp(resp)["claims"]
    assert claim["judge"] == {"skipped": "unquoted", "model": "openai/judge"}, claim
    assert claim["verdict"] != "supported" and _gp(resp)["action"] != "none"
    assert resp.headers["x-groundproxy-action"] != "none"


def test_a_judge_never_overturns_a_value_rule(served: dict[str, Any]) -> None:
    # before: a judge's `unverifiable` (no quote needed) replaced the rule's contradiction
    # and its correction; now the rule's verdict stands, the claim is flagged, both said
    resp = _ask(served, "disputed")
    (claim,) = _gp(resp)["claims"]
    assert claim["verdict"] == "contradicted" and claim["action"] == "flagged", claim
    assert claim["judge"]["verdict"] == "unverifiable" and claim["judge"]["disputed"] is True
    assert "evidence states 12 months" in claim["explanation"]
    assert "judge openai/judge disagrees: unverifiable" in claim["explanation"]
    assert _gp(resp)["action"] == "flag" and not _gp(resp).get("blocked")
    assert resp.json()["groundproxy"]["judge"]["overturned"] == 0


@pytest.mark.parametrize("keyword", sorted(MENTIONS))
def test_a_mention_document_certifies_nothing(served: dict[str, Any], keyword: str) -> None:
    # before: 48 months said as a belief, a past or planned value, another edition, a
    # variant, a keyword-stuffed line, was support (by the rules or the judge's quote)
    resp = _ask(served, keyword)
    (claim,) = _gp(resp)["claims"]
    assert claim["verdict"] != "supported", claim
    assert claim["judge"].get("verdict") != "supported", claim
    assert _gp(resp)["action"] != "none"
    text = resp.json()["choices"][0]["message"]["content"]
    assert "48 months." not in text or "[unverified]" in text or claim["action"] != "kept"


def test_a_period_is_a_value(served: dict[str, Any]) -> None:
    # before: "every year" was supported (0.88) against "every 3 months", the judge agreed
    resp = _ask(served, "hepa")
    (claim,) = _gp(resp)["claims"]
    assert claim["verdict"] == "contradicted", claim
    assert claim["correction"] == "Replace the HEPA filter every 3 months."
    assert claim["judge"] == {"skipped": "unquoted", "model": "openai/judge"}
    assert resp.json()["choices"][0]["message"]["content"].startswith(
        "Replace the HEPA filter every 3 months"
    )


def test_a_verifier_only_contradiction_does_not_block_a_stream(served: dict[str, Any]) -> None:
    # before: the first sentence, about an item the catalogue does not hold, was
    # contradicted by the verifier alone and the trust floor blocked the whole stream there
    resp = _ask(served, "catalogue", tenant="jvstream", stream=True)
    text = ""
    last: dict[str, Any] = {}
    for line in resp.text.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            event = json.loads(line[6:])
            for choice in event.get("choices") or []:
                text += (choice.get("delta") or {}).get("content") or ""
            last = event.get("groundproxy", last)
    first = last["claims"][0]
    assert first["verdict"] == "contradicted" and first["action"] == "flagged", first
    assert first["explanation"].startswith("contradicted by")  # the verifier alone
    assert last["action"] == "flag"
    assert all(c["action"] in ("kept", "flagged") for c in last["claims"])
    assert "Item 0 of the catalogue weighs 1 kilograms [unverified]" in text
    # the whole answer went out (marks and sources aside), nothing withheld
    body = re.sub(r" \[(?:\d+|unverified)\]", "", text.split("\n\nSources:")[0])
    assert body.strip() == CATALOGUE_ANSWER
