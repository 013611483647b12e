"""The upstream body checks (proxy.openai.upstream_bodies): each field the proxy reads has its
OpenAI type, nothing is non-finite, and the error names the field, never the value."""

from __future__ import annotations

import math
from typing import Any

import pytest

from groundproxy.errors import UpstreamError
from groundproxy.proxy.openai.upstream_bodies import (
    chat_body,
    chunk_body,
    embeddings_body,
    text_body,
)
from groundproxy.testing.fake_bodies import completion_body, embedding_body, text_completion_body


def _error(check: Any, body: Any) -> str:
    with pytest.raises(UpstreamError) as caught:
        check(body)
    assert caught.value.code == "upstream_invalid"
    return caught.value.message


def test_well_formed_bodies_pass_as_they_are() -> None:
    chat = completion_body("The warranty is 12 months.", "m", logprobs=True)
    assert chat_body(chat) is chat
    text = text_completion_body("x", "m")
    assert text_body(text) is text
    for fmt in (None, "base64"):
        emb = embedding_body(["a", "b"], "m", fmt)
        assert embeddings_body(emb) is emb
    chunk = {"id": "c", "choices": [{"index": 0, "delta": {"content": "x"}}], "extra": [1]}
    assert chunk_body(chunk) is chunk


def test_each_field_read_has_its_type() -> None:
    good = completion_body("The warranty is 12 months.", "m")
    cases = {
        "'choices.0.message'": {**good, "choices": [{"index": 0, "message": "text"}]},
        "'created'": {**good, "created": "yesterday"},
        "'usage.prompt_tokens'": {**good, "usage": {"prompt_tokens": "12"}},
        "'choices'": {**good, "choices": "none"},
        "'(body)'": [good],
    }
    for field, body in cases.items():
        assert field in _error(chat_body, body), field
    message = _error(embeddings_body, {"data": [{"embedding": ["0.1"]}]})
    assert "'data.0.embedding.0'" in message and "list[float]" not in message


def test_non_finite_and_surrogates_anywhere() -> None:
    good = completion_body("x", "m")
    assert "'usage.total_tokens'" in _error(
        chat_body, {**good, "usage": {"total_tokens": math.nan}}
    )
    assert "'anything.0'" in _error(chat_body, {**good, "anything": [math.inf]})
    assert "surrogate" in _error(chat_body, {**good, "id": "a\ud800"})


def test_a_missing_field_is_named() -> None:
    assert "'data': Field required" in _error(embeddings_body, {"object": "list"})
    assert "'(body)'" in _error(chat_body, [])
