"""One real ``groundproxy serve`` process for issue 32's hostile-input tests (session-wide),
with a scripted upstream whose rules answer odd bodies.

Tenants (each with a client key and an admin key; traces on; ``lexical`` verifier and the
``hashing`` embedder keep start-up short):

- ``ta``: buffer mode · ``ts``: sentence-mode streams · ``tr``: ``guard: false`` (relayed)
- ``cal``: ``verifier.threshold: calibrated`` with no calibration file (guard error)
- ``bm``: ``verifier.model`` names a built model that is not there (guard error; its
  streams in sentence mode)
- ``ad``: an ``adapter.json`` that is not JSON (guard error)

The three failing tenants' errors name files under the server's folders: what the client
sees of them must not (``test_no_server_paths``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from groundproxy.testing.embedders import HASHING
from groundproxy.testing.processes import free_port, start_fake_upstream, start_proxy, stop_process
from tests.hardening.conftest import admin_key, auth, key, policy

__all__ = ["admin_key", "auth", "key"]  # the keys of tests.hardening, for this package's tests

ENV = {"GROUNDPROXY_EMBEDDER": HASHING, "TEST_UPSTREAM_KEY": "sk-upstream-hostile-0123456789"}
TENANTS = ("ta", "ts", "tr", "cal", "bm", "ad")
HANDBOOK = "The Acme robot has a warranty of 12 months from the date of purchase."
ANSWER = "The warranty is 12 months."


def _chat_body(**change: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "chatcmpl-odd",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "gpt-4o-mini",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": ANSWER},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 6, "total_tokens": 11},
    }
    body.update(change)
    return body


def _chunk(delta: Any, finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-odd",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


_TEXT_NAN = (
    '{"id": "cmpl-odd", "object": "text_completion", "created": 1, "model": "m", '
    '"choices": [{"index": 0, "text": "' + ANSWER + '", "finish_reason": "stop", '
    '"logprobs": {"token_logprobs": [NaN]}}]}'
)
#: what each odd upstream answer is asked for by (the last user message holds the key)
ODD: dict[str, dict[str, Any]] = {
    "odd-message-string": {"body": _chat_body(choices=[{"index": 0, "message": ANSWER}])},
    "odd-usage-strings": {
        "body": _chat_body(usage={"prompt_tokens": "5", "completion_tokens": "six"})
    },
    "odd-toolcalls-string": {
        "body": _chat_body(
            choices=[
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": None, "tool_calls": "call"},
                    "finish_reason": "tool_calls",
                }
            ]
        )
    },
    "odd-created-string": {"body": _chat_body(created="yesterday")},
    "odd-usage-nan": {
        "body": json.dumps(_chat_body(usage={"total_tokens": 1.5})).replace("1.5", "NaN")
    },
    "odd-no-choices": {"body": _chat_body(choices=[])},
    "odd-delta-string": {"chunks": [_chunk("The warranty"), _chunk({}, "stop")]},
    "odd-chunk-usage": {
        "chunks": [
            _chunk({"role": "assistant", "content": ANSWER}),
            {**_chunk({}, "stop"), "usage": {"prompt_tokens": "lots"}},
        ]
    },
    "odd-embedding-nan": {
        "body": '{"object": "list", "model": "m", "data": [{"object": "embedding", '
        '"index": 0, "embedding": [0.1, NaN]}], "usage": {"prompt_tokens": 1, "total_tokens": 1}}'
    },
    "odd-embedding-string-list": {
        "body": {"object": "list", "data": [{"index": 0, "embedding": ["a", "b"]}]}
    },
    "odd-text-nan": {"body": _TEXT_NAN},
    "odd-text-choice-string": {"body": {"id": "c", "created": 1, "choices": ["text"]}},
    "empty-answer": {"answer": ""},
    "weather": {"tool_calls": [{"name": "get_weather", "arguments": '{"city": "Paris"}'}]},
    "kettle": {"answer": "The Zephyr kettle boils water in 45 seconds."},
}


def _policy(tenant: str, upstream_port: int) -> dict[str, Any]:
    spec = policy(tenant, upstream_port, traces={"enabled": True, "retention_hours": 24})
    spec["upstream"]["models"]["instruct"] = "text-completion-openai/gpt-3.5-turbo-instruct"
    if tenant == "tr":
        spec["guard"] = False
    if tenant == "cal":
        spec["verifier"] = {"model": "lexical", "threshold": "calibrated"}
    if tenant == "bm":
        spec["verifier"] = {"model": "not-built-here"}
        spec["stream"] = "sentence"
    return spec


@dataclass
class Hostile:
    url: str
    root: Path  # every server-side folder (policies, data, log) is under it
    upstream_port: int
    proc: Any

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=60)


@pytest.fixture(scope="session")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hostile]:
    root = tmp_path_factory.mktemp("hostile")
    policies, data = root / "policies", root / "data"
    policies.mkdir()
    (data / "ad").mkdir(parents=True)
    (data / "ad" / "adapter.json").write_text("{not json", encoding="utf-8")
    up_port = free_port()
    rules = [{"match": match, **rule} for match, rule in ODD.items()]
    script = root / "script.json"
    script.write_text(json.dumps({"default": ANSWER, "rules": rules}), encoding="utf-8")
    for tenant in TENANTS:
        spec = _policy(tenant, up_port)
        (policies / f"{tenant}.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    upstream = start_fake_upstream(up_port, script, log_path=root / "upstream.log")
    port = free_port()
    proc = None
    try:
        proc = start_proxy(port, policies, data, env=ENV, log_path=root / "proxy.log")
        srv = Hostile(f"http://127.0.0.1:{port}", root, up_port, proc)
        with srv.client() as c:
            for tenant in TENANTS:
                r = c.post(
                    "/v1/groundproxy/documents",
                    headers=auth(admin_key(tenant)),
                    json={"documents": [{"id": "handbook.md", "text": HANDBOOK}]},
                )
                assert r.status_code == 200, r.text
        yield srv
    finally:
        if proc is not None:
            stop_process(proc)
        stop_process(upstream)
