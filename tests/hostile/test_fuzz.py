"""Every POST route of the real server, fuzzed (issue 32): seeded mutations of a valid body —
a field set to a random JSON value (wrong types, huge and tiny numbers, control characters,
long strings, nested junk), a field deleted, an unknown field added, a nested item replaced
— sent by four clients at once, streams read to their end. No answer may be a 5xx, none may
hang (each has 30 s), and the server must still answer a plain request at the end.

Seeded (``SEED``; ``GROUNDPROXY_FUZZ_SEED`` overrides it to explore), so a failure repeats;
the report names the route and the body that failed.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.hostile.conftest import ANSWER, Hostile, admin_key, auth, key

pytestmark = pytest.mark.slow

SEED = int(os.environ.get("GROUNDPROXY_FUZZ_SEED", "32"))
N_BODIES = int(os.environ.get("GROUNDPROXY_FUZZ_BODIES", "1000"))
CLIENTS = 4
TIMEOUT_S = 30.0

QUESTION = "How long is the warranty?"
MESSAGES = [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": QUESTION}]
# route → (key kind, a valid body, fields worth setting beside those in the body)
ROUTES: dict[str, tuple[str, dict[str, Any], tuple[str, ...]]] = {
    "/v1/chat/completions": (
        "client",
        {"model": "gpt-4o-mini", "messages": MESSAGES},
        ("stream", "n", "temperature", "tools", "tool_choice", "response_format", "logprobs",
         "top_logprobs", "stream_options", "max_tokens", "stop", "user", "metadata", "seed"),
    ),
    "/v1/responses": (
        "client",
        {"model": "gpt-4o-mini", "input": QUESTION},
        ("stream", "instructions", "max_output_tokens", "temperature", "top_p", "tools",
         "tool_choice", "text", "metadata", "user", "parallel_tool_calls", "store",
         "previous_response_id", "conversation"),
    ),
    "/v1/completions": (
        "client",
        {"model": "gpt-4o-mini", "prompt": QUESTION},
        ("stream", "max_tokens", "temperature", "n", "logprobs", "echo", "stop", "suffix",
         "stream_options", "user"),
    ),
    "/v1/embeddings": (
        "client",
        {"model": "text-embedding-3-small", "input": "warranty"},
        ("encoding_format", "dimensions", "user"),
    ),
    "/v1/groundproxy/check": (
        "client",
        {"answer": ANSWER, "question": QUESTION, "messages": MESSAGES, "context": ["12 months."]},
        ("model", "logprobs"),
    ),
    "/v1/groundproxy/feedback": (
        "admin",
        {"answer": ANSWER, "question": QUESTION, "context": ["12 months."], "label": "supported"},
        ("label_hallucinated", "claims", "request_id", "step_id", "logprobs"),
    ),
    "/v1/groundproxy/documents": (
        "admin",
        {"documents": [{"id": "fuzz/handbook.md", "text": "The warranty is 12 months."}]},
        (),
    ),
}  # fmt: skip
HEADERS = ("x-groundproxy-trace-id", "x-groundproxy-parent-ids", "x-groundproxy-stream")
TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
# well-typed values, edge cases included: they pass validation and reach the deeper paths
PLAUSIBLE: dict[str, list[Any]] = {
    "stream": [True, False],
    "n": [1, 2, 3],
    "temperature": [0, 0.2, 2],
    "top_p": [0.1, 1],
    "tools": [[TOOL], []],
    "tool_choice": ["none", "auto", "required", {"type": "function", "function": {"name": "x"}}],
    "response_format": [{"type": "json_object"}, {"type": "text"},
                        {"type": "json_schema", "json_schema": {"name": "a", "schema": {}}}],
    "logprobs": [True, False, 0, 3],
    "top_logprobs": [0, 2, 20],
    "stream_options": [{"include_usage": True}, {"include_usage": False}, {}],
    "max_tokens": [0, 1, 5, 4096],
    "stop": ["\n", ["a", "b"]],
    "user": ["u-1", ""],
    "metadata": [{"a": "b"}, {}],
    "seed": [0, -5, 2**40],
    "instructions": ["Answer in one sentence.", ""],
    "max_output_tokens": [1, 16],
    "text": [{"format": {"type": "json_object"}}, {"format": {"type": "text"}},
             {"format": {"type": "json_schema", "name": "a", "schema": {"type": "object"}}}],
    "parallel_tool_calls": [True, False],
    "store": [False],
    "previous_response_id": [None, "resp_1"],
    "conversation": [None, "conv_1"],
    "echo": [True, False],
    "suffix": ["", "end"],
    "encoding_format": ["float", "base64"],
    "dimensions": [1, 8],
    "model": ["gpt-4o-mini", "text-embedding-3-small", "instruct", "x" * 256],
    "input": ["the kettle?", ["a", "b"], [[1, 2]], [1, 2, 3],
              [{"role": "user", "content": "the warranty?"}],
              [{"type": "message", "role": "user", "content": [{"type": "input_text",
                                                                 "text": "warranty?"}]},
               {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
               {"type": "function_call_output", "call_id": "c1", "output": "sunny"}]],
    "prompt": ["the catalog?", ["a", "b"], "weather", "empty-answer"],
    "messages": [[{"role": "user", "content": "weather"}],
                 [{"role": "user", "content": [{"type": "text", "text": "the kettle?"}]}],
                 [{"role": "tool", "content": "12 months", "tool_call_id": "c"},
                  {"role": "user", "content": "empty-answer"}]],
    "answer": ["", "The warranty is 24 months.", "Hello!", "{\"a\": \"The warranty is 5 years.\"}"],
    "question": [None, ""],
    "context": [[], "one string", ["a"] * 64],
    "label": ["hallucinated", "supported"],
    "label_hallucinated": [0, 1],
    "claims": [[{"text": "The warranty is 12 months.", "label": "hallucinated"}]],
    "request_id": ["rid-1"],
    "step_id": ["st_0123456789abcdef"],
    "documents": [[{"id": "a.md", "text": "x"}, {"id": "b/c.md", "text": "The kettle boils."}]],
}  # fmt: skip


def _string(rng: random.Random) -> str:
    kinds = [
        "",
        "x",
        "gpt-4o-mini",
        "user",
        "function",
        "json_schema",
        "auto",
        "st_0123456789abcdef",
        "\x00",
        "a\u202eb",
        "\ud7ff\uffff",
        "%s" * 3,
        "../../etc/passwd",
        "x" * rng.choice((300, 5_000, 120_000)),
        "".join(chr(rng.randrange(1, 0x2FFF)) for _ in range(rng.randrange(1, 40))),
    ]
    return str(rng.choice(kinds))


def _value(rng: random.Random, depth: int = 0) -> Any:
    """A random JSON value (shallow past depth 3)."""
    kind = rng.randrange(10 if depth < 3 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice((True, False))
    if kind == 2:
        return rng.choice((0, 1, -1, 2, 7, 129, 2**31, 2**63, -(2**63), 10**30))
    if kind == 3:
        return rng.choice((0.5, -0.0, 1e-300, 1e308, -1e308, 3.14, 2.0))
    if kind in (4, 5):
        return _string(rng)
    if kind in (6, 7):
        return [_value(rng, depth + 1) for _ in range(rng.choice((0, 1, 2, 3, 70)))]
    keys = ["type", "role", "content", "text", "name", "function", "format", "include_usage",
            "id", "label", "arguments", "schema", _string(rng)[:20]]  # fmt: skip
    return {rng.choice(keys): _value(rng, depth + 1) for _ in range(rng.randrange(0, 4))}


def _paths(body: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside ``body`` (dict keys and list indexes)."""
    out: list[tuple[Any, ...]] = []
    items = body.items() if isinstance(body, dict) else enumerate(body)
    for k, v in items:
        out.append((*prefix, k))
        if isinstance(v, dict | list) and v:
            out += _paths(v, (*prefix, k))
    return out


def _mutate(rng: random.Random, body: dict[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    body = json.loads(json.dumps(body))
    for _ in range(rng.choice((1, 1, 2, 3))):
        op = rng.choice((0, 1, 1, 1, 2, 3, 4))
        if op == 0 and fields:  # a known optional field, any value
            body[rng.choice(fields)] = _value(rng)
        elif op == 1:  # a field with a well-typed value
            name = rng.choice([f for f in (*fields, *body) if f in PLAUSIBLE] or ["user"])
            body[name] = json.loads(json.dumps(rng.choice(PLAUSIBLE.get(name, ["x"]))))
        elif op == 2 and body:  # a value somewhere inside replaced
            path = rng.choice(_paths(body))
            parent = body
            for part in path[:-1]:
                parent = parent[part]
            parent[path[-1]] = _value(rng)
        elif op == 3 and body:  # a field removed
            del body[rng.choice(sorted(body))]
        else:  # an unknown field
            body[_string(rng)[:30] or "extra"] = _value(rng)
    return body


def _cases(rng: random.Random) -> list[tuple[str, str, dict[str, Any], dict[str, str]]]:
    out = []
    routes = sorted(ROUTES)
    for i in range(N_BODIES):
        path = routes[i % len(routes)]
        kind, base, fields = ROUTES[path]
        tenant = rng.choice(("ta", "ts", "tr"))
        token = admin_key(tenant) if kind == "admin" else key(tenant)
        headers = auth(token)
        if rng.random() < 0.1:  # a header value the client can send: printable ASCII
            value = "".join(c for c in _string(rng)[:200] if c.isascii() and c.isprintable())
            headers[rng.choice(HEADERS)] = value
        body = _mutate(rng, base, fields)
        if path != "/v1/groundproxy/documents" and "stream" in fields and rng.random() < 0.3:
            body["stream"] = True
        out.append((path, tenant, body, headers))
    return out


def _send(
    client: httpx.Client, case: tuple[str, str, dict[str, Any], dict[str, str]]
) -> tuple[int, str]:
    """The status, and what failed ("" when nothing did)."""
    path, tenant, body, headers = case
    try:
        r = client.post(path, headers=headers, json=body)
    except httpx.HTTPError as exc:
        return 0, f"{path} [{tenant}] {type(exc).__name__} (a hang or a dropped connection)"
    if r.status_code >= 500 or "x-request-id" not in r.headers:
        return r.status_code, f"{path} [{tenant}] {r.status_code}: {r.text[:200]!r}"
    return r.status_code, ""


def test_fuzzed_bodies_never_get_a_5xx_or_hang(hostile: Hostile) -> None:
    rng = random.Random(SEED)
    cases = _cases(rng)
    started = time.monotonic()
    clients = [httpx.Client(base_url=hostile.url, timeout=TIMEOUT_S) for _ in range(CLIENTS)]
    try:
        with ThreadPoolExecutor(CLIENTS) as pool:
            results = list(
                pool.map(lambda i: _send(clients[i % CLIENTS], cases[i]), range(len(cases)))
            )
    finally:
        for c in clients:
            c.close()
    took = time.monotonic() - started
    failed = [f"{r} body={json.dumps(cases[i][2])[:300]}" for i, (_, r) in enumerate(results) if r]
    statuses = Counter(status for status, _ in results)
    assert not failed, f"{len(failed)} of {len(cases)} (seed {SEED}):\n" + "\n".join(failed[:15])
    with hostile.client() as c:  # still serving
        r = c.post("/v1/chat/completions", headers=auth(key("ta")),
                   json={"model": "gpt-4o-mini", "messages": MESSAGES})  # fmt: skip
        assert r.status_code == 200, r.text
    print(f"fuzz: {len(cases)} bodies, {len(ROUTES)} routes, {took:.1f} s, seed {SEED}: {statuses}")
    assert statuses[200] >= len(cases) // 5, statuses  # enough reached the guard and upstream
