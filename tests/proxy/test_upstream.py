"""The Upstream protocol: typed completions and deltas from one chunk parser, the litellm
client against the real fake-upstream server, and the in-process ``FakeUpstream`` driving
the real app in place of the litellm client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import structlog
import yaml

from groundproxy.errors import BadRequestError, UpstreamError
from groundproxy.policies.schema import UpstreamPolicy
from groundproxy.proxy.app import build_app
from groundproxy.proxy.deps import build_deps
from groundproxy.proxy.settings import Settings
from groundproxy.proxy.upstream.client import Upstream, UpstreamClient
from groundproxy.proxy.upstream.types import ChunkStream, Completion, collect, parse_chunk
from groundproxy.testing.clock import FakeClock
from groundproxy.testing.fake_upstream_client import FakeUpstream
from tests.conftest import KEYS, _policy, share_index_files

RULES = [{"match": "warranty", "answer": "The warranty lasts 12 months."}]
MESSAGES = [{"role": "user", "content": "How long is the warranty?"}]


def _chunk(choices: list[dict[str, Any]], **top: Any) -> dict[str, Any]:
    return {"id": "c-1", "created": 7, "model": "m", "choices": choices, **top}


async def _source(chunks: list[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
    for c in chunks:
        yield c


def _stream(chunks: list[dict[str, Any]]) -> ChunkStream:
    return ChunkStream(_source(chunks), lambda e: e, started=0.0)


async def test_one_parser_collects_text_tool_calls_logprobs_and_fingerprint() -> None:
    call = {"index": 0, "id": "call_1", "type": "function",
            "function": {"name": "get_", "arguments": '{"city": '}}  # fmt: skip
    chunks = [
        _chunk([{"index": 0, "delta": {"role": "assistant", "content": ""}}],
               system_fingerprint="fp_1"),
        _chunk([{"index": 0, "delta": {"content": "It is", "tool_calls": [call]},
                 "logprobs": {"content": [{"token": "It", "logprob": -0.1}]}}]),
        _chunk([{"index": 0, "delta": {"content": " warm.", "tool_calls": [
            {"index": 0, "function": {"name": "weather", "arguments": '"Paris"}'}}]}}]),
        _chunk([{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]),
        _chunk([], usage={"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}),
    ]  # fmt: skip
    answer = await collect(_stream(chunks))
    done = answer.completion
    assert answer.chunks == 5
    (choice,) = done.choices
    assert (choice.role, choice.content, choice.finish_reason) == (
        "assistant",
        "It is warm.",
        "tool_calls",
    )
    assert choice.tool_calls == [{"id": "call_1", "type": "function", "function": {
        "name": "get_weather", "arguments": '{"city": "Paris"}'}}]  # fmt: skip
    assert choice.logprobs == {"content": [{"token": "It", "logprob": -0.1}], "refusal": None}
    assert done.system_fingerprint == "fp_1" and done.usage and done.usage["total_tokens"] == 5
    # the body the client gets: id/created/model of the first chunk, the text, the tool
    # calls, the logprobs, the finish reason, the fingerprint, the usage
    assert answer.body == {
        "id": "c-1", "object": "chat.completion", "created": 7, "model": "m",
        "system_fingerprint": "fp_1",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "It is warm.",
                                             "tool_calls": choice.tool_calls},
                     # refusal: required by the spec (nullable), absent from the chunks
                     "logprobs": {"content": [{"token": "It", "logprob": -0.1}],
                                  "refusal": None},
                     "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }  # fmt: skip


async def test_the_parser_flattens_chunks_and_keeps_usage_alone() -> None:
    meta, deltas = parse_chunk(_chunk([], usage={"total_tokens": 1}))
    assert meta == {"id": "c-1", "created": 7, "model": "m"}
    assert len(deltas) == 1 and deltas[0].usage == {"total_tokens": 1}
    _, two = parse_chunk(_chunk([{"index": 1, "delta": {"content": "b"}},
                                 {"index": 0, "delta": {"content": "a"}}]))  # fmt: skip
    assert [(d.index, d.content) for d in two] == [(1, "b"), (0, "a")]


@pytest.mark.parametrize(
    "chunks",
    [
        [_chunk([{"index": 0, "delta": {"content": "half an answer"}}])],  # no finish_reason
        [_chunk([{"index": 0, "delta": {}, "finish_reason": "stop"}])],  # a finish and nothing
    ],
)
async def test_incomplete_streams_are_errors(chunks: list[dict[str, Any]]) -> None:
    with pytest.raises(UpstreamError) as err:
        await collect(_stream(chunks))
    assert err.value.code == "upstream_incomplete"


def test_a_plain_completion_is_parsed_and_kept_as_sent() -> None:
    body = {
        "id": "x", "created": 1, "model": "m", "system_fingerprint": "fp",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": None,
            "tool_calls": [{"id": "t", "type": "function",
                            "function": {"name": "f", "arguments": "{}"}}]}}],
    }  # fmt: skip
    done = Completion.from_body(body)
    assert done.body is body
    assert done.choices[0].content is None and done.choices[0].tool_calls
    assert done.system_fingerprint == "fp"


async def test_the_fake_follows_its_script_and_failure_models() -> None:
    fake: Upstream = FakeUpstream(RULES)
    policy = UpstreamPolicy(model="openai/gpt-4o-mini")
    plain = await fake.complete(policy, "openai/gpt-4o-mini", MESSAGES, {"seed": 1})
    streamed = await fake.complete(policy, "openai/gpt-4o-mini", MESSAGES, {}, stream=True)
    for answer in (plain, streamed):
        assert answer.completion.choices[0].content == "The warranty lasts 12 months."
        assert answer.body["model"] == "gpt-4o-mini"
    assert streamed.chunks > 3
    assert isinstance(fake, FakeUpstream)
    assert [(c.model, c.stream, c.extra) for c in fake.calls] == [
        ("openai/gpt-4o-mini", False, {"seed": 1}),
        # a streamed call asks for the usage whatever the client asked (metrics count it)
        ("openai/gpt-4o-mini", True, {"stream_options": {"include_usage": True}}),
    ]
    with pytest.raises(UpstreamError):
        await fake.complete(policy, "openai/fail-500", MESSAGES, {})
    with pytest.raises(BadRequestError):
        await fake.stream(policy, "openai/fail-400", MESSAGES, {})
    with pytest.raises(UpstreamError) as cut:
        await fake.complete(policy, "openai/cut-stream", MESSAGES, {}, stream=True)
    assert cut.value.code == "upstream_incomplete"


async def test_litellm_client_and_fake_give_the_same_answers(upstream_port: int) -> None:
    """The litellm client against the real fake-upstream server, the in-process fake
    without one: same typed answers, same errors (the script is conftest's)."""
    from tests.conftest import UPSTREAM_SCRIPT

    policy = UpstreamPolicy(model="openai/gpt-4o-mini", transport="litellm",
                            api_base=f"http://127.0.0.1:{upstream_port}/v1")  # fmt: skip
    real: Upstream = UpstreamClient()
    fake: Upstream = FakeUpstream(UPSTREAM_SCRIPT["rules"], UPSTREAM_SCRIPT["default"])
    for stream in (False, True):
        got = [await u.complete(policy, "openai/gpt-4o-mini", MESSAGES, {}, stream=stream)
               for u in (real, fake)]  # fmt: skip
        assert got[0].completion.choices[0].content == got[1].completion.choices[0].content
        assert got[0].body["choices"][0]["finish_reason"] == "stop"
    for u in (real, fake):
        with pytest.raises(UpstreamError) as err:
            await u.complete(policy, "openai/cut-stream", MESSAGES, {}, stream=True)
        assert err.value.code in ("upstream_incomplete", "upstream_error")
        opened = await u.stream(policy, "openai/gpt-4o-mini", MESSAGES, {})
        text = "".join([d.content async for d in opened])
        assert text == got[1].completion.choices[0].content


async def test_the_app_serves_through_an_injected_fake(tmp_path: Path, data_dir: Path) -> None:
    """The real app (lifespan, embedder, index, guard) with the fake in place of litellm:
    buffer mode and sentence streaming both run through the Upstream protocol."""
    structlog.reset_defaults()
    policies = tmp_path / "policies"
    policies.mkdir()
    for tenant, extra in (("acme", {}), ("sentence", {"stream": "sentence"})):
        pol = _policy(tenant, 9, retrieval={"index": "acme"}, **extra)  # port 9: never used
        (policies / f"{tenant}.yaml").write_text(yaml.safe_dump(pol), encoding="utf-8")
    share_index_files(policies)  # both tenants read acme's index
    settings = Settings(policies=policies, data=data_dir, watch_policies=False)
    fake = FakeUpstream([{"match": "warranty", "answer": "The warranty lasts 24 months."}])
    app = build_app(settings, build_deps(settings).replace(upstream=fake))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gp", timeout=60) as c:
            body = {"model": "gpt-4o-mini", "messages": MESSAGES}
            resp = await c.post(
                "/v1/chat/completions",
                json=body,
                headers={"authorization": f"Bearer {KEYS['acme']}"},
            )
            assert resp.status_code == 200, resp.text
            done = resp.json()
            assert done["groundproxy"]["claims"][0]["verdict"] == "contradicted"
            assert "12 months" in done["choices"][0]["message"]["content"]
            streamed = await c.post(
                "/v1/chat/completions",
                json={**body, "stream": True},
                headers={"authorization": f"Bearer {KEYS['sentence']}"},
            )
            assert streamed.status_code == 200
            assert streamed.text.rstrip().endswith("data: [DONE]")
            assert "12 months" in streamed.text
    assert [c.stream for c in fake.calls] == [False, True]
    assert fake.calls[0].model == "openai/gpt-4o-mini"


async def test_deps_are_replaced_whole_upstream_and_clock(tmp_path: Path, data_dir: Path) -> None:
    """build_app(settings, deps): the injected upstream answers and the injected clock
    times the guard (each clock read moves it 0.25 s: the guard's latency is 250 ms)."""
    structlog.reset_defaults()
    policies = tmp_path / "policies"
    policies.mkdir()
    pol = _policy("acme", 9, retrieval={"index": "acme"})  # port 9: never used
    (policies / "acme.yaml").write_text(yaml.safe_dump(pol), encoding="utf-8")
    settings = Settings(policies=policies, data=data_dir, watch_policies=False)
    fake = FakeUpstream(RULES)
    clock = FakeClock(step=0.25)
    deps = build_deps(settings).replace(upstream=fake, clock=clock)
    app = build_app(settings, deps)
    assert app.state.gp.metrics is deps.metrics  # one metrics object: the guard's and /metrics
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gp", timeout=60) as c:
            resp = await c.post(
                "/v1/chat/completions",
                json={"model": "gpt-4o-mini", "messages": MESSAGES},
                headers={"authorization": f"Bearer {KEYS['acme']}"},
            )
    assert resp.status_code == 200, resp.text
    assert resp.headers["x-groundproxy-latency-ms"] == "250"
    assert resp.json()["groundproxy"]["latency_ms"] == 250.0
    assert clock.reads == 2
    assert [c.model for c in fake.calls] == ["openai/gpt-4o-mini"]
