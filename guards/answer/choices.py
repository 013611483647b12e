"""One verdict over an answer's several choices (chat ``n > 1``, a list of legacy prompts).

Each choice is guarded on its own and carries its own ``groundproxy`` object; the headers,
the top-level ``groundproxy`` object, the trace node and the access log speak for the whole
response, so they take :func:`combined`, the aggregate over every choice:

- ``claims``: every choice's claims, in choice order (spans moved into ``original``, the
  choices' texts joined by :data:`SEPARATOR`), so ``x-groundproxy-claims`` and
  ``x-groundproxy-citations`` count and list them all;
- ``trust``: the lowest trust of the choices that have one (a choice without claims has
  none: ``n/a``); ``action``: the strongest (:data:`guards.action.STRENGTH`); ``blocked`` /
  ``unverified``: any choice's;
- ``judge``: the judge's figures summed (escalated, overturned, skipped and their reasons,
  milliseconds); ``context``: the request-context costs summed;
- ``latency_ms``: the caller's (the whole guard's time).

One choice's aggregate is that choice's own report.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from groundproxy.guards.action import strongest
from groundproxy.guards.types import Claim, ClaimResult, ContextStats, GuardReport

SEPARATOR = "\n\n"  # between the choices' texts in the aggregate's ``original`` / ``text``


def _moved(results: Sequence[ClaimResult], offset: int) -> list[ClaimResult]:
    return [
        dataclasses.replace(r, claim=Claim(r.claim.text, (r.claim.span[0] + offset,
                                                          r.claim.span[1] + offset)))
        for r in results
    ]  # fmt: skip


def combined_judge(figures: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The judge's figures of several choices as one (the shape of ``JudgeSummary.as_dict``)."""
    if not figures:
        return None
    out: dict[str, Any] = {"escalated": 0, "overturned": 0, "skipped": 0, "ms": 0.0,
                           "model": "", "skipped_reasons": {}}  # fmt: skip
    decided = {f.get("decided_by", "") for f in figures}
    for f in figures:
        for key in ("escalated", "overturned", "skipped"):
            out[key] += int(f.get(key) or 0)
        out["ms"] += float(f.get("ms") or 0.0)
        out["model"] = out["model"] or f.get("model") or ""
        for reason, n in (f.get("skipped_reasons") or {}).items():
            out["skipped_reasons"][reason] = out["skipped_reasons"].get(reason, 0) + int(n)
    out["ms"] = round(out["ms"], 1)
    if len(decided) == 1 and "" not in decided:
        out["decided_by"] = decided.pop()
    if any(f.get("audit") for f in figures):
        out["audit"] = True
    return out


def _context(reports: Sequence[GuardReport]) -> ContextStats | None:
    stats = [r.context for r in reports if r.context is not None]
    if not stats:
        return None
    total = ContextStats()
    for s in stats:
        total.add(s)
    return total


def combined(reports: Sequence[GuardReport], latency_ms: float = 0.0) -> GuardReport:
    """The aggregate report of an answer's choices (module docstring); ``reports`` in
    choice order, at least one."""
    if not reports:
        raise ValueError("no choice to combine")
    if len(reports) == 1:
        return dataclasses.replace(reports[0], latency_ms=latency_ms)
    claims: list[ClaimResult] = []
    offset = 0
    for r in reports:
        claims.extend(_moved(r.claims, offset))
        offset += len(r.original) + len(SEPARATOR)
    trusts = [r.trust for r in reports if r.reported_trust is not None]
    return GuardReport(
        original=SEPARATOR.join(r.original for r in reports),
        text=SEPARATOR.join(r.text for r in reports),
        claims=claims,
        trust=min(trusts) if trusts else 1.0,
        action=strongest(r.action for r in reports),
        blocked=any(r.blocked for r in reports),
        unverified=any(r.unverified for r in reports),
        latency_ms=latency_ms,
        verifier=next((r.verifier for r in reports if r.verifier), ""),
        adapter=reports[0].adapter,
        context=_context(reports),
        judge=combined_judge([r.judge for r in reports if r.judge is not None]),
    )
