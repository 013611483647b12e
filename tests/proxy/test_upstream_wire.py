"""``upstream.transport: openai``: the direct OpenAI-wire client against the real fake-upstream
server process, side by side with the litellm client on the same calls — same answers, same
error codes, retry-after kept, keys redacted, bodies and headers forwarded as sent."""

from __future__ import annotations

import os
import time
from typing import Any

import httpx
import pytest

from groundproxy.errors import GroundproxyError, NotFoundError, UpstreamError
from groundproxy.policies.schema import UpstreamPolicy
from groundproxy.proxy.errors import http_error
from groundproxy.proxy.forwarding import _FORWARDED
from groundproxy.proxy.upstream.client import UpstreamClient
from groundproxy.proxy.upstream.wire import status_error, wire_model
from groundproxy.testing.processes import free_port

MESSAGES = [{"role": "user", "content": "How long is the warranty?"}]
TRANSPORTS = ("litellm", "openai")


def _policy(port: int, transport: str, **kw: Any) -> UpstreamPolicy:
    return UpstreamPolicy(model="openai/gpt-4o-mini", api_base=f"http://127.0.0.1:{port}/v1",
                          transport=transport, **kw)  # fmt: skip


async def _error(client: UpstreamClient, policy: UpstreamPolicy, model: str, stream: bool
                 ) -> GroundproxyError:  # fmt: skip
    with pytest.raises(GroundproxyError) as err:
        if stream:
            opened = await client.stream(policy, f"openai/{model}", MESSAGES, {})
            async for _ in opened:
                pass
        else:
            await client.complete(policy, f"openai/{model}", MESSAGES, {})
    return err.value


async def test_wire_and_litellm_give_the_same_answers(upstream_port: int) -> None:
    client = UpstreamClient()
    try:
        got = {}
        for transport in TRANSPORTS:
            policy = _policy(upstream_port, transport)
            plain = await client.complete(policy, "openai/gpt-4o-mini", MESSAGES, {"seed": 3})
            collected = await client.complete(policy, "openai/gpt-4o-mini", MESSAGES, {},
                                              stream=True)  # fmt: skip
            opened = await client.stream(policy, "openai/gpt-4o-mini", MESSAGES,
                                         {"stream_options": {"include_usage": True}})  # fmt: skip
            deltas = [d async for d in opened]
            got[transport] = (
                plain.completion.choices[0].content,
                plain.body["choices"][0]["finish_reason"],
                collected.completion.choices[0].content,
                "".join(d.content for d in deltas),
                any(d.usage for d in deltas),
            )
            assert plain.body["model"] == "gpt-4o-mini"  # the openai/ prefix never travels
        assert got["openai"] == got["litellm"]
        assert got["openai"][0] and got["openai"][0] == got["openai"][3]
        assert got["openai"][4]  # include_usage: the usage chunk came through
    finally:
        await client.aclose()


@pytest.mark.parametrize(
    ("model", "stream", "status", "code"),
    [
        ("fail-500", False, 502, "upstream_error"),
        ("fail-400", False, 400, None),
        ("fail-400", True, 400, None),
        ("fail-429", False, 429, "rate_limited"),
        ("fail-503", True, 503, "upstream_unavailable"),
        ("huge-error", False, 503, "upstream_unavailable"),
        ("cut-stream", True, 502, "upstream_incomplete"),
        ("bad-json", False, 502, None),
    ],
)
async def test_wire_errors_map_like_litellm(
    upstream_port: int, model: str, stream: bool, status: int, code: str | None
) -> None:
    client = UpstreamClient()
    try:
        errors = {t: await _error(client, _policy(upstream_port, t), model, stream)
                  for t in TRANSPORTS}  # fmt: skip
    finally:
        await client.aclose()
    wire, lite = errors["openai"], errors["litellm"]
    w, li = http_error(wire), http_error(lite)
    assert w.status == li.status == status, (wire.message, lite.message)
    if code is not None:
        assert w.code == li.code == code
    assert wire.retry_after == lite.retry_after
    if model in ("fail-429", "fail-503", "huge-error"):
        assert wire.retry_after == "7"
    if model == "fail-500":
        assert "upstream exploded" in wire.message
    if model == "huge-error":
        assert len(wire.message) < 600 and wire.message.startswith("The upstream model")


async def test_wire_timeout_unreachable_and_key_redaction(upstream_port: int) -> None:
    client = UpstreamClient()
    os.environ["GP_WIRE_TEST_KEY"] = "sk-wire-secret-0123456789abcdef"
    try:
        slow = _policy(upstream_port, "openai", timeout_s=0.5)
        t = time.perf_counter()
        err = await _error(client, slow, "slow-3", False)
        assert http_error(err)[::2] == (504, "upstream_timeout")
        assert time.perf_counter() - t < 2.5
        dead = UpstreamPolicy(model="openai/m", api_base=f"http://127.0.0.1:{free_port()}/v1",
                              transport="openai")  # fmt: skip
        err = await _error(client, dead, "m", False)
        assert http_error(err)[::2] == (502, "upstream_unreachable")
        keyed = _policy(upstream_port, "openai", api_key_env="GP_WIRE_TEST_KEY")
        err = await _error(client, keyed, "echo-key", False)
        assert http_error(err).status == 401 and "HTTP 401" in err.message
        assert "sk-wire-secret" not in err.message
    finally:
        del os.environ["GP_WIRE_TEST_KEY"]
        await client.aclose()


async def test_wire_forwards_the_body_and_headers_as_sent(upstream_port: int) -> None:
    client = UpstreamClient()
    os.environ["GP_WIRE_TEST_KEY"] = "sk-wire-forward-key"
    token = _FORWARDED.set({"x-request-id": "req-wire-1", "x-team": "blue"})
    extra = {"response_format": {"type": "json_object"}, "top_k": 5, "metadata": {"a": "b"},
             "temperature": 0}  # fmt: skip
    try:
        policy = _policy(upstream_port, "openai", api_key_env="GP_WIRE_TEST_KEY")
        await client.complete(policy, "openai/gpt-4o-mini", MESSAGES, extra)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{upstream_port}") as http:
            body = (await http.get("/_last")).json()
            headers = (await http.get("/_last_headers")).json()
    finally:
        _FORWARDED.reset(token)
        del os.environ["GP_WIRE_TEST_KEY"]
        await client.aclose()
    assert body == {**extra, "model": "gpt-4o-mini", "messages": MESSAGES}
    assert headers["authorization"] == "Bearer sk-wire-forward-key"
    assert headers["x-request-id"] == "req-wire-1" and headers["x-team"] == "blue"


async def test_wire_embeddings_and_text_completions(upstream_port: int) -> None:
    client = UpstreamClient()
    try:
        bodies = {}
        for transport in TRANSPORTS:
            policy = _policy(upstream_port, transport)
            emb, _ = await client.embed(policy, "openai/emb-1", ["a", "b"], {})
            text, _ = await client.text_complete(
                policy, "text-completion-openai/gpt-x", "The warranty?", {"max_tokens": 5}
            )
            bodies[transport] = (
                [len(d["embedding"]) for d in emb["data"]],
                text["choices"][0]["text"],
            )
        assert bodies["openai"] == bodies["litellm"]
        assert bodies["openai"][0] == [len(bodies["openai"][0]) and bodies["openai"][0][0]] * 2
    finally:
        await client.aclose()


def test_status_mapping_and_model_names() -> None:
    assert wire_model("openai/gpt-4o") == "gpt-4o"
    assert wire_model("text-completion-openai/gpt-3.5") == "gpt-3.5"
    assert wire_model("llama3") == "llama3"
    body = b'{"error": {"message": "no such model.", "code": "model_not_found"}}'
    err = status_error(404, body, httpx.Headers())
    assert isinstance(err, NotFoundError)  # a 4xx keeps its status (and a plain code)
    assert (http_error(err).status, http_error(err).code, err.message) == (
        404, "model_not_found", "The upstream model provider answered HTTP 404: no such model.",
    )  # fmt: skip
    err = status_error(500, b'{"error": {"message": "boom"}}', httpx.Headers())
    assert isinstance(err, UpstreamError) and http_error(err).status == 502
    plain = status_error(429, b"slow down", httpx.Headers({"retry-after": " 3 "}))
    assert (http_error(plain).status, plain.retry_after) == (429, "3")
    assert "slow down" in plain.message
