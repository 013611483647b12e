"""``judge.labels`` end to end: the judge's verdicts become the tenant's labels, the real
``calibrate --fit`` learns from them, and the running server then escalates fewer answers
(issue 29 item 2) — save the ``judge.audit`` share, judged anyway.

A real ``groundproxy serve`` process (real embedder and verifier), a scripted judge server
(a real HTTP process: ``groundproxy.testing.fake_upstream``, whose script answers the
judge's JSON) and ``POST /v1/groundproxy/check``. The tenant escalates every answer; the
judge says an answer with the meeting's right time (and the coffee, which the context
mentions) is supported and one with a wrong time contradicted. After 12 judged answers the
real CLI fits from the feedback store: the zero-shot decision already agrees with every
judge label, so the fit keeps it (a zero-shot record, no adapter: labels that always help,
item 3) and the record proves it as good as the judge. The server (no restart) then decides
the next such answers alone: no judge call, nothing escalated, ``decided_by: zero_shot`` —
for tenant ``acme`` (``audit: 0``); tenant ``globex`` (``audit: 1``) has every such answer
judged anyway, every claim, and its labels keep coming.
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
    specs = {
        "acme": _policy("acme", upstream_port, judge={**judge, "audit": 0.0}),
        "globex": _policy("globex", upstream_port, judge={**judge, "audit": 1.0}),
    }
    proc: subprocess.Popen[bytes] = start_fake_upstream(judge_port, script, root / "judge.log")
    try:
        with serving(root, specs) as (url, policies, data):
            yield url, policies, data, judge_port
    finally:
        stop_process(proc)


def _check(c: httpx.Client, tenant: str, answer: str, room: str) -> dict[str, Any]:
    body = {"answer": answer, "question": QUESTION, "context": [CONTEXT.format(r=room)]}
    resp = c.post("/v1/groundproxy/check", json=body, headers=_auth(KEYS[tenant]))
    assert resp.status_code == 200, resp.text
    found: dict[str, Any] = resp.json()["groundproxy"]
    return found


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _calls(judge_port: int) -> int:
    return int(httpx.get(f"http://127.0.0.1:{judge_port}/_stats", timeout=5).json()["started"])


def _labels(data: Path, tenant: str) -> list[dict[str, Any]]:
    rows = (data / tenant / "feedback.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(r) for r in rows]


def _teach(c: httpx.Client, tenant: str, data: Path, policies: Path) -> None:
    """12 judged answers (6 right, 6 wrong) become labels; the real CLI fits on them."""
    for room in ROOMS[:6]:
        fine = _check(c, tenant, FINE.format(r=room), room)
        wrong = _check(c, tenant, WRONG.format(r=room), room)
        assert fine["judge"]["escalated"] == 2 and wrong["judge"]["escalated"] == 1
        assert "decided_by" not in fine["judge"]  # nothing fitted yet: the judge decides
        assert [cl["verdict"] for cl in fine["claims"]] == ["supported", "supported"]
        assert wrong["claims"][0]["verdict"] == "contradicted"
    labels = _labels(data, tenant)
    assert [r["label_hallucinated"] for r in labels] == [0, 1] * 6
    assert labels[1]["claims"] == [{"text": WRONG.format(r="Alder"), "label": "hallucinated"}]
    assert labels[0]["answer"] == FINE.format(r="Alder") and labels[0]["context"]

    content, _ = fit_adapter(tenant, data, policies)
    assert content["version"] == 1 and content["fit"]["n"] == 12
    # zero-shot already agrees with every judge label: the fit keeps it (no adapter), and
    # the record proves it as good as the judge on this tenant's answers
    assert content["decision"] == "zero_shot"
    assert content["fit"]["zero_shot_balanced_accuracy"] == 1.0


def test_judge_labels_prove_zero_shot_and_escalations_fall(server: Any) -> None:
    url, policies, data, judge_port = server
    with httpx.Client(base_url=url, timeout=120) as c:
        _teach(c, "acme", data, policies)
        calls = _calls(judge_port)
        for room in ROOMS[6:]:
            fine = _check(c, "acme", FINE.format(r=room), room)
            assert "adapter" not in fine  # no adapter in force: the zero-shot decision
            assert fine["judge"]["escalated"] == 0 and fine["judge"]["decided_by"] == "zero_shot"
            assert "judge" not in fine["claims"][1] and fine["action"] == "none"
            wrong = _check(c, "acme", WRONG.format(r=room), room)
            assert wrong["judge"]["escalated"] == 0 and wrong["judge"]["decided_by"] == "zero_shot"
            assert wrong["claims"][0]["verdict"] != "supported" and wrong["action"] != "none"
        assert _calls(judge_port) == calls  # zero-shot decided alone: no judge call
        assert len(_labels(data, "acme")) == 12  # nothing judged, nothing labelled


def test_the_audit_share_is_judged_anyway_and_labels_keep_coming(server: Any) -> None:
    url, policies, data, judge_port = server
    with httpx.Client(base_url=url, timeout=120) as c:
        _teach(c, "globex", data, policies)
        calls = _calls(judge_port)
        for room in ROOMS[6:]:
            fine = _check(c, "globex", FINE.format(r=room), room)
            assert fine["judge"]["audit"] is True and "decided_by" not in fine["judge"]
            assert fine["judge"]["escalated"] == 2  # every claim, whatever escalate says
            assert [cl["judge"]["verdict"] for cl in fine["claims"]] == ["supported"] * 2
        assert _calls(judge_port) == calls + 2
        assert len(_labels(data, "globex")) == 14  # audited answers are labels too
