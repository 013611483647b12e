"""``PgIndexWriter``: one ingest (upserts and deletes) as ONE PostgreSQL transaction.

The writer takes a connection, begins a transaction and takes the tenant's transaction-level
advisory lock (one writer per tenant; readers never wait). Nothing it writes is visible
until ``commit()``: a writer that fails, is closed without committing, or whose process is
killed leaves the previous version visible and intact (the server rolls back the
transaction of a connection that died). Same interface as ``retrieval.writer.IndexWriter``.
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from types import TracebackType
from typing import Any

from groundproxy.guards.errors import IndexStoreError
from groundproxy.guards.types import Embedder
from groundproxy.retrieval.chunker import chunk_text
from groundproxy.retrieval.fsutil import sha256_text
from groundproxy.retrieval.names import validate_doc_id, validate_tenant
from groundproxy.retrieval.pg_index import read_tenant_meta, vector_literal
from groundproxy.retrieval.pg_pool import PgPool
from groundproxy.retrieval.pg_schema import TENANT_LOCK_CLASS, ensure_hnsw_index
from groundproxy.retrieval.writer import CHUNK_HASH_CHARS, UpsertStatus

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


class PgIndexWriter:
    """Context manager for one atomic batch of changes to a tenant's index in PostgreSQL."""

    def __init__(
        self,
        pool: PgPool,
        tenant: str,
        embedder: Embedder | None,
        *,
        max_chars: int = 600,
        batch_chunks: int = 256,
        lock_timeout: float = 600.0,
    ) -> None:
        self.tenant = validate_tenant(tenant)
        self._embedder = embedder
        self._max_chars = max_chars
        self._batch = max(1, batch_chunks)
        self._pending: list[tuple[str, str, str, int, int, str]] = []
        self._changed = False
        self._failed = False
        self.chunks_added = 0
        self._stack = ExitStack()
        self._done = True
        conn: Any = self._stack.enter_context(pool.connection())
        self._conn = conn
        try:
            if embedder is not None:
                ensure_hnsw_index(conn, embedder.dim)
            conn.execute("BEGIN")
            conn.execute(f"SET LOCAL lock_timeout = '{int(lock_timeout * 1000)}ms'")
            conn.execute(
                "SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (TENANT_LOCK_CLASS, self.tenant)
            )
            self._meta = read_tenant_meta(conn, self.tenant)
        except BaseException as exc:
            self._abort()
            if isinstance(exc, Exception) and not isinstance(exc, IndexStoreError):
                raise IndexStoreError(
                    f"tenant {self.tenant!r}: cannot start a write: {exc}"
                ) from exc
            raise
        meta = self._meta
        if (
            meta is not None
            and embedder is not None
            and (meta.dim != embedder.dim or meta.embedder != embedder.name)
        ):
            self._abort()
            raise IndexStoreError(
                f"tenant {self.tenant!r}: the index was built with {meta.embedder} "
                f"({meta.dim}-d); cannot add {embedder.name} ({embedder.dim}-d) vectors to it"
            )
        self._version = (meta.version if meta else 0) + 1
        self._done = False

    @property
    def base_version(self) -> int:
        return self._meta.version if self._meta else 0

    def _check_open(self) -> None:
        if self._done:
            raise IndexStoreError(f"tenant {self.tenant!r}: this writer is already closed")
        if self._failed:
            raise IndexStoreError(f"tenant {self.tenant!r}: an earlier change failed; discard")

    def _guarded(self, fn: Any, *args: Any) -> Any:
        self._check_open()
        try:
            return fn(*args)
        except BaseException:
            self._failed = True
            raise

    def upsert(self, doc_id: str, text: str, source_path: str | None = None) -> UpsertStatus:
        """Add or replace a document; "unchanged" (no embedding) when its text is the same."""
        doc_id = validate_doc_id(doc_id)
        if self._embedder is None:
            raise IndexStoreError(f"tenant {self.tenant!r}: this writer has no embedder")
        status: UpsertStatus = self._guarded(self._upsert, doc_id, text, source_path)
        self._changed = self._changed or status != "unchanged"
        return status

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
        if len(self._pending) >= self._batch:
            self._flush()
        return "added" if row is None else "replaced"

    def _drop(self, doc_id: str) -> bool:
        self._pending = [p for p in self._pending if p[0] != doc_id]
        cur = self._conn.execute(
            "DELETE FROM gp_documents WHERE tenant = %s AND doc_id = %s", (self.tenant, doc_id)
        )
        return bool(cur.rowcount)

    def delete(self, doc_id: str) -> bool:
        """Remove a document; False when it is not in the index."""
        doc_id = validate_doc_id(doc_id)
        removed = bool(self._guarded(self._drop, doc_id))
        self._changed = self._changed or removed
        return removed

    def _flush(self) -> None:
        if not self._pending:
            return
        assert self._embedder is not None
        emb = self._embedder
        with self._conn.cursor().copy(_COPY) as copy:
            for i in range(0, len(self._pending), self._batch):
                batch = self._pending[i : i + self._batch]
                vectors = emb.encode([p[2] for p in batch])
                if vectors.shape != (len(batch), emb.dim):
                    raise IndexStoreError(
                        f"embedder {emb.name} returned shape {vectors.shape} for {len(batch)} texts"
                    )
                for p, v in zip(batch, vectors, strict=True):
                    copy.write_row((self.tenant, *p, self._version, emb.dim, vector_literal(v)))
        self._pending.clear()

    def commit(self) -> int:
        """Publish the changes in one COMMIT; return the new version (unchanged if none)."""
        self._check_open()
        if not self._changed:
            self.close()
            return self.base_version
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

    def __enter__(self) -> PgIndexWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
