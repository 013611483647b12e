"""``IndexWriter``: change a tenant's index and publish the result atomically.

The writer copies the live generation into a private ``.tmp-<uuid>`` directory, applies
upserts and deletes there, and on ``commit`` saves and fsyncs every file, renames the
directory to the next ``gen-NNNNNN`` and replaces CURRENT. A crash at any point leaves
CURRENT naming the previous, untouched generation. One writer per tenant at a time
(an flock); readers never wait.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Unpack

from groundproxy.errors import GroundproxyError, IndexStoreError
from groundproxy.guards.types import Embedder
from groundproxy.retrieval.chunk_store import ChunkRecord, ChunkStore, DocumentInfo
from groundproxy.retrieval.chunker import iter_chunks
from groundproxy.retrieval.fsutil import (
    fsync_dir,
    fsync_file,
    sha256_file,
    sha256_text,
    write_durable,
)
from groundproxy.retrieval.generations import (
    CHUNKS_FILE,
    CURRENT,
    CURRENT_TMP,
    INDEX_FILE,
    META_FILE,
    TMP_PREFIX,
    Meta,
    Pointer,
    WriterLock,
    collect_garbage,
    gen_name,
    pointer_bytes,
    read_current,
    read_meta,
    verify_generation,
    write_meta,
)
from groundproxy.retrieval.sentence_tokens import store_token_states
from groundproxy.retrieval.sentence_vectors import (
    EncodeStates,
    SentenceVectorWriter,
    StatesEncoder,
    StoredSentenceVectors,
    stores_sentences,
)
from groundproxy.retrieval.vector_index import HnswVectorIndex, build_params
from groundproxy.retrieval.writer_base import (
    CHUNK_HASH_CHARS,
    UpsertStatus,
    WriterBase,
    WriterOptions,
)

__all__ = ["CHUNK_HASH_CHARS", "IndexWriter", "UpsertStatus"]


class IndexWriter(WriterBase):
    """Context manager for one atomic batch of changes to a tenant's index.

    ``embedder`` may be None for a writer that only deletes. Leaving the ``with`` block
    without ``commit()`` (or by an exception) discards every change.
    """

    def __init__(
        self,
        data_dir: Path,
        tenant: str,
        embedder: Embedder | None,
        **options: Unpack[WriterOptions],
    ) -> None:
        super().__init__(tenant, embedder, options)
        self._dir = Path(data_dir) / self.tenant
        self._pending: dict[int, str] = {}
        try:
            self._dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise IndexStoreError(
                f"tenant {self.tenant!r}: cannot create {self._dir}: {exc}"
            ) from exc
        self._lock = WriterLock(self._dir, self.tenant, self._lock_timeout)
        self._work = self._dir / f"{TMP_PREFIX}{uuid.uuid4().hex}"
        self._cleanup: Path | None = self._work
        self._vectors: HnswVectorIndex | None = None
        self._embedder_name = embedder.name if embedder is not None else ""
        self._next_label = 0
        try:
            self._open_copy()
        except OSError as exc:
            self._discard()
            raise IndexStoreError(f"tenant {self.tenant!r}: cannot prepare a write: {exc}") from exc
        except BaseException:
            self._discard()
            raise
        self._done = False

    def _open_copy(self) -> None:
        self._base = read_current(self._dir, self.tenant)
        base_meta: Meta | None = None
        if self._base is not None:
            live = self._dir / self._base.generation
            try:
                base_meta = read_meta(live, self.tenant)
                verify_generation(live, base_meta, self.tenant)
            except FileNotFoundError as exc:
                raise IndexStoreError(
                    f"tenant {self.tenant!r}: index file {exc.filename} is missing"
                ) from exc
        emb = self._embedder
        if base_meta is not None:
            self._check_same_embedder(base_meta.dim, base_meta.embedder)
        self._work.mkdir()
        if self._base is not None and base_meta is not None:
            live = self._dir / self._base.generation
            shutil.copyfile(live / INDEX_FILE, self._work / INDEX_FILE)
            shutil.copyfile(live / CHUNKS_FILE, self._work / CHUNKS_FILE)
            self._vectors = HnswVectorIndex.load(
                self._work / INDEX_FILE, base_meta.dim, deleted=base_meta.deleted
            )
            self._embedder_name = base_meta.embedder
            self._next_label = base_meta.next_label
        elif emb is not None:  # a new index: the configured build effort
            m, ef_construction = build_params()
            self._vectors = HnswVectorIndex(emb.dim, m=m, ef_construction=ef_construction)
        self._sentences: SentenceVectorWriter | None = None
        self._encode_states: EncodeStates | None = None
        if self._vectors is not None and stores_sentences(self._embedder_name, self._vectors.dim):
            base = None
            if self._base is not None:
                base = StoredSentenceVectors.load(self._dir / self._base.generation)
            if isinstance(emb, StatesEncoder) and store_token_states():
                self._encode_states = emb.encode_with_states  # retrieval.sentence_tokens
            self._sentences = SentenceVectorWriter(
                self._embedder_name,
                self._vectors.dim,
                base,
                token_states=self._encode_states is not None,
            )
        self._store = ChunkStore.open_writable(self._work / CHUNKS_FILE)
        self._next_label = max(self._next_label, self._store.max_label() + 1)
        self._version = (self._base.version if self._base else 0) + 1

    @property
    def base_version(self) -> int:
        """Version of the generation this writer started from (0: none)."""
        return self._base.version if self._base else 0

    def _upsert(self, doc_id: str, text: str, source_path: str | None) -> UpsertStatus:
        content_hash = sha256_text(text)
        old_hash = self._store.document_hash(doc_id)
        if old_hash == content_hash:
            return "unchanged"
        if old_hash is not None:
            self._drop(doc_id)
        self._put(doc_id, text, content_hash, source_path)
        if len(self._pending) >= self._batch_chunks:
            self._flush()
        return "added" if old_hash is None else "replaced"

    def _put(self, doc_id: str, text: str, content_hash: str, source_path: str | None) -> None:
        records: list[ChunkRecord] = []
        # chunks stream into the embedder a batch at a time (a large file never waits
        # whole, and the progress callback hears of every batch embedded)
        for i, piece in enumerate(iter_chunks(text, self._max_chars)):
            record = ChunkRecord(
                label=self._next_label,
                doc_id=doc_id,
                chunk_id=f"c{i}",
                text=piece.text,
                start=piece.start,
                end=piece.end,
                content_hash=sha256_text(piece.text)[:CHUNK_HASH_CHARS],
                index_version=self._version,
            )
            self._next_label += 1
            records.append(record)
            self._pending[record.label] = record.text
            if len(self._pending) >= self._batch_chunks:
                self._flush()
        info = DocumentInfo(doc_id, content_hash, len(records), time.time(), source_path)
        self._store.put_document(info, text, records)
        self.chunks_added += len(records)

    def _drop(self, doc_id: str) -> bool:
        labels = self._store.delete_document(doc_id)
        if labels is None:
            return False
        for label in labels:
            if self._pending.pop(label, None) is None and self._vectors is not None:
                self._vectors.mark_deleted(label)
        return True

    def _flush(self) -> None:
        if not self._pending:
            return
        assert self._embedder is not None and self._vectors is not None
        items = list(self._pending.items())
        for i in range(0, len(items), self._batch_chunks):
            batch = items[i : i + self._batch_chunks]
            vectors = self._encode([text for _, text in batch], self._vectors.dim)
            self._vectors.add([label for label, _ in batch], vectors)
            if self._sentences is not None:  # the verifier's evidence sentences, stored
                self._sentences.add(
                    [text for _, text in batch], self._embedder.encode, self._encode_states
                )
            if self.on_embedded is not None:
                self.on_embedded(len(batch))
        self._pending.clear()

    def _commit_changes(self) -> int:
        """Publish the changes (there are some) atomically; return the new version."""
        try:
            self._flush()
            gen_dir = self._publish()
        except GroundproxyError:
            self._failed = True
            self.close()
            raise
        except (OSError, RuntimeError) as exc:
            self._failed = True
            self.close()
            raise IndexStoreError(f"tenant {self.tenant!r}: commit failed: {exc}") from exc
        except BaseException:
            self._failed = True
            self.close()
            raise
        self._done = True
        try:
            collect_garbage(self._dir, Pointer(gen_dir.name, self._version))
        finally:
            self._lock.release()
        return self._version

    def _publish(self) -> Path:
        assert self._vectors is not None
        self._vectors.save(self._work / INDEX_FILE)
        documents = self._store.count_documents()
        count = self._store.count_chunks()
        self._store.commit()
        self._store.close()
        if count != self._vectors.count:
            raise IndexStoreError(
                f"tenant {self.tenant!r}: {count} chunks but {self._vectors.count} vectors"
            )
        meta = Meta(
            version=self._version,
            dim=self._vectors.dim,
            embedder=self._embedder_name,
            count=count,
            documents=documents,
            next_label=self._next_label,
            deleted=self._vectors.deleted_count,
            index_sha256=sha256_file(self._work / INDEX_FILE),
            chunks_sha256=sha256_file(self._work / CHUNKS_FILE),
            created_at=time.time(),
        )
        write_meta(self._work, meta)
        if self._sentences is not None:
            self._sentences.save(self._work)
        for name in (INDEX_FILE, CHUNKS_FILE, META_FILE):
            fsync_file(self._work / name)
        fsync_dir(self._work)
        gen_dir = self._dir / gen_name(self._version)
        if gen_dir.exists():  # left by a writer that died before writing CURRENT
            shutil.rmtree(gen_dir)
        self._work.rename(gen_dir)
        self._cleanup = gen_dir  # until CURRENT names it, a failure removes it
        fsync_dir(self._dir)
        write_durable(self._dir / CURRENT_TMP, pointer_bytes(Pointer(gen_dir.name, self._version)))
        os.replace(self._dir / CURRENT_TMP, self._dir / CURRENT)
        self._cleanup = None  # published: never remove it now
        fsync_dir(self._dir)
        return gen_dir

    def close(self) -> None:
        """Discard uncommitted changes and release the lock (idempotent)."""
        if self._done:
            return
        self._done = True
        self._discard()

    def _discard(self) -> None:
        store = getattr(self, "_store", None)
        if store is not None:
            store.close()
        if self._cleanup is not None:
            shutil.rmtree(self._cleanup, ignore_errors=True)
        self._lock.release()

    def __del__(self) -> None:
        if not getattr(self, "_done", True):
            self.close()
