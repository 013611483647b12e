"""How a policy's upstream block becomes litellm arguments (keys from the environment only)."""

from __future__ import annotations

import pytest

from groundproxy.errors import UnknownModelError
from groundproxy.policies.schema import UpstreamPolicy
from groundproxy.proxy.upstream.client import resolve_model, upstream_kwargs

MSG = [{"role": "user", "content": "hi"}]


def test_key_comes_from_the_named_env_var(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACME_UPSTREAM_KEY", "sk-upstream")
    up = UpstreamPolicy(model="openai/x", api_key_env="ACME_UPSTREAM_KEY")
    kw = upstream_kwargs(up, "openai/x", MSG, {"temperature": 0.2})
    assert kw["api_key"] == "sk-upstream"
    assert kw["temperature"] == 0.2 and kw["num_retries"] == 0 and kw["timeout"] == 60.0
    assert "api_base" not in kw


def test_self_hosted_base_without_key_gets_a_placeholder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    up = UpstreamPolicy(model="openai/x", api_base="http://127.0.0.1:9/v1")
    kw = upstream_kwargs(up, "openai/x", MSG, {})
    assert kw["api_base"] == "http://127.0.0.1:9/v1"
    assert kw["api_key"] == "groundproxy-no-key"


def test_no_base_and_no_key_leaves_the_provider_default() -> None:
    kw = upstream_kwargs(UpstreamPolicy(model="openai/x"), "openai/x", MSG, {})
    assert "api_key" not in kw


def test_client_fields_cannot_steer_litellm() -> None:
    up = UpstreamPolicy(model="openai/x")
    sneaky = {
        "api_base": "http://evil.example",
        "api_key": "x",
        "mock_response": "owned",
        "custom_llm_provider": "evil",
        "foo_bar": 1,
        "temperature": 0.1,
    }
    kw = upstream_kwargs(up, "openai/x", MSG, sneaky)
    assert "api_base" not in kw and "api_key" not in kw and "mock_response" not in kw
    assert "custom_llm_provider" not in kw
    assert kw["temperature"] == 0.1
    # Unknown fields still reach the upstream, as body fields it may ignore.
    assert kw["extra_body"] == {
        "api_base": "http://evil.example",
        "api_key": "x",
        "mock_response": "owned",
        "custom_llm_provider": "evil",
        "foo_bar": 1,
    }


def test_model_map_and_restriction() -> None:
    up = UpstreamPolicy(model="openai/default", models={"fast": "openai/fast"})
    assert resolve_model(up, "fast") == "openai/fast"
    assert resolve_model(up, "other") == "openai/default"
    strict = UpstreamPolicy(
        model="openai/default", models={"fast": "openai/fast"}, restrict_models=True
    )
    with pytest.raises(UnknownModelError):
        resolve_model(strict, "other")


def test_connection_drops_are_told_from_timeouts_and_statuses() -> None:
    import httpx
    import openai

    from groundproxy.proxy.upstream.client import is_connection_drop

    req = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")
    dropped = openai.APIConnectionError(request=req)  # type: ignore[arg-type]
    assert is_connection_drop(dropped)
    try:  # litellm re-wraps it, e.g. as a 500 with the original as the cause
        raise RuntimeError("InternalServerError") from dropped
    except RuntimeError as wrapped:
        assert is_connection_drop(wrapped)
    assert is_connection_drop(httpx.RemoteProtocolError("Server disconnected"))
    assert not is_connection_drop(openai.APITimeoutError(request=req))  # type: ignore[arg-type]
    resp = httpx.Response(500, request=req)
    error = openai.InternalServerError("boom", response=resp, body=None)  # type: ignore[arg-type]
    assert not is_connection_drop(error)
