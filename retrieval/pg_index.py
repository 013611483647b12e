"""Tenant indexes on PostgreSQL + pgvector: the read side (search, look-ups, the cache).

Every statement names its tenant (``WHERE tenant = %s``): tenants share tables, never
rows. A search is one statement (one snapshot): the k nearest chunks of each query vector
through the dimension's partial HNSW index (cosine), with the tenant's committed version
read in the same snapshot, so each citation carries the version it came from.

:class:`PgIndexManager` keeps, per replica, each tenant's version/count/embedder and
re-reads them at most every ``check_interval`` seconds: a commit made through any replica
is seen within one interval, without a restart.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from psycopg import sql

from groundproxy.errors import GroundproxyError
from groundproxy.guards.types import Embedder, Evidence
from groundproxy.retrieval.chunk_store import (
    ChunkRecord,
    DocumentInfo,
    DocumentRecord,
    chunk_record,
)
from groundproxy.retrieval.names import validate_doc_id, validate_tenant
from groundproxy.retrieval.pg_pool import PgPool
from groundproxy.retrieval.pg_schema import vector_index_kind
from groundproxy.retrieval.pg_sentences import PgSentences
from groundproxy.retrieval.sentence_vectors import stores_sentences
from groundproxy.retrieval.snapshot_base import SnapshotBase, query_matrix

CHUNK_COLS = "id, doc_id, chunk_id, text, start_char, end_char, content_hash, index_version"

_SEARCH = """
SELECT q.i, c.id, c.doc_id, c.chunk_id, c.text, c.start_char, c.end_char, c.content_hash,
       t.version, 1 - c.distance
FROM unnest(%(queries)s::text[]::vector({dim})[]) WITH ORDINALITY AS q(v, i)
CROSS JOIN LATERAL (
    SELECT id, doc_id, chunk_id, text, start_char, end_char, content_hash,
           embedding::vector({dim}) <=> q.v AS distance
    FROM gp_chunks
    WHERE tenant = %(tenant)s AND dim = {dim}
    ORDER BY embedding::vector({dim}) <=> q.v
    LIMIT %(k)s
) AS c
JOIN gp_tenants t ON t.tenant = %(tenant)s
"""
# Exact mode (GROUNDPROXY_PG_VECTOR_INDEX=exact): no pgvector operator at all (for pgvector
# builds whose SIMD distance code cannot run on the host CPU); vectors are L2-normalized, so the
# cosine distance is 1 - the dot product of the float arrays.
_EXACT_DISTANCE = (
    "1 - (SELECT sum(a::float8 * b::float8) FROM unnest(embedding::real[], q.v::real[]) AS x(a, b))"
)


def vector_literal(row: npt.NDArray[np.float32]) -> str:
    """pgvector's text form of one vector: ``[0.1,0.2,...]``. Magnitudes below 1e-30 are
    written as 0: PostgreSQL rejects subnormal float4 input as out of range."""
    values = np.asarray(row, dtype=np.float64)
    values = np.where(np.abs(values) < 1e-30, 0.0, values)
    return "[" + ",".join(f"{x:.7g}" for x in values) + "]"


def _search_sql(dim: int) -> sql.Composed:
    search = _SEARCH
    if vector_index_kind() == "exact":
        ann = "embedding::vector({dim}) <=> q.v"
        search = search.replace(ann, _EXACT_DISTANCE)
    return sql.SQL(search).format(dim=sql.Literal(int(dim)))


@dataclass(frozen=True)
class TenantMeta:
    """A tenant's row of ``gp_tenants``."""

    version: int
    dim: int
    embedder: str
    count: int
    documents: int


def read_tenant_meta(conn: Any, tenant: str) -> TenantMeta | None:
    row = conn.execute(
        "SELECT version, dim, embedder, count, documents FROM gp_tenants WHERE tenant = %s",
        (tenant,),
    ).fetchone()
    if row is None:
        return None
    return TenantMeta(int(row[0]), int(row[1]), str(row[2]), int(row[3]), int(row[4]))


class PgTenantIndex(SnapshotBase):
    """A tenant's index in PostgreSQL (an ``IndexSnapshot``); safe to share between threads.

    ``version``/``count`` are those read by the manager's last check; searches and look-ups
    always read the committed state.
    """

    def __init__(self, pool: PgPool, tenant: str, meta: TenantMeta | None) -> None:
        self._pool = pool
        self._tenant = validate_tenant(tenant)
        self._meta = meta
        # the verifier's evidence sentences stored at ingest (retrieval.pg_sentences)
        self.sentences: PgSentences | None = None
        if meta is not None and stores_sentences(meta.embedder, meta.dim):
            self.sentences = PgSentences(pool, self._tenant, meta.embedder, meta.dim)

    @property
    def version(self) -> int:
        return self._meta.version if self._meta else 0

    @property
    def generation(self) -> str | None:
        return f"pg-v{self._meta.version}" if self._meta else None

    def search(
        self, vectors: npt.NDArray[np.float32], top_k: int, min_score: float
    ) -> list[list[Evidence]]:
        """For each query vector, the ``top_k`` nearest chunks scoring ≥ ``min_score``."""
        queries = query_matrix(vectors)
        n = int(queries.shape[0])
        out: list[list[Evidence]] = [[] for _ in range(n)]
        if self._meta is None or n == 0 or top_k <= 0:
            return out
        dim = self._meta.dim
        self.check_query_dim(queries, dim)
        statement = _search_sql(dim)
        params = {
            "queries": [vector_literal(q) for q in queries],
            "tenant": self._tenant,
            "k": int(top_k),
        }
        with self._pool.connection() as conn:
            rows = conn.execute(statement, params).fetchall()
        for row in rows:
            score = float(row[9])
            if score < min_score:
                continue
            out[int(row[0]) - 1].append(
                Evidence(
                    text=str(row[4]),
                    doc=str(row[2]),
                    chunk=str(row[3]),
                    score=score,
                    span=(int(row[5]), int(row[6])),
                    content_hash=str(row[7]),
                    index_version=int(row[8]),
                    source="index",
                    sentences=self.sentences,
                )
            )
        for hits in out:
            hits.sort(key=lambda e: e.score, reverse=True)
        return out

    def _chunks(self, conn: Any, doc_id: str) -> list[ChunkRecord]:
        rows = conn.execute(
            f"SELECT {CHUNK_COLS} FROM gp_chunks WHERE tenant = %s AND doc_id = %s ORDER BY id",
            (self._tenant, doc_id),
        ).fetchall()
        return [chunk_record(r) for r in rows]

    def get_document(self, doc_id: str) -> DocumentRecord | None:
        validate_doc_id(doc_id)
        with self._pool.connection() as conn, conn.transaction():
            row = conn.execute(
                "SELECT doc_id, text, content_hash, ingested_at, source_path FROM gp_documents "
                "WHERE tenant = %s AND doc_id = %s",
                (self._tenant, doc_id),
            ).fetchone()
            if row is None:
                return None
            chunks = self._chunks(conn, doc_id)
        return DocumentRecord(
            str(row[0]),
            str(row[1]),
            str(row[2]),
            float(row[3]),
            None if row[4] is None else str(row[4]),
            chunks,
        )

    def get_chunk(self, doc_id: str, chunk_id: str) -> ChunkRecord | None:
        validate_doc_id(doc_id)
        with self._pool.connection() as conn:
            row = conn.execute(
                f"SELECT {CHUNK_COLS} FROM gp_chunks WHERE tenant = %s AND doc_id = %s "
                "AND chunk_id = %s",
                (self._tenant, doc_id, chunk_id),
            ).fetchone()
        return None if row is None else chunk_record(row)

    def documents(self) -> list[DocumentInfo]:
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT doc_id, content_hash, n_chunks, ingested_at, source_path "
                "FROM gp_documents WHERE tenant = %s ORDER BY doc_id",
                (self._tenant,),
            ).fetchall()
        return [
            DocumentInfo(
                str(r[0]), str(r[1]), int(r[2]), float(r[3]), None if r[4] is None else str(r[4])
            )
            for r in rows
        ]

    def close(self) -> None:
        """Nothing to release: connections belong to the pool."""

    def __repr__(self) -> str:
        return f"PgTenantIndex({self._tenant!r}, version={self.version}, count={self.count})"


class PgIndexManager:
    """Per-replica cache of tenants' index metadata (a ``TenantIndexes``)."""

    def __init__(
        self, pool: PgPool, embedder: Embedder | None = None, *, check_interval: float = 0.5
    ) -> None:
        self._pool = pool
        self._embedder = embedder
        self._interval = check_interval
        self._entries: dict[str, tuple[PgTenantIndex, float]] = {}
        self._lock = threading.Lock()

    def get(self, tenant: str) -> PgTenantIndex:
        tenant = validate_tenant(tenant)
        with self._lock:
            hit = self._entries.get(tenant)
        if hit is not None and time.monotonic() - hit[1] < self._interval:
            return hit[0]
        return self.refresh(tenant)

    def refresh(self, tenant: str) -> PgTenantIndex:
        tenant = validate_tenant(tenant)
        with self._pool.connection() as conn:
            meta = read_tenant_meta(conn, tenant)
        index = PgTenantIndex(self._pool, tenant, meta)
        if self._embedder is not None:
            index.check_embedder(self._embedder)
        with self._lock:
            self._entries[tenant] = (index, time.monotonic())
        return index

    def invalidate(self, tenant: str) -> None:
        tenant = validate_tenant(tenant)
        with self._lock:
            self._entries.pop(tenant, None)

    def preload(self, tenants: Iterable[str]) -> list[str]:
        errors: list[str] = []
        for tenant in tenants:
            try:
                self.get(tenant)
            except GroundproxyError as exc:
                errors.append(f"index {tenant}: {exc.message}")
        return errors

    def loaded(self) -> list[str]:
        with self._lock:
            return sorted(self._entries)

    def close(self) -> None:
        with self._lock:
            self._entries.clear()
