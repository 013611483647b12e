"""``/metrics`` for the request-context vector cache (retrieval.context_cache), read at scrape
time:

``groundproxy_context_vectors_total{tenant,source}``   evidence-sentence vectors of request
                                                       context: ``hit`` (the tenant's cache),
                                                       ``index`` (its index, stored at
                                                       ingest), ``embedded`` (made now)
``groundproxy_context_cache_evictions_total{tenant}``  entries pushed out (least recent first)
``groundproxy_context_cache_entries``                  entries held, all tenants

and, counted as answers are guarded, ``groundproxy_context_capped_total{tenant}``: answers
verified on the top-N passages of their context (the cap or the budget left the rest out).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector


class ContextCounts(Protocol):
    def counts(self) -> dict[tuple[str, str], int]: ...

    def __len__(self) -> int: ...


class ContextCacheCollector(Collector):
    """Reads one cache's counts at each scrape."""

    def __init__(self, cache: ContextCounts) -> None:
        self.cache = cache

    def collect(self) -> Iterable[CounterMetricFamily | GaugeMetricFamily]:
        vectors = CounterMetricFamily(
            "groundproxy_context_vectors",
            "request-context sentence vectors by where they came from",
            labels=["tenant", "source"],
        )
        evicted = CounterMetricFamily(
            "groundproxy_context_cache_evictions",
            "request-context vectors evicted from the cache",
            labels=["tenant"],
        )
        for (tenant, source), n in sorted(self.cache.counts().items()):
            if source == "evicted":
                evicted.add_metric([tenant], float(n))
            else:
                vectors.add_metric([tenant, source], float(n))
        entries = GaugeMetricFamily(
            "groundproxy_context_cache_entries", "request-context vectors held, all tenants"
        )
        entries.add_metric([], float(len(self.cache)))
        return [vectors, evicted, entries]
