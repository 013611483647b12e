"""One guarded chat completion: upstream call, guard, and the annotated response body."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

import structlog

from groundproxy.guards import parse_json_answer, report_body, response_schema
from groundproxy.guards.types import GuardReport
from groundproxy.policies.loader import LoadedPolicy
from groundproxy.proxy.metrics import Metrics
from groundproxy.proxy.protocol import ChatCompletionRequest
from groundproxy.proxy.serving.guarding import GuardService
from groundproxy.proxy.serving.headers import response_headers
from groundproxy.proxy.serving.json_answer import guard_json
from groundproxy.proxy.serving.openai_shape import shape_completion
from groundproxy.proxy.serving.traces import TraceRequest, record_step
from groundproxy.proxy.streaming.pacing import within_deadline
from groundproxy.proxy.upstream.client import Upstream, resolve_model

log = structlog.get_logger(__name__)


@dataclass
class GuardedCompletion:
    body: dict[str, Any]
    headers: dict[str, str]
    report: GuardReport
    upstream_ms: float


def new_step_id() -> str:
    return f"st_{uuid.uuid4().hex[:16]}"


def _answer_text(choice: dict[str, Any]) -> str | None:
    message = choice.get("message") or {}
    content = message.get("content")
    return content if isinstance(content, str) else None


async def guarded_completion(
    req: ChatCompletionRequest,
    loaded: LoadedPolicy,
    upstream: Upstream,
    guard: GuardService,
    metrics: Metrics,
    request_id: str,
    stream_upstream: bool = False,
    trace: TraceRequest | None = None,
    deadline: bool = False,
) -> GuardedCompletion:
    """Call the upstream, guard every choice's text, and rewrite the body per the policy.

    A streamed upstream (or ``deadline``: the client asked for a stream) must answer
    within the policy's ``stream_deadline_ms`` (proxy.streaming.pacing)."""
    policy = loaded.policy
    model = resolve_model(policy.upstream, req.model)
    messages = [m.model_dump(exclude_none=True) for m in req.messages]
    call = upstream.complete(
        policy.upstream, model, messages, req.passthrough(), stream=stream_upstream
    )
    answer = await (within_deadline(policy, call) if stream_upstream or deadline else call)
    metrics.observe_upstream(policy.tenant, answer.seconds, answer.completion.usage)
    body = answer.body
    body["model"] = req.model
    question = req.question()
    context = req.context_messages()

    shape_completion(body)
    _, schema = response_schema(req.passthrough().get("response_format"))
    reports: list[GuardReport] = []
    dropped = False
    started = time.perf_counter()
    for choice in body.get("choices") or []:
        text = _answer_text(choice)
        if text is None:  # no prose (e.g. only tool calls): nothing to verify
            continue
        doc = parse_json_answer(text) if policy.guard else None
        if doc is not None:  # JSON stays JSON (asked for or not): its statements are claims
            report = await guard_json(text, doc, schema, question, context, policy, guard)
        else:
            lp = choice.get("logprobs")  # read only by an adapter that uses them
            report = await guard.guard(text, question, context, policy, lp)
        reports.append(report)
        choice["message"]["content"] = report.text
        if report.text != text and choice.get("logprobs"):
            choice["logprobs"] = None  # they described tokens the rewrite replaced
            dropped = True
        if report.blocked:
            choice["finish_reason"] = "content_filter"
            choice["message"].pop("tool_calls", None)
        if len(body["choices"]) > 1:
            choice["groundproxy"] = report_body(report, loaded.policy_id)

    guard_ms = (time.perf_counter() - started) * 1000.0
    # No text to verify (e.g. only tool calls): nothing was claimed, nothing is at risk.
    report = reports[0] if reports else GuardReport("", "", [], trust=1.0, action="none")
    report.latency_ms = guard_ms
    step_id = new_step_id()
    body["groundproxy"] = report_body(report, loaded.policy_id)
    if dropped:
        body["groundproxy"].setdefault("notes", []).append(
            "logprobs dropped: the answer was rewritten"
        )
    trace_id = None
    if trace is not None:  # multi-step traces: store this generation as a DAG node
        trace_id = await record_step(
            trace, step_id, request_id, loaded.policy_id, question, context, report
        )
    headers = response_headers(
        "buffer", loaded.policy_id, step_id, request_id, report=report, trace_id=trace_id
    )
    log.info(
        "guarded",
        action=report.action,
        trust=round(report.trust, 3),
        claims=len(report.claims),
        guard_ms=round(guard_ms, 1),
        upstream_ms=round(answer.seconds * 1000.0, 1),
    )
    return GuardedCompletion(body, headers, report, answer.seconds * 1000.0)
