"""What the two index snapshots (files: ``TenantIndex``, PostgreSQL: ``PgTenantIndex``) share:
the metadata properties, the embedder check and the query-vector checks."""

from __future__ import annotations

from typing import Protocol

import numpy as np
import numpy.typing as npt

from groundproxy.errors import BadRequestError, IndexStoreError
from groundproxy.guards.types import Embedder


class IndexMeta(Protocol):
    """The fields of a generation's meta.json / a ``gp_tenants`` row that readers use."""

    @property
    def version(self) -> int: ...

    @property
    def dim(self) -> int: ...

    @property
    def embedder(self) -> str: ...

    @property
    def count(self) -> int: ...


class SnapshotBase:
    """A tenant's snapshot described by ``_meta`` (None: a tenant without an index)."""

    _tenant: str
    _meta: IndexMeta | None

    @property
    def tenant(self) -> str:
        return self._tenant

    @property
    def count(self) -> int:
        """Number of live chunks."""
        return self._meta.count if self._meta else 0

    @property
    def dim(self) -> int | None:
        return self._meta.dim if self._meta else None

    @property
    def embedder_name(self) -> str | None:
        return self._meta.embedder if self._meta else None

    def check_embedder(self, embedder: Embedder) -> None:
        """Raise IndexStoreError unless this index was built with ``embedder``."""
        meta = self._meta
        if meta is not None and (meta.dim != embedder.dim or meta.embedder != embedder.name):
            raise IndexStoreError(
                f"tenant {self._tenant!r}: the index was built with embedder {meta.embedder} "
                f"({meta.dim}-d), not {embedder.name} ({embedder.dim}-d); re-ingest it"
            )

    def check_query_dim(self, queries: npt.NDArray[np.float32], dim: int) -> None:
        """Raise IndexStoreError unless the query vectors have this index's ``dim``."""
        if queries.shape[1] != dim:
            raise IndexStoreError(
                f"tenant {self._tenant!r}: query vectors have dim {queries.shape[1]}, the index "
                f"was built with {dim}-d vectors ({self.embedder_name})"
            )


def query_matrix(vectors: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """The query vectors as a 2-d float32 matrix (one vector becomes one row)."""
    queries = np.asarray(vectors, dtype=np.float32)
    if queries.ndim == 1:
        queries = queries.reshape(1, -1)
    if queries.ndim != 2:
        raise BadRequestError(f"query vectors must be 2-d, got shape {queries.shape}")
    return queries
