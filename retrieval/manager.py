"""``IndexManager``: the server's cache of open tenant indexes.

Indexes open lazily, stay cached (LRU, ``max_loaded``), and are re-opened when CURRENT
changes on disk (its content is read at most every ``check_interval`` seconds per
tenant), so an ingest made by another process becomes visible without a restart.
An index dropped from the cache is not closed explicitly (a request may still hold
it); its SQLite connection closes when the last reference goes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from groundproxy.errors import GroundproxyError
from groundproxy.guards.types import Embedder
from groundproxy.retrieval.generations import current_signature
from groundproxy.retrieval.index_snapshot import TenantIndex
from groundproxy.retrieval.names import validate_tenant

log = logging.getLogger(__name__)


@dataclass
class _Entry:
    index: TenantIndex
    signature: bytes | None
    checked_at: float


class IndexManager:
    """Thread-safe tenant → ``TenantIndex`` cache that follows CURRENT on disk."""

    def __init__(
        self,
        data_dir: Path,
        embedder: Embedder | None = None,
        max_loaded: int = 64,
        *,
        check_interval: float = 0.5,
    ) -> None:
        self.data_dir = Path(data_dir)
        self._embedder = embedder
        self._max_loaded = max(1, max_loaded)
        self._interval = check_interval
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self._tenant_locks: dict[str, threading.Lock] = {}

    def _tenant_lock(self, tenant: str) -> threading.Lock:
        with self._lock:
            return self._tenant_locks.setdefault(tenant, threading.Lock())

    def _fresh(self, tenant: str, now: float) -> TenantIndex | None:
        with self._lock:
            entry = self._entries.get(tenant)
            if entry is None or now - entry.checked_at >= self._interval:
                return None
            self._entries.move_to_end(tenant)
            return entry.index

    def get(self, tenant: str) -> TenantIndex:
        """The tenant's current index (empty, version 0, when it has none)."""
        tenant = validate_tenant(tenant)
        index = self._fresh(tenant, time.monotonic())
        if index is not None:
            return index
        with self._tenant_lock(tenant):
            index = self._fresh(tenant, time.monotonic())
            return index if index is not None else self._check(tenant, force=False)

    def refresh(self, tenant: str) -> TenantIndex:
        """Look at CURRENT now (not after the check interval) and return the index."""
        tenant = validate_tenant(tenant)
        with self._tenant_lock(tenant):
            return self._check(tenant, force=True)

    def invalidate(self, tenant: str) -> None:
        """Make the next ``get`` look at CURRENT (e.g. right after an in-process ingest)."""
        tenant = validate_tenant(tenant)
        with self._lock:
            entry = self._entries.get(tenant)
            if entry is not None:
                entry.checked_at = float("-inf")

    def _check(self, tenant: str, force: bool) -> TenantIndex:
        now = time.monotonic()
        with self._lock:
            entry = self._entries.get(tenant)
        signature = current_signature(self.data_dir / tenant)
        if entry is not None and signature == entry.signature and not force:
            entry.checked_at = now
            return self._store(tenant, entry)
        try:
            index = TenantIndex.open(self.data_dir, tenant, embedder=self._embedder)
        except GroundproxyError as exc:
            if entry is None:
                raise
            log.error(
                "tenant %s: keeping index version %s, reopen failed: %s",
                tenant,
                entry.index.version,
                exc,
            )
            entry.checked_at = now
            return self._store(tenant, entry)
        if entry is not None and entry.index.generation == index.generation:
            index.close()
            index = entry.index
        return self._store(tenant, _Entry(index, signature, now))

    def _store(self, tenant: str, entry: _Entry) -> TenantIndex:
        with self._lock:
            self._entries[tenant] = entry
            self._entries.move_to_end(tenant)
            while len(self._entries) > self._max_loaded:
                evicted, _ = self._entries.popitem(last=False)
                log.info("tenant %s: index evicted from the cache", evicted)
        return entry.index

    def preload(self, tenants: Iterable[str]) -> list[str]:
        """Open each tenant's index; return one message per tenant that failed."""
        errors: list[str] = []
        for tenant in tenants:
            try:
                index = self.get(tenant)
            except GroundproxyError as exc:
                errors.append(f"index {tenant}: {exc.message}")
                log.error("tenant %s: index not loaded: %s", tenant, exc.message)
                continue
            log.info("tenant %s: index version %s, %s chunks", tenant, index.version, index.count)
        return errors

    def loaded(self) -> list[str]:
        """Tenants whose index is cached, least recently used first."""
        with self._lock:
            return list(self._entries)

    def close(self) -> None:
        """Close every cached index and empty the cache (at server shutdown)."""
        with self._lock:
            entries = list(self._entries.values())
            self._entries.clear()
        for entry in entries:
            entry.index.close()
