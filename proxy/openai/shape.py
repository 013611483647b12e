"""Bodies and stream chunks exactly as OpenAI's schema shapes them.

Upstreams (litellm's objects dumped with every field) add what the schema does not allow or
type differently: ``tool_calls: null`` / ``function_call: null`` on text messages, null
token-detail objects and null integers in usage, ``provider_specific_fields`` on messages
and choices, ``id: null`` inside streamed tool-call deltas. These functions drop them and
add the fields the schema requires (``message.refusal``, ``choice.logprobs``) so every
response validates against ``CreateChatCompletionResponse`` /
``CreateChatCompletionStreamResponse``.
"""

from __future__ import annotations

import uuid
from typing import Any

Json = dict[str, Any]

_VENDOR = ("provider_specific_fields",)
_OPTIONAL_MESSAGE = ("tool_calls", "function_call", "audio", "annotations", "reasoning_content")


def _no_nulls(value: Any) -> Any:
    """``value`` with every null-valued key of every object dropped (tool-call deltas)."""
    if isinstance(value, dict):
        return {k: _no_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_no_nulls(v) for v in value]
    return value


def shape_usage(usage: Json | None) -> Json | None:
    """Usage without null counts or null/empty detail objects (None when nothing is left)."""
    if not usage:
        return None
    out: Json = {}
    for key, value in usage.items():
        if isinstance(value, dict):
            value = {k: v for k, v in value.items() if v is not None}
        if value is None or value == {}:
            continue
        out[key] = value
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        out.setdefault(key, 0)
    return out


def _strip(obj: Json, keys: tuple[str, ...]) -> None:
    for key in _VENDOR:
        obj.pop(key, None)
    for key in keys:
        if obj.get(key) is None:
            obj.pop(key, None)


def shape_message(message: Json) -> Json:
    _strip(message, _OPTIONAL_MESSAGE)
    message.setdefault("content", None)
    message.setdefault("refusal", None)
    message["role"] = "assistant"
    if message.get("tool_calls"):
        message["tool_calls"] = _no_nulls(message["tool_calls"])
    return message


def shape_completion(body: Json) -> Json:
    """A ``chat.completion`` body made schema-exact (in place; also returned)."""
    _strip(body, ("system_fingerprint", "service_tier", "usage"))
    body["object"] = "chat.completion"
    for choice in body.get("choices") or []:
        _strip(choice, ())
        choice.setdefault("logprobs", None)
        if isinstance(choice["logprobs"], dict):  # both keys are required (nullable)
            choice["logprobs"] = {"content": None, "refusal": None, **choice["logprobs"]}
        choice["message"] = shape_message(choice.get("message") or {})
        choice["finish_reason"] = choice.get("finish_reason") or "stop"
    usage = shape_usage(body.get("usage"))
    if usage is None:
        body.pop("usage", None)
    else:
        body["usage"] = usage
    return body


def shape_delta(delta: Json) -> Json:
    """One streamed delta without nulls the schema does not allow (``content: null`` is)."""
    out = {k: v for k, v in delta.items() if v is not None or k == "content"}
    for key in _VENDOR:
        out.pop(key, None)
    if out.get("tool_calls"):
        out["tool_calls"] = _no_nulls(out["tool_calls"])
    if out.get("function_call"):
        out["function_call"] = _no_nulls(out["function_call"])
    return out


def wants_usage(extra: Json) -> bool:
    """Did the request ask for a final usage chunk (``stream_options.include_usage``)?"""
    options = extra.get("stream_options")
    return isinstance(options, dict) and bool(options.get("include_usage"))


def is_json_request(extra: Json) -> bool:
    """Does the request's ``response_format`` ask for JSON (``json_object`` / ``json_schema``)?"""
    fmt = extra.get("response_format")
    return isinstance(fmt, dict) and fmt.get("type") in ("json_object", "json_schema")


def message_item(text: str, status: str = "completed") -> Json:
    """A Responses API ``message`` output item holding ``text``."""
    part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
    return {
        "id": f"msg_{uuid.uuid4().hex}",
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": [part] if text or status == "completed" else [],
    }
