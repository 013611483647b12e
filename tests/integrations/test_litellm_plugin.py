"""The LiteLLM guardrail class in process (the groundproxy venv's litellm), against the real
in-process app over httpx.ASGITransport: each action applied, streaming, failure modes. The
real LiteLLM proxy process is exercised in tests/e2e/test_litellm_guardrail.py."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import httpx
import litellm
import pytest
from litellm.exceptions import GuardrailRaisedException

from groundproxy.integrations.check_client import CheckClient
from groundproxy.integrations.litellm import GroundproxyGuardrail
from tests.conftest import KEYS
from tests.proxy.test_api import client as client  # the session app fixture

# real processes, real model exports or many real-model requests: `make test` runs these,
# the working lane (`make fast`, -m "not slow") skips them
pytestmark = pytest.mark.slow

WRONG = "The Acme vacuum robot has a limited warranty of 24 months from the date of purchase."
DATA = {
    "model": "gpt-4o-mini",
    "messages": [{"role": "user", "content": "How long is the warranty?"}],
}
Choice, Delta = litellm.types.utils.StreamingChoices, litellm.types.utils.Delta


def guardrail(c: httpx.AsyncClient, tenant: str, **params: Any) -> GroundproxyGuardrail:
    g = GroundproxyGuardrail(
        api_key=KEYS[tenant],
        guardrail_name="groundproxy",
        event_hook="post_call",
        default_on=True,
        **params,
    )
    g.groundproxy = CheckClient("http://gp", KEYS[tenant], transport=c._transport)
    return g


def completion(text: str) -> Any:
    return litellm.ModelResponse(
        model="gpt-4o-mini",
        choices=[
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
        ],
    )


async def test_rewrite_applied_with_headers_and_verdict(client: httpx.AsyncClient) -> None:
    resp = await guardrail(client, "acme").async_post_call_success_hook(
        data=dict(DATA), user_api_key_dict=None, response=completion(WRONG)
    )
    content = resp.choices[0].message.content
    assert "12 months" in content and "24 months" not in content
    headers = resp._hidden_params["additional_headers"]
    assert headers["x-groundproxy-action"] == "rewrite"
    assert headers["x-groundproxy-citations"].startswith("doc:handbook.md#")
    assert resp.groundproxy["claims"][0]["verdict"] == "contradicted"
    assert "groundproxy" in resp.model_dump()


async def test_block_raises_litellm_guardrail_error(client: httpx.AsyncClient) -> None:
    with pytest.raises(GuardrailRaisedException) as info:
        await guardrail(client, "blocky").async_post_call_success_hook(
            data=dict(DATA), user_api_key_dict=None, response=completion(WRONG)
        )
    assert info.value.blocked_content is True and info.value.status_code == 400
    assert "24 months" not in info.value.message and info.value.message


async def test_stream_replayed_with_returned_text(client: httpx.AsyncClient) -> None:
    pieces = [
        "The Acme vacuum robot has a limited ",
        "warranty of 24 months ",
        "from the date of purchase.",
    ]

    async def upstream() -> AsyncIterator[Any]:
        for p in pieces:
            yield litellm.ModelResponseStream(choices=[Choice(index=0, delta=Delta(content=p))])
        yield litellm.ModelResponseStream(
            choices=[Choice(index=0, delta=Delta(), finish_reason="stop")]
        )

    hook = guardrail(client, "acme").async_post_call_streaming_iterator_hook(
        user_api_key_dict=None, response=upstream(), request_data=dict(DATA)
    )
    chunks = [c async for c in hook]
    assert len(chunks) == 4
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert "12 months" in text and "24 months" not in text
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert chunks[-1].groundproxy["action"] == "rewrite"


async def test_unreachable_fails_closed_or_open() -> None:
    closed = GroundproxyGuardrail(api_key="k", api_base="http://127.0.0.1:9", guardrail_name="g")
    with pytest.raises(GuardrailRaisedException) as info:
        await closed.async_post_call_success_hook(
            data=dict(DATA), user_api_key_dict=None, response=completion(WRONG)
        )
    assert info.value.status_code == 503 and "unreachable" in info.value.message
    opened = GroundproxyGuardrail(
        api_key="k", api_base="http://127.0.0.1:9", unreachable_fallback="fail_open"
    )
    resp = await opened.async_post_call_success_hook(
        data=dict(DATA), user_api_key_dict=None, response=completion(WRONG)
    )
    assert resp.choices[0].message.content == WRONG
    assert resp._hidden_params["additional_headers"]["x-groundproxy-action"] == "unverified"


def test_imports_nothing_of_the_server() -> None:
    code = (
        "import sys, groundproxy.integrations.check_client as c; "
        "assert not {'litellm', 'fastapi'} & set(sys.modules), 'client pulled litellm/fastapi'; "
        "import groundproxy.integrations.litellm; "
        "bad = [m for m in sys.modules if m.startswith(('groundproxy.proxy', 'groundproxy.guards',"
        " 'groundproxy.models', 'groundproxy.retrieval'))]; assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
