"""What a client sends is bounded and what is stored holds no control characters (issue 32,
item 5), through the real server: a reviewer's label (its context's count and length, its
texts, a boolean or a conflicting label), and nothing refused is stored."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.hostile.conftest import Hostile, admin_key, auth

pytestmark = pytest.mark.slow

GOOD = {"answer": "The warranty is 12 months.", "question": "Warranty?", "label": "supported"}


def _refused(r: httpx.Response, param: str, status: int = 400) -> None:
    assert r.status_code == status, r.text[:300]
    assert r.json()["error"]["param"] == param, r.text[:300]


def test_feedback_is_bounded_typed_and_printable(hostile: Hostile) -> None:
    admin = auth(admin_key("ta"))
    with hostile.client() as c:

        def post(**change: Any) -> httpx.Response:
            return c.post("/v1/groundproxy/feedback", headers=admin, json={**GOOD, **change})

        first = post()
        assert first.status_code == 200, first.text
        count = first.json()["count"]
        cases: list[tuple[dict[str, Any], str]] = [
            ({"context": ["x" * 200_000] * 3}, "context.0"),  # 3 × 200 kB
            ({"context": [""] * 50_000}, "context"),  # 50,000 items
            ({"context": ["fine", 5]}, "context.1"),
            ({"label_hallucinated": True, "label": None}, "label_hallucinated"),
            ({"label_hallucinated": 1.0, "label": None}, "label_hallucinated"),
            ({"label_hallucinated": 1}, "label"),  # says the opposite of label: supported
            ({"label": "maybe"}, "label"),
            ({"answer": "The warranty\x00 is 12 months."}, "answer"),
            ({"question": "Warranty\u202e?"}, "question"),
            ({"context": ["ok", "evil \u2066 isolate"]}, "context.1"),
            ({"claims": [{"text": "A\x07B", "label": "supported"}]}, "claims.0.text"),
            ({"claims": [{"text": "x", "label": "supported"}] * 201}, "claims"),
            ({"answer": "x" * 100_001}, "answer"),
            ({"request_id": "rid\x00", "answer": None}, "request_id"),
            ({"step_id": "st_" + "g" * 16, "answer": None}, "step_id"),
            ({"extra": 1}, "extra"),
        ]
        for change, param in cases:
            _refused(post(**change), param)
        agreeing = post(label="hallucinated", label_hallucinated=1)
        assert agreeing.status_code == 200, agreeing.text
        assert agreeing.json()["count"] == count + 1  # nothing refused was stored
        assert agreeing.json()["label_hallucinated"] == 1
