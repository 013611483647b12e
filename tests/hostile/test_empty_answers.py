"""An answer without claims is reported as such (issue 32, item 6), through the real
server: trust ``null`` in the body and ``n/a`` in ``x-groundproxy-trust``, action ``none`` —
an empty completion, a tool call alone, ``/check`` of an empty answer, in every stream mode;
a completion without any choice is the upstream's error (502 ``upstream_invalid``)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.hostile.conftest import Hostile, auth, key

pytestmark = pytest.mark.slow


def _no_claims(gp: dict[str, Any], headers: httpx.Headers | None) -> None:
    assert gp["trust"] is None and gp["action"] == "none" and gp["claims"] == [], gp
    assert gp["unverified"] is False, gp
    if headers is not None:
        assert headers["x-groundproxy-trust"] == "n/a", dict(headers)
        assert headers["x-groundproxy-action"] == "none"
        assert headers["x-groundproxy-claims"].startswith("total=0")


def _last_groundproxy(r: httpx.Response) -> dict[str, Any]:
    events = [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: {")]
    found = [e["groundproxy"] for e in events if "groundproxy" in e]
    assert found, r.text[:400]
    return dict(found[-1])


def test_answers_without_claims_say_so(hostile: Hostile) -> None:
    with hostile.client() as c:
        for text in ("empty-answer", "weather"):
            chat = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}]}
            r = c.post("/v1/chat/completions", headers=auth(key("ta")), json=chat)
            assert r.status_code == 200, r.text
            _no_claims(r.json()["groundproxy"], r.headers)
            for tenant in ("ta", "ts"):  # a buffered stream, a sentence stream
                r = c.post(
                    "/v1/chat/completions",
                    headers=auth(key(tenant)),
                    json={**chat, "stream": True},
                )
                assert r.status_code == 200, r.text
                _no_claims(_last_groundproxy(r), r.headers if tenant == "ta" else None)
        r = c.post(
            "/v1/responses",
            headers=auth(key("ta")),
            json={"model": "gpt-4o-mini", "input": "empty-answer"},
        )
        assert r.status_code == 200, r.text
        _no_claims(r.json()["groundproxy"], r.headers)
        r = c.post("/v1/groundproxy/check", headers=auth(key("ta")), json={"answer": ""})
        assert r.status_code == 200, r.text
        _no_claims(r.json()["groundproxy"], r.headers)
        assert r.json()["action"] == "none"


def test_a_completion_without_choices_is_the_upstreams_error(hostile: Hostile) -> None:
    with hostile.client() as c:
        chat = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "odd-no-choices"}]}
        for path, body in (
            ("/v1/chat/completions", chat),
            ("/v1/responses", {"model": "gpt-4o-mini", "input": "odd-no-choices"}),
        ):
            r = c.post(path, headers=auth(key("ta")), json=body)
            assert r.status_code == 502, r.text
            assert r.json()["error"]["code"] == "upstream_invalid", r.text
