"""Guarding a structured (JSON) answer: its statement values are verified as claims, and
the content stays valid JSON that still matches the requested schema (see
:mod:`guards.claims.json_claims`). Verdicts go to the headers and the ``groundproxy`` object; no
marker or "Sources:" block is ever added."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from groundproxy.guards import claim_text, guarded_json, no_claims_report, unmade_edits
from groundproxy.guards.types import GuardReport
from groundproxy.policies.schema import Policy
from groundproxy.proxy.serving.call import Asked
from groundproxy.proxy.serving.guarding import GuardService


async def guard_json(
    text: str,
    doc: Any,
    schema: dict[str, Any] | None,
    asked: Asked,
    policy: Policy,
    guard: GuardService,
) -> GuardReport:
    """One guard run over the document's statements; ``report.text`` is the JSON to send."""
    found = claim_text(doc)
    if not found.leaves:
        return no_claims_report(text)
    report = await guard.guard(found.text, asked.question, list(asked.context), policy)
    edited = guarded_json(
        text, found, report.claims, report.blocked, policy.actions.refusal, schema
    )
    return unmade_edits(replace(report, original=text, text=edited.text), edited.unmade)


class JsonHold:
    """Sentence mode meets an answer that turns out to be JSON (its first visible character
    is ``{`` or ``[``): the answer is held whole and guarded as JSON at the end, never
    sentence by sentence (markers and sources would break it)."""

    def __init__(self) -> None:
        self.held: list[str] = []
        self.is_json: bool | None = None  # None until the first visible character

    def take(self, content: str) -> str:
        """The part of ``content`` to stream as prose now ("" while held)."""
        if self.is_json is False:
            return content
        self.held.append(content)
        if self.is_json is None:
            joined = "".join(self.held)
            if not joined.strip():
                return ""
            self.is_json = joined.lstrip()[0] in "{["
            if not self.is_json:
                self.held.clear()
                return joined
        return ""

    @property
    def text(self) -> str:
        return "".join(self.held)
