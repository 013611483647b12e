"""What the two index writers (files: ``IndexWriter``, PostgreSQL: ``PgIndexWriter``) share:
the open/failed bookkeeping, upsert/delete around each store's own ``_upsert``/``_drop``, the
embedder checks and the context-manager protocol."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, Self, TypedDict, TypeVar

import numpy as np
import numpy.typing as npt

from groundproxy.errors import IndexStoreError
from groundproxy.guards.types import Embedder
from groundproxy.retrieval.names import validate_doc_id, validate_tenant

UpsertStatus = Literal["added", "replaced", "unchanged"]
CHUNK_HASH_CHARS = 16
_T = TypeVar("_T")


class WriterOptions(TypedDict, total=False):
    """Keyword options of both backends' writers (defaults in :class:`WriterBase`)."""

    max_chars: int  # chunk size (600)
    batch_chunks: int  # chunks per embedder call (32)
    lock_timeout: float  # seconds to wait for the tenant's other writer (600)


class WriterBase:
    """One batch of changes to a tenant's index; subclasses store them and ``commit``."""

    def __init__(self, tenant: str, embedder: Embedder | None, options: WriterOptions) -> None:
        self.tenant = validate_tenant(tenant)
        self._embedder = embedder
        self._max_chars = options.get("max_chars", 600)
        # 32: the ingest's progress bar moves every 32 chunks; 256 was no faster (200 small
        # documents, ~250 chunks: 46.7 / 47.8 s at 32 vs 52.0 / 51.7 s at 256, loaded machine)
        self._batch_chunks = max(1, options.get("batch_chunks", 32))
        # how long to wait for another writer of the tenant before failing
        self._lock_timeout = options.get("lock_timeout", 600.0)
        self._changed = False
        self._failed = False
        self._done = True  # until fully opened: nothing for close() or __del__ to undo
        self.chunks_added = 0
        self.on_embedded: Callable[[int], None] | None = None  # chunks embedded, per batch

    def _check_same_embedder(self, dim: int, name: str) -> None:
        """Refuse to add this writer's embedder's vectors to an index built by another."""
        emb = self._embedder
        if emb is not None and (dim != emb.dim or name != emb.name):
            raise IndexStoreError(
                f"tenant {self.tenant!r}: the index was built with {name} "
                f"({dim}-d); cannot add {emb.name} ({emb.dim}-d) vectors to it"
            )

    def _encode(self, texts: list[str], dim: int) -> npt.NDArray[np.float32]:
        """Embed one batch, refusing vectors of another shape than ``(len(texts), dim)``."""
        assert self._embedder is not None
        vectors = self._embedder.encode(texts)
        if vectors.shape != (len(texts), dim):
            raise IndexStoreError(
                f"embedder {self._embedder.name} returned shape {vectors.shape} "
                f"for {len(texts)} texts"
            )
        return vectors

    def _check_open(self) -> None:
        if self._done:
            raise IndexStoreError(f"tenant {self.tenant!r}: this writer is already closed")
        if self._failed:
            raise IndexStoreError(f"tenant {self.tenant!r}: an earlier change failed; discard")

    def _guarded(self, fn: Callable[[str], _T], doc_id: str) -> _T:
        """Run one change; a failure poisons the writer (only discarding it is left)."""
        try:
            return fn(doc_id)
        except BaseException:
            self._failed = True
            raise

    def upsert(self, doc_id: str, text: str, source_path: str | None = None) -> UpsertStatus:
        """Add or replace a document; "unchanged" (no embedding) when its text is the same."""
        self._check_open()
        doc_id = validate_doc_id(doc_id)
        if self._embedder is None:
            raise IndexStoreError(f"tenant {self.tenant!r}: this writer has no embedder")
        status = self._guarded(lambda d: self._upsert(d, text, source_path), doc_id)
        self._changed = self._changed or status != "unchanged"
        return status

    def delete(self, doc_id: str) -> bool:
        """Remove a document; False when it is not in the index."""
        self._check_open()
        doc_id = validate_doc_id(doc_id)
        removed = self._guarded(self._drop, doc_id)
        self._changed = self._changed or removed
        return removed

    def commit(self) -> int:
        """Publish the changes atomically; return the new version (unchanged if no change)."""
        self._check_open()
        if not self._changed:
            self.close()
            return self.base_version
        return self._commit_changes()

    @property
    def base_version(self) -> int:
        """Version of the index this writer started from (0: none)."""
        raise NotImplementedError

    def _commit_changes(self) -> int:
        raise NotImplementedError

    def _upsert(self, doc_id: str, text: str, source_path: str | None) -> UpsertStatus:
        raise NotImplementedError

    def _drop(self, doc_id: str) -> bool:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
