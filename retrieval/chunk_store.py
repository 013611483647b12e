"""SQLite store of a tenant's documents (full text) and chunks (label → text, span).

A store is opened either read-only and immutable (a published generation: no locks, no
journal) or writable (a private temporary generation that the writer fsyncs and renames).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from groundproxy.errors import IndexStoreError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS documents(
    doc_id TEXT PRIMARY KEY,
    content_hash TEXT NOT NULL,
    n_chunks INTEGER NOT NULL,
    ingested_at REAL NOT NULL,
    source_path TEXT,
    text TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS chunks(
    label INTEGER PRIMARY KEY,
    doc_id TEXT NOT NULL,
    chunk_id TEXT NOT NULL,
    text TEXT NOT NULL,
    start INTEGER NOT NULL,
    "end" INTEGER NOT NULL,
    content_hash TEXT NOT NULL,
    index_version INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_by_doc ON chunks(doc_id, chunk_id);
"""
_CHUNK_COLS = 'label, doc_id, chunk_id, text, start, "end", content_hash, index_version'
_MAX_VARS = 500


@dataclass(frozen=True)
class ChunkRecord:
    """One stored chunk: ``document.text[start:end] == text``."""

    label: int
    doc_id: str
    chunk_id: str
    text: str
    start: int
    end: int
    content_hash: str
    index_version: int


@dataclass(frozen=True)
class DocumentInfo:
    """A document's metadata (no text)."""

    doc_id: str
    content_hash: str
    n_chunks: int
    ingested_at: float
    source_path: str | None


@dataclass(frozen=True)
class DocumentRecord:
    """A document with its full text and its chunks in order."""

    doc_id: str
    text: str
    content_hash: str
    ingested_at: float
    source_path: str | None
    chunks: list[ChunkRecord]


def chunk_record(row: Any) -> ChunkRecord:
    """A ChunkRecord from a row of the chunk columns, in their stored order."""
    label, doc_id, chunk_id, text, start, end, content_hash, version = row
    return ChunkRecord(
        int(label),
        str(doc_id),
        str(chunk_id),
        str(text),
        int(start),
        int(end),
        str(content_hash),
        int(version),
    )


def _chunk_order(record: ChunkRecord) -> int:
    return int(record.chunk_id[1:]) if record.chunk_id[1:].isdigit() else record.label


class ChunkStore:
    """Documents and chunks of one generation. Thread-safe (one lock per connection)."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self._conn = conn
        self._path = path
        self._lock = threading.Lock()

    @classmethod
    def open_readonly(cls, path: Path) -> ChunkStore:
        """Open a published, never-modified store (``immutable=1``)."""
        uri = f"file:{quote(str(path.resolve()))}?mode=ro&immutable=1"
        try:
            conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
            store = cls(conn, path)
            store.count_chunks()
            store.count_documents()
        except sqlite3.Error as exc:
            raise IndexStoreError(f"cannot read chunk store {path}: {exc}") from exc
        return store

    @classmethod
    def open_writable(cls, path: Path) -> ChunkStore:
        """Open (or create) a private store; durability comes from the caller's fsync."""
        try:
            conn = sqlite3.connect(str(path), check_same_thread=False)
            conn.execute("PRAGMA journal_mode=OFF")
            conn.execute("PRAGMA synchronous=OFF")
            conn.executescript(_SCHEMA)
        except sqlite3.Error as exc:
            raise IndexStoreError(f"cannot open chunk store {path}: {exc}") from exc
        return cls(conn, path)

    def _all(self, sql: str, args: Sequence[object] = ()) -> list[Any]:
        with self._lock:
            try:
                return self._conn.execute(sql, args).fetchall()
            except sqlite3.Error as exc:
                raise IndexStoreError(f"chunk store {self._path}: {exc}") from exc

    def _one_int(self, sql: str) -> int:
        rows = self._all(sql)
        value = rows[0][0] if rows else None
        return int(value) if isinstance(value, int) else 0

    def count_chunks(self) -> int:
        return self._one_int("SELECT count(*) FROM chunks")

    def count_documents(self) -> int:
        return self._one_int("SELECT count(*) FROM documents")

    def max_label(self) -> int:
        """Largest chunk label ever stored here, or -1."""
        rows = self._all("SELECT max(label) FROM chunks")
        value = rows[0][0] if rows else None
        return int(value) if isinstance(value, int) else -1

    def document_hash(self, doc_id: str) -> str | None:
        rows = self._all("SELECT content_hash FROM documents WHERE doc_id = ?", (doc_id,))
        return str(rows[0][0]) if rows else None

    def documents(self) -> list[DocumentInfo]:
        rows = self._all(
            "SELECT doc_id, content_hash, n_chunks, ingested_at, source_path"
            " FROM documents ORDER BY doc_id"
        )
        return [DocumentInfo(*row) for row in rows]

    def chunks_of(self, doc_id: str) -> list[ChunkRecord]:
        rows = self._all(f"SELECT {_CHUNK_COLS} FROM chunks WHERE doc_id = ?", (doc_id,))
        return sorted((chunk_record(r) for r in rows), key=_chunk_order)

    def get_document(self, doc_id: str) -> DocumentRecord | None:
        rows = self._all(
            "SELECT doc_id, text, content_hash, ingested_at, source_path"
            " FROM documents WHERE doc_id = ?",
            (doc_id,),
        )
        if not rows:
            return None
        d_id, text, content_hash, ingested_at, source_path = rows[0]
        return DocumentRecord(
            str(d_id),
            str(text),
            str(content_hash),
            float(ingested_at),
            None if source_path is None else str(source_path),
            self.chunks_of(doc_id),
        )

    def get_chunk(self, doc_id: str, chunk_id: str) -> ChunkRecord | None:
        rows = self._all(
            f"SELECT {_CHUNK_COLS} FROM chunks WHERE doc_id = ? AND chunk_id = ?",
            (doc_id, chunk_id),
        )
        return chunk_record(rows[0]) if rows else None

    def chunks_by_labels(self, labels: Iterable[int]) -> dict[int, ChunkRecord]:
        wanted = sorted({int(label) for label in labels})
        out: dict[int, ChunkRecord] = {}
        for i in range(0, len(wanted), _MAX_VARS):
            part = wanted[i : i + _MAX_VARS]
            marks = ",".join("?" * len(part))
            sql = f"SELECT {_CHUNK_COLS} FROM chunks WHERE label IN ({marks})"
            for row in self._all(sql, part):
                record = chunk_record(row)
                out[record.label] = record
        return out

    def put_document(
        self,
        info: DocumentInfo,
        text: str,
        chunks: Sequence[ChunkRecord],
    ) -> None:
        """Insert a document (which must not be stored yet) and its chunks."""
        with self._lock:
            try:
                self._conn.execute(
                    "INSERT INTO documents(doc_id, content_hash, n_chunks, ingested_at,"
                    " source_path, text) VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        info.doc_id,
                        info.content_hash,
                        info.n_chunks,
                        info.ingested_at,
                        info.source_path,
                        text,
                    ),
                )
                self._conn.executemany(
                    f"INSERT INTO chunks({_CHUNK_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        (
                            c.label,
                            c.doc_id,
                            c.chunk_id,
                            c.text,
                            c.start,
                            c.end,
                            c.content_hash,
                            c.index_version,
                        )
                        for c in chunks
                    ],
                )
            except sqlite3.Error as exc:
                raise IndexStoreError(f"chunk store {self._path}: {exc}") from exc

    def delete_document(self, doc_id: str) -> list[int] | None:
        """Remove a document and its chunks; return the removed chunk labels (None: absent)."""
        with self._lock:
            try:
                if (
                    self._conn.execute("DELETE FROM documents WHERE doc_id = ?", (doc_id,)).rowcount
                    == 0
                ):
                    return None
                labels = [
                    int(r[0])
                    for r in self._conn.execute(
                        "SELECT label FROM chunks WHERE doc_id = ?", (doc_id,)
                    ).fetchall()
                ]
                self._conn.execute("DELETE FROM chunks WHERE doc_id = ?", (doc_id,))
            except sqlite3.Error as exc:
                raise IndexStoreError(f"chunk store {self._path}: {exc}") from exc
        return labels

    def commit(self) -> None:
        with self._lock:
            try:
                self._conn.commit()
            except sqlite3.Error as exc:
                raise IndexStoreError(f"chunk store {self._path}: {exc}") from exc

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock:
            self._conn.close()
