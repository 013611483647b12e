"""``POST /v1/groundproxy/check``: guard an answer the caller already has.

The building block for plugins (the LiteLLM guardrail in ``groundproxy.integrations``): the
answer is verified under the calling tenant's policy exactly as a chat completion's would be
(:meth:`GuardService.guard`), and the reply carries the same ``groundproxy`` body object and
``x-groundproxy-*`` headers, plus the text to return (rewritten, annotated or the refusal).

Request body::

    {"answer": str, "question": str | null, "messages": [chat messages], "context": [str],
     "model": str | null, "logprobs": the response choice's logprobs | null}

``messages`` are the conversation the answer replies to: its system/user/tool texts are
evidence, and its last user message is the question when ``question`` is absent.
``context`` strings are extra evidence (cited as ``request:context#<i>``). ``logprobs``: the
upstream's token logprobs of the answer, as its response choice carried them (for a
tenant adapter that reads them, :mod:`groundproxy.guards.logprobs`).
"""

from __future__ import annotations

from typing import Any

import structlog
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from groundproxy.errors import AuthenticationError
from groundproxy.guards import report_body, report_headers
from groundproxy.policies.loader import LoadedPolicy, PolicyStore
from groundproxy.proxy.auth import bearer_key, tenant_for
from groundproxy.proxy.body import read_body
from groundproxy.proxy.protocol import (
    ChatCompletionRequest,
    ChatMessage,
    parse_json_body,
    validated,
)
from groundproxy.proxy.serving.chat import new_step_id
from groundproxy.proxy.serving.traces import record_step, trace_for
from groundproxy.proxy.state import app_state, request_id
from groundproxy.proxy.storage.feedback import logprob_tokens

log = structlog.get_logger(__name__)
router = APIRouter()


class CheckRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    answer: str
    question: str | None = None
    messages: list[ChatMessage] = Field(default_factory=list)
    context: list[str] = Field(default_factory=list)
    model: str | None = None
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


def any_tenant_key(request: Request, store: PolicyStore) -> LoadedPolicy:
    """The tenant of an API key or of an admin key (a check reads nothing but the policy)."""
    try:
        return tenant_for(request, store)
    except AuthenticationError:
        loaded = store.lookup_admin_key(bearer_key(request))
        if loaded is None:
            raise
        return loaded


@router.post("/v1/groundproxy/check", response_model=None)
async def check(request: Request) -> JSONResponse:
    state = app_state(request)
    loaded = any_tenant_key(request, state.policies)
    structlog.contextvars.bind_contextvars(tenant=loaded.policy.tenant)
    settings = state.settings
    raw = await read_body(request, settings.max_body_bytes)
    req = parse_check_request(
        parse_json_body(raw, max_bytes=settings.max_body_bytes, max_depth=settings.max_json_depth)
    )
    _, guard = state.require()
    rid = request_id(request)
    trace = await trace_for(
        request.headers, state.traces, loaded.policy.tenant, loaded.policy.traces
    )
    question, context = req.the_question(), req.context_messages()
    logprob_tokens(req.logprobs)  # a malformed one is refused (400), not ignored
    report = await guard.guard(req.answer, question, context, loaded.policy, req.logprobs)
    step_id = new_step_id()
    headers = report_headers(report, loaded.policy_id, step_id, rid)
    if trace is not None:
        trace_id = await record_step(
            trace, step_id, rid, loaded.policy_id, question, context, report
        )
        if trace_id is not None:
            headers["x-groundproxy-trace-id"] = trace_id
    log.info(
        "checked",
        action=report.action,
        trust=round(report.trust, 3),
        claims=len(report.claims),
        guard_ms=round(report.latency_ms, 1),
    )
    body = {
        "groundproxy": report_body(report, loaded.policy_id),
        "answer": report.text,
        "action": report.action,
    }
    return JSONResponse(body, headers=headers)
