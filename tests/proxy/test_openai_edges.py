"""Issue 31, item 7: ``/v1/completions`` with a list of prompts answers one choice per
prompt (before: the prompts were merged into one call, one choice); the Responses API
echoes function tools with the ``strict`` / ``parameters`` the spec requires and its
``response.function_call_arguments.done`` event names the function (before: 20 schema
violations per tool-using response stream). Real app in process, the fake-upstream
process; every body and event is validated against OpenAI's spec as it arrives
(tests/conftest.py), which these tests rely on as much as on their own asserts."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from tests.conftest import KEYS
from tests.inprocess import app_client
from tests.spec_check import sse_events

AUTH = {"authorization": f"Bearer {KEYS['acme']}"}
PROMPTS = ["How long is the warranty?", "Can I get a refund?"]
TOOLS: list[dict[str, Any]] = [
    {"type": "function", "name": "get_weather", "parameters": {"type": "object"}},
    {"type": "function", "name": "get_time", "strict": True,
     "parameters": {"type": "object", "properties": {}, "additionalProperties": False,
                    "required": []}},
]  # fmt: skip


@pytest_asyncio.fixture(scope="module")
async def client(policies_dir: Path, data_dir: Path) -> AsyncIterator[httpx.AsyncClient]:
    async with app_client(policies_dir, data_dir) as c:
        yield c


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_a_list_of_prompts_gets_one_choice_per_prompt(
    client: httpx.AsyncClient, stream: bool
) -> None:
    body = {"model": "gpt-4o-mini", "prompt": PROMPTS, "stream": stream}
    resp = await client.post("/v1/completions", json=body, headers=AUTH)
    assert resp.status_code == 200, resp.text
    if stream:
        events = sse_events(resp.text)
        choices = [c for e in events for c in e["choices"]]
        gp = events[-1]["groundproxy"]
    else:
        choices, gp = resp.json()["choices"], resp.json()["groundproxy"]
    assert [c["index"] for c in choices] == [0, 1]
    warranty, refund = (c["text"] for c in choices)
    assert "12 months" in warranty and "24 months" not in warranty  # its own prompt's answer
    assert "30 days" in refund and "warranty" not in refund.lower()
    assert choices[0]["groundproxy"]["action"] == "rewrite"  # each choice's own verdict
    assert choices[1]["groundproxy"]["action"] == "none"
    assert gp["action"] == "rewrite"


async def test_too_many_prompts_are_refused(client: httpx.AsyncClient) -> None:
    body = {"model": "gpt-4o-mini", "prompt": ["Hi?"] * 33}
    resp = await client.post("/v1/completions", json=body, headers=AUTH)
    assert resp.status_code == 400 and resp.json()["error"]["param"] == "prompt"


async def test_responses_echo_tools_and_name_the_called_function(
    client: httpx.AsyncClient,
) -> None:
    ask: dict[str, Any] = {"model": "gpt-4o-mini", "input": "What is the weather in Paris?"}
    done = (await client.post("/v1/responses", json={**ask, "tools": TOOLS}, headers=AUTH)).json()
    assert done["tools"] == [{**TOOLS[0], "strict": None}, TOOLS[1]]  # strict: as asked
    call = next(o for o in done["output"] if o["type"] == "function_call")
    assert call["name"] == "get_weather" and call["arguments"] == '{"city": "Paris"}'
    resp = await client.post(
        "/v1/responses", json={**ask, "tools": TOOLS, "stream": True}, headers=AUTH
    )
    events = sse_events(resp.text)
    args = [e for e in events if e["type"] == "response.function_call_arguments.done"]
    assert [(e["name"], e["arguments"]) for e in args] == [("get_weather", '{"city": "Paris"}')]
    assert events[-1]["response"]["tools"] == done["tools"]
