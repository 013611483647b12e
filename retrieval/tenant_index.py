"""The per-tenant on-disk index: one import point for readers, writers and the cache.

* ``TenantIndex`` — read-only snapshot of the live generation (``retrieval.index_snapshot``)
* ``IndexWriter`` — atomic batch of upserts/deletes (``retrieval.writer``)
* ``IndexManager`` — the server's LRU cache that follows CURRENT (``retrieval.manager``)
* ``validate_tenant`` / ``validate_doc_id`` — name checks (``retrieval.names``)

On-disk layout and the crash-safety protocol: ``retrieval.generations``.
"""

from __future__ import annotations

from groundproxy.retrieval.chunk_store import ChunkRecord, DocumentInfo, DocumentRecord
from groundproxy.retrieval.index_snapshot import TenantIndex
from groundproxy.retrieval.manager import IndexManager
from groundproxy.retrieval.names import validate_doc_id, validate_tenant
from groundproxy.retrieval.writer import IndexWriter, UpsertStatus

__all__ = [
    "ChunkRecord",
    "DocumentInfo",
    "DocumentRecord",
    "IndexManager",
    "IndexWriter",
    "TenantIndex",
    "UpsertStatus",
    "validate_doc_id",
    "validate_tenant",
]
