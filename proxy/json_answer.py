"""Guarding a structured (JSON) answer: its statement values are verified as claims, and
the content stays valid JSON that still matches the requested schema (see
:mod:`guards.json_claims`). Verdicts go to the headers and the ``groundproxy`` object; no
marker or "Sources:" block is ever added."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from groundproxy.guards.json_claims import claim_text, guarded_json
from groundproxy.guards.types import GuardReport
from groundproxy.policies.schema import Policy
from groundproxy.proxy.guarding import GuardService


async def guard_json(
    text: str,
    doc: Any,
    schema: dict[str, Any] | None,
    question: str | None,
    context: list[tuple[str, str]],
    policy: Policy,
    guard: GuardService,
) -> GuardReport:
    """One guard run over the document's statements; ``report.text`` is the JSON to send."""
    found = claim_text(doc)
    if not found.leaves:
        return GuardReport(text, text, [], trust=1.0, action="none")
    report = await guard.guard(found.text, question, context, policy)
    content = guarded_json(
        text, found, report.claims, report.blocked, policy.actions.refusal, schema
    )
    return replace(report, original=text, text=content)
