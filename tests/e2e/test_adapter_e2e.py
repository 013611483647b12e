"""Feedback → ``calibrate --fit`` → a different served verdict, through the real server.

A real ``groundproxy serve`` process (real embedder and verifier) guards answers with
``POST /v1/groundproxy/check``. Zero-shot, an answer with one claim its evidence does not
cover ("The coffee there is usually good.") is flagged. The tenant's reviewers label such
answers fine and answers with a wrong time hallucinated (``POST /v1/groundproxy/feedback``,
one of them by step id from the trace store); the real CLI fits the adapter; the running
server (no restart) then accepts the next such answer and still rejects a wrong time.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import ADMIN_KEYS, KEYS, _policy
from tests.e2e.adapter_serving import fit_adapter, serving

pytestmark = pytest.mark.slow

CONTEXT = "The team meeting is on Tuesday at 10:00 in room {n}."
FINE = "The meeting is on Tuesday at 10:00 in room {n}. The coffee there is usually good."
WRONG = "The meeting is on Friday at 15:00 in room {n}."
QUESTION = "When is the meeting?"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, upstream_port: int) -> Iterator[Any]:
    specs = {
        "acme": _policy("acme", upstream_port),
        "globex": _policy("globex", upstream_port, verifier={"decision": "learned"}),
    }
    with serving(tmp_path_factory.mktemp("adapter-e2e"), specs) as found:
        yield found


def _check(c: httpx.Client, answer: str, n: int, tenant: str = "acme") -> httpx.Response:
    body = {"answer": answer, "question": QUESTION, "context": [CONTEXT.format(n=n)]}
    resp = c.post("/v1/groundproxy/check", json=body, headers=_auth(KEYS[tenant]))
    assert resp.status_code == 200, resp.text
    return resp


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _feedback(c: httpx.Client, body: dict[str, Any], key: str = ADMIN_KEYS["acme"]) -> Any:
    return c.post("/v1/groundproxy/feedback", json=body, headers=_auth(key))


def test_feedback_fit_changes_the_served_verdict(server: Any) -> None:
    url, policies, data = server
    with httpx.Client(base_url=url, timeout=120) as c:
        before = _check(c, FINE.format(n=42), 42)
        gp = before.json()["groundproxy"]
        assert gp["action"] == "flag" and "adapter" not in gp  # zero-shot: "coffee" unverified
        assert _check(c, WRONG.format(n=42), 42).json()["action"] != "none"

        # errors: a normal key is refused, a bad label names its field
        denied = _feedback(c, {"answer": "x", "label": "supported"}, key=KEYS["acme"])
        assert denied.status_code == 403 and set(denied.json()["error"]) >= {"message", "type"}
        bad = _feedback(c, {"answer": "x", "label": "maybe"})
        assert bad.status_code == 400 and bad.json()["error"]["param"] == "label"
        unknown = _feedback(c, {"step_id": "st_" + "0" * 16, "label": "supported"})
        assert unknown.status_code == 404, unknown.text

        # one label by step id (the answer is read from the trace store)
        step = before.headers["x-groundproxy-step-id"]
        by_step = _feedback(c, {"step_id": step, "label": "supported"})
        assert by_step.status_code == 200, by_step.text
        assert by_step.json()["label_hallucinated"] == 0
        for n in range(1, 13):
            fine: dict[str, Any] = {"answer": FINE.format(n=n), "question": QUESTION}
            fine["context"] = [CONTEXT.format(n=n)]
            assert _feedback(c, {**fine, "label": "supported"}).status_code == 200
            wrong = {**fine, "answer": WRONG.format(n=n)}
            claims = [{"text": WRONG.format(n=n), "label": "hallucinated"}]
            resp = _feedback(c, {**wrong, "claims": claims})
            assert resp.status_code == 200 and resp.json()["label_hallucinated"] == 1
        assert resp.json()["count"] == 25

        stored = (data / "acme" / "feedback.jsonl").read_text(encoding="utf-8").splitlines()
        assert len(stored) == 25 and json.loads(stored[0])["step_id"] == step

        content, _ = fit_adapter("acme", data, policies)
        assert content["version"] == 1 and content["fit"]["n"] == 25
        assert (data / "acme" / "adapter-v1.json").is_file()

        # served by the running process, no restart
        after = _check(c, FINE.format(n=77), 77)
        gp = after.json()["groundproxy"]
        assert gp["adapter"]["version"] == 1 and gp["adapter"]["decision"] == "accept"
        assert after.json()["action"] == "none" == after.headers["x-groundproxy-action"]
        text = after.json()["answer"]  # as written (the supported claim cited), unflagged
        assert text.startswith("The meeting is on Tuesday at 10:00 in room 77 [1].")
        assert "The coffee there is usually good.\n" in text
        wrong = _check(c, WRONG.format(n=77), 77).json()
        assert wrong["groundproxy"]["adapter"]["decision"] == "reject"
        assert wrong["action"] != "none"


def test_learned_decision_is_served_for_a_tenant_without_adapter(server: Any) -> None:
    """Policy ``verifier.decision: learned``: the default verifier's shipped answer combiner
    decides (the report names it), a wrong time is still rejected, and acme's tenant adapter (if the
    test above fitted one) never leaks into globex's answers."""
    url, _, _ = server
    with httpx.Client(base_url=url, timeout=120) as c:
        right = _check(c, "The meeting is on Tuesday at 10:00 in room 5.", 5, "globex").json()
        wrong = _check(c, WRONG.format(n=5), 5, "globex").json()
    for body in (right, wrong):
        adapter = body["groundproxy"]["adapter"]
        assert adapter["source"] == "shipped" and adapter["version"] == 1
        assert 0.0 <= adapter["p_hallucinated"] <= 1.0
    assert right["groundproxy"]["adapter"]["decision"] == "accept" and right["action"] == "none"
    assert wrong["groundproxy"]["adapter"]["decision"] == "reject" and wrong["action"] != "none"
    assert (
        wrong["groundproxy"]["adapter"]["p_hallucinated"]
        > right["groundproxy"]["adapter"]["p_hallucinated"]
    )
