"""Storage of multi-step traces: one SQLite file per tenant, ``<data>/<tenant>/traces.sqlite``.

Beside the tenant's index generations, never inside one (an ingest must not drop the
traces). A node holds the step id, trace id, parent step ids, digests (sha256) of the
question and of the request context (never the raw context, never a key), the answer text
(capped at ``MAX_ANSWER_CHARS``) and its claims (at most ``MAX_CLAIMS``) with their
verdicts, explanations and citations. Bounds and pruning: see :mod:`proxy.serving.traces`.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from groundproxy.guards import TraceClaim, TraceNode
from groundproxy.guards.types import GuardReport
from groundproxy.policies.schema import TracesPolicy
from groundproxy.proxy.storage import answers
from groundproxy.retrieval.names import validate_tenant

T = TypeVar("T")

TRACE_FILE = "traces.sqlite"
MAX_ANSWER_CHARS = 20_000
MAX_CLAIMS = 200
MAX_TRACE_NODES = 2_000
PRUNE_EVERY = 64

_SCHEMA = """
CREATE TABLE IF NOT EXISTS nodes (
    step_id TEXT PRIMARY KEY,
    trace_id TEXT NOT NULL,
    parents TEXT NOT NULL,
    created REAL NOT NULL,
    request_id TEXT NOT NULL,
    policy TEXT NOT NULL,
    question_sha256 TEXT NOT NULL,
    context_sha256 TEXT NOT NULL,
    answer TEXT NOT NULL,
    trust REAL NOT NULL,
    action TEXT NOT NULL,
    claims TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS nodes_by_trace ON nodes (trace_id, created);
CREATE INDEX IF NOT EXISTS nodes_by_created ON nodes (created);
"""
COLS = (
    "step_id, trace_id, parents, created, request_id, policy, question_sha256, "
    "context_sha256, answer, trust, action, claims"
)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def context_digest(context: Sequence[tuple[str, str]]) -> str:
    return _sha256(json.dumps([list(m) for m in context], ensure_ascii=False))


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
            "trust": self.trust,
            "action": self.action,
            "answer": self.answer,
            "claims": self.claims,
        }


def _claims(report: GuardReport) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for r in report.claims[:MAX_CLAIMS]:
        out.append(
            {
                "text": r.claim.text,
                "span": [r.claim.span[0], r.claim.span[1]],
                "verdict": r.verdict,
                "support": round(r.probs.supported, 4),
                "explanation": r.explanation,
                "action": r.action,
                **({"correction": r.correction} if r.correction is not None else {}),
                **({"judge": r.judge} if r.judge is not None else {}),
                "citations": [
                    {
                        "doc": e.doc,
                        "chunk": e.chunk,
                        "span": [e.span[0], e.span[1]],
                        "content_hash": e.content_hash or None,
                        "index_version": e.index_version if e.source == "index" else None,
                    }
                    for e in r.citations
                ],
            }
        )
    return out


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


class TraceStore:
    """One tenant's trace DAGs in SQLite (WAL). Thread-safe; call it off the event loop."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._conn = sqlite3.connect(path, check_same_thread=False, timeout=10.0)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.executescript(_SCHEMA)
        answers.create_schema(
            self._conn
        )  # the inspector's returned answers (proxy.storage.answers)
        self._lock = threading.Lock()
        self._writes = 0

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def read(self, query: Callable[[sqlite3.Connection], T]) -> T:
        """Run a read-only ``query`` on the connection, under the store's lock."""
        with self._lock:
            return query(self._conn)

    def _fetch(self, sql: str, args: Sequence[Any]) -> list[StoredNode]:
        with self._lock:
            rows = self._conn.execute(sql, tuple(args)).fetchall()
        return [StoredNode.from_row(r, json.loads) for r in rows]

    def get(self, step_ids: Sequence[str], not_before: float) -> dict[str, StoredNode]:
        out: dict[str, StoredNode] = {}
        ids = list(dict.fromkeys(step_ids))
        for i in range(0, len(ids), 500):
            part = ids[i : i + 500]
            marks = ",".join("?" * len(part))
            sql = f"SELECT {COLS} FROM nodes WHERE step_id IN ({marks}) AND created >= ?"
            for node in self._fetch(sql, [*part, not_before]):
                out[node.step_id] = node
        return out

    def missing(self, step_ids: Sequence[str], not_before: float) -> list[str]:
        found = self.get(step_ids, not_before)
        return [s for s in step_ids if s not in found]

    def trace(self, trace_id: str, not_before: float) -> tuple[list[str], dict[str, StoredNode]]:
        """The trace's own steps (oldest first) and every node they reach via parents."""
        own = self._own_steps(trace_id, not_before)
        nodes = {n.step_id: n for n in own}
        frontier = {p for n in own for p in n.parents} - set(nodes)
        while frontier and len(nodes) < MAX_TRACE_NODES:
            found = self.get(sorted(frontier), not_before)
            nodes.update(found)
            frontier = {p for n in found.values() for p in n.parents} - set(nodes)
        return [n.step_id for n in own], nodes

    def _own_steps(self, trace_id: str, not_before: float) -> list[StoredNode]:
        """The trace's own nodes, oldest first (at most ``MAX_TRACE_NODES``)."""
        return self._fetch(
            f"SELECT {COLS} FROM nodes WHERE trace_id = ? AND created >= ? "
            "ORDER BY created, step_id LIMIT ?",
            [trace_id, not_before, MAX_TRACE_NODES],
        )

    def record(
        self,
        *,
        step_id: str,
        trace_id: str | None,
        parents: Sequence[str],
        request_id: str,
        policy_id: str,
        question: str | None,
        context: Sequence[tuple[str, str]],
        report: GuardReport,
        settings: TracesPolicy,
        now: float | None = None,
        model: str = "",
    ) -> str:
        """Store one node; returns its trace id."""
        now = time.time() if now is None else now
        not_before = now - settings.retention_hours * 3600.0
        if trace_id is None:
            first = self.get(parents[:1], not_before) if parents else {}
            trace_id = first[parents[0]].trace_id if first else step_id
        node = StoredNode(
            step_id=step_id,
            trace_id=trace_id,
            parents=tuple(parents),
            created=now,
            request_id=request_id[:128],
            policy=policy_id,
            question_sha256=_sha256(question or ""),
            context_sha256=context_digest(context),
            answer=report.original[:MAX_ANSWER_CHARS],
            trust=round(report.trust, 4),
            action=report.action,
            claims=_claims(report),
        )
        self._insert(node, report, model)
        with self._lock:
            self._writes += 1
            prune = self._writes % PRUNE_EVERY == 1
        if prune:
            self.prune(settings, now)
        return trace_id

    def _insert(self, node: StoredNode, report: GuardReport, model: str) -> None:
        """Store (or replace) one node, with the inspector's answer row."""
        with self._lock, self._conn:
            self._conn.execute(
                f"INSERT OR REPLACE INTO nodes ({COLS}) VALUES "
                "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                node.row(_json),
            )
            answers.insert(self._conn, node.step_id, model, report, MAX_CLAIMS)

    def prune(self, settings: TracesPolicy, now: float | None = None) -> int:
        """Delete nodes past retention and the oldest past ``max_nodes``; returns how many."""
        now = time.time() if now is None else now
        with self._lock, self._conn:
            cur = self._conn.execute(
                "DELETE FROM nodes WHERE created < ?", (now - settings.retention_hours * 3600.0,)
            )
            gone = cur.rowcount
            cur = self._conn.execute(
                "DELETE FROM nodes WHERE step_id IN (SELECT step_id FROM nodes "
                "ORDER BY created DESC, step_id DESC LIMIT -1 OFFSET ?)",
                (settings.max_nodes,),
            )
            gone += cur.rowcount
            answers.prune_orphans(self._conn)
        return int(gone)

    def count(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT count(*) FROM nodes").fetchone()[0])


class TraceStores:
    """Per-tenant :class:`TraceStore`s under the data folder, opened on first use."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = Path(data_dir)
        self._stores: dict[str, TraceStore] = {}
        self._lock = threading.Lock()

    def get(self, tenant: str) -> TraceStore:
        tenant = validate_tenant(tenant)
        with self._lock:
            store = self._stores.get(tenant)
            if store is None:
                store = TraceStore(self.data_dir / tenant / TRACE_FILE)
                self._stores[tenant] = store
            return store

    def close(self) -> None:
        with self._lock:
            stores = list(self._stores.values())
            self._stores.clear()
        for s in stores:
            s.close()
