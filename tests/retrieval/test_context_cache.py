"""The tenant-scoped cache of request-context sentence vectors (retrieval.context_cache)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from groundproxy.proxy.context_metrics import ContextCacheCollector
from groundproxy.retrieval.context_cache import ContextVectorCache
from groundproxy.retrieval.index_snapshot import TenantIndex
from groundproxy.retrieval.ingest import ingest_texts
from groundproxy.testing.embedders import HashingEmbedder

SENTENCES = ["The warranty lasts 12 months.", "Batteries are covered for 6 months."]


class Counting(HashingEmbedder):
    def __init__(self, name: str = "hashing-384") -> None:
        super().__init__()
        self.name = name
        self.texts: list[str] = []

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.texts += list(texts)
        return super().encode(texts)


def test_a_passage_seen_before_costs_nothing_and_never_crosses_tenants() -> None:
    cache = ContextVectorCache()
    embedder = Counting()
    cache.request("acme", embedder).fill(SENTENCES)
    again = cache.request("acme", embedder)
    again.fill(SENTENCES)
    assert embedder.texts == SENTENCES  # embedded once
    first = again.lookup(SENTENCES)[0]
    assert again.counts.found == 2 and first is not None
    assert np.allclose(first, embedder.encode(SENTENCES[:1])[0])
    other = cache.request("globex", embedder)
    other.fill(SENTENCES)
    assert other.counts.found == 0 and other.counts.embedded == 2  # no hit across tenants
    counts = cache.counts()
    assert counts[("acme", "hit")] == 2 and counts[("acme", "embedded")] == 2
    assert counts[("globex", "embedded")] == 2 and ("globex", "hit") not in counts


def test_the_cache_is_bounded_and_counts_evictions() -> None:
    cache = ContextVectorCache(max_entries=3)
    vectors = cache.request("acme", Counting())
    vectors.fill([f"sentence {i}." for i in range(5)])
    assert len(cache) == 3 and cache.counts()[("acme", "evicted")] == 2
    assert cache.request("acme", Counting()).lookup(["sentence 0."]) == [None]


def test_a_chunk_of_the_tenants_index_uses_the_vectors_stored_at_ingest(tmp_path: Path) -> None:
    from groundproxy.retrieval.embedder import MINILM_NAME

    embedder = Counting(MINILM_NAME)  # stored sentences are kept for MiniLM-named indexes
    ingest_texts(tmp_path, "acme", [("h.md", " ".join(SENTENCES))], embedder)
    index = TenantIndex.open(tmp_path, "acme")
    assert index.sentences is not None
    embedder.texts.clear()
    vectors = ContextVectorCache().request("acme", embedder, index.sentences)
    vectors.fill(SENTENCES)
    assert embedder.texts == [] and vectors.counts.found == 2
    index.close()


def test_metrics_are_counters_by_tenant_and_source() -> None:
    cache = ContextVectorCache()
    cache.request("acme", Counting()).fill(SENTENCES)
    cache.request("acme", Counting()).fill(SENTENCES)
    families = {f.name: f for f in ContextCacheCollector(cache).collect()}
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for f in families.values() for s in f.samples}  # fmt: skip
    assert (
        samples[("groundproxy_context_vectors_total", (("source", "hit"), ("tenant", "acme")))] == 2
    )
    assert samples[("groundproxy_context_cache_entries", ())] == 2
