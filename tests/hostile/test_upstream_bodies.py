"""A malformed 200 from the upstream is the upstream's error (issue 32, item 3): 502
``upstream_invalid`` naming the field — never a 500, never a clean answer — through the real
server, for chat (plain, buffered stream, sentence stream, unguarded), ``/v1/responses``,
``/v1/completions`` and ``/v1/embeddings``. The scripted upstream answers each odd body to
the request whose text names it (``tests/hostile/conftest.py``)."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.hostile.conftest import Hostile, auth, key

pytestmark = pytest.mark.slow

CHAT_ODD = {  # scripted body → the field the error must name
    "odd-message-string": "choices.0.message",
    "odd-usage-strings": "usage.prompt_tokens",
    "odd-toolcalls-string": "choices.0.message.tool_calls",
    "odd-created-string": "created",
    "odd-usage-nan": "usage.total_tokens",
}
STREAM_ODD = {"odd-delta-string": "choices.0.delta", "odd-chunk-usage": "usage.prompt_tokens"}


def _invalid(r: httpx.Response, field: str | None) -> None:
    """A 502 upstream_invalid naming ``field``, or (a stream already begun) its SSE error."""
    assert r.status_code != 500 and "internal_error" not in r.text, r.text[:400]
    if r.status_code == 200:  # a sentence stream: the error is its last event before [DONE]
        events = [line[6:] for line in r.text.splitlines() if line.startswith("data: {")]
        err = json.loads(events[-1])["error"]
    else:
        assert r.status_code == 502, r.text[:400]
        err = r.json()["error"]
    assert err["code"] == "upstream_invalid", err
    assert field is None or f"'{field}'" in err["message"], err


def test_malformed_chat_bodies_are_502(hostile: Hostile) -> None:
    with hostile.client() as c:
        for text, field in CHAT_ODD.items():
            messages = [{"role": "user", "content": text}]
            for tenant in ("ta", "tr"):
                r = c.post(
                    "/v1/chat/completions",
                    headers=auth(key(tenant)),
                    json={"model": "gpt-4o-mini", "messages": messages},
                )
                _invalid(r, field)
            for stream in (False, True):
                r = c.post(
                    "/v1/responses",
                    headers=auth(key("ta")),
                    json={"model": "gpt-4o-mini", "input": text, "stream": stream},
                )
                _invalid(r, field)


def test_malformed_stream_chunks_are_upstream_errors(hostile: Hostile) -> None:
    with hostile.client() as c:
        for text, field in STREAM_ODD.items():
            for tenant in ("ta", "ts", "tr"):  # buffered, sentence, relayed
                r = c.post(
                    "/v1/chat/completions",
                    headers=auth(key(tenant)),
                    json={
                        "model": "gpt-4o-mini",
                        "stream": True,
                        "messages": [{"role": "user", "content": text}],
                    },
                )
                _invalid(r, field)


def test_malformed_embeddings_and_text_completions_are_502(hostile: Hostile) -> None:
    with hostile.client() as c:
        for text, field in (
            ("odd-embedding-nan", "data.0.embedding.1"),
            ("odd-embedding-string-list", "data.0.embedding.0"),
        ):
            r = c.post(
                "/v1/embeddings",
                headers=auth(key("ta")),
                json={"model": "text-embedding-3-small", "input": text},
            )
            _invalid(r, field)
        cases: tuple[tuple[str, str | None], ...] = (
            ("odd-text-nan", "choices.0.logprobs.token_logprobs.0"),
            ("odd-text-choice-string", "choices.0"),
            ("odd-message-string", None),  # a chat model: litellm asks for a chat completion
        )
        for text, where in cases:
            for stream in (False, True):
                r = c.post(
                    "/v1/completions",
                    headers=auth(key("ta")),
                    json={
                        "model": "gpt-4o-mini" if where is None else "instruct",
                        "prompt": text,
                        "stream": stream,
                    },
                )
                _invalid(r, where)
