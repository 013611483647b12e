"""Traces and calibration on PostgreSQL: what replicas share besides the index.

``PgTraceStore`` keeps the same nodes as the SQLite ``TraceStore`` (``proxy.serving.traces``) in
``gp_trace_nodes``, every statement filtered by tenant, so a pipeline whose steps land on
different replicas is one DAG. ``PgCalibrationCache`` reads ``gp_calibration`` (written by
``groundproxy calibrate`` with ``GROUNDPROXY_DATABASE_URL`` set) and re-reads a tenant's row
at most every ``ttl_s`` seconds. A database error while recording a node surfaces as
``TraceStoreUnavailable`` (an ``OSError``), which ``record_step`` logs without failing the
completion, exactly as for SQLite.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from psycopg.types.json import Jsonb

from groundproxy.errors import PolicyError
from groundproxy.guards.types import GuardReport
from groundproxy.policies.schema import TracesPolicy
from groundproxy.proxy.storage.calibration import CalibrationCache
from groundproxy.proxy.storage.sqlite_traces import (
    MAX_TRACE_NODES,
    LabelRef,
    TraceStore,
    TraceStores,
)
from groundproxy.proxy.storage.trace_node import COLS, StoredNode
from groundproxy.retrieval.names import validate_tenant
from groundproxy.retrieval.pg_pool import PgPool

T = TypeVar("T")


class TraceStoreUnavailable(OSError):
    """The trace database failed (logged by ``record_step``, never fails a completion)."""


def _node(row: Sequence[Any]) -> StoredNode:
    return StoredNode.from_row(row, lambda value: value)  # psycopg decodes jsonb itself


class PgTraceStore(TraceStore):
    """One tenant's trace DAGs in PostgreSQL (same interface as the SQLite store)."""

    def __init__(self, pool: PgPool, tenant: str) -> None:  # no SQLite file: no super()
        self._pool = pool
        self.tenant = validate_tenant(tenant)
        self._writes = 0
        self._lock = threading.Lock()

    def _run(self, fn: Callable[[Any], T]) -> T:
        import psycopg

        try:
            with self._pool.connection() as conn:
                return fn(conn)
        except psycopg.Error as exc:
            raise TraceStoreUnavailable(f"trace store: {type(exc).__name__}: {exc}") from exc

    def close(self) -> None:
        """Connections belong to the pool."""

    def _select(self, where: str, args: tuple[Any, ...]) -> list[StoredNode]:
        """This tenant's nodes ``WHERE tenant = %s AND <where>``."""
        sql = f"SELECT {COLS} FROM gp_trace_nodes WHERE tenant = %s AND {where}"
        rows = self._run(lambda c: c.execute(sql, (self.tenant, *args)).fetchall())
        return [_node(r) for r in rows]

    def get(self, step_ids: Sequence[str], not_before: float) -> dict[str, StoredNode]:
        ids = list(dict.fromkeys(step_ids))
        if not ids:
            return {}
        found = self._select("step_id = ANY(%s) AND created >= %s", (ids, not_before))
        return {n.step_id: n for n in found}

    def labelled(self, by: LabelRef, ref: str, not_before: float) -> list[StoredNode]:
        column = {"step_id": "step_id", "request_id": "request_id"}[by]
        return self._select(
            f"{column} = %s AND created >= %s ORDER BY created DESC, step_id DESC LIMIT 2",
            (ref, not_before),
        )

    def _own_steps(self, trace_id: str, not_before: float) -> list[StoredNode]:
        return self._select(
            "trace_id = %s AND created >= %s ORDER BY created, step_id LIMIT %s",
            (trace_id, not_before, MAX_TRACE_NODES),
        )

    def _insert(self, node: StoredNode, report: GuardReport, model: str) -> None:
        # the inspector's answers table (``model``) is SQLite-only for now
        self._run(
            lambda c: c.execute(
                f"INSERT INTO gp_trace_nodes (tenant, {COLS}) VALUES "
                "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (tenant, step_id) DO UPDATE SET trace_id = EXCLUDED.trace_id, "
                "parents = EXCLUDED.parents, created = EXCLUDED.created, answer = EXCLUDED.answer, "
                "trust = EXCLUDED.trust, action = EXCLUDED.action, claims = EXCLUDED.claims",
                (self.tenant, *node.row(Jsonb)),
            )
        )

    def prune(self, settings: TracesPolicy, now: float | None = None) -> int:
        """Delete this tenant's nodes past retention and the oldest past ``max_nodes``."""
        now = time.time() if now is None else now

        def run(conn: Any) -> int:
            with conn.transaction():
                gone = conn.execute(
                    "DELETE FROM gp_trace_nodes WHERE tenant = %s AND created < %s",
                    (self.tenant, now - settings.retention_hours * 3600.0),
                ).rowcount
                gone += conn.execute(
                    "DELETE FROM gp_trace_nodes WHERE tenant = %s AND step_id IN ("
                    "SELECT step_id FROM gp_trace_nodes WHERE tenant = %s "
                    "ORDER BY created DESC, step_id DESC OFFSET %s)",
                    (self.tenant, self.tenant, settings.max_nodes),
                ).rowcount
            return int(gone)

        return self._run(run)

    def count(self) -> int:
        row = self._run(
            lambda c: c.execute(
                "SELECT count(*) FROM gp_trace_nodes WHERE tenant = %s", (self.tenant,)
            ).fetchone()
        )
        return int(row[0]) if row else 0


class PgTraceStores(TraceStores):
    """Per-tenant :class:`PgTraceStore` views of one shared table."""

    def __init__(self, pool: PgPool) -> None:
        super().__init__(Path("."))  # no data folder: the attribute is unused
        self._pool = pool

    def get(self, tenant: str) -> TraceStore:
        tenant = validate_tenant(tenant)
        with self._lock:
            store = self._stores.get(tenant)
            if store is None:
                store = self._stores[tenant] = PgTraceStore(self._pool, tenant)
            return store


class PgCalibrationCache(CalibrationCache):
    """Tenants' calibration rows (``gp_calibration``), re-read at most every ``ttl_s``."""

    def __init__(self, pool: PgPool, ttl_s: float = 1.0) -> None:
        super().__init__(Path("."))  # no data folder: files are not read
        self._pool = pool
        self._ttl = ttl_s
        self._rows: dict[str, tuple[float, dict[str, Any] | None]] = {}

    def get(self, tenant: str) -> dict[str, Any]:
        tenant = validate_tenant(tenant)
        with self._lock:
            hit = self._rows.get(tenant)
        if hit is None or time.monotonic() - hit[0] >= self._ttl:
            with self._pool.connection() as conn:
                row = conn.execute(
                    "SELECT content FROM gp_calibration WHERE tenant = %s", (tenant,)
                ).fetchone()
            hit = (time.monotonic(), None if row is None else dict(row[0]))
            with self._lock:
                self._rows[tenant] = hit
        if hit[1] is None:
            raise PolicyError(
                f"verifier.threshold is 'calibrated' but tenant '{tenant}' has no calibration "
                f"in the database: run 'groundproxy calibrate --tenant {tenant} FILE.jsonl "
                "--alpha 0.1' with GROUNDPROXY_DATABASE_URL set"
            )
        t = hit[1].get("threshold")
        if not isinstance(t, int | float) or isinstance(t, bool) or not 0.0 <= t <= 1.0:
            raise PolicyError(f"calibration of tenant '{tenant}': 'threshold' must be in [0, 1]")
        return hit[1]


def write_pg_calibration(pool: PgPool, tenant: str, content: dict[str, Any]) -> str:
    """Store a tenant's calibration (one row, replaced); returns where it went."""
    tenant = validate_tenant(tenant)
    with pool.connection() as conn:
        conn.execute(
            "INSERT INTO gp_calibration (tenant, content, updated_at) VALUES (%s, %s, %s) "
            "ON CONFLICT (tenant) DO UPDATE SET content = EXCLUDED.content, "
            "updated_at = EXCLUDED.updated_at",
            (tenant, Jsonb(json.loads(json.dumps(content))), time.time()),
        )
    return f"postgresql table gp_calibration, tenant {tenant}"
