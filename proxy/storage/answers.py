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
from groundproxy.proxy.storage.trace_node import COLS, StoredNode, shown_trust

MAX_RETURNED_CHARS = 20_000
MAX_LIST = 200

_NODE = len(COLS.split(","))  # the node's columns come first, then the answer's
_COLS = ", ".join(f"n.{c.strip()}" for c in COLS.split(",")) + (
    ", a.model, a.returned, a.latency_ms, a.verifier, a.probs"
)
_FROM = "FROM nodes n LEFT JOIN answers a ON a.step_id = n.step_id"


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
            "trust": shown_trust(self.trust, self.claims),  # null as the body said
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
    node = StoredNode.from_row(row[:_NODE], json.loads)
    model, returned, latency_ms, verifier, probs = row[_NODE:]
    claims = node.claims
    for claim, p in zip(claims, json.loads(probs) if probs is not None else [], strict=False):
        claim["probs"] = {"supported": p[0], "contradicted": p[1], "unverifiable": p[2]}
    return Answer(
        step_id=node.step_id,
        trace_id=node.trace_id,
        parents=list(node.parents),
        created=node.created,
        request_id=node.request_id,
        policy=node.policy,
        original=node.answer,
        trust=node.trust,
        action=node.action,
        claims=claims,
        model=None if model is None else str(model),
        returned=None if returned is None else str(returned),
        latency_ms=None if latency_ms is None else float(latency_ms),
        verifier=None if verifier is None else str(verifier),
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
