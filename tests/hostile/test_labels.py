"""A reviewer's label lands on the answer the reviewer meant (issue 32, item 1), through the
real server: by the server's own step id, or by a request id only while it names one answer
of the tenant — a client re-using an id (as ``x-request-id`` or ``x-groundproxy-trace-id``)
never moves a label onto its own answer; an ambiguous request id is a 409."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.hostile.conftest import ANSWER, Hostile, admin_key, auth, key

pytestmark = pytest.mark.slow


def _chat(c: httpx.Client, tenant: str, text: str, **headers: str) -> httpx.Response:
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}]}
    r = c.post("/v1/chat/completions", headers={**auth(key(tenant)), **headers}, json=body)
    assert r.status_code == 200, r.text
    return r


def _label(c: httpx.Client, body: dict[str, Any], tenant: str = "ta") -> httpx.Response:
    return c.post("/v1/groundproxy/feedback", headers=auth(admin_key(tenant)), json=body)


def _stored(hostile: Hostile, tenant: str = "ta") -> list[dict[str, Any]]:
    path = hostile.root / "data" / tenant / "feedback.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_a_duplicate_id_never_moves_a_label(hostile: Hostile) -> None:
    with hostile.client() as c:
        victim = _chat(c, "ta", "the warranty?", **{"x-request-id": "rid-shared-7"})
        step = victim.headers["x-groundproxy-step-id"]
        r = _label(c, {"request_id": "rid-shared-7", "label": "supported"})  # one answer: binds
        assert r.status_code == 200, r.text
        assert _stored(hostile)[-1]["step_id"] == step

        # a client sends its own answers with the victim's ids: the request id, and the
        # step id itself as a request id and as a trace id
        _chat(c, "ta", "the kettle?", **{"x-request-id": "rid-shared-7"})
        _chat(c, "ta", "the kettle?", **{"x-request-id": step})
        _chat(c, "ta", "the kettle?", **{"x-groundproxy-trace-id": step})

        r = _label(c, {"request_id": "rid-shared-7", "label": "hallucinated"})
        assert r.status_code == 409, r.text
        err = r.json()["error"]
        assert err["param"] == "request_id" and "step_id" in err["message"], err

        r = _label(c, {"step_id": step, "label": "hallucinated"})
        assert r.status_code == 200, r.text
        last = _stored(hostile)[-1]
        assert last["step_id"] == step and last["answer"] == ANSWER, last
        assert "kettle" not in last["answer"]

        r = _label(c, {"request_id": step, "label": "hallucinated"})  # the client's answer
        assert r.status_code == 200, r.text
        assert _stored(hostile)[-1]["step_id"] != step


def test_label_references_are_checked(hostile: Hostile) -> None:
    with hostile.client() as c:
        step = _chat(c, "ta", "the warranty?").headers["x-groundproxy-step-id"]
        cases: list[tuple[dict[str, Any], int, str | None]] = [
            ({"step_id": "st_" + "0" * 16, "label": "supported"}, 404, None),
            ({"step_id": "not-a-step", "label": "supported"}, 400, "step_id"),
            ({"step_id": step, "request_id": "x", "label": "supported"}, 400, "request_id"),
            ({"request_id": "r" * 129, "label": "supported"}, 400, "request_id"),
            ({"request_id": 5, "label": "supported"}, 400, "request_id"),
        ]
        for body, status, param in cases:
            r = _label(c, body)
            assert r.status_code == status, (body, r.text)
            if param:
                assert r.json()["error"]["param"] == param, r.text
        # another tenant's step is not found, never labelled
        r = _label(c, {"step_id": step, "label": "supported"}, tenant="ts")
        assert r.status_code == 404, r.text


def test_a_client_key_may_not_label_and_is_told_so(hostile: Hostile) -> None:
    with hostile.client() as c:
        body = {"answer": ANSWER, "label": "supported"}
        r = c.post("/v1/groundproxy/feedback", headers=auth(key("ta")), json=body)
        assert r.status_code == 403, r.text
        message = r.json()["error"]["message"]
        assert "documents" not in message, message  # it said "may not manage documents"
        assert "may not label answers" in message and "admin key" in message, message
