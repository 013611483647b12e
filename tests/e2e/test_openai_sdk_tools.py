"""End to end with the official ``openai`` SDK against the real ``groundproxy serve``
process and the fake upstream process: tool calls (streamed and not, guard on and off, every
stream mode, the SDK's ``.stream()`` helper), JSON mode and ``json_schema`` through
``.parse()``, logprobs and ``include_usage``; raw bodies validate against OpenAI's spec —
each through both upstream transports (litellm, and the direct OpenAI wire)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam
from pydantic import BaseModel

from tests.api.test_openai_shapes import RULES, WEATHER_ARGS
from tests.conftest import KEYS
from tests.e2e.three_tenants import three_tenant_server
from tests.spec_check import check

pytestmark = pytest.mark.slow
TENANTS = ("acme", "sentence", "loose")  # buffer, sentence, guard off (relay)
TOOLS: list[Any] = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    for name in ("get_weather", "get_time")
]
ASK_WEATHER: list[ChatCompletionMessageParam] = [
    {"role": "user", "content": "What is the weather in Paris?"}
]
ASK_JSON: list[ChatCompletionMessageParam] = [
    {"role": "user", "content": "Answer as json: the warranty?"}
]


class Warranty(BaseModel):
    product: str
    warranty: str
    months: int


@pytest.fixture(scope="module", params=["litellm", "openai"])
def base_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, data_dir: Path
) -> Iterator[str]:
    """Every test runs through both upstream transports: litellm, and the direct
    OpenAI-wire client (``upstream.transport: openai``)."""
    work = tmp_path_factory.mktemp(f"sdk-tools-{request.param}")
    with three_tenant_server(work, data_dir, RULES, upstream={"transport": request.param}) as url:
        yield url


def client(base_url: str, tenant: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url, api_key=KEYS[tenant], max_retries=0, timeout=60)


def _calls(message: Any) -> list[tuple[str, str]]:
    return [(c.function.name, c.function.arguments) for c in message.tool_calls or []]


EXPECTED = [("get_weather", WEATHER_ARGS), ("get_time", '{"tz": "Europe/Paris"}')]


@pytest.mark.parametrize("tenant", TENANTS)
def test_tool_calls_non_streamed_and_streamed(base_url: str, tenant: str) -> None:
    c = client(base_url, tenant)
    raw = c.chat.completions.with_raw_response.create(
        model="gpt-4o-mini",
        messages=ASK_WEATHER,
        tools=TOOLS,
    )
    check("CreateChatCompletionResponse", raw.http_response.json())
    done = raw.parse()
    assert done.choices[0].finish_reason == "tool_calls"
    assert _calls(done.choices[0].message) == EXPECTED
    assert done.system_fingerprint == "fp_fake"
    # the SDK's stream helper folds the tool-call deltas back into whole calls
    with c.chat.completions.stream(
        model="gpt-4o-mini",
        messages=ASK_WEATHER,
        tools=TOOLS,
    ) as stream:
        events = [e.type for e in stream]
        final = stream.get_final_completion()
    assert _calls(final.choices[0].message) == EXPECTED
    assert final.choices[0].finish_reason == "tool_calls"
    assert "tool_calls.function.arguments.done" in events
    assert (final.choices[0].message.content or "").startswith("Let me look that up")
    # plain create(stream=True): deltas in order with their indices
    chunks = list(c.chat.completions.create(
        model="gpt-4o-mini", messages=ASK_WEATHER, tools=TOOLS, stream=True
    ))  # fmt: skip
    indices = [t.index for ch in chunks for t in (ch.choices[0].delta.tool_calls or [])
               if ch.choices]  # fmt: skip
    assert indices == sorted(indices) and set(indices) == {0, 1}


@pytest.mark.parametrize("tenant", TENANTS)
def test_json_schema_and_json_mode_parse(base_url: str, tenant: str) -> None:
    c = client(base_url, tenant)
    parsed = c.chat.completions.parse(
        model="gpt-4o-mini",
        messages=ASK_JSON,
        response_format=Warranty,
    )
    got = parsed.choices[0].message.parsed
    assert got is not None and got.product == "Acme vacuum robot"
    gp = (parsed.model_extra or {}).get("groundproxy") or {}
    months = 24 if tenant == "loose" else 12  # the number is a claim too, corrected in place
    assert got.months == months
    if tenant != "loose":
        assert "24 months" not in got.warranty  # the contradicted value corrected in place
        assert any(cl["verdict"] == "contradicted" for cl in gp["claims"])
    with c.chat.completions.stream(
        model="gpt-4o-mini",
        messages=ASK_JSON,
        response_format=Warranty,
    ) as stream:
        final = stream.get_final_completion()
    assert final.choices[0].message.parsed == got
    plain = c.chat.completions.create(
        model="gpt-4o-mini", messages=ASK_JSON, response_format={"type": "json_object"}
    )
    assert json.loads(plain.choices[0].message.content or "")["months"] == months


@pytest.mark.parametrize("tenant", TENANTS)
def test_include_usage_and_logprobs(base_url: str, tenant: str) -> None:
    c = client(base_url, tenant)
    ask: list[ChatCompletionMessageParam] = [
        {"role": "user", "content": "How long is the warranty?"}
    ]
    chunks = list(c.chat.completions.create(
        model="gpt-4o-mini", messages=ask, stream=True,
        stream_options={"include_usage": True}, logprobs=True,
    ))  # fmt: skip
    assert chunks[-1].choices == [] and chunks[-1].usage and chunks[-1].usage.total_tokens > 0
    assert all(ch.usage is None for ch in chunks[:-1])
    done = c.chat.completions.create(
        model="gpt-4o-mini",
        messages=ask,
        logprobs=True,
    )
    logprobs = done.choices[0].logprobs
    if tenant == "loose":  # untouched answer: its logprobs describe its tokens
        assert logprobs and logprobs.content
        text = "".join(t.token for t in logprobs.content)
        assert text == done.choices[0].message.content
        assert "".join(t.token for ch in chunks if ch.choices and ch.choices[0].logprobs
                       for t in ch.choices[0].logprobs.content or []) == text  # fmt: skip
    else:  # rewritten: the logprobs described replaced tokens, dropped with a note
        gp = (done.model_extra or {})["groundproxy"]
        assert logprobs is None and gp["notes"]


@pytest.mark.parametrize("tenant", TENANTS)
def test_upstream_failures_are_openai_errors(base_url: str, tenant: str) -> None:
    """An upstream 500 / 400 / non-JSON body / stream cut short reach the SDK as the same
    OpenAI errors whichever transport carried the call."""
    c = client(base_url, tenant)
    ask: list[ChatCompletionMessageParam] = [{"role": "user", "content": "hi"}]
    with pytest.raises(openai.InternalServerError) as err:
        c.chat.completions.create(model="fail-500", messages=ask)
    assert err.value.status_code == 502 and "upstream exploded" in str(err.value)
    with pytest.raises(openai.BadRequestError):
        c.chat.completions.create(model="fail-400", messages=ask, stream=True)
    with pytest.raises(openai.InternalServerError) as err:
        c.chat.completions.create(model="bad-json", messages=ask)
    assert err.value.status_code == 502
    with pytest.raises(openai.APIError) as cut:
        list(c.chat.completions.create(model="cut-stream", messages=ask, stream=True))
    assert "incomplete" in str(cut.value) or "finish_reason" in str(cut.value)
