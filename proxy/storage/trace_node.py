"""A trace node as both backends store it: its columns (in this order, in SQLite's ``nodes``
and PostgreSQL's ``gp_trace_nodes``) and :class:`StoredNode`, one row of them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from groundproxy.guards import TraceClaim, TraceNode

COLS = (
    "step_id, trace_id, parents, created, request_id, policy, question_sha256, "
    "context_sha256, answer, trust, action, claims"
)


@dataclass(frozen=True)
class StoredNode:
    step_id: str
    trace_id: str
    parents: tuple[str, ...]
    created: float
    request_id: str
    policy: str
    question_sha256: str
    context_sha256: str
    answer: str
    trust: float
    action: str
    claims: list[dict[str, Any]]

    @classmethod
    def from_row(cls, row: Sequence[Any], decode: Callable[[Any], Any]) -> StoredNode:
        """A node from a row of ``COLS``; ``decode`` reads the JSON columns (parents, claims)."""
        return cls(
            step_id=str(row[0]),
            trace_id=str(row[1]),
            parents=tuple(decode(row[2])),
            created=float(row[3]),
            request_id=str(row[4]),
            policy=str(row[5]),
            question_sha256=str(row[6]),
            context_sha256=str(row[7]),
            answer=str(row[8]),
            trust=float(row[9]),
            action=str(row[10]),
            claims=list(decode(row[11])),
        )

    def row(self, encode: Callable[[Any], Any]) -> tuple[Any, ...]:
        """The values of ``COLS``; ``encode`` writes the JSON columns (parents, claims)."""
        return (
            self.step_id,
            self.trace_id,
            encode(list(self.parents)),
            self.created,
            self.request_id,
            self.policy,
            self.question_sha256,
            self.context_sha256,
            self.answer,
            self.trust,
            self.action,
            encode(self.claims),
        )

    def walk_node(self) -> TraceNode:
        claims = tuple(
            TraceClaim(
                text=str(c["text"]),
                verdict=str(c["verdict"]),
                explanation=str(c.get("explanation", "")),
                support=float(c.get("support", 0.0)),
            )
            for c in self.claims
        )
        outputs: list[TraceClaim] = []
        for c, tc in zip(self.claims, claims, strict=True):
            action = c.get("action")
            if action in ("removed", "blocked"):
                continue  # never reached a child step
            if action == "corrected" and c.get("correction"):
                why = f"the proxy corrected it ({tc.explanation})"
                outputs.append(TraceClaim(str(c["correction"]), "supported", why, 1.0))
            else:
                outputs.append(tc)
        return TraceNode(
            step_id=self.step_id,
            parents=self.parents,
            created=self.created,
            claims=claims,
            outputs=tuple(outputs),
        )

    def public(self) -> dict[str, Any]:
        return {
            "step_id": self.step_id,
            "trace_id": self.trace_id,
            "parents": list(self.parents),
            "created": self.created,
            "policy": self.policy,
            "question_sha256": self.question_sha256,
            "context_sha256": self.context_sha256,
            "trust": shown_trust(self.trust, self.claims),
            "action": self.action,
            "answer": self.answer,
            "claims": self.claims,
        }


def shown_trust(trust: float, claims: list[dict[str, Any]]) -> float | None:
    """The stored trust as the answer's body reported it (``GuardReport.reported_trust``):
    None for an answer with no claims, or none of whose claims was checked (all
    ``unverified``: guard off, failed or past its budget); else ``trust``."""
    if not claims or all(c.get("action") == "unverified" for c in claims):
        return None
    return trust
