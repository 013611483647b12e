"""``judge.labels`` end to end: the judge's verdicts become the tenant's labels, the real
``calibrate --fit`` learns an adapter from them, and the running server then escalates
fewer answers (issue 29 item 2).

A real ``groundproxy serve`` process (real embedder and verifier), a scripted judge server
(a real HTTP process: ``groundproxy.testing.fake_upstream``, whose script answers the
judge's JSON) and ``POST /v1/groundproxy/check``. The tenant escalates every answer; the
judge says an answer with the meeting's right time (and the coffee, which the context
mentions) is supported and one with a wrong time contradicted. After 12 judged answers the
real CLI fits the adapter from the feedback store; the server (no restart) then decides the
next such answers with the adapter alone: no judge call, nothing escalated.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from groundproxy.testing.fake_judge import verdicts
from groundproxy.testing.processes import free_port, start_fake_upstream, stop_process
from tests.conftest import KEYS, _policy
from tests.e2e.adapter_serving import fit_adapter, serving

pytestmark = pytest.mark.slow

ROOMS = ["Alder", "Birch", "Cedar", "Dogwood", "Elm", "Fir", "Ginkgo", "Hazel"]
CONTEXT = "The team meeting is on Tuesday at 10:00 in room {r}. Coffee is served there."
FINE = "The meeting is on Tuesday at 10:00 in room {r}. The coffee there is usually good."
WRONG = "The meeting is on Friday at 15:00 in room {r}."
QUESTION = "When is the meeting?"
TIME_QUOTE = "The team meeting is on Tuesday at 10:00"
JUDGE_RULES = [
    {"match": "usually good", "answer": verdicts(
        ("c1", "supported", TIME_QUOTE), ("c2", "supported", "Coffee is served there."))},
    {"match": "Friday at 15:00", "answer": verdicts(("c1", "contradicted", TIME_QUOTE))},
]  # fmt: skip


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, upstream_port: int) -> Iterator[Any]:
    root = tmp_path_factory.mktemp("judge-labels-e2e")
    judge_port = free_port()
    script = root / "judge.json"
    script.write_text(json.dumps({"rules": JUDGE_RULES}), encoding="utf-8")
    judge = {"model": "openai/judge", "api_base": f"http://127.0.0.1:{judge_port}/v1",
             "escalate": "all", "labels": True}  # fmt: skip
    specs = {"acme": _policy("acme", upstream_port, judge=judge)}
    proc: subprocess.Popen[bytes] = start_fake_upstream(judge_port, script, root / "judge.log")
    try:
        with serving(root, specs) as (url, policies, data):
            yield url, policies, data, judge_port
    finally:
        stop_process(proc)


def _check(c: httpx.Client, answer: str, room: str) -> dict[str, Any]:
    body = {"answer": answer, "question": QUESTION, "context": [CONTEXT.format(r=room)]}
    resp = c.post("/v1/groundproxy/check", json=body, headers=_auth(KEYS["acme"]))
    assert resp.status_code == 200, resp.text
    found: dict[str, Any] = resp.json()["groundproxy"]
    return found


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _calls(judge_port: int) -> int:
    return int(httpx.get(f"http://127.0.0.1:{judge_port}/_stats", timeout=5).json()["started"])


def _labels(data: Path) -> list[dict[str, Any]]:
    rows = (data / "acme" / "feedback.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(r) for r in rows]


@pytest.mark.xfail(
    strict=True,
    raises=KeyError,
    reason="known gap after merging issue 29's two halves: these judge labels are ones the "
    "zero-shot decision already gets right (balanced accuracy 1.0), so calibrate --fit keeps "
    "zero-shot (no adapter: labels that always help) and the judge gate, which needs an "
    "adapter, never lets escalations fall; a zero-shot record proven on judge labels does "
    "not gate the judge yet",
)
def test_judge_labels_teach_the_adapter_and_escalations_fall(server: Any) -> None:
    url, policies, data, judge_port = server
    with httpx.Client(base_url=url, timeout=120) as c:
        for room in ROOMS[:6]:
            fine = _check(c, FINE.format(r=room), room)
            wrong = _check(c, WRONG.format(r=room), room)
            assert fine["judge"]["escalated"] == 2 and wrong["judge"]["escalated"] == 1
            assert [cl["verdict"] for cl in fine["claims"]] == ["supported", "supported"]
            assert wrong["claims"][0]["verdict"] == "contradicted"
        labels = _labels(data)
        assert [r["label_hallucinated"] for r in labels] == [0, 1] * 6
        assert labels[1]["claims"] == [{"text": WRONG.format(r="Alder"), "label": "hallucinated"}]
        assert labels[0]["answer"] == FINE.format(r="Alder") and labels[0]["context"]

        content, _ = fit_adapter("acme", data, policies)
        assert content["version"] == 1 and content["fit"]["n"] == 12

        calls = _calls(judge_port)
        for room in ROOMS[6:]:
            fine = _check(c, FINE.format(r=room), room)
            assert fine["adapter"]["version"] == 1 and fine["adapter"]["decision"] == "accept"
            assert fine["judge"]["escalated"] == 0 and "judge" not in fine["claims"][1]
            wrong = _check(c, WRONG.format(r=room), room)
            assert wrong["adapter"]["decision"] == "reject" and wrong["judge"]["escalated"] == 0
        assert _calls(judge_port) == calls  # the adapter decided alone: no judge call
        assert len(_labels(data)) == 12  # nothing judged, nothing labelled
