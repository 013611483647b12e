"""What :mod:`guards.action`'s decision is given and gives back, as plain records: where a
streamed piece stands in its answer (:class:`Segment`), the answer-level decision in force
(:class:`InForce`), a rendered answer (:class:`Rendered`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from groundproxy.guards.adapter.combiner import Adapter
from groundproxy.guards.answer.rewrite import Cited
from groundproxy.guards.types import AnswerAction, ClaimResult


@dataclass
class Segment:
    """Where a streamed piece stands in its answer (``stream: sentence``): citation
    numbers continue in ``cited``; ``prior`` holds the claims already sent (the trust
    floor judges the answer so far)."""

    cited: Cited = field(default_factory=dict)
    prior: Sequence[ClaimResult] = ()


@dataclass(frozen=True)
class InForce:
    """The answer-level decision in force (rows 4-5) and what it reads: each claim's token
    alignment (``Adapter.uses_tokens``) and upstream logprobs (``Adapter.uses_logprobs``)."""

    adapter: Adapter
    alignment: Sequence[tuple[float, float, float]] | None = None
    logprobs: Sequence[tuple[float, float]] | None = None


@dataclass
class Rendered:
    text: str
    trust: float | None  # T of the returned text; None when blocked
    action: AnswerAction
    blocked: bool
