"""The guard's dependencies, built in one place (:func:`build_guard`) for ``serve``, the CLI's
``check``, ``eval`` and ``calibrate``, and the benchmarks.

:class:`GuardParts` is the plain record of what was built: the embedder (micro-batched when
``batch_window_ms > 0``), the verifier registry, the tenant indexes, the calibration files
and the verdict cache. The app hands the parts routes need (embedder, indexes, cache) to
them directly; :class:`proxy.serving.guarding.GuardService` runs guards with them.
"""

from __future__ import annotations

import functools
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from groundproxy.guards import CostMeter, VerdictCache
from groundproxy.guards.types import Embedder, Verifier
from groundproxy.models.batching import BatchingEmbedder, BatchingVerifier, BatchOptions
from groundproxy.models.registry import VerifierRegistry, models_dir_for
from groundproxy.proxy.metrics import Metrics
from groundproxy.proxy.serving.admission import GuardQueue
from groundproxy.proxy.settings import Settings
from groundproxy.proxy.storage.backends import EmbeddedStorage, GuardStorage, LabelStorage
from groundproxy.proxy.storage.calibration import CalibrationCache
from groundproxy.proxy.upstream.judge_client import JudgeCaller, UpstreamJudge
from groundproxy.retrieval.context_cache import ContextVectorCache
from groundproxy.retrieval.storage import TenantIndexes


class Batching:
    """Micro-batching of embedder and verifier calls across concurrent guards
    (models.batching; batch sizes go to ``groundproxy_batch_size``). Off when the window
    is 0: wrappers are then never made."""

    def __init__(self, window_ms: float, max_items: int, metrics: Metrics) -> None:
        self.window_s = window_ms / 1000.0
        self.max_items = max_items
        self.metrics = metrics
        self.in_flight = 0  # guards running now: the most callers a batch can wait for
        self.lock = threading.Lock()
        self._wrappers: list[BatchingEmbedder | BatchingVerifier] = []
        self._verifiers: dict[str, BatchingVerifier] = {}

    @property
    def on(self) -> bool:
        return self.window_s > 0

    def _options(self, model: str) -> BatchOptions:
        observe = functools.partial(self.metrics.observe_model_batch, model)
        return BatchOptions(self.window_s, self.max_items, observe, lambda: self.in_flight)

    def embedder(self, inner: Embedder) -> Embedder:
        if not self.on:
            return inner
        batched = BatchingEmbedder(inner, self._options("embedder"))
        with self.lock:
            self._wrappers.append(batched)
        return batched

    def verifier(self, name: str, inner: Verifier) -> Verifier:
        """``inner`` micro-batched (one wrapper per name, renewed if the registry reloads)."""
        if not self.on:
            return inner
        with self.lock:
            batched = self._verifiers.get(name)
            if batched is None or batched.inner is not inner:
                batched = BatchingVerifier(inner, self._options("verifier"))
                self._verifiers[name] = batched
                self._wrappers.append(batched)
            return batched

    def enter(self) -> None:
        with self.lock:
            self.in_flight += 1

    def leave(self) -> None:
        with self.lock:
            self.in_flight -= 1

    def close(self) -> None:
        """Stop the workers (calls still queued fail as guard errors)."""
        with self.lock:
            wrappers, self._wrappers = self._wrappers, []
        for w in wrappers:
            w.close()


class Meters:
    """One :class:`CostMeter` per strong verifier name, for the life of a guard."""

    def __init__(self) -> None:
        self._meters: dict[str, CostMeter] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> CostMeter:
        with self._lock:
            return self._meters.setdefault(name, CostMeter())


@dataclass
class GuardParts:
    """What :func:`build_guard` built (see the module docstring)."""

    embedder: Embedder
    verifiers: VerifierRegistry
    indexes: TenantIndexes  # hnswlib files, or Postgres (proxy.storage.backends)
    calibrations: CalibrationCache  # verifier.threshold: calibrated
    batching: Batching
    metrics: Metrics
    # Tenant-scoped LRU of verifier outputs; stats() → logs and the metrics endpoint.
    verdict_cache: VerdictCache = field(default_factory=VerdictCache)
    # Guards waiting or running, at most `workers` at a time (proxy.serving.admission).
    queue: GuardQueue = field(default_factory=GuardQueue)
    # Tenant-scoped vectors of request-context sentences seen before (retrieval.context_cache).
    context_cache: ContextVectorCache = field(default_factory=ContextVectorCache)
    # The configured embedder itself (``embedder`` may be its micro-batching wrapper): what
    # the token alignment reads token states from (models.token_alignment).
    raw_embedder: Embedder | None = None
    # The verifier ladder's strong verifiers' cost (proxy.serving.rungs), for the guard's life.
    meters: Meters = field(default_factory=Meters)

    def verifier(self, name: str) -> Verifier:
        """The verifier ``name``, micro-batched across requests when batching is on."""
        return self.batching.verifier(name, self.verifiers.get(name))

    @property
    def token_embedder(self) -> Embedder:
        """The embedder to ask for token states: the configured one, unwrapped."""
        return self.raw_embedder if self.raw_embedder is not None else self.embedder


@dataclass(frozen=True)
class GuardInputs:
    """What a guard is assembled from (:func:`build_parts`,
    :func:`proxy.serving.guarding.assemble_guard`), made by the caller: the app's
    :class:`proxy.deps.Deps`, or :func:`guard_inputs` (the CLI, benches, tests)."""

    embedder: Embedder  # the configured one (micro-batched here when batching is on)
    verifiers: VerifierRegistry
    storage: GuardStorage  # indexes, calibration, adapters
    judge: JudgeCaller  # the LLM judge's client (proxy.upstream.judge_client)
    labels: LabelStorage | None = None  # judge.labels' sink (None: not kept)
    metrics: Metrics = field(default_factory=Metrics)


def guard_inputs(
    settings: Settings,
    *,
    embedder: Embedder | None = None,
    metrics: Metrics | None = None,
    models_dir: Path | None = None,
    storage: GuardStorage | None = None,
    labels: LabelStorage | None = None,
) -> GuardInputs:
    """The parts a guard outside the app is built from, defaults from ``settings``: the
    embedder ``settings.embedder`` names, the verifier registry over ``models_dir``
    (default: :func:`models_dir_for`), the files under ``settings.data`` (whose feedback
    then takes ``judge.labels``' labels unless ``labels`` is given), a judge client of its
    own. The app's are :class:`proxy.deps.Deps`' slots instead."""
    if storage is None:
        storage = files = EmbeddedStorage(settings.data)
        labels = labels or files
    if embedder is None:
        embedder = default_embedder(settings)
    return GuardInputs(
        embedder=embedder,
        verifiers=default_verifiers(settings, embedder, models_dir),
        storage=storage,
        judge=UpstreamJudge(),
        labels=labels,
        metrics=metrics if metrics is not None else Metrics(),
    )


def default_embedder(settings: Settings) -> Embedder:
    """The embedder ``settings.embedder`` names (loaded: heavy)."""
    from groundproxy.retrieval.embedder import load_embedder

    return load_embedder(settings.embedder, settings.cache)


def default_verifiers(
    settings: Settings, embedder: Embedder, models_dir: Path | None = None
) -> VerifierRegistry:
    """The verifier registry over the built-verifier folder; the configured embedder goes
    into the verifiers that embed (embedhead), unwrapped (they batch their own calls)."""
    folder = models_dir or models_dir_for(settings.data, settings.models_dir)
    return VerifierRegistry(folder, embedder=embedder)


def build_parts(settings: Settings, inputs: GuardInputs) -> GuardParts:
    """The guard's parts from ``inputs`` and ``settings`` (batching, queue, caches); builds
    no model, storage or client of its own."""
    metrics = inputs.metrics
    batching = Batching(settings.batch_window_ms, settings.batch_max, metrics)
    raw = inputs.embedder
    embedder = batching.embedder(raw)
    parts = GuardParts(
        embedder=embedder,
        raw_embedder=raw,
        verifiers=inputs.verifiers,
        indexes=inputs.storage.indexes(embedder),
        calibrations=inputs.storage.calibrations(),
        batching=batching,
        metrics=metrics,
        queue=GuardQueue(_workers(settings)),
        context_cache=ContextVectorCache(settings.context_cache_entries),
    )
    metrics.register_cache("verdict", functools.partial(_cache_of, parts))
    metrics.register_context_cache(parts.context_cache)
    return parts


def _cache_of(parts: GuardParts) -> VerdictCache:
    return parts.verdict_cache  # read at each scrape: a bench may swap the cache


def _workers(settings: Settings) -> int:
    """Guards running at once: the setting, else one per core — or, with micro-batching on,
    enough for a batch to form across concurrent guards."""
    if settings.guard_workers > 0:
        return settings.guard_workers
    cores = os.cpu_count() or 1
    return max(cores, settings.batch_max) if settings.batch_window_ms > 0 else cores
