"""An upstream 4xx keeps its status and OpenAI error class (issue 31, item 6): a wrong model
name is a 404, a wrong upstream key a 401 … on both transports (the direct OpenAI wire and
litellm), streamed or not, with the upstream's message redacted; only the upstream's 5xx is a
502. Before, every status but 400/429/503 became a 502 ``upstream_error``, which the openai
SDK reads as ``InternalServerError`` and retries. Real app and lifespan in process, the
real fake-upstream process (``fail-NNN`` models answer as OpenAI does)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
import yaml

from groundproxy.policies.keys import hash_key
from groundproxy.proxy.app import build_app
from groundproxy.proxy.settings import Settings
from tests.conftest import _policy, share_index_files

TRANSPORTS = ("openai", "litellm")
# status → (our status, OpenAI type, code, words of the upstream's message)
EXPECTED: dict[int, tuple[int, str, str | None, str]] = {
    400: (400, "invalid_request_error", None, "bad temperature"),
    401: (401, "authentication_error", "upstream_authentication_failed", "Incorrect API key"),
    403: (403, "permission_error", "upstream_permission_denied", "does not have access"),
    404: (404, "not_found_error", "model_not_found", "does not exist"),
    409: (409, "invalid_request_error", "conflict", "Another request"),
    422: (422, "invalid_request_error", None, "Unprocessable"),
    500: (502, "upstream_error", "upstream_error", "upstream exploded"),
}


@pytest_asyncio.fixture(scope="module")
async def client(
    tmp_path_factory: pytest.TempPathFactory, data_dir: Path, upstream_port: int
) -> AsyncIterator[httpx.AsyncClient]:
    policies = tmp_path_factory.mktemp("status-policies")
    for transport in TRANSPORTS:
        spec = _policy("acme", upstream_port, upstream={"transport": transport})
        spec.update(tenant=transport, keys=[hash_key(f"sk-{transport}")], admin_keys=[])
        spec.setdefault("retrieval", {})["index"] = "acme"
        (policies / f"{transport}.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    share_index_files(policies)
    app = build_app(Settings(policies=policies, data=data_dir, watch_policies=False))
    async with app.router.lifespan_context(app):
        transport_ = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport_, base_url="http://gp", timeout=60) as c:
            yield c


def _body(status: int, stream: bool) -> dict[str, Any]:
    messages = [{"role": "user", "content": "hi"}]
    return {"model": f"fail-{status}", "messages": messages, "stream": stream}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("status", sorted(EXPECTED))
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_an_upstream_4xx_keeps_its_status_and_class(
    client: httpx.AsyncClient, transport: str, status: int, stream: bool
) -> None:
    resp = await client.post(
        "/v1/chat/completions",
        json=_body(status, stream),
        headers={"authorization": f"Bearer sk-{transport}"},
    )
    want_status, want_type, want_code, words = EXPECTED[status]
    assert resp.status_code == want_status, resp.text
    error = resp.json()["error"]
    assert (error["type"], error["code"]) == (want_type, want_code), error
    assert words in error["message"], error
    # the key the upstream quoted is redacted, as every upstream message is
    assert "AbCdEfGhIjKlMnOpQrStUvWxYz012345" not in resp.text
