"""What the verdict inspector (``/ui``) reads beside a trace node: the answer as returned.

A trace node (:mod:`groundproxy.proxy.serving.traces`) keeps the upstream's original answer and its
claims; this table, in the same per-tenant SQLite file, adds per step what the inspector
shows and the node lacks: the client's model name, the text the proxy returned (capped
like the original), the guard's latency, the verifier's name and each claim's three
probabilities. Rows are written in the node's own transaction and pruned with it (a row
whose node is gone is deleted at the node store's next prune).

Reading joins the two tables: the recent answers of a tenant (newest first, searchable by
request id, trace id or step id) and one answer in full.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from groundproxy.guards.types import GuardReport

MAX_RETURNED_CHARS = 20_000
MAX_LIST = 200

_SCHEMA = """
CREATE TABLE IF NOT EXISTS answers (
    step_id TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    returned TEXT NOT NULL,
    latency_ms REAL NOT NULL,
    verifier TEXT NOT NULL,
    probs TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS nodes_by_request ON nodes (request_id);
"""
_COLS = (
    "n.step_id, n.trace_id, n.parents, n.created, n.request_id, n.policy, n.answer, n.trust, "
    "n.action, n.claims, a.model, a.returned, a.latency_ms, a.verifier, a.probs"
)
_FROM = "FROM nodes n LEFT JOIN answers a ON a.step_id = n.step_id"


def create_schema(conn: sqlite3.Connection) -> None:
    """Create the table (after the ``nodes`` table exists)."""
    conn.executescript(_SCHEMA)


def insert(
    conn: sqlite3.Connection, step_id: str, model: str, report: GuardReport, max_claims: int
) -> None:
    """Store one step's returned answer; call inside the node's transaction."""
    probs = [
        [
            round(r.probs.supported, 4),
            round(r.probs.contradicted, 4),
            round(r.probs.unverifiable, 4),
        ]
        for r in report.claims[:max_claims]
    ]
    conn.execute(
        "INSERT OR REPLACE INTO answers (step_id, model, returned, latency_ms, verifier, probs) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (
            step_id,
            model[:200],
            report.text[:MAX_RETURNED_CHARS],
            round(report.latency_ms, 1),
            report.verifier[:200],
            json.dumps(probs),
        ),
    )


def prune_orphans(conn: sqlite3.Connection) -> int:
    """Delete rows whose node was pruned; call inside the prune's transaction."""
    cur = conn.execute("DELETE FROM answers WHERE step_id NOT IN (SELECT step_id FROM nodes)")
    return int(cur.rowcount)


@dataclass(frozen=True)
class Answer:
    """One guarded answer as the inspector shows it."""

    step_id: str
    trace_id: str
    parents: list[str]
    created: float
    request_id: str
    policy: str
    original: str
    trust: float
    action: str
    claims: list[dict[str, Any]]
    model: str | None
    returned: str | None
    latency_ms: float | None
    verifier: str | None

    def counts(self) -> dict[str, int]:
        tally = Counter(str(c.get("verdict")) for c in self.claims)
        return {v: tally.get(v, 0) for v in ("supported", "contradicted", "unverifiable")}

    def summary(self) -> dict[str, Any]:
        return {
            "step_id": self.step_id,
            "trace_id": self.trace_id,
            "request_id": self.request_id,
            "created": self.created,
            "model": self.model,
            "policy": self.policy,
            "trust": self.trust,
            "action": self.action,
            "claims": len(self.claims),
            "counts": self.counts(),
            "latency_ms": self.latency_ms,
            "steps_in": len(self.parents),
        }

    def detail(self) -> dict[str, Any]:
        return {
            **self.summary(),
            "object": "groundproxy.answer",
            "parents": self.parents,
            "verifier": self.verifier,
            "original": self.original,
            "returned": self.returned,
            "claims": self.claims,
        }


def _answer(row: Sequence[Any]) -> Answer:
    claims = list(json.loads(row[9]))
    probs = json.loads(row[14]) if row[14] is not None else []
    for claim, p in zip(claims, probs, strict=False):
        claim["probs"] = {"supported": p[0], "contradicted": p[1], "unverifiable": p[2]}
    return Answer(
        step_id=str(row[0]),
        trace_id=str(row[1]),
        parents=list(json.loads(row[2])),
        created=float(row[3]),
        request_id=str(row[4]),
        policy=str(row[5]),
        original=str(row[6]),
        trust=float(row[7]),
        action=str(row[8]),
        claims=claims,
        model=None if row[10] is None else str(row[10]),
        returned=None if row[11] is None else str(row[11]),
        latency_ms=None if row[12] is None else float(row[12]),
        verifier=None if row[13] is None else str(row[13]),
    )


def recent(
    conn: sqlite3.Connection, not_before: float, limit: int, query: str | None = None
) -> list[Answer]:
    """Newest first; ``query`` matches a request id, trace id or step id exactly."""
    limit = max(1, min(limit, MAX_LIST))
    if query:
        sql = (
            f"SELECT {_COLS} {_FROM} WHERE n.created >= ? AND (n.request_id = ? OR "
            "n.trace_id = ? OR n.step_id = ?) ORDER BY n.created DESC, n.step_id DESC LIMIT ?"
        )
        args: tuple[Any, ...] = (not_before, query, query, query, limit)
    else:
        sql = (
            f"SELECT {_COLS} {_FROM} WHERE n.created >= ? "
            "ORDER BY n.created DESC, n.step_id DESC LIMIT ?"
        )
        args = (not_before, limit)
    return [_answer(r) for r in conn.execute(sql, args).fetchall()]


def one(conn: sqlite3.Connection, step_id: str, not_before: float) -> Answer | None:
    row = conn.execute(
        f"SELECT {_COLS} {_FROM} WHERE n.step_id = ? AND n.created >= ?", (step_id, not_before)
    ).fetchone()
    return None if row is None else _answer(row)
