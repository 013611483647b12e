"""What an upstream sends back, checked at the boundary before anything reads it.

An OpenAI-compatible upstream is another server: its 200 bodies can be malformed (a
``message`` that is a string, usage counts as strings, ``tool_calls`` that is not a list, a
``created`` that is text, an embedding holding ``NaN``). Read as they came, such bodies
raised deep inside the proxy (``AttributeError``, ``ValueError``, a JSON encoder refusing
``NaN``) and the client got a 500 — our fault, when it was the upstream's. Every body is
checked here first, by both transports (litellm's and the direct wire): each field the
proxy reads must have its OpenAI type (``extra`` fields pass through unread), and no value
anywhere may be a non-finite number or hold a lone UTF-16 surrogate (neither can be sent
on as JSON). A failed check is an :class:`~groundproxy.errors.UpstreamError` with code
``upstream_invalid`` (HTTP 502) naming the field, never its value.

Integers are strict (``"12"`` is not a token count); ``null`` is accepted wherever the
proxy already treats a field as absent. A completion without any choice (``choices: []``)
is no answer at all: ``upstream_invalid`` too, never an empty answer passed on as trusted;
so is a chat choice without a ``message`` (or with ``message: null``), and a text
completion's choice without its ``text``.

A message's (or a stream delta's) ``content`` given as a list of text parts
(``[{"type": "text", "text": "..."}]``, as some OpenAI-compatible servers send it) is
joined here into the one string OpenAI's answers carry, so the guard reads — and the client
gets — that text like any other; a part of any other type (or without its ``text``) is
``upstream_invalid``: no reply shape reaches the client unguarded.
"""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from groundproxy.errors import UpstreamError
from groundproxy.proxy.openai.chat_request import field_path
from groundproxy.proxy.openai.json_strict import find_bad

Json = dict[str, Any]
INVALID = "upstream_invalid"


class _Open(BaseModel):
    """Typed where the proxy reads; anything else passes through."""

    model_config = ConfigDict(extra="allow", strict=True)


class Function(_Open):
    name: str | None = None
    arguments: str | None = None


class ToolCall(_Open):
    index: int | None = None  # stream deltas
    id: str | None = None
    type: str | None = None
    function: Function | None = None


class ContentPart(_Open):
    type: str
    text: str | None = None


class Message(_Open):
    role: str | None = None
    content: str | list[ContentPart] | None = None
    refusal: str | None = None
    tool_calls: list[ToolCall] | None = None
    function_call: Function | None = None


class TokenDetails(_Open):
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None


class Usage(_Open):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    prompt_tokens_details: TokenDetails | None = None
    completion_tokens_details: TokenDetails | None = None


class _Answer(_Open):
    id: str | None = None
    created: int | None = None
    model: str | None = None
    system_fingerprint: str | None = None
    usage: Usage | None = None


class ChatChoice(_Open):
    index: int | None = None
    message: Message  # a choice without one is no answer (upstream_invalid)
    finish_reason: str | None = None
    logprobs: Json | None = None


class ChatBody(_Answer):
    choices: Annotated[list[ChatChoice], Field(min_length=1)]  # none: no answer at all


class ChunkChoice(_Open):
    index: int | None = None
    delta: Message | None = None
    finish_reason: str | None = None
    logprobs: Json | None = None


class ChunkBody(_Answer):
    choices: list[ChunkChoice] | None = None


class TextChoice(_Open):
    index: int | None = None
    text: str  # a choice without its text is no answer (upstream_invalid), as in chat
    finish_reason: str | None = None
    logprobs: Json | None = None


class TextBody(_Answer):
    choices: Annotated[list[TextChoice], Field(min_length=1)]


class Embedding(_Open):
    index: int | None = None
    embedding: list[float] | str  # floats, or base64 (encoding_format: base64)


class EmbeddingsBody(_Open):
    data: list[Embedding]
    model: str | None = None
    usage: Usage | None = None


M = TypeVar("M", bound=_Open)


def invalid(what: str, field: str, problem: str) -> UpstreamError:
    return UpstreamError(
        f"The upstream model provider answered with an invalid {what}: '{field}': {problem}.",
        code=INVALID,
    )


def checked(model: type[M], body: Any, what: str) -> Json:
    """``body`` (returned as is) once it passes ``model`` and the JSON value checks;
    else ``upstream_invalid`` naming the first bad field."""
    if not isinstance(body, dict):
        raise invalid(what, "(body)", "not a JSON object")
    bad = find_bad(body)
    if bad is not None:
        raise invalid(what, bad[0] or "(body)", bad[1])
    try:
        model.model_validate(body)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = field_path(err["loc"], body, missing=err["type"] == "missing") or "(body)"
        raise invalid(what, field, str(err["msg"]).rstrip(".")) from None
    return body


def _joined(content: list[Any], where: str, what: str) -> str:
    """A content list of text parts as one string (module docstring)."""
    texts: list[str] = []
    for i, part in enumerate(content):
        if part.get("type") != "text":
            raise invalid(what, f"{where}.{i}.type", "only text parts can be guarded")
        text = part.get("text")
        if not isinstance(text, str):
            raise invalid(what, f"{where}.{i}.text", "a text part without its text")
        texts.append(text)
    return "".join(texts)


def _join_parts(body: Json, key: str, what: str) -> Json:
    """``body`` with each choice's ``key`` (``message`` or ``delta``) content list joined."""
    for i, choice in enumerate(body.get("choices") or []):
        message = choice.get(key)
        if isinstance(message, dict) and isinstance(message.get("content"), list):
            where = f"choices.{i}.{key}.content"
            message["content"] = _joined(message["content"], where, what)
    return body


def chat_body(body: Any) -> Json:
    return _join_parts(checked(ChatBody, body, "chat completion"), "message", "chat completion")


def chunk_body(body: Any) -> Json:
    return _join_parts(checked(ChunkBody, body, "stream chunk"), "delta", "stream chunk")


def text_body(body: Any) -> Json:
    return checked(TextBody, body, "text completion")


def embeddings_body(body: Any) -> Json:
    return checked(EmbeddingsBody, body, "embeddings body")
