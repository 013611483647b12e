"""Approximate nearest-neighbour index behind a small protocol (hnswlib implements it).

Similarities are cosine similarities (``1 - cosine distance``). ``query`` returns two
(n, k') arrays, best first, where k' = min(k, live count); a row that found fewer
neighbours is padded with label -1 and similarity -inf.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from groundproxy.errors import IndexStoreError

#: Graph degree and build effort of new HNSW indexes (hnswlib files and pgvector alike);
#: overridden by GROUNDPROXY_HNSW_M / GROUNDPROXY_HNSW_EF_CONSTRUCTION (:func:`build_params`).
DEFAULT_M = 16
DEFAULT_EF_CONSTRUCTION = 200


def _env_int(key: str, default: int, low: int, high: int) -> int:
    raw = os.environ.get(key, "").strip()
    try:
        value = int(raw) if raw else default
    except ValueError:
        raise IndexStoreError(f"{key} must be a whole number, not {raw!r}") from None
    if not low <= value <= high:
        raise IndexStoreError(f"{key} must be between {low} and {high}, not {value}")
    return value


def build_params(ef_construction_default: int = DEFAULT_EF_CONSTRUCTION) -> tuple[int, int]:
    """(m, ef_construction) for an index built now, from ``GROUNDPROXY_HNSW_M`` and
    ``GROUNDPROXY_HNSW_EF_CONSTRUCTION`` (defaults 16 and ``ef_construction_default``:
    200 for hnswlib, pgvector's own 64 for PostgreSQL). Lower ``ef_construction``
    builds faster at some recall: 1M vectors on 2 cores in 9.2 min at 100 (recall@10
    0.83 at the serving ef) against ~14 min at 200 (bench/index.py). An index keeps the
    values it was built with; they apply to indexes created after the change."""
    m = _env_int("GROUNDPROXY_HNSW_M", DEFAULT_M, 4, 128)
    ef = _env_int("GROUNDPROXY_HNSW_EF_CONSTRUCTION", ef_construction_default, 16, 2000)
    return m, ef


#: Adds of at least this many vectors run on every core (hnswlib's ParallelFor); smaller
#: ones stay on one thread, where starting the workers costs more than it saves.
PARALLEL_ADD_MIN = 256

Labels = npt.NDArray[np.int64]
Scores = npt.NDArray[np.float32]


class VectorIndex(Protocol):
    """What the tenant index needs from a vector store (hnswlib here; Qdrant could be next)."""

    @property
    def dim(self) -> int: ...

    @property
    def count(self) -> int:
        """Live (not deleted) vectors."""
        ...

    @property
    def deleted_count(self) -> int: ...

    def add(self, labels: Sequence[int], vectors: npt.NDArray[np.float32]) -> None: ...

    def mark_deleted(self, label: int) -> None: ...

    def query(self, vectors: npt.NDArray[np.float32], k: int) -> tuple[Labels, Scores]: ...

    def save(self, path: Path) -> None: ...


class HnswVectorIndex:
    """hnswlib HNSW graph, space "cosine", slots of deleted vectors reused by later adds.

    ``add_threads`` (default: every core) build a large add in parallel; an add of fewer
    than :data:`PARALLEL_ADD_MIN` vectors uses one thread.
    """

    def __init__(
        self,
        dim: int,
        *,
        max_elements: int = 1024,
        m: int = DEFAULT_M,
        ef_construction: int = DEFAULT_EF_CONSTRUCTION,
        add_threads: int | None = None,
    ) -> None:
        import hnswlib

        index = hnswlib.Index(space="cosine", dim=dim)
        index.init_index(
            max_elements=max(1, max_elements),
            M=m,
            ef_construction=ef_construction,
            allow_replace_deleted=True,
        )
        self._adopt(dim, index, 0, add_threads)

    def _adopt(self, dim: int, index: Any, deleted: int, add_threads: int | None) -> None:
        self._dim = dim
        self._add_threads = max(1, add_threads or os.cpu_count() or 1)
        self._lock = threading.Lock()
        self._deleted = deleted
        self._index = index

    @classmethod
    def load(cls, path: Path, dim: int, *, deleted: int = 0) -> HnswVectorIndex:
        """Load an index saved by ``save``; ``deleted`` is how many vectors it holds deleted."""
        import hnswlib

        index = hnswlib.Index(space="cosine", dim=dim)
        try:
            index.load_index(str(path), max_elements=0, allow_replace_deleted=True)
        except (RuntimeError, ValueError, OSError) as exc:
            raise IndexStoreError(f"cannot load vector index {path}: {exc}") from exc
        if int(index.dim) != dim:
            raise IndexStoreError(f"vector index {path} has dim {index.dim}, expected {dim}")
        if not 0 <= deleted <= index.get_current_count():
            raise IndexStoreError(f"vector index {path}: deleted count {deleted} is impossible")
        loaded = cls.__new__(cls)
        loaded._adopt(dim, index, deleted, None)
        return loaded

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def count(self) -> int:
        return int(self._index.get_current_count()) - self._deleted

    @property
    def deleted_count(self) -> int:
        return self._deleted

    @property
    def capacity(self) -> int:
        return int(self._index.get_max_elements())

    def add(self, labels: Sequence[int], vectors: npt.NDArray[np.float32]) -> None:
        """Add vectors under new integer labels (growing the capacity as needed)."""
        data = np.ascontiguousarray(vectors, dtype=np.float32)
        ids = np.asarray(labels, dtype=np.int64)
        if data.ndim != 2 or data.shape[1] != self._dim or data.shape[0] != ids.shape[0]:
            raise IndexStoreError(
                f"cannot add vectors of shape {data.shape} under {ids.shape[0]} labels "
                f"to a {self._dim}-d index"
            )
        n = int(ids.shape[0])
        if n == 0:
            return
        with self._lock:
            reused = min(n, self._deleted)
            needed = int(self._index.get_current_count()) + n - reused
            capacity = self.capacity
            if needed > capacity:
                self._index.resize_index(max(needed, capacity * 2))
            threads = self._add_threads if n >= PARALLEL_ADD_MIN else 1
            try:
                self._index.add_items(data, ids, num_threads=threads, replace_deleted=True)
            except RuntimeError as exc:
                raise IndexStoreError(f"cannot add to the vector index: {exc}") from exc
            self._deleted -= reused

    def mark_deleted(self, label: int) -> None:
        """Hide ``label`` from queries; its slot is reused by a later add."""
        with self._lock:
            try:
                self._index.mark_deleted(int(label))
            except RuntimeError as exc:
                raise IndexStoreError(f"cannot delete label {label}: {exc}") from exc
            self._deleted += 1

    def query(self, vectors: npt.NDArray[np.float32], k: int) -> tuple[Labels, Scores]:
        """Top-k labels and cosine similarities for each row of ``vectors``, best first."""
        data = np.ascontiguousarray(vectors, dtype=np.float32)
        if data.ndim == 1:
            data = data.reshape(1, -1)
        n = int(data.shape[0])
        if data.ndim != 2 or (n and data.shape[1] != self._dim):
            raise IndexStoreError(f"query vectors of shape {data.shape} for a {self._dim}-d index")
        with self._lock:
            k_eff = min(int(k), self.count)
            if n == 0 or k_eff <= 0:
                return np.zeros((n, 0), dtype=np.int64), np.zeros((n, 0), dtype=np.float32)
            self._index.set_ef(max(64, k_eff))
            try:
                labels, dists = self._index.knn_query(data, k=k_eff, num_threads=1)
            except RuntimeError:  # too few reachable live vectors: go row by row
                return self._query_rows(data, k_eff)
        return _as_result(labels, dists)

    def _query_rows(self, data: npt.NDArray[np.float32], k: int) -> tuple[Labels, Scores]:
        out_labels = np.full((data.shape[0], k), -1, dtype=np.int64)
        out_scores = np.full((data.shape[0], k), -np.inf, dtype=np.float32)
        for row in range(data.shape[0]):
            want = k
            while want > 0:
                try:
                    labels, dists = self._index.knn_query(
                        data[row : row + 1], k=want, num_threads=1
                    )
                except RuntimeError:
                    want //= 2
                    continue
                got_labels, got_scores = _as_result(labels, dists)
                out_labels[row, :want] = got_labels[0]
                out_scores[row, :want] = got_scores[0]
                break
        return out_labels, out_scores

    def save(self, path: Path) -> None:
        """Write the whole index (graph, vectors, deletion marks) to ``path``."""
        with self._lock:
            try:
                self._index.save_index(str(path))
            except (RuntimeError, OSError) as exc:
                raise IndexStoreError(f"cannot save vector index {path}: {exc}") from exc


def _as_result(labels: Any, dists: Any) -> tuple[Labels, Scores]:
    sims = np.clip(1.0 - np.asarray(dists, dtype=np.float32), -1.0, 1.0).astype(np.float32)
    return np.asarray(labels, dtype=np.int64), sims
