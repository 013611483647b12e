"""Every route's body is checked by its model before it is used (issue 32, item 2): a wrong
type is a 400 naming the field — never a 500 (``/v1/responses`` with ``"tools": 5`` was one),
never forwarded (``instructions: 5`` and ``max_output_tokens: "lots"`` were accepted) —
through the real server; a well-formed body still passes."""

from __future__ import annotations

from typing import Any

import pytest

from tests.hostile.conftest import Hostile, admin_key, auth, key

pytestmark = pytest.mark.slow

CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "the warranty?"}]}
RESPONSES = {"model": "gpt-4o-mini", "input": "the warranty?"}
COMPLETIONS = {"model": "gpt-4o-mini", "prompt": "the warranty?"}
EMBEDDINGS = {"model": "text-embedding-3-small", "input": "warranty"}
CHECK = {"answer": "The warranty is 12 months.", "question": "Warranty?"}
DOCS = {"documents": [{"id": "v.md", "text": "The warranty is 12 months."}]}

# (route, valid body, change, the field the 400 must name)
CASES: list[tuple[str, dict[str, Any], dict[str, Any], str]] = [
    ("/v1/responses", RESPONSES, {"tools": 5}, "tools"),
    ("/v1/responses", RESPONSES, {"tools": True}, "tools"),
    ("/v1/responses", RESPONSES, {"tools": 2}, "tools"),
    ("/v1/responses", RESPONSES, {"tools": [5]}, "tools.0"),
    ("/v1/responses", RESPONSES, {"instructions": 5}, "instructions"),
    ("/v1/responses", RESPONSES, {"max_output_tokens": "lots"}, "max_output_tokens"),
    ("/v1/responses", RESPONSES, {"input": [{"role": 5, "content": "x"}]}, "input.0.role"),
    ("/v1/responses", RESPONSES, {"input": 7}, "input"),
    ("/v1/responses", RESPONSES, {"text": {"format": {"type": "xml"}}}, "text.format.type"),
    ("/v1/responses", RESPONSES, {"temperature": 3}, "temperature"),
    ("/v1/responses", RESPONSES, {"stream": "yes"}, "stream"),
    ("/v1/responses", {"input": "x"}, {}, "model"),
    ("/v1/chat/completions", CHAT, {"n": "2"}, "n"),
    ("/v1/chat/completions", CHAT, {"stream_options": [1]}, "stream_options"),
    ("/v1/chat/completions", CHAT, {"tools": "x"}, "tools"),
    ("/v1/chat/completions", CHAT, {"logprobs": 1}, "logprobs"),
    ("/v1/chat/completions", CHAT, {"model": "gpt\x00"}, "model"),
    ("/v1/chat/completions", CHAT, {"model": "m" * 257}, "model"),
    ("/v1/chat/completions", CHAT, {"metadata": {str(i): "v" for i in range(17)}}, "metadata"),
    ("/v1/completions", COMPLETIONS, {"logprobs": True}, "logprobs"),
    ("/v1/completions", COMPLETIONS, {"max_tokens": "x"}, "max_tokens"),
    ("/v1/completions", COMPLETIONS, {"stream_options": "x"}, "stream_options"),
    ("/v1/embeddings", EMBEDDINGS, {"input": 5}, "input"),
    ("/v1/embeddings", EMBEDDINGS, {"encoding_format": "hex"}, "encoding_format"),
    ("/v1/embeddings", EMBEDDINGS, {"dimensions": 0}, "dimensions"),
    ("/v1/groundproxy/check", CHECK, {"context": ["x"] * 65}, "context"),
    ("/v1/groundproxy/check", CHECK, {"model": "a\u202eb"}, "model"),
    ("/v1/groundproxy/check", CHECK, {"answer": "The\x00 warranty."}, "answer"),
    ("/v1/groundproxy/documents", DOCS, {"documents": [{"id": "n.md", "text": "a\x00b"}]},
     "documents.0.text"),
]  # fmt: skip


def test_each_route_names_the_bad_field(hostile: Hostile) -> None:
    with hostile.client() as c:
        for path, body, change, param in CASES:
            token = admin_key("ta") if "documents" in path else key("ta")
            r = c.post(path, headers=auth(token), json={**body, **change})
            assert r.status_code == 400, (path, change, r.status_code, r.text[:300])
            assert r.json()["error"]["param"] == param, (path, change, r.text[:300])
        for path, body in (
            ("/v1/responses", {**RESPONSES, "tools": [], "instructions": "Be brief.",
                               "max_output_tokens": 64, "metadata": {"a": "b"}}),
            ("/v1/chat/completions", {**CHAT, "n": 2, "stream_options": None, "logprobs": True}),
            ("/v1/completions", {**COMPLETIONS, "max_tokens": 16, "logprobs": 0}),
            ("/v1/embeddings", {**EMBEDDINGS, "input": [[1, 2], [3]], "encoding_format": "float"}),
            ("/v1/groundproxy/check", {**CHECK, "context": ["12 months."], "model": "m-1"}),
        ):  # fmt: skip
            r = c.post(path, headers=auth(key("ta")), json=body)
            assert r.status_code == 200, (path, r.text[:300])
