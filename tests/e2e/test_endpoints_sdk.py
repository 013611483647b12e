"""End to end, issue 12 items 4-6: the real ``groundproxy serve`` process and the fake
upstream process, driven by the official ``openai`` SDK: the Responses API (streamed and
not), legacy completions, embeddings, models, the routes without ``/v1``, upstream errors
with their SDK classes and ``retry-after``, what reaches the upstream, and the JSON log."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import yaml

from groundproxy.testing.processes import free_port, start_proxy, stop_process
from tests.conftest import KEYS, _policy, share_index
from tests.spec_check import check, check_exchange, sse_events

pytestmark = pytest.mark.slow
MODELS = {
    "gpt-4o-mini": "openai/gpt-4o-mini",
    "gpt-3.5-turbo-instruct": "text-completion-openai/gpt-3.5-turbo-instruct",
    "fail-429": "openai/fail-429",
    "fail-503": "openai/fail-503",
    "fail-500": "openai/fail-500",
}
QUESTION = "How long is the warranty?"


@pytest.fixture(scope="module")
def proxy(
    data_dir: Path, upstream_port: int, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Path]]:
    policies = tmp_path_factory.mktemp("endpoint-policies")
    specs: dict[str, dict[str, Any]] = {
        "acme": _policy("acme", upstream_port, upstream={"models": MODELS}),
        "sentence": _policy(
            "sentence",
            upstream_port,
            retrieval={"index": "acme"},
            stream="sentence",
            upstream={"models": MODELS},
        ),
        # nothing listens on port 9: the upstream is unreachable
        "hasty": _policy("hasty", 9, upstream={"models": MODELS}),
    }
    share_index(specs)
    for tenant, spec in specs.items():
        (policies / f"{tenant}.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    log = tmp_path_factory.mktemp("endpoint-log") / "proxy.log"
    port = free_port()
    env = {"GROUNDPROXY_FORWARD_HEADERS": "x-trace-tag, Authorization"}
    proc: subprocess.Popen[bytes] = start_proxy(port, policies, data_dir, env=env, log_path=log)
    try:
        yield f"http://127.0.0.1:{port}", log
    finally:
        stop_process(proc)


def sdk(proxy: tuple[str, Path], tenant: str = "acme", v1: bool = True) -> openai.OpenAI:
    base = proxy[0] + ("/v1" if v1 else "")
    return openai.OpenAI(base_url=base, api_key=KEYS[tenant], max_retries=0, timeout=60)


def last_upstream(port: int, what: str = "_last") -> dict[str, Any]:
    got: dict[str, Any] = httpx.get(f"http://127.0.0.1:{port}/{what}", timeout=5).json()
    return got


def test_responses_api_is_guarded(proxy: tuple[str, Path]) -> None:
    raw = sdk(proxy).responses.with_raw_response.create(
        model="gpt-4o-mini", input=QUESTION, instructions="Answer briefly."
    )
    assert raw.headers["x-groundproxy-action"] == "rewrite"
    response = raw.parse()
    assert response.status == "completed" and response.object == "response"
    assert "12 months" in response.output_text and "24 months" not in response.output_text
    gp = (response.model_extra or {})["groundproxy"]
    wrong = next(c for c in gp["claims"] if "24 months" in c["text"])
    assert wrong["verdict"] == "contradicted"
    assert response.usage is not None and response.usage.total_tokens > 0


def test_responses_api_streamed_events(proxy: tuple[str, Path]) -> None:
    stream = sdk(proxy).responses.create(model="gpt-4o-mini", input=QUESTION, stream=True)
    events = list(stream)
    kinds = [e.type for e in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    text = "".join(
        getattr(e, "delta", "") for e in events if e.type == "response.output_text.delta"
    )
    assert "12 months" in text and "24 months" not in text
    final = getattr(events[-1], "response")  # noqa: B009 (the completed event's)
    assert final.output_text == text
    assert (final.model_extra or {})["groundproxy"]["action"] == "rewrite"


def test_legacy_completions_are_guarded(proxy: tuple[str, Path], upstream_port: int) -> None:
    raw = sdk(proxy).completions.with_raw_response.create(
        model="gpt-3.5-turbo-instruct", prompt=QUESTION, max_tokens=50
    )
    assert last_upstream(upstream_port)["prompt"] == QUESTION  # the upstream's /v1/completions
    done = raw.parse()
    assert done.object == "text_completion" and done.model == "gpt-3.5-turbo-instruct"
    assert "12 months" in done.choices[0].text and "24 months" not in done.choices[0].text
    assert raw.headers["x-groundproxy-action"] == "rewrite"
    chunks = list(
        sdk(proxy).completions.create(model="gpt-3.5-turbo-instruct", prompt=QUESTION, stream=True)
    )
    streamed = "".join(c.choices[0].text for c in chunks if c.choices)
    assert streamed == done.choices[0].text
    assert (chunks[-1].model_extra or {})["groundproxy"]["action"] == "rewrite"


def test_a_list_of_prompts_and_responses_tools(proxy: tuple[str, Path]) -> None:
    """Issue 31, item 7, through the real server: one choice per prompt, each answering
    its own; Responses echo function tools with ``strict`` and name the function in
    ``function_call_arguments.done``; the raw bodies and every event validate."""
    prompts = [QUESTION, "Can I get a refund?"]
    raw = sdk(proxy).completions.with_raw_response.create(model="gpt-4o-mini", prompt=prompts)
    check("CreateCompletionResponse", raw.http_response.json())
    texts = [c.text for c in raw.parse().choices]
    assert len(texts) == 2 and "12 months" in texts[0] and "30 days" in texts[1]
    tools: Any = [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]
    ask = {"model": "gpt-4o-mini", "input": "What is the weather in Paris?", "tools": tools}
    done = sdk(proxy).responses.with_raw_response.create(**ask)
    check("Response", done.http_response.json())
    assert done.parse().tools[0].strict is None
    with httpx.stream(
        "POST", f"{proxy[0]}/v1/responses", json={**ask, "stream": True},
        headers={"Authorization": f"Bearer {KEYS['acme']}"}, timeout=60,
    ) as resp:  # fmt: skip
        raw_events = resp.read()
    check_exchange("POST", "/v1/responses", 200, "text/event-stream", raw_events)  # each one
    events = sse_events(raw_events.decode())
    names = [e["name"] for e in events if e["type"] == "response.function_call_arguments.done"]
    assert names == ["get_weather"]


def test_embeddings_pass_through(proxy: tuple[str, Path], upstream_port: int) -> None:
    got = sdk(proxy).embeddings.create(model="text-embedding-3-small", input=["a b", "c"])
    assert last_upstream(upstream_port)["model"] == "text-embedding-3-small"
    assert [d.index for d in got.data] == [0, 1]
    assert all(len(d.embedding) == 8 for d in got.data)
    assert got.model == "text-embedding-3-small"
    # the SDK asked for base64 (its default, the Node SDK's too): the strings came through
    # intact and decode to the float vectors
    assert last_upstream(upstream_port)["encoding_format"] == "base64"
    floats = sdk(proxy).embeddings.create(
        model="text-embedding-3-small", input=["a b", "c"], encoding_format="float"
    )
    for decoded, plain in zip(got.data, floats.data, strict=True):
        assert decoded.embedding == pytest.approx(plain.embedding, abs=1e-6)


def test_embeddings_429_comes_back_at_once_and_clean(proxy: tuple[str, Path]) -> None:
    """One upstream call per client call: litellm's embedding path used to turn
    ``max_retries=0`` into two retries, each waiting out the upstream's ``retry-after``."""
    started = time.monotonic()
    with pytest.raises(openai.RateLimitError) as limited:
        sdk(proxy).embeddings.create(model="fail-429", input="x")
    assert time.monotonic() - started < 5
    assert limited.value.response.headers["retry-after"] == "7"
    assert limited.value.body["message"] == (  # type: ignore[index]
        "The upstream model provider is rate limiting: upstream says rate_limit_exceeded."
    )


def test_models_retrieve_and_routes_without_v1(proxy: tuple[str, Path]) -> None:
    bare = sdk(proxy, v1=False)
    model = bare.models.retrieve("gpt-4o-mini")
    assert model.id == "gpt-4o-mini" and model.object == "model"
    assert model.created == sdk(proxy).models.retrieve("gpt-4o-mini").created
    with pytest.raises(openai.NotFoundError) as missing:
        sdk(proxy).models.retrieve("no-such-model")
    assert missing.value.code == "model_not_found"
    done = bare.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": QUESTION}]
    )
    assert "12 months" in (done.choices[0].message.content or "")
    unknown = httpx.post(f"{proxy[0]}/v1/nothing/here", json={})
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "unknown_url"
    assert "POST /v1/nothing/here" in unknown.json()["error"]["message"]


def test_upstream_errors_keep_their_class_and_retry_after(proxy: tuple[str, Path]) -> None:
    messages: Any = [{"role": "user", "content": "hi"}]
    with pytest.raises(openai.RateLimitError) as limited:
        sdk(proxy).chat.completions.create(model="fail-429", messages=messages)
    assert limited.value.response.headers["retry-after"] == "7"
    assert limited.value.code == "rate_limited"
    assert limited.value.body["message"] == (  # type: ignore[index]
        "The upstream model provider is rate limiting: upstream says rate_limit_exceeded."
    )
    with pytest.raises(openai.InternalServerError) as down:
        sdk(proxy, "sentence").chat.completions.create(
            model="fail-503", messages=messages, stream=True
        )
    assert down.value.status_code == 503 and down.value.code == "upstream_unavailable"
    assert down.value.response.headers["retry-after"] == "7"
    with pytest.raises(openai.InternalServerError) as failed:
        sdk(proxy).responses.create(model="fail-500", input="hi")
    assert failed.value.status_code == 502 and failed.value.code == "upstream_error"
    message = failed.value.body["message"]  # type: ignore[index]
    assert message == "The upstream model provider returned HTTP 500: upstream exploded."
    with pytest.raises(openai.APIStatusError) as unreachable:
        sdk(proxy, "hasty").chat.completions.create(model="gpt-4o-mini", messages=messages)
    assert unreachable.value.status_code == 502 and unreachable.value.code == "upstream_unreachable"
    text = unreachable.value.body["message"]  # type: ignore[index]
    assert "Error" not in text and "500" not in text and "litellm" not in text, text


def test_user_metadata_and_headers_reach_the_upstream(
    proxy: tuple[str, Path], upstream_port: int
) -> None:
    sdk(proxy).chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "hi"}],
        user="user-17",
        metadata={"ticket": "T-9"},
        extra_headers={"x-request-id": "req-fwd-1", "x-trace-tag": "blue", "x-other": "no"},
    )
    body, headers = last_upstream(upstream_port), last_upstream(upstream_port, "_last_headers")
    assert body["user"] == "user-17" and body["metadata"] == {"ticket": "T-9"}
    assert headers["x-request-id"] == "req-fwd-1" and headers["x-trace-tag"] == "blue"
    assert "x-other" not in headers
    assert headers.get("authorization") != f"Bearer {KEYS['acme']}"  # never forwarded


def test_azure_style_api_key_header(proxy: tuple[str, Path]) -> None:
    resp = httpx.get(f"{proxy[0]}/v1/models", headers={"api-key": KEYS["acme"]})
    assert resp.status_code == 200 and resp.json()["data"]


def test_every_log_line_is_json_with_an_access_line_per_request(proxy: tuple[str, Path]) -> None:
    base, log = proxy
    httpx.get(f"{base}/v1/models")  # 401
    httpx.get(f"{base}/v1/absent", headers={"authorization": f"Bearer {KEYS['acme']}"})  # 404
    httpx.get(f"{base}/healthz")  # flushes nothing, but is the last request logged
    lines = [ln for ln in log.read_text(encoding="utf-8").splitlines() if ln.strip()]
    records = [json.loads(ln) for ln in lines]  # every line parses
    access = [r for r in records if r.get("event") == "request"]
    paths = {(r["path"], r["status"]) for r in access}
    assert ("/v1/models", 401) in paths and ("/v1/absent", 404) in paths
    assert all({"tenant", "latency_ms", "method", "request_id"} <= set(r) for r in access)
    assert any(r.get("logger", "").startswith("uvicorn") for r in records)
    assert QUESTION not in log.read_text(encoding="utf-8")  # no bodies
