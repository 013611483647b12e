"""groundproxy's verdict in LangChain: :class:`ChatGroundproxy`, ``ChatOpenAI`` that keeps it.

``langchain-openai``'s ``ChatOpenAI`` drops fields an OpenAI body does not define, so the
``groundproxy`` object (on a completion, and on a stream's last chunk) never reaches the
app; with ``include_response_headers=True`` the ``x-groundproxy-*`` headers do, but a
sentence-mode stream sends its headers before the answer exists. :class:`ChatGroundproxy`
is ``ChatOpenAI`` with one change: the ``groundproxy`` object lands in the message's
``response_metadata["groundproxy"]`` — on ``invoke``'s message, and on the chunk of a
stream that carried it (its last), so the chunks added together (or LangChain's
aggregated ``AIMessage``) hold it — in every stream mode, no request header needed::

    from groundproxy.integrations.langchain import ChatGroundproxy, verdict

    llm = ChatGroundproxy(model="gpt-4o-mini", base_url="http://localhost:8080/v1",
                          api_key="sk-...")
    answer = None
    for chunk in llm.stream("How long is the warranty?"):
        answer = chunk if answer is None else answer + chunk
    print(verdict(answer)["action"], verdict(answer)["trust"])

Needs only ``langchain-openai`` (never the groundproxy server). Answers with ``n > 1``
choices: each message gets its own choice's object.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_openai import ChatOpenAI

KEY = "groundproxy"


def verdict(message: BaseMessage | None) -> dict[str, Any] | None:
    """The ``groundproxy`` object a :class:`ChatGroundproxy` message carries (None: none)."""
    if message is None:
        return None
    found = message.response_metadata.get(KEY)
    return found if isinstance(found, dict) else None


def _body(response: Any) -> dict[str, Any]:
    if isinstance(response, dict):
        return response
    extra = getattr(response, "model_extra", None) or {}
    choices = getattr(response, "choices", None) or []
    return {
        KEY: extra.get(KEY),
        "choices": [{KEY: (getattr(c, "model_extra", None) or {}).get(KEY)} for c in choices],
    }


class ChatGroundproxy(ChatOpenAI):
    """``ChatOpenAI`` whose messages keep groundproxy's verdict (module docstring)."""

    def _convert_chunk_to_generation_chunk(
        self,
        chunk: dict[str, Any],
        default_chunk_class: type,
        base_generation_info: dict[str, Any] | None,
    ) -> ChatGenerationChunk | None:
        out = super()._convert_chunk_to_generation_chunk(
            chunk, default_chunk_class, base_generation_info
        )
        # a structured-output stream (beta.chat.completions.stream) wraps the chunk
        wrapped = chunk.get("chunk")
        inner: dict[str, Any] = wrapped if isinstance(wrapped, dict) else chunk
        found = chunk.get(KEY) or inner.get(KEY)
        if out is not None and isinstance(found, dict):
            out.message.response_metadata[KEY] = found
        return out

    def _create_chat_result(
        self, response: Any, generation_info: dict[str, Any] | None = None
    ) -> ChatResult:
        result = super()._create_chat_result(response, generation_info)
        body = _body(response)
        whole = body.get(KEY)
        choices = body.get("choices") or []
        for i, generation in enumerate(result.generations):
            own = choices[i].get(KEY) if i < len(choices) else None
            found = own if isinstance(own, dict) else whole
            if isinstance(found, dict):
                generation.message.response_metadata[KEY] = found
        return result


__all__ = ["ChatGroundproxy", "verdict"]
