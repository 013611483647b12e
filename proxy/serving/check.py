"""``POST /v1/groundproxy/check`` served: guard an answer the caller already has.

The building block for plugins (the LiteLLM guardrail in ``groundproxy.integrations``): the
answer is verified under the calling tenant's policy exactly as a chat completion's would
be, through the one guarded call, and the reply carries the same ``groundproxy`` body
object and ``x-groundproxy-*`` headers, plus the text to return (rewritten, annotated or
the refusal).

Request body::

    {"answer": str, "question": str | null, "messages": [chat messages], "context": [str],
     "model": str | null, "logprobs": the response choice's logprobs | null}

``messages`` are the conversation the answer replies to: its system/user/tool texts are
evidence, and its last user message is the question when ``question`` is absent.
``context`` strings are extra evidence (cited as ``request:context#<i>``). ``logprobs``: the
upstream's token logprobs of the answer, as its response choice carried them (for a
tenant adapter that reads them, :mod:`groundproxy.guards.verdict.logprobs`).
"""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from groundproxy.guards import report_body
from groundproxy.proxy.openai.bounds import BoundedText, EvidenceItems, ModelName, StoredText
from groundproxy.proxy.openai.chat_request import ChatCompletionRequest, ChatMessage, validated
from groundproxy.proxy.serving.call import Asked, GuardedCall, Scope
from groundproxy.proxy.serving.guarding import Held
from groundproxy.proxy.storage.feedback import logprob_tokens


class CheckRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    answer: StoredText  # kept in the trace store (proxy.openai.bounds)
    question: BoundedText | None = None
    messages: list[ChatMessage] = Field(default_factory=list)
    context: EvidenceItems = Field(default_factory=list)
    model: ModelName | None = None
    logprobs: dict[str, Any] | list[Any] | None = None

    def conversation(self) -> ChatCompletionRequest | None:
        if not self.messages:
            return None
        return ChatCompletionRequest(model=self.model or "check", messages=self.messages)

    def the_question(self) -> str | None:
        if self.question is not None:
            return self.question or None
        conv = self.conversation()
        return conv.question() if conv is not None else None

    def context_messages(self) -> list[tuple[str, str]]:
        """The conversation's evidence messages, then each ``context`` string."""
        conv = self.conversation()
        out = conv.context_messages() if conv is not None else []
        return out + [("context", text) for text in self.context if text.strip()]


_MESSAGES = {
    "missing": "'{param}' is a required property",
    "extra_forbidden": "'{param}' is not a field of a check request",
}


def parse_check_request(data: dict[str, object]) -> CheckRequest:
    return validated(CheckRequest, data, _MESSAGES)


class CheckServing:
    """Answers checked over the guarded call (no upstream)."""

    def __init__(self, call: GuardedCall) -> None:
        self.call = call

    async def check(self, scope: Scope, req: CheckRequest) -> Response:
        logprob_tokens(req.logprobs)  # a malformed one is refused (400), not ignored
        asked = Asked(req.the_question(), req.context_messages())

        async def guarded(held: Held) -> Response:
            report = await self.call.guard_text(scope, req.answer, asked, req.logprobs)
            headers = await self.call.conclude(scope, report, asked)
            body = {
                "groundproxy": report_body(report, scope.policy_id),
                "answer": report.text,
                "action": report.action,
            }
            return JSONResponse(body, headers=headers)

        return await self.call.run(scope, guarded)
