"""What the server needs from a tenant-index backend, as small protocols.

Two backends implement them: the embedded one (hnswlib + SQLite generations on local disk:
``retrieval.index_snapshot`` / ``retrieval.manager``) and PostgreSQL + pgvector
(``retrieval.pg_index``), shared by several replicas.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

import numpy as np
import numpy.typing as npt

from groundproxy.guards.types import Evidence
from groundproxy.retrieval.chunk_store import ChunkRecord, DocumentInfo, DocumentRecord


class IndexSnapshot(Protocol):
    """One tenant's index as a request sees it (satisfies ``EvidenceSource``)."""

    @property
    def tenant(self) -> str: ...

    @property
    def version(self) -> int: ...

    @property
    def count(self) -> int: ...

    def search(
        self, vectors: npt.NDArray[np.float32], top_k: int, min_score: float
    ) -> list[list[Evidence]]: ...

    def get_document(self, doc_id: str) -> DocumentRecord | None: ...

    def get_chunk(self, doc_id: str, chunk_id: str) -> ChunkRecord | None: ...

    def documents(self) -> list[DocumentInfo]: ...


class TenantIndexes(Protocol):
    """The server's per-tenant index cache, following commits made by any process."""

    def get(self, tenant: str) -> IndexSnapshot: ...

    def refresh(self, tenant: str) -> IndexSnapshot: ...

    def invalidate(self, tenant: str) -> None: ...

    def preload(self, tenants: Iterable[str]) -> list[str]: ...

    def loaded(self) -> list[str]: ...

    def close(self) -> None: ...
