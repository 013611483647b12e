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
from typing import Any, Literal, TypeVar

from groundproxy.guards.types import GuardReport
from groundproxy.policies.schema import TracesPolicy
from groundproxy.proxy.storage import answers
from groundproxy.proxy.storage.sqlite_schema import create_schema
from groundproxy.proxy.storage.trace_node import COLS, StoredNode
from groundproxy.retrieval.names import validate_tenant

T = TypeVar("T")

TRACE_FILE = "traces.sqlite"
MAX_ANSWER_CHARS = 20_000
MAX_CLAIMS = 200
MAX_TRACE_NODES = 2_000
PRUNE_EVERY = 64
LabelRef = Literal["step_id", "request_id"]  # what a reviewer's label names an answer by


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def context_digest(context: Sequence[tuple[str, str]]) -> str:
    return _sha256(json.dumps([list(m) for m in context], ensure_ascii=False))


@dataclass(frozen=True)
class TraceStep:
    """One guarded generation as its trace records it: who asked, under which policy, what
    (the question and context are stored as digests only) and where it joins the trace."""

    step_id: str
    request_id: str
    policy_id: str
    question: str | None
    context: Sequence[tuple[str, str]]
    trace_id: str | None = None
    parents: Sequence[str] = ()
    model: str = ""


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


def _ref_column(by: LabelRef) -> str:
    if by not in ("step_id", "request_id"):  # a column name goes into the SQL text
        raise ValueError(f"not a label reference: {by!r}")
    return by


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
        create_schema(self._conn)  # nodes, and the inspector's answers beside them
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

    def labelled(self, by: LabelRef, ref: str, not_before: float) -> list[StoredNode]:
        """The nodes a reviewer's label names, newest first, at most two: by ``step_id``
        (the server's own id: one at most) or ``request_id`` (client-chosen: two say that
        the id is ambiguous)."""
        return self._fetch(
            f"SELECT {COLS} FROM nodes WHERE {_ref_column(by)} = ? AND created >= ? "
            "ORDER BY created DESC, step_id DESC LIMIT 2",
            [ref, not_before],
        )

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
        step: TraceStep,
        report: GuardReport,
        settings: TracesPolicy,
        now: float | None = None,
    ) -> str:
        """Store one node; returns its trace id."""
        now = time.time() if now is None else now
        not_before = now - settings.retention_hours * 3600.0
        trace_id, parents, step_id = step.trace_id, step.parents, step.step_id
        if trace_id is None:
            first = self.get(parents[:1], not_before) if parents else {}
            trace_id = first[parents[0]].trace_id if first else step_id
        node = StoredNode(
            step_id=step_id,
            trace_id=trace_id,
            parents=tuple(parents),
            created=now,
            request_id=step.request_id[:128],
            policy=step.policy_id,
            question_sha256=_sha256(step.question or ""),
            context_sha256=context_digest(step.context),
            answer=report.original[:MAX_ANSWER_CHARS],
            trust=round(report.trust, 4),
            action=report.action,
            claims=_claims(report),
        )
        self._insert(node, report, step.model)
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
