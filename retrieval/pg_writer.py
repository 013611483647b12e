"""``PgIndexWriter``: one ingest (upserts and deletes) as ONE PostgreSQL transaction.

The writer takes a connection, begins a transaction and takes the tenant's transaction-level
advisory lock (one writer per tenant; readers never wait). Nothing it writes is visible
until ``commit()``: a writer that fails, is closed without committing, or whose process is
killed leaves the previous version visible and intact (the server rolls back the
transaction of a connection that died). Same interface as ``retrieval.writer.IndexWriter``;
the verifier's evidence sentences are stored in the same transaction
(:mod:`groundproxy.retrieval.pg_sentences`).
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from typing import Any, Unpack

from groundproxy.errors import IndexStoreError
from groundproxy.guards.types import Embedder
from groundproxy.retrieval.chunker import chunk_text
from groundproxy.retrieval.fsutil import sha256_text
from groundproxy.retrieval.pg_index import read_tenant_meta, vector_literal
from groundproxy.retrieval.pg_pool import PgPool
from groundproxy.retrieval.pg_schema import TENANT_LOCK_CLASS, ensure_hnsw_index
from groundproxy.retrieval.pg_sentences import store_sentences
from groundproxy.retrieval.writer_base import (
    CHUNK_HASH_CHARS,
    UpsertStatus,
    WriterBase,
    WriterOptions,
)

_COPY = (
    "COPY gp_chunks (tenant, doc_id, chunk_id, text, start_char, end_char, content_hash, "
    "index_version, dim, embedding) FROM STDIN"
)
_TENANT_UPSERT = """
INSERT INTO gp_tenants (tenant, version, dim, embedder, count, documents, updated_at)
VALUES (%(tenant)s, %(version)s, %(dim)s, %(embedder)s,
        (SELECT count(*) FROM gp_chunks WHERE tenant = %(tenant)s),
        (SELECT count(*) FROM gp_documents WHERE tenant = %(tenant)s), %(now)s)
ON CONFLICT (tenant) DO UPDATE SET version = EXCLUDED.version, count = EXCLUDED.count,
    documents = EXCLUDED.documents, updated_at = EXCLUDED.updated_at
"""


class PgIndexWriter(WriterBase):
    """Context manager for one atomic batch of changes to a tenant's index in PostgreSQL."""

    def __init__(
        self,
        pool: PgPool,
        tenant: str,
        embedder: Embedder | None,
        **options: Unpack[WriterOptions],
    ) -> None:
        super().__init__(tenant, embedder, options)
        self._pending: list[tuple[str, str, str, int, int, str]] = []
        self._stack = ExitStack()
        conn: Any = self._stack.enter_context(pool.connection())
        self._conn = conn
        try:
            if embedder is not None:
                ensure_hnsw_index(conn, embedder.dim)
            conn.execute("BEGIN")
            conn.execute(f"SET LOCAL lock_timeout = '{int(self._lock_timeout * 1000)}ms'")
            conn.execute(
                "SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (TENANT_LOCK_CLASS, self.tenant)
            )
            self._meta = read_tenant_meta(conn, self.tenant)
            if self._meta is not None:
                self._check_same_embedder(self._meta.dim, self._meta.embedder)
        except BaseException as exc:
            self._abort()
            if isinstance(exc, Exception) and not isinstance(exc, IndexStoreError):
                raise IndexStoreError(
                    f"tenant {self.tenant!r}: cannot start a write: {exc}"
                ) from exc
            raise
        self._version = self.base_version + 1
        self._done = False

    @property
    def base_version(self) -> int:
        return self._meta.version if self._meta else 0

    def _upsert(self, doc_id: str, text: str, source_path: str | None) -> UpsertStatus:
        content_hash = sha256_text(text)
        row = self._conn.execute(
            "SELECT content_hash FROM gp_documents WHERE tenant = %s AND doc_id = %s",
            (self.tenant, doc_id),
        ).fetchone()
        if row is not None and row[0] == content_hash:
            return "unchanged"
        if row is not None:
            self._drop(doc_id)
        pieces = chunk_text(text, self._max_chars)
        self._conn.execute(
            "INSERT INTO gp_documents (tenant, doc_id, content_hash, n_chunks, ingested_at, "
            "source_path, text) VALUES (%s, %s, %s, %s, %s, %s, %s)",
            (self.tenant, doc_id, content_hash, len(pieces), time.time(), source_path, text),
        )
        self._pending.extend(
            (doc_id, f"c{i}", p.text, p.start, p.end, sha256_text(p.text)[:CHUNK_HASH_CHARS])
            for i, p in enumerate(pieces)
        )
        self.chunks_added += len(pieces)
        if len(self._pending) >= self._batch_chunks:
            self._flush()
        return "added" if row is None else "replaced"

    def _drop(self, doc_id: str) -> bool:
        self._pending = [p for p in self._pending if p[0] != doc_id]
        cur = self._conn.execute(
            "DELETE FROM gp_documents WHERE tenant = %s AND doc_id = %s", (self.tenant, doc_id)
        )
        return bool(cur.rowcount)

    def _flush(self) -> None:
        if not self._pending:
            return
        assert self._embedder is not None
        emb = self._embedder
        with self._conn.cursor().copy(_COPY) as copy:
            for i in range(0, len(self._pending), self._batch_chunks):
                batch = self._pending[i : i + self._batch_chunks]
                vectors = self._encode([p[2] for p in batch], emb.dim)
                for p, v in zip(batch, vectors, strict=True):
                    copy.write_row((self.tenant, *p, self._version, emb.dim, vector_literal(v)))
        texts = [p[2] for p in self._pending]
        for i in range(0, len(texts), self._batch_chunks):  # the verifier's evidence sentences
            store_sentences(self._conn, self.tenant, texts[i : i + self._batch_chunks], emb)
            if self.on_embedded is not None:
                self.on_embedded(len(texts[i : i + self._batch_chunks]))
        self._pending.clear()

    def _commit_changes(self) -> int:
        """Publish the changes (there are some) in one COMMIT; return the new version."""
        try:
            self._flush()
            meta = self._meta
            dim = meta.dim if meta else (self._embedder.dim if self._embedder else 0)
            name = meta.embedder if meta else (self._embedder.name if self._embedder else "")
            self._conn.execute(
                _TENANT_UPSERT,
                {
                    "tenant": self.tenant,
                    "version": self._version,
                    "dim": dim,
                    "embedder": name,
                    "now": time.time(),
                },
            )
            self._conn.execute("COMMIT")
        except BaseException as exc:
            self._failed = True
            self._abort()
            if isinstance(exc, Exception) and not isinstance(exc, IndexStoreError):
                raise IndexStoreError(f"tenant {self.tenant!r}: commit failed: {exc}") from exc
            raise
        self._done = True
        self._stack.close()
        return self._version

    def _abort(self) -> None:
        self._done = True
        try:
            if not self._conn.closed and self._conn.info.transaction_status != 0:
                self._conn.execute("ROLLBACK")
        except Exception:
            self._conn.close()
        self._stack.close()

    def close(self) -> None:
        """Discard uncommitted changes (ROLLBACK) and return the connection (idempotent)."""
        if not self._done:
            self._abort()
