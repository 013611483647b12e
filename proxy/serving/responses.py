"""OpenAI's Responses API (``POST /v1/responses``) on top of chat completions.

groundproxy answers a Responses request by translating it into one chat completion
(:func:`to_chat`), guarding that like any chat answer (``proxy.serving.chat.ChatServing.complete``:
the output text's claims verified and rewritten per the policy), and translating the
guarded completion back (:func:`to_response`). So every upstream litellm can call serves
the Responses API too; what a chat completion cannot express is refused with a clear 400
(``previous_response_id`` and ``conversation``: groundproxy keeps no conversation state;
built-in tools such as ``web_search``: only ``function`` tools translate).

Mapped: ``input`` (a string, or message / ``function_call`` / ``function_call_output``
items), ``instructions`` (a system message), ``max_output_tokens``, ``temperature``,
``top_p``, ``user``, ``metadata``, ``parallel_tool_calls``, function ``tools`` and
``tool_choice``, ``text.format`` (``json_object`` / ``json_schema`` → ``response_format``).
Other fields are ignored.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from groundproxy.errors import BadRequestError
from groundproxy.proxy.openai.shape import message_item

Json = dict[str, Any]
_COPIED = ("temperature", "top_p", "user", "metadata", "parallel_tool_calls", "store")
_REFUSED = ("previous_response_id", "conversation")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict)]
        return "\n".join(p for p in parts if isinstance(p, str))
    return ""


def _messages(items: Any) -> list[Json]:
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    if not isinstance(items, list) or not items:
        raise BadRequestError("'input' must be a non-empty string or array", param="input")
    out: list[Json] = []
    for item in items:
        if not isinstance(item, dict):
            raise BadRequestError("'input' items must be objects", param="input")
        kind = item.get("type", "message")
        if kind == "message":
            out.append({"role": item.get("role", "user"), "content": _text(item.get("content"))})
        elif kind == "function_call":
            call = {"name": item.get("name"), "arguments": item.get("arguments", "")}
            tool_call = {"id": item.get("call_id"), "type": "function", "function": call}
            out.append({"role": "assistant", "content": None, "tool_calls": [tool_call]})
        elif kind == "function_call_output":
            out.append(
                {"role": "tool", "tool_call_id": item.get("call_id"), "content": item.get("output")}
            )
        else:
            raise BadRequestError(f"input items of type '{kind}' are not supported", param="input")
    return out


def _tools(tools: Any) -> list[Json]:
    out = []
    for tool in tools or []:
        if not isinstance(tool, dict) or tool.get("type") != "function":
            kind = tool.get("type") if isinstance(tool, dict) else tool
            raise BadRequestError(f"only function tools are supported, not '{kind}'", param="tools")
        fn = {k: tool[k] for k in ("name", "description", "parameters", "strict") if k in tool}
        out.append({"type": "function", "function": fn})
    return out


def _response_format(text: Any) -> Json | None:
    fmt = text.get("format") if isinstance(text, dict) else None
    if not isinstance(fmt, dict) or fmt.get("type") in (None, "text"):
        return None
    if fmt["type"] == "json_schema":
        schema = {k: fmt[k] for k in ("name", "schema", "strict", "description") if k in fmt}
        return {"type": "json_schema", "json_schema": schema}
    return {"type": fmt["type"]}


def to_chat(data: Json) -> Json:
    """A Responses request → the chat completion request that answers it."""
    for name in _REFUSED:
        if data.get(name):
            raise BadRequestError(
                f"'{name}' is not supported: groundproxy keeps no conversation state; "
                "send the whole conversation in 'input'",
                param=name,
            )
    messages = _messages(data.get("input"))
    if isinstance(data.get("instructions"), str) and data["instructions"]:
        messages.insert(0, {"role": "system", "content": data["instructions"]})
    chat: Json = {"model": data.get("model"), "messages": messages}
    chat.update({k: data[k] for k in _COPIED if data.get(k) is not None})
    chat.pop("store", None)
    if data.get("max_output_tokens") is not None:
        chat["max_tokens"] = data["max_output_tokens"]
    if data.get("tools"):
        chat["tools"] = _tools(data["tools"])
    choice = data.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "function":
        chat["tool_choice"] = {"type": "function", "function": {"name": choice.get("name")}}
    elif isinstance(choice, str):
        chat["tool_choice"] = choice
    fmt = _response_format(data.get("text"))
    if fmt is not None:
        chat["response_format"] = fmt
    return chat


def _usage(usage: Json | None) -> Json:
    """The chat ``usage`` as the Responses API's (every field the spec requires)."""
    usage = usage or {}
    prompt = int(usage.get("prompt_tokens") or 0)
    completion = int(usage.get("completion_tokens") or 0)
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    reasoning = (usage.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": int(cached), "cache_write_tokens": 0},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": int(reasoning)},
        "total_tokens": prompt + completion,
    }


def _output(choice: Json) -> list[Json]:
    message = choice.get("message") or {}
    out = []
    if isinstance(message.get("content"), str):
        out.append(message_item(message["content"]))
    for call in message.get("tool_calls") or []:
        fn = call.get("function") or {}
        out.append({
            "id": f"fc_{uuid.uuid4().hex}", "type": "function_call", "status": "completed",
            "call_id": call.get("id"), "name": fn.get("name"), "arguments": fn.get("arguments"),
        })  # fmt: skip
    return out


def _echoed(tool: Json) -> Json:
    """A request's tool as the response echoes it: a function tool with the fields the
    spec requires (``strict`` and ``parameters``: null when the request left them out —
    nothing was asked of the upstream)."""
    if isinstance(tool, dict) and tool.get("type") == "function":
        return {"parameters": None, "strict": None, **tool}
    return tool


def to_response(data: Json, body: Json, response_id: str) -> Json:
    """The guarded chat completion ``body`` → the Responses API's ``response`` object."""
    choice = (body.get("choices") or [{}])[0]
    finish = choice.get("finish_reason")
    incomplete = {"length": "max_output_tokens", "content_filter": "content_filter"}.get(finish)
    response: Json = {
        "id": response_id,
        "object": "response",
        "created_at": int(body.get("created") or time.time()),
        "status": "incomplete" if incomplete else "completed",
        "error": None,
        "incomplete_details": {"reason": incomplete} if incomplete else None,
        "instructions": data.get("instructions"),
        "max_output_tokens": data.get("max_output_tokens"),
        "model": data.get("model"),
        "output": _output(choice),
        "parallel_tool_calls": bool(data.get("parallel_tool_calls", True)),
        "previous_response_id": None,
        "temperature": data.get("temperature"),
        "text": data.get("text") or {"format": {"type": "text"}},
        "tool_choice": data.get("tool_choice", "auto"),
        "tools": [_echoed(t) for t in data.get("tools") or []],
        "top_p": data.get("top_p"),
        "truncation": "disabled",
        "usage": _usage(body.get("usage")),
        "metadata": data.get("metadata") or {},
    }
    if data.get("user") is not None:  # the spec's `user` is a string, never null
        response["user"] = data["user"]
    if "groundproxy" in body:
        response["groundproxy"] = body["groundproxy"]
    return response
