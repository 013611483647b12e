"""Prometheus metrics (prometheus-client), one registry per app (no module global).

What is measured:

``groundproxy_requests_total{tenant,route,status}``   every HTTP request (tenant ``-`` before auth)
``groundproxy_request_seconds{route}``                wall time until the last body byte
``groundproxy_verdicts_total{tenant,verdict}``        claim verdicts
``groundproxy_actions_total{tenant,action}``          what the policy did to an answer (one per
                                                      answer in every mode; ``unverified`` for
                                                      an unguarded tenant's)
``groundproxy_guard_seconds{tenant}``                 guard time per answer (off the event loop;
                                                      0 for an unguarded tenant's)
``groundproxy_guard_overload_total{tenant,outcome}``  guards not run in time: ``shed``
                                                      (on_overload: unverified), ``rejected``
                                                      (429), ``overrun`` (past the budget);
                                                      requests ``held`` before their upstream
                                                      call, ``hold_expired`` after max_queue_ms
``groundproxy_upstream_seconds{tenant}``              upstream time per answer (every mode:
                                                      a stream until its last chunk)
``groundproxy_tokens_total{tenant,kind}``             prompt/completion tokens the upstream
                                                      reported in ``usage``
``groundproxy_cache_{hits,misses}_total``             the verdict cache (counters), and its
``groundproxy_cache_hit_ratio`` / ``..._entries``     ratio and size, read at scrape time
                                                      from any object with ``stats()``
``groundproxy_verifier_batch_size``                   pairs per verifier batch (``observe_batch``)
``groundproxy_batch_size{model}``                     items per model call after micro-batching
                                                      across requests (model: embedder|verifier)
``groundproxy_gc_pause_seconds{generation}``          Python garbage collections: each stops
                                                      every thread (proxy.gc_pauses)
``groundproxy_judge_labels_total{tenant,outcome}``   judge labels: stored, full (at the tenant's
``groundproxy_label_store_bytes{tenant}``             judge.max_label_store_bytes), failed; size
``groundproxy_context_*``                             the request-context vector cache and
                                                      answers verified on the top-N passages
                                                      (proxy.context_metrics)

Who may read ``/metrics``: everyone when ``GROUNDPROXY_METRICS_PUBLIC=true``; otherwise only a
client on the loopback interface or a request carrying one of any tenant's *admin* keys.
Tenant (non-admin) keys get 403. Metrics carry tenant names and counts, never prompts,
answers or keys.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from groundproxy.guards.types import GuardReport
from groundproxy.proxy.context_metrics import ContextCacheCollector, ContextCounts

access_log = structlog.get_logger("groundproxy.access")

LATENCY_BUCKETS = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.25,
    0.5,
    0.8,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
_ROUTES = {
    "/v1/chat/completions": "chat",
    "/v1/responses": "responses",
    "/v1/completions": "completions",
    "/v1/embeddings": "embeddings",
    "/v1/models": "models",
    "/v1/groundproxy/documents": "documents",
    "/metrics": "metrics",
    "/healthz": "health",
    "/readyz": "health",
}


class StatsSource(Protocol):
    """Anything with ``stats()`` → ``{"hits": int, "misses": int, ...}`` (e.g. a verdict cache)."""

    def stats(self) -> Mapping[str, Any]: ...


def route_label(path: str) -> str:
    """A bounded label for a request path (unknown paths share one label)."""
    if not path.startswith("/v1/") and f"/v1{path}" in _ROUTES:
        path = f"/v1{path}"  # the same routes without /v1
    if path in _ROUTES:
        return _ROUTES[path]
    if path.startswith(("/v1/models/", "/models/")):
        return "models"
    if path.startswith("/v1/groundproxy/"):
        return "groundproxy"
    return "other"


class _CacheCollector(Collector):
    """Reads every registered stats source at scrape time."""

    def __init__(self) -> None:
        self.sources: dict[str, Callable[[], StatsSource | None]] = {}

    def collect(self) -> Iterable[Metric]:
        # counters: exposed as groundproxy_cache_{hits,misses}_total (TYPE counter), so that
        # rate() and increase() apply
        hits = CounterMetricFamily("groundproxy_cache_hits", "cache hits so far", labels=["cache"])
        misses = CounterMetricFamily(
            "groundproxy_cache_misses", "cache misses so far", labels=["cache"]
        )
        ratio = GaugeMetricFamily(
            "groundproxy_cache_hit_ratio", "hits / (hits + misses)", labels=["cache"]
        )
        size = GaugeMetricFamily("groundproxy_cache_entries", "entries held", labels=["cache"])
        for name, getter in sorted(self.sources.items()):
            try:
                source = getter()
                stats = source.stats() if source is not None else None
            except Exception:  # a broken source must not break the scrape
                stats = None
            if not stats:
                continue
            h, m = float(stats.get("hits", 0) or 0), float(stats.get("misses", 0) or 0)
            hits.add_metric([name], h)
            misses.add_metric([name], m)
            ratio.add_metric([name], h / (h + m) if h + m else 0.0)
            for key in ("size", "entries"):
                if key in stats:
                    size.add_metric([name], float(stats[key] or 0))
                    break
        return [hits, misses, ratio, size]


def rss_bytes() -> int:
    """This process's resident memory (Linux /proc; 0 elsewhere)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


class _WorkerCollector(Collector):
    """``groundproxy_worker_rss_bytes{pid}``: which worker answered the scrape (``serve
    --workers N``: each process keeps its own counters) and its memory."""

    def collect(self) -> Iterable[GaugeMetricFamily]:
        rss = GaugeMetricFamily(
            "groundproxy_worker_rss_bytes", "resident memory of this worker", labels=["pid"]
        )
        rss.add_metric([str(os.getpid())], float(rss_bytes()))
        return [rss]


class Metrics:
    """The app's metrics: made by ``build_app`` (``AppState.metrics``), passed to who records."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        r.register(_WorkerCollector())
        self.requests = Counter(
            "groundproxy_requests", "HTTP requests", ["tenant", "route", "status"], registry=r
        )
        self.request_seconds = Histogram(
            "groundproxy_request_seconds",
            "request wall time",
            ["route"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.verdicts = Counter(
            "groundproxy_verdicts", "claim verdicts", ["tenant", "verdict"], registry=r
        )
        self.actions = Counter(
            "groundproxy_actions", "policy actions on answers", ["tenant", "action"], registry=r
        )
        self.guard_seconds = Histogram(
            "groundproxy_guard_seconds",
            "guard time per answer",
            ["tenant"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.overloads = Counter(
            "groundproxy_guard_overload",
            "guards shed, rejected or past their latency budget",
            ["tenant", "outcome"],
            registry=r,
        )
        self.upstream_seconds = Histogram(
            "groundproxy_upstream_seconds",
            "upstream call time",
            ["tenant"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.tokens = Counter(
            "groundproxy_tokens", "upstream tokens (usage)", ["tenant", "kind"], registry=r
        )
        self.batch_size = Histogram(
            "groundproxy_verifier_batch_size",
            "pairs per verifier batch",
            buckets=BATCH_BUCKETS,
            registry=r,
        )
        self.model_batch_size = Histogram(
            "groundproxy_batch_size",
            "items per model call (micro-batched across requests)",
            ["model"],
            buckets=BATCH_BUCKETS,
            registry=r,
        )
        self.gc_pause = Histogram(
            "groundproxy_gc_pause_seconds",
            "Python garbage collection pauses (every thread stops)",
            ["generation"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.context_capped = Counter(
            "groundproxy_context_capped",
            "answers verified on the top-N passages of their request context",
            ["tenant"],
            registry=r,
        )
        self.judge_claims = Counter(
            "groundproxy_judge_claims",
            "claims escalated to the LLM judge, by outcome (agreed, overturned, skipped)",
            ["tenant", "outcome"],
            registry=r,
        )
        self.judge_skipped = Counter(
            "groundproxy_judge_skipped",
            "escalated claims the judge did not settle, by reason",
            ["tenant", "reason"],
            registry=r,
        )
        self.judge_calls = Counter(
            "groundproxy_judge_calls", "judge calls (one per answer or piece)", ["tenant"],
            registry=r,
        )  # fmt: skip
        self.judge_cached = Counter(
            "groundproxy_judge_cache_hits", "escalated claims answered from the judge cache",
            ["tenant"], registry=r,
        )  # fmt: skip
        self.judge_seconds = Histogram(
            "groundproxy_judge_seconds",
            "judge time per answer or piece",
            ["tenant"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.judge_labels = Counter(
            "groundproxy_judge_labels", "judge labels by outcome (stored, full, failed)",
            ["tenant", "outcome"], registry=r,
        )  # fmt: skip
        self.label_store_bytes = Gauge(
            "groundproxy_label_store_bytes", "the tenant's label store size (bytes), last seen",
            ["tenant"], registry=r,
        )  # fmt: skip
        self._caches = _CacheCollector()
        r.register(self._caches)
        self._context: ContextCacheCollector | None = None

    def observe_guard(self, tenant: str, report: GuardReport, seconds: float) -> None:
        self.guard_seconds.labels(tenant).observe(seconds)
        self.actions.labels(tenant, report.action).inc()
        if report.context is not None and report.context.capped:
            self.context_capped.labels(tenant).inc()
        for claim in report.claims:
            self.verdicts.labels(tenant, str(claim.verdict)).inc()

    def observe_judge(self, tenant: str, summary: Any, called: bool, cached: int) -> None:
        """One answer's (or piece's) judge step (``guards.judge.judged.JudgeSummary``)."""
        if called:
            self.judge_calls.labels(tenant).inc()
        if cached:
            self.judge_cached.labels(tenant).inc(cached)
        judged = summary.escalated - summary.skipped
        self.judge_claims.labels(tenant, "overturned").inc(summary.overturned)
        self.judge_claims.labels(tenant, "agreed").inc(judged - summary.overturned)
        self.judge_claims.labels(tenant, "skipped").inc(summary.skipped)
        for reason in summary.reasons:
            self.judge_skipped.labels(tenant, reason).inc()
        self.judge_seconds.labels(tenant).observe(summary.ms / 1000.0)

    def observe_judge_label(self, tenant: str, outcome: str, store_bytes: int) -> None:
        """One judge label (:mod:`proxy.storage.judge_labels`) and the store's size."""
        self.judge_labels.labels(tenant, outcome).inc()
        self.label_store_bytes.labels(tenant).set(store_bytes)

    def observe_unguarded(self, tenant: str) -> None:
        """One answer of a tenant whose guard is off (``guard: false``): its action
        (``unverified``) and a guard time of 0 s, what its ``x-groundproxy-latency-ms`` says;
        no verdicts, since nothing was judged."""
        self.guard_seconds.labels(tenant).observe(0.0)
        self.actions.labels(tenant, "unverified").inc()

    def observe_overload(self, tenant: str, outcome: str) -> None:
        """One guard ``shed``, ``rejected`` (429) or ``overrun`` (past its budget), or one
        request ``held`` before its upstream call (``on_overload: queue``) or let go
        unheld after ``max_queue_ms`` (``hold_expired``)."""
        self.overloads.labels(tenant, outcome).inc()

    def observe_upstream(
        self, tenant: str, seconds: float, usage: Mapping[str, Any] | None = None
    ) -> None:
        """One answer's upstream time, and its token counts when the upstream sent usage."""
        self.upstream_seconds.labels(tenant).observe(seconds)
        self.observe_usage(tenant, usage)

    def observe_usage(self, tenant: str, usage: Mapping[str, Any] | None) -> None:
        for kind in ("prompt", "completion"):
            n = (usage or {}).get(f"{kind}_tokens")
            if isinstance(n, int) and n > 0:
                self.tokens.labels(tenant, kind).inc(n)

    def observe_batch(self, pairs: int) -> None:
        self.batch_size.observe(pairs)

    def observe_model_batch(self, model: str, items: int) -> None:
        """One embedder/verifier call of ``items`` texts or pairs (see models.batching)."""
        self.model_batch_size.labels(model).observe(items)

    def register_cache(self, name: str, getter: Callable[[], StatsSource | None]) -> None:
        """Report a cache's ``stats()`` under ``cache=name`` (read lazily at each scrape)."""
        self._caches.sources[name] = getter

    def register_context_cache(self, cache: ContextCounts) -> None:
        """Export the request-context vector cache's counts (proxy.context_metrics); a
        second cache (the guard built again) replaces the first."""
        if self._context is not None:
            self.registry.unregister(self._context)
        self._context = ContextCacheCollector(cache)
        self.registry.register(self._context)

    def render(self) -> bytes:
        from prometheus_client import generate_latest

        return generate_latest(self.registry)


class MetricsMiddleware:
    """Pure ASGI: counts every request by tenant (bound by the route into structlog's
    contextvars), route label and status; times it until the last body byte; writes the
    access log line (method, path, status, tenant, latency; never a body)."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        route = route_label(str(scope.get("path", "")))
        started = time.perf_counter()
        status = {"code": 500}

        async def send_status(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            tenant = str(structlog.contextvars.get_contextvars().get("tenant") or "-")
            self.metrics.requests.labels(tenant, route, str(status["code"])).inc()
            seconds = time.perf_counter() - started
            self.metrics.request_seconds.labels(route).observe(seconds)
            access_log.info(
                "request",
                method=scope.get("method"),
                status=status["code"],
                tenant=tenant,
                latency_ms=round(seconds * 1000.0, 1),
            )
