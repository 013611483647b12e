"""The upstream's logprobs as an adapter signal, end to end through the real server.

A real ``groundproxy serve`` process (real embedder and verifier) in front of a real fake
upstream process whose answers carry scripted token logprobs. The tenant's reviewers label
the same kind of answer fine when the model was sure of it (logprob -0.05 a token) and
hallucinated when it hesitated (-4.0), sending the response's ``logprobs`` with each label;
the real CLI fits the adapter (it offers the logprob feature sets because the labels carry
logprobs, and picks one: nothing else tells the labels apart); then, through the official
``openai`` SDK with ``logprobs=True``, the running server accepts the sure answer and rejects
the hesitant one — and an answer whose request asked for no logprobs reads them as the
fit's mean, between the two. The tenant streams sentence by sentence by default; once its
adapter is in force a stream is guarded whole, so the adapter decides it too.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from groundproxy.testing.processes import free_port, start_fake_upstream, stop_process
from tests.conftest import ADMIN_KEYS, KEYS, _policy
from tests.e2e.adapter_serving import fit_adapter, serving

pytestmark = pytest.mark.slow

CONTEXT = "The team meeting is on Tuesday at 10:00 in room {n}."
ANSWER = "The meeting is on Tuesday at 10:00 in room {n}. The coffee there is usually good."
QUESTION = "When is the meeting?"
SURE, UNSURE = -0.05, -4.0


def _tokens(answer: str, logprob: float) -> dict[str, Any]:
    words = answer.split(" ")
    pieces = [w if i == 0 else " " + w for i, w in enumerate(words)]
    return {"content": [{"token": p, "logprob": logprob, "bytes": None} for p in pieces]}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    root = tmp_path_factory.mktemp("logprobs-e2e")
    script = root / "script.json"
    rules = [
        {"match": "confident", "answer": ANSWER.format(n=77), "logprob": SURE},
        {"match": "hesitant", "answer": ANSWER.format(n=77), "logprob": UNSURE},
    ]
    script.write_text(json.dumps({"default": "I do not know.", "rules": rules}), "utf-8")
    upstream_port = free_port()
    upstream = start_fake_upstream(upstream_port, script, log_path=root / "upstream.log")
    try:
        spec = _policy("acme", upstream_port, stream="sentence")  # the default stream mode
        with serving(root, {"acme": spec}) as found:
            yield found
    finally:
        stop_process(upstream)


def _ask(client: openai.OpenAI, mood: str, logprobs: bool) -> dict[str, Any]:
    resp = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[
            {"role": "system", "content": CONTEXT.format(n=77)},
            {"role": "user", "content": f"{mood}: {QUESTION}"},
        ],
        logprobs=logprobs,
    )
    body: dict[str, Any] = resp.model_dump()
    return body


def _stream(client: openai.OpenAI, mood: str) -> tuple[str | None, dict[str, Any]]:
    """A streamed request with logprobs: (its x-groundproxy-stream header, the last chunk's
    ``groundproxy`` object)."""
    raw = client.chat.completions.with_raw_response.create(
        model="gpt-4o-mini",
        messages=[
            {"role": "system", "content": CONTEXT.format(n=77)},
            {"role": "user", "content": f"{mood}: {QUESTION}"},
        ],
        logprobs=True,
        stream=True,
    )
    found: dict[str, Any] = {}
    for chunk in raw.parse():
        found = (chunk.model_extra or {}).get("groundproxy") or found
    return raw.headers.get("x-groundproxy-stream"), found


def test_feedback_with_logprobs_fits_an_adapter_that_reads_them(server: Any) -> None:
    url, policies, data = server
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=KEYS["acme"], max_retries=0, timeout=120)
    mode, body = _stream(client, "hesitant")  # no adapter yet: sentence by sentence
    assert mode == "sentence" and "adapter" not in body
    admin = {"Authorization": f"Bearer {ADMIN_KEYS['acme']}"}
    with httpx.Client(base_url=url, timeout=120) as c:
        bad = c.post(
            "/v1/groundproxy/feedback",
            json={"answer": "x", "label": "supported", "logprobs": [{"token": "x"}]},
            headers=admin,
        )
        assert bad.status_code == 400 and bad.json()["error"]["param"] == "logprobs"
        for n in range(1, 13):
            row: dict[str, Any] = {"answer": ANSWER.format(n=n), "question": QUESTION}
            row["context"] = [CONTEXT.format(n=n)]
            for label, lp in (("supported", SURE), ("hallucinated", UNSURE)):
                body = {**row, "label": label, "logprobs": _tokens(row["answer"], lp)}
                resp = c.post("/v1/groundproxy/feedback", json=body, headers=admin)
                assert resp.status_code == 200, resp.text
    stored = [json.loads(x) for x in (data / "acme" / "feedback.jsonl").read_text().splitlines()]
    assert len(stored) == 24 and stored[0]["logprobs"][0] == {"token": "The", "logprob": SURE}

    content, said = fit_adapter("acme", data, policies)
    assert "24 of 24 answers carry the upstream's logprobs" in said
    assert content["fit"]["feature_set"] in ("compact_lp", "compact_tok_lp")
    assert content["fit"]["oof_roc_auc"] == 1.0

    sure, unsure = _ask(client, "confident", True), _ask(client, "hesitant", True)
    plain = _ask(client, "hesitant", False)  # no logprobs asked for: the fit's mean
    # the guard read them; only citations were added, so they still describe the answer
    assert sure["choices"][0]["logprobs"]["content"] and "notes" not in sure["groundproxy"]
    adapters = [b["groundproxy"]["adapter"] for b in (sure, unsure, plain)]
    assert all(a["version"] == 1 and a["source"] == "tenant" for a in adapters)
    assert adapters[0]["decision"] == "accept" and sure["groundproxy"]["action"] == "none"
    assert sure["choices"][0]["message"]["content"].startswith("The meeting is on Tuesday")
    assert adapters[1]["decision"] == "reject" and unsure["groundproxy"]["action"] != "none"
    p = [a["p_hallucinated"] for a in adapters]
    assert p[0] < p[2] < p[1]

    # a stream, once the adapter is in force: guarded whole (buffer mode), the adapter decides
    # on the streamed upstream's logprobs as on the plain answer's
    mode, body = _stream(client, "hesitant")
    assert mode != "sentence" and body["adapter"]["decision"] == "reject"
    assert body["adapter"]["p_hallucinated"] == pytest.approx(p[1], abs=1e-3)

    # POST /v1/groundproxy/check (the plugins' path) takes the choice's logprobs too
    answer = ANSWER.format(n=77)
    check = {"answer": answer, "question": QUESTION, "context": [CONTEXT.format(n=77)]}
    auth = {"Authorization": f"Bearer {KEYS['acme']}"}
    with httpx.Client(base_url=url, timeout=120) as c:
        checked = [
            c.post("/v1/groundproxy/check", json={**check, "logprobs": _tokens(answer, lp)},
                   headers=auth).json()["groundproxy"]["adapter"]["p_hallucinated"]
            for lp in (SURE, UNSURE)
        ]  # fmt: skip
        bad = c.post("/v1/groundproxy/check", json={**check, "logprobs": {"content": 3}},
                     headers=auth)  # fmt: skip
    assert checked == pytest.approx([p[0], p[1]], abs=0.02)
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "logprobs"
