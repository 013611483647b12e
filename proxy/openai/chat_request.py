"""OpenAI chat-completion request models (``extra="allow"``: unknown fields pass through)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from groundproxy.errors import BadRequestError, BodyTooLargeError
from groundproxy.proxy.openai.bounds import ModelName
from groundproxy.proxy.openai.json_strict import loads_strict
from groundproxy.proxy.openai.requests import ChatOptions


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: str
    content: str | list[dict[str, Any]] | None = None

    def text(self) -> str:
        """The message's text: a string, or the ``text`` parts of a content list."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        parts = [p.get("text", "") for p in self.content if p.get("type") == "text"]
        return "\n".join(p for p in parts if isinstance(p, str))


class ChatCompletionRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: ModelName
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False

    def passthrough(self) -> dict[str, Any]:
        """Every field except model/messages/stream, exactly as the client sent it."""
        return dict(self.model_extra or {})

    def question(self) -> str | None:
        for m in reversed(self.messages):
            if m.role == "user":
                return m.text() or None
        return None

    def context_messages(self) -> list[tuple[str, str]]:
        """The request's own evidence: system, user, tool (and developer) message texts."""
        roles = {"system", "developer", "user", "tool", "function"}
        return [(m.role, m.text()) for m in self.messages if m.role in roles and m.text()]


Role = Literal["system", "user", "assistant", "tool"]


def _depth(obj: Any, limit: int) -> int:
    stack: list[tuple[Any, int]] = [(obj, 1)]
    deepest = 0
    while stack:
        cur, d = stack.pop()
        deepest = max(deepest, d)
        if deepest > limit:
            return deepest
        if isinstance(cur, dict):
            stack.extend((v, d + 1) for v in cur.values())
        elif isinstance(cur, list):
            stack.extend((v, d + 1) for v in cur)
    return deepest


def parse_json_body(raw: bytes, *, max_bytes: int, max_depth: int) -> dict[str, Any]:
    """Size, encoding, JSON and nesting checks, each with its own clear error."""
    if len(raw) > max_bytes:
        raise BodyTooLargeError(f"request body is {len(raw)} bytes; the limit is {max_bytes}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequestError(f"request body is not valid UTF-8 ({exc.reason})") from exc
    try:
        data = loads_strict(text)  # NaN / Infinity / lone surrogates: 400 naming the field
    except RecursionError as exc:
        raise BadRequestError(f"request JSON nests deeper than {max_depth} levels") from exc
    except json.JSONDecodeError as exc:
        raise BadRequestError(
            f"request body is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from exc
    if not isinstance(data, dict):
        raise BadRequestError("request body must be a JSON object")
    if _depth(data, max_depth) > max_depth:
        raise BadRequestError(f"request JSON nests deeper than {max_depth} levels")
    return data


def field_path(loc: tuple[int | str, ...], data: Any, missing: bool = False) -> str:
    """pydantic's error location as a path into ``data`` ("messages.0.content"): the tags
    of a union's members (``list[float]``, ``function-after[…]``) are not part of the body
    and are dropped; ``missing``: the error is a missing field, the location's last part."""
    path: list[str] = []
    cur = data
    for part in loc:
        in_dict = isinstance(cur, dict) and part in cur
        in_list = isinstance(cur, list) and isinstance(part, int) and 0 <= part < len(cur)
        if not (in_dict or in_list):
            continue
        cur = cur[part]
        path.append(str(part))
    if missing and loc:
        path.append(str(loc[-1]))
    return ".".join(path)


M = TypeVar("M", bound=BaseModel)
_REQUIRED = {"missing": "'{param}' is a required property"}


def validated(model: type[M], data: dict[str, Any], messages: Mapping[str, str] | None = None) -> M:
    """``data`` as a ``model``; the first validation error → 400 naming its field.
    ``messages``: per pydantic error type, a template of ``{param}`` and ``{msg}``."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        # the most specific error: the deepest into the body (for a union, the member the
        # value was meant to be: a list's item rather than "not a string")
        found = [(field_path(e["loc"], data, missing=e["type"] == "missing"), e)
                 for e in exc.errors()]  # fmt: skip
        path, err = max(found, key=lambda f: len(f[0].split(".")) if f[0] else 0)
        param = path or None
        template = (messages or {}).get(err["type"], "'{param}': {msg}")
        raise BadRequestError(template.format(param=param, msg=err["msg"]), param=param) from exc


def checked(model: type[M], data: dict[str, Any]) -> M:
    """``data`` checked against one of :mod:`proxy.openai.requests`' models (400 naming
    the first bad field; a missing required one: "'model' is a required property")."""
    return validated(model, data, _REQUIRED)


def parse_chat_request(data: dict[str, Any]) -> ChatCompletionRequest:
    """The chat request, its other fields checked too (:class:`ChatOptions`)."""
    req = validated(ChatCompletionRequest, data, _REQUIRED)
    checked(ChatOptions, data)
    return req
