"""Passages seen before cost nothing: a tenant-scoped, bounded cache of the sentence vectors of
request context, and the tenant index's stored sentence vectors behind it.

RAG apps resend the same retrieved chunks request after request. The guard embeds the
verifier's sentences of the context passages it keeps (guards.evidence.request_evidence); this cache
keeps those vectors, keyed by (tenant, 64-bit blake2b of the sentence text), least recently
used out first, at most ``max_entries`` (1.5 KiB each for MiniLM: 32,768 ≈ 50 MiB). A hit
never crosses tenants (no tenant learns from its latency whether another sent a text). A
sentence the cache lacks is looked up next in the tenant index's sentence vectors stored at
ingest (retrieval.sentence_vectors, or PostgreSQL's gp_sentences): a passage that is a chunk
of the tenant's own index costs a look-up, not a model run.

Counts per tenant (``stats()``; ``/metrics`` exports them as counters,
proxy.context_metrics): sentence vectors served from the cache (``hit``), from the index
(``index``), made by the embedder (``embedded``), and entries evicted.
"""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from groundproxy.guards.evidence.vectors import RequestVectors, Vector
from groundproxy.guards.types import Embedder, SentenceVectors
from groundproxy.retrieval.sentence_vectors import sentence_key

DEFAULT_ENTRIES = 32_768
SOURCES = ("hit", "index", "embedded")


class ContextVectorCache:
    """The process's cache (see the module docstring); thread-safe."""

    def __init__(self, max_entries: int = DEFAULT_ENTRIES) -> None:
        self.max_entries = max(0, max_entries)
        self._items: OrderedDict[tuple[str, str, int], Vector] = OrderedDict()
        self._lock = threading.Lock()
        self._counts: Counter[tuple[str, str]] = Counter()  # (tenant, source or "evicted")

    def __len__(self) -> int:
        return len(self._items)

    def request(
        self, tenant: str, embedder: Embedder, index: SentenceVectors | None = None
    ) -> RequestVectors:
        """The vectors of one request of ``tenant`` (``index``: its index's stored ones)."""
        stored = index if index is not None and index.embedder == embedder.name else None
        return RequestVectors(embedder, _TenantSource(self, tenant, embedder.name, stored))

    def counts(self) -> dict[tuple[str, str], int]:
        """{(tenant, source): n} with source in hit | index | embedded | evicted."""
        with self._lock:
            return dict(self._counts)

    def stats(self) -> dict[str, int]:
        """Totals over tenants (``hits`` / ``misses`` for the cache gauges of proxy.metrics)."""
        with self._lock:
            hits = sum(n for (_, s), n in self._counts.items() if s == "hit")
            misses = sum(n for (_, s), n in self._counts.items() if s in ("index", "embedded"))
            evicted = sum(n for (_, s), n in self._counts.items() if s == "evicted")
            return {"hits": hits, "misses": misses, "size": len(self._items), "evictions": evicted}

    def get(self, tenant: str, model: str, texts: Sequence[str]) -> list[Vector | None]:
        out: list[Vector | None] = []
        with self._lock:
            for t in texts:
                key = (tenant, model, sentence_key(t))
                v = self._items.get(key)
                if v is not None:
                    self._items.move_to_end(key)
                out.append(v)
        return out

    def put(
        self, tenant: str, model: str, texts: Sequence[str], vectors: npt.NDArray[np.float32]
    ) -> None:
        if self.max_entries == 0:
            return
        with self._lock:
            for t, v in zip(texts, vectors, strict=True):
                key = (tenant, model, sentence_key(t))
                self._items[key] = np.array(v, dtype=np.float32)
                self._items.move_to_end(key)
            while len(self._items) > self.max_entries:
                (owner, _, _), _ = self._items.popitem(last=False)
                self._counts[(owner, "evicted")] += 1

    def count(self, tenant: str, source: str, n: int) -> None:
        if n:
            with self._lock:
                self._counts[(tenant, source)] += n


class _TenantSource:
    """One tenant's view: its cache entries, then its index's stored sentences."""

    def __init__(
        self,
        cache: ContextVectorCache,
        tenant: str,
        model: str,
        index: SentenceVectors | None,
    ) -> None:
        self.cache = cache
        self.tenant = tenant
        self.model = model
        self.index = index

    def find(self, texts: Sequence[str]) -> list[Vector | None]:
        found = self.cache.get(self.tenant, self.model, texts)
        self.cache.count(self.tenant, "hit", sum(v is not None for v in found))
        missing = [i for i, v in enumerate(found) if v is None]
        if missing and self.index is not None:
            stored = self.index.lookup([texts[i] for i in missing])
            n = 0
            for i, v in zip(missing, stored, strict=True):
                if v is not None:
                    found[i] = np.asarray(v, dtype=np.float32)
                    n += 1
            self.cache.count(self.tenant, "index", n)
        return found

    def keep(self, texts: Sequence[str], vectors: npt.NDArray[np.float32]) -> None:
        self.cache.count(self.tenant, "embedded", len(texts))
        self.cache.put(self.tenant, self.model, texts, vectors)
