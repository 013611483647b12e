"""The scripted upstream's answers as OpenAI-shaped bodies and chunks, shared by the HTTP
fake (:mod:`groundproxy.testing.fake_upstream`) and the in-process
:class:`~groundproxy.testing.fake_upstream_client.FakeUpstream`."""

from __future__ import annotations

import asyncio
import base64
import struct
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

DEFAULT_ANSWER = "I do not know."


FINGERPRINT = "fp_fake"


def pick_rule(script: list[dict[str, Any]], body: dict[str, Any], default: str) -> dict[str, Any]:
    """The first rule whose ``match`` is in the last user message, else the default answer."""
    last_user = ""
    for m in body.get("messages", []):
        if m.get("role") == "user" and isinstance(m.get("content"), str):
            last_user = m["content"]
    for rule in script:
        if rule.get("match", "").lower() in last_user.lower():
            return rule
    return {"answer": default}


def embedding_body(
    inputs: str | list[Any], model: str, encoding_format: str | None = None
) -> dict[str, Any]:
    """One 8-dimensional vector per input, derived from the input's characters; with
    ``encoding_format: "base64"`` each vector is base64 of its little-endian float32 bytes, as
    OpenAI sends it (the Node SDK asks for base64 unless told otherwise)."""
    items = [inputs] if isinstance(inputs, str) else list(inputs)
    data = []
    for i, item in enumerate(items):
        text = str(item)
        vec = [((sum(map(ord, text)) * (k + 1)) % 97) / 97.0 for k in range(8)]
        packed = base64.b64encode(struct.pack("<8f", *vec)).decode("ascii")
        embedding: Any = packed if encoding_format == "base64" else vec
        data.append({"object": "embedding", "index": i, "embedding": embedding})
    tokens = sum(len(str(item).split()) for item in items)
    usage = {"prompt_tokens": tokens, "total_tokens": tokens}
    return {"object": "list", "data": data, "model": model, "usage": usage}


def text_completion_body(answer: str, model: str) -> dict[str, Any]:
    """A legacy ``text_completion`` body (``POST /v1/completions``)."""
    body = completion_body(answer, model)
    body["id"] = body["id"].replace("chatcmpl-", "cmpl-")
    body["object"] = "text_completion"
    body["choices"] = [{"index": 0, "text": answer, "logprobs": None, "finish_reason": "stop"}]
    return body


def pick_answer(script: list[dict[str, Any]], body: dict[str, Any], default: str) -> str:
    return str(pick_rule(script, body, default).get("answer") or "")


def _tool_calls(rule: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"id": f"call_{i}_{c['name']}", "type": "function",
         "function": {"name": c["name"], "arguments": c.get("arguments", "{}")}}
        for i, c in enumerate(rule.get("tool_calls") or [])
    ]  # fmt: skip


def _finish(rule: dict[str, Any]) -> str:
    if rule.get("tool_calls"):
        return "tool_calls"
    return "function_call" if rule.get("function_call") else "stop"


def _logprobs(words: list[str], logprob: float = -0.5) -> dict[str, Any]:
    return {
        "content": [{"token": w, "logprob": logprob, "bytes": list(w.encode()),
                     "top_logprobs": []} for w in words],
        "refusal": None,
    }  # fmt: skip


def _usage(answer: str) -> dict[str, Any]:
    n = len(answer.split())
    return {"prompt_tokens": 10, "completion_tokens": n, "total_tokens": 10 + n}


def completion_body(
    answer: str, model: str, rule: dict[str, Any] | None = None, logprobs: bool = False
) -> dict[str, Any]:
    rule = rule or {}
    message: dict[str, Any] = {
        "role": "assistant", "content": answer or None, "refusal": None
    }  # fmt: skip
    if rule.get("tool_calls"):
        message["tool_calls"] = _tool_calls(rule)
    if rule.get("function_call"):
        message["function_call"] = dict(rule["function_call"])
    pieces = [w if i == 0 else " " + w for i, w in enumerate(answer.split(" "))] if answer else []
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": FINGERPRINT,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": _logprobs(pieces, rule.get("logprob", -0.5)) if logprobs else None,
                "finish_reason": _finish(rule),
            }
        ],
        "usage": _usage(answer),
    }


def _chunk(
    cid: str, model: str, delta: dict[str, Any], finish: str | None, **extra: Any
) -> dict[str, Any]:
    return {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": FINGERPRINT,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish, **extra}],
    }


def _tool_deltas(rule: dict[str, Any]) -> list[dict[str, Any]]:
    """Each tool call in two deltas (id and name, then the arguments), as OpenAI streams them."""
    out: list[dict[str, Any]] = []
    for i, call in enumerate(_tool_calls(rule)):
        fn = call["function"]
        out.append(
            {
                "tool_calls": [
                    {
                        "index": i,
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": fn["name"], "arguments": ""},
                    }
                ]
            }
        )
        out.append({"tool_calls": [{"index": i, "function": {"arguments": fn["arguments"]}}]})
    if rule.get("function_call"):
        fc = rule["function_call"]
        out.append({"function_call": {"name": fc["name"], "arguments": ""}})
        out.append({"function_call": {"arguments": fc.get("arguments", "{}")}})
    return out  # fmt: skip


async def stream_chunks(
    answer: str,
    model: str,
    cut: bool,
    drip_s: float = 0.0,
    rule: dict[str, Any] | None = None,
    options: dict[str, Any] | None = None,
) -> AsyncIterator[dict[str, Any]]:
    """The answer's chunks, a word each (``cut``: stop halfway, no finish chunk;
    ``drip_s``: wait before each word), then the rule's tool calls; ``options`` are the
    request's ``logprobs`` / ``stream_options``."""
    rule, options = rule or {}, options or {}
    cid = f"chatcmpl-{uuid.uuid4().hex[:12]}"
    yield _chunk(cid, model, {"role": "assistant", "content": ""}, None)
    words = answer.split(" ") if answer else []
    for i, w in enumerate(words):
        if cut and i >= len(words) // 2:
            return
        if drip_s:
            await asyncio.sleep(drip_s)
        piece = w if i == 0 else " " + w
        lp = rule.get("logprob", -0.5)
        extra = {"logprobs": _logprobs([piece], lp)} if options.get("logprobs") else {}
        yield _chunk(cid, model, {"content": piece}, None, **extra)
    for delta in _tool_deltas(rule):
        yield _chunk(cid, model, delta, None)
    yield _chunk(cid, model, {}, _finish(rule))
    if (options.get("stream_options") or {}).get("include_usage"):
        yield {**_chunk(cid, model, {}, None), "choices": [], "usage": _usage(answer)}
