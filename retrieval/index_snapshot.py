"""``TenantIndex``: a read-only snapshot of one tenant's live index generation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt

from groundproxy.errors import IndexStoreError
from groundproxy.guards.types import Embedder, Evidence
from groundproxy.retrieval.chunk_store import ChunkRecord, ChunkStore, DocumentInfo, DocumentRecord
from groundproxy.retrieval.generations import (
    CHUNKS_FILE,
    INDEX_FILE,
    META_FILE,
    Meta,
    Pointer,
    read_current,
    read_meta,
    verify_generation,
)
from groundproxy.retrieval.names import validate_doc_id, validate_tenant
from groundproxy.retrieval.sentence_vectors import StoredSentenceVectors
from groundproxy.retrieval.snapshot_base import SnapshotBase, query_matrix
from groundproxy.retrieval.vector_index import HnswVectorIndex, VectorIndex

_OPEN_ATTEMPTS = 3


class TenantIndex(SnapshotBase):
    """Search and look-ups over one immutable generation (satisfies ``EvidenceSource``).

    Safe to share between threads. A tenant without an index is an empty snapshot at
    version 0.
    """

    def __init__(
        self,
        tenant: str,
        pointer: Pointer | None = None,
        meta: Meta | None = None,
        vectors: VectorIndex | None = None,
        store: ChunkStore | None = None,
        sentences: StoredSentenceVectors | None = None,
    ) -> None:
        self._tenant = tenant
        self._pointer = pointer
        self._meta = meta
        self._vectors = vectors
        self._store = store
        # the verifier's evidence sentences embedded at ingest (retrieval.sentence_vectors)
        self.sentences = sentences

    @classmethod
    def open(cls, data_dir: Path, tenant: str, *, embedder: Embedder | None = None) -> TenantIndex:
        """Open the live generation of ``tenant`` under ``data_dir``.

        With ``embedder``, refuse an index built by another embedder. Raises
        IndexStoreError for a missing or corrupt file, naming the tenant and the file.
        """
        tenant = validate_tenant(tenant)
        tenant_dir = Path(data_dir) / tenant
        last_error: FileNotFoundError | None = None
        for _ in range(_OPEN_ATTEMPTS):
            pointer = read_current(tenant_dir, tenant)
            if pointer is None:
                return cls(tenant)
            try:
                index = cls._load(tenant_dir / pointer.generation, pointer, tenant)
            except (FileNotFoundError, IndexStoreError) as exc:
                # A generation collected while we read it: CURRENT moved on, try again.
                if read_current(tenant_dir, tenant) != pointer:
                    continue
                if isinstance(exc, IndexStoreError):
                    raise
                last_error = exc
                break
            if embedder is not None:
                index.check_embedder(embedder)
            return index
        missing = last_error.filename if last_error else tenant_dir
        raise IndexStoreError(f"tenant {tenant!r}: index file {missing} is missing") from last_error

    @classmethod
    def _load(cls, gen_dir: Path, pointer: Pointer, tenant: str) -> TenantIndex:
        meta = read_meta(gen_dir, tenant)
        if meta.version != pointer.version:
            raise IndexStoreError(
                f"tenant {tenant!r}: {gen_dir / META_FILE} says version {meta.version}, "
                f"CURRENT says {pointer.version}"
            )
        verify_generation(gen_dir, meta, tenant)
        try:
            vectors = HnswVectorIndex.load(gen_dir / INDEX_FILE, meta.dim, deleted=meta.deleted)
            store = ChunkStore.open_readonly(gen_dir / CHUNKS_FILE)
        except IndexStoreError as exc:
            raise IndexStoreError(f"tenant {tenant!r}: {exc.message}") from exc
        if vectors.count != meta.count or store.count_chunks() != meta.count:
            store.close()
            raise IndexStoreError(
                f"tenant {tenant!r}: {gen_dir} is inconsistent ({vectors.count} vectors, "
                f"{store.count_chunks()} chunks, meta.json says {meta.count})"
            )
        try:
            sentences = StoredSentenceVectors.load(gen_dir)
        except IndexStoreError as exc:
            store.close()
            raise IndexStoreError(f"tenant {tenant!r}: {exc.message}") from exc
        return cls(tenant, pointer, meta, vectors, store, sentences)

    @property
    def version(self) -> int:
        return self._pointer.version if self._pointer else 0

    @property
    def generation(self) -> str | None:
        """Directory name of the generation (None for a tenant without an index)."""
        return self._pointer.generation if self._pointer else None

    def search(
        self, vectors: npt.NDArray[np.float32], top_k: int, min_score: float
    ) -> list[list[Evidence]]:
        """For each query vector, the ``top_k`` best live chunks scoring ≥ ``min_score``."""
        queries = query_matrix(vectors)
        n = int(queries.shape[0])
        if self._vectors is None or self._store is None or n == 0 or top_k <= 0:
            return [[] for _ in range(n)]
        self.check_query_dim(queries, self._vectors.dim)
        labels, scores = self._vectors.query(queries, top_k)
        records = self._store.chunks_by_labels(int(x) for x in labels.ravel() if x >= 0)
        out: list[list[Evidence]] = []
        for row_labels, row_scores in zip(labels, scores, strict=True):
            hits = [
                self._evidence(records[int(label)], float(score))
                for label, score in zip(row_labels, row_scores, strict=True)
                if label >= 0 and score >= min_score and int(label) in records
            ]
            hits.sort(key=lambda e: e.score, reverse=True)
            out.append(hits)
        return out

    def _evidence(self, record: ChunkRecord, score: float) -> Evidence:
        return Evidence(
            text=record.text,
            doc=record.doc_id,
            chunk=record.chunk_id,
            score=score,
            span=(record.start, record.end),
            content_hash=record.content_hash,
            index_version=self.version,
            source="index",
            sentences=self.sentences,
        )

    def get_document(self, doc_id: str) -> DocumentRecord | None:
        """The document with its full text and chunks, or None."""
        validate_doc_id(doc_id)
        return self._store.get_document(doc_id) if self._store else None

    def get_chunk(self, doc_id: str, chunk_id: str) -> ChunkRecord | None:
        validate_doc_id(doc_id)
        return self._store.get_chunk(doc_id, chunk_id) if self._store else None

    def documents(self) -> list[DocumentInfo]:
        """All documents, sorted by id."""
        return self._store.documents() if self._store else []

    def close(self) -> None:
        """Release the SQLite connection; searches after this fail."""
        if self._store is not None:
            self._store.close()

    def __enter__(self) -> TenantIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"TenantIndex({self._tenant!r}, version={self.version}, count={self.count})"
