"""The judge step's result for one answer or piece (pure data): the merged verdicts
(:class:`Judged`), the figures (:class:`JudgeSummary`) and whether the judge could not be
heard (:func:`failed`, which :mod:`guards.action` reads: ``on_guard_error: block``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from groundproxy.guards.judge.opinion import SkipReason
from groundproxy.guards.types import ClaimResult

# skip reasons that mean the judge could not be heard (on_guard_error: block refuses)
FAILURES: frozenset[str] = frozenset({"timeout", "error", "bad_json", "rate_limit", "budget"})


@dataclass(frozen=True)
class JudgeSummary:
    """One answer's judge figures (header ``x-groundproxy-judge``, body, metrics)."""

    escalated: int = 0
    overturned: int = 0
    skipped: int = 0
    ms: float = 0.0
    reasons: tuple[SkipReason, ...] = ()
    model: str = ""
    # who decided the answer alone, so that nothing was escalated: "adapter" (the tenant's
    # adapter, sure of it) or "zero_shot" (zero-shot, proven on the tenant's labels); "" else
    decided_by: str = ""
    audit: bool = False  # judged although a decision would have decided it (judge.audit)

    def add(self, other: JudgeSummary) -> JudgeSummary:
        return JudgeSummary(
            self.escalated + other.escalated,
            self.overturned + other.overturned,
            self.skipped + other.skipped,
            self.ms + other.ms,
            self.reasons + other.reasons,
            self.model or other.model,
            self.decided_by if self.decided_by == other.decided_by else "",
            self.audit or other.audit,
        )

    def as_dict(self) -> dict[str, Any]:
        reasons: dict[str, int] = {}
        for r in self.reasons:
            reasons[r] = reasons.get(r, 0) + 1
        return {
            "escalated": self.escalated, "overturned": self.overturned, "skipped": self.skipped,
            "ms": round(self.ms, 1), "model": self.model, "skipped_reasons": reasons,
            **({"decided_by": self.decided_by} if self.decided_by else {}),
            **({"audit": True} if self.audit else {}),
        }  # fmt: skip


@dataclass
class Judged:
    """The judge step's result for one answer or piece: the merged verdicts, the figures."""

    results: list[ClaimResult]
    summary: JudgeSummary


def failed(summary: JudgeSummary) -> bool:
    """Did a judge call that mattered fail (timeout, error, bad JSON, rate limit, budget)?"""
    return any(r in FAILURES for r in summary.reasons)
