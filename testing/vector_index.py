"""A fake :class:`~groundproxy.retrieval.vector_index.VectorIndex`: exact cosine search in
memory (numpy), the contract of the hnswlib one without its approximation.

Labels are integers chosen by the caller; a deleted label is hidden from queries. ``query``
returns (n, k') arrays of labels and cosine similarities, best first, k' = min(k, live
count) — as :class:`~groundproxy.retrieval.vector_index.HnswVectorIndex` does, so a test can
check code against both. ``save`` / :meth:`MemoryVectorIndex.load` use one ``.npz`` file.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from groundproxy.errors import IndexStoreError
from groundproxy.retrieval.vector_index import Labels, Scores


class MemoryVectorIndex:
    """Exact nearest neighbours by cosine similarity over the vectors added."""

    def __init__(self, dim: int) -> None:
        self._dim = dim
        self._vectors: dict[int, npt.NDArray[np.float32]] = {}
        self._deleted: set[int] = set()

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def count(self) -> int:
        return len(self._vectors) - len(self._deleted)

    @property
    def deleted_count(self) -> int:
        return len(self._deleted)

    def add(self, labels: Sequence[int], vectors: npt.NDArray[np.float32]) -> None:
        data = np.asarray(vectors, dtype=np.float32)
        if data.ndim != 2 or data.shape[1] != self._dim or data.shape[0] != len(labels):
            raise IndexStoreError(
                f"cannot add vectors of shape {data.shape} under {len(labels)} labels "
                f"to a {self._dim}-d index"
            )
        for label, row in zip(labels, data, strict=True):
            norm = float(np.linalg.norm(row))
            self._vectors[int(label)] = row / norm if norm > 0 else row
            self._deleted.discard(int(label))

    def mark_deleted(self, label: int) -> None:
        if int(label) not in self._vectors or int(label) in self._deleted:
            raise IndexStoreError(f"cannot delete label {label}: not in the index")
        self._deleted.add(int(label))

    def query(self, vectors: npt.NDArray[np.float32], k: int) -> tuple[Labels, Scores]:
        data = np.asarray(vectors, dtype=np.float32).reshape(-1, self._dim)
        live = sorted(set(self._vectors) - self._deleted)
        k_eff = min(int(k), len(live))
        n = data.shape[0]
        if n == 0 or k_eff <= 0:
            return np.zeros((n, 0), dtype=np.int64), np.zeros((n, 0), dtype=np.float32)
        norms = np.linalg.norm(data, axis=1, keepdims=True)
        unit = data / np.where(norms > 0, norms, 1.0)
        matrix = np.stack([self._vectors[label] for label in live])
        sims = unit @ matrix.T
        order = np.argsort(-sims, axis=1, kind="stable")[:, :k_eff]
        labels = np.asarray(live, dtype=np.int64)[order]
        return labels, np.take_along_axis(sims, order, axis=1).astype(np.float32)

    def save(self, path: Path) -> None:
        labels = np.asarray(sorted(self._vectors), dtype=np.int64)
        vectors = np.stack([self._vectors[int(i)] for i in labels]) if len(labels) else None
        with Path(path).open("wb") as out:
            np.savez(
                out,
                labels=labels,
                vectors=np.zeros((0, self._dim), np.float32) if vectors is None else vectors,
                deleted=np.asarray(sorted(self._deleted), dtype=np.int64),
            )

    @classmethod
    def load(cls, path: Path, dim: int) -> MemoryVectorIndex:
        """An index written by :meth:`save`."""
        with np.load(Path(path)) as saved:
            index = cls(dim)
            index.add([int(i) for i in saved["labels"]], saved["vectors"])
            index._deleted = {int(i) for i in saved["deleted"]}
        return index
