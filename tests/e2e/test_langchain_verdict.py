"""Issue 41, item 3: a ``langchain-openai`` app gets each streamed answer's verdict, in every
stream mode, without asking for a buffered stream — through
:class:`groundproxy.integrations.langchain.ChatGroundproxy` (``ChatOpenAI`` that keeps the
``groundproxy`` object in ``response_metadata``), against the real ``groundproxy serve``
process and the fake upstream process.

Before: ``ChatOpenAI`` dropped the object, so a stream's verdict reached LangChain only as
headers, and a sentence-mode stream's headers come before the verdict exists."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_openai import ChatOpenAI
from pydantic import BaseModel

from groundproxy.integrations.langchain import ChatGroundproxy, verdict
from tests.api.test_openai_shapes import RULES
from tests.conftest import KEYS
from tests.e2e.three_tenants import three_tenant_server

pytestmark = pytest.mark.slow
TENANTS = ("acme", "sentence", "loose")  # buffer, sentence, guard off (relay)
QUESTION = "How long is the warranty?"  # upstream: "The warranty lasts 24 months. ..."


class Warranty(BaseModel):
    product: str
    warranty: str
    months: int


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Iterator[str]:
    with three_tenant_server(tmp_path_factory.mktemp("lc-verdict"), data_dir, RULES) as url:
        yield url


def llm(base_url: str, tenant: str, kind: type[ChatOpenAI] = ChatGroundproxy) -> ChatOpenAI:
    return kind(model="gpt-4o-mini", base_url=base_url, api_key=KEYS[tenant], max_retries=0,
                timeout=60)  # fmt: skip


def _merged(chunks: list[Any]) -> AIMessageChunk:
    total = chunks[0]
    for chunk in chunks[1:]:
        total = total + chunk
    assert isinstance(total, AIMessageChunk)
    return total


def _check(found: dict[str, Any] | None, tenant: str) -> None:
    assert found is not None
    if tenant == "loose":  # guard off: relayed, not checked
        assert found["action"] == "unverified" and found["trust"] is None
        return
    assert found["action"] == "rewrite"
    wrong = next(c for c in found["claims"] if "24 months" in c["text"])
    assert wrong["verdict"] == "contradicted" and "12 months" in wrong["correction"]


@pytest.mark.parametrize("tenant", TENANTS)
def test_every_stream_mode_carries_the_verdict_once(base_url: str, tenant: str) -> None:
    chunks = list(llm(base_url, tenant).stream(QUESTION))
    carrying = [i for i, c in enumerate(chunks) if verdict(c) is not None]
    assert len(carrying) == 1, [(c.content, c.response_metadata) for c in chunks[-3:]]
    whole = _merged(chunks)
    _check(verdict(whole), tenant)
    # the chunk with the finish reason (LangChain may close with an empty chunk of its own)
    assert chunks[carrying[0]].response_metadata.get("finish_reason") == "stop"
    if tenant != "loose":
        assert "12 months" in str(whole.content) and "24 months" not in str(whole.content)


async def test_astream_in_sentence_mode(base_url: str) -> None:
    chunks = [c async for c in llm(base_url, "sentence").astream(QUESTION)]
    _check(verdict(_merged(chunks)), "sentence")


@pytest.mark.parametrize("tenant", TENANTS)
def test_invoke_carries_the_verdict(base_url: str, tenant: str) -> None:
    msg = llm(base_url, tenant).invoke(QUESTION)
    assert isinstance(msg, AIMessage)
    _check(verdict(msg), tenant)


def test_structured_output_keeps_its_verdict(base_url: str) -> None:
    chain = llm(base_url, "acme").with_structured_output(
        Warranty, method="json_schema", include_raw=True
    )
    out = chain.invoke("Answer as json: the warranty?")
    assert isinstance(out, dict) and out["parsed"].months == 12
    found = verdict(out["raw"])
    assert found is not None and found["action"] == "rewrite"


def test_plain_chat_openai_drops_it(base_url: str) -> None:
    """Why the class exists: the stock client keeps no verdict of a sentence stream."""
    chunks = list(llm(base_url, "sentence", ChatOpenAI).stream(QUESTION))
    assert verdict(_merged(chunks)) is None
