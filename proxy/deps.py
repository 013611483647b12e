"""What the app serves with, built in one place (:func:`build_deps`) and replaceable whole.

``build_app(settings, deps)`` (:mod:`proxy.app`) takes a :class:`Deps`; without one its
lifespan builds the real ones from the settings (that loads the embedder and the verifier
registry: heavy, so never at import time and never before start-up). A test builds its own
and changes what it needs, e.g. the upstream::

    deps = build_deps(settings).replace(upstream=FakeUpstream(rules))
    app = build_app(settings, deps)

Every part is a slot, swapped through :meth:`Deps.replace` alone: the upstream, the judge's
client (``judge``; None: the judge shares ``upstream`` — its connections, closed with it —
so a fake upstream answers the judge too), the embedder, the verifier registry, the storage.
The guard (:attr:`Deps.guard`) is assembled from the slots on first use
(:func:`proxy.serving.guarding.assemble_guard`), never building a part of its own::

    deps = build_deps(settings).replace(judge=FakeJudge(verdicts(...)))

The lifespan only opens them (:meth:`Deps.open`: storage connected and migrated, verifiers
warmed up, the tenants' indexes preloaded) and closes them (:meth:`Deps.close`, last
opened first).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any

import structlog

from groundproxy.errors import GroundproxyError
from groundproxy.guards import NO_LADDER
from groundproxy.guards.types import Embedder
from groundproxy.models.registry import VerifierRegistry
from groundproxy.policies.loader import PolicyStore
from groundproxy.proxy.metrics import Metrics
from groundproxy.proxy.serving.clock import Clock, SystemClock
from groundproxy.proxy.serving.guard_build import GuardInputs, default_embedder, default_verifiers
from groundproxy.proxy.serving.guarding import GuardService, assemble_guard
from groundproxy.proxy.settings import Settings
from groundproxy.proxy.storage.backends import Storage, open_storage
from groundproxy.proxy.storage.sqlite_traces import TraceStores
from groundproxy.proxy.upstream.judge_client import JudgeCaller, UpstreamJudge
from groundproxy.proxy.upstream.types import Upstream

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class Deps:
    """The app's dependencies (module docstring)."""

    settings: Settings  # batching, guard workers, caches: how the guard is assembled
    upstream: Upstream  # the tenants' LLMs (litellm, or the direct OpenAI wire path)
    storage: Storage  # indexes, traces, calibration, labels, adapters: files or PostgreSQL
    embedder: Embedder  # the configured one (retrieval, request context, embedhead)
    verifiers: VerifierRegistry  # the verifiers by name (models.registry)
    traces: TraceStores  # multi-step traces (from ``storage``)
    metrics: Metrics  # the app's (one per app): what the guard and the routes record
    clock: Clock
    judge: JudgeCaller | None = None  # None: the judge shares ``upstream`` (module docstring)

    def replace(self, **changes: Any) -> Deps:
        """A copy with ``changes`` (``upstream=…``, ``judge=…``, ``embedder=…``, …); its
        guard is assembled from them. Replace before the app opens the deps."""
        return dataclasses.replace(self, **changes)

    def judge_caller(self) -> JudgeCaller:
        """The judge's client: ``judge``, else one over ``upstream``'s connections."""
        return self.judge if self.judge is not None else UpstreamJudge(self.upstream)

    @functools.cached_property
    def guard(self) -> GuardService:
        """The guard over these slots (assembled once, on first use)."""
        inputs = GuardInputs(
            embedder=self.embedder,
            verifiers=self.verifiers,
            storage=self.storage,
            judge=self.judge_caller(),
            labels=self.storage,
            metrics=self.metrics,
        )
        return assemble_guard(self.settings, inputs)

    def open(self, policies: PolicyStore) -> list[str]:
        """At start-up, in a worker thread: connect the storage (PostgreSQL: migrate), warm
        up the verifiers the policies name and preload their indexes. Returns what failed
        to load (a bad verifier or index fails its tenants, not the server)."""
        self.storage.start()
        tenants = policies.tenants()
        loaded = [p for t in tenants if (p := policies.get(t)) is not None]
        strong = {p.policy.verifier.ladder.strong for p in loaded} - {NO_LADDER}
        errors = self.guard.warm_up(
            sorted({p.policy.verifier.model for p in loaded}), sorted(strong)
        )
        by_index: dict[str, list[str]] = {}
        for p in loaded:
            by_index.setdefault(p.policy.index_name, []).append(p.policy.tenant)
        failed = self.guard.parts.indexes.preload(sorted(by_index))
        for name, names in sorted(by_index.items()):
            if any(err.startswith(f"index {name}:") for err in failed):
                continue
            if self.guard.parts.indexes.get(name).count == 0:
                for tenant in names:  # its answers can't be grounded in its own documents
                    log.warning("index_empty", tenant=tenant, index=name)
        return errors + failed

    async def close(self) -> None:
        """Close what :meth:`open` and :func:`build_deps` opened, last opened first; one
        that fails to close is logged, the others still close."""
        closers = (
            ("judge", self._close_judge),
            ("upstream", self._close_upstream),
            ("guard", self._close_guard),
            ("traces", self._close_traces),
            ("storage", self._close_storage),
        )
        for name, closer in closers:
            try:
                await closer()
            except (GroundproxyError, OSError, RuntimeError) as exc:
                log.error("close_failed", resource=name, error_type=type(exc).__name__)

    async def _close_upstream(self) -> None:
        close = getattr(self.upstream, "aclose", None)
        if close is not None:
            await close()

    async def _close_judge(self) -> None:
        """An injected judge client of its own (a shared one closes with ``upstream``)."""
        close = getattr(self.judge, "aclose", None)
        if close is not None:
            await close()

    async def _close_guard(self) -> None:
        if "guard" not in self.__dict__:
            return  # never assembled: nothing started
        self.guard.close()  # the micro-batching workers
        self.guard.parts.indexes.close()

    async def _close_traces(self) -> None:
        self.traces.close()

    async def _close_storage(self) -> None:
        self.storage.close()


def build_deps(settings: Settings, metrics: Metrics | None = None) -> Deps:
    """The real dependencies for ``settings``, recording into ``metrics`` (default: new)."""
    from groundproxy.proxy.upstream.client import UpstreamClient

    metrics = metrics if metrics is not None else Metrics()
    storage = open_storage(settings.data, settings.database_url)
    embedder = default_embedder(settings)
    return Deps(
        settings=settings,
        upstream=UpstreamClient(),
        storage=storage,
        embedder=embedder,
        verifiers=default_verifiers(settings, embedder),
        traces=storage.traces(),
        metrics=metrics,
        clock=SystemClock(),
    )
