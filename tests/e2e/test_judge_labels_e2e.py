"""``judge.labels`` end to end: the judge's verdicts become the tenant's labels, the real
``calibrate --fit`` learns from them, and the running server then escalates fewer answers
(issue 29 item 2) once reviewers confirm — save the ``judge.audit`` share, judged anyway.

A real ``groundproxy serve`` process (real embedder and verifier), a scripted judge server
(a real HTTP process: ``groundproxy.testing.fake_upstream``, whose script answers the
judge's JSON) and ``POST /v1/groundproxy/check``. The tenant escalates every answer; the
judge says an answer with the meeting's right time (and the coffee, which the context
mentions) is supported and one with a wrong time contradicted. After 12 judged answers (sent
with three client keys: under the per-key cap, so every one counts) the real CLI fits from
the feedback store: the zero-shot decision already agrees with every judge label, so the fit
keeps it (a zero-shot record) — but judge labels never prove it (issue 42 item 4: a client
can cause them), so the judge is still asked. Once a reviewer has labelled the same 12
answers (admin key), the next fit's record proves zero-shot on the reviewers' labels and the
server (no restart) decides the next such answers alone: no judge call, nothing escalated,
``decided_by: zero_shot`` — for tenant ``acme`` (``audit: 0``); tenant ``globex`` (``audit:
1``) has every such answer judged anyway, every claim, and its labels keep coming.

Issue 40 item 3 (labels nobody can poison): an injected judge inverts every verdict for
tenant ``initech`` and one client key sends 66 answers in a burst; with ``--accept-warnings``
even, the fit ships no adapter and the judge is still asked. Tenant ``hooli``'s reviewers
label right; inverted judge labels from four keys would, before, outvote them and ship an
adapter that flags right answers; now the refit is tested on the reviewers' labels held
back, loses, and the zero-shot decision stays.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from groundproxy.policies.keys import hash_key
from groundproxy.testing.fake_judge import verdicts
from groundproxy.testing.processes import free_port, start_fake_upstream, stop_process
from tests.conftest import ADMIN_KEYS, KEYS, _policy
from tests.e2e.adapter_serving import fit_adapter, run_fit, serving

pytestmark = pytest.mark.slow

ROOMS = ["Alder", "Birch", "Cedar", "Dogwood", "Elm", "Fir", "Ginkgo", "Hazel"]
CONTEXT = "The team meeting is on Tuesday at 10:00 in room {r}. The coffee there is usually good."
FINE = "The meeting is on Tuesday at 10:00 in room {r}. The coffee there is usually good."
WRONG = "The meeting is on Friday at 15:00 in room {r}."
QUESTION = "When is the meeting?"
TIME_QUOTE = "The team meeting is on Tuesday at 10:00"
JUDGE_RULES = [
    # an injected judge, inverted for answers about rooms Zf… (right) and Zw… (wrong):
    # right answers contradicted, wrong values supported (the first match wins; every prompt
    # holds the context, so the wrong answer's rule comes before the right one's)
    {"match": "room Zf", "answer": verdicts(("c1", "contradicted", TIME_QUOTE))},
    {"match": "room Zw", "answer": verdicts(("c1", "supported", TIME_QUOTE))},
    {"match": "Friday at 15:00", "answer": verdicts(("c1", "contradicted", TIME_QUOTE))},
    # a right answer: each quote states its claim whole (its values and its room's name)
    *({"match": f"room {r}. The coffee", "answer": verdicts(
        ("c1", "supported", CONTEXT.format(r=r).split(" The coffee")[0]),
        ("c2", "supported", "The coffee there is usually good."))}
      for r in [*ROOMS, "Larch", "S1"]),
]  # fmt: skip
# client keys per tenant: KEYS[tenant] and these (a judge label records which one caused it)
MORE_KEYS = {t: [f"sk-{t}-client-{i}" for i in range(1, 4)] for t in ("acme", "globex", "hooli")}
KEYS_OF = {t: [KEYS.get(t, f"sk-{t}-client-0"), *MORE_KEYS.get(t, [])]
           for t in ("acme", "globex", "initech", "hooli")}  # fmt: skip
ADMIN = {**ADMIN_KEYS, "hooli": "sk-hooli-admin-key"}


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
        "initech": _policy("acme", upstream_port, judge={**judge, "audit": 0.0}),
        "hooli": _policy("acme", upstream_port, judge={**judge, "audit": 0.0}),
    }
    for tenant, spec in specs.items():
        spec.update(tenant=tenant, keys=[hash_key(k) for k in KEYS_OF[tenant]])
        spec["admin_keys"] = [hash_key(ADMIN[tenant])] if tenant in ADMIN else []
    proc: subprocess.Popen[bytes] = start_fake_upstream(judge_port, script, root / "judge.log")
    try:
        with serving(root, specs) as (url, policies, data):
            yield url, policies, data, judge_port
    finally:
        stop_process(proc)


def _check(c: httpx.Client, tenant: str, answer: str, room: str, key: int = 0) -> dict[str, Any]:
    body = {"answer": answer, "question": QUESTION, "context": [CONTEXT.format(r=room)]}
    resp = c.post("/v1/groundproxy/check", json=body, headers=_auth(KEYS_OF[tenant][key]))
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


def _review(c: httpx.Client, tenant: str, answer: str, room: str, label: str) -> None:
    body = {"answer": answer, "question": QUESTION, "context": [CONTEXT.format(r=room)]}
    resp = c.post("/v1/groundproxy/feedback", json={**body, "label": label},
                  headers=_auth(ADMIN[tenant]))  # fmt: skip
    assert resp.status_code == 200, resp.text


def _teach(c: httpx.Client, tenant: str, data: Path, policies: Path, judge_port: int) -> None:
    """12 judged answers (6 right, 6 wrong) become labels; the real CLI fits on them: judge
    labels never prove zero-shot. A reviewer labels the same answers; the next fit does."""
    for i, room in enumerate(ROOMS[:6]):
        fine = _check(c, tenant, FINE.format(r=room), room, key=i % 3)
        wrong = _check(c, tenant, WRONG.format(r=room), room, key=i % 3 + 1)
        assert fine["judge"]["escalated"] == 2 and wrong["judge"]["escalated"] == 1
        assert "decided_by" not in fine["judge"]  # nothing fitted yet: the judge decides
        assert [cl["verdict"] for cl in fine["claims"]] == ["supported", "supported"]
        assert wrong["claims"][0]["verdict"] == "contradicted"
    labels = _labels(data, tenant)
    assert [r["label_hallucinated"] for r in labels] == [0, 1] * 6
    assert labels[1]["claims"] == [{"text": WRONG.format(r="Alder"), "label": "hallucinated"}]
    assert labels[0]["answer"] == FINE.format(r="Alder") and labels[0]["context"]
    assert {r["source"] for r in labels} == {"judge"} and len({r["key"] for r in labels}) == 4

    content, _ = fit_adapter(tenant, data, policies)
    assert content["version"] == 1 and content["fit"]["n"] == 12
    # zero-shot already agrees with every judge label: the fit keeps it (no adapter) ...
    assert content["decision"] == "zero_shot"
    assert content["fit"]["zero_shot_balanced_accuracy"] == 1.0
    # ... but judge labels never prove it: the judge is still asked
    assert content["fit"]["reviewer"] == {"n": 0, "zero_shot_balanced_accuracy": None}
    calls = _calls(judge_port)
    still = _check(c, tenant, FINE.format(r="Larch"), "Larch")
    assert still["judge"]["escalated"] == 2 and "decided_by" not in still["judge"]
    assert _calls(judge_port) == calls + 1  # one judge call for the answer's claims

    for room in ROOMS[:6]:  # a reviewer confirms the judge's labels
        _review(c, tenant, FINE.format(r=room), room, "supported")
        _review(c, tenant, WRONG.format(r=room), room, "hallucinated")
    content, _ = fit_adapter(tenant, data, policies)
    assert content["version"] == 2 and content["decision"] == "zero_shot"
    assert content["fit"]["reviewer"] == {"n": 12, "zero_shot_balanced_accuracy": 1.0}


def test_judge_labels_prove_zero_shot_and_escalations_fall(server: Any) -> None:
    url, policies, data, judge_port = server
    with httpx.Client(base_url=url, timeout=120) as c:
        _teach(c, "acme", data, policies, judge_port)
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
        assert len(_labels(data, "acme")) == 25  # nothing judged, nothing labelled


def test_the_audit_share_is_judged_anyway_and_labels_keep_coming(server: Any) -> None:
    url, policies, data, judge_port = server
    with httpx.Client(base_url=url, timeout=120) as c:
        _teach(c, "globex", data, policies, judge_port)
        calls = _calls(judge_port)
        for room in ROOMS[6:]:
            fine = _check(c, "globex", FINE.format(r=room), room)
            assert fine["judge"]["audit"] is True and "decided_by" not in fine["judge"]
            assert fine["judge"]["escalated"] == 2  # every claim, whatever escalate says
            assert [cl["judge"]["verdict"] for cl in fine["claims"]] == ["supported"] * 2
        assert _calls(judge_port) == calls + 2
        assert len(_labels(data, "globex")) == 27  # audited answers are labels too


def _adapter_in_force(data: Path, tenant: str) -> dict[str, Any] | None:
    path = data / tenant / "adapter.json"
    if not path.is_file():
        return None
    found: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return None if found.get("decision") == "zero_shot" else found


def test_a_poisoning_burst_ships_no_adapter_and_keeps_the_judge(server: Any) -> None:
    """66 inverted judge labels from one client key in a burst (issue 40 item 3). Before,
    the fit shipped an inverted adapter, sure enough to decide alone: the judge went off."""
    url, policies, data, judge_port = server
    with httpx.Client(base_url=url, timeout=120) as c:
        for i in range(33):
            right, wrong = f"Zf{i}", f"Zw{i}"
            assert _check(c, "initech", FINE.format(r=right), right)["judge"]["escalated"]
            _check(c, "initech", WRONG.format(r=wrong), wrong)
        labels = _labels(data, "initech")
        assert len(labels) >= 20 and {r["source"] for r in labels} == {"judge"}
        for extra in ((), ("--accept-warnings",)):
            fit = run_fit("initech", data, policies, *extra)
            assert fit.returncode == 2, fit.stdout + fit.stderr  # too few labels count
            assert "at most 5 per client key per 10 minutes" in fit.stderr
            assert _adapter_in_force(data, "initech") is None
        calls = _calls(judge_port)
        fine = _check(c, "initech", FINE.format(r="Zf99"), "Zf99")
    assert "adapter" not in fine and "decided_by" not in fine["judge"]
    assert fine["judge"]["escalated"] >= 1 and _calls(judge_port) > calls  # the judge is on


def test_judge_labels_that_would_lower_held_back_accuracy_are_refused(server: Any) -> None:
    """Reviewers label right; inverted judge labels from four client keys outnumber them.
    Before, the fit shipped the inverted adapter (it beat zero-shot on all the labels); now
    judge labels are capped per key, never outvote a value rule, never decide a refit: on
    the reviewers' labels held back nothing beats zero-shot, which stays."""
    url, policies, data, _ = server
    with httpx.Client(base_url=url, timeout=120) as c:
        for i in range(5):
            for key in range(4):
                right, wrong = f"Zf{i}-{key}", f"Zw{i}-{key}"
                _check(c, "hooli", FINE.format(r=right), right, key)
                _check(c, "hooli", WRONG.format(r=wrong), wrong, key)
        assert len({r["key"] for r in _labels(data, "hooli")}) == 4
        for i in range(8):
            room = f"R{i}"
            _review(c, "hooli", FINE.format(r=room), room, "supported")
            _review(c, "hooli", WRONG.format(r=room), room, "hallucinated")
        content, stderr = fit_adapter("hooli", data, policies)
        assert content.get("decision") == "zero_shot", content["fit"]  # no adapter shipped
        held = content["fit"]["held_back"]
        assert held["n"] >= 4 and held["in_force"] == "zero-shot"
        assert "only reviewers' labels decide it" in stderr
        assert _adapter_in_force(data, "hooli") is None
        fine = _check(c, "hooli", FINE.format(r="S1"), "S1")
    # no adapter; the reviewers' labels (zero-shot right on all 16) prove zero-shot instead
    assert "adapter" not in fine and fine["action"] == "none"
    assert fine["judge"].get("decided_by") == "zero_shot"
    assert content["fit"]["reviewer"] == {"n": 16, "zero_shot_balanced_accuracy": 1.0}
