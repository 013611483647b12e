"""Reviewers' labels and tenants' adapters in PostgreSQL, for replicas that share them.

The embedded backend keeps them as files under ``--data``
(:mod:`groundproxy.proxy.storage.feedback`,
:mod:`groundproxy.proxy.storage.adapters`); with ``GROUNDPROXY_DATABASE_URL`` they live in
``gp_feedback`` (one row per label, the record as JSONB) and ``gp_adapters`` (every version
kept; the newest is in force), so a label posted to any replica is fitted on, and an adapter
fitted anywhere is served by every replica within ``ttl_s`` (:class:`PgAdapterCache`), as
the calibration is (``gp_calibration``).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from psycopg.types.json import Jsonb

from groundproxy.errors import PolicyError
from groundproxy.guards import read_adapter, read_record
from groundproxy.proxy.storage.adapters import AdapterCache, Record
from groundproxy.proxy.storage.feedback import Labelled, parse_labelled, stamped
from groundproxy.retrieval.names import validate_tenant
from groundproxy.retrieval.pg_pool import PgPool


def append_pg_feedback(pool: PgPool, tenant: str, item: Labelled) -> tuple[Labelled, int]:
    """Store one label (id and time set here): (the stored record, the tenant's count)."""
    tenant = validate_tenant(tenant)
    stored = stamped(item)
    record = Jsonb(json.loads(json.dumps(asdict(stored), ensure_ascii=False)))
    with pool.connection() as conn:
        conn.execute(
            "INSERT INTO gp_feedback (tenant, id, created, record) VALUES (%s, %s, %s, %s)",
            (tenant, stored.id, stored.created, record),
        )
        row = conn.execute("SELECT count(*) FROM gp_feedback WHERE tenant = %s", (tenant,))
        count = int(row.fetchone()[0])
    return stored, count


def read_pg_feedback(pool: PgPool, tenant: str) -> list[Labelled]:
    """The tenant's labels, oldest first."""
    tenant = validate_tenant(tenant)
    with pool.connection() as conn:
        rows = conn.execute(
            "SELECT record FROM gp_feedback WHERE tenant = %s ORDER BY created, id", (tenant,)
        ).fetchall()
    return [parse_labelled(dict(r[0])) for r in rows]


def pg_feedback_bytes(pool: PgPool, tenant: str) -> int:
    """The stored size of the tenant's labels (their JSONB records)."""
    tenant = validate_tenant(tenant)
    with pool.connection() as conn:
        row = conn.execute(
            "SELECT coalesce(sum(pg_column_size(record)), 0) FROM gp_feedback WHERE tenant = %s",
            (tenant,),
        ).fetchone()
    return int(row[0]) if row else 0


def write_pg_adapter(pool: PgPool, tenant: str, content: dict[str, Any]) -> tuple[int, str]:
    """Store the next version (in force from now on): (its version, where it went)."""
    tenant = validate_tenant(tenant)
    with pool.connection() as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('gp_adapters' || %s))", (tenant,))
        row = conn.execute(
            "SELECT coalesce(max(version), 0) FROM gp_adapters WHERE tenant = %s", (tenant,)
        ).fetchone()
        version = int(row[0]) + 1 if row is not None else 1
        content = {**content, "version": version}
        read_adapter(content)  # never store one the guard would refuse
        conn.execute(
            "INSERT INTO gp_adapters (tenant, version, content, created) VALUES (%s, %s, %s, %s)",
            (tenant, version, Jsonb(json.loads(json.dumps(content))), time.time()),
        )
    return version, f"postgresql table gp_adapters, tenant {tenant}, version {version}"


class PgAdapterCache(AdapterCache):
    """The tenants' newest ``gp_adapters`` rows, re-read at most every ``ttl_s``."""

    def __init__(self, pool: PgPool, ttl_s: float = 1.0) -> None:
        super().__init__(Path("."))  # no data folder: files are not read
        self._pool = pool
        self._ttl = ttl_s
        self._rows: dict[str, tuple[float, Record]] = {}

    def record(self, tenant: str) -> Record:
        tenant = validate_tenant(tenant)
        with self._lock:
            hit = self._rows.get(tenant)
        if hit is not None and time.monotonic() - hit[0] < self._ttl:
            return hit[1]
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT content FROM gp_adapters WHERE tenant = %s ORDER BY version DESC LIMIT 1",
                (tenant,),
            ).fetchone()
        try:
            found = None if row is None else read_record(dict(row[0]))
        except (TypeError, ValueError) as exc:
            raise PolicyError(f"cannot read the adapter of tenant '{tenant}': {exc}") from exc
        with self._lock:
            self._rows[tenant] = (time.monotonic(), found)
        return found
