"""Logprobs survive an answer whose text is unchanged apart from citations, and are dropped
only with a precise note when its text was really rewritten — buffered, buffer-mode
streams and sentence streams (issue 31, item 4: before, the default policy's footnote
citations counted as a rewrite, so a correct answer came back with ``logprobs: null`` and
"the answer was rewritten", and sentence streams dropped them with no note). Real app and
lifespan in process, the real index of testing/samples, the fake-upstream process."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from tests.conftest import KEYS
from tests.inprocess import app_client
from tests.spec_check import check, check_stream

RIGHT = "How do refunds work?"  # supported by the handbook: cited, not rewritten
WRONG = "How long is the warranty?"  # 24 months against the handbook's 12: corrected


@pytest_asyncio.fixture(scope="module")
async def client(policies_dir: Path, data_dir: Path) -> AsyncIterator[httpx.AsyncClient]:
    async with app_client(policies_dir, data_dir) as c:
        yield c


async def _post(c: httpx.AsyncClient, tenant: str, question: str, stream: bool) -> httpx.Response:
    body = {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": question}],
        "logprobs": True,
        "stream": stream,
    }
    resp = await c.post(
        "/v1/chat/completions", json=body, headers={"authorization": f"Bearer {KEYS[tenant]}"}
    )
    assert resp.status_code == 200, resp.text
    return resp


def _streamed(text: str) -> tuple[str, list[str], dict[str, Any]]:
    """(content, the tokens the logprobs carried, the last chunk's groundproxy object)."""
    chunks = check_stream(text)
    content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    tokens = [t["token"] for c in chunks for t in
              ((c["choices"][0].get("logprobs") or {}).get("content") or [])]  # fmt: skip
    return content, tokens, chunks[-1]["groundproxy"]


@pytest.mark.parametrize("tenant", ["acme", "sentence"])  # buffer, sentence
async def test_a_cited_but_unchanged_answer_keeps_its_logprobs(
    client: httpx.AsyncClient, tenant: str
) -> None:
    body = (await _post(client, tenant, RIGHT, False)).json()
    check("CreateChatCompletionResponse", body)
    gp, choice = body["groundproxy"], body["choices"][0]
    assert gp["action"] == "none" and " [1]" in choice["message"]["content"], gp
    tokens = [t["token"] for t in choice["logprobs"]["content"]]
    assert "".join(tokens).startswith("You can return an unused robot")
    assert "notes" not in gp
    content, streamed, last = _streamed((await _post(client, tenant, RIGHT, True)).text)
    assert " [1]" in content and "".join(streamed) == "".join(tokens), (content, streamed)
    assert "notes" not in last


async def test_a_rewritten_answer_drops_them_with_a_precise_note(
    client: httpx.AsyncClient,
) -> None:
    body = (await _post(client, "acme", WRONG, False)).json()
    gp = body["groundproxy"]
    assert body["choices"][0]["logprobs"] is None and gp["action"] == "rewrite"
    assert gp["notes"] == ["logprobs dropped: the answer was rewritten (claims: 1 corrected)"]
    _, tokens, last = _streamed((await _post(client, "acme", WRONG, True)).text)
    assert tokens == [] and last["notes"] == gp["notes"]  # buffer-mode stream: the same


async def test_a_sentence_stream_drops_only_the_rewritten_sentences_and_says_so(
    client: httpx.AsyncClient,
) -> None:
    content, tokens, last = _streamed((await _post(client, "sentence", WRONG, True)).text)
    assert "12 months" in content and "24 months" not in content
    # the first sentence was corrected: its tokens go; the second was only cited: kept
    assert "".join(tokens) == " Batteries are covered for 6 months.", tokens
    assert last["notes"] == [
        "logprobs dropped for 1 of 2 sentences: rewritten (claims: 1 corrected)"
    ]
